/**
 * The HTTP client of every daemon and the CLI over TCP (node:http, and node:https loaded for the
 * first `https://` URL): JSON requests, raw bodies (a push's bytes, a file stream) and a stream
 * read as it arrives (`openStream`, the event stream). A request has a hard deadline: an answer that does not arrive in full within
 * `timeoutSeconds` is abandoned, and the caller sees `unreachable` and never acts on it (S2.3).
 * Redirects are never followed (node's client does not), and a token bound to a URL
 * (`BoundToken`) is sent to that origin only, so a token cannot be forwarded to another address.
 * Connections are kept alive by node's global agents, unless a request says otherwise (`keepAlive`).
 *
 * Not undici: it costs a daemon about 9 MiB to load (docs/BENCH.md "Where the idle agent's memory
 * goes"), and node:http, which the daemons load for their servers anyway, makes the same exchange.
 */
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type RequestOptions } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import { monotonicClockMs, realTimers, type Timers } from './clock.js';
import { ERRORS, PROTOCOL_HEADER, PROTOCOL_VERSION, fieldsAfter, spokenVersion } from '@hq/protocol';

export type HttpResult =
  | {
      readonly kind: 'answer';
      readonly status: number;
      readonly body: unknown;
      /** The protocol version the answer speaks (its `hq-protocol` header; 1 without one). */
      readonly protocol?: number;
    }
  | { readonly kind: 'unreachable'; readonly problem: string };

/** A bearer token and the base URL it belongs to: it is sent to that origin only. */
export interface BoundToken {
  readonly token: string;
  readonly url: string;
}

export interface JsonRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly url: string;
  /** Sent as JSON when present. */
  readonly body?: unknown;
  /**
   * Sent as it is instead (a push's bytes, a file stream): the caller's headers say its type,
   * and a stream's `content-length`. Never sent twice: a stream cannot be read again.
   */
  readonly rawBody?: string | Buffer | Readable;
  /** A plain token goes with the request; a bound one only to its own origin. */
  readonly token?: string | BoundToken | null;
  readonly headers?: { readonly [name: string]: string };
  readonly timeoutSeconds: number;
  /**
   * Several arbiters (`ArbiterEndpoints`): the request may be decided twice without harm (a
   * read, a heartbeat's renewal), so after a failure that leaves its fate unknown — sent, then
   * no answer — it goes to the next arbiter too. Default: GET only.
   */
  readonly retrySafe?: boolean;
  /**
   * Keep the connection for the next request (default; node's global agent closes an idle one
   * after 5 s, by a timer). False: it closes with the answer (`connection: close`) — for a
   * caller whose next request comes later than that, so an idle daemon is not woken by it.
   */
  readonly keepAlive?: boolean;
  /** The deadline's timer. Default: the process's own. */
  readonly timers?: Timers;
}

/** How long node's global agent keeps an idle connection (its `timeout`, Node 19 and later). */
export const KEEP_ALIVE_IDLE_SECONDS = 5;

/**
 * `keepAlive` for a caller whose next request comes in `seconds`: a connection that node would
 * close by its timer before then is closed with the answer instead.
 */
export const keepAliveFor = (seconds: number): boolean => seconds < KEEP_ALIVE_IDLE_SECONDS;

export type Requester = (req: JsonRequest) => Promise<HttpResult>;

function origin(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/** True when `token` may be sent with a request to `url`: same scheme, host and port. */
export function tokenBelongsTo(token: BoundToken, url: string): boolean {
  const a = origin(token.url);
  return a !== null && a !== 'null' && a === origin(url);
}

function bearerFor(req: JsonRequest): string | null {
  const t = req.token;
  if (t === undefined || t === null) return null;
  if (typeof t === 'string') return t;
  return tokenBelongsTo(t, req.url) ? t.token : null;
}

/**
 * The protocol version each origin answered in last (docs/PROTOCOL.md "Versions"): the
 * `hq-protocol` header of its answer, or 1 for an answer without one (hq 0.1.x). Requests say
 * this release's version and leave out the request fields of versions later than the origin's;
 * an origin never heard from gets them all (an earlier one refuses them with a 400, and the
 * request goes once more without them).
 */
const spokenBy = new Map<string, number>();

/** The version `url`'s origin answered in last, or null when it never answered. */
export function peerProtocol(url: string): number | null {
  return spokenBy.get(origin(url) ?? url) ?? null;
}

function routeOf(method: string, url: string): string {
  try {
    return `${method} ${new URL(url).pathname}`;
  } catch {
    return `${method} ${url}`;
  }
}

/** `body` without the fields a request of `version` may not carry (null: nothing to leave out). */
function shaped(body: unknown, version: number, route: string): { readonly [k: string]: unknown } | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const later = fieldsAfter(version, route).filter((f) => Object.hasOwn(body, f));
  if (later.length === 0) return null;
  const out: { [k: string]: unknown } = {};
  for (const [k, v] of Object.entries(body)) if (!later.includes(k)) out[k] = v;
  return out;
}

type Send = (
  url: URL,
  options: RequestOptions,
  answer: Parameters<typeof httpRequest>[2],
) => ReturnType<typeof httpRequest>;
let httpsRequest: Send | null = null;

/**
 * One request, answered with its status and headers, the body still to read (`answer`). Rejects
 * on any failure of the exchange with node's error (its `code`: ECONNREFUSED, ECONNRESET, …) and
 * with an AbortError when `options.signal` aborts. A stream body is piped; a failure of it ends
 * the request.
 */
async function send(
  url: string,
  options: RequestOptions,
  body: string | Buffer | Readable | undefined,
): Promise<IncomingMessage> {
  const target = new URL(url);
  let sender: Send = httpRequest;
  if (target.protocol === 'https:') sender = httpsRequest ??= (await import('node:https')).request;
  else if (target.protocol !== 'http:')
    throw Object.assign(new Error(`not an http(s) URL: ${url}`), { code: 'ERR_INVALID_URL' });
  const sized = typeof body === 'string' || Buffer.isBuffer(body);
  const headers = {
    ...(options.headers as Record<string, string>),
    ...(sized ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = sender(target, { ...options, headers }, resolve);
    req.on('error', reject);
    if (body === undefined || sized) req.end(body);
    else pipeline(body, req, (err) => err && reject(err));
  });
}

/** The whole body of an answer as text; rejects when it is cut short. */
function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (chunk: Buffer | string) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(Object.assign(new Error('the answer was cut short'), { code: 'ECONNRESET' }));
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/** One request and its whole answer (status, headers, the body as text). */
async function exchange(
  url: string,
  options: RequestOptions,
  body: string | Buffer | Readable | undefined,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  const res = await send(url, options, body);
  return { status: res.statusCode ?? 0, headers: res.headers, text: await readAll(res) };
}

interface Sent {
  readonly status: number;
  readonly body: unknown;
  /** The version the answer speaks. */
  readonly protocol: number;
}

export const requestJson: Requester = async (req) => {
  const ms = Math.max(1, Math.round(req.timeoutSeconds * 1000));
  const late = `no answer within ${req.timeoutSeconds} s`;
  const controller = new AbortController();
  const timers = req.timers ?? realTimers;
  const timer = timers.set(() => controller.abort(), ms);
  const peer = origin(req.url) ?? req.url;
  const route = routeOf(req.method, req.url);
  /** One exchange: the request says `version` and carries the fields of `shapeFor`. */
  const once = async (version: number, shapeFor: number): Promise<Sent> => {
    const headers: Record<string, string> = {
      accept: 'application/json',
      [PROTOCOL_HEADER]: String(version),
      ...(req.headers ?? {}),
    };
    const token = bearerFor(req);
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    let body: string | Buffer | Readable | undefined = req.rawBody;
    const less = shaped(req.body, shapeFor, route);
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(less ?? req.body);
    }
    const res = await exchange(
      req.url,
      { method: req.method, headers, signal: controller.signal, ...(req.keepAlive === false ? { agent: false } : {}) },
      body,
    );
    const text = res.text;
    const said = spokenVersion(res.headers[PROTOCOL_HEADER]);
    const protocol = said.ok ? said.version : version;
    if (!controller.signal.aborted) spokenBy.set(peer, protocol);
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { status: res.status, body: parsed, protocol };
  };
  try {
    const known = spokenBy.get(peer) ?? PROTOCOL_VERSION;
    let r = await once(PROTOCOL_VERSION, known);
    // An earlier side refused (a 400: nothing decided) a field of a later version before it had
    // told its version: once more without those fields, within the same deadline.
    if (
      !controller.signal.aborted &&
      r.status === 400 &&
      r.protocol < known &&
      shaped(req.body, r.protocol, route) !== null
    ) {
      r = await once(PROTOCOL_VERSION, r.protocol);
    }
    if (controller.signal.aborted) return { kind: 'unreachable', problem: late };
    return { kind: 'answer', status: r.status, body: r.body, protocol: r.protocol };
  } catch (err) {
    if (controller.signal.aborted) return { kind: 'unreachable', problem: late };
    const e = err as { code?: string; message?: string };
    return { kind: 'unreachable', problem: e.code ?? e.message ?? 'error' };
  } finally {
    timers.clear(timer);
  }
};

export interface StreamRequest {
  readonly url: string;
  readonly token?: string | null;
  readonly headers?: { readonly [name: string]: string };
  /** Abandoned when nothing arrives for this long: the answer's head, then each piece of its body. */
  readonly idleSeconds: number;
  /** Ends the request at once. */
  readonly signal?: AbortSignal;
  readonly timers?: Timers;
}

export interface StreamAnswer {
  readonly status: number;
  /** The body as it arrives; throws when the connection fails or stays idle too long. */
  pieces(): AsyncIterable<string>;
  /** The whole body as text ('' when it fails). */
  text(): Promise<string>;
  /** Ends the request (a body not read is dropped). */
  close(): void;
}

/**
 * A GET whose answer is read as it arrives (a stream of events): no deadline for the whole,
 * but `idleSeconds` for each wait on the server. Rejects as `send` does; a stream idle too long
 * fails with ETIMEDOUT.
 */
export async function openStream(req: StreamRequest): Promise<StreamAnswer> {
  const controller = new AbortController();
  const abort = (): void => controller.abort();
  req.signal?.addEventListener('abort', abort, { once: true });
  const timers = req.timers ?? realTimers;
  const ms = Math.max(1, Math.round(req.idleSeconds * 1000));
  let idled = false;
  const onIdle = (): void => {
    idled = true;
    abort();
  };
  const quiet = (err: unknown): unknown =>
    idled ? Object.assign(new Error(`nothing arrived within ${req.idleSeconds} s`), { code: 'ETIMEDOUT' }) : err;
  let idle: unknown = timers.set(onIdle, ms);
  const close = (): void => {
    timers.clear(idle);
    req.signal?.removeEventListener('abort', abort);
    controller.abort();
  };
  const headers: Record<string, string> = { [PROTOCOL_HEADER]: String(PROTOCOL_VERSION), ...(req.headers ?? {}) };
  const token = bearerFor({ method: 'GET', url: req.url, token: req.token ?? null, timeoutSeconds: req.idleSeconds });
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  let res: IncomingMessage;
  try {
    if (req.signal?.aborted === true) abort();
    res = await send(req.url, { method: 'GET', headers, signal: controller.signal }, undefined);
  } catch (err) {
    close();
    throw quiet(err);
  }
  res.setEncoding('utf8');
  return {
    status: res.statusCode ?? 0,
    async *pieces() {
      try {
        for await (const piece of res) {
          timers.clear(idle);
          idle = timers.set(onIdle, ms);
          yield piece as string;
        }
      } catch (err) {
        throw quiet(err);
      } finally {
        close();
      }
    },
    text: () =>
      readAll(res)
        .catch(() => '')
        .finally(close),
    close,
  };
}

/** `base` (a bare origin, maybe with a trailing slash) + `path` (starting with `/`). */
export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}

/** One line for a failed exchange: `unreachable: ECONNREFUSED`, `HTTP 403 HQ_ERR_WRONG_HOST`. */
export function describe(r: HttpResult): string {
  if (r.kind === 'unreachable') return `unreachable: ${r.problem}`;
  const b = r.body as { error?: unknown } | null;
  return `HTTP ${r.status}${typeof b?.error === 'string' ? ` ${b.error}` : ''}`;
}

/**
 * Answers that say "another arbiter may do this": no answer, a proxy's 502/504, or a 503 whose
 * code says nothing was decided (the election or the store was out).
 */
const RETRY_CODES: readonly string[] = [ERRORS.NOT_ELECTED.code, ERRORS.STORE_UNAVAILABLE.code];

/** Transport failures that prove the request never reached an arbiter (no connection was made). */
const NOT_SENT: readonly string[] = ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'];

/**
 * `retrySafe`: the request may be decided twice. A request that may not (a release, a handover,
 * a step-down's acknowledgement) moves on only when nothing was decided for certain — never
 * connected, or a 503 that says so; after it was sent and no answer came (a reset, a timeout, a
 * proxy's 502/504) the first arbiter may have decided it, and the next one's answer (a refusal:
 * "not the holder" after a release that landed) would be taken for the outcome. Its caller
 * gets the unknown outcome instead, as it would from one arbiter.
 */
function tryNext(r: HttpResult, retrySafe: boolean): boolean {
  if (r.kind === 'unreachable') return retrySafe || NOT_SENT.includes(r.problem);
  if (r.status === 502 || r.status === 504) return retrySafe;
  const code = (r.body as { error?: unknown } | null)?.error;
  return r.status === 503 && typeof code === 'string' && RETRY_CODES.includes(code);
}

/**
 * Several arbiters (`arbiterUrls`, store etcd): a request goes to the one that answered last,
 * and on a failure that another arbiter may not have (`tryNext`) to the next, in order — all
 * within the one deadline of `timeoutSeconds` from the first send, so an answer is never later
 * than it would be with one arbiter (S2.3). A decision is made by the elected arbiter whichever
 * one received it (the others forward), so a request whose first sending may have been decided
 * goes to the next only when deciding it twice is harmless (`retrySafe`: reads, heartbeats);
 * the 503s of `RETRY_CODES` say nothing was decided.
 */
export class ArbiterEndpoints {
  private current = 0;
  constructor(
    readonly urls: readonly string[],
    private readonly send: Requester = requestJson,
    private readonly nowMs: () => number = monotonicClockMs.now,
  ) {
    if (urls.length === 0) throw new TypeError('ArbiterEndpoints needs at least one URL');
  }

  /** The arbiter tried first. */
  get url(): string {
    return this.urls[this.current] as string;
  }

  async request(req: Omit<JsonRequest, 'url'> & { readonly path: string }): Promise<HttpResult> {
    const deadline = this.nowMs() + req.timeoutSeconds * 1000;
    const n = this.urls.length;
    let last: HttpResult = { kind: 'unreachable', problem: 'no arbiter tried' };
    for (let i = 0; i < n; i++) {
      const left = (deadline - this.nowMs()) / 1000;
      if (left <= 0) break;
      const at = (this.current + i) % n;
      const { path, ...rest } = req;
      const r = await this.send({ ...rest, url: joinUrl(this.urls[at] as string, path), timeoutSeconds: left });
      if (!tryNext(r, req.retrySafe ?? req.method === 'GET') || n === 1) {
        this.current = at;
        return r;
      }
      last = r.kind === 'unreachable' ? { kind: 'unreachable', problem: `${this.urls[at]}: ${r.problem}` } : r;
    }
    // Nobody answered in time: the next request starts with the next arbiter.
    this.current = (this.current + 1) % n;
    return last;
  }

  /**
   * For code written against one arbiter URL (the registry member, port leases): a request to
   * the first URL + a path goes to whichever arbiter answers, as `request` does; any other URL
   * is sent as it is.
   */
  asRequester(): Requester {
    const base = (this.urls[0] as string).replace(/\/+$/, '');
    return (req) => {
      if (!req.url.startsWith(`${base}/`)) return this.send(req);
      const { url, ...rest } = req;
      return this.request({ ...rest, path: url.slice(base.length) });
    };
  }
}
