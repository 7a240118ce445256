/**
 * The history checker on synthetic histories: a clean one is OK on every property, and each
 * planted violation (overlap, a generation with two holders, a generation going down, a lost
 * acknowledged write, a promotion without evidence) or piece of missing history (a torn line,
 * a start without ticks, a gap in a log, no end record) is caught with the right verdict.
 */
import t from 'tap';
import { check } from './checker.js';

type Rec = { [k: string]: unknown };

/** A worker process: start, ticks every 50 ms from `from` to `to`, then end. */
function worker(host: string, pid: number, generation: number, from: number, to: number, opts: { end?: boolean } = {}): Rec[] {
  const out: Rec[] = [{ src: 'worker', host, pid, seq: 0, generation, t: from, kind: 'start' }];
  let seq = 1;
  for (let x = from; x <= to + 1e-9; x += 0.05) out.push({ src: 'worker', host, pid, seq: seq++, generation, t: Math.round(x * 1000) / 1000, kind: 'tick' });
  if (opts.end !== false) out.push({ src: 'worker', host, pid, seq: seq++, generation, t: to + 0.01, kind: 'end' });
  return out;
}

function check_(host: string, id: number, streak: number, promotee: string | null, ping = false, health = false): Rec {
  return { id, at: id, category: 'control', event: 'arbiter-check', host, data: { streak, ping, health, promotee } };
}

/** A clean failover: mbp runs g1, dies, two dual-unreachable checks, node-b promoted to g2 and runs later. */
function clean(): Rec[] {
  return [
    { src: 'harness', kind: 'config', hosts: ['mbp', 'node-b'], promoteAfterChecks: 2 },
    { src: 'harness', kind: 'spawn', name: 'arbiter', pid: 100, t: 0 },
    { src: 'daemon', name: 'arbiter', pid: 100, seq: 0, t: 0.5, line: { msg: 'listening' } },
    { src: 'client', op: 'acquire', host: 'mbp', status: 200, generation: 1, revision: 1, t0: 1, t1: 1.1 },
    ...worker('mbp', 200, 1, 2, 10),
    { src: 'daemon', name: 'mbp', pid: 101, seq: 0, t: 1.2, line: { event: 'generation-adopted', host: 'mbp', from: 0, to: 1 } },
    { src: 'harness', kind: 'spawn', name: 'mbp', pid: 101, t: 0 },
    { src: 'harness', kind: 'exit', name: 'mbp', pid: 101, t: 10.5 },
    ...worker('node-b', 300, 2, 18, 25),
    { src: 'read', generation: 2, revision: 9, t0: 26, t1: 26.1 },
    {
      src: 'events',
      t: 27,
      complete: true,
      events: [
        { id: 1, at: 1, category: 'hq.lease', event: 'acquired', host: 'mbp', data: { generation: 1 } },
        check_('mbp', 2, 0, null, true, true),
        check_('mbp', 3, 1, 'node-b'),
        check_('mbp', 4, 2, 'node-b'),
        { id: 5, at: 5, category: 'hq.lease', event: 'promoted', host: 'node-b', data: { generation: 2, from: 'mbp', streak: 2 } },
      ],
    },
    { src: 'harness', kind: 'end', t: 30, alive: [100] },
  ];
}

const jsonl = (rs: readonly Rec[]): string => rs.map((r) => JSON.stringify(r)).join('\n') + '\n';

t.test('a clean failover history is OK on every property', async (t) => {
  const r = check(jsonl(clean()));
  t.equal(r.verdict, 'OK', `overall OK (${JSON.stringify([r.S1, r.S2, r.S4, r.S5])})`);
  for (const p of ['S1', 'S2', 'S4', 'S5'] as const) t.equal(r[p].verdict, 'OK', `${p} is OK`);
  t.equal(r.runs.length, 2, 'two runs are found');
  t.equal(r.L1.handovers.length, 1, 'one handover is measured');
  t.ok(Math.abs(r.L1.handovers[0]! - 8) < 0.06, `the handover gap is about 8 s (${r.L1.handovers[0]})`);
});

t.test('two hosts whose runs overlap by one tick are an S2 violation', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  h.push(...worker('node-b', 300, 2, 10, 12));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'VIOLATION', `S2 catches a shared instant (${r.S2.detail[0]})`);
  t.equal(r.verdict, 'VIOLATION', 'the schedule fails');
});

t.test('an overlap of a few milliseconds is still a violation (zero tolerance)', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  h.push(...worker('node-b', 300, 2, 9.999, 12));
  t.equal(check(jsonl(h)).S2.verdict, 'VIOLATION', 'a 1 ms overlap is caught');
});

t.test('the same host running twice at once is not an S2 violation', async (t) => {
  const h = clean();
  h.splice(4, 0, ...worker('mbp', 201, 1, 3, 4));
  t.equal(check(jsonl(h)).S2.verdict, 'OK', 'S2 is about two hosts');
});

t.test('a generation run by two hosts is an S1 violation', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  h.push(...worker('node-b', 300, 1, 18, 25));
  const r = check(jsonl(h));
  t.equal(r.S1.verdict, 'VIOLATION', `S1 catches two holders of g1 (${r.S1.detail[0]})`);
});

t.test('an arbiter log line that names a second holder for a generation is an S1 violation', async (t) => {
  const h = clean();
  h.push({ src: 'daemon', name: 'arbiter', pid: 100, seq: 1, t: 3, line: { event: 'acquired', host: 'node-b', generation: 1 } });
  const r = check(jsonl(h));
  t.equal(r.S1.verdict, 'VIOLATION', `S1 reads the arbiter's log too (${r.S1.detail[0]})`);
});

t.test('a worker running with a lower generation after a higher one is an S1 violation', async (t) => {
  const h = clean();
  h.push(...worker('mbp', 201, 1, 26, 27));
  const r = check(jsonl(h));
  t.equal(r.S1.verdict, 'VIOLATION', `generations going down are caught (${r.S1.detail.join('; ')})`);
});

t.test('the arbiter granting a used generation to another host is an S1 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[]).push({ id: 6, at: 6, category: 'hq.lease', event: 'acquired', host: 'mbp', data: { generation: 2 } });
  t.equal(check(jsonl(h)).S1.verdict, 'VIOLATION', 'a reused generation is caught in the event log');
});

t.test('a read below an acknowledged write is an S4 violation', async (t) => {
  const h = clean();
  h.push({ src: 'client', op: 'renew', host: 'node-b', status: 200, generation: 2, revision: 12, t0: 25, t1: 25.2 });
  const r = check(jsonl(h));
  t.equal(r.S4.verdict, 'VIOLATION', `the read of r9 after an ack of r12 is a lost write (${r.S4.detail[0]})`);
});

t.test('a read sent before the acknowledgement arrived proves nothing either way', async (t) => {
  const h = clean();
  h.push({ src: 'client', op: 'renew', host: 'node-b', status: 200, generation: 2, revision: 12, t0: 25.9, t1: 26.2 });
  t.equal(check(jsonl(h)).S4.verdict, 'OK', 'a concurrent read is not compared');
});

t.test('an arbiter restart without a later read is UNKNOWN for S4', async (t) => {
  const h = clean();
  h.push({ src: 'harness', kind: 'spawn', name: 'arbiter', pid: 110, t: 28 }, { src: 'harness', kind: 'exit', name: 'arbiter', pid: 100, t: 27.9 });
  const r = check(jsonl(h));
  t.equal(r.S4.verdict, 'UNKNOWN', `S4 needs a read after every restart (${r.S4.detail[0]})`);
});

t.test('no acknowledged write at all is UNKNOWN for S4', async (t) => {
  const h = clean().filter((r) => r.src !== 'client');
  t.equal(check(jsonl(h)).S4.verdict, 'UNKNOWN', 'S4 cannot be shown without acks');
});

t.test('a promotion with one check too few is an S5 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  ev.events = (ev.events as Rec[]).filter((e) => e.id !== 3);
  const r = check(jsonl(h));
  t.equal(r.S5.verdict, 'VIOLATION', `S5 wants promoteAfterChecks checks (${r.S5.detail[0]})`);
});

t.test('a promotion after a check that reached the holder is an S5 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[])[2] = check_('mbp', 3, 1, 'node-b', false, true);
  t.equal(check(jsonl(h)).S5.verdict, 'VIOLATION', 'a healthy holder is no evidence');
});

t.test('a promotion of another host than the checks named is an S5 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[])[4] = { id: 5, at: 5, category: 'hq.lease', event: 'promoted', host: 'node-c', data: { generation: 2, from: 'mbp', streak: 2 } };
  t.equal(check(jsonl(h)).S5.verdict, 'VIOLATION', 'the promotee must be the one the checks named');
});

t.test('a promotion by transfer the harness never asked for is an S5 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[]).push({ id: 6, at: 6, category: 'hq.lease', event: 'promoted', host: 'mbp', data: { generation: 3, from: 'node-b', via: 'transfer' } });
  t.equal(check(jsonl(h)).S5.verdict, 'VIOLATION', 'an unasked transfer is caught');
  h.push({ src: 'client', op: 'transfer', host: 'mbp', status: 200, generation: 3, revision: 20, t0: 5, t1: 5.1 });
  t.not(check(jsonl(h)).S5.verdict, 'VIOLATION', 'an asked-for transfer is fine');
});

t.test('a truncated JSONL line makes every property UNKNOWN', async (t) => {
  const text = jsonl(clean());
  const torn = text.slice(0, text.length - 30);
  const r = check(torn);
  t.equal(r.verdict, 'UNKNOWN', 'a torn history fails the run as UNKNOWN');
  for (const p of ['S1', 'S2', 'S4', 'S5'] as const) t.equal(r[p].verdict, 'UNKNOWN', `${p} is UNKNOWN`);
});

t.test('a worker with a start and no ticks is UNKNOWN', async (t) => {
  const h = clean();
  h.push({ src: 'worker', host: 'node-b', pid: 400, seq: 0, generation: 2, t: 26, kind: 'start' });
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'UNKNOWN', `S2 cannot vouch for a worker whose ticks are missing (${r.S2.detail[0]})`);
});

t.test('a worker history with a missing line is UNKNOWN', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.pid === 200 && r.seq === 50));
  t.equal(check(jsonl(h)).S2.verdict, 'UNKNOWN', 'a seq gap is torn history');
});

t.test('a gap in a daemon log is UNKNOWN', async (t) => {
  const h = clean();
  h.push({ src: 'daemon', name: 'arbiter', pid: 100, seq: 2, t: 3, line: { msg: 'x' } });
  t.equal(check(jsonl(h)).S1.verdict, 'UNKNOWN', 'line 1 of the arbiter log is missing');
});

t.test('a history without its end record is UNKNOWN', async (t) => {
  const h = clean().filter((r) => r.kind !== 'end');
  t.equal(check(jsonl(h)).verdict, 'UNKNOWN', 'an unfinished history proves nothing');
});

t.test("a history without the arbiter's event log is UNKNOWN for S5", async (t) => {
  const h = clean().filter((r) => r.src !== 'events');
  t.equal(check(jsonl(h)).S5.verdict, 'UNKNOWN', 'no events, no evidence either way');
});

t.test('a worker that ticks without a generation is UNKNOWN', async (t) => {
  const h = clean();
  h.push({ src: 'worker', host: 'mbp', pid: 500, seq: 0, generation: null, t: 28, kind: 'start' }, { src: 'worker', host: 'mbp', pid: 500, seq: 1, generation: null, t: 28.05, kind: 'tick' });
  t.equal(check(jsonl(h)).S2.verdict, 'UNKNOWN', 'HQ_GENERATION must be set');
});

t.test('a violation stands even when other parts of the history are missing', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  h.push(...worker('node-b', 300, 2, 10, 12));
  h.push({ src: 'worker', host: 'node-b', pid: 400, seq: 0, generation: 2, t: 26, kind: 'start' });
  t.equal(check(jsonl(h)).S2.verdict, 'VIOLATION', 'a proven overlap is not downgraded to UNKNOWN');
});

t.test('an agent fence answer naming another holder for a used generation is an S1 violation', async (t) => {
  const h = clean();
  h.push({ src: 'fence', host: 'node-b', run: false, reason: 'not-holder', generation: 2, holder: 'mbp', t0: 20, t1: 20.01 });
  t.equal(check(jsonl(h)).S1.verdict, 'VIOLATION', 'g2 held by node-b, but an answer names mbp');
  const ok = clean();
  ok.push({ src: 'fence', host: 'mbp', run: false, reason: 'not-holder', generation: 2, holder: 'node-b', t0: 20, t1: 20.01 });
  t.equal(check(jsonl(ok)).S1.verdict, 'OK', 'a consistent answer is fine');
});

t.test('an agent adopting a lower generation than before is an S1 violation', async (t) => {
  const h = clean();
  h.push({ src: 'daemon', name: 'mbp', pid: 101, seq: 1, t: 9, line: { event: 'generation-adopted', host: 'mbp', from: 1, to: 1 } });
  t.equal(check(jsonl(h)).S1.verdict, 'VIOLATION', 'adopted generations strictly rise');
});
