/**
 * What the arbiter's resolved configuration holds (`ArbiterConfig`, the store's two kinds) and every default,
 * apart from the checks so that readers of the config import its shape without the checker.
 */
import type { Static } from 'typebox';
import type * as S from './schemas/source.js';
import { ETCD_DEFAULT_QUOTA_BYTES } from './store/etcd/space.js';
import type { Bands } from './registry/decide.js';

export type ConfigFile = Static<typeof S.ConfigSchema>;

/** The resolved configuration every part of the daemon reads. */
export interface ArbiterConfig {
  readonly arbiter: string;
  readonly candidates: readonly string[];
  readonly standby: string | null;
  readonly ttlSeconds: number;
  readonly viewFreshSeconds: number;
  readonly promoteAfterChecks: number;
  readonly safetyMarginSeconds: number;
  readonly checkCron: string;
  readonly healthUrls: ReadonlyMap<string, string>;
  readonly tailnetDomain: string | null;
  readonly tailscaleBin: string;
  readonly probeTimeoutSeconds: number;
  readonly listen: { readonly host: string; readonly port: number };
  readonly dataDir: string;
  readonly store: StoreConfig;
  readonly auth: { readonly openReads: boolean };
  readonly hooks: { readonly urls: readonly string[]; readonly command: readonly string[] | null };
  /** The event log keeps rows younger than maxAgeDays and at most the newest maxCount. */
  readonly events: { readonly maxAgeDays: number; readonly maxCount: number };
  /** The registry's port bands, defaults filled in (registry/decide.ts). */
  readonly portBands: Bands;
  /** Derived: the largest gap of `checkCron`, seconds. */
  readonly checkSeconds: number;
}

/** Where the arbiter keeps its state. */
export type StoreConfig =
  | { readonly kind: 'sqlite' }
  | {
      readonly kind: 'etcd';
      /** Client URLs of the etcd members, http://host:port. */
      readonly endpoints: readonly string[];
      /** Every key of this installation starts with it (several installations may share a cluster). */
      readonly prefix: string;
      readonly dialTimeoutMs: number;
      readonly requestTimeoutMs: number;
      /** The etcd lease TTL of the arbiters' election. */
      readonly electionTtlSeconds: number;
      /** This arbiter's URL as the other arbiters reach it (they forward mutations to the elected one). */
      readonly advertiseUrl: string;
      /** The elected arbiter compacts etcd's history this often, keeping one interval of it; 0: never (etcd's own auto-compaction does). */
      readonly compactionIntervalSeconds: number;
      /** The members' `--quota-backend-bytes`, for the space warning when they do not say theirs. */
      readonly quotaBackendBytes: number;
      /** `https://` members: the CA (else the system's) and the client certificate and key, as absolute paths; read at start. */
      readonly tls: EtcdTlsFiles | null;
    };

export interface EtcdTlsFiles {
  readonly caFile: string | null;
  readonly certFile: string | null;
  readonly keyFile: string | null;
}

/** How long before etcd would end a term the arbiter stops deciding (store/etcd/election.ts E2). */
export const ELECTION_MARGIN_SECONDS = 2;

/** The etcd store's defaults (`store: {kind: "etcd", …}`). */
export const ETCD_DEFAULTS = Object.freeze({
  /** Keys under it; another installation on the same cluster takes another prefix. */
  prefix: '/hq',
  /** Connect timeout to one member. Too small: a slow network reads as a dead member; too large: a dead member holds each call that long before the next is tried. */
  dialTimeoutSeconds: 2,
  /** One etcd call, every member tried. Too small: writes during an etcd leader election fail as indeterminate; too large: a request waits that long before its 503. */
  requestTimeoutSeconds: 5,
  /** The election lease. Too small: a slow etcd ends terms for nothing; too large: a killed elected arbiter is replaced only that late (plus the S2.3 start wait). */
  electionTtlSeconds: 10,
  /**
   * The elected arbiter compacts etcd's history to the revision it noted one interval earlier
   * (kube-apiserver's default, 5 minutes); 0 turns it off for a cluster whose own
   * `--auto-compaction-*` does it. Too small: a watch slower than one interval finds its revision
   * compacted and reads again, and a backup (read at one revision) longer than one interval
   * fails; too large: more history kept — at one heartbeat a second, 5 minutes of it is a few
   * MB, nothing next to the quota.
   */
  compactionIntervalSeconds: 300,
  /**
   * etcd's `--quota-backend-bytes` (its default, 2 GiB): the warning's yardstick when the
   * members do not report their own (before etcd 3.6). Set it to the members' value.
   */
  quotaBackendBytes: ETCD_DEFAULT_QUOTA_BYTES,
});

/**
 * The defaults. Each line says what goes wrong when the value is too small or too large.
 */
export const DEFAULTS = Object.freeze({
  /** This arbiter's own host name: the observer name of its views; never a candidate. */
  arbiter: 'cloud-vm',
  /** Promotion priority: the first eligible standby in this order is promoted (after `standby`, when set). */
  candidates: Object.freeze(['mbp', 'node-b']) as readonly string[],
  /** Lease TTL. Too small: holders lose the lease on a slow network; too large: slow failover. */
  ttlSeconds: 1500,
  /** A view older than this is no evidence. Must cover each agent's heartbeat interval (checked on every report), else that agent is never promoted. */
  viewFreshSeconds: 1500,
  /** Consecutive dual-unreachable checks before promotion. 1 promotes on a single lost probe. */
  promoteAfterChecks: 2,
  /**
   * Clock-rate allowance shaved off every validity and added to every lock-delay. Must be ≥ 1 %
   * of ttlSeconds (S6) and < ttlSeconds / 2; 30 s is 2 % of the default TTL.
   */
  safetyMarginSeconds: 30,
  /** The arbiter's check schedule (node-cron; 6 fields = seconds); any valid expression. */
  checkCron: '*/10 * * * *',
  /** `""` disables `tailscale ping` (health alone decides). */
  tailscaleBin: 'tailscale',
  /** Probe timeout: 5 s, or half the check interval when that is shorter (a check ends before the next). */
  probeTimeoutSeconds: 5,
  listen: Object.freeze({ host: '127.0.0.1', port: 8470 }),
  /** Holds hq.db and admin.token; relative paths are resolved against the working directory. */
  dataDir: './var',
  /** SQLite in dataDir: one arbiter. `{kind: "etcd", endpoints: [...]}` for several (ETCD_DEFAULTS). */
  store: Object.freeze({ kind: 'sqlite' as const }),
  auth: Object.freeze({ openReads: true }),
  /**
   * The event log's history, swept hourly and at start: rows older than maxAgeDays go, then all
   * but the newest maxCount. A few hundred events a day at the default schedules, so 90 days
   * stay well under 100 000 rows (tens of MB). Too small: the history of an incident is gone
   * before anyone reads it; too large: the database (and every backup) grows for nothing.
   */
  events: Object.freeze({ maxAgeDays: 90, maxCount: 100_000 }),
});

export type ConfigResult =
  | { readonly ok: true; readonly config: ArbiterConfig }
  | { readonly ok: false; readonly key: string; readonly message: string };
