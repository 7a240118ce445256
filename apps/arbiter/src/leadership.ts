/**
 * One arbiter decides at a time (store `etcd`): every arbiter on the prefix campaigns
 * (store/etcd/election.ts); the elected one makes every decision that reads a clock — grants,
 * renewals' expiry, lock-delays, checks, promotions, the registry's expiries — and the others
 * serve reads and forward mutations to it (plugins/forward.ts).
 *
 * Invariants:
 *  L1  `mayDecide()` is true only between the end of a takeover (below) and the first moment
 *      the term is found lapsed by our own clock (E2): decisions are never made on a term etcd
 *      may already have ended.
 *  L2  Every write of a decision carries the election's compare (E4) through the stores' guard:
 *      the guard throws `NotElectedError` unless `stillElected()`, so even a decision that began
 *      inside the term cannot write after it, and two arbiters that both believe they are
 *      elected (one paused and woken) cannot both write.
 *  L3  A takeover is, for the protocol, an arbiter restart with its state kept: a new boot at the
 *      takeover (S2.3's start wait counts from it) and lease-core `atRestart`, written under the
 *      new term's guard, before the first decision of the term.
 *  L4  A term that ends stops the checks (after the running one) and the arbiter campaigns
 *      again; the next term is a new takeover (L3).
 *
 * Beside the election: while it may decide, this arbiter compacts etcd's history
 * (store/etcd/compactor.ts), and every arbiter reads etcd's space against its quota with the
 * members' health (store/etcd/space.ts), logging each change of its level once.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { EtcdClient, MemberStatus } from './store/etcd/client.js';
import { Election, type CampaignResult, type Leader, type StampClock, type Term } from './store/etcd/election.js';
import { isEtcdError } from './store/etcd/errors.js';
import { NotElectedError } from './store/store.js';
import type { Compare } from './store/etcd/client.js';
import { ELECTION_MARGIN_SECONDS } from './config.js';
import { pause, realTimers, type Timers } from '@hq/runtime/clock';
import { Compactor, type Turn } from './store/etcd/compactor.js';
import { etcdKeys } from './store/etcd/keys.js';
import { ETCD_DEFAULT_QUOTA_BYTES, etcdSpace, type EtcdSpace } from './store/etcd/space.js';

export interface Guarded {
  setGuard(guard: (() => Compare) | null): void;
}

export interface LeadershipOptions {
  readonly client: EtcdClient;
  readonly prefix: string;
  /** This arbiter's URL as the others reach it: the campaign's value, where they forward to. */
  readonly advertiseUrl: string;
  readonly ttlSeconds: number;
  /** The stores whose writes carry the election's compare (L2). */
  readonly guarded: readonly Guarded[];
  readonly log: Logger;
  /** L3: the new boot and the restart transaction, then the checks. */
  readonly onElected: (term: Term) => Promise<void>;
  /** L4: stop the checks. */
  readonly onEnded: () => Promise<void>;
  readonly clock?: StampClock;
  /** How often the members' health is read for /v1/health, /metrics and the page (default 2 s). */
  readonly healthEveryMs?: number;
  /** While elected, compact etcd's history this often (compactor.ts); 0: never. */
  readonly compactionIntervalMs?: number;
  /** The members' quota when they do not say theirs (`store.quotaBackendBytes`; default etcd's 2 GiB). */
  readonly quotaBytes?: number;
  /** The retry and health pauses and the compactor's timers (default: real ones). */
  readonly timers?: Timers;
}

/** What /v1/health, /metrics and the status page say about the arbiters and etcd. */
export interface LeadershipStatus {
  /** This arbiter decides now. */
  readonly elected: boolean;
  /** The elected arbiter's URL (this one's when elected), null when none is known. */
  readonly leader: string | null;
  readonly self: string;
  /** Seconds the current term stays valid by our clock (0 when not elected). */
  readonly termSeconds: number;
  readonly etcd: {
    readonly healthy: boolean;
    members: MemberView[];
    readonly space?: EtcdSpace;
    readonly compaction: { readonly intervalSeconds: number; readonly revision: number | null };
  };
}

/** One member as /v1/health shows it (JSON-safe: no bigint). */
export interface MemberView {
  endpoint: string;
  ok: boolean;
  leader?: string | null;
  version?: string;
  error?: string;
  dbSizeBytes?: number;
}

const viewOf = (m: MemberStatus): MemberView =>
  m.ok
    ? { endpoint: m.endpoint, ok: true, leader: m.leader, version: m.version, dbSizeBytes: m.dbSizeBytes }
    : { endpoint: m.endpoint, ok: false, error: m.error };

export type Route =
  | { readonly to: 'self' }
  | { readonly to: 'leader'; readonly url: string }
  | { readonly to: 'none'; readonly why: string };

/** Pause between campaigns after a failure, so a broken etcd is not hammered. */
const RETRY_MS = 1000;

export class Leadership {
  private readonly election: Election;
  private readonly stop = new AbortController();
  private ready = false;
  private leader: Leader | null = null;
  private members: readonly MemberStatus[] = [];
  private space: EtcdSpace | null = null;
  private loops: Promise<void>[] = [];
  /** The elected arbiter compacts; null when `compactionIntervalMs` is 0. */
  readonly compactor: Compactor | null;
  /** Compactions done and failed in this life (hq_etcd_compactions_total). */
  readonly compactions = { compacted: 0, failed: 0 };

  constructor(private readonly opts: LeadershipOptions) {
    this.election = new Election(opts.client, {
      prefix: opts.prefix,
      value: opts.advertiseUrl,
      ttlSeconds: opts.ttlSeconds,
      marginSeconds: ELECTION_MARGIN_SECONDS,
      ...(opts.clock === undefined ? {} : { clock: opts.clock }),
    });
    const guard = (): Compare => {
      if (!this.election.stillElected()) throw new NotElectedError();
      return this.election.guard();
    };
    for (const g of opts.guarded) g.setGuard(guard);
    const every = opts.compactionIntervalMs ?? 0;
    this.compactor =
      every > 0
        ? new Compactor({
            client: opts.client,
            key: etcdKeys(opts.prefix).compaction,
            intervalMs: every,
            timers: opts.timers ?? realTimers,
            mayCompact: () => this.mayDecide(),
            log: opts.log,
            onTurn: (t: Turn) => {
              if (t.outcome === 'compacted' || t.outcome === 'failed') this.compactions[t.outcome]++;
            },
          })
        : null;
  }

  /** Starts campaigning, watching who is elected and reading the members' health. */
  start(): void {
    if (this.loops.length > 0) return;
    const campaign = this.campaignLoop().catch(async (err: unknown) => {
      // Not an etcd error: a bug. Loud, and this arbiter leaves the election (it forwards from now).
      this.ready = false;
      this.opts.log.error({ err }, 'campaigning stopped on an unexpected error; this arbiter no longer decides');
      await this.election.resign().catch(() => undefined);
    });
    this.loops = [campaign, this.observeLoop(), this.healthLoop()];
    this.compactor?.start();
  }

  /** This arbiter's URL as the others reach it. */
  get self(): string {
    return this.opts.advertiseUrl;
  }

  /** L1: true while this arbiter may decide. */
  mayDecide(): boolean {
    return this.ready && this.election.stillElected();
  }

  /** Where a mutation goes: here, to the elected arbiter, or nowhere (503). */
  route(): Route {
    if (this.mayDecide()) return { to: 'self' };
    const l = this.leader;
    if (l !== null && l.value !== this.opts.advertiseUrl) return { to: 'leader', url: l.value };
    return {
      to: 'none',
      why:
        l === null
          ? 'no arbiter is elected (etcd has no leader key: is etcd up?)'
          : 'this arbiter is taking over (its start is not finished) or its term just ended',
    };
  }

  status(): LeadershipStatus {
    const elected = this.mayDecide();
    const ok = this.members.filter((m) => m.ok).length;
    return {
      elected,
      leader: elected ? this.opts.advertiseUrl : (this.leader?.value ?? null),
      self: this.opts.advertiseUrl,
      termSeconds: elected ? Math.max(0, this.election.validForSeconds()) : 0,
      etcd: {
        healthy: ok * 2 > this.members.length && this.members.length > 0,
        members: this.members.map(viewOf),
        ...(this.space === null ? {} : { space: this.space }),
        compaction: {
          intervalSeconds: (this.opts.compactionIntervalMs ?? 0) / 1000,
          revision: this.compactor?.revision == null ? null : Number(this.compactor.revision),
        },
      },
    };
  }

  /** Stops campaigning; an elected arbiter resigns (the next one is elected at once, not after the TTL). */
  async close(): Promise<void> {
    this.stop.abort();
    this.ready = false;
    await this.compactor?.stop();
    await this.election
      .resign()
      .catch((err: unknown) => this.opts.log.warn({ err }, 'resign failed; the term ends with its etcd lease'));
    await Promise.allSettled(this.loops);
  }

  // -------------------------------------------------------------------------------------

  private async campaignLoop(): Promise<void> {
    const { log } = this.opts;
    while (!this.stop.signal.aborted) {
      let r: CampaignResult;
      try {
        r = await this.election.campaign(this.stop.signal);
      } catch (err) {
        if (!isEtcdError(err)) throw err;
        log.warn({ err: err.message }, 'campaign failed; trying again');
        await pause(this.opts.timers ?? realTimers, RETRY_MS, this.stop.signal);
        continue;
      }
      if (!r.elected) {
        if (r.reason !== 'aborted')
          log.warn({ why: r.reason }, 'campaign ended before the election; campaigning again');
        await pause(this.opts.timers ?? realTimers, RETRY_MS / 4, this.stop.signal);
        continue;
      }
      log.info({ key: r.term.key, self: this.opts.advertiseUrl }, 'elected: taking over (S2.3 start wait from now)');
      try {
        await this.opts.onElected(r.term);
        this.ready = true;
        log.info(
          { validForSeconds: Math.round(this.election.validForSeconds() * 10) / 10 },
          'elected arbiter: deciding',
        );
      } catch (err) {
        log.error({ err }, 'takeover failed; resigning');
        await this.election.resign().catch(() => undefined);
        // A takeover that fails for good (the state key missing, etcd refusing) is not retried
        // as fast as etcd answers.
        await pause(this.opts.timers ?? realTimers, RETRY_MS, this.stop.signal);
      }
      const why = await r.term.ended;
      this.ready = false;
      if (!this.stop.signal.aborted) log.warn({ why }, 'term ended: no more decisions here; campaigning again');
      await this.opts.onEnded().catch((err: unknown) => log.error({ err }, 'stopping the checks failed'));
    }
  }

  private async observeLoop(): Promise<void> {
    try {
      for await (const leader of this.election.observe(this.stop.signal)) {
        this.leader = leader;
        this.opts.log.info({ leader: leader?.value ?? null }, 'elected arbiter');
      }
    } catch (err) {
      if (!this.stop.signal.aborted) this.opts.log.error({ err }, 'watching the election failed');
    }
  }

  private async healthLoop(): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        this.members = await this.opts.client.status();
        this.noteSpace(etcdSpace(this.members, this.opts.quotaBytes ?? ETCD_DEFAULT_QUOTA_BYTES));
      } catch {
        // status() answers per member; nothing to do
      }
      await pause(this.opts.timers ?? realTimers, this.opts.healthEveryMs ?? 2000, this.stop.signal);
    }
  }

  /** Keeps the space reading; a change of its level is logged once (warn, or info when it is ok again). */
  private noteSpace(space: EtcdSpace | null): void {
    if (space === null) return;
    const was = this.space?.level ?? 'ok';
    this.space = space;
    if (space.level === was) return;
    const fields = {
      dbSizeBytes: space.dbSizeBytes,
      dbSizeInUseBytes: space.dbSizeInUseBytes,
      quotaBytes: space.quotaBytes,
      quotaFrom: space.quotaFrom,
      alarm: space.alarm,
    };
    if (space.warning !== null)
      this.opts.log.warn(
        { ...fields, fix: space.warning },
        space.alarm ? 'etcd refuses every write: NOSPACE alarm' : 'etcd database near its space quota',
      );
    else this.opts.log.info(fields, 'etcd database below its space quota again');
  }
}

/** `hq_arbiter_elected` (1 on the elected arbiter) and `hq_etcd_member_up{endpoint}`, at scrape time. */
export function registerLeadershipMetrics(registry: Registry, leadership: Leadership): void {
  if (registry.getSingleMetric('hq_arbiter_elected') !== undefined) return;
  new Gauge({
    name: 'hq_arbiter_elected',
    help: '1 while this arbiter is the elected one and decides (store etcd); 0 while it forwards.',
    registers: [registry],
    collect() {
      this.set(leadership.mayDecide() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'hq_etcd_member_up',
    help: '1 for each etcd member that answered its status within the dial timeout (store etcd).',
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of leadership.status().etcd.members) this.set({ endpoint: m.endpoint }, m.ok ? 1 : 0);
    },
  });
  new Gauge({
    name: 'hq_etcd_db_size_bytes',
    help: "Each etcd member's database file, bytes: etcd refuses every write once one passes its --quota-backend-bytes (store etcd).",
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of leadership.status().etcd.members)
        if (m.dbSizeBytes !== undefined) this.set({ endpoint: m.endpoint }, m.dbSizeBytes);
    },
  });
  new Gauge({
    name: 'hq_etcd_quota_bytes',
    help: "etcd's space quota as the members say it, else store.quotaBackendBytes (store etcd).",
    registers: [registry],
    collect() {
      this.reset();
      const s = leadership.status().etcd.space;
      if (s !== undefined) this.set(s.quotaBytes);
    },
  });
  new Gauge({
    name: 'hq_etcd_nospace_alarm',
    help: '1 while an etcd member has raised the NOSPACE alarm: etcd refuses every write (store etcd).',
    registers: [registry],
    collect() {
      this.set(leadership.status().etcd.space?.alarm === true ? 1 : 0);
    },
  });
  new Counter({
    name: 'hq_etcd_compactions_total',
    help: "This arbiter's compactions of etcd's history, by outcome (compacted, failed) (store etcd).",
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      // the life's totals, read at scrape time: they only rise
      this.reset();
      this.inc({ outcome: 'compacted' }, leadership.compactions.compacted);
      this.inc({ outcome: 'failed' }, leadership.compactions.failed);
    },
  });
}
