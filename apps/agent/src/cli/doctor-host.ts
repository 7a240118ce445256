/**
 * The checks of `hq doctor` on this host itself: the host's name, the state directory and its
 * files, the token files, tailscale, the agent's socket and the service unit.
 */
import type { Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentConfig } from '../config.js';
import { readToken } from '../tokens.js';
import { runFile } from '@hq/runtime/exec';
import { fieldsOf } from '@hq/protocol/answer';
import { callAgent, type LocalResult } from './local.js';
import { fail, mode, pass, skip, type DoctorCheck, type DoctorRun } from './doctor-checks.js';

export function myUid(): number | null {
  return typeof process.getuid === 'function' ? process.getuid() : null;
}

/** The unit file locations hq's deploy/ documents, per platform. */
export function defaultUnitPaths(platform: NodeJS.Platform, home: string): string[] {
  if (platform === 'darwin')
    return [join(home, 'Library/LaunchAgents/com.hq.agent.plist'), '/Library/LaunchDaemons/com.hq.agent.plist'];
  if (platform === 'linux') {
    return [
      '/etc/systemd/system/hq-agent.service',
      '/lib/systemd/system/hq-agent.service',
      '/usr/lib/systemd/system/hq-agent.service',
      join(home, '.config/systemd/user/hq-agent.service'),
    ];
  }
  return [];
}

export async function checkStateDir(c: AgentConfig): Promise<DoctorCheck> {
  const dir = c.stateDir;
  let st: Stats;
  try {
    st = await lstat(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return fail(
      'state-dir',
      `${dir} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? 'error'})`}`,
      `mkdir -m 700 ${dir} (the agent creates it at start), as the user the agent runs as`,
    );
  }
  if (st.isSymbolicLink())
    return fail('state-dir', `${dir} is a symlink`, `replace the symlink with a real directory: mkdir -m 700 ${dir}`);
  if (!st.isDirectory()) return fail('state-dir', `${dir} is not a directory`, `move it away and mkdir -m 700 ${dir}`);
  const me = myUid();
  if (me !== null && st.uid !== me)
    return fail(
      'state-dir',
      `${dir} is owned by uid ${st.uid}, not ${me}`,
      `run hq as the agent's user, or chown ${me} ${dir}`,
    );
  if ((st.mode & 0o777) !== 0o700)
    return fail('state-dir', `${dir} is mode ${mode(st.mode)}, must be 0700`, `chmod 700 ${dir}`);
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
  if (bad.length > 0)
    return fail(
      'state-dir',
      `${dir}: ${bad.join(', ')} (state files must be 0600, this user's)`,
      `chmod 600 ${bad.map((b) => join(dir, b.split(' ')[0] as string)).join(' ')}`,
    );
  return pass('state-dir', `${dir} is 0700 and its files are private`);
}

export async function checkTokenFile(name: string, path: string, fix: string): Promise<DoctorCheck> {
  const t = await readToken(path);
  if (t.ok) return pass(name, `${path} holds a token, mode 0600`);
  const problem = t.problem;
  if (/must be mode 0600|group- or world-writable/.test(problem)) return fail(name, problem, `chmod 600 ${path}`);
  if (/does not exist/.test(problem)) return fail(name, problem, fix);
  return fail(name, problem, `rewrite ${path} with the token alone on one line, mode 0600 (${fix})`);
}

/** The host's name: the config's hostName wins over the host file; a difference is a mistake. */
export async function checkHostname({ c }: DoctorRun): Promise<DoctorCheck[]> {
  if (c.hostMismatch !== null) {
    return [
      fail(
        'hostname',
        `hostName "${c.hostName}" in the config, but ${c.hostMismatch.file} says "${c.hostMismatch.name}"; the config wins`,
        `make them agree: hq host set ${c.hostName}, or remove hostName from the config`,
      ),
    ];
  }
  return [pass('hostname', c.hostName)];
}

/** The member token file, and the peer token's when the host has peers. */
export async function checkTokens({ c, net }: DoctorRun): Promise<DoctorCheck[]> {
  return [
    await checkTokenFile(
      'token',
      c.tokenFile,
      `on the arbiter: hq-arbiter join ${c.hostName} --config /etc/hq/arbiter.json, then the hq join line it prints on this host (or hq-arbiter token issue ${c.hostName} --scope member --config /etc/hq/arbiter.json into ${c.tokenFile}, mode 0600)`,
    ),
    net.peers.size === 0
      ? skip('peer-token', 'no peers configured')
      : await checkTokenFile(
          'peer-token',
          c.peerTokenFile,
          `write the fleet's shared peer secret to ${c.peerTokenFile} (the same on every candidate); chmod 600 ${c.peerTokenFile}`,
        ),
  ];
}

/** `tailscale status --json` runs and says Running (skipped when tailscaleBin is ""). */
export async function checkTailscale({ c }: DoctorRun): Promise<DoctorCheck[]> {
  if (c.tailscaleBin === '') return [skip('tailscale', 'tailscaleBin is "" (health probes alone decide)')];
  const r = await runFile(c.tailscaleBin, ['status', '--json'], {
    timeoutMs: Math.max(1000, c.probeTimeoutSeconds * 1000),
  });
  let state: unknown = null;
  try {
    state = fieldsOf(JSON.parse(r.stdout)).BackendState;
  } catch {
    state = null;
  }
  if (r.code === 'ENOENT')
    return [
      fail(
        'tailscale',
        `${c.tailscaleBin} is not installed or not on PATH`,
        'install tailscale, set tailscaleBin to its absolute path, or set tailscaleBin to "" to probe by health URL only',
      ),
    ];
  if (state === 'Running') return [pass('tailscale', `${c.tailscaleBin} status: Running`)];
  return [
    fail(
      'tailscale',
      `${c.tailscaleBin} status: ${typeof state === 'string' ? state : (r.problem ?? 'no BackendState')}`,
      'run `tailscale up` (and check `tailscale status`)',
    ),
  ];
}

/** The agent answers GET /v1/status on its socket. */
export async function checkSocket(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c } = r;
  const s: LocalResult = await callAgent(c.socketPath, 'GET', '/v1/status', c.requestTimeoutSeconds);
  if (s.kind === 'answer' && s.status === 200) {
    r.agentRuns = true;
    const b = fieldsOf(s.body);
    const st = await lstat(c.socketPath).catch(() => null);
    const m = st === null ? '' : `, mode ${mode(st.mode)}`;
    return [
      pass(
        'socket',
        `the agent answers on ${c.socketPath}${m} (holder ${typeof b.holder === 'string' ? b.holder : 'none'}, generation ${String(b.generation ?? '?')})`,
      ),
    ];
  }
  const why = s.kind === 'unreachable' ? s.problem : `HTTP ${s.status}`;
  return [
    fail(
      'socket',
      `the agent does not answer on ${c.socketPath} (${why})`,
      r.platform === 'darwin'
        ? 'start it: launchctl kickstart -k gui/$(id -u)/com.hq.agent'
        : 'start it: systemctl start hq-agent (journalctl -u hq-agent for why it stopped)',
    ),
  ];
}

export async function checkUnit(
  paths: readonly string[],
  platform: NodeJS.Platform,
  agentRuns = false,
): Promise<DoctorCheck> {
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
  if (agentRuns)
    return skip(
      'unit',
      `no hq unit is installed (${paths.join(', ')}), and the agent answers: it runs under something else (by hand, npm start, another supervisor); for restarts after a crash or a reboot, ${fix}`,
    );
  return fail('unit', `none of ${paths.join(', ')} exists`, fix);
}
