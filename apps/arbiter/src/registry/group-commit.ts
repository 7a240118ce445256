/**
 * Group commit for the registry's writes (the queue itself is `../group-commit.ts`, shared with
 * the lease decisions). Under synchronous=FULL every COMMIT is an fsync, and
 * better-sqlite3 runs it on the event loop: at fleet scale (10,000 resources heartbeating every
 * 30 s ≈ 333 writes/s, plus port-lease renewals) one fsync per request keeps the loop blocked
 * most of the time and every other request — `GET /v1/lease` included — queues behind it.
 *
 * Writes submitted in the same turn of the event loop (the requests parsed in one poll phase)
 * are run together at `setImmediate`, in one `BEGIN IMMEDIATE` transaction
 * (`RegistryStore.commitAll`), each as its own savepoint, in submission order (a store that
 * cannot group, etcd, commits them one after another). Guarantees:
 *  - an answer resolves only after the COMMIT that made its write durable;
 *  - each write is decided exactly as alone, on every row committed before and on the writes
 *    before it in its group (the same connection sees its own uncommitted writes);
 *  - a write that throws fails alone (its own savepoint is rolled back); a failed BEGIN or COMMIT
 *    fails the whole group, and nothing of it was written.
 * Under light load a group is one write and nothing changes but a setImmediate of latency; under
 * load the groups grow by themselves (requests pile up while a commit runs).
 */
import { GroupCommitQueue, MAX_GROUP } from '../group-commit.js';
import type { Awaitable } from '../awaitable.js';
import type { RegistryStore } from './store.js';

export { MAX_GROUP };

export class GroupCommit {
  private readonly queue: GroupCommitQueue<() => unknown, unknown>;

  constructor(store: RegistryStore, maxGroup = MAX_GROUP) {
    this.queue = new GroupCommitQueue((group) => store.commitAll(group), maxGroup);
  }

  /** Runs `run` (one store write) in the next group; resolves after its commit. */
  submit<T>(run: () => Awaitable<T>): Promise<T> {
    return this.queue.submit(run) as Promise<T>;
  }
}
