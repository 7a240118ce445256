/**
 * `hq join BUNDLE`: makes this host a candidate from the one line `hq-arbiter join HOST` printed.
 * It redeems the bundle at the arbiter (once), checks that the answer is signed by the arbiter the
 * bundle names (its identity pin), and writes this host's agent config — only this host's keys —
 * with its member token and the fleet's peer token beside it. Nothing is written unless every
 * check passed; `--dry-run` asks the arbiter for the same payload without using the bundle and
 * prints what would be written.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { stringField } from '@hq/protocol/answer';
import { decodeBundle, JOIN_PATH, verifyJoinAnswer, type JoinPayload } from '@hq/runtime/join-bundle';
import { AGENT_CONFIG } from '@hq/runtime/config-file';
import { PEER_PORT } from '@hq/runtime/probe';
import { DIR_MODE, ensureDir, writeAtomic } from '@hq/runtime/files';
import { joinUrl, requestJson } from '@hq/runtime/http';
import { wallClockMs } from '@hq/runtime/clock';
import { resolveConfig, validateConfigFile } from '../config.js';
import '../config-checker.js';
import { CliError, flagBool, flagString, usage, type Parsed } from './args.js';

/** The agent config `payload` describes for this host, as the file will hold it. */
export function agentConfigFor(
  payload: JoinPayload,
  stateDir: string,
  socketPath: string | undefined,
): Record<string, unknown> {
  const address = new URL(payload.address);
  const port = Number(address.port || (address.protocol === 'https:' ? 443 : 80));
  // An IP address is bound as it is; a name (MagicDNS) is published by `tailscale serve` from loopback.
  const literal = /^[0-9.]+$/.test(address.hostname) || address.hostname.startsWith('[');
  const file: Record<string, unknown> = {
    hostName: payload.host,
    arbiter: payload.arbiter,
    arbiterUrl: payload.arbiterUrl,
    peers: payload.peers,
    healthUrls: payload.healthUrls,
    listen: { host: literal ? address.hostname.replace(/^\[(.*)\]$/, '$1') : '127.0.0.1', port },
    stateDir,
  };
  if (socketPath !== undefined) file['socketPath'] = socketPath;
  if (payload.tailnetDomain !== null) file['tailnetDomain'] = payload.tailnetDomain;
  // Addresses the tailnet names already give are left out: the agent then follows the arbiter's
  // candidates, so a host joined later is a peer without editing this file.
  const domain = payload.tailnetDomain;
  if (domain !== null) {
    const derived = (h: string): string => `http://${h}.${domain}:${PEER_PORT}`;
    const byName =
      Object.entries(payload.peers).every(([h, u]) => u === derived(h)) &&
      Object.entries(payload.healthUrls).every(([h, u]) => u === `${derived(h)}/v1/health`);
    if (byName) {
      delete file['peers'];
      delete file['healthUrls'];
    }
  }
  if (payload.tailscaleBin !== null) file['tailscaleBin'] = payload.tailscaleBin;
  return file;
}

export async function joinFleet(p: Parsed): Promise<number> {
  const decoded = decodeBundle(p.positionals[0] ?? '');
  if (!decoded.ok) throw usage(decoded.problem);
  const b = decoded.bundle;
  const now = wallClockMs.now() / 1000;
  if (b.expiresAt <= now)
    throw new CliError(
      1,
      `this bundle for ${b.host} expired at ${new Date(b.expiresAt * 1000).toISOString()}: run hq-arbiter join ${b.host} on the arbiter again`,
    );
  const configPath = resolve(
    flagString(p, 'config') ?? (process.env[AGENT_CONFIG.envVar] || join(homedir(), '.hq', AGENT_CONFIG.name)),
  );
  const stateDir = resolve(flagString(p, 'state-dir') ?? dirname(configPath));
  const socketPath = flagString(p, 'socket');
  const dryRun = flagBool(p, 'dry-run');
  if (existsSync(configPath) && !flagBool(p, 'force')) {
    throw usage(
      `${configPath} exists: hq join writes a new config (and a new member token): move it away, or add --force to replace it`,
    );
  }
  const nonce = randomBytes(32).toString('hex');
  const r = await requestJson({
    method: 'POST',
    url: joinUrl(b.arbiterUrl, JOIN_PATH),
    body: { host: b.host, secret: b.secret, nonce, ...(dryRun ? { dryRun: true } : {}) },
    timeoutSeconds: 10,
  });
  if (r.kind === 'unreachable')
    throw new CliError(
      3,
      `the arbiter at ${b.arbiterUrl} does not answer (${r.problem}): is hq-arbiter serve running there, and is that address reachable from this host?`,
    );
  if (r.status !== 200) {
    const why = stringField(r.body, 'message') ?? `HTTP ${r.status}`;
    if (r.status === 404)
      throw new CliError(
        1,
        `${b.arbiterUrl} has no join endpoint (HTTP 404): it is not an hq arbiter of this release (an agent's address?)`,
      );
    throw new CliError(1, `the arbiter refused the bundle: ${why}`);
  }
  const v = verifyJoinAnswer(r.body, b.pin, nonce);
  if (!v.ok) throw new CliError(1, `${v.problem}; nothing was written`);
  const payload = v.payload;
  if (payload.host !== b.host)
    throw new CliError(1, `the arbiter answered for "${payload.host}", not "${b.host}"; nothing was written`);
  const file = agentConfigFor(payload, stateDir, socketPath);
  // Validate as the agent will load it: a payload the agent would refuse writes nothing.
  const c = resolveConfig(validateConfigFile(file), configPath);
  const text = `${JSON.stringify(file, null, 2)}\n`;
  if (dryRun) {
    process.stdout.write(
      `would write ${configPath} (0600):\n${text}` +
        `would write ${c.tokenFile} (0600): ${b.host}'s member token, issued when the bundle is used\n` +
        `would write ${c.peerTokenFile} (0600): the fleet's peer token\n` +
        `would make ${stateDir} (0700)\n` +
        `the bundle was not used: run the same line without --dry-run to join\n`,
    );
    return 0;
  }
  if (payload.memberToken === null || payload.peerToken === null)
    throw new CliError(1, 'the arbiter answered without tokens; nothing was written');
  const dirProblem = await ensureDir(stateDir, DIR_MODE);
  if (dirProblem !== null) throw new CliError(2, `stateDir: ${dirProblem}`);
  // The config's directory is made when missing, never re-moded (/etc/hq stays readable by its group).
  await mkdir(dirname(configPath), { recursive: true, mode: DIR_MODE });
  await writeAtomic(c.tokenFile, `${payload.memberToken}\n`);
  await writeAtomic(c.peerTokenFile, `${payload.peerToken}\n`);
  await writeAtomic(configPath, text);
  process.stdout.write(
    `joined ${b.host} to the fleet of ${payload.arbiter} (${payload.arbiterUrl}); peers: ${Object.keys(payload.peers).join(', ') || 'none'}\n` +
      `wrote ${configPath}, ${c.tokenFile} and ${c.peerTokenFile} (0600) in ${stateDir} (0700)\n` +
      `next: start the agent (hq-agent --config ${configPath}), then on the first HQ only: hq lease acquire --config ${configPath}\n`,
  );
  return 0;
}
