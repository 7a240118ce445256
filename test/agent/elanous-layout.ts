/**
 * Files in elanous HQ's layout, as it wrote them, for the importer's tests: the host file without
 * a trailing newline, the seen-generation marker, the local cache, and a config with an hq block
 * and the telegram and discord pollers.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OldLayout {
  readonly host: string;
  readonly seen?: number;
  readonly localGeneration?: number;
  readonly ttlSeconds?: number;
  /** Extra keys of the hq block. */
  readonly hq?: Record<string, unknown>;
}

export function writeOldLayout(home: string, o: OldLayout): void {
  mkdirSync(join(home, '.elanous-hq'), { recursive: true });
  mkdirSync(join(home, '.elanous', 'hq'), { recursive: true });
  writeFileSync(join(home, '.elanous-hq', 'host'), o.host);
  writeFileSync(join(home, '.elanous-hq', 'seen-generation'), `${o.seen ?? 7}\n`);
  const ttl = o.ttlSeconds ?? 1500;
  writeFileSync(
    join(home, '.elanous', 'hq', 'local.json'),
    JSON.stringify({
      holder: 'mbp',
      generation: o.localGeneration ?? o.seen ?? 7,
      confirmedAt: 1_800_000_000,
      ttlSeconds: ttl,
    }),
  );
  writeFileSync(
    join(home, '.elanous', 'config.json'),
    JSON.stringify({
      telegram: { enabled: true, token: 'not-a-real-token' },
      discord: { enabled: true },
      hq: {
        arbiter: 'cloud-vm',
        standby: 'node-b',
        ttlSeconds: ttl,
        failOpenRoles: ['cron'],
        hostName: o.host,
        seenGenerationFile: '~/.elanous-hq/seen-generation',
        tailscaleBin: '',
        probeTimeoutSeconds: 2,
        ...o.hq,
      },
    }),
  );
}
