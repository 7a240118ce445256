/**
 * Survival copies in etcd (store "etcd"), under the installation's prefix, so every arbiter in
 * front of the cluster serves the same copies and a takeover loses none:
 *
 *   {prefix}/survival/{machine}/blobs/{sha256}        a blob's bytes (base64), content-addressed
 *   {prefix}/survival/{machine}/{tier}/mark           the highest lease generation accepted (S7)
 *   {prefix}/survival/{machine}/{tier}/g/{generation} {manifest, sums} of a published generation
 *   {prefix}/survival/{machine}/{tier}/latest         the newest published generation
 *   {prefix}/survival/{machine}/gc-below              blobs created before this revision and in no kept
 *                                                     generation are removed at the next commit
 *
 * Size: etcd keeps every value in its raft log and memory-maps its database (its request limit is
 * 1.5 MiB, its default quota 2 GiB), so this store is for what survival copies are — a ledger,
 * a few decision files: a blob is at most 1 MiB and a generation at most 16 MiB
 * (`ETCD_SURVIVAL_LIMITS`; larger is refused with 413 saying so). Large state goes to the
 * standby (`hq standby push`), which keeps any size on its own disk. Blobs are shared by the
 * generations that list them, so keep-N costs only what changed.
 *
 * Commit: the mark and the generation's key are read, every entry's blob read back and checked
 * (size, sha256), then one txn compares the mark's mod_revision (another arbiter or process
 * accepting meanwhile loses) and the generation's absence, and writes the generation, `latest`
 * and the mark. Nothing else reads or decides on a clock, so no election guard is needed: the
 * compare alone keeps S7.
 */
import { createHash } from 'node:crypto';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import {
  GENERATION_RE,
  TIERS,
  formatManifest,
  isHost,
  type Manifest,
  type SurvivalList,
  type TierGenerations,
} from '@hq/protocol';
import type { BlobResult, CommitResult, SurvivalStore } from '../../survival/store.js';
import { cmp, op, type EtcdClient, type TxnOp } from './client.js';
import { EtcdError } from './errors.js';
import { MAX_TXN_OPS, etcdKeys } from './keys.js';
import { pagesOf } from './lease.js';

export const ETCD_SURVIVAL_LIMITS = Object.freeze({ blobBytes: 1024 * 1024, generationBytes: 16 * 1024 * 1024 });

/** How often a commit that lost its compare to another writer reads and decides again. */
const RETRIES = 8;

export class EtcdSurvivalStore implements SurvivalStore {
  readonly maxBlobBytes = ETCD_SURVIVAL_LIMITS.blobBytes;
  private readonly root: string;

  constructor(
    private readonly client: EtcdClient,
    prefix: string,
  ) {
    this.root = etcdKeys(prefix).survivalDir;
  }

  private blob(machine: string, sha256: string): string {
    return `${this.root}${machine}/blobs/${sha256}`;
  }

  private tierKey(machine: string, tier: string, rest: string): string {
    return `${this.root}${machine}/${tier}/${rest}`;
  }

  async putBlob(machine: string, sha256: string, data: AsyncIterable<Buffer>): Promise<BlobResult> {
    const parts: Buffer[] = [];
    let bytes = 0;
    const hash = createHash('sha256');
    for await (const buf of data) {
      bytes += buf.length;
      if (bytes > this.maxBlobBytes) {
        return {
          ok: false,
          error: 'too-large',
          message: `with store "etcd" a survival blob may not exceed ${this.maxBlobBytes} bytes: large files belong on the standby (hq standby push), not in a survival copy`,
        };
      }
      hash.update(buf);
      parts.push(buf);
    }
    if (hash.digest('hex') !== sha256)
      return { ok: false, error: 'checksum', message: 'the blob does not match its sha256' };
    // Content-addressed: the same name always holds the same bytes, so a second put changes nothing.
    await this.client.put(this.blob(machine, sha256), Buffer.concat(parts).toString('base64'));
    return { ok: true, bytes };
  }

  async commit(machine: string, m: Manifest, sums: string, keep: number): Promise<CommitResult> {
    const total = m.entries.reduce((n, e) => n + e.bytes, 0);
    if (total > ETCD_SURVIVAL_LIMITS.generationBytes) {
      return {
        ok: false,
        error: 'too-large',
        message: `with store "etcd" a survival generation may not exceed ${ETCD_SURVIVAL_LIMITS.generationBytes} bytes (this one has ${total}): keep large files for the standby`,
      };
    }
    // Every blob once, checked against every entry that names it.
    const seen = new Map<string, Buffer | null>();
    for (const e of m.entries) {
      if (!seen.has(e.sha256)) {
        const kv = (await this.client.get(this.blob(machine, e.sha256))).kv;
        seen.set(e.sha256, kv === undefined ? null : Buffer.from(kv.value, 'base64'));
      }
      const b = seen.get(e.sha256) as Buffer | null;
      if (b === null) return { ok: false, error: 'incomplete', message: `the blob of ${e.path} was not sent` };
      if (b.length !== e.bytes || createHash('sha256').update(b).digest('hex') !== e.sha256)
        return { ok: false, error: 'checksum', message: `${e.path} does not match its manifest entry` };
    }
    const markKey = this.tierKey(machine, m.tier, 'mark');
    const genKey = this.tierKey(machine, m.tier, `g/${m.generation}`);
    let revision = 0n;
    for (let attempt = 0; ; attempt++) {
      const markKv = (await this.client.get(markKey)).kv;
      const mark = markKv === undefined ? 0 : parseGeneration(markKv.value);
      // A mark that is not a generation would turn the S7 check off: refuse, loudly (503).
      if (mark === null)
        throw new EtcdError(
          'unavailable',
          `the survival mark ${markKey} holds ${JSON.stringify(markKv?.value.slice(0, 40))}, not a lease generation: put the highest lease generation there (etcdctl put) or delete the tier`,
        );
      const v = checkGeneration(mark, m.leaseGeneration);
      if (!v.ok)
        return {
          ok: false,
          error: 'stale',
          message: `lease generation ${m.leaseGeneration} is lower than ${mark}, the highest accepted`,
        };
      const r = await this.client.txn({
        compare: [
          markKv === undefined ? cmp.absent(markKey) : cmp.mod(markKey, '==', markKv.modRevision),
          cmp.absent(genKey),
        ],
        success: [
          op.put(genKey, JSON.stringify({ manifest: formatManifest(m), sums })),
          op.put(this.tierKey(machine, m.tier, 'latest'), m.generation),
          ...(m.leaseGeneration > mark || markKv === undefined
            ? [op.put(markKey, String(Math.max(mark, m.leaseGeneration)))]
            : []),
        ],
      });
      if (r.succeeded) {
        revision = r.revision;
        break;
      }
      if ((await this.client.get(genKey)).kv !== undefined)
        return { ok: false, error: 'exists', message: `survival generation ${m.tier}/${m.generation} exists` };
      if (attempt >= RETRIES)
        throw new EtcdError(
          'unavailable',
          'the survival mark kept changing under the commit (too many writers): send again',
        );
    }
    await this.prune(machine, m.tier, m.generation, keep, revision);
    return { ok: true, files: m.entries.length };
  }

  /** Keep N of this tier; then drop the blobs no kept generation of the machine lists, once they are a commit old. */
  private async prune(machine: string, tier: string, committed: string, keep: number, revision: bigint): Promise<void> {
    const dir = this.tierKey(machine, tier, 'g/');
    const names: string[] = [];
    for await (const page of pagesOf(this.client, dir, undefined, { keysOnly: true }))
      for (const kv of page) names.push(kv.key.slice(dir.length));
    const drop = names
      .sort()
      .slice(0, Math.max(0, names.length - keep))
      .filter((n) => n !== committed);
    const deletes: TxnOp[] = drop.map((n) => op.delete(`${dir}${n}`));
    const referenced = new Set<string>();
    for (const t of TIERS) {
      const d = this.tierKey(machine, t, 'g/');
      for await (const page of pagesOf(this.client, d)) {
        for (const kv of page) {
          if (t === tier && drop.includes(kv.key.slice(d.length))) continue;
          const g = JSON.parse(kv.value) as { manifest: string };
          for (const e of (JSON.parse(g.manifest) as Manifest).entries) referenced.add(e.sha256);
        }
      }
    }
    // A blob sent for a push that has not committed yet is newer than the last commit: it stays.
    // modRevision, not createRevision: a put on an existing key keeps its create revision, so a
    // blob sent again for a push in flight would look as old as its first sending.
    const gcKey = `${this.root}${machine}/gc-below`;
    const below = BigInt((await this.client.get(gcKey)).kv?.value ?? '0');
    const blobDir = `${this.root}${machine}/blobs/`;
    // Keys and revisions only: a page of blobs is up to 1000 values of up to 1 MiB each.
    for await (const page of pagesOf(this.client, blobDir, undefined, { keysOnly: true })) {
      for (const kv of page)
        if (!referenced.has(kv.key.slice(blobDir.length)) && kv.modRevision < below) deletes.push(op.delete(kv.key));
    }
    deletes.push(op.put(gcKey, String(revision)));
    for (let i = 0; i < deletes.length; i += MAX_TXN_OPS)
      await this.client.txn({ compare: [], success: deletes.slice(i, i + MAX_TXN_OPS) });
  }

  async list(): Promise<SurvivalList> {
    const byMachine = new Map<string, Map<string, { generations: string[]; latest: string | null }>>();
    const latest: Array<{ key: string; t: { latest: string | null } }> = [];
    // Keys only (the blobs are below the same root); the few `latest` values are read after.
    for await (const page of pagesOf(this.client, this.root, undefined, { keysOnly: true })) {
      for (const kv of page) {
        const [machine, tier, kind, name] = kv.key.slice(this.root.length).split('/');
        if (
          machine === undefined ||
          !isHost(machine) ||
          tier === undefined ||
          !(TIERS as readonly string[]).includes(tier)
        )
          continue;
        const tiers = byMachine.get(machine) ?? new Map<string, { generations: string[]; latest: string | null }>();
        byMachine.set(machine, tiers);
        const t = tiers.get(tier) ?? { generations: [], latest: null };
        tiers.set(tier, t);
        if (kind === 'g' && name !== undefined && GENERATION_RE.test(name)) t.generations.push(name);
        if (kind === 'latest') latest.push({ key: kv.key, t });
      }
    }
    await Promise.all(latest.map(async (l) => (l.t.latest = (await this.client.get(l.key)).kv?.value ?? null)));
    const machines = [...byMachine.keys()].sort().map((machine) => ({
      machine,
      tiers: TIERS.map((tier): TierGenerations => {
        const t = byMachine.get(machine)?.get(tier);
        return { tier, latest: t?.latest ?? null, generations: (t?.generations ?? []).sort() };
      }),
    }));
    return { machines };
  }
}
