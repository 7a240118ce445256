/**
 * A push's commit: its files completed; the guard and the tier's order checked again (another
 * push may have been accepted meanwhile); the generation built in staging from hard links to its
 * blobs with its MANIFEST.json and SHA256SUMS, verified completely as promote will verify it; the
 * chunk lists of its assembled files kept; the accepted mark raised; the folder renamed into its
 * tier and `latest` moved; then retention: the tier pruned to `keep` generations and the chunk
 * lists no kept generation names dropped.
 */
import { link } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { publishGeneration, pruneGenerations } from '@hq/runtime/generations';
import { formatManifest } from '@hq/protocol';
import { refuse, type Refusal } from './errors.js';
import { removeTree, writeFileNew } from './fsx.js';
import { assemble, heal } from './receive-assemble.js';
import { acceptedGeneration, admits } from './receive-guard.js';
import { collectRecipes } from './receive-kept.js';
import type { Committed, Ok, Push, ReceiverState } from './receive-state.js';
import { checkGenerationDir } from './verify.js';

export async function commitPush(st: ReceiverState, pushId: string): Promise<Ok<Committed> | Refusal> {
  const push = st.pushes.get(pushId);
  if (push === undefined || push.committing) return refuse('NO_PUSH');
  if (push.receiving) return refuse('BLOB_BUSY', 'a batch of chunks of this push is still being received');
  if (push.recipes > 0) return refuse('BLOB_BUSY', 'a chunk list of this push is still being received');
  push.committing = true;
  const m = push.manifest;
  try {
    // 0. Each file sent as chunks is assembled; what still lacks something is asked for.
    const missing = await assemble(st, push);
    if (missing.length > 0) {
      push.committing = false;
      return refuse('INCOMPLETE', `${missing.length} blobs are missing`, { missing });
    }
    // 1. The guard and the order again: another push may have been accepted meanwhile.
    const highest = await acceptedGeneration(st);
    const refused = await admits(st, m, false);
    if (refused !== null) return await dropPush(st, push, refused);
    // 2. Assemble in staging; 3. verify everything, as promote will.
    const { gen, made } = await buildGeneration(push);
    const check = await checkGenerationDir(gen, { generation: m.generation, tier: m.tier });
    if (!check.ok) {
      const healed = await heal(push);
      if (healed.length > 0) {
        await removeTree(gen);
        push.committing = false;
        return refuse('INCOMPLETE', `${healed.length} blobs held here were damaged; send them`, { missing: healed });
      }
      return await dropPush(st, push, refuse('CHECKSUM', check.reason));
    }
    for (const d of [...made].sort((a, b) => b.length - a.length)) await fsyncDir(d);
    // 4. Raise the mark, publish the folder, move latest, prune.
    await publish(st, push, gen, highest);
    st.pushes.delete(push.id);
    await removeTree(push.dir);
    const linked = [...push.blobs.values()].filter((b) => b.linked).length;
    st.log.info(
      {
        category: 'hq.standby',
        event: 'generation-accepted',
        tier: m.tier,
        generation: m.generation,
        leaseGeneration: m.leaseGeneration,
        holder: m.holder,
      },
      'generation accepted',
    );
    return {
      ok: true,
      tier: m.tier,
      generation: m.generation,
      latest: m.generation,
      received: push.blobs.size - linked,
      linked,
    };
  } catch (err) {
    await dropPush(st, push, null);
    throw err;
  }
}

/** `gen/` in the push's staging folder: each path a hard link to its blob, with MANIFEST.json and SHA256SUMS; and the folders made. */
async function buildGeneration(push: Push): Promise<{ gen: string; made: Set<string> }> {
  const m = push.manifest;
  const gen = join(push.dir, 'gen');
  await mkdirPrivate(gen);
  const made = new Set<string>([gen]);
  for (const e of m.entries) {
    const parts = e.path.split('/');
    let cur = gen;
    for (const part of parts.slice(0, -1)) {
      cur = join(cur, part);
      if (!made.has(cur)) {
        await mkdirPrivate(cur);
        made.add(cur);
      }
    }
    await link(join(push.dir, 'blobs', e.sha256), join(gen, e.path));
  }
  await writeFileNew(join(gen, 'MANIFEST.json'), formatManifest(m));
  await writeFileNew(join(gen, 'SHA256SUMS'), push.sums);
  return { gen, made };
}

/** Keeps the chunk lists, raises the mark, publishes the verified `gen` and moves `latest`; prunes the tier and the lists. */
async function publish(st: ReceiverState, push: Push, gen: string, highest: number | null): Promise<void> {
  const m = push.manifest;
  // The chunk lists of the files assembled here, before the generation that names them is
  // published (an orphan is collected; a published file without a list only offers no chunks).
  for (const [sha, a] of push.assemblies) await st.recipes.put(sha, a.chunks);
  if (highest !== null && m.leaseGeneration > highest) await writeAtomic(st.markFile, `${m.leaseGeneration}\n`);
  const tierRoot = join(st.opts.standbyDir, m.tier);
  await mkdirPrivate(tierRoot);
  await publishGeneration(tierRoot, m.generation, gen);
  await pruneGenerations(tierRoot, st.opts.keep[m.tier], m.generation);
  await collectRecipes(st);
}

/** Forgets a push and removes everything it staged; answers `answer`. */
export async function dropPush<T>(st: ReceiverState, push: Push, answer: T): Promise<T> {
  st.pushes.delete(push.id);
  await removeTree(push.dir);
  return answer;
}
