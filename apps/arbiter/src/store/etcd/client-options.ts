/**
 * The etcd client's options (members, timeouts, clock, timers, TLS), their defaults and their check: what a
 * caller configures, apart from the calls.
 */
import type { MsClock, Timers } from '@hq/runtime/clock';
import { etcdEndpoint } from './endpoint.js';

export interface EtcdClientOptions {
  /** Client URLs of the members, `http://host:port`; the first answers first, the others on failure. */
  readonly endpoints: readonly string[];
  /**
   * Connect timeout for one member, ms (default 2000). Too small: a slow network reads as a dead
   * member; too large: a dead member that drops packets holds a call that long before the next.
   */
  readonly dialTimeoutMs?: number;
  /**
   * The whole call, every member tried, ms (default 5000). Too small: a write during an etcd
   * leader election is reported `indeterminate` although it would have applied; too large: a
   * decision waits that long before the store can answer 503.
   */
  readonly requestTimeoutMs?: number;
  /** Measures the call's deadline, ms (default: monotonic; tests drive it). */
  readonly clock?: MsClock;
  /** Ends an attempt or a stream's opening at its deadline (default: real timers). */
  readonly timers?: Timers;
  /**
   * For `https://` endpoints: the CA that signed the members' certificates (PEM; default: the
   * system's trust store) and this client's certificate and key (PEM) when the members ask for
   * one (`--client-cert-auth`). Certificates are verified, never skipped.
   */
  readonly tls?: EtcdTls;
}

export interface EtcdTls {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}
export const ETCD_CLIENT_DEFAULTS = Object.freeze({ dialTimeoutMs: 2000, requestTimeoutMs: 5000 });

/** The options checked, the timeouts at their defaults; a TypeError names the bad one. */
export function validate(o: EtcdClientOptions): {
  endpoints: string[];
  dialTimeoutMs: number;
  requestTimeoutMs: number;
} {
  if (!Array.isArray(o.endpoints) || o.endpoints.length === 0)
    throw new TypeError('etcd endpoints must be a non-empty list of http:// or https:// URLs');
  if ((o.tls?.cert === undefined) !== (o.tls?.key === undefined))
    throw new TypeError('etcd tls: give the client certificate and its key together');
  const endpoints = o.endpoints.map((e) => {
    const u = etcdEndpoint(e, o.tls !== undefined);
    if ('problem' in u) throw new TypeError(`etcd endpoint ${u.problem}`);
    return u.origin;
  });
  const ms = (v: number | undefined, dflt: number, name: string): number => {
    const x = v ?? dflt;
    if (!Number.isInteger(x) || x <= 0) throw new TypeError(`etcd ${name} must be a positive integer (ms)`);
    return x;
  };
  return {
    endpoints,
    dialTimeoutMs: ms(o.dialTimeoutMs, ETCD_CLIENT_DEFAULTS.dialTimeoutMs, 'dialTimeoutMs'),
    requestTimeoutMs: ms(o.requestTimeoutMs, ETCD_CLIENT_DEFAULTS.requestTimeoutMs, 'requestTimeoutMs'),
  };
}
