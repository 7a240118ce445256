/**
 * The probe of a host, the same for the arbiter's checks and a standby's view:
 * `tailscale ping` ⊕ the health URL, `reachable = ping || health`, both bounded by the probe
 * timeout. Never ssh, never a shell: the ping is an argv. Also the MagicDNS look-up that gives
 * hosts their tailnet names when `tailnetDomain` is not configured.
 *
 * Only node:child_process is loaded with this module: the HTTP client comes in with the first
 * health probe, so a config load that needs the MagicDNS suffix stays light.
 */
import { runFile } from './exec.js';

/** The agent's peer listener by default (its `listen`): where an unpinned health probe goes. */
export const PEER_PORT = 8471;

export interface ProbeResult {
  readonly target: string;
  readonly reachable: boolean;
  readonly ping: boolean;
  readonly health: boolean;
}

const ms = (seconds: number): number => Math.max(1, Math.round(seconds * 1000));

/** `{bin} ping -c 1 --timeout {t}s HOST`: true on exit 0 with `pong` in stdout. */
export async function tailscalePing(bin: string, host: string, timeoutSeconds: number): Promise<boolean> {
  if (bin === '') return false;
  const r = await runFile(bin, ['ping', '-c', '1', '--timeout', `${timeoutSeconds}s`, host], {
    timeoutMs: ms(timeoutSeconds),
  });
  return r.ok && r.stdout.includes('pong');
}

/** GET `url` answers 200 within the timeout. No URL: false. */
export async function healthOk(url: string | null, timeoutSeconds: number): Promise<boolean> {
  if (url === null) return false;
  const { requestJson } = await import('./http.js');
  const r = await requestJson({ method: 'GET', url, timeoutSeconds });
  return r.kind === 'answer' && r.status === 200;
}

export async function probe(
  target: string,
  opts: { readonly tailscaleBin: string; readonly healthUrl: string | null; readonly timeoutSeconds: number },
): Promise<ProbeResult> {
  const [ping, health] = await Promise.all([
    tailscalePing(opts.tailscaleBin, target, opts.timeoutSeconds),
    healthOk(opts.healthUrl, opts.timeoutSeconds),
  ]);
  return { target, reachable: ping || health, ping, health };
}

/** A host's health URL on the tailnet: `http://{host}.{domain}:{port}/v1/health`. */
export function tailnetHealthUrl(host: string, domain: string, port: number): string {
  return `http://${host}.${domain}:${port}/v1/health`;
}

export type MagicDns =
  | { readonly ok: true; readonly suffix: string }
  | { readonly ok: false; readonly problem: string };

/** The MagicDNS suffix from `{bin} status --json`, without its trailing dot. */
export async function magicDnsSuffix(bin: string, timeoutSeconds: number): Promise<MagicDns> {
  if (bin === '') return { ok: false, problem: 'tailscaleBin is ""' };
  const r = await runFile(bin, ['status', '--json'], { timeoutMs: ms(timeoutSeconds) });
  if (!r.ok) return { ok: false, problem: `${bin} status --json: ${r.problem ?? 'failed'}` };
  let suffix: unknown = null;
  try {
    suffix = (JSON.parse(r.stdout) as { MagicDNSSuffix?: unknown }).MagicDNSSuffix;
  } catch {
    return { ok: false, problem: `${bin} status --json: not JSON` };
  }
  if (typeof suffix !== 'string' || !/^[a-z0-9.-]{1,253}$/i.test(suffix))
    return { ok: false, problem: `${bin} status --json: no MagicDNSSuffix` };
  return { ok: true, suffix: suffix.replace(/\.$/, '') };
}
