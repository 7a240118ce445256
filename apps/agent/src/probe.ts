/**
 * The standby's probe of the holder, the same as the arbiter's (SPEC §3): tailscale ping ⊕
 * health. `reachable = ping || health`. Never ssh, never a shell: the ping is an argv.
 */
import { execFile } from 'node:child_process';
import { requestJson } from '@hq/runtime/http';

export interface ProbeResult {
  readonly target: string;
  readonly reachable: boolean;
  readonly ping: boolean;
  readonly health: boolean;
}

export function ping(bin: string, host: string, timeoutSeconds: number): Promise<boolean> {
  if (bin === '') return Promise.resolve(false);
  const t = Math.max(1, Math.ceil(timeoutSeconds));
  return new Promise((done) => {
    execFile(bin, ['ping', '-c', '1', '--timeout', `${t}s`, host], { timeout: (t + 1) * 1000, maxBuffer: 1 << 16 }, (err, stdout) => {
      done(err === null && /pong/.test(String(stdout)));
    });
  });
}

export async function health(url: string | null, timeoutSeconds: number): Promise<boolean> {
  if (url === null) return false;
  const r = await requestJson({ method: 'GET', url, timeoutSeconds });
  return r.kind === 'answer' && r.status === 200;
}

export async function probe(target: string, opts: { tailscaleBin: string; healthUrl: string | null; timeoutSeconds: number }): Promise<ProbeResult> {
  const [p, h] = await Promise.all([ping(opts.tailscaleBin, target, opts.timeoutSeconds), health(opts.healthUrl, opts.timeoutSeconds)]);
  return { target, reachable: p || h, ping: p, health: h };
}
