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

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}
