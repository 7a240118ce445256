/**
 * The takeover part of `npm run bench:etcd` ("arbiter takeover time"): two real
 * `hq-arbiter serve` processes on one prefix of the bench's etcd, both candidates reporting and
 * mbp holding the lease; then, per round, kill -9 of the elected arbiter and, measured from the
 * kill, the time until the other
 *   (1) says it is elected (`GET /v1/health` → `arbiters.elected`),
 *   (2) answers a decision: mbp's `POST /v1/heartbeat` answered 200 `outcome: renewed`,
 *   (3) answers one without an S2.3 hold (`hold` null or not after the answer's `now`): both
 *       candidates have reported in requests that count, 2 × their request timeout after the
 *       takeover (lease-core `renewHold`).
 * The killed arbiter is restarted on its config and must see the survivor elected before the
 * next round kills the survivor. Run once with the default `electionTtlSeconds` and once with a
 * short one (the system tests' settings).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/system/harness.js';
import { ARBITER_CLI, jsonHeaders, spawnDaemon } from './hq-arbiter.js';
import { median, sleep, stopProc, table, type Daemon } from './lib.js';

/** The agents' default request timeout: what both candidates declare in their reports (S2.3 counts 2 × it from the takeover). */
const AGENT_REQUEST_TIMEOUT = 5;
/** How often the survivor is asked, from the kill on. */
const POLL_MS = 50;
/** A round that sees no unheld renewal by then fails the bench. */
const ROUND_LIMIT_MS = 120_000;

export interface TakeoverSetting {
  readonly label: string;
  /** Extra keys of the arbiters' `store` (none: the defaults). */
  readonly store: Readonly<Record<string, number>>;
  /** The election TTL those keys give (for the table). */
  readonly electionTtlSeconds: number;
}

export const TAKEOVER_SETTINGS: readonly TakeoverSetting[] = [
  { label: 'default', store: {}, electionTtlSeconds: 10 },
  {
    label: 'short',
    store: { dialTimeoutSeconds: 0.5, requestTimeoutSeconds: 1, electionTtlSeconds: 4 },
    electionTtlSeconds: 4,
  },
];

export interface TakeoverRound {
  readonly killed: number;
  readonly electedMs: number;
  readonly decisionMs: number;
  readonly unheldMs: number;
}

interface Health {
  arbiters?: { elected: boolean; leader: string | null };
}

async function health(base: string): Promise<Health | null> {
  try {
    const res = await fetch(`${base}/v1/health`, { signal: AbortSignal.timeout(1000) });
    return res.ok ? ((await res.json()) as Health) : null;
  } catch {
    return null;
  }
}

async function post(
  base: string,
  path: string,
  token: string,
  body: unknown,
  timeoutMs = 2000,
): Promise<{ status: number; json: Record<string, unknown> } | null> {
  try {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: jsonHeaders(token),
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // not JSON (a proxy's error page): the status says enough
    }
    return { status: res.status, json };
  } catch {
    return null; // no answer within the timeout, or refused
  }
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`takeover: ${what} did not happen within ${ms / 1000} s`);
    await sleep(POLL_MS);
  }
}

/**
 * `rounds` takeovers with one setting; `track` registers each arbiter's stop (and the temp dir's
 * removal) with the bench's cleanup.
 */
export async function measureTakeovers(
  etcdBase: string,
  setting: TakeoverSetting,
  rounds: number,
  track: (stop: () => Promise<void>) => void,
  log: (s: string) => void,
): Promise<TakeoverRound[]> {
  const dir = mkdtempSync(join(tmpdir(), `hq-bench-takeover-${setting.label}-`));
  track(async () => rmSync(dir, { recursive: true, force: true }));
  const ports = [await freePort(), await freePort()];
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);
  const configs = ports.map((port, i) => {
    const config = join(dir, `arbiter-${i}.json`);
    mkdirSync(join(dir, `var-${i}`), { recursive: true });
    writeFileSync(
      config,
      JSON.stringify({
        dataDir: join(dir, `var-${i}`),
        listen: { host: '127.0.0.1', port },
        tailscaleBin: '',
        store: {
          kind: 'etcd',
          endpoints: [etcdBase],
          prefix: `/hq-bench-takeover-${setting.label}-${process.pid}`,
          advertiseUrl: urls[i],
          ...setting.store,
        },
      }),
    );
    return config;
  });
  // Tokens live in etcd under the prefix: issued once, valid at both arbiters.
  const issue = (m: string): string =>
    execFileSync(process.execPath, [ARBITER_CLI, 'token', 'issue', m, '--scope', 'member', '--config', configs[0]!], {
      encoding: 'utf8',
    }).trim();
  const mbp = issue('mbp');
  const nodeb = issue('node-b');

  const procs: Array<Daemon['proc'] | null> = [null, null];
  const start = async (i: number): Promise<void> => {
    let stopped = false;
    track(async () => {
      stopped = true;
      const p = procs[i];
      if (p !== null && p !== undefined) await stopProc(p);
    });
    await spawnDaemon([ARBITER_CLI, 'serve', '--config', configs[i]!], 'hq-arbiter listening', (p) => {
      procs[i] = p;
      if (stopped) p.kill('SIGKILL');
    });
  };
  await start(0);
  await start(1);
  const elected =
    (await until('an election', 30_000, async () => {
      for (const i of [0, 1]) if ((await health(urls[i]!))?.arbiters?.elected === true) return i + 1;
      return null;
    })) - 1;
  log(
    `takeover (${setting.label}): arbiter ${elected} elected; waiting 2 × ${AGENT_REQUEST_TIMEOUT} s for reports that count (S2.3), then mbp acquires…`,
  );
  await sleep(2 * AGENT_REQUEST_TIMEOUT * 1000 + 500);
  for (const [host, token] of [
    ['mbp', mbp],
    ['node-b', nodeb],
  ] as const) {
    const r = await post(urls[elected]!, '/v1/heartbeat', token, {
      host,
      seenGeneration: 0,
      requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT,
    });
    if (r?.status !== 200) throw new Error(`takeover: ${host}'s first report answered ${r?.status ?? 'nothing'}`);
  }
  const acq = await post(urls[elected]!, '/v1/lease/acquire', mbp, { host: 'mbp' });
  const generation = (acq?.json['lease'] as { generation?: number } | undefined)?.generation;
  if (acq?.status !== 200 || acq.json['ok'] !== true || typeof generation !== 'number')
    throw new Error(`takeover: mbp's acquire answered ${acq?.status ?? 'nothing'} ${JSON.stringify(acq?.json ?? {})}`);
  const hbMbp = { host: 'mbp', generation, seenGeneration: generation, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT };
  const hbNodeb = { host: 'node-b', seenGeneration: generation, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT };

  const out: TakeoverRound[] = [];
  let leader = elected;
  for (let round = 0; round < rounds; round++) {
    const killed = leader;
    const other = 1 - killed;
    const base = urls[other]!;
    const proc = procs[killed]!;
    const gone = new Promise<void>((res) =>
      proc.exitCode !== null || proc.signalCode !== null ? res() : proc.once('exit', () => res()),
    );
    const killedAt = performance.now();
    proc.kill('SIGKILL');
    await gone;
    let electedMs: number | null = null;
    let decisionMs: number | null = null;
    let unheldMs: number | null = null;
    let done = false;
    // Asked concurrently, every POLL_MS, each answer timed when it arrives; a request sent
    // before the survivor decides may hang in its forwarding to the dead one, so none waits for another.
    const inflight = new Set<Promise<void>>();
    let tick = 0;
    const deadline = killedAt + ROUND_LIMIT_MS;
    while (!done) {
      if (performance.now() > deadline)
        throw new Error(
          `takeover round ${round + 1} (${setting.label}): no unheld renewal from arbiter ${other} within ${ROUND_LIMIT_MS / 1000} s (elected ${electedMs ?? 'never'}, decision ${decisionMs ?? 'never'})`,
        );
      const ask = async (): Promise<void> => {
        if (electedMs === null && (await health(base))?.arbiters?.elected === true)
          electedMs ??= performance.now() - killedAt;
      };
      const renew = async (): Promise<void> => {
        const r = await post(base, '/v1/heartbeat', mbp, hbMbp);
        if (r?.status !== 200 || r.json['outcome'] !== 'renewed') return;
        const at = performance.now() - killedAt;
        decisionMs ??= at;
        const hold = r.json['hold'] as number | null;
        const now = (r.json['lease'] as { now?: number } | undefined)?.now ?? Infinity;
        if (hold === null || hold <= now) {
          unheldMs ??= at;
          done = true;
        }
      };
      const standby = async (): Promise<void> => {
        await post(base, '/v1/heartbeat', nodeb, hbNodeb);
      };
      const fire = (p: Promise<void>): void => {
        inflight.add(p);
        void p.finally(() => inflight.delete(p));
      };
      fire(ask());
      fire(renew());
      if (tick++ % 10 === 0) fire(standby());
      await sleep(POLL_MS);
    }
    await Promise.allSettled([...inflight]);
    if (electedMs === null)
      electedMs = (await health(base))?.arbiters?.elected === true ? performance.now() - killedAt : NaN;
    out.push({ killed, electedMs: electedMs, decisionMs: decisionMs!, unheldMs: unheldMs! });
    log(
      `takeover (${setting.label}) ${round + 1}/${rounds}: arbiter ${killed} killed → arbiter ${other} elected ${(electedMs / 1000).toFixed(2)} s, first renewal ${(decisionMs! / 1000).toFixed(2)} s, unheld ${(unheldMs! / 1000).toFixed(2)} s`,
    );
    leader = other;
    // The killed one back, following the survivor, before the survivor is killed in turn.
    await start(killed);
    await until(
      `arbiter ${killed} seeing arbiter ${other} elected`,
      30_000,
      async () => (await health(urls[killed]!))?.arbiters?.leader === base,
    );
  }
  for (const p of procs) if (p !== null) await stopProc(p);
  return out;
}

const s = (ms: number): string => (Number.isNaN(ms) ? '—' : (ms / 1000).toFixed(2));

/** The takeover table: per setting, median and max of the three figures. */
export function takeoverTable(
  results: ReadonlyArray<{ setting: TakeoverSetting; rounds: readonly TakeoverRound[] }>,
): string {
  return table(
    [
      'election TTL',
      'rounds',
      'elected, median s',
      'max s',
      'first renewal answered, median s',
      'max s',
      'renewal without S2.3 hold, median s',
      'max s',
    ],
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    results.map(({ setting, rounds }) => {
      const col = (f: (r: TakeoverRound) => number): [string, string] => {
        const xs = rounds.map(f);
        return [s(median(xs)), s(Math.max(...xs))];
      };
      const extra = Object.entries(setting.store)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      return [
        `${setting.electionTtlSeconds} s (${setting.label}${extra === '' ? '' : `: ${extra}`})`,
        rounds.length,
        ...col((r) => r.electedMs),
        ...col((r) => r.decisionMs),
        ...col((r) => r.unheldMs),
      ];
    }),
  );
}

/** The takeover part of the bench:etcd section (its own markers, inside that section). */
export function takeoverDoc(tbl: string, runLine: string): string {
  return `### Arbiter takeover

Command: \`BENCH_ONLY=takeover npm run bench:etcd\` for this part alone (\`BENCH_TAKEOVERS\` rounds per setting, 5 by default;
the whole bench runs it last).

Run: ${runLine}.

${tbl}

How it runs. Two real \`hq-arbiter serve\` processes with \`store: {kind: "etcd"}\` on one prefix of the bench's etcd
member (127.0.0.1, each \`advertiseUrl\` its own port), member tokens for mbp and node-b issued into etcd; once one
is elected, both candidates report (\`requestTimeoutSeconds: ${AGENT_REQUEST_TIMEOUT}\`, the agents' default) after the start wait and mbp
acquires. Each round kills the elected arbiter with SIGKILL and, from the kill, asks the other every ${POLL_MS} ms (each
request on its own, none waiting for another): \`GET /v1/health\` until \`arbiters.elected\` is true (**elected**); mbp's
\`POST /v1/heartbeat\` until one is answered 200 \`outcome: renewed\` (**first renewal answered**: the first decision
of the new term); and until such an answer has no S2.3 hold (\`hold\` null: **renewal without hold**; node-b reports
every ${POLL_MS * 10} ms too). The killed arbiter is then restarted on its config and must see the survivor elected before
the next round kills the survivor. Median and maximum over the rounds, in seconds.

What bounds the figures. **Elected** is bounded by the etcd lease TTL of the killed arbiter's election key
(\`electionTtlSeconds\`): etcd deletes the key when the lease expires, at most one TTL after the last keep-alive it
received (plus etcd's expiry sweep, ≈ 0.5 s), and the campaigner waiting behind it is elected as soon as the key is
gone; it is less than a TTL by however long ago the last keep-alive was. **First renewal answered** adds the takeover
itself (a new boot and lease-core \`atRestart\`, written under the new term's guard: a few etcd round trips). From then
on every grant of the term waits for S2.3's start wait (no grant may let a *new* holder run before the takeover +
\`ttlSeconds\` + \`safetyMarginSeconds\`, unless every candidate reported never having seen a generation), and the
holder's renewals carry a hold until every candidate has reported in a request sent ${2} × its request timeout after
the takeover (**renewal without hold**: the takeover + 2 × ${AGENT_REQUEST_TIMEOUT} s + the next report); the running holder keeps running
on its peers' confirmations meanwhile (L2). So a failover of the *lease* across an arbiter takeover is bounded by
L1 + the election TTL + the takeover, and a new grant by the election TTL + the start wait.
`;
}
