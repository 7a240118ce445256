/**
 * A tier's generations: publishing renames the whole folder into place before `latest` moves,
 * pruning keeps the newest N and never the one `latest` names, listings ignore what is not a
 * generation.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  latestGeneration,
  listGenerations,
  publishGeneration,
  pruneGenerations,
  readLatest,
  tierListing,
} from '../../packages/runtime/src/generations.js';

const G = (n: number) => `20260101T00000${n}Z`;

function scratch(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hq-gens-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function publish(tierRoot: string, n: number, before?: () => Promise<void>): Promise<void> {
  const built = join(tierRoot, `.building-${n}`);
  mkdirSync(built);
  writeFileSync(join(built, 'f'), String(n));
  await publishGeneration(tierRoot, G(n), built, before);
}

t.test('publish moves latest after the folder is in place; prune keeps N and latest', async (t) => {
  const tierRoot = scratch(t);
  t.same(await tierListing(tierRoot), { latest: null, generations: [] });
  let seen: string[] = [];
  await publish(tierRoot, 1);
  await publish(tierRoot, 2, async () => {
    seen = readdirSync(tierRoot);
    t.equal(await latestGeneration(tierRoot), G(1), 'latest still names the previous generation');
  });
  t.ok(seen.includes(G(2)), 'the new folder is in place before latest moves');
  t.equal(readlinkSync(join(tierRoot, 'latest')), G(2));
  t.notOk(
    readdirSync(tierRoot).some((n) => n.startsWith('.')),
    'no staging or temp link left',
  );
  await publish(tierRoot, 3);
  t.same(await pruneGenerations(tierRoot, 2, G(3)), { removed: [G(1)], kept: [G(2), G(3)] });
  t.same(await listGenerations(tierRoot), [G(2), G(3)]);
  // latest pointing at an older generation (a newer one kept beside it) is never pruned.
  await publish(tierRoot, 4);
  t.same(await pruneGenerations(tierRoot, 1, G(2)), { removed: [G(3)], kept: [G(2), G(4)] });
  t.same(await tierListing(tierRoot), { latest: G(4), generations: [G(2), G(4)] });
});

t.test('latest that is not a link, or names no generation, reads as none', async (t) => {
  const tierRoot = scratch(t);
  writeFileSync(join(tierRoot, 'latest'), G(1));
  t.equal(await readLatest(join(tierRoot, 'latest')), null);
  rmSync(join(tierRoot, 'latest'));
  symlinkSync('../elsewhere', join(tierRoot, 'latest'));
  t.equal(await readLatest(join(tierRoot, 'latest')), '../elsewhere');
  t.equal(await latestGeneration(tierRoot), null);
  t.same(await listGenerations(join(tierRoot, 'missing')), []);
});
