/**
 * Upgrading one host at a time, with real processes: the previous release (tag
 * v0.1.0, protocol 1, built from this repository's history) and this checkout (protocol 2) in
 * one fleet. For each upgrade order — arbiter first, standby first, holder first — a fleet of
 * the previous release acquires; then, one host upgraded at a time, the mixed fleet renews,
 * acquires, fails over (kill -9 of the holder) and hands over; then the last host is upgraded.
 * A host that holds the lease when its turn comes hands it over first (deploy/README.md
 * "Upgrading"). All along both fences are sampled every 50 ms: never both run; the lease is never
 * lost (the only promotion is the one the test causes; the holder runs again after each step);
 * generations only rise. Also: the previous arbiter refuses a database stamped newer, with one
 * line, and leaves it untouched.
 */
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Cluster, HOSTS, runNode, sleep, type HostName } from '../system/harness.js';
import { missingTool } from '../missing-tool.js';
import { buildPrevious, PREVIOUS_TAG } from './previous.js';

// Longer than the suite's 300 s per file: the previous release is compiled first (tsc -b, a
// minute or two on a busy machine), then three fleets go through their upgrades (a few minutes
// each when the machine is loaded: every step starts node processes).
t.setTimeout(40 * 60_000);

const prev = await buildPrevious();
if (!prev.ok) {
  missingTool(t, prev.missing);
} else {
  const OLD = prev.build.root;
  t.teardown(() => prev.build.remove());

  type Name = 'arbiter' | HostName;
  interface Lease {
    holder: string | null;
    generation: number;
    renewedAt: number | null;
    expired: boolean;
  }

  /** One fleet through the upgrades in `order` (by host: the first holder is mbp, the first standby node-b). */
  const fleet = (title: string, order: readonly Name[]): void => {
    t.test(title, async (t) => {
      const c = await Cluster.create({ tokenRoot: OLD });
      t.teardown(() => c.stopAll());
      for (const n of ['arbiter', ...HOSTS] as const) c.roots.set(n, OLD);
      const isNew = (n: Name): boolean => !c.roots.has(n);
      const fleetText = (): string =>
        (['arbiter', ...HOSTS] as const).map((n) => `${n} ${isNew(n) ? 'new' : 'old'}`).join(', ');

      /** `hq` of host h's release; generous: a CLI start can take many seconds on a loaded machine. */
      const cli = (h: HostName, args: readonly string[]) => c.hq(h, args, {}, 120_000);
      const lease = async (): Promise<Lease> => {
        const r = await fetch(`${c.arbiterUrl()}/v1/lease`);
        return (await r.json()) as Lease;
      };
      const holderOf = async (): Promise<HostName> => {
        const l = await lease();
        if (l.holder !== 'mbp' && l.holder !== 'node-b') throw new Error(`no holder: ${JSON.stringify(l)}`);
        return l.holder;
      };
      /** Each generation a fence answered with, in order of first sight: must only rise. */
      const generations: number[] = [];
      const seenGeneration = (g: number | undefined): void => {
        if (g !== undefined && g > 0 && !generations.includes(g)) generations.push(g);
      };
      const runs = async (h: HostName): Promise<boolean> => {
        const f = await c.fence(h);
        seenGeneration(f?.generation);
        return f?.run === true && f.reason === 'holder';
      };
      const start = async (n: Name): Promise<void> => (n === 'arbiter' ? c.startArbiter() : c.startAgent(n));
      /**
       * Samples the holder's fence while `fn` runs: the answers that said it may not run. With the
       * fast settings (ttl 6 s, answers later than 1 s discarded) a loaded machine can let the
       * holder's validity lapse for a moment while another host restarts; that is reported, and
       * what is asserted is that the lease stays where it is and the holder runs again.
       */
      const holderKeepsRunning = async (holder: HostName, fn: () => Promise<void>): Promise<string[]> => {
        const misses: string[] = [];
        let on = true;
        const loop = (async () => {
          while (on) {
            const f = await c.fence(holder);
            seenGeneration(f?.generation);
            if (f?.run !== true) misses.push(f === null ? 'no answer' : f.reason);
            await sleep(100);
          }
        })();
        try {
          await fn();
        } finally {
          on = false;
          await loop;
        }
        return misses;
      };
      /** An exit the CLI reached through the arbiter: 3 (no answer within 1 s on a loaded machine) is tried again. */
      const through = async (h: HostName, args: readonly string[]) => {
        let r = await cli(h, args);
        for (let i = 0; i < 4 && r.code === 3; i++) r = await cli(h, args);
        return r;
      };

      /** Upgrades `n` in place (SIGTERM, then this checkout's build on the same files); a holder hands over first. */
      const upgrade = async (t: Test, n: Name): Promise<void> => {
        if (n !== 'arbiter' && (await holderOf()) === n)
          await handover(t, n, `${n} holds the lease: it hands over before its upgrade`);
        const holder = await holderOf();
        const g = (await lease()).generation;
        const misses = await holderKeepsRunning(holder, async () => {
          await c.kill(n, 'SIGTERM');
          c.roots.delete(n);
          await start(n);
          if (n !== 'arbiter')
            await c.waitFor(
              async () => (await c.fence(n))?.holder === holder,
              40_000,
              `upgraded ${n} knows the holder`,
            );
          // Renewals through the new side: the arbiter renews the holder again.
          const before = (await lease()).renewedAt ?? 0;
          await c.waitFor(
            async () => ((await lease()).renewedAt ?? 0) > before,
            40_000,
            `the holder renews after the upgrade of ${n}`,
          );
        });
        const l = await lease();
        t.equal(l.holder, holder, `${holder} still holds after ${n} is upgraded (${fleetText()})`);
        t.equal(l.generation, g, 'in the same generation: no failover');
        await c.waitFor(async () => runs(holder), 40_000, `${holder} runs after the upgrade of ${n}`);
        t.comment(
          misses.length === 0
            ? `${holder} ran in every sample while ${n} restarted`
            : `${holder} did not run in ${misses.length} samples while ${n} restarted (${[...new Set(misses)].join(', ')}): a loaded machine`,
        );
      };

      const handover = async (t: Test, from: HostName, why: string): Promise<void> => {
        const to = c.other(from);
        const g = (await lease()).generation;
        const r = await through(from, ['lease', 'release', '--handover-to', to]);
        t.equal(
          r.code,
          0,
          `${why}: ${from}'s hq lease release --handover-to ${to} exits 0 (${fleetText()}; ${r.stderr.trim()})`,
        );
        await c.waitFor(async () => runs(to), 40_000, `${to} runs after the handover`);
        t.equal((await lease()).generation, g + 1, `the handover to ${to} is generation ${g + 1}`);
      };

      await c.startArbiter();
      await c.startAgents();
      const monitor = c.watchOverlap(t);

      await t.test(`a fleet of ${PREVIOUS_TAG} acquires`, async (t) => {
        const r = await cli('mbp', ['lease', 'acquire', '--wait', '20']);
        t.equal(r.code, 0, `mbp acquires (exit ${r.code} ${r.signal ?? ''} ${r.stderr.trim()})`);
        await c.waitFor(async () => runs('mbp'), 40_000, 'mbp runs');
        t.equal((await lease()).generation, 1, 'the first grant is generation 1');
      });

      const [first, second, last] = order as [Name, Name, Name];

      await t.test(`${first} upgraded first: renewals and acquire in the mixed fleet`, async (t) => {
        await upgrade(t, first);
        const holder = await holderOf();
        const standby = c.other(holder);
        const again = await through(holder, ['lease', 'acquire']);
        t.equal(again.code, 0, `the holder's hq lease acquire renews (${fleetText()}; ${again.stderr.trim()})`);
        const refused = await through(standby, ['lease', 'acquire']);
        t.equal(
          refused.code,
          1,
          `the standby's hq lease acquire is refused: the lease is held (${refused.stderr.trim()})`,
        );
        await c.waitFor(async () => runs(holder), 40_000, `${holder} still runs`);
      });

      await t.test('a failover in the mixed fleet: kill -9 of the holder promotes the standby', async (t) => {
        const holder = await holderOf();
        const standby = c.other(holder);
        const g = (await lease()).generation;
        await c.kill(holder, 'SIGKILL');
        await c.waitFor(async () => runs(standby), 60_000, `${standby} runs after the promotion`);
        const l = await lease();
        t.equal(l.holder, standby, `${standby} holds (${fleetText()})`);
        t.equal(l.generation, g + 1, `the promotion is generation ${g + 1}`);
        await start(holder);
        await c.waitFor(
          async () => (await c.fence(holder))?.generation === g + 1,
          40_000,
          `restarted ${holder} learns generation ${g + 1}`,
        );
        t.equal((await c.fence(holder))?.run, false, `restarted ${holder} stays out`);
      });

      await t.test(`${second} upgraded second, then a handover`, async (t) => {
        await upgrade(t, second);
        await handover(t, await holderOf(), 'a handover in the mixed fleet');
      });

      await t.test(`${last}, the last host, upgraded: the whole fleet runs this release`, async (t) => {
        await upgrade(t, last);
        const holder = await holderOf();
        await c.waitFor(async () => runs(holder), 40_000, `${holder} runs`);
        t.equal((await c.fence(c.other(holder)))?.run, false, 'the standby does not');
        const st = (await (await fetch(`${c.arbiterUrl()}/v1/status`)).json()) as {
          hosts: Array<{ host: string; protocol: number | null; upgrade: string | null }>;
        };
        await c.waitFor(
          async () => {
            const s = (await (await fetch(`${c.arbiterUrl()}/v1/status`)).json()) as typeof st;
            return HOSTS.every((h) => s.hosts.find((x) => x.host === h)?.protocol === 2);
          },
          40_000,
          'every host heartbeats in protocol 2',
        );
        const s = (await (await fetch(`${c.arbiterUrl()}/v1/status`)).json()) as typeof st;
        t.same(
          s.hosts.filter((h) => h.upgrade !== null),
          [],
          'no host is left to upgrade',
        );
      });

      const overlap = await monitor.stop();
      t.equal(overlap, null, `no sample ever saw both hosts run (${overlap ?? 'none'})`);
      t.same(
        [...generations].sort((a, b) => a - b),
        generations,
        `generations only rose (${generations.join(' → ')})`,
      );
      t.same(
        generations,
        [1, 2, 3, 4, 5, 6].slice(0, generations.length),
        'each change of holder is the next generation',
      );
      const events = (await (await fetch(`${c.arbiterUrl()}/v1/events?limit=1000`)).json()) as {
        events: Array<{ event: string }>;
      };
      t.equal(
        events.events.filter((e) => e.event === 'promoted').length,
        1,
        'one promotion: the failover the test caused, none from an upgrade',
      );
    });
  };

  // Each fleet and the refusal have their own cluster and mostly wait on real time: they run side by side.
  t.jobs = 4;
  fleet('arbiter first, then the standby, then the holder', ['arbiter', 'node-b', 'mbp']);
  fleet('standby first, then the arbiter, then the holder', ['node-b', 'arbiter', 'mbp']);
  fleet('holder first, then the standby, then the arbiter', ['mbp', 'node-b', 'arbiter']);

  t.test(
    `the ${PREVIOUS_TAG} arbiter refuses a database stamped newer than it, with one line, and leaves it untouched`,
    async (t) => {
      // The database is made by this checkout's hq-arbiter (migration 4 since the step-down; 0.1.0
      // knows 1–3), then stamped one version newer still, so the refusal holds whatever the
      // schemas of the two releases.
      const c = await Cluster.create();
      t.teardown(() => c.stopAll());
      const db = join(c.dir, 'arbiter', 'hq.db');
      const conn = new Database(db);
      const version = Number(
        (conn.prepare("SELECT value FROM meta WHERE key = 'schema_version'").get() as { value: string }).value,
      );
      conn.prepare("UPDATE meta SET value = ? WHERE key = 'schema_version'").run(String(version + 1));
      conn.close();
      const hash = (): string => createHash('sha256').update(readFileSync(db)).digest('hex');
      const before = hash();
      const r = await runNode(
        [join(OLD, 'apps/arbiter/dist/cli.js'), 'serve', '--config', c.arbiterConfig],
        {},
        120_000,
      );
      t.not(r.code, 0, `the old arbiter does not start (exit ${r.code})`);
      const lines = r.stderr
        .trim()
        .split('\n')
        .filter((l) => l.trim() !== '');
      t.equal(lines.length, 1, `one line on stderr (${r.stderr.trim()})`);
      t.match(
        lines[0] ?? '',
        new RegExp(`schema version ${version + 1}, newer than this hq-arbiter's [1-${version}]\\b`),
        'it names both schema versions',
      );
      t.equal(hash(), before, 'the database is untouched');
    },
  );
}
