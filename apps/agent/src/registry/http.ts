/**
 * JSON over HTTP for the registry clients: like `../http.js`, plus extra headers and DELETE,
 * and a token that is bound to the URL it was issued for. An answer that does not arrive in full
 * within the timeout is abandoned (`unreachable`) and never acted on; redirects are never
 * followed (undici's `request` does not), so a token cannot be forwarded to another address.
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

export interface RegistryRequest {
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly url: string;
  readonly body?: unknown;
  readonly token?: BoundToken | null;
  readonly headers?: { readonly [name: string]: string };
  readonly timeoutMs: number;
}

export type Requester = (req: RegistryRequest) => Promise<HttpResult>;

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

export const httpRequest: Requester = async (req) => {
  const ms = Math.max(1, Math.round(req.timeoutMs));
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    const headers: Record<string, string> = { accept: 'application/json', ...(req.headers ?? {}) };
    if (req.token !== undefined && req.token !== null && tokenBelongsTo(req.token, req.url)) headers['authorization'] = `Bearer ${req.token.token}`;
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const res = await request(req.url, { method: req.method, headers, body, signal: controller.signal, headersTimeout: ms, bodyTimeout: ms });
    const text = await res.body.text();
    if (controller.signal.aborted) return { kind: 'unreachable', problem: `no answer within ${ms} ms` };
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { kind: 'answer', status: res.statusCode, body: parsed };
  } catch (err) {
    if (controller.signal.aborted) return { kind: 'unreachable', problem: `no answer within ${ms} ms` };
    const e = err as { code?: string; message?: string };
    return { kind: 'unreachable', problem: e.code ?? e.message ?? 'error' };
  } finally {
    clearTimeout(timer);
  }
};

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}

/** One line for a failed exchange: `unreachable: ECONNREFUSED`, `HTTP 403 HQ_ERR_WRONG_HOST`. */
export function describe(r: HttpResult): string {
  if (r.kind === 'unreachable') return `unreachable: ${r.problem}`;
  const b = r.body as { error?: unknown } | null;
  return `HTTP ${r.status}${typeof b?.error === 'string' ? ` ${b.error}` : ''}`;
}
