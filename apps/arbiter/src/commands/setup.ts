/** `hq-arbiter init` (a config and the fleet's secrets) and `hq-arbiter join HOST` (a candidate's bundle). */
import { HOST_PATTERN, isHost } from '@hq/protocol';
import { ARBITER_CONFIG } from '@hq/runtime/config-file';
import { flagString, usage } from '@hq/runtime/cli';
import { initArbiter } from '../init.js';
import { JOIN_TTL_SECONDS, createJoin, defaultArbiterUrl, joinProblem, parseTtl } from '../join.js';
import { config, fromFile, noWords, type Invocation } from './context.js';

export async function initCommand({ p, words, io }: Invocation): Promise<number> {
  noWords('init', words);
  const r = await initArbiter({
    config: flagString(p, 'config') ?? (process.env[ARBITER_CONFIG.envVar] || undefined),
    candidates: flagString(p, 'candidates'),
    arbiter: flagString(p, 'arbiter'),
    listen: flagString(p, 'listen'),
    dataDir: flagString(p, 'data-dir'),
    tailnetDomain: flagString(p, 'tailnet-domain'),
    tailscaleBin: flagString(p, 'tailscale-bin'),
  });
  if (!r.ok) throw usage(r.problem);
  for (const line of r.lines) io.out(`${line}\n`);
  return 0;
}

export async function joinCommand({ p, words, io, clock }: Invocation): Promise<number> {
  const [host, ...extra] = words;
  if (host === undefined || !isHost(host))
    throw usage(`join needs a HOST matching ${HOST_PATTERN.source} (one of the candidates)`);
  if (extra.length > 0) throw usage(`join takes one HOST (got "${extra[0]}" too)`);
  const ttlFlag = flagString(p, 'ttl');
  const ttl = ttlFlag === undefined ? JOIN_TTL_SECONDS : parseTtl(ttlFlag);
  if (ttl === null)
    throw usage(`--ttl must be seconds, or a number with s, m or h, at most 24h (got "${String(ttlFlag)}")`);
  const cfg = await config(p);
  if (!fromFile(cfg))
    throw usage("join: no config file found: pass the daemon's --config (hq-arbiter init writes one)");
  const problem = joinProblem(cfg, host);
  if (problem !== null) throw usage(`join: ${problem}`);
  const url = flagString(p, 'url') ?? defaultArbiterUrl(cfg);
  if (url === null)
    throw usage(
      'join: the arbiter listens on every address: say how candidates reach it with --url http://ADDRESS:PORT',
    );
  if (!/^https?:\/\/[^/?#@]+$/.test(url))
    throw usage(`--url must be a bare origin like http://cloud-vm.example-tailnet.ts.net:8470 (got "${url}")`);
  const now = clock.now() / 1000;
  const j = await createJoin(cfg, host, url, ttl, now);
  io.out(`hq join ${j.bundle}\n`);
  io.err(
    `hq-arbiter: run that line on ${host} before ${new Date(j.expiresAt * 1000).toISOString()} (${ttl % 60 === 0 ? `${ttl / 60} min` : `${ttl} s`}); it works once, for ${host} only, and is not shown again. The daemon must be running at ${url}.\n`,
  );
  return 0;
}
