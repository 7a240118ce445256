/**
 * Group commit for the registry's writes. Under synchronous=FULL every COMMIT is an fsync, and
 * better-sqlite3 runs it on the event loop: at fleet scale (10,000 resources heartbeating every
 * 30 s ≈ 333 writes/s, plus port-lease renewals) one fsync per request keeps the loop blocked
 * most of the time and every other request — `GET /v1/lease` included — queues behind it.
 *
 * Writes submitted in the same turn of the event loop (the requests parsed in one poll phase)
 * are run together at `setImmediate`, in one `BEGIN IMMEDIATE` transaction
 * (`RegistryStore.inOneCommit`), each as its own savepoint, in submission order. Guarantees:
 *  - an answer resolves only after the COMMIT that made its write durable;
 *  - each write is decided exactly as alone, on every row committed before and on the writes
 *    before it in its group (the same connection sees its own uncommitted writes);
 *  - a write that throws fails alone (its own savepoint is rolled back); a failed BEGIN or COMMIT
 *    fails the whole group, and nothing of it was written.
 * Under light load a group is one write and nothing changes but a setImmediate of latency; under
 * load the groups grow by themselves (requests pile up while a commit runs).
 */
import type { RegistryStore } from './store.js';

interface Pending {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly err: unknown };

/** Bounds one transaction's length (and so how long it holds the loop and the write lock). */
export const MAX_GROUP = 256;

export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(
    private readonly store: RegistryStore,
    private readonly maxGroup = MAX_GROUP,
  ) {}

  /** Runs `run` (synchronous, store writes only) in the next group; resolves after its commit. */
  submit<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const group = this.queue.splice(0, this.maxGroup);
    if (this.queue.length > 0) this.schedule();
    if (group.length === 0) return;
    let outcomes: Outcome[];
    try {
      outcomes = this.store.inOneCommit(() =>
        group.map((p): Outcome => {
          try {
            // Nested, inOneCommit is a savepoint: whatever `run` wrote is undone if it throws.
            return { ok: true, value: this.store.inOneCommit(p.run) };
          } catch (err) {
            return { ok: false, err };
          }
        }),
      );
    } catch (err) {
      for (const p of group) p.reject(err);
      return;
    }
    group.forEach((p, i) => {
      const o = outcomes[i]!;
      if (o.ok) p.resolve(o.value);
      else p.reject(o.err);
    });
  }
}
