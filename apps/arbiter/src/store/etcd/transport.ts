/**
 * The gRPC-gateway transport: one HTTP POST per call over undici, endpoints in turn within one deadline,
 * answers classified into `EtcdError`s, one cluster only (C1–C4). Apart from the calls so that the retry
 * and at-most-once rules read in one place.
 */
import { Agent } from 'undici';
import type { MsClock, Timers } from '@hq/runtime/clock';
import { classifyAnswer, classifyTransport, EtcdError, type Verdict } from './errors.js';
import type { WireHeader } from './wire.js';

export type Attempt = { ok: true; json: unknown } | { ok: false; verdict: Verdict };

export interface Call {
  readonly path: string;
  readonly body: unknown;
  /** may apply a change (C2); reads and keep-alives are not writes */
  readonly write: boolean;
  /** a serializable read: no `hasleader` (a leaderless member may answer it) */
  readonly local?: boolean;
  /** a server-streaming RPC answered as `{result}` / `{error}` lines: the first line is the answer */
  readonly stream?: boolean;
}

const HEADERS = Object.freeze({ 'content-type': 'application/json' });
/** grpc-gateway forwards `Grpc-Metadata-*` headers as gRPC metadata; etcd then refuses at once when the member has no leader (C1). */
const LEADER_HEADERS = Object.freeze({ ...HEADERS, 'grpc-metadata-hasleader': 'true' });

/** A function, so that TypeScript does not narrow `signal.aborted` across awaits. */
const aborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

export interface TransportOptions {
  readonly endpoints: readonly string[];
  readonly dialTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly clock: MsClock;
  readonly timers: Timers;
  readonly tls: { readonly ca?: string; readonly cert?: string; readonly key?: string } | undefined;
}

export class GatewayTransport {
  readonly endpoints: readonly string[];
  readonly dialTimeoutMs: number;
  readonly requestTimeoutMs: number;
  private readonly agent: Agent;
  private readonly clock: MsClock;
  private readonly timers: Timers;
  /** the endpoint tried first: the last one that answered */
  private current = 0;
  private clusterId: string | undefined;

  constructor(o: TransportOptions) {
    this.endpoints = o.endpoints;
    this.dialTimeoutMs = o.dialTimeoutMs;
    this.requestTimeoutMs = o.requestTimeoutMs;
    this.clock = o.clock;
    this.timers = o.timers;
    const tls = o.tls;
    this.agent = new Agent({
      connect: {
        timeout: this.dialTimeoutMs,
        ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
        ...(tls?.cert === undefined ? {} : { cert: tls.cert, key: tls.key }),
      },
      keepAliveTimeout: 30_000,
    });
  }

  /** The member calls go to first (the last that answered). */
  get endpoint(): string {
    return this.endpoints[this.current]!;
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }

  /** One call, endpoints in turn from the last that answered, within one deadline (C2, C3). */
  async call(c: Call): Promise<unknown> {
    const deadline = this.clock.now() + this.requestTimeoutMs;
    const n = this.endpoints.length;
    const seen: EtcdError[] = [];
    for (let i = 0; i < n; i++) {
      const left = deadline - this.clock.now();
      if (left <= 0) break;
      // a read leaves time for the members after this one; a write may be sent once only
      const budget = c.write ? left : left / (n - i);
      const a = await this.attempt(this.endpoint, c, budget);
      if (a.ok) return a.json;
      if (!a.verdict.retry) throw a.verdict.error;
      seen.push(a.verdict.error);
      this.current = (this.current + 1) % n;
    }
    const lines = seen.map((e) => e.message).join('; ');
    if (seen.some((e) => e.kind === 'no-quorum')) throw new EtcdError('no-quorum', `etcd has no quorum: ${lines}`);
    throw new EtcdError(
      'unavailable',
      `etcd is unavailable: ${lines === '' ? `no answer within ${this.requestTimeoutMs} ms` : lines}`,
    );
  }

  async attempt(endpoint: string, c: Call, budgetMs: number): Promise<Attempt> {
    const where = `${endpoint}${c.path}`;
    const ac = new AbortController();
    let timedOut = false;
    const timer = this.timers.set(() => {
      timedOut = true;
      ac.abort();
    }, budgetMs);
    try {
      const res = await this.agent.request({
        origin: endpoint,
        path: c.path,
        method: 'POST',
        headers: c.local === true ? HEADERS : LEADER_HEADERS,
        body: JSON.stringify(c.body),
        signal: ac.signal,
        // our own timer above ends the attempt; these only back it up
        headersTimeout: Math.ceil(budgetMs) + 1000,
        bodyTimeout: Math.ceil(budgetMs) + 1000,
      });
      const text = await res.body.text();
      return this.answer(where, res.statusCode, c.stream === true ? (text.split('\n')[0] ?? '') : text, c.write);
    } catch (err) {
      return { ok: false, verdict: classifyTransport(err, c.write, where, timedOut) };
    } finally {
      this.timers.clear(timer);
    }
  }

  private answer(where: string, status: number, text: string, write: boolean): Attempt {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      if (status >= 400 && status < 500)
        return {
          ok: false,
          verdict: {
            error: new EtcdError(
              'bad-request',
              `etcd ${where}: answered ${status} without JSON (is this an etcd client URL?)`,
            ),
            retry: false,
          },
        };
      return {
        ok: false,
        verdict: classifyAnswer(14, `answered ${status} ${text.slice(0, 80).replace(/\s+/g, ' ')}`, write, where),
      };
    }
    const j = json as {
      code?: number;
      message?: string;
      error?: unknown;
      result?: { header?: WireHeader } & Record<string, unknown>;
    };
    if (status !== 200)
      return { ok: false, verdict: classifyAnswer(j.code ?? 14, j.message ?? `answered ${status}`, write, where) };
    // a stream's line: {"result": …} or {"error": {grpc_code, message}}
    if (typeof j.error === 'object' && j.error !== null) {
      const e = j.error as { grpc_code?: number; message?: string };
      return { ok: false, verdict: classifyAnswer(e.grpc_code ?? 14, e.message ?? 'error', write, where) };
    }
    const body = (j.result ?? json) as { header?: WireHeader };
    const cluster = body.header?.cluster_id;
    if (cluster !== undefined) {
      this.clusterId ??= cluster;
      if (cluster !== this.clusterId)
        return {
          ok: false,
          verdict: {
            error: new EtcdError(
              'bad-request',
              `etcd ${where}: belongs to cluster ${cluster}, not ${this.clusterId}: every endpoint must be a member of one cluster`,
            ),
            retry: false,
          },
        };
    }
    return { ok: true, json: body };
  }

  /** Opens a server stream on the first member that accepts it; null when aborted first. */
  async openStream(
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<{ endpoint: string; lines: AsyncIterable<string>; close: () => void } | null> {
    const n = this.endpoints.length;
    const seen: EtcdError[] = [];
    for (let i = 0; i < n; i++) {
      if (aborted(signal)) return null;
      const endpoint = this.endpoint;
      const ac = new AbortController();
      const onAbort = (): void => ac.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      let timedOut = false;
      const timer = this.timers.set(() => {
        timedOut = true;
        ac.abort();
      }, this.requestTimeoutMs);
      try {
        const res = await this.agent.request({
          origin: endpoint,
          path,
          method: 'POST',
          headers: LEADER_HEADERS,
          body: JSON.stringify(body),
          signal: ac.signal,
          headersTimeout: this.requestTimeoutMs + 1000,
          bodyTimeout: 0,
        });
        this.timers.clear(timer);
        if (res.statusCode !== 200) {
          const a = this.answer(`${endpoint}${path}`, res.statusCode, await res.body.text(), false);
          throw a.ok
            ? new EtcdError('unavailable', `etcd ${endpoint}${path}: answered ${res.statusCode}`)
            : a.verdict.error;
        }
        const close = (): void => {
          signal?.removeEventListener('abort', onAbort);
          res.body.destroy();
        };
        return { endpoint, lines: splitLines(res.body), close };
      } catch (err) {
        this.timers.clear(timer);
        signal?.removeEventListener('abort', onAbort);
        if (aborted(signal)) return null;
        const e = err instanceof EtcdError ? err : classifyTransport(err, false, `${endpoint}${path}`, timedOut).error;
        if (e.kind !== 'unavailable' && e.kind !== 'no-quorum') throw e;
        seen.push(e);
        this.current = (this.current + 1) % n;
      }
    }
    const lines = seen.map((e) => e.message).join('; ');
    throw new EtcdError(
      seen.some((e) => e.kind === 'no-quorum') ? 'no-quorum' : 'unavailable',
      `etcd watch could not start: ${lines}`,
    );
  }
}

async function* splitLines(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const utf8 = new TextDecoder();
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : utf8.decode(chunk, { stream: true });
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line !== '') yield line;
    }
  }
  if (buf.trim() !== '') yield buf.trim();
}
