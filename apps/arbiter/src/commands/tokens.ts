/** `hq-arbiter token issue|revoke|list`: the bearer tokens, straight in the store. */
import { HOST_PATTERN, isHost } from '@hq/protocol';
import { flagBool, flagString, usage } from '@hq/runtime/cli';
import { SCOPES, describeTokens, issueToken, reissueToken, tokenNameProblem } from '../auth.js';
import type { Scope } from '../store/store.js';
import { config, withStore, type Invocation } from './context.js';

/** The MACHINE word of `token VERB MACHINE`. */
function machineOf(verb: string, words: readonly string[]): string {
  const [machine, ...extra] = words;
  if (extra.length > 0) throw usage(`unexpected argument "${extra[0]}"`);
  if (machine === undefined || !isHost(machine))
    throw usage(`token ${verb} needs a MACHINE matching ${HOST_PATTERN.source}`);
  return machine;
}

export async function tokenIssue({ p, words, io, clock }: Invocation): Promise<number> {
  const machine = machineOf('issue', words);
  const scope = flagString(p, 'scope') ?? 'member';
  if (!(SCOPES as readonly string[]).includes(scope)) throw usage('--scope must be member, admin or query');
  const cfg = await config(p);
  const problem = tokenNameProblem(machine, scope as Scope, cfg);
  if (problem !== null) throw usage(problem);
  return withStore(cfg, async (store) => {
    const now = clock.now() / 1000;
    if (flagBool(p, 'keep-old')) {
      io.out(`${await issueToken(store, machine, scope as Scope, now)}\n`);
      return 0;
    }
    const { token, replaced } = await reissueToken(store, machine, scope as Scope, now);
    io.out(`${token}\n`);
    if (replaced > 0)
      io.err(
        `hq-arbiter: replaced ${replaced} earlier ${scope} token(s) of ${machine}; they fail from the next request on\n`,
      );
    return 0;
  });
}

export async function tokenRevoke({ p, words, io, clock }: Invocation): Promise<number> {
  const machine = machineOf('revoke', words);
  const idFlag = flagString(p, 'id');
  const id = idFlag === undefined ? null : Number(idFlag);
  if (idFlag !== undefined && (!/^[1-9][0-9]*$/.test(idFlag) || !Number.isSafeInteger(id)))
    throw usage('--id must be a token id from "token list" (a positive integer)');
  const cfg = await config(p);
  return withStore(cfg, async (store) => {
    const now = clock.now() / 1000;
    const n = id === null ? await store.revokeTokens(machine, now) : await store.revokeToken(machine, id, now);
    io.out(
      id === null ? `revoked ${n} token(s) of ${machine}\n` : `revoked ${n} token(s) of ${machine} with id ${id}\n`,
    );
    return n > 0 ? 0 : 1;
  });
}

export async function tokenList({ p, words, io }: Invocation): Promise<number> {
  const [extra] = words;
  if (extra !== undefined)
    throw usage(
      words.length > 1 ? `unexpected argument "${words[1]}"` : `token list takes no arguments (got "${extra}")`,
    );
  const cfg = await config(p);
  const rows = await withStore(cfg, async (store) => describeTokens(await store.listTokens()));
  if (flagBool(p, 'json')) io.out(`${JSON.stringify(rows)}\n`);
  else {
    const when = (t: number | null) => (t === null ? '-' : new Date(t * 1000).toISOString());
    io.out('ID\tMACHINE\tSCOPE\tCREATED\tREVOKED\n');
    for (const r of rows) io.out(`${r.id}\t${r.machine}\t${r.scope}\t${when(r.created)}\t${when(r.revoked)}\n`);
  }
  return 0;
}
