/**
 * Token files (member token, peer token, admin token): hex on one line, a trailing newline
 * ignored, mode 0600 required. `TokenFile` re-reads the file whenever its mtime or size
 * changes, so a rotated token is picked up without a restart.
 */
import { stat } from 'node:fs/promises';
import { timingSafeEqual, createHash } from 'node:crypto';
import { readSecure } from '@hq/runtime/files';

export type TokenRead =
  | { readonly ok: true; readonly token: string }
  | { readonly ok: false; readonly problem: string };

export async function readToken(path: string): Promise<TokenRead> {
  const r = await readSecure(path, { secret: true, maxBytes: 4096 });
  if (r.kind === 'missing') return { ok: false, problem: `token file ${path} does not exist` };
  if (r.kind === 'refused') return { ok: false, problem: `token file ${path} ${r.problem}` };
  const token = r.text.replace(/\r?\n$/, '');
  if (!/^[A-Za-z0-9._~+/-]{16,256}$/.test(token))
    return { ok: false, problem: `token file ${path} does not hold a token` };
  return { ok: true, token };
}

export class TokenFile {
  private cached: { key: string; read: TokenRead } | null = null;
  constructor(readonly path: string) {}

  async get(): Promise<TokenRead> {
    let key: string;
    try {
      const st = await stat(this.path);
      key = `${st.mtimeMs}:${st.size}:${st.ino}:${st.mode}`;
    } catch {
      this.cached = null;
      return { ok: false, problem: `token file ${this.path} does not exist` };
    }
    if (this.cached !== null && this.cached.key === key) return this.cached.read;
    const read = await readToken(this.path);
    this.cached = { key, read };
    return read;
  }
}

/** Constant-time comparison (hashing first makes the lengths equal). */
export function tokensEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/**
 * The one peer-token check (agent ↔ agent: the peer listener, replication pushes): the
 * Authorization header carries the peer token, re-read through `file` on every call (a rotation
 * needs no restart) and compared in constant time. Without a readable token nothing matches.
 */
export async function peerTokenMatches(
  file: { get(): Promise<TokenRead> },
  authorization: string | string[] | undefined,
): Promise<boolean> {
  const given = bearer(authorization);
  if (given === null) return false;
  const t = await file.get();
  return t.ok && tokensEqual(given, t.token);
}

/** The bearer token of an Authorization header value (scheme case-insensitive), or null. */
export function bearer(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null;
  const m = /^bearer\s+(\S+)\s*$/i.exec(header);
  return m === null ? null : (m[1] as string);
}

/**
 * What fixes a token file `readToken` refused: a mode or owner needs chmod/chown, which keeps
 * the token valid; only a missing or garbled file needs a new token (a reissue invalidates the old).
 */
export function tokenFileFix(problem: string, path: string, host: string): string {
  if (/must be mode 0600|group- or world-writable/.test(problem))
    return `fix: chmod 600 ${path} (the token itself stays valid)`;
  if (/is owned by uid/.test(problem))
    return `fix: chown it to the agent's user, or run the agent as the file's owner (the token itself stays valid)`;
  return `fix: on the arbiter, hq-arbiter join ${host} then hq join … on this host (or hq-arbiter token issue ${host} --scope member --config /etc/hq/arbiter.json into ${path}, mode 0600)`;
}
