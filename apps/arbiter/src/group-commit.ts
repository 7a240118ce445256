/**
 * The one group-commit queue of the arbiter, used by the lease decisions (`Arbiter.submit`) and
 * by the registry's writes (`registry/group-commit.ts`). Under synchronous=FULL every COMMIT is
 * an fsync, and better-sqlite3 runs it on the event loop; items submitted in the same turn of
 * the event loop (the requests parsed in one poll phase) are handed to `runAll` together at
 * `setImmediate`, at most `maxGroup` at a time, in submission order. `runAll` runs them in one
 * transaction and returns one outcome per item; each promise settles with its own outcome —
 * after the commit — and a `runAll` that throws (a failed BEGIN or COMMIT) rejects the whole
 * group. Under light load a group is one item and costs one setImmediate of latency; under load
 * groups grow by themselves (requests pile up while a commit runs).
 *
 * `runAll` may answer later (a promise: the etcd store's commits go over the network). Groups
 * never overlap: the next one starts only once the one before has settled, so each is still
 * decided on everything committed before it, and items submitted meanwhile wait for it together.
 *
 * After a group that answered later (a network commit) settles, its N callers typically send
 * their next items within a fraction of a millisecond; flushing at the first of them would split
 * them into a group of one and a group of the rest — two commits where one does. So the next
 * group waits until N items are queued or `lingerMs` has passed since the first, whichever is
 * first (a caller alone never waits: N = 1). A group that answered at once (SQLite) never waits.
 * The wait only delays; which items share a group never changes what each is decided on.
 */
import { realTimers, type Timers } from '@hq/runtime/clock';
import { isPromise, type Awaitable } from './awaitable.js';

export type Outcome<O> = { readonly ok: true; readonly value: O } | { readonly ok: false; readonly error: unknown };

/** Bounds one transaction's length (and so how long it holds the loop and the write lock). */
export const MAX_GROUP = 256;

/**
 * How long the group after a network commit waits for the callers of the last one (ms): long
 * enough for callers answered together to share the next txn (figures in docs/BENCH.md).
 */
export const LINGER_MS = 2;

interface Queued<I, O> {
  readonly item: I;
  readonly resolve: (value: O) => void;
  readonly reject: (err: unknown) => void;
}

export class GroupCommitQueue<I, O> {
  private queue: Queued<I, O>[] = [];
  private scheduled = false;
  /** A group whose `runAll` answered with a promise and has not settled yet. */
  private running = false;
  /** After a group that answered with a promise: the items queued then plus its size, which the next group waits for; 0 otherwise. */
  private expect = 0;
  private linger: unknown = null;

  constructor(
    private readonly runAll: (items: readonly I[]) => Awaitable<readonly Outcome<O>[]>,
    private readonly maxGroup = MAX_GROUP,
    private readonly lingerMs = LINGER_MS,
    private readonly timers: Timers = realTimers,
  ) {}

  /** Resolves with the item's value once the transaction that holds it has committed. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.running || this.scheduled) return;
    if (this.lingerMs > 0 && this.queue.length < Math.min(this.expect, this.maxGroup)) {
      // The last group's callers are not all back yet: wait for them, at most lingerMs.
      this.linger ??= this.timers.set(() => {
        this.linger = null;
        this.flush();
      }, this.lingerMs);
      return;
    }
    if (this.linger !== null) {
      this.timers.clear(this.linger);
      this.linger = null;
    }
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    this.expect = 0;
    const group = this.queue.splice(0, this.maxGroup);
    if (group.length === 0) return;
    let outcomes: Awaitable<readonly Outcome<O>[]>;
    try {
      outcomes = this.runAll(group.map((q) => q.item));
    } catch (err) {
      this.settle(group, err);
      return;
    }
    if (!isPromise(outcomes)) {
      this.settle(group, null, outcomes);
      return;
    }
    this.running = true;
    outcomes.then(
      (o) => this.settle(group, null, o, true),
      (err: unknown) => this.settle(group, err, undefined, true),
    );
  }

  private settle(group: readonly Queued<I, O>[], err: unknown, outcomes?: readonly Outcome<O>[], later = false): void {
    this.running = false;
    // A network commit: the next group waits for what is queued and this group's callers.
    this.expect = later ? this.queue.length + group.length : 0;
    if (this.queue.length > 0) this.schedule();
    for (const [i, q] of group.entries()) {
      if (outcomes === undefined) {
        q.reject(err);
        continue;
      }
      const o = outcomes[i];
      if (o === undefined) q.reject(new Error('group commit: no outcome for an item'));
      else if (o.ok) q.resolve(o.value);
      else q.reject(o.error);
    }
  }
}
