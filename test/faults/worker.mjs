// The fenced workload of the fault harness, shaped like a real fenced job: run under
// `hq fence run --role cron`, it writes to ONE shared resource — the SQLite file given as
// argv[3], shared by both hosts' workers (the namespaces share the filesystem) — every 50 ms.
// Each write is one `BEGIN IMMEDIATE` transaction that first asks lease-core's SQLite guard (S7)
// to accept HQ_GENERATION and, when it does, inserts a row `{host, pid, seq, generation, t}`;
// a refusal rolls the transaction back. For every attempt it appends to the history file given
// as argv[2] one line `{src:"worker", host, pid, seq, generation, t, kind:"tick", outcome, tw,
// reason, highest}`:
//   t        when the attempt began (before BEGIN),
//   tw       the instant inside the write lock (null when the lock was not obtained) — the
//            write's place in commit order, and the `t` of its row,
//   outcome  "accepted" | "refused" (the guard said no) | "error" (e.g. SQLITE_BUSY).
// Plus `start` and, on SIGTERM, `end`; one writeSync per line. Every `t` is CLOCK_MONOTONIC in
// seconds (process.hrtime), the clock every process here shares. The guard comes from the build
// under test (HQF_LEASE_CORE, a path to @hq/lease-core's dist/shell/sqlite-guard.js).
import { openSync, writeSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';

const file = process.argv[2];
const resource = process.argv[3];
const host = process.env.HQF_HOST ?? 'unknown';
const g = Number(process.env.HQ_GENERATION);
const generation = Number.isSafeInteger(g) && g > 0 ? g : null;
const fd = openSync(file, 'a');
let seq = 0;
const now = () => Number(process.hrtime.bigint()) / 1e9;
const line = (kind, extra = {}, s = seq++) =>
  writeSync(
    fd,
    `${JSON.stringify({ src: 'worker', host, pid: process.pid, seq: s, generation, t: now(), kind, ...extra })}\n`,
  );

const core = process.env.HQF_LEASE_CORE;
const { sqliteGuard } = await import(core ? pathToFileURL(core).href : '@hq/lease-core/sqlite-guard');
const db = new Database(resource);
// The harness made the file (WAL, tables); a short busy wait: a writer frozen inside its
// transaction (laptop sleep) must not freeze the other host's worker for long.
db.pragma('busy_timeout = 200');
db.pragma('synchronous = NORMAL');
const guard = sqliteGuard(db);
const insert = db.prepare('INSERT INTO writes (host, pid, seq, generation, t) VALUES (?, ?, ?, ?, ?)');

class Refused extends Error {
  constructor(verdict) {
    super(verdict.reason);
    this.verdict = verdict;
  }
}
let tw = null;
const write = db.transaction((s) => {
  tw = now();
  const v = guard.accept('work', generation);
  if (!v.ok) throw new Refused(v);
  insert.run(host, process.pid, s, generation, tw);
  return v.highest;
});

function tick() {
  const s = seq++;
  const t = now();
  tw = null;
  let extra;
  try {
    const highest = write.immediate(s);
    extra = { outcome: 'accepted', tw, highest };
  } catch (err) {
    if (err instanceof Refused)
      extra = { outcome: 'refused', tw, reason: err.verdict.reason, highest: err.verdict.highest };
    else extra = { outcome: 'error', tw, reason: String(err?.code ?? err?.message ?? err).slice(0, 80) };
  }
  writeSync(
    fd,
    `${JSON.stringify({ src: 'worker', host, pid: process.pid, seq: s, generation, t, kind: 'tick', ...extra })}\n`,
  );
}

line('start');
tick();
// Bounded: a worker never outlives 10 minutes even if nobody stops it.
const timer = setInterval(tick, 50);
const stopAt = setTimeout(() => stop(), 600_000);
function stop() {
  clearInterval(timer);
  clearTimeout(stopAt);
  line('end');
  try {
    db.close();
  } catch {
    /* closing is best effort */
  }
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
