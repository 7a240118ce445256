/**
 * Joining a candidate with one command. The arbiter keeps in its dataDir (0700):
 *  - `peer-token` (0600): the fleet's shared secret for agent↔agent calls; the arbiter never uses
 *    it, it only hands it to each joining agent;
 *  - `identity.key` (0600): an Ed25519 key whose public half's sha256 is the pin in every bundle,
 *    so a joining host can tell the arbiter that printed its bundle from any other address;
 *  - `joins/SHA256.json` (0600): one ticket per printed bundle, named by the sha256 of its
 *    one-time secret (the secret itself is never stored): `{host, arbiterUrl, createdAt, expiresAt}`.
 * A ticket is redeemed once: the redeemer that unlinks the file is the only one that gets an
 * answer. A newer bundle for the same host removes the older tickets of that host.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';
import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureDir, readSecure, writeAtomic, DIR_MODE } from '@hq/runtime/files';
import { PEER_PORT, tailnetHealthUrl } from '@hq/runtime/probe';
import { encodeBundle, identityPin, signedText, type JoinAnswer, type JoinPayload } from '@hq/runtime/join-bundle';
import type { ArbiterConfig } from './config.js';

/** How long a bundle may be redeemed when `--ttl` is not given. */
export const JOIN_TTL_SECONDS = 15 * 60;
/** The longest `--ttl`: a bundle is a secret in a terminal's scrollback. */
export const JOIN_TTL_MAX_SECONDS = 24 * 3600;

export const fleetFiles = (dataDir: string) => ({
  peerToken: join(dataDir, 'peer-token'),
  identity: join(dataDir, 'identity.key'),
  joins: join(dataDir, 'joins'),
});

const sha256Hex = (s: string): string => createHash('sha256').update(s).digest('hex');

/** `--ttl`: seconds, or a number with s, m or h. */
export function parseTtl(text: string): number | null {
  const m = /^([1-9][0-9]*)([smh]?)$/.exec(text);
  if (m === null) return null;
  const n = Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
  return n <= JOIN_TTL_MAX_SECONDS ? n : null;
}

async function readOrNull(path: string, what: string): Promise<string | null> {
  const r = await readSecure(path, { secret: true, maxBytes: 4096 });
  if (r.kind === 'missing') return null;
  if (r.kind === 'refused') throw new Error(`${what} ${path} ${r.problem}`);
  return r.text.trim();
}

/**
 * Makes sure the dataDir holds the peer token and the identity key (creating what is missing,
 * 0600 in a 0700 directory); returns what it created. Refuses a dataDir owned by another user:
 * the daemon reads these files and refuses any it does not own.
 */
export async function ensureFleetSecrets(dataDir: string): Promise<string[]> {
  const problem = await ensureDir(dataDir, DIR_MODE);
  if (problem !== null) throw new Error(`dataDir: ${problem}; run this as the arbiter's user (sudo -u hq …)`);
  const f = fleetFiles(dataDir);
  const made: string[] = [];
  if ((await readOrNull(f.peerToken, 'the peer token')) === null) {
    await writeAtomic(f.peerToken, `${randomBytes(32).toString('hex')}\n`);
    made.push(f.peerToken);
  }
  if ((await readOrNull(f.identity, 'the identity key')) === null) {
    const { privateKey } = generateKeyPairSync('ed25519');
    await writeAtomic(f.identity, privateKey.export({ format: 'pem', type: 'pkcs8' }) as string);
    made.push(f.identity);
  }
  return made;
}

export interface Identity {
  readonly privateKey: KeyObject;
  readonly publicDer: Buffer;
  readonly pin: string;
}

export async function loadIdentity(dataDir: string): Promise<Identity | null> {
  const pem = await readOrNull(fleetFiles(dataDir).identity, 'the identity key');
  if (pem === null) return null;
  const privateKey = createPrivateKey(pem);
  const publicDer = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  return { privateKey, publicDer, pin: identityPin(publicDer) };
}

/** The origin of a candidate's peer listener: its pinned health URL without the path, else the tailnet name. */
export function peerOrigin(cfg: ArbiterConfig, host: string): string | null {
  const pinned = cfg.healthUrls.get(host);
  if (pinned !== undefined) {
    try {
      return new URL(pinned).origin;
    } catch {
      return null;
    }
  }
  return cfg.tailnetDomain === null ? null : `http://${host}.${cfg.tailnetDomain}:${PEER_PORT}`;
}

export function healthUrlOf(cfg: ArbiterConfig, host: string): string | null {
  return (
    cfg.healthUrls.get(host) ??
    (cfg.tailnetDomain === null ? null : tailnetHealthUrl(host, cfg.tailnetDomain, PEER_PORT))
  );
}

/** Why `host` cannot join with this config (one line), or null. */
export function joinProblem(cfg: ArbiterConfig, host: string): string | null {
  if (!cfg.candidates.includes(host))
    return `"${host}" is not a candidate (candidates: ${cfg.candidates.join(', ')}); add it to candidates in the arbiter's config first`;
  for (const c of cfg.candidates) {
    if (peerOrigin(cfg, c) === null)
      return `the arbiter knows no address for candidate "${c}": set healthUrls.${c} (http://ADDRESS:${PEER_PORT}/v1/health) or tailnetDomain in the arbiter's config`;
  }
  return null;
}

/** The arbiter's URL as the candidates reach it: `--url`, else its tailnet name, else its listen address. */
export function defaultArbiterUrl(cfg: ArbiterConfig): string | null {
  if (cfg.tailnetDomain !== null) return `http://${cfg.arbiter}.${cfg.tailnetDomain}:${cfg.listen.port}`;
  if (cfg.listen.host === '0.0.0.0' || cfg.listen.host === '::') return null;
  const h = cfg.listen.host.includes(':') ? `[${cfg.listen.host}]` : cfg.listen.host;
  return `http://${h}:${cfg.listen.port}`;
}

/** Writes a ticket for `host` and returns the bundle to print (once). */
export async function createJoin(
  cfg: ArbiterConfig,
  host: string,
  arbiterUrl: string,
  ttlSeconds: number,
  nowSeconds: number,
): Promise<{ bundle: string; expiresAt: number }> {
  await ensureFleetSecrets(cfg.dataDir);
  const identity = await loadIdentity(cfg.dataDir);
  if (identity === null) throw new Error('the identity key is missing');
  const dir = fleetFiles(cfg.dataDir).joins;
  const problem = await ensureDir(dir, DIR_MODE);
  if (problem !== null) throw new Error(problem);
  await dropTickets(dir, (t) => t.host === host || t.expiresAt <= nowSeconds);
  const secret = randomBytes(32).toString('hex');
  const expiresAt = Math.floor(nowSeconds) + ttlSeconds;
  await writeAtomic(
    join(dir, `${sha256Hex(secret)}.json`),
    `${JSON.stringify({ host, arbiterUrl, createdAt: nowSeconds, expiresAt })}\n`,
  );
  return { bundle: encodeBundle({ arbiterUrl, host, secret, pin: identity.pin, expiresAt }), expiresAt };
}

interface Ticket {
  readonly host: string;
  readonly arbiterUrl: string;
  readonly expiresAt: number;
}

async function readTicket(path: string): Promise<Ticket | null> {
  const r = await readSecure(path, { secret: true, maxBytes: 4096 });
  if (r.kind !== 'ok') return null;
  try {
    const t = JSON.parse(r.text) as Ticket;
    return typeof t.host === 'string' && typeof t.arbiterUrl === 'string' && typeof t.expiresAt === 'number' ? t : null;
  } catch {
    return null;
  }
}

async function dropTickets(dir: string, drop: (t: Ticket) => boolean): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!/^[0-9a-f]{64}\.json$/.test(name)) continue;
    const t = await readTicket(join(dir, name));
    if (t === null || drop(t)) await unlink(join(dir, name)).catch(() => undefined);
  }
}

export type Redeemed =
  | { readonly ok: true; readonly host: string; readonly arbiterUrl: string }
  | { readonly ok: false; readonly problem: string };

/**
 * Takes the ticket of `secret` for `host`: consumed (unlinked) unless `dryRun`. Exactly one of
 * concurrent redeemers wins: the one whose unlink removed the file.
 */
export async function redeemTicket(
  dataDir: string,
  host: string,
  secret: string,
  nowSeconds: number,
  dryRun: boolean,
): Promise<Redeemed> {
  const refused = {
    ok: false as const,
    problem: `no such join bundle for "${host}": it was used already, replaced by a newer one, or never printed here; run hq-arbiter join ${host} again`,
  };
  if (!/^[0-9a-f]{64}$/.test(secret)) return refused;
  const path = join(fleetFiles(dataDir).joins, `${sha256Hex(secret)}.json`);
  const raw = await readSecure(path, { secret: true, maxBytes: 4096 });
  // A ticket the daemon may not trust (another owner, readable by others): say so, not "no such bundle".
  if (raw.kind === 'refused')
    return {
      ok: false,
      problem: `the ticket of this bundle ${raw.problem}: run hq-arbiter join ${host} again as the daemon's user (sudo -u hq …)`,
    };
  const t = await readTicket(path);
  if (t === null || t.host !== host) return refused;
  if (t.expiresAt <= nowSeconds) {
    await unlink(path).catch(() => undefined);
    return {
      ok: false,
      problem: `the join bundle for "${host}" expired at ${new Date(t.expiresAt * 1000).toISOString()}; run hq-arbiter join ${host} again`,
    };
  }
  if (dryRun) return { ok: true, host, arbiterUrl: t.arbiterUrl };
  try {
    await unlink(path);
  } catch {
    return refused;
  }
  return { ok: true, host, arbiterUrl: t.arbiterUrl };
}

/** The payload for `host` (tokens filled in by the caller) signed over the host's nonce. */
export function signJoin(identity: Identity, nonce: string, payload: JoinPayload): JoinAnswer {
  const text = JSON.stringify(payload);
  return {
    payload: text,
    publicKey: identity.publicDer.toString('base64'),
    signature: sign(null, signedText(nonce, text), identity.privateKey).toString('base64'),
  };
}

export async function readPeerToken(dataDir: string): Promise<string | null> {
  return readOrNull(fleetFiles(dataDir).peerToken, 'the peer token');
}

/** What `host`'s agent needs of the fleet, from the arbiter's config. */
export function fleetPayload(
  cfg: ArbiterConfig,
  host: string,
  arbiterUrl: string,
  tokens: { memberToken: string | null; peerToken: string | null },
): JoinPayload {
  const peers: Record<string, string> = {};
  const healthUrls: Record<string, string> = {};
  for (const c of cfg.candidates) {
    const o = peerOrigin(cfg, c);
    const h = healthUrlOf(cfg, c);
    if (c !== host && o !== null) peers[c] = o;
    if (h !== null) healthUrls[c] = h;
  }
  return {
    host,
    arbiter: cfg.arbiter,
    arbiterUrl,
    peers,
    healthUrls,
    address: peerOrigin(cfg, host) ?? '',
    tailnetDomain: cfg.tailnetDomain,
    tailscaleBin: cfg.tailscaleBin === '' ? '' : null,
    ...tokens,
  };
}
