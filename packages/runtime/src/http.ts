/**
 * The JSON HTTP client of every daemon and the CLI (undici), with a hard deadline: an answer
 * that does not arrive in full within `timeoutSeconds` is abandoned, and the caller sees
 * `unreachable` and never acts on it (S2.3). Redirects are never followed (undici's `request`
 * does not), and a token bound to a URL (`BoundToken`) is sent to that origin only, so a token
 * cannot be forwarded to another address.
 */
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
