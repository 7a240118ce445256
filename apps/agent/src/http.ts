/**
 * JSON over HTTP with a hard deadline (undici). An answer that does not arrive in full within
 * `timeoutSeconds` is abandoned: the caller sees `unreachable` and never acts on it (S2.3).
 */
import { request } from 'undici';

export type HttpResult =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown; readonly text: string }
  | { readonly kind: 'unreachable'; readonly problem: string };

export interface JsonRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly url: string;
  readonly body?: unknown;
  readonly token?: string | null;
  readonly timeoutSeconds: number;
}

export async function requestJson(req: JsonRequest): Promise<HttpResult> {
  const ms = Math.max(1, Math.round(req.timeoutSeconds * 1000));
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  try {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (req.token !== undefined && req.token !== null) headers['authorization'] = `Bearer ${req.token}`;
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const res = await request(req.url, {
      method: req.method,
      headers,
      body,
      signal: controller.signal,
      headersTimeout: ms,
      bodyTimeout: ms,
    });
    const text = await res.body.text();
    if (controller.signal.aborted) return { kind: 'unreachable', problem: 'timeout' };
    let parsed: unknown = null;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      parsed = null;
    }
    return { kind: 'answer', status: res.statusCode, body: parsed, text };
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    if (controller.signal.aborted) return { kind: 'unreachable', problem: `no answer within ${req.timeoutSeconds} s` };
    return { kind: 'unreachable', problem: e.code ?? e.message ?? 'error' };
  } finally {
    clearTimeout(timer);
  }
}

/** Answers that say "another arbiter may do this": no answer, not elected, the store did not answer, a proxy's 502/504. */
function tryNext(r: HttpResult): boolean {
  if (r.kind === 'unreachable') return true;
  if (r.status === 502 || r.status === 504) return true;
  const code = (r.body as { error?: unknown } | null)?.error;
  return r.status === 503 && (code === 'HQ_ERR_NOT_ELECTED' || code === 'HQ_ERR_STORE_UNAVAILABLE');
}

/**
 * Several arbiters (`arbiterUrls`, store etcd): a request goes to the one that answered last,
 * and on a failure that another arbiter may not have (`tryNext`) to the next, in order — all
 * within the one deadline of `timeoutSeconds` from the first send, so an answer is never later
 * than it would be with one arbiter (S2.3). A decision is made by the elected arbiter whichever
 * one received it (the others forward), so trying the next never decides twice what one
 * decided; a 503 said nothing was decided.
 */
export class ArbiterEndpoints {
  private current = 0;
  constructor(readonly urls: readonly string[]) {
    if (urls.length === 0) throw new TypeError('ArbiterEndpoints needs at least one URL');
  }

  /** The arbiter tried first. */
  get url(): string {
    return this.urls[this.current] as string;
  }

  async request(req: Omit<JsonRequest, 'url'> & { readonly path: string }): Promise<HttpResult> {
    const deadline = performance.now() + req.timeoutSeconds * 1000;
    const n = this.urls.length;
    let last: HttpResult = { kind: 'unreachable', problem: 'no arbiter tried' };
    for (let i = 0; i < n; i++) {
      const left = (deadline - performance.now()) / 1000;
      if (left <= 0) break;
      const at = (this.current + i) % n;
      const r = await requestJson({ ...req, url: joinUrl(this.urls[at] as string, req.path), timeoutSeconds: left });
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
}

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}
