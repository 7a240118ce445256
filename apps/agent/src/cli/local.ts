/**
 * The local agent over its unix socket, with node:http only (light: no Fastify, no undici).
 */
import { request } from 'node:http';

export type LocalResult =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown }
  | { readonly kind: 'down'; readonly problem: string };

export function callAgent(socketPath: string, method: 'GET' | 'POST', path: string, timeoutSeconds: number, body?: unknown): Promise<LocalResult> {
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body), 'utf8');
  return new Promise((done) => {
    let settled = false;
    const finish = (r: LocalResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      done(r);
    };
    const headers: { [k: string]: string } =
      payload !== null ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : method === 'POST' ? { 'content-length': '0' } : {};
    const req = request({ socketPath, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => finish({ kind: 'down', problem: err.message }));
      res.on('end', () => {
        let body: unknown = null;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = null;
        }
        finish({ kind: 'answer', status: res.statusCode ?? 0, body });
      });
    });
    const timer = setTimeout(() => {
      req.destroy();
      finish({ kind: 'down', problem: `no answer within ${timeoutSeconds} s` });
    }, Math.max(1, timeoutSeconds * 1000));
    req.on('error', (err: NodeJS.ErrnoException) => finish({ kind: 'down', problem: err.code ?? err.message }));
    req.end(payload ?? undefined);
  });
}
