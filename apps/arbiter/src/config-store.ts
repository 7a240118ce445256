/**
 * The `store` key: SQLite, or etcd with its members, prefix, TLS files, timings and advertised URL, each
 * problem one line naming the key. Apart from the rest of the file's checks: it is the only part about etcd.
 */
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { etcdEndpoint } from './store/etcd/endpoint.js';
import {
  DEFAULTS,
  ELECTION_MARGIN_SECONDS,
  ETCD_DEFAULTS,
  type ConfigFile,
  type EtcdTlsFiles,
  type StoreConfig,
} from './config-defaults.js';

/** `value` as an http(s) URL, or why not. */
export function httpUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `"${value}" must be an http or https URL`;
  return null;
}

const ETCD_ONLY = [
  'endpoints',
  'prefix',
  'dialTimeoutSeconds',
  'requestTimeoutSeconds',
  'electionTtlSeconds',
  'advertiseUrl',
  'compactionIntervalSeconds',
  'quotaBackendBytes',
  'tls',
] as const;

/** `store.tls`: files that exist and are readable, a key only its owner can read, cert and key together. */
function tlsOf(
  t: NonNullable<NonNullable<ConfigFile['store']>['tls']>,
  cwd: string,
): EtcdTlsFiles | { key: string; message: string } {
  if (t.caFile === undefined && t.certFile === undefined && t.keyFile === undefined)
    return {
      key: 'store.tls',
      message:
        "names no file: give caFile (the CA of the members' certificates) and, for client-certificate auth, certFile and keyFile",
    };
  if ((t.certFile === undefined) !== (t.keyFile === undefined))
    return {
      key: t.certFile === undefined ? 'store.tls.certFile' : 'store.tls.keyFile',
      message: 'certFile and keyFile go together (the client certificate and its key)',
    };
  const out: { caFile: string | null; certFile: string | null; keyFile: string | null } = {
    caFile: null,
    certFile: null,
    keyFile: null,
  };
  for (const name of ['caFile', 'certFile', 'keyFile'] as const) {
    const v = t[name];
    if (v === undefined) continue;
    const path = resolve(cwd, v);
    let mode: number;
    try {
      const st = statSync(path);
      if (!st.isFile()) return { key: `store.tls.${name}`, message: `${path} is not a file` };
      mode = st.mode;
      accessSync(path, fsConstants.R_OK);
    } catch (err) {
      return {
        key: `store.tls.${name}`,
        message: `${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      };
    }
    if (name === 'keyFile' && (mode & 0o077) !== 0)
      return {
        key: 'store.tls.keyFile',
        message: `${path} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
      };
    out[name] = path;
  }
  return out;
}

/** A config problem: the key and its one line. */
export type Problem = { key: string; message: string };
type StoreFile = NonNullable<ConfigFile['store']>;

/** `store.endpoints`: each a client URL (https with tls), none twice. */
function endpointsOf(s: StoreFile, tls: boolean): string[] | Problem {
  if (s.endpoints === undefined)
    return {
      key: 'store.endpoints',
      message: 'is required for kind "etcd": the client URLs of the members, e.g. ["http://etcd-1:2379"]',
    };
  const endpoints: string[] = [];
  for (const [i, e] of s.endpoints.entries()) {
    const u = etcdEndpoint(e, tls);
    if ('problem' in u) return { key: `store.endpoints[${i}]`, message: u.problem };
    if (endpoints.includes(u.origin)) return { key: `store.endpoints[${i}]`, message: `"${e}" is named twice` };
    endpoints.push(u.origin);
  }
  return endpoints;
}

/** The call timeouts and the election's term, each long enough for the one before it. */
function etcdTimingOf(s: StoreFile): { dial: number; request: number; electionTtlSeconds: number } | Problem {
  const dial = s.dialTimeoutSeconds ?? ETCD_DEFAULTS.dialTimeoutSeconds;
  const request = s.requestTimeoutSeconds ?? ETCD_DEFAULTS.requestTimeoutSeconds;
  if (request < dial)
    return {
      key: 'store.requestTimeoutSeconds',
      message: `must be at least store.dialTimeoutSeconds (${dial}): a call tries a member for at most the whole call`,
    };
  const electionTtlSeconds = s.electionTtlSeconds ?? ETCD_DEFAULTS.electionTtlSeconds;
  if (electionTtlSeconds <= request + ELECTION_MARGIN_SECONDS) {
    return {
      key: 'store.electionTtlSeconds',
      message: `must exceed store.requestTimeoutSeconds + ${ELECTION_MARGIN_SECONDS} (${request + ELECTION_MARGIN_SECONDS} s): a term must outlive one keep-alive call and the election's margin`,
    };
  }
  return { dial, request, electionTtlSeconds };
}

/** `store.advertiseUrl`, by default this arbiter on the tailnet at its port: a bare origin. */
function advertiseOf(s: StoreFile, arbiter: string, port: number, tailnetDomain: string | null): string | Problem {
  const advertise =
    s.advertiseUrl ?? `http://${tailnetDomain === null ? arbiter : `${arbiter}.${tailnetDomain}`}:${port}`;
  const up = httpUrlProblem(advertise);
  if (up !== null) return { key: 'store.advertiseUrl', message: up };
  const origin = new URL(advertise);
  if ((origin.pathname !== '/' && origin.pathname !== '') || origin.search !== '' || origin.username !== '')
    return {
      key: 'store.advertiseUrl',
      message: `"${advertise}" must be a bare origin (no path, query or credentials)`,
    };
  return origin.origin;
}

const PREFIX = /^\/[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/** `store`: its kind and, for etcd, the members, the prefix and the timings (one line naming the key). */
export function storeOf(
  file: ConfigFile,
  arbiter: string,
  port: number,
  tailnetDomain: string | null,
  cwd: string = process.cwd(),
): StoreConfig | Problem {
  const s = file.store;
  if (s === undefined || s.kind === 'sqlite') {
    const extra = s === undefined ? undefined : ETCD_ONLY.find((k) => s[k] !== undefined);
    if (extra !== undefined)
      return {
        key: `store.${extra}`,
        message: 'applies to kind "etcd" only (kind "sqlite" keeps everything in dataDir)',
      };
    return DEFAULTS.store;
  }
  let tls: EtcdTlsFiles | null = null;
  if (s.tls !== undefined) {
    const t = tlsOf(s.tls, cwd);
    if ('key' in t) return t;
    tls = t;
  }
  const endpoints = endpointsOf(s, tls !== null);
  if (!Array.isArray(endpoints)) return endpoints;
  const prefix = s.prefix ?? ETCD_DEFAULTS.prefix;
  if (!PREFIX.test(prefix))
    return {
      key: 'store.prefix',
      message:
        'must look like /hq or /site/hq: a leading slash, segments of letters, digits, ".", "_" or "-", no trailing slash',
    };
  const timing = etcdTimingOf(s);
  if ('key' in timing) return timing;
  const advertiseUrl = advertiseOf(s, arbiter, port, tailnetDomain);
  if (typeof advertiseUrl !== 'string') return advertiseUrl;
  return {
    kind: 'etcd',
    endpoints,
    prefix,
    dialTimeoutMs: Math.round(timing.dial * 1000),
    requestTimeoutMs: Math.round(timing.request * 1000),
    electionTtlSeconds: timing.electionTtlSeconds,
    advertiseUrl,
    compactionIntervalSeconds: s.compactionIntervalSeconds ?? ETCD_DEFAULTS.compactionIntervalSeconds,
    quotaBackendBytes: s.quotaBackendBytes ?? ETCD_DEFAULTS.quotaBackendBytes,
    tls,
  };
}

/**
 * An etcd store named on a command line (`hq-arbiter migrate --to etcd:URL,… --prefix P`),
 * checked by the same rules as the `store` key, the timings at their defaults.
 */
export function etcdStoreOf(
  endpoints: readonly string[],
  prefix: string | undefined,
): Extract<StoreConfig, { kind: 'etcd' }> | { key: string; message: string } {
  const s = storeOf(
    { store: { kind: 'etcd', endpoints: [...endpoints], ...(prefix === undefined ? {} : { prefix }) } } as ConfigFile,
    'arbiter',
    DEFAULTS.listen.port,
    null,
  );
  if ('key' in s) return s;
  return s as Extract<StoreConfig, { kind: 'etcd' }>;
}
