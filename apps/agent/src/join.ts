/**
 * The join file `hq primary --write-join FILE` writes: where the primary is and how to talk to
 * the arbiter, for a tool on this host that must find HQ without asking every candidate itself.
 *
 *   {"url": "http://node-a.example.ts.net:8471", "host": "node-a", "generation": 7,
 *    "arbiterUrl": "http://cloud-vm.example.ts.net:8470", "token": "…", "tokenScope": "query"}
 *
 * `url` is the holder's peer listener (this host's `advertisedUrl` when it holds the lease, else
 * the candidate's peer URL); both URLs must be bare origins (no credentials, no path). The token
 * is issued for `arbiterUrl` only: `queryTokenFile` when configured (it must then be readable),
 * else `{stateDir}/query-token` when it exists, else the member token (`tokenFile`). The write is
 * atomic (temp + fsync + rename + directory fsync, mode 0600); a missing directory is created
 * 0700, an existing one is left as it is.
 */
import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { advertisedUrl, bareOriginProblem, resolveNetwork, type AgentConfig } from './config.js';
import { writeAtomic } from '@hq/runtime/files';
import { readToken } from './tokens.js';

export type TokenScope = 'query' | 'member';

export interface JoinFile {
  readonly url: string;
  readonly host: string;
  readonly generation: number;
  readonly arbiterUrl: string;
  readonly token: string;
  readonly tokenScope: TokenScope;
}

export type JoinWrite =
  | { readonly ok: true; readonly path: string; readonly tokenScope: TokenScope }
  | { readonly ok: false; readonly problem: string };

/** The token for the join file: query scope first, the member token as the fallback. */
export async function joinToken(
  c: AgentConfig,
): Promise<{ ok: true; token: string; scope: TokenScope } | { ok: false; problem: string }> {
  if (c.queryTokenFile !== null) {
    const q = await readToken(c.queryTokenFile);
    return q.ok
      ? { ok: true, token: q.token, scope: 'query' }
      : { ok: false, problem: `${q.problem} (queryTokenFile)` };
  }
  const implicit = await readToken(join(c.stateDir, 'query-token'));
  if (implicit.ok) return { ok: true, token: implicit.token, scope: 'query' };
  if (!/does not exist$/.test(implicit.problem))
    return { ok: false, problem: `${implicit.problem} (fix or remove it to fall back to the member token)` };
  const m = await readToken(c.tokenFile);
  return m.ok
    ? { ok: true, token: m.token, scope: 'member' }
    : { ok: false, problem: `${m.problem} (tokenFile; or set queryTokenFile)` };
}

export async function writeJoin(
  c: AgentConfig,
  file: string,
  primary: { holder: string; generation: number; url: string },
): Promise<JoinWrite> {
  const url = primary.holder === c.hostName ? advertisedUrl(c) : primary.url;
  if (url === null)
    return { ok: false, problem: `this host holds the lease but others have no URL for it: set advertiseUrl` };
  const urlProblem = bareOriginProblem(url);
  if (urlProblem !== null) return { ok: false, problem: `the primary's URL "${url}" ${urlProblem}` };
  let arbiterUrl: string;
  try {
    arbiterUrl = (await resolveNetwork(c)).arbiterUrl;
  } catch (err) {
    return { ok: false, problem: (err as Error).message };
  }
  const arbiterProblem = bareOriginProblem(arbiterUrl);
  if (arbiterProblem !== null) return { ok: false, problem: `arbiterUrl "${arbiterUrl}" ${arbiterProblem}` };
  const tok = await joinToken(c);
  if (!tok.ok) return { ok: false, problem: tok.problem };
  const body: JoinFile = {
    url: new URL(url).origin,
    host: primary.holder,
    generation: primary.generation,
    arbiterUrl: new URL(arbiterUrl).origin,
    token: tok.token,
    tokenScope: tok.scope,
  };
  const path = resolve(file);
  try {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    await writeAtomic(path, `${JSON.stringify(body, null, 2)}\n`, 0o600);
  } catch (err) {
    return {
      ok: false,
      problem: `cannot write ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    };
  }
  return { ok: true, path, tokenScope: tok.scope };
}
