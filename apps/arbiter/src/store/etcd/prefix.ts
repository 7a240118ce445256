/**
 * Whole-prefix reads and writes: paging every key under a directory, a backup and its restore, and writing a new
 * prefix (restore, migrate). Apart from the seams, which each touch their own keys.
 */
import { readFile } from 'node:fs/promises';
import { writeAtomicSync } from '@hq/runtime/files';
import type { EtcdClient, KeyValue } from './client.js';
import { cmp, op } from './client.js';
import { etcdKeys, MAX_TXN_OPS, type EtcdKeys } from './keys.js';

const BACKUP_FORMAT = 'hq-etcd-backup/1';

/** A key under the prefix (`/state`, `/tokens/h/…`: the prefix left out) and its value. */
export interface PrefixKv {
  readonly key: string;
  readonly value: string;
}

/**
 * Writes `kvs` under `prefix`, which must hold nothing yet (else nothing is written); the state
 * goes last, so a write cut short never looks like a store (an open then starts a new one,
 * floor pending). Returns how many keys it wrote.
 */
export async function writeNewPrefix(client: EtcdClient, prefix: string, kvs: readonly PrefixKv[]): Promise<number> {
  const keys = etcdKeys(prefix);
  const there = await client.range(`${keys.prefix}/`, { prefix: true, countOnly: true });
  if (there.count > 0) throw new PrefixNotEmptyError(keys.prefix, there.count);
  const full = kvs.map((kv) => ({ key: `${keys.prefix}${kv.key}`, value: kv.value }));
  const rest = full.filter((kv) => kv.key !== keys.state);
  for (let i = 0; i < rest.length; i += MAX_TXN_OPS)
    await client.txn({ compare: [], success: rest.slice(i, i + MAX_TXN_OPS).map((kv) => op.put(kv.key, kv.value)) });
  const state = full.find((kv) => kv.key === keys.state);
  if (
    state !== undefined &&
    !(await client.txn({ compare: [cmp.absent(keys.state)], success: [op.put(keys.state, state.value)] })).succeeded
  ) {
    throw new Error(
      `etcd prefix ${keys.prefix}: another process wrote a state while this one wrote the prefix; delete the prefix and run again`,
    );
  }
  return full.length;
}

/** The target prefix of a restore or a migration already holds keys: nothing was written. */
export class PrefixNotEmptyError extends Error {
  constructor(
    readonly prefix: string,
    readonly count: number,
  ) {
    super(
      `etcd prefix ${prefix} is not empty (${count} keys): write into a new prefix, or delete this one first (etcdctl del --prefix ${prefix}/)`,
    );
    this.name = 'PrefixNotEmptyError';
  }
}

/**
 * Every key under `dir`, ascending, in pages of 1000, linearizable. All pages are read at the
 * revision of the first (a consistent copy) when `at` is given; `at.revision` says which.
 */
export async function* pagesOf(
  client: EtcdClient,
  dir: string,
  at?: { revision: bigint | undefined },
  opts: { readonly keysOnly?: boolean } = {},
): AsyncGenerator<readonly KeyValue[]> {
  let from = dir;
  for (;;) {
    const r = await client.range(from, {
      endOfPrefix: dir,
      limit: 1000,
      ...(at?.revision === undefined ? {} : { revision: at.revision }),
      ...(opts.keysOnly === true ? { keysOnly: true } : {}),
    });
    if (at !== undefined) at.revision ??= r.revision;
    if (r.kvs.length > 0) yield r.kvs;
    const last = r.kvs[r.kvs.length - 1];
    if (!r.more || last === undefined) return;
    from = `${last.key}\u0000`;
  }
}

/**
 * Every key under the prefix but the election's and the compaction's, read at one revision (a consistent copy
 * while the arbiters serve), written as one JSON document, owner-only, atomically.
 */
export async function backupPrefix(client: EtcdClient, keys: EtcdKeys, to: string): Promise<void> {
  const kvs: Array<{ key: string; value: string }> = [];
  const at = { revision: undefined as bigint | undefined };
  for await (const page of pagesOf(client, `${keys.prefix}/`, at)) {
    for (const kv of page)
      if (!kv.key.startsWith(keys.electionDir) && kv.key !== keys.compaction)
        kvs.push({ key: kv.key.slice(keys.prefix.length), value: kv.value });
  }
  const revision = at.revision;
  writeAtomicSync(
    to,
    `${JSON.stringify({ format: BACKUP_FORMAT, prefix: keys.prefix, revision: String(revision ?? 0n), kvs })}\n`,
  );
}

/**
 * Writes a backup's keys under `prefix`, which must hold nothing yet; the state goes last, so
 * a restore cut short never looks like a store (an open then starts a new one, floor pending).
 */
export async function restorePrefix(client: EtcdClient, prefix: string, from: string): Promise<number> {
  const doc = JSON.parse(await readFile(from, 'utf8')) as {
    format?: string;
    kvs?: Array<{ key: string; value: string }>;
  };
  if (doc.format !== BACKUP_FORMAT || !Array.isArray(doc.kvs))
    throw new Error(`${from} is not an hq etcd backup (format ${BACKUP_FORMAT})`);
  return writeNewPrefix(client, prefix, doc.kvs);
}
