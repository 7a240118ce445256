/**
 * The agent's calls to the arbiter: the endpoints in turn with the member token, the probe of the holder, and
 * what answers at a wrong arbiter URL. Apart from the link, which decides when to call and what an answer means.
 */
import { fieldsOf } from '@hq/protocol';
import { healthUrlOf } from '../config.js';
import { ArbiterEndpoints, joinUrl, keepAliveFor, requestJson, type HttpResult } from '@hq/runtime/http';
import { probe as probeHost, type ProbeResult } from '@hq/runtime/probe';
import type { LinkOptions } from './arbiter-link.js';

export class ArbiterCalls {
  /** `arbiterUrls` (or `arbiterUrl` alone): tried in order, the next on failure. */
  private readonly arbiters: ArbiterEndpoints;
  /** The arbiter URL already logged as an agent's. */
  private notArbiterSaid: string | null = null;

  constructor(private readonly o: Pick<LinkOptions, 'config' | 'log' | 'probe'>) {
    this.arbiters = new ArbiterEndpoints(o.config.arbiterUrls ?? [o.config.arbiterUrl]);
  }

  /** The arbiter URL calls go to first. */
  get url(): string {
    return this.arbiters.url;
  }

  call(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    token: string | null,
    retrySafe?: boolean,
  ): Promise<HttpResult> {
    // At the default cadence (refresh every 60 s) the connection closes with the answer.
    const c = this.o.config;
    const keepAlive = keepAliveFor(Math.min(c.heartbeatSeconds, c.refreshSeconds));
    return this.arbiters.request({
      method,
      path,
      body,
      token,
      timeoutSeconds: c.requestTimeoutSeconds,
      keepAlive,
      ...(retrySafe === undefined ? {} : { retrySafe }),
    });
  }

  /**
   * A 404 from the arbiter URL: an arbiter has every route, so ask what answers there. An hq
   * agent's peer listener (port 8471 instead of 8470, a wrong host) is named as such.
   */
  async notAnArbiter(): Promise<string | null> {
    const url = this.arbiters.url;
    const h = await requestJson({
      method: 'GET',
      url: joinUrl(url, '/v1/health'),
      timeoutSeconds: this.o.config.requestTimeoutSeconds,
    });
    const body = fieldsOf(h.kind === 'answer' ? h.body : null);
    if (body.role !== 'agent') return null;
    const line = `arbiterUrl ${url} is an hq agent (${typeof body.host === 'string' ? body.host : 'a candidate'}'s peer listener), not the arbiter: set arbiterUrl to the arbiter's address (port 8470 by default)`;
    if (this.notArbiterSaid !== url) {
      this.notArbiterSaid = url;
      this.o.log.error({ category: 'hq.lease', event: 'arbiter-url-is-agent', url }, line);
    }
    return line;
  }

  /** Ping ⊕ health of `target` (or the test's probe). */
  probe(target: string): Promise<ProbeResult> {
    if (this.o.probe !== undefined) return this.o.probe(target);
    const c = this.o.config;
    return probeHost(target, {
      tailscaleBin: c.tailscaleBin,
      healthUrl: healthUrlOf(c, target),
      timeoutSeconds: c.probeTimeoutSeconds,
    });
  }
}
