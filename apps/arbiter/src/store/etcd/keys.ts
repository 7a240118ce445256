/**
 * Where the etcd store keeps each thing, under the installation's prefix (`store.prefix`,
 * `/hq` by default). One place, so that a backup, a restore and every store agree:
 *
 *   {prefix}/state                 the lease record, the floor and the observers' views: one JSON
 *                                  value, so that one compare of its mod_revision fences them all
 *   {prefix}/events/seq            the last event id handed out (ids never reused, also after a sweep)
 *   {prefix}/events/e/{id:16}      the events of one txn, up to 64, under the newest id (ids
 *                                  zero-padded: key order is id order; event-keys.ts)
 *   {prefix}/tokens/seq            the last token id
 *   {prefix}/tokens/h/{sha256}     one token row, by its hash (the hash is the look-up)
 *   {prefix}/check-lock            {owner, until} of the running check
 *   {prefix}/registry/r/{id}       one resource (id URI-encoded)
 *   {prefix}/registry/p/{port:5}   one port lease (zero-padded: key order is port order)
 *   {prefix}/election/{lease}      the arbiters' campaign keys (election.ts; never backed up)
 *   {prefix}/compaction            the revision the last compaction went to; its version is the
 *                                  compactors' turn counter (compactor.ts; never backed up)
 */
export interface EtcdKeys {
  readonly prefix: string;
  readonly state: string;
  readonly eventSeq: string;
  readonly eventDir: string;
  event(id: number): string;
  eventId(key: string): number;
  readonly tokenSeq: string;
  readonly tokenDir: string;
  token(sha256: string): string;
  readonly checkLock: string;
  readonly resourceDir: string;
  resource(id: string): string;
  readonly portDir: string;
  port(port: number): string;
  readonly electionDir: string;
  readonly compaction: string;
  /** Survival copies: `{machine}/…` below it (store/etcd/survival.ts). */
  readonly survivalDir: string;
}

export function etcdKeys(prefix: string): EtcdKeys {
  const p = prefix.replace(/\/+$/, '');
  const eventDir = `${p}/events/e/`;
  return {
    prefix: p,
    state: `${p}/state`,
    eventSeq: `${p}/events/seq`,
    eventDir,
    event: (id) => `${eventDir}${String(id).padStart(16, '0')}`,
    eventId: (key) => Number(key.slice(eventDir.length)),
    tokenSeq: `${p}/tokens/seq`,
    tokenDir: `${p}/tokens/h/`,
    token: (sha256) => `${p}/tokens/h/${sha256}`,
    checkLock: `${p}/check-lock`,
    resourceDir: `${p}/registry/r/`,
    resource: (id) => `${p}/registry/r/${encodeURIComponent(id)}`,
    portDir: `${p}/registry/p/`,
    port: (port) => `${p}/registry/p/${String(port).padStart(5, '0')}`,
    electionDir: `${p}/election/`,
    compaction: `${p}/compaction`,
    survivalDir: `${p}/survival/`,
  };
}

/** etcd's default `--max-txn-ops` is 128; a txn of ours stays below it with room to spare. */
export const MAX_TXN_OPS = 120;
