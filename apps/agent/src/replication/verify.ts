/**
 * `hq standby verify`: is the standby copy of a tier a complete, untampered generation?
 *
 * For a tier `T` of the standby folder S (the same checks run before `promote` creates anything,
 * and on the receiver before `latest` moves):
 *  1. S and S/T are real directories (not links); S/T/latest is a link to a plain generation
 *     name (so it stays inside S/T), and that folder is a real directory;
 *  2. MANIFEST.json and SHA256SUMS are regular files; the manifest is well formed and names this
 *     folder's generation and this tier;
 *  3. every SHA256SUMS line is `<sha256>  <path>`, with a safe path, no duplicates, and the list
 *     equals the manifest's entries (path and digest);
 *  4. the folder holds exactly those files: no symlink anywhere on any path, nothing but
 *     directories and regular files, no file the manifest does not list;
 *  5. every file's size and sha256 match.
 */
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { wallClockMs } from '@hq/runtime/clock';
import { readLatest } from '@hq/runtime/generations';
import { GENERATION_RE, INDEX_FILES, parseSums, sumsDisagreement, type Manifest, type Tier } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import { sha256File } from './manifest.js';

export interface VerifiedFile {
  readonly path: string;
  readonly abs: string;
  readonly sha256: string;
  readonly bytes: number;
}

export type GenerationCheck =
  | {
      readonly ok: true;
      readonly manifest: Manifest;
      readonly files: readonly VerifiedFile[];
      readonly checked: number;
    }
  | { readonly ok: false; readonly reason: string; readonly manifest: Manifest | null; readonly checked: number };

async function regularFile(path: string): Promise<string | null> {
  try {
    const st = await lstat(path);
    if (st.isSymbolicLink()) return 'is a symlink';
    if (!st.isFile()) return 'is not a regular file';
    return null;
  } catch {
    return 'is missing';
  }
}

/** Every file under `dir` (relative), refusing links and odd files; null and the reason on one. */
async function listTree(dir: string, rel = '', out: string[] = []): Promise<string | null> {
  const names = (await readdir(join(dir, rel))).sort();
  for (const name of names) {
    const child = rel === '' ? name : `${rel}/${name}`;
    const st = await lstat(join(dir, child));
    if (st.isSymbolicLink()) return `symlink in generation: ${child}`;
    if (st.isDirectory()) {
      const problem = await listTree(dir, child, out);
      if (problem !== null) return problem;
    } else if (st.isFile()) out.push(child);
    else return `not a regular file in generation: ${child}`;
  }
  return null;
}

/** Checks a generation folder (steps 2–5). `expect` = the folder's generation name and tier. */
export async function checkGenerationDir(
  dir: string,
  expect: { readonly generation: string; readonly tier: Tier },
): Promise<GenerationCheck> {
  for (const f of INDEX_FILES) {
    const p = await regularFile(join(dir, f));
    if (p !== null) return { ok: false, reason: `${f} ${p}`, manifest: null, checked: 0 };
  }
  const manifest = parseManifest(await readFile(join(dir, 'MANIFEST.json'), 'utf8'));
  if (typeof manifest === 'string')
    return { ok: false, reason: `invalid manifest: ${manifest}`, manifest: null, checked: 0 };
  if (manifest.generation !== expect.generation) {
    return {
      ok: false,
      reason: `manifest names generation ${manifest.generation}, the folder is ${expect.generation}`,
      manifest,
      checked: 0,
    };
  }
  if (manifest.tier !== expect.tier)
    return {
      ok: false,
      reason: `manifest names tier ${manifest.tier}, the folder is ${expect.tier}`,
      manifest,
      checked: 0,
    };
  const sums = parseSums(await readFile(join(dir, 'SHA256SUMS'), 'utf8'));
  if (!sums.ok) return { ok: false, reason: sums.reason, manifest, checked: 0 };
  const disagreement = sumsDisagreement(manifest, sums.sums);
  if (disagreement !== null)
    return { ok: false, reason: `manifest/checksum list mismatch: ${disagreement}`, manifest, checked: 0 };
  const present: string[] = [];
  const treeProblem = await listTree(dir, '', present);
  if (treeProblem !== null) return { ok: false, reason: treeProblem, manifest, checked: 0 };
  const listed = new Set(manifest.entries.map((e) => e.path));
  for (const p of present) {
    if (!INDEX_FILES.includes(p) && !listed.has(p))
      return { ok: false, reason: `file not in the manifest: ${p}`, manifest, checked: 0 };
  }
  const have = new Set(present);
  const files: VerifiedFile[] = [];
  let checked = 0;
  for (const e of manifest.entries) {
    if (!have.has(e.path)) return { ok: false, reason: `missing file: ${e.path}`, manifest, checked };
    const abs = join(dir, e.path);
    const h = await sha256File(abs);
    if (h.sha256 !== e.sha256) return { ok: false, reason: `checksum mismatch: ${e.path}`, manifest, checked };
    if (h.bytes !== e.bytes) return { ok: false, reason: `size mismatch: ${e.path}`, manifest, checked };
    checked++;
    files.push({ path: e.path, abs, sha256: e.sha256, bytes: e.bytes });
  }
  return { ok: true, manifest, files, checked };
}

export interface TierVerification {
  readonly tier: Tier;
  readonly ok: boolean;
  readonly generation: string | null;
  readonly dir: string | null;
  readonly host: string | null;
  readonly holder: string | null;
  readonly leaseGeneration: number | null;
  readonly createdAt: string | null;
  readonly ageSeconds: number | null;
  readonly entries: number | null;
  readonly checked: number;
  readonly reason: string | null;
  readonly files: readonly VerifiedFile[];
}

async function realDir(path: string): Promise<string | null> {
  try {
    const st = await lstat(path);
    if (st.isSymbolicLink()) return 'is a symlink';
    if (!st.isDirectory()) return 'is not a directory';
    return null;
  } catch {
    return 'is missing';
  }
}

/** Steps 1–5 for the `latest` of one tier. */
export async function verifyTier(
  standbyDir: string,
  tier: Tier,
  nowMs: number = wallClockMs.now(),
): Promise<TierVerification> {
  const base = {
    tier,
    ok: false,
    generation: null,
    dir: null,
    host: null,
    holder: null,
    leaseGeneration: null,
    createdAt: null,
    ageSeconds: null,
    entries: null,
    checked: 0,
    files: [],
  };
  const standbyProblem = await realDir(standbyDir);
  if (standbyProblem !== null) return { ...base, reason: `standby folder ${standbyDir} ${standbyProblem}` };
  const tierRoot = join(standbyDir, tier);
  const tierProblem = await realDir(tierRoot);
  if (tierProblem !== null) return { ...base, reason: `${tier}: tier folder ${tierProblem}` };
  const name = await readLatest(join(tierRoot, 'latest'));
  if (name === null) return { ...base, reason: `${tier}: latest is missing or not a link` };
  if (!GENERATION_RE.test(name))
    return {
      ...base,
      reason: `${tier}: latest points outside the tier folder or to a bad name (${JSON.stringify(name)})`,
    };
  const dir = join(tierRoot, name);
  const dirProblem = await realDir(dir);
  if (dirProblem !== null) return { ...base, generation: name, reason: `${tier}: generation ${name} ${dirProblem}` };
  const r = await checkGenerationDir(dir, { generation: name, tier });
  const m = r.manifest;
  const info = {
    ...base,
    generation: name,
    dir,
    host: m?.host ?? null,
    holder: m?.holder ?? null,
    leaseGeneration: m?.leaseGeneration ?? null,
    createdAt: m?.createdAt ?? null,
    ageSeconds: m === null ? null : Math.max(0, Math.floor((nowMs - Date.parse(m.createdAt)) / 1000)),
    entries: m?.entries.length ?? null,
    checked: r.checked,
  };
  if (!r.ok) return { ...info, reason: `${tier}: ${r.reason}` };
  return { ...info, ok: true, reason: null, files: r.files };
}

/** The seeds' one-line verdict: `hq-standby verify core=GEN(12m · mbp · ok 9/9) OK`. */
export function formatVerification(results: readonly TierVerification[]): string {
  const parts = results.map(
    (t) =>
      `${t.tier}=${t.generation ?? 'missing'}(${t.ageSeconds === null ? '?' : Math.floor(t.ageSeconds / 60)}m · ${t.host ?? '?'} · ok ${t.checked}/${t.entries ?? '?'})`,
  );
  const bad = results.filter((t) => !t.ok).map((t) => t.reason ?? `${t.tier}: failed`);
  return `hq-standby verify ${parts.join(' ')} ${bad.length === 0 ? 'OK' : `FAIL ${bad.join(', ')}`}`;
}
