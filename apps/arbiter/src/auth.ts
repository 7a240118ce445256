/**
 * Bearer tokens: 256 random bits, shown once as 64 hex characters, stored only as
 * their sha256. A presented token is hashed, looked up, and the stored hash compared with
 * `timingSafeEqual`. Tokens are read from the store on every request, or — for a request whose
 * decision's commit confirms its token (store etcd) — checked again in that commit; either way a
 * revocation is effective from the next request on.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { writeAtomicSync } from '@hq/runtime/files';
import type { Scope, TokenRow, TokenStore } from './store/store.js';
import { andThen, type Awaitable } from './awaitable.js';

export const TOKEN_PATTERN = /^[0-9a-f]{64}$/;
export const SCOPES: readonly Scope[] = ['admin', 'member', 'query'];

export function newToken(): string {
  return randomBytes(32).toString('hex');
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export interface Principal {
  readonly machine: string;
  readonly scope: Scope;
  /**
   * The sha256 of a token let in from memory (`TokenStore.knownToken`), not read now: the
   * request's decision must confirm it in its commit (`Arbiter.submit`). Absent: read now.
   */
  readonly confirm?: string;
}

export type AuthResult =
  | { readonly ok: true; readonly principal: Principal | null }
  | { readonly ok: false; readonly status: 400 | 401; readonly message: string };

/** A stored row lets its token in when it is the token's (compared in constant time) and not revoked. */
export function tokenStands(row: TokenRow | undefined, hash: string): row is TokenRow {
  return row !== undefined && sameHash(row.sha256, hash) && row.revoked === null;
}

/**
 * Reads the Authorization header from raw headers (Node keeps only the first of duplicates):
 * none → principal null; two or more → 400; a malformed, unknown or revoked token → 401.
 * `fromMemory` (a request whose decision's commit confirms its token: `Arbiter.submit`): a
 * token the store holds in memory (`knownToken`) is let in without a read, the principal
 * carrying `confirm`; any other is read as always.
 */
export function authenticate(
  store: TokenStore,
  rawHeaders: readonly string[],
  fromMemory = false,
): Awaitable<AuthResult> {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'authorization') values.push(rawHeaders[i + 1] as string);
  }
  if (values.length === 0) return { ok: true, principal: null };
  if (values.length > 1) return { ok: false, status: 400, message: 'more than one Authorization header' };
  const m = /^([A-Za-z]+) +(\S+) *$/.exec(values[0] as string);
  if (m === null || (m[1] as string).toLowerCase() !== 'bearer') {
    return { ok: false, status: 401, message: 'the Authorization header must be "Bearer <token>"' };
  }
  const token = m[2] as string;
  if (!TOKEN_PATTERN.test(token)) return { ok: false, status: 401, message: 'the token is not valid' };
  const hash = sha256Hex(token);
  const known = fromMemory ? store.knownToken?.(hash) : undefined;
  // Unknown to memory, or revoked there (a revocation is never undone): read now.
  if (tokenStands(known, hash))
    return { ok: true, principal: { machine: known.machine, scope: known.scope, confirm: hash } };
  return andThen(store.findToken(hash), (row): AuthResult => {
    if (!tokenStands(row, hash)) return { ok: false, status: 401, message: 'the token is not valid' };
    return { ok: true, principal: { machine: row.machine, scope: row.scope } };
  });
}

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Issues a token for `machine`; returns the token (shown once) and stores only its hash. */
export async function issueToken(store: TokenStore, machine: string, scope: Scope, now: number): Promise<string> {
  const token = newToken();
  await store.insertToken(machine, scope, sha256Hex(token), now);
  return token;
}

/**
 * `token issue` without `--keep-old`: the new token replaces `machine`'s active tokens of the
 * same scope (they fail from the next request on). Returns the token and how many it replaced.
 */
export async function reissueToken(
  store: TokenStore,
  machine: string,
  scope: Scope,
  now: number,
): Promise<{ token: string; replaced: number }> {
  const token = newToken();
  return { token, replaced: await store.replaceToken(machine, scope, sha256Hex(token), now) };
}

/**
 * Which names may hold which scope (`token issue` refuses anything else, writing nothing):
 *  - `member` acts for one machine in the lease, so only for a candidate (a member token for
 *    any other name could never acquire, renew or heartbeat: a typo, not a machine);
 *  - `admin` and `query` belong to whoever uses them — the arbiter host, an operator, a
 *    dashboard — and never to a candidate's name, so that `token revoke mbp` (every token of mbp)
 *    and a member token's reissue never touch an operator's token by accident.
 * Returns the problem as one line, or null.
 */
export function tokenNameProblem(
  machine: string,
  scope: Scope,
  cfg: { readonly candidates: readonly string[]; readonly arbiter: string },
): string | null {
  const isCandidate = cfg.candidates.includes(machine);
  if (scope === 'member' && !isCandidate) {
    return `token issue: "${machine}" is not a candidate (candidates: ${cfg.candidates.join(', ')}); a member token acts for a candidate only — add it to candidates, or use --scope admin|query for the arbiter, an operator or a dashboard`;
  }
  if (scope !== 'member' && isCandidate) {
    return `token issue: "${machine}" is a candidate, whose token is member scope; name ${scope === 'admin' ? 'an admin' : 'a query'} token after its user (the arbiter "${cfg.arbiter}", an operator, a dashboard)`;
  }
  return null;
}

/** `token list` without secrets. */
export function describeTokens(
  rows: readonly TokenRow[],
): Array<{ id: number; machine: string; scope: Scope; created: number; revoked: number | null }> {
  return rows.map((r) => ({ id: r.id, machine: r.machine, scope: r.scope, created: r.created, revoked: r.revoked }));
}

/**
 * First start: with no active admin token in the database, issue one and write it to
 * `{dataDir}/admin.token` (replacing a stale file from an earlier database). Returns the path
 * when a token was written.
 */
export async function ensureAdminToken(
  store: TokenStore,
  dataDir: string,
  machine: string,
  now: number,
): Promise<string | null> {
  if (await store.hasActiveAdmin()) return null;
  const token = await issueToken(store, machine, 'admin', now);
  const path = join(dataDir, 'admin.token');
  writeAtomicSync(path, `${token}\n`);
  return path;
}
