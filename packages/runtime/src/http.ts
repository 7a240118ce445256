/**
 * The JSON HTTP client of every daemon and the CLI (undici), with a hard deadline: an answer
 * that does not arrive in full within `timeoutSeconds` is abandoned, and the caller sees
 * `unreachable` and never acts on it (S2.3). Redirects are never followed (undici's `request`
 * does not), and a token bound to a URL (`BoundToken`) is sent to that origin only, so a token
 * cannot be forwarded to another address.
 */
import { ERRORS } from '@hq/protocol';
import { request } from 'undici';

export type HttpResult =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown }
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
  /** A plain token goes with the request; a bound one only to its own origin. */
  readonly token?: string | BoundToken | null;
  readonly headers?: { readonly [name: string]: string };
  readonly timeoutSeconds: number;
}

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

export const requestJson: Requester = async (req) => {
  const ms = Math.max(1, Math.round(req.timeoutSeconds * 1000));
  const late = `no answer within ${req.timeoutSeconds} s`;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    const headers: Record<string, string> = { accept: 'application/json', ...(req.headers ?? {}) };
    const token = bearerFor(req);
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const res = await request(req.url, { method: req.method, headers, body, signal: controller.signal, headersTimeout: ms, bodyTimeout: ms });
    const text = await res.body.text();
    if (controller.signal.aborted) return { kind: 'unreachable', problem: late };
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { kind: 'answer', status: res.statusCode, body: parsed };
  } catch (err) {
    if (controller.signal.aborted) return { kind: 'unreachable', problem: late };
    const e = err as { code?: string; message?: string };
    return { kind: 'unreachable', problem: e.code ?? e.message ?? 'error' };
  } finally {
    clearTimeout(timer);
  }
};

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

function tryNext(r: HttpResult): boolean {
  if (r.kind === 'unreachable') return true;
  if (r.status === 502 || r.status === 504) return true;
  const code = (r.body as { error?: unknown } | null)?.error;
  return r.status === 503 && typeof code === 'string' && RETRY_CODES.includes(code);
}

/**
 * Several arbiters (`arbiterUrls`, store etcd): a request goes to the one that answered last,
 * and on a failure that another arbiter may not have (`tryNext`) to the next, in order — all
 * within the one deadline of `timeoutSeconds` from the first send, so an answer is never later
 * than it would be with one arbiter (S2.3). A decision is made by the elected arbiter whichever
 * one received it (the others forward), so trying the next never decides twice what one
 * decided; those 503s say nothing was decided.
 */
export class ArbiterEndpoints {
  private current = 0;
  constructor(
    readonly urls: readonly string[],
    private readonly send: Requester = requestJson,
    private readonly nowMs: () => number = () => performance.now(),
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
      if (!tryNext(r) || n === 1) {
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
