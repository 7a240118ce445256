/**
 * etcd keeps every revision of every key until a client compacts it, and the state key is
 * rewritten on every heartbeat and check: without compaction the history grows until etcd's
 * space quota is reached, and from then on etcd refuses every write (the NOSPACE alarm). The
 * elected arbiter compacts, the way kube-apiserver compacts its own etcd:
 *
 *  Every interval, while `mayCompact()` (the elected arbiter, after its takeover):
 *  1. one txn: if the compaction key's version is still the one this compactor saw at its last
 *     turn, put into it the revision noted at that turn (the key's version rises by one: this
 *     turn is ours); otherwise read the key.
 *  2. A turn won compacts to the revision noted one interval earlier, so one whole interval of
 *     history stays for the watches that started within it (the election's waiters watch from
 *     a read a few seconds old), and notes this txn's revision for the next turn.
 *     A turn lost — another arbiter compacted meanwhile, or this is the compactor's first turn
 *     (after a start or a takeover) — only notes the key's version and the revision: the next
 *     compaction is one whole interval away, never sooner.
 *
 * Compaction is cluster-wide (every key, also other installations' prefixes) and frees
 * history inside etcd's database; only a defragmentation (`etcdctl defrag`) gives the file's
 * space back. Nothing the protocol decides rests on an old revision: a watch that finds its
 * start compacted reads again (election.ts), and every compare is on current mod_revisions.
 * A failed turn is logged and counted; the next turn tries again.
 */
import type { Logger } from 'pino';
import type { Timers } from '@hq/runtime/clock';
import { cmp, op, type EtcdClient } from './client.js';

export interface CompactorOptions {
  readonly client: Pick<EtcdClient, 'txn' | 'compact'>;
  /** `{prefix}/compaction` (keys.ts): the turn counter every compactor of the prefix shares. */
  readonly key: string;
  /** Time between turns, ms; also the history kept. */
  readonly intervalMs: number;
  readonly timers: Timers;
  /** True while this arbiter decides (leadership.ts L1); a turn is skipped otherwise. */
  readonly mayCompact: () => boolean;
  readonly log: Pick<Logger, 'info' | 'warn' | 'debug'>;
  /** Called after each turn that ran (the metrics count the compactions and the failures). */
  readonly onTurn?: (t: Turn) => void;
}

export type Turn =
  | { readonly outcome: 'compacted'; readonly revision: bigint }
  | { readonly outcome: 'noted'; readonly revision: bigint }
  | { readonly outcome: 'skipped' }
  | { readonly outcome: 'failed'; readonly error: string };

export class Compactor {
  /** The compaction key's version at our last turn (0: absent, or not seen yet). */
  private version = 0n;
  /** The store's revision at our last turn: the next compaction goes to it. 0: none noted. */
  private noted = 0n;
  /** The revision the last compaction of ours went to (null: none in this life). */
  private compactedTo: bigint | null = null;
  private timer: unknown = null;
  private running: Promise<Turn> | null = null;
  private stopped = true;

  constructor(private readonly opts: CompactorOptions) {
    if (!Number.isInteger(opts.intervalMs) || opts.intervalMs <= 0)
      throw new TypeError('compactor intervalMs must be a positive integer');
  }

  /** The revision this arbiter last compacted to, null before its first compaction. */
  get revision(): bigint | null {
    return this.compactedTo;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  /** No more turns; waits for the one under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) this.opts.timers.clear(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }

  /** One turn now (the schedule calls it; tests too). */
  turn(): Promise<Turn> {
    this.running ??= this.once().finally(() => (this.running = null));
    return this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.opts.timers.set(() => {
      this.timer = null;
      void this.turn().then(() => this.schedule());
    }, this.opts.intervalMs);
  }

  private async once(): Promise<Turn> {
    const { client, key, log } = this.opts;
    if (!this.opts.mayCompact()) return { outcome: 'skipped' };
    let turn: Turn;
    try {
      // 1. our turn if nobody took one since ours (the key's version as we left it)
      const to = this.noted;
      const r = await client.txn({
        compare: [cmp.version(key, '==', this.version)],
        success: [op.put(key, String(to))],
        failure: [op.range(key)],
      });
      if (!r.succeeded) {
        const kv = r.responses[0]?.type === 'range' ? r.responses[0].kvs[0] : undefined;
        this.version = kv?.version ?? 0n;
        this.noted = r.revision;
        turn = { outcome: 'noted', revision: r.revision };
      } else {
        this.version += 1n;
        this.noted = r.revision;
        // 2. the revision of one interval ago; a first turn has none yet
        if (to === 0n) turn = { outcome: 'noted', revision: r.revision };
        else {
          await client.compact(to);
          this.compactedTo = to;
          turn = { outcome: 'compacted', revision: to };
          log.debug({ revision: String(to) }, 'etcd history compacted');
        }
      }
    } catch (err) {
      turn = { outcome: 'failed', error: (err as Error).message };
      log.warn({ err: (err as Error).message }, 'etcd compaction failed; trying again next interval');
    }
    this.opts.onTurn?.(turn);
    return turn;
  }
}
