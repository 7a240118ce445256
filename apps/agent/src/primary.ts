/**
 * `resolvePrimary` — where is HQ now? (the seeds' primary resolution)
 *
 * Static mode (no lease consulted), first that applies:
 *  1. the configured URL (`configUrl`);
 *  2. the join file: JSON `{"url": "http(s)://…", "token"?: "…", "host"?: "…"}` (or the form
 *     `hq primary --write-join` writes, which adds `generation`, `arbiterUrl` and `tokenScope` and
 *     binds its token to `arbiterUrl`, so it never comes with `url`), a regular file
 *     owned by this user with mode 0600 (or stricter), no other keys — anything else is ignored
 *     (reported in `ignored`), never half-used;
 *  3. this host (`localUrl`).
 *  The token that comes with a URL (the join file's) is returned *with* that URL only.
 *
 * Lease mode: ask every candidate's `GET /v1/primary` in parallel, each with its own timeout
 * (5 s); a late answer is abandoned. Usable answers say `known: true`, name a holder that is one
 * of the listed candidates (exact match), and carry a generation ≥ the floor — the highest
 * generation this host has seen (`seenGeneration`, and every generation an earlier call through
 * the same `floor` accepted). The highest generation wins (ties: candidate order). No usable
 * answer → the first candidate, marked `known: false` (the seeds' fallback).
 *
 * A candidate's token (if any) is sent only to that candidate's URL origin; redirects are never
 * followed. The floor only ever rises; this module never writes `seen-generation` (only the
 * agent adopts generations, from the arbiter).
 */
import { join } from 'node:path';
import { GENERATION_CEILING, fieldsOf, isHost } from '@hq/protocol';
import type { AgentConfig } from './config.js';
import { readSecure } from '@hq/runtime/files';
import { loadSeen, statePaths } from './state.js';
import { joinUrl, requestJson, type Requester } from '@hq/runtime/http';
import { PEER_PORT } from '@hq/runtime/probe';

/** The seeds' per-candidate timeout. */
export const PRIMARY_TIMEOUT_MS = 5000;
/** Where `hq join` (the seeds' join step) leaves the primary's address. */
export const JOIN_FILE_NAME = 'join.json';

export type PrimaryMode = 'static' | 'lease';

export interface PrimaryCandidate {
  readonly host: string;
  /** The candidate's agent (peer listener) base URL. */
  readonly url: string;
  /** A token issued for `url` only (optional: `/v1/primary` is an open read). */
  readonly token?: string | null;
}

/** The highest generation accepted so far; shared across calls, only rises. */
export interface GenerationFloor {
  value: number;
}

export interface ResolvePrimaryOptions {
  readonly mode: PrimaryMode;
  readonly configUrl?: string | null;
  readonly joinFile?: string | null;
  readonly localUrl?: string;
  readonly candidates?: readonly PrimaryCandidate[];
  readonly seenGeneration?: number;
  readonly floor?: GenerationFloor;
  readonly timeoutMs?: number;
  readonly request?: Requester;
}

export interface PrimaryAnswer {
  readonly host: string;
  readonly status: 'usable' | 'stale' | 'unknown' | 'not-a-candidate' | 'invalid' | 'unreachable';
  readonly holder: string | null;
  readonly generation: number | null;
  readonly problem?: string;
}

export type PrimaryResolution =
  | {
      readonly mode: 'static';
      readonly source: 'config' | 'join-file' | 'local';
      readonly url: string;
      /** The token issued for `url` (from the join file), else null. Send it to `url` only. */
      readonly token: string | null;
      readonly host: string | null;
      readonly ignored: string | null;
    }
  | {
      readonly mode: 'lease';
      readonly source: 'answer';
      readonly known: true;
      readonly holder: string;
      readonly generation: number;
      readonly url: string;
      readonly floor: number;
      readonly answers: readonly PrimaryAnswer[];
    }
  | {
      readonly mode: 'lease';
      readonly source: 'fallback';
      readonly known: false;
      readonly holder: string | null;
      readonly generation: null;
      readonly url: string | null;
      readonly floor: number;
      readonly reason: string;
      readonly answers: readonly PrimaryAnswer[];
    };

const TOKEN = /^[A-Za-z0-9._~+/-]{16,256}$/;
const JOIN_KEYS: ReadonlySet<string> = new Set(['url', 'token', 'host', 'generation', 'arbiterUrl', 'tokenScope']);

function httpUrl(v: unknown): v is string {
  if (typeof v !== 'string') return false;
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === '';
  } catch {
    return false;
  }
}

export type JoinRead =
  | {
      readonly ok: true;
      readonly url: string;
      /** The token for `url`: null when the file binds its token to `arbiterUrl` instead. */
      readonly token: string | null;
      readonly host: string | null;
      readonly generation: number | null;
      readonly arbiterUrl: string | null;
      /** The token issued for `arbiterUrl` (`hq primary --write-join`), with its scope. */
      readonly arbiterToken: string | null;
      readonly tokenScope: 'query' | 'member' | null;
    }
  | { readonly ok: false; readonly problem: string };

/** Reads and checks a join file; any doubt is a refusal (the file is then ignored). */
export async function readJoinFile(path: string): Promise<JoinRead> {
  const r = await readSecure(path, { secret: true, maxBytes: 16 * 1024 });
  if (r.kind === 'missing') return { ok: false, problem: `${path} does not exist` };
  if (r.kind === 'refused') return { ok: false, problem: `${path} ${r.problem}` };
  let v: unknown;
  try {
    v = JSON.parse(r.text);
  } catch {
    return { ok: false, problem: `${path} is not valid JSON` };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { ok: false, problem: `${path} is not a JSON object` };
  const o = v as { [k: string]: unknown };
  for (const k of Object.keys(o))
    if (!JOIN_KEYS.has(k)) return { ok: false, problem: `${path} has an unknown key ${JSON.stringify(k)}` };
  if (!httpUrl(o['url'])) return { ok: false, problem: `${path}: url must be an http(s) URL without credentials` };
  const token = o['token'];
  if (token !== undefined && (typeof token !== 'string' || !TOKEN.test(token)))
    return { ok: false, problem: `${path}: token is not a token` };
  const host = o['host'];
  if (host !== undefined && !isHost(host)) return { ok: false, problem: `${path}: host is not a host name` };
  const generation = o['generation'];
  if (
    generation !== undefined &&
    (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 1)
  )
    return { ok: false, problem: `${path}: generation must be a positive integer` };
  const arbiterUrl = o['arbiterUrl'];
  if (arbiterUrl !== undefined && (!httpUrl(arbiterUrl) || new URL(arbiterUrl).pathname !== '/'))
    return { ok: false, problem: `${path}: arbiterUrl must be a bare http(s) origin` };
  const scope = o['tokenScope'];
  if (scope !== undefined && scope !== 'query' && scope !== 'member')
    return { ok: false, problem: `${path}: tokenScope must be query or member` };
  // A file that names arbiterUrl issued its token for the arbiter: it never goes to `url`.
  const bound = arbiterUrl !== undefined;
  return {
    ok: true,
    url: o['url'],
    token: bound ? null : (token ?? null),
    host: host ?? null,
    generation: generation ?? null,
    arbiterUrl: arbiterUrl ?? null,
    arbiterToken: bound ? (token ?? null) : null,
    tokenScope: scope ?? null,
  };
}

function parseAnswer(
  host: string,
  body: unknown,
  candidates: readonly PrimaryCandidate[],
  floor: number,
): PrimaryAnswer {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return { host, status: 'invalid', holder: null, generation: null, problem: 'not a JSON object' };
  const o = fieldsOf(body);
  const g = o['generation'];
  const h = o['holder'];
  if (
    typeof o['known'] !== 'boolean' ||
    typeof g !== 'number' ||
    !Number.isSafeInteger(g) ||
    g < 0 ||
    (h !== null && typeof h !== 'string')
  ) {
    return { host, status: 'invalid', holder: null, generation: null, problem: 'not {known, holder, generation}' };
  }
  if (!o['known'] || h === null) return { host, status: 'unknown', holder: null, generation: g };
  // No real history gets above the ceiling: such an answer would win every comparison and raise the floor for good.
  if (g > GENERATION_CEILING)
    return {
      host,
      status: 'invalid',
      holder: null,
      generation: null,
      problem: `generation ${g} is above the generation ceiling ${GENERATION_CEILING}`,
    };
  if (!candidates.some((c) => c.host === h)) return { host, status: 'not-a-candidate', holder: h, generation: g };
  if (g < floor)
    return {
      host,
      status: 'stale',
      holder: h,
      generation: g,
      problem: `generation ${g} is below ${floor}, the highest this host has seen`,
    };
  return { host, status: 'usable', holder: h, generation: g };
}

export async function resolvePrimary(opts: ResolvePrimaryOptions): Promise<PrimaryResolution> {
  if (opts.mode === 'static') {
    if (opts.configUrl !== undefined && opts.configUrl !== null && opts.configUrl !== '') {
      return { mode: 'static', source: 'config', url: opts.configUrl, token: null, host: null, ignored: null };
    }
    let ignored: string | null = null;
    if (opts.joinFile !== undefined && opts.joinFile !== null) {
      const j = await readJoinFile(opts.joinFile);
      if (j.ok) return { mode: 'static', source: 'join-file', url: j.url, token: j.token, host: j.host, ignored: null };
      ignored = j.problem;
    }
    return {
      mode: 'static',
      source: 'local',
      url: opts.localUrl ?? `http://127.0.0.1:${PEER_PORT}`,
      token: null,
      host: null,
      ignored,
    };
  }

  const candidates = opts.candidates ?? [];
  const floor = Math.max(opts.seenGeneration ?? 0, opts.floor?.value ?? 0);
  const request = opts.request ?? requestJson;
  const timeoutMs = opts.timeoutMs ?? PRIMARY_TIMEOUT_MS;
  const answers = await Promise.all(
    candidates.map(async (c): Promise<PrimaryAnswer> => {
      const r = await request({
        method: 'GET',
        url: joinUrl(c.url, '/v1/primary'),
        token: c.token === undefined || c.token === null ? null : { token: c.token, url: c.url },
        timeoutSeconds: timeoutMs / 1000,
      });
      if (r.kind === 'unreachable')
        return { host: c.host, status: 'unreachable', holder: null, generation: null, problem: r.problem };
      if (r.status !== 200)
        return { host: c.host, status: 'invalid', holder: null, generation: null, problem: `HTTP ${r.status}` };
      return parseAnswer(c.host, r.body, candidates, floor);
    }),
  );
  let best: PrimaryAnswer | null = null;
  for (const a of answers) {
    // Strictly greater: on a tie the earlier candidate (promotion order) wins.
    if (a.status === 'usable' && (best === null || (a.generation as number) > (best.generation as number))) best = a;
  }
  if (best !== null) {
    const holder = best.holder as string;
    const generation = best.generation as number;
    if (opts.floor !== undefined) opts.floor.value = Math.max(opts.floor.value, generation);
    const url = candidates.find((c) => c.host === holder)?.url as string;
    return { mode: 'lease', source: 'answer', known: true, holder, generation, url, floor, answers };
  }
  const first = candidates[0];
  const stale = answers.filter((a) => a.status === 'stale').length;
  const reason =
    candidates.length === 0
      ? 'no candidates'
      : stale > 0
        ? `${stale} answer(s) older than generation ${floor}, the highest this host has seen; none usable`
        : 'no candidate answered with a known holder';
  return {
    mode: 'lease',
    source: 'fallback',
    known: false,
    holder: first?.host ?? null,
    generation: null,
    url: first?.url ?? null,
    floor,
    reason,
    answers,
  };
}

/**
 * The floor from `{stateDir}/seen-generation`: 0 when the file is missing (fresh install). A
 * corrupt or insecure file is an error — guessing could lower the floor.
 */
export async function seenFloor(stateDir: string): Promise<number> {
  const path = statePaths(stateDir).seen;
  const s = await loadSeen(path);
  if (s.kind === 'missing') return 0;
  if (s.kind === 'refused') throw new Error(`${path} ${s.problem}; refusing to guess the seen generation`);
  return s.value;
}

/**
 * Options from the agent's config: the candidates in promotion order with their peer URLs
 * (this host through its own peer listener on 127.0.0.1), the seen-generation floor, and the
 * join file `{stateDir}/join.json`. Candidates without a known URL are left out.
 */
export async function primaryOptionsFromConfig(
  c: AgentConfig,
  mode: PrimaryMode,
  extra: Partial<ResolvePrimaryOptions> = {},
): Promise<ResolvePrimaryOptions> {
  const localUrl = `http://127.0.0.1:${c.listen.port}`;
  const candidates: PrimaryCandidate[] = [];
  for (const host of c.candidates) {
    const url = host === c.hostName ? localUrl : c.peers.get(host);
    if (url !== undefined) candidates.push({ host, url });
  }
  return {
    mode,
    joinFile: join(c.stateDir, JOIN_FILE_NAME),
    localUrl,
    candidates,
    seenGeneration: await seenFloor(c.stateDir),
    ...extra,
  };
}
