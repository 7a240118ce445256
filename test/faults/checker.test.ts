/**
 * The history checker on synthetic histories: a clean one is OK on every property, and each
 * planted violation (overlapping accepted writes, a generation going down in the resource's
 * commit order, overlapping fence answers, a child writing long after its validity, a generation
 * with two holders, a lost acknowledged write, a promotion without evidence) or piece of missing
 * history (a torn line, a start without ticks, a gap in a log, no end record, the resource's table
 * missing or disagreeing with the workers) is caught with the right verdict; refused writes of a
 * host just woken from a sleep are counted, not failed.
 */
import t from 'tap';
import { check } from './checker.js';

type Rec = { [k: string]: unknown };

/**
 * A worker process: start, a write every 50 ms from `from` to `to`, then end. Writes are accepted
 * (`tw` = `t`) unless `refusedFrom` says from when the guard refuses them.
 */
function worker(
  host: string,
  pid: number,
  generation: number,
  from: number,
  to: number,
  opts: { end?: boolean; refusedFrom?: number; skip?: (t: number) => boolean } = {},
): Rec[] {
  const out: Rec[] = [{ src: 'worker', host, pid, seq: 0, generation, t: from, kind: 'start' }];
  let seq = 1;
  for (let x = from; x <= to + 1e-9; x += 0.05) {
    const t = Math.round(x * 1000) / 1000;
    if (opts.skip?.(t) === true) continue;
    const refused = opts.refusedFrom !== undefined && t >= opts.refusedFrom;
    out.push({
      src: 'worker',
      host,
      pid,
      seq: seq++,
      generation,
      t,
      kind: 'tick',
      outcome: refused ? 'refused' : 'accepted',
      tw: t,
      ...(refused ? { reason: 'stale-generation' } : {}),
    });
  }
  if (opts.end !== false) out.push({ src: 'worker', host, pid, seq: seq++, generation, t: to + 0.01, kind: 'end' });
  return out;
}

/** An agent's sampled fence answer, taken from t to t + 0.01. */
function fence(
  host: string,
  t: number,
  run: boolean,
  generation: number,
  holder: string,
  validForSeconds: number | null = run ? 5 : 0,
): Rec {
  return {
    src: 'fence',
    host,
    run,
    reason: run ? 'holder' : 'not-holder',
    generation,
    holder,
    validForSeconds,
    t0: t,
    t1: t + 0.01,
  };
}

/** The sampler asked `host` at t and got no answer (agent gone, stopped or unreachable). */
function unanswered(host: string, t: number): Rec {
  return { src: 'fence', host, run: null, error: 'no answer', t0: t, t1: t + 1 };
}

/** The fence answers of the clean failover: mbp may run g1 2–10 s, node-b g2 from 18 s. */
function answers(): Rec[] {
  const out: Rec[] = [];
  for (let t = 2; t <= 10; t++) out.push(fence('mbp', t, true, 1, 'mbp'));
  for (let t = 2; t <= 17; t++) out.push(fence('node-b', t, false, 1, 'mbp'));
  for (let t = 18; t <= 25; t++) out.push(fence('node-b', t, true, 2, 'node-b'));
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
    {
      src: 'daemon',
      name: 'mbp',
      pid: 101,
      seq: 0,
      t: 1.2,
      line: { event: 'generation-adopted', host: 'mbp', from: 0, to: 1 },
    },
    { src: 'harness', kind: 'spawn', name: 'mbp', pid: 101, t: 0 },
    { src: 'harness', kind: 'exit', name: 'mbp', pid: 101, t: 10.5 },
    ...worker('node-b', 300, 2, 18, 25),
    ...answers(),
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
        {
          id: 5,
          at: 5,
          category: 'hq.lease',
          event: 'promoted',
          host: 'node-b',
          data: { generation: 2, from: 'mbp', streak: 2 },
        },
      ],
    },
    { src: 'harness', kind: 'end', t: 30, alive: [100] },
  ];
}

/** The shared resource's table as the harness reads it at the end: every accepted write, in commit order. */
function resourceOf(rs: readonly Rec[]): Rec {
  const rows = rs
    .filter((r) => r.src === 'worker' && r.kind === 'tick' && r.outcome === 'accepted')
    .sort((a, b) => (a.tw as number) - (b.tw as number))
    .map((r, i) => ({ id: i + 1, host: r.host, pid: r.pid, seq: r.seq, generation: r.generation, t: r.tw }));
  return {
    src: 'resource',
    t: 29,
    complete: true,
    highest: rows.reduce((m, r) => Math.max(m, r.generation as number), 0),
    rows,
  };
}

/** JSONL of a history; the resource's table is derived from its accepted writes unless one is given. */
const jsonl = (rs: readonly Rec[]): string =>
  `${(rs.some((r) => r.src === 'resource') ? rs : [...rs, resourceOf(rs)]).map((r) => JSON.stringify(r)).join('\n')}\n`;

t.test('a clean failover history is OK on every property', async (t) => {
  const r = check(jsonl(clean()));
  t.equal(r.verdict, 'OK', `overall OK (${JSON.stringify([r.S1, r.S2, r.S4, r.S5])})`);
  for (const p of ['S1', 'S2', 'S3', 'S4', 'S5'] as const) t.equal(r[p].verdict, 'OK', `${p} is OK`);
  t.equal(r.runs.length, 2, 'two runs are found');
  t.equal(r.writes.refused, 0, 'no write was refused');
  t.equal(r.writes.accepted, r.writes.attempts, 'every attempt was accepted');
  t.equal(r.L1.handovers.length, 1, 'one handover is measured');
  t.ok(Math.abs(r.L1.handovers[0]! - 8) < 0.06, `the handover gap is about 8 s (${r.L1.handovers[0]})`);
});

t.test('two hosts whose accepted writes overlap by one write are an S2 violation', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  h.push(...worker('node-b', 300, 2, 10, 12));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'VIOLATION', `S2 catches a shared instant (${r.S2.detail[0]})`);
  t.match(r.S2.detail.join('\n'), /accepted writes of two hosts overlap/, 'named as overlapping accepted writes');
  t.equal(r.verdict, 'VIOLATION', 'the schedule fails');
});

t.test(
  'accepted writes interleaved with a lower generation are an S2 violation, whatever the workers said',
  async (t) => {
    // The workers' own lines are clean; the resource's table shows mbp's g1 committed after node-b's g2.
    const h = clean();
    const res = resourceOf(h);
    const rows = res.rows as Rec[];
    const firstB = rows.findIndex((x) => x.host === 'node-b');
    const [b] = rows.splice(firstB, 1);
    rows.splice(firstB - 1, 0, b!);
    rows.forEach((x, i) => {
      x.id = i + 1;
    });
    (rows[firstB - 1] as Rec).t = rows[firstB - 2]!.t; // keep the clock in commit order
    const r = check(jsonl([...h, res]));
    t.equal(r.S2.verdict, 'VIOLATION', `S2 reads the resource's commit order (${r.S2.detail.join('; ')})`);
    t.match(r.S2.detail.join('\n'), /generation went down in commit order/, 'named as a generation going down');
  },
);

t.test('two fence answers whose validities certainly overlap are an S2 violation', async (t) => {
  const h = clean();
  h.push(fence('node-b', 12, true, 2, 'node-b'));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'VIOLATION', `node-b told run 12–17 while mbp was valid until 15 (${r.S2.detail[0]})`);
  t.match(r.S2.detail.join('\n'), /two fence answers overlap/, 'named as overlapping fence answers');
});

t.test('a slow fence answer proves no overlap it does not certainly cover', async (t) => {
  const h = clean();
  // Asked at 14.0, answered at 16.0, valid for 1 s: the answer may have been given at 16.0 and end at 17.
  h.push({ ...fence('node-b', 14, true, 2, 'node-b', 1), t1: 16 });
  t.equal(check(jsonl(h)).S2.verdict, 'OK', 'only [t1, t0 + validFor] is claimed');
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
  h.push({
    src: 'daemon',
    name: 'arbiter',
    pid: 100,
    seq: 1,
    t: 3,
    line: { event: 'acquired', host: 'node-b', generation: 1 },
  });
  const r = check(jsonl(h));
  t.equal(r.S1.verdict, 'VIOLATION', `S1 reads the arbiter's log too (${r.S1.detail[0]})`);
});

t.test('an accepted write with a lower generation after a higher one is an S2 violation', async (t) => {
  const h = clean();
  h.push(...worker('mbp', 201, 1, 26, 27));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'VIOLATION', `generations going down in commit order are caught (${r.S2.detail.join('; ')})`);
  t.match(r.S2.detail.join('\n'), /went down in commit order/, 'and named so');
});

t.test('the same late writes refused by the guard are no S2 violation', async (t) => {
  const h = clean();
  h.push(...worker('mbp', 201, 1, 26, 27, { refusedFrom: 0 }));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'OK', `refused writes are not work (${r.S2.detail.join('; ')})`);
  t.equal(r.S1.verdict, 'OK', 'mbp holding g1 is consistent');
  t.equal(r.writes.refusedByHost.mbp, 21, 'the refused attempts are counted');
});

t.test('an unsupervised child writing long after its host lost the lease is an S3 violation', async (t) => {
  // mbp's worker keeps going after mbp's last fence answer (valid until 15.01): its writes are
  // accepted until node-b's g2 lands at 18, then refused — S2 holds, S3 does not.
  // The sampler kept asking mbp's agent (dead from 10.5) and got no answer.
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'mbp'));
  h.push(...worker('mbp', 200, 1, 2, 25, { refusedFrom: 18 }));
  for (let x = 11; x <= 26; x += 0.5) h.push(unanswered('mbp', x));
  const r = check(jsonl(h));
  t.equal(r.S2.verdict, 'OK', `the guard kept the work exclusive (${r.S2.detail.join('; ')})`);
  t.equal(r.S3.verdict, 'VIOLATION', `S3 catches the child that outlived its validity (${r.S3.detail[0]})`);
  t.ok(
    r.writes.refused > 0 && r.writes.pastValidity > 0,
    `attempts past validity are counted (${JSON.stringify(r.writes)})`,
  );
  // The same with answers that say "not holder": still a violation.
  const told = clean().filter((r) => !(r.src === 'worker' && r.host === 'mbp'));
  told.push(...worker('mbp', 200, 1, 2, 25, { refusedFrom: 18 }));
  for (let x = 11; x <= 26; x++) told.push(fence('mbp', x, false, 1, 'mbp'));
  t.equal(check(jsonl(told)).S3.verdict, 'VIOLATION', 'answers of run: false after the validity leave no doubt');
});

t.test(
  'writes past the sampled validity while the sampler did not ask the host are UNKNOWN, not a violation (#306 of seed 9100)',
  async (t) => {
    // The harness starved: mbp sampled valid until 10 (+5 s), then nothing until 19.5, then valid
    // again; mbp's worker wrote all along. The history cannot say whether mbp was valid at 17–19.
    const h = clean().filter(
      (r) => !(r.src === 'worker' && r.host === 'mbp') && !(r.src === 'fence' && r.host === 'mbp'),
    );
    for (let x = 2; x <= 10; x += 0.5) h.push(fence('mbp', x, true, 1, 'mbp'));
    for (let x = 19.5; x <= 25; x += 0.5) h.push(fence('mbp', x, true, 1, 'mbp'));
    h.push(
      ...worker('mbp', 200, 1, 2, 10).filter((r) => r.kind !== 'end'),
      ...worker('mbp', 200, 1, 10.05, 25)
        .filter((r) => r.kind !== 'start')
        .map((r, i) => ({ ...r, seq: 162 + i })),
    );
    const h2 = h.filter(
      (r) => !(r.src === 'worker' && r.host === 'node-b') && !(r.src === 'fence' && r.host === 'node-b'),
    );
    for (let x = 2; x <= 25; x += 0.5) h2.push(fence('node-b', x, false, 1, 'mbp'));
    const r = check(jsonl(h2.filter((r) => r.src !== 'events')));
    t.equal(r.S3.verdict, 'UNKNOWN', `a gap in the sampling is no evidence of a lost lease (${r.S3.detail[0]})`);
    t.match(r.S3.detail[0] ?? '', /did not ask mbp from 10\.000 to 19\.500/, 'the detail names the gap');
    t.ok(r.writes.pastValidity > 0, 'the writes past the sampled validity are still counted');
    // With the gap filled by unanswered questions (an agent that was gone), the same writes are a violation.
    for (let x = 10.5; x < 19.5; x += 0.5) h2.push(unanswered('mbp', x));
    t.equal(
      check(jsonl(h2.filter((r) => r.src !== 'events'))).S3.verdict,
      'VIOLATION',
      'asked and unanswered is evidence',
    );
  },
);

t.test("a host's refused writes right after waking from a sleep fault are counted, not failed", async (t) => {
  // mbp sleeps 10.2–20 with its worker; node-b is promoted and writes g2 from 18; mbp's worker
  // wakes with g1, its two writes are refused, then its supervisor stops it.
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'mbp'));
  h.push(...worker('mbp', 200, 1, 2, 20.05, { refusedFrom: 20, skip: (x) => x > 10.15 && x < 20 }));
  h.push(
    { src: 'harness', kind: 'asleep', host: 'mbp', t: 10.2 },
    { src: 'harness', kind: 'woken', host: 'mbp', t: 20 },
  );
  const r = check(jsonl(h));
  t.equal(r.verdict, 'OK', `every property is OK (${JSON.stringify([r.S1, r.S2, r.S3])})`);
  t.equal(r.writes.refusedByHost.mbp, 2, 'the two writes after the wake were refused');
  t.equal(r.writes.pastValidityAfterWake, 2, 'and counted as past validity, excused by the sleep');
  const late = clean().filter((r) => !(r.src === 'worker' && r.host === 'mbp'));
  late.push(...worker('mbp', 200, 1, 2, 24, { refusedFrom: 20, skip: (x) => x > 10.15 && x < 20 }));
  late.push(
    { src: 'harness', kind: 'asleep', host: 'mbp', t: 10.2 },
    { src: 'harness', kind: 'woken', host: 'mbp', t: 20 },
  );
  for (let x = 10.5; x < 20; x += 0.5) late.push(unanswered('mbp', x)); // asleep: asked, no answer
  for (let x = 20; x <= 25; x += 0.5) late.push(fence('mbp', x, false, 2, 'node-b')); // awake: told not to run
  t.equal(check(jsonl(late)).S3.verdict, 'VIOLATION', 'a woken child its supervisor never stops is still caught');
});

t.test("the resource's table is required and must agree with the workers", async (t) => {
  const h = clean();
  t.equal(
    check(jsonl([...h, { src: 'resource', t: 29, complete: false, error: 'SQLITE_CANTOPEN' }])).S2.verdict,
    'UNKNOWN',
    'an unread table is UNKNOWN',
  );
  const missing = resourceOf(h);
  (missing.rows as Rec[]).splice(40, 1);
  t.equal(
    check(jsonl([...h, missing])).S2.verdict,
    'UNKNOWN',
    'a write the worker calls accepted but the table lacks is UNKNOWN',
  );
  const extra = clean().filter((r) => !(r.src === 'worker' && r.pid === 300 && r.kind === 'tick' && r.seq === 50));
  const res = resourceOf(h);
  t.equal(
    check(jsonl([...extra, res])).S2.verdict,
    'UNKNOWN',
    'a row in the middle of a worker the worker never mentions is UNKNOWN',
  );
  const mark = resourceOf(h);
  mark.highest = 3;
  t.equal(check(jsonl([...h, mark])).S2.verdict, 'UNKNOWN', "the guard's mark must be the highest accepted generation");
});

t.test('a worker killed between its commit and its line leaves one row the history may lack', async (t) => {
  const h = clean().filter((r) => !(r.src === 'worker' && r.host === 'node-b'));
  const w = worker('node-b', 300, 2, 18, 25, { end: false });
  h.push(...w);
  const res = resourceOf(h);
  const last = w[w.length - 1]!;
  (res.rows as Rec[]).push({
    id: (res.rows as Rec[]).length + 1,
    host: 'node-b',
    pid: 300,
    seq: (last.seq as number) + 1,
    generation: 2,
    t: 25.05,
  });
  t.equal(check(jsonl([...h, res])).S2.verdict, 'OK', 'the last write of a killed worker is taken from the table');
});

t.test('a tick that does not say what became of its write is UNKNOWN', async (t) => {
  const h = clean();
  h.push(
    { src: 'worker', host: 'mbp', pid: 600, seq: 0, generation: 1, t: 9, kind: 'start' },
    { src: 'worker', host: 'mbp', pid: 600, seq: 1, generation: 1, t: 9.05, kind: 'tick' },
  );
  t.equal(check(jsonl(h)).S2.verdict, 'UNKNOWN', 'a tick without an outcome proves nothing');
});

t.test('writes by a host whose fence answers were never sampled are UNKNOWN for S3', async (t) => {
  const h = clean().filter((r) => !(r.src === 'fence' && r.host === 'mbp'));
  t.equal(check(jsonl(h)).S3.verdict, 'UNKNOWN', "without mbp's answers its validity is unknown");
});

t.test('the arbiter granting a used generation to another host is an S1 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[]).push({
    id: 6,
    at: 6,
    category: 'hq.lease',
    event: 'acquired',
    host: 'mbp',
    data: { generation: 2 },
  });
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
  h.push(
    { src: 'harness', kind: 'spawn', name: 'arbiter', pid: 110, t: 28 },
    { src: 'harness', kind: 'exit', name: 'arbiter', pid: 100, t: 27.9 },
  );
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
  (ev.events as Rec[])[4] = {
    id: 5,
    at: 5,
    category: 'hq.lease',
    event: 'promoted',
    host: 'node-c',
    data: { generation: 2, from: 'mbp', streak: 2 },
  };
  t.equal(check(jsonl(h)).S5.verdict, 'VIOLATION', 'the promotee must be the one the checks named');
});

t.test('a promotion by transfer the harness never asked for is an S5 violation', async (t) => {
  const h = clean();
  const ev = h.find((r) => r.src === 'events')!;
  (ev.events as Rec[]).push({
    id: 6,
    at: 6,
    category: 'hq.lease',
    event: 'promoted',
    host: 'mbp',
    data: { generation: 3, from: 'node-b', via: 'transfer' },
  });
  t.equal(check(jsonl(h)).S5.verdict, 'VIOLATION', 'an unasked transfer is caught');
  h.push({ src: 'client', op: 'transfer', host: 'mbp', status: 200, generation: 3, revision: 20, t0: 5, t1: 5.1 });
  t.not(check(jsonl(h)).S5.verdict, 'VIOLATION', 'an asked-for transfer is fine');
});

t.test('a truncated JSONL line makes every property UNKNOWN', async (t) => {
  const text = jsonl(clean());
  const torn = text.slice(0, text.length - 30);
  const r = check(torn);
  t.equal(r.verdict, 'UNKNOWN', 'a torn history fails the run as UNKNOWN');
  for (const p of ['S1', 'S2', 'S3', 'S4', 'S5'] as const) t.equal(r[p].verdict, 'UNKNOWN', `${p} is UNKNOWN`);
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
  h.push(
    { src: 'worker', host: 'mbp', pid: 500, seq: 0, generation: null, t: 28, kind: 'start' },
    {
      src: 'worker',
      host: 'mbp',
      pid: 500,
      seq: 1,
      generation: null,
      t: 28.05,
      kind: 'tick',
      outcome: 'refused',
      tw: 28.05,
      reason: 'bad-generation',
    },
  );
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
  h.push({
    src: 'fence',
    host: 'node-b',
    run: false,
    reason: 'not-holder',
    generation: 2,
    holder: 'mbp',
    t0: 20,
    t1: 20.01,
  });
  t.equal(check(jsonl(h)).S1.verdict, 'VIOLATION', 'g2 held by node-b, but an answer names mbp');
  const ok = clean();
  ok.push({
    src: 'fence',
    host: 'mbp',
    run: false,
    reason: 'not-holder',
    generation: 2,
    holder: 'node-b',
    t0: 20,
    t1: 20.01,
  });
  t.equal(check(jsonl(ok)).S1.verdict, 'OK', 'a consistent answer is fine');
});

t.test('an agent adopting a lower generation than before is an S1 violation', async (t) => {
  const h = clean();
  h.push({
    src: 'daemon',
    name: 'mbp',
    pid: 101,
    seq: 1,
    t: 9,
    line: { event: 'generation-adopted', host: 'mbp', from: 1, to: 1 },
  });
  t.equal(check(jsonl(h)).S1.verdict, 'VIOLATION', 'adopted generations strictly rise');
});
