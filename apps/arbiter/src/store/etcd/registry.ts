/**
 * EtcdRegistryStore — the registry seam (`RegistryStore`, ../store.ts) in etcd, beside the
 * lease side under the same prefix (keys.ts: `{prefix}/registry/r/…`, `{prefix}/registry/p/…`).
 *
 * Invariants:
 *  - Every write is read → decide (../../registry/decide.ts, the same decisions as SQLite's) →
 *    one txn comparing the mod_revision of every key the decision read (a port allocation: the
 *    key of the port it chose, absent or as read): a write lost to another writer — another
 *    arbiter, another process — reads and decides again. So no port is ever handed to two live
 *    leases: the txn that leases a port is the one that saw it free, at that revision.
 *  - Reads are linearizable (C1): a decision never sees a stale member.
 *  - While a guard is set (the elected arbiter's), every write also compares the election key:
 *    the registry's decisions read a clock (expiry), so only the elected arbiter makes them.
 *  - An indeterminate write is read back: its own value (which names its lease id or its
 *    renewal time) tells whether it applied; when it cannot tell, the caller gets the error.
 *  - `commitAll` cannot group in etcd (no savepoints in a txn): one commit per write, in order,
 *    each decided on the ones before it.
 */
import {
  DEFAULT_BANDS,
  decideAllocation,
  decideLeaseAccess,
  decideRegister,
  decideResourceDelete,
  decideResourceHeartbeat,
  renewedLease,
  validateBands,
  type Actor,
  type AllocateResult,
  type Attrs,
  type Bands,
  type LeaseAccess,
  type PortLeaseRow,
  type RegisterInput,
  type ResourceResult,
  type ResourceRow,
} from '../../registry/decide.js';
import type { Awaitable } from '../../awaitable.js';
import {
  attrsFromJson,
  attrsToObject,
  type AllocateRequest,
  type RegistryStore,
  type ResourceFilter,
  type WriteOutcome,
} from '../../registry/store.js';
import { cmp, op, type Compare, type EtcdClient, type KeyValue, type TxnOp } from './client.js';
import { EtcdError, isEtcdError } from './errors.js';
import { etcdKeys, type EtcdKeys } from './keys.js';
import { NotElectedError, pagesOf } from './lease.js';

/** A resource's value: the row, its attrs as the same JSON text SQLite stores. */
type StoredResource = Omit<ResourceRow, 'attrs'> & { readonly attrs: string };

export const encodeResource = (r: ResourceRow): string =>
  JSON.stringify({ ...r, attrs: JSON.stringify(attrsToObject(r.attrs)) } satisfies StoredResource);

function decodeResource(text: string): ResourceRow {
  const r = JSON.parse(text) as StoredResource;
  return { ...r, attrs: attrsFromJson(r.attrs) };
}

const decodeLease = (text: string): PortLeaseRow => JSON.parse(text) as PortLeaseRow;

/** Lost compares before a write gives up (each one means another writer committed first). */
const RETRIES = 16;

/** One decided write: the txn, and what it answers once committed. */
interface Plan<T> {
  readonly compare: readonly Compare[];
  readonly success: readonly TxnOp[];
  readonly answer: T;
  /** The key and value read back after an indeterminate answer (absent value: a delete). */
  readonly probe?: { readonly key: string; readonly value: string | null };
}

/** A resource decision as `oneKey` writes it: the resource put, or nothing for a refusal. */
function resourcePut(d: ResourceResult): { answer: ResourceResult; value: string | undefined } {
  return { answer: d, value: d.ok ? encodeResource(d.resource) : undefined };
}

export interface EtcdRegistryOptions {
  readonly client: EtcdClient;
  readonly prefix: string;
  readonly bands?: Bands;
}

export class EtcdRegistryStore implements RegistryStore {
  readonly bands: Bands;
  private readonly client: EtcdClient;
  private readonly keys: EtcdKeys;
  private guard: (() => Compare) | null = null;

  constructor(opts: EtcdRegistryOptions) {
    this.bands = opts.bands ?? DEFAULT_BANDS;
    const v = validateBands(this.bands);
    if (!v.ok) throw new Error(v.message);
    this.client = opts.client;
    this.keys = etcdKeys(opts.prefix);
  }

  /** Every write from now on also compares `guard()` (the elected arbiter's election key). */
  setGuard(guard: (() => Compare) | null): void {
    this.guard = guard;
  }

  // -------------------------------------------------------------------------------------
  // resources

  register(req: RegisterInput, actor: Actor, now: number): Promise<ResourceResult> {
    return this.oneKey(this.keys.resource(req.id), decodeResource, (row) =>
      resourcePut(decideRegister(row, req, actor, now)),
    );
  }

  heartbeatResource(id: string, attrs: Attrs | undefined, actor: Actor, now: number): Promise<ResourceResult> {
    return this.oneKey(this.keys.resource(id), decodeResource, (row) =>
      resourcePut(decideResourceHeartbeat(row, id, attrs, actor, now)),
    );
  }

  deleteResource(id: string, actor: Actor, now: number): Promise<ResourceResult> {
    return this.oneKey(this.keys.resource(id), decodeResource, (row) => {
      const d = decideResourceDelete(row, id, actor, now);
      return { answer: d, value: d.ok ? null : undefined };
    });
  }

  /**
   * One key read, decided and written in one txn that compares the key as read (a lost compare
   * decides again: `write`). `decide` gets the decoded row (undefined: absent) and says the answer
   * and the key's new value: a string to put, null to delete, undefined to write nothing (a refusal).
   */
  private oneKey<R, A>(
    key: string,
    decode: (value: string) => R,
    decide: (row: R | undefined) => { answer: A; value: string | null | undefined },
  ): Promise<A> {
    return this.write(async (): Promise<Plan<A>> => {
      const kv = await this.get(key);
      const { answer, value } = decide(kv === undefined ? undefined : decode(kv.value));
      if (value === undefined) return { compare: [], success: [], answer };
      return {
        compare: [unchanged(key, kv)],
        success: [value === null ? op.delete(key) : op.put(key, value)],
        answer,
        probe: { key, value },
      };
    });
  }

  async listResources(filter: ResourceFilter, now: number): Promise<ResourceRow[]> {
    const rows: ResourceRow[] = [];
    for await (const page of pagesOf(this.client, this.keys.resourceDir)) {
      for (const kv of page) {
        const r = decodeResource(kv.value);
        if (
          r.expiresAt > now &&
          (filter.kind === undefined || r.kind === filter.kind) &&
          (filter.machine === undefined || r.machine === filter.machine)
        )
          rows.push(r);
      }
    }
    return rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  // -------------------------------------------------------------------------------------
  // port leases

  /** Reads the band's leases, decides, and leases the chosen port in one txn that compares that port's key as read. */
  allocatePort(req: AllocateRequest, leaseId: string, now: number): Promise<AllocateResult> {
    return this.write(async (): Promise<Plan<AllocateResult>> => {
      const { test } = this.bands;
      const r = await this.client.range(this.keys.port(test.from), { end: this.keys.port(test.to + 1) });
      const byPort = new Map<number, KeyValue>();
      const rows: PortLeaseRow[] = [];
      for (const kv of r.kvs) {
        const l = decodeLease(kv.value);
        byPort.set(l.port, kv);
        rows.push(l);
      }
      const d = decideAllocation({
        bands: this.bands,
        rows,
        machine: req.machine,
        purpose: req.purpose,
        ttlMs: req.ttlMs,
        excluded: req.excluded ?? [],
        leaseId,
        now,
      });
      if (!d.ok) return { compare: [], success: [], answer: d };
      const key = this.keys.port(d.lease.port);
      const value = JSON.stringify(d.lease);
      // The port's key exactly as the decision saw it: absent, or the expired lease it replaces.
      return {
        compare: [unchanged(key, byPort.get(d.lease.port))],
        success: [op.put(key, value)],
        answer: d,
        probe: { key, value },
      };
    });
  }

  renewPort(port: number, leaseId: string, actor: Actor, now: number): Promise<LeaseAccess> {
    return this.oneKey(this.keys.port(port), decodeLease, (row): { answer: LeaseAccess; value: string | undefined } => {
      const d = decideLeaseAccess(row, port, leaseId, actor, now);
      if (!d.ok) return { answer: d, value: undefined };
      const next = renewedLease(d.lease, now);
      return { answer: { ok: true, lease: next }, value: JSON.stringify(next) };
    });
  }

  releasePort(port: number, leaseId: string, actor: Actor, now: number): Promise<LeaseAccess> {
    return this.oneKey(this.keys.port(port), decodeLease, (row) => {
      const d = decideLeaseAccess(row, port, leaseId, actor, now);
      return { answer: d, value: d.ok ? null : undefined };
    });
  }

  async listPortLeases(now: number): Promise<PortLeaseRow[]> {
    const rows: PortLeaseRow[] = [];
    for await (const page of pagesOf(this.client, this.keys.portDir))
      for (const kv of page) {
        const l = decodeLease(kv.value);
        if (l.expiresAt > now) rows.push(l);
      }
    return rows.sort((a, b) => a.port - b.port);
  }

  /** One commit per write, in order (etcd has no savepoints); each write's error is its own outcome. */
  async commitAll<T>(writes: readonly (() => Awaitable<T>)[]): Promise<readonly WriteOutcome<T>[]> {
    const out: WriteOutcome<T>[] = [];
    for (const write of writes) {
      try {
        out.push({ ok: true, value: await write() });
      } catch (error) {
        out.push({ ok: false, error });
      }
    }
    return out;
  }

  /** Deletes rows that expired before `olderThan`, each only as read (a renewal meanwhile keeps it). */
  async sweep(olderThan: number): Promise<{ resources: number; leases: number }> {
    const count = async (dir: string): Promise<number> => {
      let n = 0;
      for await (const page of pagesOf(this.client, dir)) {
        const gone = page.filter((kv) => (JSON.parse(kv.value) as { expiresAt: number }).expiresAt <= olderThan);
        for (const kv of gone) {
          const r = await this.client.txn({
            compare: [cmp.mod(kv.key, '==', kv.modRevision)],
            success: [op.delete(kv.key)],
          });
          if (r.succeeded) n++;
        }
      }
      return n;
    };
    return { resources: await count(this.keys.resourceDir), leases: await count(this.keys.portDir) };
  }

  // -------------------------------------------------------------------------------------

  private async get(key: string): Promise<KeyValue | undefined> {
    return (await this.client.get(key)).kv;
  }

  /** Plans and commits until a txn's compares hold; a refusal (nothing to write) answers at once. */
  private async write<T>(plan: () => Promise<Plan<T>>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const p = await plan();
      if (p.success.length === 0) return p.answer;
      const guard = this.guard?.() ?? null;
      const compare = guard === null ? p.compare : [...p.compare, guard];
      try {
        const r = await this.client.txn({
          compare,
          success: p.success,
          ...(guard === null ? {} : { failure: [op.range(guard.key, { keysOnly: true })] }),
        });
        if (r.succeeded) return p.answer;
        if (guard !== null) {
          const g = r.responses[0];
          if (g?.type !== 'range' || g.kvs[0]?.createRevision !== (guard.against as bigint))
            throw new NotElectedError();
        }
      } catch (err) {
        if (!isEtcdError(err, 'indeterminate') || p.probe === undefined) throw err;
        const back = await this.client.get(p.probe.key).catch(() => null);
        if (back === null) throw err;
        if ((back.kv?.value ?? null) === p.probe.value) return p.answer;
        // It did not apply (or another writer came after it): decide again on what is there now.
      }
      if (attempt >= RETRIES)
        throw new EtcdError('unavailable', 'etcd: the registry rows kept changing under the write (too many writers)');
    }
  }
}

/** The compare "this key is as the decision read it": absent, or at that mod_revision. */
function unchanged(key: string, kv: KeyValue | undefined): Compare {
  return kv === undefined ? cmp.absent(key) : cmp.mod(key, '==', kv.modRevision);
}
