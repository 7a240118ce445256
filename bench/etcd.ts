/**
 * `npm run bench:etcd`: hq's arbiter beside a single etcd, same load generator
 * (`load()` of bench/lib.ts: undici closed loop), same concurrency, same machine, both on
 * loopback. Four operations, each on both sides:
 *   read     GET /v1/lease                          vs  POST /v3/kv/range (linearizable, the default)
 *   renew    POST /v1/heartbeat of the holder       vs  POST /v3/kv/put of the record (durable: a raft
 *            (durable: fsync'd, or an etcd txn)           write); beside POST /v3/lease/keepalive, which
 *                                                       etcd 3.4 keeps in memory only (information)
 *   CAS      renew with If-Match, losers take the   vs  txn compare mod_revision → put, failure
 *            412's ETag and retry                       branch a range, losers retry with it
 *   acquire  release + acquire of the same host     vs  lease grant + put with that lease
 * BENCH_CONNECTIONS (32) clients, BENCH_SECONDS (10) per run, BENCH_ROUNDS (3) rounds, medians.
 * Prints the table and writes its section of docs/BENCH.md (BENCH_WRITE=0 to skip);
 * BENCH_PROFILE=DIR runs the arbiter under `node --cpu-prof` with its profile written to DIR;
 * BENCH_OPS=renew (a comma list of read, renew, cas, acquire) runs only those operations' rows.
 * Last, the arbiter takeover time (bench/takeover.ts): BENCH_TAKEOVERS (5) kill -9 rounds of the
 * elected one of two arbiters, per election TTL setting; BENCH_ONLY=takeover runs that part alone
 * and rewrites only its table (inside this bench's section of docs/BENCH.md).
 *
 * etcd: Debian's `etcd-server` is installed with apt when no `etcd` is on PATH (root only, exit 2
 * otherwise), with service starts refused (policy-rc.d) so the package leaves no etcd running.
 * Ours binds 127.0.0.1 only, keeps its data in a temp dir, and is stopped by PID at the end,
 * on error and on SIGINT/SIGTERM, like the arbiter.
 */
import { execFileSync } from 'node:child_process';
import { Pool } from 'undici';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { onPath, startEtcdCluster } from '../test/etcd/members.js';
import { jsonHeaders, startArbiter, type HqArbiter } from './hq-arbiter.js';
import { cpuSeconds, load, machineLine, median, ROOT, statusText, table, writeSection, type Req } from './lib.js';
import {
  measureTakeovers,
  TAKEOVER_SETTINGS,
  takeoverDoc,
  takeoverTable,
  type TakeoverRound,
  type TakeoverSetting,
} from './takeover.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 10);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 32);
const PROFILE_DIR = process.env['BENCH_PROFILE'];
/** Registry members registered on each arbiter before the heartbeat is measured again (10,000). */
const MEMBERS = Number(process.env['BENCH_MEMBERS'] ?? 10_000);
/** A short checked run of every scenario before the timed rounds: warms both servers and proves the answers are successes. */
const WARMUP_SECONDS = Math.min(1, SECONDS);
/** etcd lease TTL for keepalive and acquire: the arbiter's default ttlSeconds, long enough that no lease expires mid-bench. */
const ETCD_TTL = 1500;
/** Kill -9 rounds of the elected arbiter per election TTL setting (0: no takeover part). */
const TAKEOVERS = Number(process.env['BENCH_TAKEOVERS'] ?? 5);
/** `takeover`: only the takeover part (unset: everything). */
const ONLY = process.env['BENCH_ONLY'];
if (ONLY !== undefined && ONLY !== 'takeover') {
  process.stderr.write(
    `bench:etcd: BENCH_ONLY must be "takeover" (or unset for the whole bench), not ${JSON.stringify(ONLY)}\n`,
  );
  process.exit(2);
}
if (!Number.isInteger(TAKEOVERS) || TAKEOVERS < (ONLY === 'takeover' ? 1 : 0)) {
  process.stderr.write(
    `bench:etcd: BENCH_TAKEOVERS must be a whole number ≥ ${ONLY === 'takeover' ? 1 : 0}, not ${JSON.stringify(process.env['BENCH_TAKEOVERS'])}\n`,
  );
  process.exit(2);
}

// ---------------------------------------------------------------------------------------
// everything this bench starts, stopped by PID whatever happens

const cleanups: Array<() => Promise<void>> = [];
let stopping = false;
let cleaning: Promise<void> | null = null;
/** Stops everything tracked, newest first; every caller waits for the same one pass. */
function cleanup(): Promise<void> {
  stopping = true;
  cleaning ??= (async () => {
    while (cleanups.length > 0) {
      const fn = cleanups.pop()!;
      await fn().catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
    }
  })();
  return cleaning;
}
/** Registers how to stop something just started; once stopping has begun, stops it at once. */
function track(stop: () => Promise<void>): void {
  if (stopping) void stop();
  else cleanups.push(stop);
}
// ---------------------------------------------------------------------------------------
// etcd: install, start, talk

/** PIDs of running processes whose command name is `etcd`. */
function etcdPids(): number[] {
  const pids: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'etcd') pids.push(Number(d));
    } catch {
      // gone
    }
  }
  return pids;
}

/**
 * The etcd binary, installing Debian's etcd-server when there is none. Service starts are
 * refused during the install (a policy-rc.d that exits 101, RUNLEVEL=1), and any etcd that
 * appears anyway (the package's own) is stopped by PID, so nothing is left on :2379.
 */
function ensureEtcd(): string {
  const found = onPath('etcd');
  if (found !== null) return found;
  if (process.getuid?.() !== 0) {
    process.stderr.write(
      "bench:etcd: no etcd on PATH; run as root to have it install Debian's etcd-server, or install it (apt-get install etcd-server)\n",
    );
    process.exit(2);
  }
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) {
    writeFileSync(
      policy,
      '#!/bin/sh\n# written by hq bench/etcd.ts for the etcd-server install; removed after it\nexit 101\n',
    );
    chmodSync(policy, 0o755);
  }
  const before = new Set(etcdPids());
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', RUNLEVEL: '1' };
    process.stderr.write('installing etcd-server (apt-get update, apt-get install -y etcd-server)…\n');
    execFileSync('apt-get', ['update'], { stdio: ['ignore', 'inherit', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'etcd-server'], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env,
    });
  } finally {
    if (ownPolicy) rmSync(policy, { force: true });
  }
  for (const pid of etcdPids()) {
    if (before.has(pid)) continue;
    process.stderr.write(`stopping etcd pid ${pid} started by the package install\n`);
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const bin = onPath('etcd');
  if (bin === null) throw new Error('etcd-server installed but no etcd on PATH');
  return bin;
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('utf8');

/** One etcd gateway call for setup and checks: the parsed JSON, or an error naming the answer. */
async function etcdCall<T>(base: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path} answered ${res.status}: ${text}`);
  // keepalive is a stream: one JSON object per line, `{"result": …}`
  const first = text.split('\n')[0] ?? '';
  const parsed = JSON.parse(first) as T & { result?: T; error?: unknown };
  if (parsed.error !== undefined) throw new Error(`etcd ${path} failed: ${first}`);
  return parsed.result ?? parsed;
}

async function hqCall(
  hq: HqArbiter,
  path: string,
  token: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; etag: string | null; json: Record<string, unknown> }> {
  const res = await fetch(`${hq.base}${path}`, {
    method: 'POST',
    headers: { ...jsonHeaders(token), ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, etag: res.headers.get('etag'), json: (await res.json()) as Record<string, unknown> };
}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Error(`check failed: ${what}`);
}

// ---------------------------------------------------------------------------------------
// scenarios

type Op = 'read' | 'read-serializable' | 'renew' | 'keepalive' | 'cas' | 'acquire';
type Side = 'hq' | 'hq-etcd' | 'etcd';

interface Scenario {
  side: Side;
  op: Op;
  base: string;
  /** requests in one iteration (2 for acquire), sent one after the other on one connection */
  steps: number;
  next: (worker: number, step: number) => Req;
  /** the outcome label of one answer; labels in `bad` make a warm-up fail */
  answer: (worker: number, step: number, status: number, etag: string | undefined, body: string) => string;
  bad: readonly string[];
}

interface Run {
  ops: number;
  p50: number;
  p99: number;
  statuses: string;
  outcomes: Map<string, number>;
  /** CPU time per answer, µs: the arbiter's process, etcd's, and this process (the load generator). */
  cpu: Cpu;
}

interface Cpu {
  arbiter: number;
  etcd: number;
  client: number;
}

/** The processes whose CPU time a side's run counts (set once the daemons are up). */
const SIDE_PIDS: { [side in Side]: { arbiter: number | null; etcd: number | null } } = {
  hq: { arbiter: null, etcd: null },
  'hq-etcd': { arbiter: null, etcd: null },
  etcd: { arbiter: null, etcd: null },
};

/** utime + stime of a process, µs (lib's `cpuSeconds`); 0 when unknown or gone. */
function cpuMicros(pid: number | null): number {
  if (pid === null) return 0;
  try {
    return cpuSeconds(pid) * 1e6;
  } catch {
    return 0;
  }
}

async function run(s: Scenario, seconds: number): Promise<Run> {
  const pids = SIDE_PIDS[s.side];
  const cpu0 = { arbiter: cpuMicros(pids.arbiter), etcd: cpuMicros(pids.etcd), client: process.cpuUsage() };
  const step = new Array<number>(CONNECTIONS).fill(0);
  const t0 = new Array<number>(CONNECTIONS).fill(0);
  const lat: number[] = [];
  const outcomes = new Map<string, number>();
  const started = performance.now();
  const r = await load(
    `${s.side} ${s.op}`,
    s.base,
    (w) => {
      if (step[w] === 0) t0[w] = performance.now();
      return s.next(w, step[w]!);
    },
    {
      seconds,
      connections: CONNECTIONS,
      onAnswer: (w, status, etag, body) => {
        const label = s.answer(w, step[w]!, status, etag, body);
        outcomes.set(label, (outcomes.get(label) ?? 0) + 1);
        step[w]!++;
        if (step[w] === s.steps) {
          lat.push(performance.now() - t0[w]!);
          step[w] = 0;
        }
      },
    },
  );
  const elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu0.client);
  const answers = [...outcomes.values()].reduce((a, n) => a + n, 0) || 1;
  const cpu: Cpu = {
    arbiter: (cpuMicros(pids.arbiter) - cpu0.arbiter) / answers,
    etcd: (cpuMicros(pids.etcd) - cpu0.etcd) / answers,
    client: (used.user + used.system) / answers,
  };
  lat.sort((a, b) => a - b);
  const q = (p: number): number => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  const outs = [...outcomes]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k}×${n}`)
    .join(' ');
  return {
    ops: lat.length / elapsed,
    p50: q(0.5),
    p99: q(0.99),
    statuses: `${statusText(r.statuses)} (${outs})`,
    outcomes,
    cpu,
  };
}

const revisionOf = (etag: string | undefined): number => (etag === undefined ? 0 : Number(etag.replaceAll('"', '')));
const match = (body: string, re: RegExp): string | undefined => re.exec(body)?.[1];

/**
 * The hq side. Heartbeat and renew name the holder's generation, which the acquire scenario
 * moves: `settle()` (after each acquire run) makes sure mbp holds the lease and re-reads it.
 */
function hqScenarios(
  hq: HqArbiter,
  side: 'hq' | 'hq-etcd' = 'hq',
): { scenarios: Scenario[]; settle: () => Promise<void> } {
  const { mbp } = hq.tokens;
  let hb = '';
  let renew = '';
  const use = (gen: number): void => {
    hb = JSON.stringify({ host: 'mbp', generation: gen, seenGeneration: gen, heartbeatSeconds: 600 });
    renew = JSON.stringify({ host: 'mbp', generation: gen });
  };
  use(hq.generation);
  const settle = async (): Promise<void> => {
    // an acquire run may stop between a release and its acquire
    const acq = await hqCall(hq, '/v1/lease/acquire', mbp, { host: 'mbp' });
    check(acq.status === 200, `hq acquire after the acquire run (${acq.status})`);
    use((acq.json['lease'] as { generation: number }).generation);
  };
  const seen = new Map<number, number>();
  const grants = new Set<number>();
  const scenarios: Scenario[] = [
    {
      side,
      op: 'read',
      base: hq.base,
      steps: 1,
      bad: ['error'],
      next: () => ({ method: 'GET', path: '/v1/lease' }),
      answer: (_w, _s, status, _e, body) => (status === 200 && body.includes('"holder":"mbp"') ? 'record' : 'error'),
    },
    {
      side,
      op: 'renew',
      base: hq.base,
      steps: 1,
      bad: ['error'],
      next: () => ({ method: 'POST', path: '/v1/heartbeat', headers: jsonHeaders(mbp), body: hb }),
      answer: (_w, _s, status, _e, body) =>
        status === 200 && body.includes('"outcome":"renewed"') ? 'renewed' : 'error',
    },
    {
      side,
      op: 'cas',
      base: hq.base,
      steps: 1,
      bad: ['error'],
      next: (w) => ({
        method: 'POST',
        path: '/v1/lease/renew',
        headers: { ...jsonHeaders(mbp), 'if-match': `"${seen.get(w) ?? 0}"` },
        body: renew,
      }),
      answer: (w, _s, status, etag) => {
        // 200 and 412 both carry the current revision as the ETag.
        if (etag !== undefined) seen.set(w, revisionOf(etag));
        return status === 200 ? 'swapped' : status === 412 ? 'stale' : 'error';
      },
    },
    {
      side,
      op: 'acquire',
      base: hq.base,
      steps: 2,
      bad: ['error'],
      next: (_w, step) =>
        step === 0
          ? { method: 'POST', path: '/v1/lease/release', headers: jsonHeaders(mbp), body: '{"host":"mbp"}' }
          : { method: 'POST', path: '/v1/lease/acquire', headers: jsonHeaders(mbp), body: '{"host":"mbp"}' },
      answer: (_w, step, status, _e, body) => {
        if (status !== 200) return 'error';
        if (step === 0) return 'released';
        // A fresh grant answers a generation no acquire answered before; another connection's
        // grant found unreleased is renewed by this acquire (the holder re-acquiring renews).
        const g = Number(match(body, /"generation":(\d+)/));
        if (grants.has(g)) return 'acquired(renewed)';
        grants.add(g);
        return 'acquired(granted)';
      },
    },
  ];
  return { scenarios, settle };
}

async function etcdScenarios(base: string, value: string): Promise<Scenario[]> {
  const key = b64('hq/lease');
  const val = b64(value);
  const put = await etcdCall<{ header: { revision: string } }>(base, '/v3/kv/put', { key, value: val });
  const lease = await etcdCall<{ ID: string; TTL: string }>(base, '/v3/lease/grant', { TTL: ETCD_TTL });
  check(Number(put.header.revision) > 0 && Number(lease.TTL) > 0, 'etcd put and lease grant');
  const range = JSON.stringify({ key });
  const rangeSer = JSON.stringify({ key, serializable: true });
  const keepalive = JSON.stringify({ ID: lease.ID });
  const putRecord = JSON.stringify({ key, value: val });
  const seen = new Map<number, string>();
  const txn = (rev: string): string =>
    JSON.stringify({
      compare: [{ key, target: 'MOD', result: 'EQUAL', mod_revision: rev }],
      success: [{ request_put: { key, value: val } }],
      failure: [{ request_range: { key } }],
    });
  const leaseOf = new Map<number, string>();
  const grant = JSON.stringify({ TTL: ETCD_TTL });
  const readAnswer = (_w: number, _s: number, status: number, _e: string | undefined, body: string): string =>
    status === 200 && body.includes('"kvs":[') ? 'record' : 'error';
  return [
    {
      side: 'etcd',
      op: 'read',
      base,
      steps: 1,
      bad: ['error'],
      next: () => ({
        method: 'POST',
        path: '/v3/kv/range',
        headers: { 'content-type': 'application/json' },
        body: range,
      }),
      answer: readAnswer,
    },
    {
      side: 'etcd',
      op: 'read-serializable',
      base,
      steps: 1,
      bad: ['error'],
      next: () => ({
        method: 'POST',
        path: '/v3/kv/range',
        headers: { 'content-type': 'application/json' },
        body: rangeSer,
      }),
      answer: readAnswer,
    },
    {
      // a durable renew: the record written again, through raft (WAL + fsync), all connections on the one key
      side: 'etcd',
      op: 'renew',
      base,
      steps: 1,
      bad: ['error'],
      next: () => ({
        method: 'POST',
        path: '/v3/kv/put',
        headers: { 'content-type': 'application/json' },
        body: putRecord,
      }),
      answer: (_w, _s, status, _e, body) =>
        status === 200 && !body.includes('"error"') && /"revision":"\d+"/.test(body) ? 'renewed' : 'error',
    },
    {
      side: 'etcd',
      op: 'keepalive',
      base,
      steps: 1,
      bad: ['error', 'expired'],
      next: () => ({
        method: 'POST',
        path: '/v3/lease/keepalive',
        headers: { 'content-type': 'application/json' },
        body: keepalive,
      }),
      answer: (_w, _s, status, _e, body) => {
        if (status !== 200 || body.includes('"error"')) return 'error';
        return Number(match(body, /"TTL":"(\d+)"/) ?? 0) > 0 ? 'renewed' : 'expired';
      },
    },
    {
      side: 'etcd',
      op: 'cas',
      base,
      steps: 1,
      bad: ['error'],
      next: (w) => ({
        method: 'POST',
        path: '/v3/kv/txn',
        headers: { 'content-type': 'application/json' },
        body: txn(seen.get(w) ?? '0'),
      }),
      answer: (w, _s, status, _e, body) => {
        if (status !== 200 || body.includes('"error"')) return 'error';
        if (body.includes('"succeeded":true')) {
          // the key's new mod_revision is the header's revision (this txn's write)
          const rev = match(body, /"revision":"(\d+)"/);
          if (rev === undefined) return 'error';
          seen.set(w, rev);
          return 'swapped';
        }
        // the failure branch's range: the key's current mod_revision
        const rev = match(body, /"mod_revision":"(\d+)"/);
        if (rev === undefined) return 'error';
        seen.set(w, rev);
        return 'stale';
      },
    },
    {
      side: 'etcd',
      op: 'acquire',
      base,
      steps: 2,
      bad: ['error'],
      next: (w, step) =>
        step === 0
          ? { method: 'POST', path: '/v3/lease/grant', headers: { 'content-type': 'application/json' }, body: grant }
          : {
              method: 'POST',
              path: '/v3/kv/put',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ key, value: val, lease: leaseOf.get(w) ?? '0' }),
            },
      answer: (w, step, status, _e, body) => {
        if (status !== 200 || body.includes('"error"')) return 'error';
        if (step === 1) return 'put';
        const id = match(body, /"ID":"(\d+)"/);
        if (id === undefined) return 'error';
        leaseOf.set(w, id);
        return 'granted';
      },
    },
  ];
}

/** One request of each kind, answers checked field by field: the loads below count outcomes by cheaper string tests. */
async function strictChecks(hq: HqArbiter, base: string, value: string): Promise<void> {
  const key = b64('hq/lease');
  type Kv = { key: string; value: string; mod_revision: string; lease?: string };
  const r = await etcdCall<{ kvs?: Kv[] }>(base, '/v3/kv/range', { key });
  check(r.kvs?.length === 1 && unb64(r.kvs[0]!.value) === value, 'etcd range returns the record');
  const g = await etcdCall<{ ID: string; TTL: string }>(base, '/v3/lease/grant', { TTL: ETCD_TTL });
  const k = await etcdCall<{ ID: string; TTL: string }>(base, '/v3/lease/keepalive', { ID: g.ID });
  check(k.ID === g.ID && Number(k.TTL) > 0, `etcd keepalive renews (TTL ${k.TTL})`);
  const put = await etcdCall<{ header: { revision: string } }>(base, '/v3/kv/put', { key, value: b64(value) });
  check(
    Number(put.header.revision) > Number(r.kvs![0]!.mod_revision),
    `etcd put of the record writes a new revision (${put.header.revision})`,
  );
  const rev = put.header.revision;
  const txn = (mr: string) => ({
    compare: [{ key, target: 'MOD', result: 'EQUAL', mod_revision: mr }],
    success: [{ request_put: { key, value: b64(value) } }],
    failure: [{ request_range: { key } }],
  });
  type Txn = {
    succeeded?: boolean;
    header: { revision: string };
    responses?: Array<{ response_range?: { kvs?: Kv[] } }>;
  };
  const won = await etcdCall<Txn>(base, '/v3/kv/txn', txn(rev));
  check(won.succeeded === true, 'etcd txn at the current mod_revision succeeds');
  const lost = await etcdCall<Txn>(base, '/v3/kv/txn', txn(rev));
  const cur = lost.responses?.[0]?.response_range?.kvs?.[0]?.mod_revision;
  check(
    lost.succeeded !== true && cur === won.header.revision,
    'etcd txn at a stale mod_revision fails and its range names the current one',
  );
  await etcdCall(base, '/v3/kv/put', { key, value: b64(value), lease: g.ID });
  const after = await etcdCall<{ kvs?: Kv[] }>(base, '/v3/kv/range', { key });
  check(after.kvs?.[0]?.lease === g.ID, 'etcd put with a lease attaches it');

  const { mbp } = hq.tokens;
  const gen = hq.generation;
  const hb = await hqCall(hq, '/v1/heartbeat', mbp, {
    host: 'mbp',
    generation: gen,
    seenGeneration: gen,
    heartbeatSeconds: 600,
  });
  check(
    hb.status === 200 && hb.json['outcome'] === 'renewed',
    `hq heartbeat renews (${JSON.stringify(hb.json['outcome'])})`,
  );
  const okCas = await hqCall(
    hq,
    '/v1/lease/renew',
    mbp,
    { host: 'mbp', generation: gen },
    { 'if-match': hb.etag ?? `"${(hb.json['lease'] as { revision: number }).revision}"` },
  );
  check(okCas.status === 200, `hq renew at the current revision is 200 (${okCas.status})`);
  const stale = await hqCall(hq, '/v1/lease/renew', mbp, { host: 'mbp', generation: gen }, { 'if-match': '"1"' });
  check(
    stale.status === 412 && stale.etag === okCas.etag,
    `hq renew at a stale revision is 412 with the current ETag (${stale.status})`,
  );
}

/** Registers `n` machines in `a`'s registry (admin token, 16 at a time); every answer must be 200. */
async function registerMembers(a: HqArbiter, n: number): Promise<number> {
  const pool = new Pool(a.base, { connections: 16 });
  let next = 0;
  const observedAt = Date.now();
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (;;) {
          const i = next++;
          if (i >= n) return;
          const id = `m-${String(i).padStart(5, '0')}`;
          const res = await pool.request({
            method: 'POST',
            path: '/v1/resources/register',
            headers: jsonHeaders(a.tokens.admin),
            body: JSON.stringify({
              id,
              name: id,
              kind: 'machine',
              machine: id,
              attrs: { load1: 0.5 },
              observedAt,
              ttlMs: 86_400_000,
            }),
          });
          const text = await res.body.text();
          check(res.statusCode === 200, `register ${id} on ${a.base}: ${res.statusCode} ${text.slice(0, 200)}`);
        }
      }),
    );
  } finally {
    await pool.close();
  }
  return (performance.now() - started) / 1000;
}

/** Checks the acquire cycle of hq last: it moves the generation, which the renew scenarios name. */
async function strictAcquireCheck(hq: HqArbiter): Promise<void> {
  const { mbp } = hq.tokens;
  const rel = await hqCall(hq, '/v1/lease/release', mbp, { host: 'mbp' });
  const acq = await hqCall(hq, '/v1/lease/acquire', mbp, { host: 'mbp' });
  const g = (acq.json['lease'] as { generation: number } | undefined)?.generation ?? 0;
  check(
    rel.status === 200 && acq.status === 200 && acq.json['ok'] === true && g > hq.generation,
    `hq release then acquire grants a new generation (${rel.status}, ${acq.status}, ${g})`,
  );
}

// ---------------------------------------------------------------------------------------

interface Row {
  op: string;
  hq: Run[];
  /** The same arbiter with `store: etcd` on the same etcd member (≥ 0.8 × etcd's own). */
  hqEtcd: Run[];
  etcd: Run[];
  target: number | null;
}

/** The etcd-backed arbiter against the engine it uses: its overhead over etcd. */
const ETCD_ARBITER_TARGET = 0.8;

const ALL_OPS: ReadonlyArray<{ op: Op; label: string; target: number | null; hqOp: Op }> = [
  { op: 'read', label: 'read the lease', target: 5, hqOp: 'read' },
  { op: 'read-serializable', label: 'read (etcd serializable)', target: null, hqOp: 'read' },
  { op: 'renew', label: 'durable renew', target: 1, hqOp: 'renew' },
  { op: 'keepalive', label: 'renew (etcd keepalive: in memory)', target: null, hqOp: 'renew' },
  { op: 'cas', label: 'CAS, one key, contended', target: 3, hqOp: 'cas' },
  { op: 'acquire', label: 'acquire', target: null, hqOp: 'acquire' },
];
/**
 * `BENCH_OPS=renew` (a comma list of read, renew, cas, acquire; unset: all): only those hq
 * operations' rows, each with the etcd rows beside it (read: both reads; renew: put and keepalive).
 * For profiling one route (with `BENCH_PROFILE`) and quick partial runs.
 */
const OPS_CHOSEN = (process.env['BENCH_OPS'] ?? '')
  .split(',')
  .map((o) => o.trim())
  .filter((o) => o !== '');
const HQ_OPS: readonly Op[] = ['read', 'renew', 'cas', 'acquire'];
const badOp = OPS_CHOSEN.find((o) => !(HQ_OPS as readonly string[]).includes(o));
if (badOp !== undefined) {
  process.stderr.write(`bench:etcd: BENCH_OPS is a comma list of ${HQ_OPS.join(', ')}, not ${JSON.stringify(badOp)}\n`);
  process.exit(2);
}
const OPS = OPS_CHOSEN.length === 0 ? ALL_OPS : ALL_OPS.filter((o) => OPS_CHOSEN.includes(o.hqOp));

/** Rows whose hq figures are the row before's (the same hq operation beside another etcd one). */
const SHARED_HQ: ReadonlySet<Op> = new Set(['read-serializable', 'keepalive']);

const ms = (x: number): string => (Number.isNaN(x) ? '—' : x.toFixed(2));

function medianRun(runs: readonly Run[]): Run {
  const m = median(runs.map((r) => r.ops));
  const at = runs.find((r) => r.ops === m) ?? runs[0]!;
  return {
    ops: m,
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    statuses: at.statuses,
    outcomes: at.outcomes,
    cpu: at.cpu,
  };
}

async function main(): Promise<void> {
  const loadAtStart = loadavg()[0] ?? NaN;
  const bin = ensureEtcd();
  const dir = mkdtempSync(join(tmpdir(), 'hq-bench-etcd-'));
  track(async () => rmSync(dir, { recursive: true, force: true }));
  // one member at etcd's default timing, stopped by PID with everything else the bench started
  const cluster = await startEtcdCluster({ size: 1, dir, name: 'hq-bench', bin });
  track(() => cluster.stop());
  const member = cluster.members[0]!;
  const etcd = { base: member.clientUrl, version: cluster.version };
  process.stderr.write(`etcd ${etcd.version} (pid ${member.pid}) on ${etcd.base}, log ${member.log}\n`);
  if (ONLY === 'takeover') {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter')], {
      stdio: 'inherit',
    });
    const { tbl, runLine } = await takeovers(etcd.base, etcd.version, loadAtStart);
    process.stdout.write(`${runLine}\n\n${tbl}\n`);
    writeSection('etcd-takeover', takeoverDoc(tbl, runLine), 'etcd');
    return;
  }
  const profileArgs = PROFILE_DIR !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
  const hq = await startArbiter({ nodeArgs: profileArgs, onStop: track });
  process.stderr.write(`hq-arbiter (pid ${hq.daemon.proc.pid}) on ${hq.base}\n`);
  const hqe = await startArbiter({
    build: false,
    nodeArgs: profileArgs,
    onStop: track,
    store: { kind: 'etcd', endpoints: [etcd.base], prefix: '/hq-bench', advertiseUrl: 'http://127.0.0.1:1' },
  });
  process.stderr.write(`hq-arbiter with store etcd (pid ${hqe.daemon.proc.pid}) on ${hqe.base}\n`);
  SIDE_PIDS.hq.arbiter = hq.daemon.proc.pid ?? null;
  SIDE_PIDS['hq-etcd'] = { arbiter: hqe.daemon.proc.pid ?? null, etcd: member.pid ?? null };
  SIDE_PIDS.etcd.etcd = member.pid ?? null;

  // The value etcd stores and answers is hq's own record, so both sides move the same bytes.
  const etcds = await etcdScenarios(etcd.base, hq.record);
  await strictChecks(hq, etcd.base, hq.record);
  await strictAcquireCheck(hq);
  await strictAcquireCheck(hqe);
  const hqSide = hqScenarios(hq);
  await hqSide.settle();
  const hqeSide = hqScenarios(hqe, 'hq-etcd');
  await hqeSide.settle();
  const find = (list: Scenario[], op: Op): Scenario => list.find((s) => s.op === op)!;

  const rows: Row[] = OPS.map((o) => ({ op: o.label, hq: [], hqEtcd: [], etcd: [], target: o.target }));
  const plan = (round: number): Array<{ row: Row; s: Scenario }> => {
    const out: Array<{ row: Row; s: Scenario }> = [];
    OPS.forEach((o, i) => {
      const row = rows[i]!;
      const pair = [
        { row, s: find(hqSide.scenarios, o.hqOp) },
        { row, s: find(hqeSide.scenarios, o.hqOp) },
        { row, s: find(etcds, o.op) },
      ];
      // hq's reads are measured once, under the first read row (the second row shares them)
      const both = SHARED_HQ.has(o.op) ? pair.slice(2) : pair;
      // alternate which side goes first, so drift on a busy machine does not favour one side
      out.push(...(round % 2 === 0 ? both : [...both].reverse()));
    });
    return out;
  };
  const after = async (s: Scenario): Promise<void> => {
    if (s.side === 'hq' && s.op === 'acquire') await hqSide.settle();
    if (s.side === 'hq-etcd' && s.op === 'acquire') await hqeSide.settle();
  };

  process.stderr.write(`warm-up: ${WARMUP_SECONDS} s of each scenario, every answer checked…\n`);
  for (const { s } of plan(0)) {
    const r = await run(s, WARMUP_SECONDS);
    await after(s);
    const bad = s.bad.filter((b) => (r.outcomes.get(b) ?? 0) > 0);
    if (bad.length > 0 || r.outcomes.size === 0)
      throw new Error(`warm-up of ${s.side} ${s.op} had failed answers: ${r.statuses}`);
    process.stderr.write(`  ${s.side} ${s.op}: ${Math.round(r.ops)}/s ${r.statuses}\n`);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const { row, s } of plan(round)) {
      const r = await run(s, SECONDS);
      await after(s);
      (s.side === 'hq' ? row.hq : s.side === 'hq-etcd' ? row.hqEtcd : row.etcd).push(r);
      process.stderr.write(
        `round ${round + 1}/${ROUNDS} ${s.side} ${s.op}: ${Math.round(r.ops)}/s p50 ${r.p50.toFixed(2)} ms ${r.statuses}\n`,
      );
    }
  }
  // The holder's heartbeat again, with MEMBERS machines in each arbiter's registry.
  const withMembers: Array<{ side: string; seconds: number; run: Run }> = [];
  if (MEMBERS > 0) {
    for (const [side, a, sc] of [
      ['hq', hq, hqSide],
      ['hq(etcd)', hqe, hqeSide],
    ] as const) {
      const seconds = await registerMembers(a, MEMBERS);
      process.stderr.write(`${side}: ${MEMBERS} registry members registered in ${seconds.toFixed(1)} s\n`);
      await sc.settle();
      withMembers.push({ side, seconds, run: await run(find(sc.scenarios, 'renew'), SECONDS) });
    }
  }
  // hq's read row is shared by the two read rows, its renew row by the two renew rows
  OPS.forEach((o, i) => {
    if (!SHARED_HQ.has(o.op)) return;
    rows[i]!.hq = rows[i - 1]!.hq;
    rows[i]!.hqEtcd = rows[i - 1]!.hqEtcd;
  });
  // The arbiters measured above stop first: the takeover rounds have the machine to themselves.
  await hq.stop();
  await hqe.stop();
  const take = TAKEOVERS > 0 ? await takeovers(etcd.base, etcd.version, loadavg()[0] ?? NaN) : null;
  await cleanup();

  // Derived rows from the same runs: the CAS answers that swapped, the acquires that were fresh
  // grants (hq; every etcd iteration is one), per second; no latencies of their own.
  const only =
    (labels: readonly string[], of: readonly string[]) =>
    (r: Run): Run => {
      const count = (ls: readonly string[]): number => ls.reduce((a, l) => a + (r.outcomes.get(l) ?? 0), 0);
      const n = count(labels);
      const total = count(of);
      return {
        ...r,
        ops: total === 0 ? 0 : (r.ops * n) / total,
        p50: NaN,
        p99: NaN,
        statuses: `${labels.join('+')} ${n} of ${total}`,
      };
    };
  const derive = (
    label: string,
    op: string,
    hqOnly: ReturnType<typeof only>,
    etcdOnly: ReturnType<typeof only>,
  ): void => {
    const i = rows.findIndex((r) => r.op === op);
    if (i < 0) return; // not run (BENCH_OPS)
    rows.splice(i + 1, 0, {
      op: label,
      hq: rows[i]!.hq.map(hqOnly),
      hqEtcd: rows[i]!.hqEtcd.map(hqOnly),
      etcd: rows[i]!.etcd.map(etcdOnly),
      target: null,
    });
  };
  derive(
    'CAS: successful swaps only',
    'CAS, one key, contended',
    only(['swapped'], ['swapped', 'stale']),
    only(['swapped'], ['swapped', 'stale']),
  );
  derive(
    'acquire: fresh grants only',
    'acquire',
    only(['acquired(granted)'], ['acquired(granted)', 'acquired(renewed)']),
    only(['put'], ['put']),
  );

  const body = rows.map((row) => {
    const h = medianRun(row.hq);
    const x = medianRun(row.hqEtcd);
    const e = medianRun(row.etcd);
    const ratio = h.ops / e.ops;
    const xr = x.ops / e.ops;
    const met = row.target === null ? '—' : ratio >= row.target ? 'yes' : 'no';
    const derived = row.op.includes('only');
    return [
      row.op,
      Math.round(h.ops),
      ms(h.p50),
      ms(h.p99),
      Math.round(x.ops),
      ms(x.p99),
      Math.round(e.ops),
      ms(e.p50),
      ms(e.p99),
      ratio.toFixed(2),
      row.target === null ? '—' : `≥ ${row.target}×`,
      met,
      xr.toFixed(2),
      derived || (row.target === null && row.op !== 'acquire') ? '—' : xr >= ETCD_ARBITER_TARGET ? 'yes' : 'no',
      `hq ${h.statuses}; hq(etcd) ${x.statuses}; etcd ${e.statuses}`,
    ];
  });
  const tbl = table(
    [
      'operation',
      'hq ops/s',
      'hq p50 ms',
      'hq p99 ms',
      'hq(etcd) ops/s',
      'hq(etcd) p99 ms',
      'etcd ops/s',
      'etcd p50 ms',
      'etcd p99 ms',
      'hq/etcd',
      'target',
      'met?',
      `hq(etcd)/etcd (≥ ${ETCD_ARBITER_TARGET})`,
      'met?',
      'statuses (median round)',
    ],
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'r', 'l', 'l'],
    body,
  );
  // Where the CPU of the median round went, per answer: on a machine whose cores the load
  // generator, etcd and the arbiter share, throughput is bounded by the sum.
  const us = (n: number): string => (Number.isFinite(n) ? Math.round(n).toString() : '—');
  const cpuRows = rows
    .filter((row) => !row.op.includes('only'))
    .map((row) => {
      const x = medianRun(row.hqEtcd).cpu;
      const e = medianRun(row.etcd).cpu;
      const xt = x.arbiter + x.etcd + x.client;
      const et = e.etcd + e.client;
      return [
        row.op,
        us(x.arbiter),
        us(x.etcd),
        us(x.client),
        us(xt),
        us(e.etcd),
        us(e.client),
        us(et),
        (et / xt).toFixed(2),
        (medianRun(row.hqEtcd).ops / medianRun(row.etcd).ops).toFixed(2),
      ];
    });
  const cpuTbl = table(
    [
      'operation',
      'hq(etcd): arbiter µs',
      'its etcd µs',
      'load generator µs',
      'total µs',
      'etcd alone: etcd µs',
      'load generator µs',
      'total µs',
      'CPU bound: etcd total ÷ hq(etcd) total',
      'measured hq(etcd)/etcd',
    ],
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    cpuRows,
  );
  const cpuPart = `\nCPU time per answer (µs, utime + stime from /proc of each process over its run, median round; the load generator is this process). On ${cpus().length} cores shared by all three, a side that needs more CPU per answer answers fewer per second: the next-to-last column is the ratio the CPU alone allows.\n\n${cpuTbl}\n`;
  const busy = loadAtStart > cpus().length ? ' — a busy machine, the figures are noisy' : '';
  const machine = machineLine(
    `, etcd ${etcd.version}, ${CONNECTIONS} connections, ${SECONDS} s × ${ROUNDS} rounds per operation and side (medians), load average ${loadAtStart.toFixed(1)} at the start${busy}`,
  );
  const members =
    withMembers.length === 0
      ? ''
      : table(
          ['side', `registering ${MEMBERS} members, s`, 'heartbeats/s', 'p50 ms', 'p99 ms', 'statuses'],
          ['l', 'r', 'r', 'r', 'r', 'l'],
          withMembers.map((m) => [
            m.side,
            m.seconds.toFixed(1),
            Math.round(m.run.ops),
            ms(m.run.p50),
            ms(m.run.p99),
            m.run.statuses,
          ]),
        );
  process.stdout.write(
    `${machine}\n\n${tbl}\n${cpuPart}${members === '' ? '' : `\nThe holder's heartbeat with ${MEMBERS} registry members:\n\n${members}\n`}${take === null ? '' : `\nArbiter takeover:\n\n${take.tbl}\n`}`,
  );
  const takeSection =
    take === null
      ? ''
      : `<!-- bench:etcd-takeover -->\n${takeoverDoc(take.tbl, take.runLine).trim()}\n<!-- /bench:etcd-takeover -->\n`;
  writeSection('etcd', doc(machine, `${tbl}${cpuPart}`, etcd.version, members, takeSection));
}

/** The takeover rounds with every setting: the table and its run line. */
async function takeovers(base: string, version: string, loadNow: number): Promise<{ tbl: string; runLine: string }> {
  const results: Array<{ setting: TakeoverSetting; rounds: TakeoverRound[] }> = [];
  for (const setting of TAKEOVER_SETTINGS) {
    results.push({
      setting,
      rounds: await measureTakeovers(base, setting, TAKEOVERS, track, (l) => process.stderr.write(`${l}\n`)),
    });
  }
  const busy = loadNow > cpus().length ? ' — a busy machine' : '';
  const runLine = `${new Date().toISOString()} — ${machineLine(`, etcd ${version} (one member, default timing), ${TAKEOVERS} rounds per setting, load average ${loadNow.toFixed(1)} at the start${busy}`)}`;
  return { tbl: takeoverTable(results), runLine };
}

function doc(machine: string, tbl: string, version: string, members: string, takeSection: string): string {
  return `## hq beside etcd

Command: \`npm run bench:etcd\` (\`BENCH_SECONDS\` (10), \`BENCH_ROUNDS\` (3), \`BENCH_CONNECTIONS\` (32) to change the run;
\`BENCH_WRITE=0\` to not rewrite this file; \`BENCH_PROFILE=DIR\` to run the arbiter under \`node --cpu-prof\`;
\`BENCH_OPS=renew\` (a comma list of read, renew, cas, acquire) for those operations' rows only;
\`BENCH_TAKEOVERS\` (5) rounds of the takeover part, 0 to leave it out; \`BENCH_ONLY=takeover\` for that part alone).

Run: ${new Date().toISOString()} — ${machine}.

${tbl}
${
  members === ''
    ? ''
    : `
The holder's heartbeat (\`POST /v1/heartbeat\`, renewed, ${CONNECTIONS} connections, ${SECONDS} s) again after ${MEMBERS} machines were
registered in each arbiter's registry (\`POST /v1/resources/register\`, admin token, 16 at a time):

${members}
`
}
How it runs. One real \`hq-arbiter serve\` (set up as in the arbiter bench: temp config on 127.0.0.1, member
tokens from \`hq-arbiter token issue\`, the 10.5 s start wait, both candidates heartbeat, mbp acquires) and one
etcd ${version} (Debian's \`etcd-server\`), a single member with \`--listen-client-urls\`, \`--listen-peer-urls\` and
the advertised URLs all on \`http://127.0.0.1:<free port>\` and \`--data-dir\` in a temp dir, on the same ext4 disk
as the arbiter's SQLite file; default etcd settings otherwise. Both are driven by the same \`load()\` of
\`bench/lib.ts\` (undici, closed loop, ${CONNECTIONS} connections, keep-alive, no pipelining), the load generator on the
same cores as the servers. etcd is spoken to through its HTTP/JSON gRPC gateway (\`/v3/…\`, keys and values
base64), the HTTP face it offers to a client like this one; the gateway runs inside the etcd process and
forwards each call to etcd's gRPC server over a loopback connection, so a native gRPC client would see etcd
somewhat faster than this. The value etcd stores and answers is hq's own lease record (its JSON, about the size
hq answers). Each operation runs ${ROUNDS > 1 ? `${ROUNDS} rounds` : 'once'} per side, the side that goes first alternating by round; the table
gives the median round's ops/s, the medians of p50 and p99, and that round's HTTP statuses and outcome
counts. Before the rounds, one request of each kind is checked field by field (etcd: the range returns the
record, keepalive answers the lease's ID with TTL > 0, a txn at the current mod_revision succeeds and one at a
stale one fails with the current mod_revision in its range; hq: heartbeat \`outcome: renewed\`, 200 at the current
ETag and 412 with the current ETag at a stale one, release + acquire grants a new generation), then every
scenario runs ${WARMUP_SECONDS} s with every answer classified; any error answer stops the bench. During the rounds every answer is
classified the same way (the outcome counts in the last column).

**hq(etcd)** is a second \`hq-arbiter serve\` with \`store: {kind: "etcd"}\` on the same etcd member (prefix
\`/hq-bench\`; it is elected at once, the only campaigner, then waits out its start wait like the other), driven
by the same hq scenarios: a group of decisions (the requests that arrived while the last one was in flight) is
one etcd txn comparing the state's \`mod_revision\` and the election key, decided on the store's last commit
(apps/arbiter/README.md, "The etcd store": no read before it), and one group is in flight at a time — so it is bounded by etcd's
own figures; after a group, the next waits up to 2 ms for that group's callers to come back (\`LINGER_MS\`), so that
the 32 connections' requests share one txn rather than two; a renew's txn also writes its \`renewed\` event (the event
log), etcd's put writes one key. The goal
is ≥ ${ETCD_ARBITER_TARGET} × etcd's ops/s for the same operation (its overhead over the engine it uses); the SQLite
arbiter's figures stay where they were.

What one operation is, per side:

- **read the lease**: hq \`GET /v1/lease\` (open reads, no token; the record from the arbiter's single SQLite row)
  vs etcd \`POST /v3/kv/range\` of the key, linearizable (etcd's default: a ReadIndex through raft before the read).
  The next row is the same hq figure beside a \`serializable: true\` range (no ReadIndex; on one member it is as
  fresh), for information: no target.
- **durable renew**: hq \`POST /v1/heartbeat\` of the holder (outcome \`renewed\`: a new \`expiresAt\`, written with
  \`synchronous=FULL\`, so one fsync'd SQLite commit per renew; hq(etcd): one etcd txn, through raft) vs etcd
  \`POST /v3/kv/put\` of the record, all connections renewing the one record/key on each side: a renew that survives
  a power cut, on etcd a raft write (WAL + fsync). The next row is the same hq figure beside etcd's own lease
  renewal, \`POST /v3/lease/keepalive\` of one lease (TTL ${ETCD_TTL} s), for information: **etcd 3.4 does not persist a
  keepalive** — the leader renews the lease in memory (no raft entry, no WAL write, no fsync; lease checkpointing
  is off by default), and after a restart every lease gets its full TTL again — so it is the same call for a
  client but not the same work.
- **CAS, one key, contended**: hq \`POST /v1/lease/renew\` of the holder with \`If-Match: "<revision>"\`; a loser gets
  412 with the current revision as its ETag and retries with it. etcd \`POST /v3/kv/txn\`: compare the key's
  \`mod_revision\` with the one last seen → put the record; the failure branch ranges the key, and a loser retries
  with the \`mod_revision\` it got. All ${CONNECTIONS} connections race on the one record/key; ops/s counts every answer (a swap
  or a refusal naming the current revision; the split is in the last column); the row after it counts the
  successful swaps only (per second, from the same runs). On hq a refusal is a read inside
  the write transaction with nothing written; on etcd every txn holding a put goes through raft, swap or not.
- **acquire**: one iteration is two requests on one connection, and the ops/s and latencies are per iteration
  (from sending the first request to reading the second answer). hq: \`POST /v1/lease/release\` \`{host:"mbp"}\`
  then \`POST /v1/lease/acquire\` \`{host:"mbp"}\`; acquire of a released lease by its own holder is a grant with a new
  generation and no lock-delay (lock-delay protects a *different* previous holder; lease-core \`acquire\`),
  so every acquire answers 200 \`ok: true\`. With ${CONNECTIONS} connections on the one record, an acquire may find the lease
  already granted again by another connection's acquire and then renews it (the holder re-acquiring renews; still
  200 \`ok: true\`) — the split granted/renewed is in the last column, and a release may find it already released
  (200, nothing to change). etcd: \`POST /v3/lease/grant\` (TTL ${ETCD_TTL} s) then \`POST /v3/kv/put\` of the key with that lease — both
  raft writes, every one a success; there is no exclusion in it (an etcd lock would add a txn on create_revision).
  No etcd lease expires during the run (TTL 1500 s), so no revocations load etcd. The row after it counts, of the
  same runs, only the iterations whose acquire was a fresh grant on hq (all of them on etcd).

Where the CPU is: the arbiter answers on one Node main thread (its SQLite commit and fsync run on it too),
etcd's Go runtime uses every core, and the load generator (Node, this process) shares the same cores with both.

${takeSection === '' ? '' : `${takeSection}\n`}No etcd service is left behind: the install (only when no \`etcd\` is on PATH, as root) runs with a
\`policy-rc.d\` that refuses service starts (the one already in this container, or a temporary one the bench
writes and removes) and \`RUNLEVEL=1\`, and any \`etcd\` process that appears during the install is stopped by PID.
In this container the install said \`invoke-rc.d: policy-rc.d denied execution of start\` and created the package's
systemd links (\`etcd.service\`, \`etcd2.service\`), which nothing runs: there is no systemd here, and no etcd
listened on :2379 afterwards. The bench's etcd listens on two 127.0.0.1 ports only (client, peer). The bench's own etcd and arbiter are
stopped by PID at the end, on error and on SIGINT/SIGTERM, and their temp dirs removed.
`;
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    interrupted = true;
    process.stderr.write(`${sig}: stopping what the bench started…\n`);
    void cleanup().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (err) {
  // after a signal, the runs fail because their servers are gone: not worth a report
  if (!interrupted) {
    process.stderr.write(`bench:etcd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  }
} finally {
  await cleanup();
}
if (interrupted) await new Promise(() => {}); // the signal handler exits with 130
