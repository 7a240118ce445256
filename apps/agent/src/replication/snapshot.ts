/**
 * `hq standby snapshot`: builds one numbered generation of a tier in the outbox.
 *
 * Guarantees:
 *  1. one clock reading names the generation and fills `createdAt`;
 *  2. a SQLite file is read only through better-sqlite3's online backup API, in one step (one
 *     read transaction: the copy is a consistent state of the database, whatever writers do
 *     meanwhile); it is never copied as a live file;
 *  3. other files are copied byte for byte, except `config.json` at the top, whose host-local
 *     keys (`hq`) are removed (text that does not parse as a JSON object is copied as is);
 *  4. a file unchanged since the previous generation is hard-linked from it (`reused: true`):
 *     "unchanged" = same device, inode, size, mtime and ctime (ns) for the file and its `-wal`
 *     and `-journal` (an empty one counts as none), and last changed at least 2 s before the previous fingerprint was taken
 *     (file times are coarse; a write in the same tick could otherwise hide);
 *  5. the generation is built in a hidden folder and renamed into place complete, with
 *     `MANIFEST.json` and `SHA256SUMS`; files 0600, folders 0700, everything fsync'd;
 *  6. every file copied is chunked in the same pass (chunks.ts) and its chunk list kept in
 *     `<tier>/.chunks/<sha256>` for the push; lists no kept generation names are removed with
 *     the generations (a missing list only costs the push a re-read).
 */
import { chmod, lstat, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { ReplicationConfig } from './config.js';
import { wallClockMs } from '@hq/runtime/clock';
import { fsyncDir, mkdirPrivate, writeAtomic } from '@hq/runtime/files';
import { copyHashed, fsyncFile, rand, removeTree, writeFileNew } from './fsx.js';
import { latestGeneration, publishGeneration, pruneGenerations } from '@hq/runtime/generations';
import { formatManifest, formatSums, generationId, type Manifest, type ManifestEntry, type Tier } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import { Chunker, chunkFile, type FileChunks } from './chunks.js';
import { RecipeStore } from './recipes.js';
import { planTier, type Plan, type Planned } from './plan.js';
import { fingerprintAll, previous, STABLE_MS, tryReuse, type Fingerprints, type Fp } from './snapshot-reuse.js';

export class SnapshotError extends Error {
  override readonly name = 'SnapshotError';
}

export interface SnapshotOptions {
  readonly cfg: ReplicationConfig;
  readonly tier: Tier;
  readonly host: string;
  /** The lease generation and holder this snapshot runs under (0 / null before the first lease). */
  readonly lease: { readonly generation: number; readonly holder: string | null };
  /** ms since the epoch; read once. */
  readonly now?: () => number;
  /** How long before the previous fingerprint a file must have last changed to be reused (default 2000 ms). */
  readonly stableMs?: number;
}

export interface SnapshotResult {
  readonly manifest: Manifest;
  readonly dir: string;
  readonly bytes: number;
  readonly reused: number;
  readonly skipped: Plan['skipped'];
  readonly survival: readonly string[];
  /** The host-local keys removed from `config.json` in this generation (empty when none were there). */
  readonly hostLocalStripped: readonly string[];
}

/** Which of `keys` a `config.json` text holds at its top level. */
function hostLocalKeysIn(text: string, keys: readonly string[]): string[] {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? keys.filter((k) => Object.hasOwn(v, k)) : [];
  } catch {
    return [];
  }
}

/** `config.json` without the host-local keys; unparsable text (or not an object) unchanged. */
export function stripHostLocal(text: string, keys: readonly string[]): string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return text;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return text;
  const o = { ...(v as Record<string, unknown>) };
  let removed = false;
  for (const k of keys) {
    if (Object.hasOwn(o, k)) {
      delete o[k];
      removed = true;
    }
  }
  return removed ? `${JSON.stringify(o, null, 2)}\n` : text;
}

/** Online backup in one step (one read transaction), to a new file; fsync'd, 0600. */
export async function backupSqlite(src: string, dest: string): Promise<void> {
  const db = new Database(src, { readonly: true, fileMustExist: true, timeout: 10_000 });
  try {
    // The first step only opens the backup; the second copies every page at once, so a
    // concurrent writer can never make it restart or mix two states.
    await db.backup(dest, { progress: () => 0x7fffffff });
  } finally {
    db.close();
  }
  await fsyncFile(dest);
  await chmod(dest, 0o600);
}

/** The survival subset of a generation: items the plan allows, minus secrets — checked twice. */
export function survivalSubset(manifest: Manifest, plan: Plan, isSecret: (p: string) => boolean): ManifestEntry[] {
  const allowed = new Map(plan.items.map((i) => [i.path, i] as const));
  return manifest.entries.filter((e) => {
    const item = allowed.get(e.path);
    return item?.survival && !item.secret && !isSecret(e.path);
  });
}

/** Builds the generation. Throws SnapshotError (or an I/O error) and leaves nothing half-built. */
export async function buildSnapshot(opts: SnapshotOptions): Promise<SnapshotResult> {
  const { cfg, tier } = opts;
  // 1. One clock reading for the id and createdAt.
  const t = (opts.now ?? wallClockMs.now)();
  const generation = generationId(t);
  const createdAt = new Date(t).toISOString();
  const tierRoot = join(cfg.outboxDir, tier);
  const final = await claimGeneration(tierRoot, tier, generation);
  const plan = await planTier(cfg, tier);
  const building = join(tierRoot, `.building-${generation}-${rand()}`);
  await mkdirPrivate(building);
  // Compared with the files' mtimes, so always the real wall clock, never `opts.now` (which names the generation).
  const takenAtMs = wallClockMs.now();
  const recipes = outboxRecipes(cfg, tier);
  try {
    // 2. Every planned file into the building folder: reused from the previous generation, or copied.
    const { entries, fps, dirs, stripped } = await fillGeneration(opts, plan, tierRoot, building, recipes);
    const manifest: Manifest = {
      generation,
      tier,
      createdAt,
      source: cfg.stateDir,
      host: opts.host,
      leaseGeneration: opts.lease.generation,
      holder: opts.lease.holder,
      entries,
    };
    // 3. The manifest and the sums, everything synced, then published and the old ones pruned.
    await writeFileNew(join(building, 'MANIFEST.json'), formatManifest(manifest));
    await writeFileNew(join(building, 'SHA256SUMS'), formatSums(entries));
    for (const d of [...dirs].sort((a, b) => b.length - a.length)) await fsyncDir(d);
    await publishGeneration(tierRoot, generation, building, () =>
      writeAtomic(
        join(tierRoot, `${generation}.sources.json`),
        JSON.stringify({ takenAtMs, files: fps } satisfies Fingerprints),
      ),
    );
    await pruneOutbox(tierRoot, cfg.keepLocal, generation, recipes);
    const isSecret = (p: string) => cfg.secretPatterns.some((r) => r.test(p.toLowerCase()));
    return {
      manifest,
      dir: final,
      bytes: entries.reduce((n, e) => n + e.bytes, 0),
      reused: entries.filter((e) => e.reused).length,
      skipped: plan.skipped,
      survival: survivalSubset(manifest, plan, isSecret).map((e) => e.path),
      hostLocalStripped: stripped,
    };
  } catch (err) {
    await removeTree(building);
    throw err;
  }
}

/** The tier's folder made, and the generation's path in it, refused when it exists already. */
async function claimGeneration(tierRoot: string, tier: string, generation: string): Promise<string> {
  await mkdirPrivate(tierRoot);
  const final = join(tierRoot, generation);
  try {
    await lstat(final);
    throw new SnapshotError(`generation ${tier}/${generation} already exists (two snapshots within one second?)`);
  } catch (err) {
    if (err instanceof SnapshotError) throw err;
  }
  return final;
}

/**
 * Each planned file into `building`: a file unchanged since the previous generation is reused
 * from it, the others copied (SQLite through the backup API). A file gone since planning is left out.
 */
async function fillGeneration(
  opts: SnapshotOptions,
  plan: Awaited<ReturnType<typeof planTier>>,
  tierRoot: string,
  building: string,
  recipes: RecipeStore,
): Promise<{ entries: ManifestEntry[]; fps: [string, Fp][]; dirs: Set<string>; stripped: string[] }> {
  const prev = await previous(tierRoot);
  const prevEntries = new Map((prev?.manifest.entries ?? []).map((e) => [e.path, e] as const));
  const prevFps = new Map(prev?.fingerprints?.files ?? []);
  const fps: [string, Fp][] = [];
  const entries: ManifestEntry[] = [];
  const dirs = new Set<string>([building]);
  const stripped: string[] = [];
  for (const item of plan.items) {
    const dest = join(building, item.path);
    const parent = dirname(dest);
    if (!dirs.has(parent)) {
      await mkdirPrivate(parent);
      dirs.add(parent);
    }
    const fp = await fingerprintAll(item.abs);
    if (fp === null) continue; // vanished since planning
    const reused = await tryReuse(item, fp, dest, prev, prevEntries, prevFps, opts.stableMs ?? STABLE_MS);
    entries.push(reused ?? (await copyItem(opts.cfg, item, dest, stripped, recipes)));
    fps.push([item.path, fp]);
  }
  return { entries, fps, dirs, stripped };
}

async function copyItem(
  cfg: ReplicationConfig,
  item: Planned,
  dest: string,
  stripped: string[],
  recipes: RecipeStore,
): Promise<ManifestEntry> {
  if (item.kind === 'sqlite') {
    try {
      await backupSqlite(item.abs, dest);
    } catch (err) {
      throw new SnapshotError(`sqlite backup of ${item.path} failed: ${(err as Error).message}`);
    }
    const h = await chunkFile(dest, 'sqlite');
    await recipes.put(h.sha256, h.chunks);
    return { path: item.path, bytes: h.bytes, sha256: h.sha256, kind: 'sqlite', reused: false };
  }
  let text: string | null = null;
  if (item.path === 'config.json') {
    const original = await readFile(item.abs, 'utf8');
    const t = stripHostLocal(original, cfg.hostLocalKeys);
    if (t !== original) {
      stripped.push(...hostLocalKeysIn(original, cfg.hostLocalKeys));
      text = t;
    }
  }
  let h: FileChunks;
  if (text !== null) {
    await writeFileNew(dest, text);
    h = await chunkFile(dest, 'file');
  } else {
    const chunker = new Chunker('file');
    await copyHashed(item.abs, dest, undefined, (b) => chunker.update(b));
    h = chunker.finish();
  }
  await recipes.put(h.sha256, h.chunks);
  return { path: item.path, bytes: h.bytes, sha256: h.sha256, kind: 'file', reused: false };
}

/** The chunk lists of a tier's outbox. */
export function outboxRecipes(cfg: Pick<ReplicationConfig, 'outboxDir'>, tier: Tier): RecipeStore {
  return new RecipeStore(join(cfg.outboxDir, tier, '.chunks'));
}

/** Keeps the newest `keep` local generations (never `latest`) and the chunk lists they name. */
async function pruneOutbox(tierRoot: string, keep: number, latest: string, recipes: RecipeStore): Promise<void> {
  const { removed, kept } = await pruneGenerations(tierRoot, keep, latest);
  for (const n of removed) await removeTree(join(tierRoot, `${n}.sources.json`));
  const referenced = new Set<string>();
  for (const n of kept) {
    const m = parseManifest(await readFile(join(tierRoot, n, 'MANIFEST.json'), 'utf8').catch(() => ''));
    // A generation that cannot be read keeps every list (a list is only a cache).
    if (typeof m === 'string') return;
    for (const e of m.entries) referenced.add(e.sha256);
  }
  await recipes.keepOnly(referenced);
}

/** The newest local generation folder of a tier, or null. */
export async function latestOutbox(cfg: ReplicationConfig, tier: Tier): Promise<string | null> {
  const root = join(cfg.outboxDir, tier);
  const name = await latestGeneration(root);
  return name !== null ? join(root, name) : null;
}
