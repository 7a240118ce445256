/**
 * `npx tsx bench/moves.ts`: planned moves at the times an operator makes them, and the holder's
 * agent restarted during an arbiter outage, at the fast settings and at the defaults, on the
 * system tests' cluster (test/system/harness.ts; at the defaults each daemon's file holds only
 * its wiring, every timing key left to its own default). One cluster per setting, in this order:
 *  1. `hq failover --to node-b` right after the arbiter's first start (mbp acquired and runs);
 *  2. `hq failover` back, once the arbiter is older than ttl + margin + 5 s ("long after");
 *  3. the arbiter restarted (SIGTERM, start on the same data directory), `hq failover` 5 s later;
 *     then restarted again and `hq lease release --handover-to` on the holder 5 s later;
 *  4. the arbiter killed; once the holder runs on its peer's confirmation, its agent restarted
 *     (SIGTERM, start on the same state directory): the time until it runs again.
 * Each figure is the time to the host's first `run: true` on its own unix socket (polled every
 * 50 ms); moves count from `hq failover`'s own start (its Node start-up included). Whether the
 * new holder gave the old one a peer confirmation (it then waits that confirmation out itself)
 * is sampled from its agent's status while the move waits.
 *
 * BENCH_MOVES_SETTINGS=fast|defaults|both (default both). At the defaults step 2 waits ttl + margin
 * (25.5 min), and step 3 waits as long again when the new holder confirmed the old one meanwhile.
 */
import { Cluster, type HostName } from '../test/system/harness.js';
import { machineLine, sleep, table, writeSection } from './lib.js';

type Settings = 'fast' | 'defaults';
const WHICH = process.env['BENCH_MOVES_SETTINGS'] ?? 'both';
/** BENCH_MOVES_LONG=0 leaves out step 2 (at the defaults it waits 25.5 min). */
const LONG = process.env['BENCH_MOVES_LONG'] !== '0';
const POLL_MS = 50;
/** ttl + margin per setting (the fast settings' and the arbiter's defaults). */
const START_WAIT_S: Record<Settings, number> = { fast: 7, defaults: 1530 };

interface Row {
  settings: Settings;
  path: string;
  move: string;
  /** Seconds from `hq failover` (or the agent's restart) to the first `run: true`. */
  seconds: number;
  /** Seconds since the arbiter's (re)start at that moment; null when the arbiter was down. */
  sinceStart: number | null;
  /** The new holder's own confirmation of the old one, when it held one while it waited. */
  gave: string;
}

function log(line: string): void {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`);
}

async function runs(c: Cluster, h: HostName): Promise<boolean> {
  return (await c.fence(h))?.run === true;
}

/** `hq failover --to to` (or a handover to it by `handoverBy`), then polls until `to` runs; samples whether it holds a confirmation it gave meanwhile. */
async function move(
  c: Cluster,
  to: HostName,
  limitS: number,
  handoverBy: HostName | null = null,
): Promise<{ seconds: number; gave: string }> {
  const started = Date.now();
  const cli =
    handoverBy === null
      ? c.hq(to, ['failover', '--to', to], { HQ_ADMIN_TOKEN: c.adminToken })
      : c.hq(handoverBy, ['lease', 'release', '--handover-to', to]);
  let gave = '';
  let lastSample = 0;
  for (;;) {
    if (await runs(c, to)) break;
    if (Date.now() - started > limitS * 1000) throw new Error(`${to} did not run within ${limitS} s`);
    if (Date.now() - lastSample > 1000) {
      lastSample = Date.now();
      const g = (await c.status(to))?.['gaveConfirmation'] as { waitSeconds: number } | null | undefined;
      if (gave === '' && g !== null && g !== undefined && g.waitSeconds > 0)
        gave = `yes (${g.waitSeconds.toFixed(0)} s left when seen)`;
    }
    await sleep(POLL_MS);
  }
  const seconds = (Date.now() - started) / 1000;
  const out = await cli;
  if (out.code !== 0)
    throw new Error(
      `${handoverBy === null ? 'hq failover' : 'hq lease release --handover-to'} ${to} exited ${out.code}: ${out.stderr.trim()}`,
    );
  return { seconds, gave: gave === '' ? 'no' : gave };
}

async function series(settings: Settings): Promise<Row[]> {
  const rows: Row[] = [];
  const startWait = START_WAIT_S[settings];
  // A move waits for the old holder's next refresh and the new holder's (60 s each at the
  // defaults), or, when the new holder confirmed the old one, for that confirmation's validity.
  const limitS = startWait + 300;
  const c = await Cluster.create({ settings });
  try {
    let arbiterStart = Date.now();
    await c.startArbiter();
    await c.startAgent('mbp');
    await c.startAgent('node-b');
    const acq = await c.hq('mbp', ['lease', 'acquire', '--wait', '60']);
    if (acq.code !== 0) throw new Error(`hq lease acquire exited ${acq.code}: ${acq.stderr.trim()}`);
    await c.waitFor(async () => runs(c, 'mbp'), limitS * 1000, 'mbp runs');
    log(`${settings}: mbp runs ${((Date.now() - arbiterStart) / 1000).toFixed(1)} s after the arbiter's first start`);
    await c.waitFor(async () => (await c.fence('node-b'))?.holder === 'mbp', limitS * 1000, 'node-b knows mbp holds');
    const since = (): number => (Date.now() - arbiterStart) / 1000;

    let s0 = since();
    let m = await move(c, 'node-b', limitS);
    rows.push({ settings, path: 'right after the first start', move: 'mbp → node-b', sinceStart: s0, ...m });
    log(`${settings}: fresh start: ${m.seconds.toFixed(2)} s`);

    let from: HostName = 'node-b';
    if (LONG) {
      const older = (startWait + 5) * 1000 - (Date.now() - arbiterStart);
      if (older > 0) {
        log(`${settings}: waiting ${(older / 1000).toFixed(0)} s until the arbiter is older than ttl + margin + 5 s`);
        await sleep(older);
      }
      await c.waitFor(async () => (await c.fence('mbp'))?.holder === 'node-b', limitS * 1000, 'mbp knows node-b holds');
      s0 = since();
      m = await move(c, 'mbp', limitS);
      rows.push({ settings, path: 'long after the start', move: 'node-b → mbp', sinceStart: s0, ...m });
      log(`${settings}: long after: ${m.seconds.toFixed(2)} s`);
      from = 'mbp';
    }
    const to = c.other(from);
    await c.waitFor(async () => (await c.fence(to))?.holder === from, limitS * 1000, `${to} knows ${from} holds`);
    await c.kill('arbiter', 'SIGTERM');
    arbiterStart = Date.now();
    await c.startArbiter();
    await sleep(5000 - (Date.now() - arbiterStart));
    s0 = since();
    m = await move(c, to, limitS);
    rows.push({
      settings,
      path: '5 s after an arbiter restart (SIGTERM, same database)',
      move: `${from} → ${to}`,
      sinceStart: s0,
      ...m,
    });
    log(`${settings}: after a restart: ${m.seconds.toFixed(2)} s (confirmation: ${m.gave})`);

    // The deploy guide's upgrade order: the arbiter first, then a handover on the holder.
    await c.waitFor(async () => (await c.fence(from))?.holder === to, limitS * 1000, `${from} knows ${to} holds`);
    await c.kill('arbiter', 'SIGTERM');
    arbiterStart = Date.now();
    await c.startArbiter();
    await sleep(5000 - (Date.now() - arbiterStart));
    s0 = since();
    m = await move(c, from, limitS, to);
    rows.push({
      settings,
      path: '`hq lease release --handover-to` 5 s after an arbiter restart',
      move: `${to} → ${from}`,
      sinceStart: s0,
      ...m,
    });
    log(`${settings}: handover after a restart: ${m.seconds.toFixed(2)} s (confirmation: ${m.gave})`);
    const holder = from;

    await c.waitFor(async () => (await c.fence(holder))?.reason === 'holder', limitS * 1000, `${holder} renews`);
    await c.kill('arbiter', 'SIGKILL');
    await c.waitFor(
      async () => (await c.fence(holder))?.reason === 'quorum-standby',
      limitS * 1000,
      `${holder} runs on its peer’s confirmation`,
    );
    await c.kill(holder, 'SIGTERM');
    const restarted = Date.now();
    await c.startAgent(holder);
    await c.waitFor(async () => runs(c, holder), limitS * 1000, `${holder} runs again`);
    const seconds = (Date.now() - restarted) / 1000;
    const reason = (await c.fence(holder))?.reason ?? '?';
    rows.push({
      settings,
      path: 'the holder’s agent restarted during an arbiter outage',
      move: `${holder} again (${reason})`,
      seconds,
      sinceStart: null,
      gave: '—',
    });
    log(`${settings}: holder restarted in an outage: runs again after ${seconds.toFixed(2)} s (${reason})`);
  } finally {
    await c.stopAll();
  }
  return rows;
}

async function main(): Promise<void> {
  const which: Settings[] = WHICH === 'both' ? ['fast', 'defaults'] : [WHICH as Settings];
  const rows: Row[] = [];
  for (const s of which) rows.push(...(await series(s)));
  const f = (n: number | null): string => (n === null ? '—' : n.toFixed(2));
  const t = table(
    [
      'settings',
      'path',
      'move',
      'first `run: true` (s)',
      'arbiter age at the move (s)',
      'new holder had confirmed the old one',
    ],
    ['l', 'l', 'l', 'r', 'r', 'l'],
    rows.map((r) => [r.settings, r.path, r.move, f(r.seconds), f(r.sinceStart), r.gave]),
  );
  const machine = machineLine();
  process.stdout.write(`${machine}\n\n${t}\n`);
  writeSection(
    'moves',
    `## Moves right after a start or a restart, and the holder's agent restarted in an outage

Command: \`npx tsx bench/moves.ts\` (\`BENCH_MOVES_SETTINGS=fast|defaults|both\`, default both). The system tests'
cluster, once at L1's fast settings (ttl 6 s, margin 1 s, heartbeats and refresh every 1 s) and once with every
timing key at its default (ttl 1500 s, margin 30 s, heartbeats every 10 min, refresh 60 s, request timeout 5 s),
each daemon given only its own keys. In order on one cluster: \`hq failover --to\` right after the arbiter's first
start, back again once the arbiter is older than ttl + margin + 5 s, once more 5 s after the arbiter was restarted
(SIGTERM, same database), and back by \`hq lease release --handover-to\` on the holder 5 s after another restart (the
deploy guide's upgrade order); then the arbiter is killed and, once the holder runs on its peer's confirmation,
the holder's agent is restarted (SIGTERM, same state directory). Figures are seconds to the host's first \`run: true\`
on its own unix socket (polled every ${POLL_MS} ms), from \`hq failover\`'s own start (its Node start-up included) or
from the agent's restart. At the defaults a move waits for the old holder to learn of it and acknowledge (its next
refresh, up to 60 s) and for the new holder's next refresh; a new holder that gave the old one a peer confirmation
while the arbiter was down waits out that confirmation's validity itself (ttl + margin from when it gave it), which no
acknowledgement ends.

Run: ${new Date().toISOString()} — ${machine}.

${t}
`,
  );
}

await main();
