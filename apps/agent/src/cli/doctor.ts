/**
 * `hq doctor` — checks this host's side of hq, one line each, ✔ or ✖ with the fix:
 *   config        the file is valid, timing rule (S6) included; prints the worst-case failover
 *   arbiter-url   the arbiter's URL is known (arbiterUrl, tailnetDomain, or tailscale)
 *   state-dir     {stateDir} is a real directory of this user, mode 0700; its files 0600
 *   token         the member token file exists, holds a token, mode 0600, this user's
 *   peer-token    the peer token likewise (when the host has peers)
 *   arbiter       GET /v1/health answers as an arbiter; GET /v1/lease accepts the token
 *   etcd-space    store etcd: the arbiter's reading of etcd's database size against its space
 *                 quota (fails from 80 % of it, and on the NOSPACE alarm: etcd then refuses writes)
 *   clock         the offset between the arbiter's `now` and this host's clock (midpoint of
 *                 the request) is within --max-offset (hq's safety does not rest on it — agents
 *                 only use differences of arbiter times — but a large offset means time sync is
 *                 broken here or there, and with it the 1 % rate-drift assumption of S6)
 *   generation    the arbiter refused no reported generation since it started (else the report,
 *                 and how an admin accepts it when it is real)
 *   peers         every peer's GET /v1/health answers 200
 *   tailscale     `tailscale status --json` runs and says Running (skipped when tailscaleBin is "")
 *   socket        the agent answers GET /v1/status on its socket
 *   unit          the systemd unit (Linux) or the launchd plist (macOS) is installed
 * A check that needs an earlier one (everything needs the config) is skipped, shown as "–".
 * Exit 0 when nothing failed, 1 otherwise, 2 for usage errors. `--json` prints
 * `{ok, checks: [{name, status, detail, fix}]}`.
 *
 * Wiring: in main.ts's COMMANDS, `{ spec: DOCTOR_SPEC, load: async () => (await import('./doctor.js')).doctor }`
 * (copy DOCTOR_SPEC inline to keep the table's imports light).
 */
import { lstat, readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, resolveNetwork, type AgentConfig } from '../config.js';
import '../config-checker.js';
import { readToken } from '../tokens.js';
import { peerPathProblem } from '../daemon/peers.js';
import { ConfigError } from '@hq/runtime/config-file';
import { runFile } from '@hq/runtime/exec';
import { wallClockMs } from '@hq/runtime/clock';
import { joinUrl, requestJson, type HttpResult } from '@hq/runtime/http';
import { CONFIG_FLAG, JSON_FLAG, errorLine, flagBool, flagNumber, flagString, parseArgs, helpText, CliError, type CommandSpec, type Parsed } from './args.js';
import { callAgent, type LocalResult } from './local.js';
import { PROTOCOL_UNSTATED, PROTOCOL_VERSION, upgradeNote } from '@hq/protocol/version';
import { fieldsOf, stringField } from '@hq/protocol/answer';

/** Store etcd: etcd's space as the arbiter's /v1/health read it; null for a SQLite arbiter. */
export function etcdSpaceCheck(arbiters: unknown): DoctorCheck | null {
  if (arbiters === undefined) return null;
  const s = fieldsOf(fieldsOf(fieldsOf(arbiters).etcd).space);
  if (typeof s.dbSizeBytes !== 'number' || typeof s.quotaBytes !== 'number') return skip('etcd-space', 'the arbiter has not read etcd\'s database size yet (or is older than this hq)');
  const used = `etcd's database is ${(s.dbSizeBytes / 1024 ** 2).toFixed(1)} MiB of its ${(s.quotaBytes / 1024 ** 2).toFixed(0)} MiB quota (${Math.round((s.dbSizeBytes / s.quotaBytes) * 100)} %)`;
  if (s.level === 'ok') return pass('etcd-space', used);
  return fail('etcd-space', typeof s.warning === 'string' ? s.warning : used, 'compact, defragment and disarm as deploy/README.md "etcd\'s space" says (etcdctl defrag on each member; etcdctl alarm disarm), or raise --quota-backend-bytes');
}

/** "; store etcd: … is elected, etcd 3/3 members up" (nothing for a SQLite arbiter). */
function electedLine(arbiters: unknown): string {
  if (arbiters === undefined) return '';
  const a = fieldsOf(arbiters);
  const etcd = fieldsOf(a.etcd);
  const members: unknown[] = Array.isArray(etcd.members) ? etcd.members : [];
  const who = a.elected === true ? 'this arbiter is elected' : a.leader == null ? 'no arbiter is elected' : `${String(a.leader)} is elected`;
  return `; store etcd: ${who}, etcd ${members.filter((m) => fieldsOf(m).ok === true).length}/${members.length} members up${etcd.healthy === true ? '' : ' (no quorum)'}`;
}

export const DOCTOR_SPEC: CommandSpec = {
  name: 'doctor',
  summary:
    "Checks this host's side of hq and prints one line per check with ✔ or ✖ and the fix: the config and its timing rule, the state directory and file permissions, the token files, the arbiter (reachable, token accepted, clock offset, a reported generation it refused; with store etcd, etcd's database against its space quota), the peers, every host still on an older protocol version (\"mbp runs hq 0.1 (protocol 1); upgrade it\"), tailscale, the agent's socket, and the systemd unit or launchd plist.",
  flags: [
    CONFIG_FLAG,
    {
      name: 'max-offset',
      kind: 'number',
      value: 'S',
      help: "Fails the clock check when this host's clock and the arbiter's differ by more than S seconds. Default: 2.",
    },
    JSON_FLAG,
  ],
  exits: '0 every check passed (or was skipped), 1 a check failed, 2 usage error.',
};

export type Status = 'pass' | 'fail' | 'skip';

export interface DoctorCheck {
  readonly name: string;
  readonly status: Status;
  readonly detail: string;
  /** What to do about a failure (empty when it passed). */
  readonly fix: string;
}

/** Everything the checks touch outside the config, so tests can point it elsewhere. */
export interface DoctorContext {
  /** Wall clock, Unix seconds. */
  readonly now?: () => number;
  readonly platform?: NodeJS.Platform;
  readonly home?: string;
  /** Where unit files are looked for (default: the platform's system and user locations). */
  readonly unitPaths?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
}

const DEFAULT_MAX_OFFSET = 2;

function pass(name: string, detail: string): DoctorCheck {
  return { name, status: 'pass', detail, fix: '' };
}
function fail(name: string, detail: string, fix: string): DoctorCheck {
  return { name, status: 'fail', detail, fix };
}
function skip(name: string, detail: string): DoctorCheck {
  return { name, status: 'skip', detail, fix: '' };
}

function mode(m: number): string {
  return (m & 0o777).toString(8).padStart(4, '0');
}

function secs(s: number): string {
  if (Math.abs(s) < 120) return `${s.toFixed(Math.abs(s) < 10 ? 2 : 0)} s`;
  if (Math.abs(s) < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function myUid(): number | null {
  return typeof process.getuid === 'function' ? process.getuid() : null;
}

/** The unit file locations hq's deploy/ documents, per platform. */
export function defaultUnitPaths(platform: NodeJS.Platform, home: string): string[] {
  if (platform === 'darwin') return [join(home, 'Library/LaunchAgents/com.hq.agent.plist'), '/Library/LaunchDaemons/com.hq.agent.plist'];
  if (platform === 'linux') {
    return ['/etc/systemd/system/hq-agent.service', '/lib/systemd/system/hq-agent.service', '/usr/lib/systemd/system/hq-agent.service', join(home, '.config/systemd/user/hq-agent.service')];
  }
  return [];
}

async function checkStateDir(c: AgentConfig): Promise<DoctorCheck> {
  const dir = c.stateDir;
  let st;
  try {
    st = await lstat(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return fail('state-dir', `${dir} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? 'error'})`}`, `mkdir -m 700 ${dir} (the agent creates it at start), as the user the agent runs as`);
  }
  if (st.isSymbolicLink()) return fail('state-dir', `${dir} is a symlink`, `replace the symlink with a real directory: mkdir -m 700 ${dir}`);
  if (!st.isDirectory()) return fail('state-dir', `${dir} is not a directory`, `move it away and mkdir -m 700 ${dir}`);
  const me = myUid();
  if (me !== null && st.uid !== me) return fail('state-dir', `${dir} is owned by uid ${st.uid}, not ${me}`, `run hq as the agent's user, or chown ${me} ${dir}`);
  if ((st.mode & 0o777) !== 0o700) return fail('state-dir', `${dir} is mode ${mode(st.mode)}, must be 0700`, `chmod 700 ${dir}`);
  const bad: string[] = [];
  let names: string[] = [];
  try {
    names = await readdir(dir);
  } catch {
    names = [];
  }
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    const p = join(dir, name);
    const f = await lstat(p).catch(() => null);
    if (f === null || f.isSocket() || f.isDirectory()) continue;
    if (f.isSymbolicLink()) bad.push(`${name} is a symlink`);
    else if (me !== null && f.uid !== me) bad.push(`${name} is owned by uid ${f.uid}`);
    else if ((f.mode & 0o077) !== 0) bad.push(`${name} is mode ${mode(f.mode)}`);
  }
  if (bad.length > 0) return fail('state-dir', `${dir}: ${bad.join(', ')} (state files must be 0600, this user's)`, `chmod 600 ${bad.map((b) => join(dir, b.split(' ')[0] as string)).join(' ')}`);
  return pass('state-dir', `${dir} is 0700 and its files are private`);
}

async function checkTokenFile(name: string, path: string, fix: string): Promise<DoctorCheck> {
  const t = await readToken(path);
  if (t.ok) return pass(name, `${path} holds a token, mode 0600`);
  const problem = t.problem;
  if (/must be mode 0600|group- or world-writable/.test(problem)) return fail(name, problem, `chmod 600 ${path}`);
  if (/does not exist/.test(problem)) return fail(name, problem, fix);
  return fail(name, problem, `rewrite ${path} with the token alone on one line, mode 0600 (${fix})`);
}

function answerLine(r: HttpResult): string {
  if (r.kind === 'unreachable') return `unreachable (${r.problem})`;
  const error = stringField(r.body, 'error');
  const message = stringField(r.body, 'message');
  return `HTTP ${r.status}${error !== null ? ` ${error}` : ''}${message !== null ? `: ${message}` : ''}`;
}

/** What the checks share once the config is valid; the earlier checks fill in what later ones need. */
interface DoctorRun {
  readonly c: AgentConfig;
  readonly now: () => number;
  readonly platform: NodeJS.Platform;
  readonly home: string;
  readonly unitPaths: readonly string[] | undefined;
  readonly maxOffset: number;
  /** The arbiter's URL, once resolved (null: unknown). */
  url: string | null;
  /** The config with its network settings resolved (the tailnet's peers included). */
  net: AgentConfig;
  /** "… runs hq 0.1 (protocol 1); upgrade it" for each host behind this release. */
  readonly behind: string[];
  /** The agent answered GET /v1/status on its socket. */
  agentRuns: boolean;
}

type Check = (r: DoctorRun) => Promise<DoctorCheck[]>;

/** The checks after the config's, in the order they are shown. */
const CHECKS: readonly Check[] = [
  checkHostname,
  checkArbiterUrl,
  async (r) => [await checkStateDir(r.c)],
  checkTokens,
  checkArbiter,
  checkTiming,
  checkPeers,
  checkVersions,
  checkTailscale,
  checkSocket,
  async (r) => [await checkUnit(r.unitPaths ?? defaultUnitPaths(r.platform, r.home), r.platform, r.agentRuns)],
];

/** The checks skipped when the config is not valid (the unit's is still run). */
const NEEDS_CONFIG = ['hostname', 'arbiter-url', 'state-dir', 'token', 'peer-token', 'arbiter', 'clock', 'timing', 'peers', 'tailscale', 'socket'];

/** Runs every check. Never throws. */
export async function runChecks(configFlag: string | undefined, opts: { maxOffsetSeconds?: number } = {}, ctx: DoctorContext = {}): Promise<DoctorCheck[]> {
  const platform = ctx.platform ?? process.platform;
  const home = ctx.home ?? homedir();
  // The config, with the agent's own cadence relations (resolveConfig runs checkCadence).
  let c: AgentConfig;
  try {
    c = loadConfig(configFlag, ctx.env ?? process.env);
  } catch (err) {
    const key = err instanceof ConfigError ? err.key : null;
    return [
      fail('config', (err as { message?: string }).message ?? String(err), key === null || key === '--config' || key === 'HQ_CONFIG' ? 'pass --config PATH (or set $HQ_CONFIG) to a readable agent.json' : `fix "${key}" in the agent config (see deploy/config/ for examples)`),
      ...NEEDS_CONFIG.map((n) => skip(n, 'needs a valid config')),
      await checkUnit(ctx.unitPaths ?? defaultUnitPaths(platform, home), platform),
    ];
  }
  const out: DoctorCheck[] = [
    pass('config', `${c.file ?? 'no file, every default'} is valid for host ${c.hostName} (heartbeat every ${secs(c.heartbeatSeconds)}, refresh ${secs(c.refreshSeconds)}, request timeout ${secs(c.requestTimeoutSeconds)})`),
  ];
  const run: DoctorRun = {
    c,
    now: ctx.now ?? (() => wallClockMs.now() / 1000),
    platform,
    home,
    unitPaths: ctx.unitPaths,
    maxOffset: opts.maxOffsetSeconds ?? DEFAULT_MAX_OFFSET,
    url: null,
    net: c,
    behind: [],
    agentRuns: false,
  };
  for (const check of CHECKS) out.push(...(await check(run)));
  return out;
}

/** The host's name: the config's hostName wins over the host file; a difference is a mistake. */
async function checkHostname({ c }: DoctorRun): Promise<DoctorCheck[]> {
  if (c.hostMismatch !== null) {
    return [fail('hostname', `hostName "${c.hostName}" in the config, but ${c.hostMismatch.file} says "${c.hostMismatch.name}"; the config wins`, `make them agree: hq host set ${c.hostName}, or remove hostName from the config`)];
  }
  return [pass('hostname', c.hostName)];
}

/** The network settings (arbiterUrl may come from the tailnet). */
async function checkArbiterUrl(r: DoctorRun): Promise<DoctorCheck[]> {
  try {
    const net = await resolveNetwork(r.c);
    r.url = net.arbiterUrl;
    r.net = net;
    return [pass('arbiter-url', net.arbiterUrl)];
  } catch (err) {
    return [fail('arbiter-url', (err as Error).message, 'set arbiterUrl (or tailnetDomain) in the agent config, or make `tailscale status` work')];
  }
}

/** The member token file, and the peer token's when the host has peers. */
async function checkTokens({ c, net }: DoctorRun): Promise<DoctorCheck[]> {
  return [
    await checkTokenFile('token', c.tokenFile, `on the arbiter: hq-arbiter join ${c.hostName} --config /etc/hq/arbiter.json, then the hq join line it prints on this host (or hq-arbiter token issue ${c.hostName} --scope member --config /etc/hq/arbiter.json into ${c.tokenFile}, mode 0600)`),
    net.peers.size === 0
      ? skip('peer-token', 'no peers configured')
      : await checkTokenFile('peer-token', c.peerTokenFile, `write the fleet's shared peer secret to ${c.peerTokenFile} (the same on every candidate); chmod 600 ${c.peerTokenFile}`),
  ];
}

/** The arbiter: health, the token, etcd's space, the clock offset. */
async function checkArbiter(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, url } = r;
  if (url === null) return [skip('arbiter', 'no arbiter URL'), skip('clock', 'no arbiter URL')];
  const timeoutSeconds = c.requestTimeoutSeconds;
  const health = await requestJson({ method: 'GET', url: joinUrl(url, '/v1/health'), timeoutSeconds });
  const hb = fieldsOf(health.kind === 'answer' ? health.body : null);
  if (health.kind !== 'answer' || health.status !== 200 || hb.role !== 'arbiter') {
    return [
      fail('arbiter', `${url}/v1/health: ${health.kind === 'answer' && health.status === 200 ? 'answered, but not as an arbiter' : answerLine(health)}`, `check that hq-arbiter runs on ${c.arbiter} and that ${url} is reachable from here (tailscale ping ${c.arbiter})`),
      skip('clock', 'the arbiter is unreachable'),
    ];
  }
  const token = await readToken(c.tokenFile);
  const t0 = r.now();
  const lease = await requestJson({ method: 'GET', url: joinUrl(url, '/v1/lease'), token: token.ok ? token.token : null, timeoutSeconds });
  const t1 = r.now();
  if (lease.kind === 'answer' && lease.status === 401) {
    return [
      fail('arbiter', `${url} refuses this host's token (${answerLine(lease)})`, `the token was revoked or belongs to another arbiter: join again (on the arbiter: hq-arbiter join ${c.hostName} --config /etc/hq/arbiter.json, then the hq join line here with --force)`),
      skip('clock', 'the lease could not be read'),
    ];
  }
  if (lease.kind !== 'answer' || lease.status !== 200) {
    return [fail('arbiter', `${url}/v1/lease: ${answerLine(lease)}`, `check the arbiter's log (journalctl -u hq-arbiter)`), skip('clock', 'the lease could not be read')];
  }
  const rec = fieldsOf(lease.body);
  const note = upgradeNote(`${String(hb.host)} (the arbiter)`, health.protocol ?? PROTOCOL_UNSTATED, typeof hb.version === 'string' ? hb.version : null);
  if (note !== null) r.behind.push(note);
  const out = [pass('arbiter', `${url} is ${String(hb.host)} ${String(hb.version)}; holder ${typeof rec.holder === 'string' ? rec.holder : 'none'}, generation ${String(rec.generation ?? '?')}${token.ok ? ', token accepted' : ''}${electedLine(hb.arbiters)}`)];
  const space = etcdSpaceCheck(hb.arbiters);
  if (space !== null) out.push(space);
  out.push(clockCheck(rec.now, t0, t1, r.maxOffset));
  return out;
}

/** The offset between the arbiter's `now` and this host's clock at the midpoint of the request [t0, t1]. */
function clockCheck(arbiterNow: unknown, t0: number, t1: number, maxOffset: number): DoctorCheck {
  if (typeof arbiterNow !== 'number' || !Number.isFinite(arbiterNow)) return fail('clock', 'the record has no "now"', 'upgrade hq-arbiter');
  const offset = arbiterNow - (t0 + t1) / 2;
  const uncertainty = (t1 - t0) / 2;
  const line = `this host's clock is ${secs(Math.abs(offset))} ${offset >= 0 ? 'behind' : 'ahead of'} the arbiter's (± ${secs(uncertainty)})`;
  if (Math.abs(offset) - uncertainty > maxOffset) {
    return fail('clock', `${line}, more than ${maxOffset} s`, 'enable time sync on both hosts (timedatectl set-ntp true / chrony; macOS: System Settings → Date & Time → set automatically)');
  }
  return pass('clock', line);
}

/**
 * The timing across the sides (S6): the arbiter checks this host's reported cadence against its
 * lease timing on every heartbeat; doctor shows what it found and the failover it implies, and
 * the last generation the arbiter refused. Each host's version as its last heartbeat said it.
 */
async function checkTiming(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, url } = r;
  if (url === null) return [skip('timing', 'no arbiter URL')];
  const token = await readToken(c.tokenFile);
  const st = await requestJson({ method: 'GET', url: joinUrl(url, '/v1/status'), token: token.ok ? token.token : null, timeoutSeconds: c.requestTimeoutSeconds });
  const b = st.kind === 'answer' && st.status === 200 ? fieldsOf(st.body) : null;
  if (b === null) return [skip('timing', `${url}/v1/status: ${answerLine(st)}`)];
  // Protocol 2: each host's version as its last heartbeat said it (an arbiter of protocol 1 has no such field).
  for (const h of Array.isArray(b.hosts) ? b.hosts : []) {
    const { upgrade: u, host } = fieldsOf(h);
    if (typeof u === 'string' && !r.behind.some((n) => n.startsWith(`${String(host)} `))) r.behind.push(u);
  }
  const problems = (Array.isArray(b.timingProblems) ? b.timingProblems : [])
    .map((p) => fieldsOf(p))
    .filter((p) => typeof p.message === 'string');
  const mine = problems.filter((p) => p.host === c.hostName).map((p) => String(p.message));
  const others = problems.filter((p) => p.host !== c.hostName).map((p) => String(p.message));
  const failover = stringField(b.failover, 'text') ?? 'unknown';
  const out: DoctorCheck[] = [];
  if (mine.length > 0) out.push(fail('timing', mine.join('; '), `change this host's key named above in ${c.file ?? 'the agent config'}, or the arbiter's key on ${c.arbiter}`));
  else if (others.length > 0) out.push(fail('timing', `another host: ${others.join('; ')}`, 'run hq doctor on that host'));
  else out.push(pass('timing', `the arbiter reports no timing problem; failover ${failover}`));
  // The last report or grant the generation bounds refused since the arbiter started.
  const refusal = b.generationRefusal;
  const g = fieldsOf(refusal);
  if (refusal !== undefined && refusal !== null && typeof g.message === 'string') {
    const fix =
      g.kind === 'ceiling'
        ? 'the floor came from an accepted report: read the generation-refused and generation-accepted events (hq events)'
        : `if ${String(g.host ?? 'that host')} really saw generation ${String(g.generation)} (a restored or lost arbiter database), accept it: hq lease accept ${String(g.generation)}; else find what sends it`;
    out.push(fail('generation', g.message, fix));
  } else if (refusal === null) out.push(pass('generation', 'the arbiter refused no reported generation since it started'));
  return out;
}

/** Every peer's health, then the confirmation path itself with this host's peer token. */
async function checkPeers(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, net } = r;
  if (net.peers.size === 0) return [skip('peers', 'no peers configured (set peers or tailnetDomain)')];
  const down: string[] = [];
  const up: string[] = [];
  await Promise.all(
    [...net.peers].map(async ([host, base]) => {
      const a = await requestJson({ method: 'GET', url: joinUrl(base, '/v1/health'), timeoutSeconds: c.requestTimeoutSeconds });
      if (a.kind === 'answer' && a.status === 200) {
        up.push(host);
        const note = upgradeNote(host, a.protocol ?? PROTOCOL_UNSTATED, stringField(a.body, 'version'));
        if (note !== null && !r.behind.some((n) => n.startsWith(`${host} `))) r.behind.push(note);
      }
      else down.push(`${host} (${base}: ${answerLine(a)})`);
    }),
  );
  if (down.length > 0) return [fail('peers', `not answering: ${down.sort().join('; ')}`, `check that hq-agent runs on each of them and that port ${c.listen.port} is reachable over the tailnet (hq doctor there)`)];
  // Health is not the path an arbiter outage needs: probe the confirmation itself, with this host's peer token.
  const pt = await readToken(c.peerTokenFile);
  const broken: string[] = [];
  if (!pt.ok) broken.push(`this host's peer token: ${pt.problem}`);
  else {
    await Promise.all(
      [...net.peers].map(async ([host, base]) => {
        const a = await requestJson({ method: 'POST', url: joinUrl(base, '/v1/peer/confirm'), body: { host: c.hostName, generation: 1, probe: true }, token: pt.token, timeoutSeconds: c.requestTimeoutSeconds });
        const problem = peerPathProblem(base, a);
        if (problem !== null) broken.push(`${host}: ${problem}`);
      }),
    );
  }
  if (broken.length === 0) return [pass('peers', `${up.sort().join(', ')} answer /v1/health and accept this host's peer token (confirmation probe)`)];
  return [fail('peers', `the confirmation path is broken — ${broken.sort().join('; ')}`, 'in an arbiter outage the holder would stop for want of a confirmation: make the peer-token files the same bytes on every candidate (0600), then hq doctor again')];
}

/** Versions (docs/PROTOCOL.md "Versions"): every host behind this release, one line each. */
async function checkVersions({ c, behind }: DoctorRun): Promise<DoctorCheck[]> {
  const local = await callAgent(c.socketPath, 'GET', '/v1/seen', c.requestTimeoutSeconds);
  if (local.kind === 'answer' && (local.protocol ?? PROTOCOL_UNSTATED) < PROTOCOL_VERSION) {
    behind.unshift(`the hq-agent daemon on this host speaks protocol ${local.protocol ?? PROTOCOL_UNSTATED} (an older hq still running); restart it`);
  }
  if (behind.length > 0) return [fail('versions', behind.join('; '), 'upgrade one host at a time: the arbiter, then the standby, then the holder after a handover (deploy/README.md "Upgrading")')];
  return [pass('versions', `every host heard from speaks hq protocol ${PROTOCOL_VERSION}`)];
}

/** `tailscale status --json` runs and says Running (skipped when tailscaleBin is ""). */
async function checkTailscale({ c }: DoctorRun): Promise<DoctorCheck[]> {
  if (c.tailscaleBin === '') return [skip('tailscale', 'tailscaleBin is "" (health probes alone decide)')];
  const r = await runFile(c.tailscaleBin, ['status', '--json'], { timeoutMs: Math.max(1000, c.probeTimeoutSeconds * 1000) });
  let state: unknown = null;
  try {
    state = fieldsOf(JSON.parse(r.stdout)).BackendState;
  } catch {
    state = null;
  }
  if (r.code === 'ENOENT') return [fail('tailscale', `${c.tailscaleBin} is not installed or not on PATH`, 'install tailscale, set tailscaleBin to its absolute path, or set tailscaleBin to "" to probe by health URL only')];
  if (state === 'Running') return [pass('tailscale', `${c.tailscaleBin} status: Running`)];
  return [fail('tailscale', `${c.tailscaleBin} status: ${typeof state === 'string' ? state : r.problem ?? 'no BackendState'}`, 'run `tailscale up` (and check `tailscale status`)')];
}

/** The agent answers GET /v1/status on its socket. */
async function checkSocket(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c } = r;
  const s: LocalResult = await callAgent(c.socketPath, 'GET', '/v1/status', c.requestTimeoutSeconds);
  if (s.kind === 'answer' && s.status === 200) {
    r.agentRuns = true;
    const b = fieldsOf(s.body);
    const st = await lstat(c.socketPath).catch(() => null);
    const m = st === null ? '' : `, mode ${mode(st.mode)}`;
    return [pass('socket', `the agent answers on ${c.socketPath}${m} (holder ${typeof b.holder === 'string' ? b.holder : 'none'}, generation ${String(b.generation ?? '?')})`)];
  }
  const why = s.kind === 'unreachable' ? s.problem : `HTTP ${s.status}`;
  return [fail('socket', `the agent does not answer on ${c.socketPath} (${why})`, r.platform === 'darwin' ? 'start it: launchctl kickstart -k gui/$(id -u)/com.hq.agent' : 'start it: systemctl start hq-agent (journalctl -u hq-agent for why it stopped)')];
}

async function checkUnit(paths: readonly string[], platform: NodeJS.Platform, agentRuns = false): Promise<DoctorCheck> {
  if (paths.length === 0) return skip('unit', `no service manager hq knows on ${platform}`);
  for (const p of paths) {
    const st = await lstat(p).catch(() => null);
    if (st !== null && (st.isFile() || st.isSymbolicLink())) return pass('unit', `${p} is installed`);
  }
  const fix =
    platform === 'darwin'
      ? 'install deploy/launchd/com.hq.agent.plist into ~/Library/LaunchAgents and launchctl bootstrap it (deploy/launchd/README.md)'
      : 'install deploy/systemd/hq-agent.service into /etc/systemd/system and systemctl enable --now hq-agent (deploy/README.md)';
  // A running agent without hq's unit is a choice (a try on one machine, another supervisor), not a fault.
  if (agentRuns) return skip('unit', `no hq unit is installed (${paths.join(', ')}), and the agent answers: it runs under something else (by hand, npm start, another supervisor); for restarts after a crash or a reboot, ${fix}`);
  return fail('unit', `none of ${paths.join(', ')} exists`, fix);
}

const MARK: Readonly<Record<Status, string>> = { pass: '✔', fail: '✖', skip: '–' };

export function formatChecks(checks: readonly DoctorCheck[]): string {
  const w = Math.max(...checks.map((c) => c.name.length));
  return checks.map((c) => `${MARK[c.status]} ${c.name.padEnd(w)}  ${c.detail}${c.status === 'fail' ? ` — fix: ${c.fix}` : ''}`).join('\n') + '\n';
}

/** The command as the table calls it. */
export async function doctor(p: Parsed, ctx: DoctorContext = {}): Promise<number> {
  const checks = await runChecks(flagString(p, 'config'), { maxOffsetSeconds: flagNumber(p, 'max-offset') }, ctx);
  const ok = checks.every((c) => c.status !== 'fail');
  const write = ctx.stdout ?? ((s: string) => void process.stdout.write(s));
  if (flagBool(p, 'json')) write(`${JSON.stringify({ ok, checks })}\n`);
  else write(formatChecks(checks));
  return ok ? 0 : 1;
}

/** `hq doctor …` from raw arguments (for tests and a direct entry point). */
export async function doctorCommand(argv: readonly string[], ctx: DoctorContext = {}): Promise<number> {
  const err = ctx.stderr ?? ((s: string) => void process.stderr.write(s));
  let p: Parsed;
  try {
    p = parseArgs(DOCTOR_SPEC, argv);
  } catch (e) {
    if (e instanceof CliError) {
      err(errorLine(DOCTOR_SPEC.name, e.message));
      return e.exitCode;
    }
    throw e;
  }
  if (p.help) {
    (ctx.stdout ?? ((s: string) => void process.stdout.write(s)))(helpText(DOCTOR_SPEC));
    return 0;
  }
  return doctor(p, ctx);
}
