/**
 * The survival copies' seam: where the arbiter keeps what holders send it. The route
 * (routes/survival.ts) checks who sends what; a store keeps blobs and publishes generations.
 * `FileSurvivalStore` (../store/sqlite/survival.ts) keeps them under `{dataDir}/survival` (one arbiter, SQLite);
 * `EtcdSurvivalStore` (../store/etcd/survival.ts) under the etcd prefix, so that every arbiter
 * in front of the cluster serves the same copies and a takeover loses none.
 *
 * What a store guarantees:
 *  - a blob is kept only when its bytes hash to its name (else `checksum`, nothing kept);
 *  - `commit` publishes a generation whole or not at all: every entry's blob present, of its size
 *    and hash; its lease generation not below the highest the store accepted for that machine
 *    and tier (S7, lease-core `checkGeneration`), checked and raised atomically with the
 *    publication, also against another process; an existing generation is never replaced;
 *  - the newest `keep` generations per machine and tier are kept, older ones go.
 */
import type { Manifest, SurvivalList, Tier } from '@hq/protocol';

export type BlobResult =
  | { readonly ok: true; readonly bytes: number }
  | { readonly ok: false; readonly error: 'too-large' | 'checksum'; readonly message: string };

export type CommitError = 'stale' | 'exists' | 'incomplete' | 'checksum' | 'too-large';

export type CommitResult =
  | { readonly ok: true; readonly files: number }
  | { readonly ok: false; readonly error: CommitError; readonly message: string };

export interface SurvivalStore {
  /** The largest blob this store takes, bytes. */
  readonly maxBlobBytes: number;
  /** Keeps one blob of `machine`'s, if `data` hashes to `sha256` and stays within `maxBlobBytes`. */
  putBlob(machine: string, sha256: string, data: AsyncIterable<Buffer>): Promise<BlobResult>;
  /** Publishes generation `m.generation` of `m.tier` for `machine` (a checked manifest, its SHA256SUMS). */
  commit(machine: string, m: Manifest, sums: string, keep: number): Promise<CommitResult>;
  /** Every machine's tiers: the generations kept and `latest`. */
  list(): Promise<SurvivalList>;
}

/** Keep N per tier unless told otherwise: core 36, big 8, obs 8. */
export const SURVIVAL_KEEP: { readonly [T in Tier]: number } = Object.freeze({ core: 36, big: 8, obs: 8 });
