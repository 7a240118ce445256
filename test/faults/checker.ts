/**
 * The history checker of the fault harness: it reads one schedule's recorded history
 * — JSONL lines from the fenced workers, the daemons (stamped by the harness as they arrive),
 * the harness's own client and the arbiter's event log — and answers, per safety property,
 * OK, VIOLATION or UNKNOWN. Every time `t` is seconds of CLOCK_MONOTONIC
 * (`process.hrtime.bigint()`), one clock for every process on the machine, namespaces included.
 *
 * Missing or torn history is never read as "nothing happened": it makes the verdict UNKNOWN,
 * and an UNKNOWN fails the run just like a VIOLATION.
 *
 * The workload is a real fenced job's: every worker tick is one write to a resource shared by
 * both hosts (a SQLite file), through lease-core's SQLite guard (S7) inside the write's own
 * transaction. S2 is proven over the writes the resource *accepted* (its own table, read at the
 * end, is the authoritative history); writes it refused are what S3 cannot prevent under laptop
 * sleep, and S3 is checked with a bound (see below).
 *
 * Record kinds (one JSON object per line, `src` says who wrote it):
 * - `{src:"harness", kind:"config", hosts, promoteAfterChecks, ttlSeconds, recheckSeconds,
 *   graceSeconds}` — first line, required;
 * - `{src:"harness", kind:"spawn"|"exit", name, pid, t}` — daemon lives;
 * - `{src:"harness", kind:"fault", fault, target, start, end}` — informational;
 * - `{src:"harness", kind:"asleep"|"woken", host, t}` — a sleep fault froze / resumed a host;
 * - `{src:"harness", kind:"end", t}` — the history is complete (last line, required);
 * - `{src:"worker", host, pid, seq, generation, t, kind:"start"|"tick"|"end"}`; a tick also has
 *   `outcome: "accepted"|"refused"|"error"` and `tw` (the instant inside the write lock);
 * - `{src:"resource", complete, highest, rows:[{id, host, pid, seq, generation, t}]}` — the
 *   shared resource's table of accepted writes (`id` = commit order) and the guard's mark;
 * - `{src:"daemon", name, pid, seq, t, line}` — one stdout/stderr line of a daemon (`line` parsed
 *   JSON when it was JSON);
 * - `{src:"client", op, host, status, generation, revision, t0, t1}` — a CAS the harness sent
 *   (t0 sent, t1 answered);
 * - `{src:"read", generation, revision, t0, t1}` — a `GET /v1/lease` by the harness;
 * - `{src:"fence", host, run, reason, generation, holder, validForSeconds, t0, t1}` — an agent's
 *   fence answer; `{src:"fence", host, run: null, error, t0, t1}` — the sampler asked and got none
 *   (S3 tells such a host from a stretch in which the sampler never asked: that one is UNKNOWN);
 * - `{src:"events", t, complete, events:[{id, at, category, event, host, data}]}` — the arbiter's log.
 */

export type Verdict = 'OK' | 'VIOLATION' | 'UNKNOWN';

export interface PropertyResult {
  readonly verdict: Verdict;
  /** Why: the first violation or the missing piece; empty when OK. */
  readonly detail: string[];
}

/** S3 as figures: what the workers attempted, and how many attempts came after their validity. */
export interface WriteFigures {
  readonly attempts: number;
  readonly accepted: number;
  /** Refused by the resource's guard (S7): a higher generation had been accepted. */
  readonly refused: number;
  readonly refusedByHost: { readonly [host: string]: number };
  /** Not carried out (e.g. SQLITE_BUSY behind a writer frozen inside its transaction). */
  readonly errors: number;
  /** Attempts after the validity the history shows for their worker… */
  readonly pastValidity: number;
  /** …of them, beyond the bound and excused because the host had just woken from a sleep. */
  readonly pastValidityAfterWake: number;
  readonly maxPastValidity: number | null;
}

export interface Report {
  readonly S1: PropertyResult;
  readonly S2: PropertyResult;
  readonly S3: PropertyResult;
  readonly S4: PropertyResult;
  readonly S5: PropertyResult;
  /** L1 as figures: every change of the working host, the gap between the last accepted write
   * of one host and the first of the next (seconds). */
  readonly L1: { readonly handovers: number[]; readonly longestGap: number | null };
  readonly writes: WriteFigures;
  readonly runs: readonly Run[];
  /** OK only when every property is OK. */
  readonly verdict: Verdict;
}

/** One worker process's accepted writes with one generation (from the resource's table). */
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
  /** When the attempt began (before BEGIN). */
  t: number;
  kind: 'start' | 'tick' | 'end';
  /** Ticks: what became of the write. */
  outcome: 'accepted' | 'refused' | 'error' | null;
  /** Ticks: the instant inside the resource's write lock (null when it was never obtained). */
  tw: number | null;
}

/** One accepted write, as the resource's table holds it (`id` = commit order). */
interface Write {
  id: number;
  host: string;
  pid: number;
  seq: number;
  generation: number;
  t: number;
}

interface Fence {
  host: string;
  run: boolean;
  generation: number | null;
  holder: string | null;
  validFor: number | null;
  t0: number;
  t1: number;
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

const ALL = ['S1', 'S2', 'S3', 'S4', 'S5'] as const;
/** What a worker's missing history leaves unproven. */
const WORK = ['S1', 'S2', 'S3'] as const;
/** S3's allowance past validity + grace: the supervisor's re-check and kill on a loaded machine,
 * and the one heartbeat an unsampled fence answer can add to the sampled validity. */
export const S3_SLACK = 2;
/** The longest stretch without a fence question to a host that still counts as sampled: the
 * sampler asks every 200 ms and gives up on an answer after 1 s. */
export const MAX_SAMPLE_GAP = 2;

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

  const ttlSeconds = num(config?.ttlSeconds) ?? 6;
  const graceSeconds = num(config?.graceSeconds) ?? 1;

  // ---- workers: sequence numbers contiguous per process, a start is followed by ticks, every
  // tick says what became of its write
  const workers = new Map<number, WorkerLine[]>();
  for (const r of records) {
    if (r.src !== 'worker') continue;
    const host = str(r.host);
    const pid = num(r.pid);
    const seq = num(r.seq);
    const t = num(r.t);
    const kind = r.kind;
    if (
      host === null ||
      pid === null ||
      seq === null ||
      t === null ||
      (kind !== 'start' && kind !== 'tick' && kind !== 'end')
    ) {
      c.unknown(WORK, `a worker record lacks host/pid/seq/t/kind: ${JSON.stringify(r).slice(0, 120)}`);
      continue;
    }
    const g = r.generation;
    const generation = typeof g === 'number' && Number.isSafeInteger(g) && g > 0 ? g : null;
    let outcome: WorkerLine['outcome'] = null;
    const tw = num(r.tw);
    if (kind === 'tick') {
      if (r.outcome === 'accepted' || r.outcome === 'refused' || r.outcome === 'error') outcome = r.outcome;
      if (outcome === null || (outcome === 'accepted' && tw === null)) {
        c.unknown(
          WORK,
          `worker ${pid} tick ${seq} does not say what became of its write: ${JSON.stringify(r).slice(0, 120)}`,
        );
        continue;
      }
    }
    const list = workers.get(pid) ?? [];
    list.push({ host, pid, seq, generation, t, kind, outcome, tw });
    workers.set(pid, list);
  }
  const attempts: WorkerLine[] = [];
  const starts = new Map<number, number>();
  const lastSeq = new Map<number, { seq: number; ended: boolean }>();
  for (const [pid, list] of workers) {
    list.sort((a, b) => a.seq - b.seq);
    list.forEach((w, i) => {
      if (w.seq !== i) c.unknown(WORK, `worker ${pid} has a gap in its history before seq ${w.seq} (expected ${i})`);
    });
    if (list[0]?.kind !== 'start') c.unknown(WORK, `worker ${pid} has no start record`);
    else starts.set(pid, list[0].t);
    if (!list.some((w) => w.kind === 'tick')) c.unknown(WORK, `worker ${pid} started but never ticked (torn history)`);
    if (new Set(list.map((w) => w.host)).size > 1) c.unknown(WORK, `worker ${pid} reports more than one host`);
    lastSeq.set(pid, { seq: list[list.length - 1]!.seq, ended: list.some((w) => w.kind === 'end') });
    for (const w of list) {
      if (w.kind !== 'tick') continue;
      if (w.generation === null) {
        c.unknown(WORK, `worker ${pid} ticked without a valid HQ_GENERATION`);
        continue;
      }
      attempts.push(w);
    }
  }
  attempts.sort((a, b) => a.t - b.t);

  // ---- the shared resource's own table: the authoritative list of accepted writes in commit
  // order, cross-checked with what the workers said
  const jsonlAccepted = attempts.filter((a) => a.outcome === 'accepted');
  const resource = records.find((r) => r.src === 'resource');
  let writes: Write[] = [];
  if (resource === undefined || resource.complete !== true || !Array.isArray(resource.rows)) {
    c.unknown(
      ['S2'],
      `the shared resource's table was not read at the end${typeof resource?.error === 'string' ? ` (${resource.error})` : ''}`,
    );
    writes = jsonlAccepted.map((a, i) => ({
      id: i + 1,
      host: a.host,
      pid: a.pid,
      seq: a.seq,
      generation: a.generation!,
      t: a.tw!,
    }));
  } else {
    for (const row of resource.rows as unknown[]) {
      const id = isObj(row) ? num(row.id) : null;
      const host = isObj(row) ? str(row.host) : null;
      const pid = isObj(row) ? num(row.pid) : null;
      const seq = isObj(row) ? num(row.seq) : null;
      const generation = isObj(row) ? num(row.generation) : null;
      const t = isObj(row) ? num(row.t) : null;
      if (id === null || host === null || pid === null || seq === null || generation === null || t === null) {
        c.unknown(['S2'], `a row of the shared resource is malformed: ${JSON.stringify(row).slice(0, 120)}`);
        continue;
      }
      writes.push({ id, host, pid, seq, generation, t });
    }
    writes.sort((a, b) => a.id - b.id);
    for (let i = 1; i < writes.length; i++) {
      if (writes[i]!.t < writes[i - 1]!.t) {
        c.unknown(
          ['S2'],
          `the resource's commit order and the clock disagree: row ${writes[i]!.id} at ${writes[i]!.t.toFixed(3)} before row ${writes[i - 1]!.id} at ${writes[i - 1]!.t.toFixed(3)}`,
        );
        break;
      }
    }
    const maxGen = writes.reduce((m, w) => Math.max(m, w.generation), 0);
    const mark = num(resource.highest);
    if (mark !== maxGen)
      c.unknown(
        ['S2'],
        `the guard's mark on the resource is g${String(mark)}, but its highest accepted write is g${maxGen}`,
      );
    const rowOf = new Map(writes.map((w) => [`${w.pid}/${w.seq}`, w]));
    const said = new Map(jsonlAccepted.map((a) => [`${a.pid}/${a.seq}`, a]));
    for (const a of jsonlAccepted) {
      const w = rowOf.get(`${a.pid}/${a.seq}`);
      if (w === undefined)
        c.unknown(
          ['S2'],
          `worker ${a.pid} says its write ${a.seq} at ${a.tw!.toFixed(3)} was accepted, but the resource has no such row`,
        );
      else if (w.host !== a.host || w.generation !== a.generation || Math.abs(w.t - a.tw!) > 1e-6) {
        c.unknown(
          ['S2'],
          `worker ${a.pid}'s write ${a.seq} differs from its row ${w.id} (${a.host} g${a.generation} ${a.tw} vs ${w.host} g${w.generation} ${w.t})`,
        );
      }
    }
    for (const w of writes) {
      if (said.has(`${w.pid}/${w.seq}`)) continue;
      // Killed between its commit and its line: only ever the last write of a worker that did not end.
      const last = lastSeq.get(w.pid);
      if (last === undefined || last.ended || w.seq <= last.seq) {
        c.unknown(
          ['S2'],
          `row ${w.id} of the resource (${w.host} pid ${w.pid} write ${w.seq} g${w.generation}) is not in that worker's history`,
        );
      }
    }
  }

  // Runs: one worker process's accepted writes with one generation.
  const runs: Run[] = [];
  const byRun = new Map<string, Write[]>();
  for (const w of writes) {
    const k = `${w.pid}/${w.generation}`;
    const l = byRun.get(k) ?? [];
    l.push(w);
    byRun.set(k, l);
  }
  for (const l of byRun.values()) {
    const ts = l.map((w) => w.t);
    runs.push({
      host: l[0]!.host,
      pid: l[0]!.pid,
      generation: l[0]!.generation,
      first: Math.min(...ts),
      last: Math.max(...ts),
      ticks: l.length,
    });
  }
  runs.sort((a, b) => a.first - b.first);

  // ---- S2 (work): accepted-write runs of different hosts never overlap (closed intervals, zero
  // tolerance), and accepted generations never go down in commit order
  for (let i = 0; i < runs.length; i++) {
    for (let j = i + 1; j < runs.length; j++) {
      const a = runs[i]!;
      const b = runs[j]!;
      if (b.first > a.last) continue;
      if (a.host === b.host) continue;
      c.violation(
        'S2',
        `${a.host} (pid ${a.pid}, g${a.generation}) wrote ${a.first.toFixed(3)}–${a.last.toFixed(3)} and ${b.host} (pid ${b.pid}, g${b.generation}) wrote ${b.first.toFixed(3)}–${b.last.toFixed(3)}: accepted writes of two hosts overlap`,
      );
    }
  }
  for (let i = 1; i < writes.length; i++) {
    const a = writes[i - 1]!;
    const b = writes[i]!;
    if (b.generation < a.generation) {
      c.violation(
        'S2',
        `the resource accepted ${b.host}'s g${b.generation} (row ${b.id} at ${b.t.toFixed(3)}) after ${a.host}'s g${a.generation} (row ${a.id}): a generation went down in commit order`,
      );
      break;
    }
  }

  // ---- S2 (fence answers): no instant covered by two hosts' run: true answers. An answer taken
  // between t0 and t1 saying "valid for v s" certainly covers [t1, t0 + v] — nothing more is
  // claimed, so sampling latency cannot make a violation.
  const fences: Fence[] = [];
  // When the sampler asked each host, answered or not (S3's sampling gaps).
  const asked = new Map<string, number[]>();
  for (const r of records) {
    if (r.src !== 'fence') continue;
    const host = str(r.host);
    const t0 = num(r.t0);
    const t1 = num(r.t1);
    if (host === null || t0 === null || t1 === null) continue;
    const l = asked.get(host) ?? [];
    l.push(t0);
    asked.set(host, l);
    if (r.error !== undefined) continue; // asked, no answer (agent stopped, killed, unreachable)
    fences.push({
      host,
      run: r.run === true,
      generation: num(r.generation),
      holder: str(r.holder),
      validFor: num(r.validForSeconds),
      t0,
      t1,
    });
  }
  fences.sort((a, b) => a.t1 - b.t1);
  const covers = fences.filter((f) => f.run && f.validFor !== null && f.t1 <= f.t0 + f.validFor);
  let fenceOverlaps = 0;
  for (let i = 0; i < covers.length; i++) {
    for (let j = i + 1; j < covers.length; j++) {
      const a = covers[i]!;
      const b = covers[j]!;
      if (a.host === b.host || b.t1 > a.t0 + a.validFor! || a.t1 > b.t0 + b.validFor!) continue;
      if (fenceOverlaps++ < 3) {
        c.violation(
          'S2',
          `${a.host} (g${a.generation}) was told run, valid ${a.t1.toFixed(3)}–${(a.t0 + a.validFor!).toFixed(3)}, and ${b.host} (g${b.generation}) run, valid ${b.t1.toFixed(3)}–${(b.t0 + b.validFor!).toFixed(3)}: two fence answers overlap`,
        );
      }
    }
  }

  // ---- S3 (bounded): a fenced child is stopped by its host's validity. For each attempted write,
  // the latest validity the history shows for its worker: the end of any sampled run: true answer
  // of that host for that generation before the attempt (t1 + v, an upper bound), and at least
  // start + ttlSeconds (the supervisor's first answer came before the worker started). An attempt
  // later than that + graceSeconds + S3_SLACK is a VIOLATION, unless the host was asleep (a sleep
  // fault) until just before: a frozen process runs its next instructions on wake before its
  // supervisor can stop it; those writes are counted, and the guard (S7) must refuse them.
  const sleeps = new Map<string, { from: number; to: number }[]>();
  for (const r of records) {
    if (r.src !== 'harness' || (r.kind !== 'asleep' && r.kind !== 'woken')) continue;
    const host = str(r.host);
    const t = num(r.t);
    if (host === null || t === null) continue;
    const l = sleeps.get(host) ?? [];
    if (r.kind === 'asleep') l.push({ from: t, to: Infinity });
    else {
      const open = l.find((x) => x.to === Infinity);
      if (open !== undefined) open.to = t;
    }
    sleeps.set(host, l);
  }
  const bound = graceSeconds + S3_SLACK;
  for (const l of asked.values()) l.sort((a, b) => a - b);
  // A stretch of more than MAX_SAMPLE_GAP in which the sampler did not even ask `host`, within
  // [from, to]: an answer there could have extended the host's validity, so the history cannot say.
  const unsampled = (host: string, from: number, to: number): [number, number] | null => {
    const l = asked.get(host) ?? [];
    let prev = -Infinity;
    for (const x of [...l, Infinity]) {
      if (x - prev > MAX_SAMPLE_GAP && prev < to && x > from) return [prev, x];
      if (x > to) break;
      prev = x;
    }
    return null;
  };
  const justWoken = (host: string, t: number): boolean =>
    (sleeps.get(host) ?? []).some((x) => t >= x.from && t <= x.to + bound);
  const validityEnds = new Map<string, { t1: number; end: number }[]>();
  for (const f of fences) {
    if (!f.run || f.validFor === null || f.generation === null) continue;
    const k = `${f.host}/${f.generation}`;
    const l = validityEnds.get(k) ?? [];
    l.push({ t1: f.t1, end: f.t1 + f.validFor });
    validityEnds.set(k, l);
  }
  const hostsAnswered = new Set(fences.map((f) => f.host));
  const figures = {
    attempts: attempts.length,
    accepted: 0,
    refused: 0,
    errors: 0,
    pastValidity: 0,
    pastValidityAfterWake: 0,
    maxPastValidity: null as number | null,
    refusedByHost: {} as { [host: string]: number },
  };
  const noAnswers = new Set<string>();
  let late = 0;
  let unsampledWrites = 0;
  for (const a of attempts) {
    if (a.outcome === 'accepted') figures.accepted++;
    else if (a.outcome === 'refused') {
      figures.refused++;
      figures.refusedByHost[a.host] = (figures.refusedByHost[a.host] ?? 0) + 1;
    } else figures.errors++;
    if (!hostsAnswered.has(a.host)) {
      noAnswers.add(a.host);
      continue;
    }
    let end = (starts.get(a.pid) ?? a.t) + ttlSeconds;
    for (const v of validityEnds.get(`${a.host}/${a.generation}`) ?? []) {
      if (v.t1 <= a.t && v.end > end) end = v.end;
    }
    const past = a.t - end;
    if (past <= 0) continue;
    figures.pastValidity++;
    if (figures.maxPastValidity === null || past > figures.maxPastValidity) figures.maxPastValidity = past;
    if (past <= bound) continue;
    if (justWoken(a.host, a.t)) {
      figures.pastValidityAfterWake++;
      continue;
    }
    // Only a history that kept asking the host can say its validity had ended: an unseen answer
    // (valid ≤ ttlSeconds) taken after a.t − bound − ttlSeconds could have covered a.t.
    const gap = unsampled(a.host, a.t - bound - ttlSeconds, a.t);
    if (gap !== null) {
      if (unsampledWrites++ < 3) {
        c.unknown(
          ['S3'],
          `${a.host}'s worker ${a.pid} (g${a.generation}) attempted a write at ${a.t.toFixed(3)}, ${past.toFixed(2)} s after the validity the history shows for it ended, but the sampler did not ask ${a.host} from ${Number.isFinite(gap[0]) ? gap[0].toFixed(3) : 'the start'} to ${Number.isFinite(gap[1]) ? gap[1].toFixed(3) : 'the end'} (its validity there is unknown)`,
        );
      }
      continue;
    }
    if (late++ < 3) {
      c.violation(
        'S3',
        `${a.host}'s worker ${a.pid} (g${a.generation}) attempted a write (${a.outcome}) at ${a.t.toFixed(3)}, ${past.toFixed(2)} s after the validity the history shows for it ended (${end.toFixed(3)}; bound ${bound} s), and the host was not just woken from a sleep`,
      );
    }
  }
  for (const h of noAnswers)
    c.unknown(
      ['S3'],
      `${h}'s workers attempted writes, but no fence answer of ${h} was recorded (its validity is unknown)`,
    );

  // ---- S1: one holder per generation
  const holders = new Map<number, Map<string, string>>();
  const claim = (generation: number, host: string, who: string): void => {
    const m = holders.get(generation) ?? new Map<string, string>();
    if (!m.has(host)) m.set(host, who);
    holders.set(generation, m);
  };
  for (const a of attempts) claim(a.generation!, a.host, `worker ${a.pid}`);
  for (const r of runs) claim(r.generation, r.host, `the resource's rows of worker ${r.pid}`);

  // daemons: numbered lines per life, every spawn has an exit or the end record names it alive
  const lives = new Map<number, { name: string; seqs: number[] }>();
  const adopted = new Map<string, number>();
  // What the agents answered on their fence sockets: each answer names the holder of its generation.
  for (const r of records) {
    if (r.src !== 'fence') continue;
    const g = num(r.generation);
    const h = str(r.holder);
    if (g !== null && g > 0 && h !== null)
      claim(g, h, `${String(r.host)}'s fence answer at ${(num(r.t1) ?? 0).toFixed(3)}`);
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
      if (to !== null && prev !== undefined && to <= prev)
        c.violation('S1', `${name} adopted g${to} after it had adopted g${prev}`);
      if (to !== null) adopted.set(name, Math.max(to, prev ?? 0));
    }
    // Only the arbiters' own logs name holders (an agent's log lines carry the agent's host).
    if (
      (name === 'arbiter' || name === 'arbiter-1') &&
      isObj(line) &&
      typeof line.event === 'string' &&
      HOLDER_EVENTS.has(line.event)
    ) {
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
  const alive = new Set(
    Array.isArray(end?.alive) ? (end.alive as unknown[]).filter((p): p is number => typeof p === 'number') : [],
  );
  const exited = new Set(records.filter((r) => r.src === 'harness' && r.kind === 'exit').map((r) => num(r.pid)));
  for (const r of records) {
    if (r.src !== 'harness' || r.kind !== 'spawn') continue;
    const pid = num(r.pid);
    if (pid !== null && !exited.has(pid) && !alive.has(pid) && end !== undefined) {
      c.unknown(
        ['S1', 'S4'],
        `daemon ${String(r.name)} (pid ${pid}) has neither an exit record nor is it alive at the end`,
      );
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
      events.push({
        id: num(e.id)!,
        at: num(e.at) ?? 0,
        category: str(e.category) ?? '',
        event: e.event,
        host: str(e.host),
        data: isObj(e.data) ? e.data : {},
      });
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
      c.violation(
        'S1',
        `arbiter event ${e.id} grants ${e.host} g${g} after ${lastGrant.host} held g${lastGrant.generation}`,
      );
    }
    if (lastGrant === null || g >= lastGrant.generation) lastGrant = { generation: g, host: e.host };
  }
  for (const [g, m] of holders) {
    if (m.size > 1)
      c.violation(
        'S1',
        `generation ${g} has more than one holder: ${[...m].map(([h, who]) => `${h} (${who})`).join(', ')}`,
      );
  }

  // ---- S4: every acknowledged CAS is visible in every later read
  const acks = records.filter(
    (r) =>
      r.src === 'client' &&
      r.status === 200 &&
      num(r.revision) !== null &&
      num(r.generation) !== null &&
      num(r.t1) !== null,
  );
  const reads = records.filter((r) => r.src === 'read');
  if (acks.length === 0) c.unknown(['S4'], 'no acknowledged CAS was recorded');
  const arbiterSpawns = records
    .filter((r) => r.src === 'harness' && r.kind === 'spawn' && (r.name === 'arbiter' || r.name === 'arbiter-1'))
    .map((r) => num(r.t) ?? 0);
  for (const s of arbiterSpawns.slice(1)) {
    if (!reads.some((r) => (num(r.t0) ?? -1) > s && num(r.revision) !== null))
      c.unknown(['S4'], `no lease read after the arbiter restart at ${s.toFixed(3)}`);
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
        c.violation(
          'S4',
          `the read at ${t0.toFixed(3)} shows g${gen} r${rev}, below the ${String(a.op)} acknowledged at ${num(a.t1)!.toFixed(3)} (g${num(a.generation)} r${num(a.revision)})`,
        );
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
      if (!transfers.some((tr) => tr.host === e.host))
        c.violation('S5', `promotion event ${e.id} by transfer to ${e.host}, but the harness asked for no transfer`);
      return;
    }
    const checks = events
      .slice(0, i)
      .filter((x) => x.event === 'arbiter-check')
      .slice(-promoteAfterChecks);
    const ok =
      checks.length === promoteAfterChecks &&
      checks.every(
        (x, k) =>
          x.host === from &&
          x.data.ping === false &&
          x.data.health === false &&
          x.data.promotee === e.host &&
          num(x.data.streak) === num(e.data.streak)! - (promoteAfterChecks - 1 - k),
      );
    if (!ok || (num(e.data.streak) ?? 0) < promoteAfterChecks) {
      c.violation(
        'S5',
        `promotion event ${e.id} of ${e.host} over ${from} is not preceded by ${promoteAfterChecks} dual-unreachable checks naming it: ${JSON.stringify(checks.map((x) => ({ id: x.id, host: x.host, ...x.data })))}`,
      );
    }
  });

  // ---- L1 figures: gaps between the last accepted write of one host and the first of the next
  const handovers: number[] = [];
  let longestGap: number | null = null;
  for (let i = 1; i < writes.length; i++) {
    const gap = writes[i]!.t - writes[i - 1]!.t;
    if (longestGap === null || gap > longestGap) longestGap = gap;
    if (writes[i]!.host !== writes[i - 1]!.host) handovers.push(gap);
  }

  const S1 = c.result('S1');
  const S2 = c.result('S2');
  const S3 = c.result('S3');
  const S4 = c.result('S4');
  const S5 = c.result('S5');
  const all = [S1, S2, S3, S4, S5].map((r) => r.verdict);
  const verdict: Verdict = all.includes('VIOLATION') ? 'VIOLATION' : all.includes('UNKNOWN') ? 'UNKNOWN' : 'OK';
  return { S1, S2, S3, S4, S5, L1: { handovers, longestGap }, writes: figures, runs, verdict };
}
