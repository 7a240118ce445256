/**
 * The history checker of the fault harness (issue 5): it reads one schedule's recorded history
 * — JSONL lines from the fenced workers, the daemons (stamped by the harness as they arrive),
 * the harness's own client and the arbiter's event log — and answers, per safety property,
 * OK, VIOLATION or UNKNOWN. Every time `t` is seconds of CLOCK_MONOTONIC
 * (`process.hrtime.bigint()`), one clock for every process on the machine, namespaces included.
 *
 * Missing or torn history is never read as "nothing happened": it makes the verdict UNKNOWN,
 * and an UNKNOWN fails the run just like a VIOLATION.
 *
 * Record kinds (one JSON object per line, `src` says who wrote it):
 * - `{src:"harness", kind:"config", hosts, promoteAfterChecks}` — first line, required;
 * - `{src:"harness", kind:"spawn"|"exit", name, pid, t}` — daemon lives;
 * - `{src:"harness", kind:"fault", fault, target, start, end}` — informational;
 * - `{src:"harness", kind:"end", t}` — the history is complete (last line, required);
 * - `{src:"worker", host, pid, seq, generation, t, kind:"start"|"tick"|"end"}`;
 * - `{src:"daemon", name, pid, seq, t, line}` — one stdout/stderr line of a daemon (`line` parsed
 *   JSON when it was JSON);
 * - `{src:"client", op, host, status, generation, revision, t0, t1}` — a CAS the harness sent
 *   (t0 sent, t1 answered);
 * - `{src:"read", generation, revision, t0, t1}` — a `GET /v1/lease` by the harness;
 * - `{src:"fence", host, run, reason, generation, holder, t0, t1}` — an agent's fence answer;
 * - `{src:"events", t, complete, events:[{id, at, category, event, host, data}]}` — the arbiter's log.
 */

export type Verdict = 'OK' | 'VIOLATION' | 'UNKNOWN';

export interface PropertyResult {
  readonly verdict: Verdict;
  /** Why: the first violation or the missing piece; empty when OK. */
  readonly detail: string[];
}

export interface Report {
  readonly S1: PropertyResult;
  readonly S2: PropertyResult;
  readonly S4: PropertyResult;
  readonly S5: PropertyResult;
  /** L1 as figures: every change of the working host, the gap between the last tick of one
   * host and the first tick of the next (seconds). */
  readonly L1: { readonly handovers: number[]; readonly longestGap: number | null };
  readonly runs: readonly Run[];
  /** OK only when every property is OK. */
  readonly verdict: Verdict;
}

/** One worker process's ticks with one generation. */
export interface Run {
  readonly host: string;
  readonly pid: number;
  readonly generation: number;
  readonly first: number;
  readonly last: number;
  readonly ticks: number;
}

interface WorkerLine {
  host: string;
  pid: number;
  seq: number;
  generation: number | null;
  t: number;
  kind: 'start' | 'tick' | 'end';
}

interface ArbiterEvent {
  id: number;
  at: number;
  category: string;
  event: string;
  host: string | null;
  data: { [k: string]: unknown };
}

/** Events whose `host` holds `generation` (an agent's or the arbiter's word on a grant). */
const HOLDER_EVENTS = new Set(['acquired', 'promoted', 'renewed']);

type Obj = { [k: string]: unknown };

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

class Collector {
  private readonly problems = new Map<string, { unknown: string[]; violation: string[] }>();
  constructor(names: readonly string[]) {
    for (const n of names) this.problems.set(n, { unknown: [], violation: [] });
  }
  unknown(props: readonly string[], why: string): void {
    for (const p of props) this.problems.get(p)?.unknown.push(why);
  }
  violation(prop: string, why: string): void {
    this.problems.get(prop)?.violation.push(why);
  }
  result(prop: string): PropertyResult {
    const p = this.problems.get(prop) ?? { unknown: [], violation: [] };
    // A proven violation stands even when other parts of the history are missing.
    if (p.violation.length > 0) return { verdict: 'VIOLATION', detail: p.violation.slice(0, 10) };
    if (p.unknown.length > 0) return { verdict: 'UNKNOWN', detail: p.unknown.slice(0, 10) };
    return { verdict: 'OK', detail: [] };
  }
}

const ALL = ['S1', 'S2', 'S4', 'S5'] as const;

/** Checks one schedule's history, given as its JSONL text (or lines). */
export function check(history: string | readonly string[]): Report {
  const lines = typeof history === 'string' ? history.split('\n') : history;
  const c = new Collector(ALL);
  const records: Obj[] = [];
  lines.forEach((raw, i) => {
    if (raw.trim() === '') return;
    try {
      const v: unknown = JSON.parse(raw);
      if (!isObj(v) || typeof v.src !== 'string') throw new Error('not a record');
      records.push(v);
    } catch {
      c.unknown(ALL, `line ${i + 1} is torn or not a record: ${JSON.stringify(raw.slice(0, 80))}`);
    }
  });

  const config = records.find((r) => r.src === 'harness' && r.kind === 'config');
  if (config === undefined) c.unknown(ALL, 'the history has no config header');
  const promoteAfterChecks = num(config?.promoteAfterChecks) ?? 2;
  const end = records.find((r) => r.src === 'harness' && r.kind === 'end');
  if (end === undefined) c.unknown(ALL, 'the history has no end record (the harness did not finish it)');

  // ---- workers: sequence numbers contiguous per process, a start is followed by ticks
  const workers = new Map<number, WorkerLine[]>();
  for (const r of records) {
    if (r.src !== 'worker') continue;
    const host = str(r.host);
    const pid = num(r.pid);
    const seq = num(r.seq);
    const t = num(r.t);
    const kind = r.kind;
    if (host === null || pid === null || seq === null || t === null || (kind !== 'start' && kind !== 'tick' && kind !== 'end')) {
      c.unknown(['S1', 'S2'], `a worker record lacks host/pid/seq/t/kind: ${JSON.stringify(r).slice(0, 120)}`);
      continue;
    }
    const g = r.generation;
    const generation = typeof g === 'number' && Number.isSafeInteger(g) && g > 0 ? g : null;
    const list = workers.get(pid) ?? [];
    list.push({ host, pid, seq, generation, t, kind });
    workers.set(pid, list);
  }
  const ticks: WorkerLine[] = [];
  const runs: Run[] = [];
  for (const [pid, list] of workers) {
    list.sort((a, b) => a.seq - b.seq);
    list.forEach((w, i) => {
      if (w.seq !== i) c.unknown(['S1', 'S2'], `worker ${pid} has a gap in its history before seq ${w.seq} (expected ${i})`);
    });
    if (list[0]?.kind !== 'start') c.unknown(['S1', 'S2'], `worker ${pid} has no start record`);
    if (!list.some((w) => w.kind === 'tick')) c.unknown(['S1', 'S2'], `worker ${pid} started but never ticked (torn history)`);
    if (new Set(list.map((w) => w.host)).size > 1) c.unknown(['S1', 'S2'], `worker ${pid} reports more than one host`);
    const byGen = new Map<number, WorkerLine[]>();
    for (const w of list) {
      if (w.kind !== 'tick') continue;
      if (w.generation === null) {
        c.unknown(['S1', 'S2'], `worker ${pid} ticked without a valid HQ_GENERATION`);
        continue;
      }
      ticks.push(w);
      const l = byGen.get(w.generation) ?? [];
      l.push(w);
      byGen.set(w.generation, l);
    }
    for (const [generation, l] of byGen) {
      const ts = l.map((w) => w.t);
      runs.push({ host: l[0]!.host, pid, generation, first: Math.min(...ts), last: Math.max(...ts), ticks: l.length });
    }
  }
  runs.sort((a, b) => a.first - b.first);

  // ---- S2: runs of different hosts never overlap (closed intervals, zero tolerance)
  for (let i = 0; i < runs.length; i++) {
    for (let j = i + 1; j < runs.length; j++) {
      const a = runs[i]!;
      const b = runs[j]!;
      if (b.first > a.last) continue;
      if (a.host === b.host) continue;
      c.violation('S2', `${a.host} (pid ${a.pid}, g${a.generation}) ran ${a.first.toFixed(3)}–${a.last.toFixed(3)} and ${b.host} (pid ${b.pid}, g${b.generation}) ran ${b.first.toFixed(3)}–${b.last.toFixed(3)}`);
    }
  }

  // ---- S1: one holder per generation; the generations workers run with never go down
  const holders = new Map<number, Map<string, string>>();
  const claim = (generation: number, host: string, who: string): void => {
    const m = holders.get(generation) ?? new Map<string, string>();
    if (!m.has(host)) m.set(host, who);
    holders.set(generation, m);
  };
  for (const r of runs) claim(r.generation, r.host, `worker ${r.pid}`);
  const sortedTicks = [...ticks].sort((a, b) => a.t - b.t);
  let highest: WorkerLine | null = null;
  for (const w of sortedTicks) {
    if (highest !== null && w.generation! < highest.generation!) {
      c.violation('S1', `${w.host} ran with g${w.generation} at ${w.t.toFixed(3)} after ${highest.host} ran with g${highest.generation} at ${highest.t.toFixed(3)}`);
      break;
    }
    if (highest === null || w.generation! > highest.generation!) highest = w;
  }

  // daemons: numbered lines per life, every spawn has an exit or the end record names it alive
  const lives = new Map<number, { name: string; seqs: number[] }>();
  const adopted = new Map<string, number>();
  // What the agents answered on their fence sockets: each answer names the holder of its generation.
  for (const r of records) {
    if (r.src !== 'fence') continue;
    const g = num(r.generation);
    const h = str(r.holder);
    if (g !== null && g > 0 && h !== null) claim(g, h, `${String(r.host)}'s fence answer at ${(num(r.t1) ?? 0).toFixed(3)}`);
  }
  for (const r of records) {
    if (r.src !== 'daemon') continue;
    const pid = num(r.pid);
    const seq = num(r.seq);
    const name = str(r.name);
    if (pid === null || seq === null || name === null) {
      c.unknown(['S1'], `a daemon record lacks name/pid/seq: ${JSON.stringify(r).slice(0, 120)}`);
      continue;
    }
    const l = lives.get(pid) ?? { name, seqs: [] };
    l.seqs.push(seq);
    lives.set(pid, l);
    const line = r.line;
    if (isObj(line) && line.event === 'generation-adopted') {
      const to = num(line.to) ?? (isObj(line.data) ? num(line.data.to) : null);
      const prev = adopted.get(name);
      if (to !== null && prev !== undefined && to <= prev) c.violation('S1', `${name} adopted g${to} after it had adopted g${prev}`);
      if (to !== null) adopted.set(name, Math.max(to, prev ?? 0));
    }
    // Only the arbiter's own log names holders (an agent's log lines carry the agent's host).
    if (name === 'arbiter' && isObj(line) && typeof line.event === 'string' && HOLDER_EVENTS.has(line.event)) {
      const data = isObj(line.data) ? line.data : {};
      const g = num(line.generation) ?? num(data.generation);
      const h = str(line.host);
      if (g !== null && h !== null) claim(g, h, `${name} log (${line.event})`);
    }
  }
  for (const [pid, l] of lives) {
    l.seqs.sort((a, b) => a - b);
    l.seqs.forEach((s, i) => {
      if (s !== i) c.unknown(['S1'], `daemon ${l.name} (pid ${pid}) log has a gap before line ${s}`);
    });
  }
  const alive = new Set(Array.isArray(end?.alive) ? (end.alive as unknown[]).filter((p): p is number => typeof p === 'number') : []);
  const exited = new Set(records.filter((r) => r.src === 'harness' && r.kind === 'exit').map((r) => num(r.pid)));
  for (const r of records) {
    if (r.src !== 'harness' || r.kind !== 'spawn') continue;
    const pid = num(r.pid);
    if (pid !== null && !exited.has(pid) && !alive.has(pid) && end !== undefined) {
      c.unknown(['S1', 'S4'], `daemon ${String(r.name)} (pid ${pid}) has neither an exit record nor is it alive at the end`);
    }
  }

  // arbiter events
  const eventsRec = records.find((r) => r.src === 'events');
  let events: ArbiterEvent[] = [];
  if (eventsRec === undefined || !Array.isArray(eventsRec.events)) {
    c.unknown(['S1', 'S5'], "the arbiter's event log was not recorded");
  } else {
    if (eventsRec.complete !== true) c.unknown(['S1', 'S5'], "the arbiter's event log was read only in part");
    for (const e of eventsRec.events as unknown[]) {
      if (!isObj(e) || num(e.id) === null || typeof e.event !== 'string') {
        c.unknown(['S1', 'S5'], `an arbiter event is malformed: ${JSON.stringify(e).slice(0, 120)}`);
        continue;
      }
      events.push({ id: num(e.id)!, at: num(e.at) ?? 0, category: str(e.category) ?? '', event: e.event, host: str(e.host), data: isObj(e.data) ? e.data : {} });
    }
    events = events.sort((a, b) => a.id - b.id);
  }
  let lastGrant: { generation: number; host: string } | null = null;
  for (const e of events) {
    if (e.event !== 'acquired' && e.event !== 'promoted') continue;
    const g = num(e.data.generation);
    if (g === null || e.host === null) continue;
    claim(g, e.host, `arbiter event ${e.id} (${e.event})`);
    if (lastGrant !== null && e.host !== lastGrant.host && g <= lastGrant.generation) {
      c.violation('S1', `arbiter event ${e.id} grants ${e.host} g${g} after ${lastGrant.host} held g${lastGrant.generation}`);
    }
    if (lastGrant === null || g >= lastGrant.generation) lastGrant = { generation: g, host: e.host };
  }
  for (const [g, m] of holders) {
    if (m.size > 1) c.violation('S1', `generation ${g} has more than one holder: ${[...m].map(([h, who]) => `${h} (${who})`).join(', ')}`);
  }

  // ---- S4: every acknowledged CAS is visible in every later read
  const acks = records.filter((r) => r.src === 'client' && r.status === 200 && num(r.revision) !== null && num(r.generation) !== null && num(r.t1) !== null);
  const reads = records.filter((r) => r.src === 'read');
  if (acks.length === 0) c.unknown(['S4'], 'no acknowledged CAS was recorded');
  const arbiterSpawns = records.filter((r) => r.src === 'harness' && r.kind === 'spawn' && r.name === 'arbiter').map((r) => num(r.t) ?? 0);
  for (const s of arbiterSpawns.slice(1)) {
    if (!reads.some((r) => (num(r.t0) ?? -1) > s && num(r.revision) !== null)) c.unknown(['S4'], `no lease read after the arbiter restart at ${s.toFixed(3)}`);
  }
  for (const r of reads) {
    const t0 = num(r.t0);
    const rev = num(r.revision);
    const gen = num(r.generation);
    if (t0 === null || rev === null || gen === null) {
      c.unknown(['S4'], `a lease read is malformed: ${JSON.stringify(r).slice(0, 120)}`);
      continue;
    }
    for (const a of acks) {
      if (num(a.t1)! >= t0) continue;
      if (rev < num(a.revision)! || gen < num(a.generation)!) {
        c.violation('S4', `the read at ${t0.toFixed(3)} shows g${gen} r${rev}, below the ${String(a.op)} acknowledged at ${num(a.t1)!.toFixed(3)} (g${num(a.generation)} r${num(a.revision)})`);
      }
    }
  }

  // ---- S5: every promotion by a check follows promoteAfterChecks dual-unreachable checks of
  // that holder naming that promotee; a promotion by transfer follows an admin transfer.
  const transfers = records.filter((r) => r.src === 'client' && r.op === 'transfer' && r.status === 200);
  events.forEach((e, i) => {
    if (e.event !== 'promoted') return;
    const from = str(e.data.from);
    if (e.host === null || from === null) {
      c.violation('S5', `promotion event ${e.id} names no promotee or no old holder`);
      return;
    }
    if (e.host === from) c.violation('S5', `promotion event ${e.id}: ${e.host} was promoted over itself`);
    if (e.data.via === 'transfer') {
      if (!transfers.some((tr) => tr.host === e.host)) c.violation('S5', `promotion event ${e.id} by transfer to ${e.host}, but the harness asked for no transfer`);
      return;
    }
    const checks = events.slice(0, i).filter((x) => x.event === 'arbiter-check').slice(-promoteAfterChecks);
    const ok =
      checks.length === promoteAfterChecks &&
      checks.every((x, k) => x.host === from && x.data.ping === false && x.data.health === false && x.data.promotee === e.host && num(x.data.streak) === num(e.data.streak)! - (promoteAfterChecks - 1 - k));
    if (!ok || (num(e.data.streak) ?? 0) < promoteAfterChecks) {
      c.violation('S5', `promotion event ${e.id} of ${e.host} over ${from} is not preceded by ${promoteAfterChecks} dual-unreachable checks naming it: ${JSON.stringify(checks.map((x) => ({ id: x.id, host: x.host, ...x.data })))}`);
    }
  });

  // ---- L1 figures: gaps between the last tick of one host and the first tick of the next
  const handovers: number[] = [];
  let longestGap: number | null = null;
  for (let i = 1; i < sortedTicks.length; i++) {
    const gap = sortedTicks[i]!.t - sortedTicks[i - 1]!.t;
    if (longestGap === null || gap > longestGap) longestGap = gap;
    if (sortedTicks[i]!.host !== sortedTicks[i - 1]!.host) handovers.push(gap);
  }

  const S1 = c.result('S1');
  const S2 = c.result('S2');
  const S4 = c.result('S4');
  const S5 = c.result('S5');
  const all = [S1, S2, S4, S5].map((r) => r.verdict);
  const verdict: Verdict = all.includes('VIOLATION') ? 'VIOLATION' : all.includes('UNKNOWN') ? 'UNKNOWN' : 'OK';
  return { S1, S2, S4, S5, L1: { handovers, longestGap }, runs, verdict };
}
