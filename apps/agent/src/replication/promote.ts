/**
 * `hq standby promote --to DIR`: turns the verified standby copy into a new state directory.
 *
 *  1. Every check happens before DIR exists: each tier's `latest` verifies completely
 *     (verify.ts), DIR does not exist, its parent does, and DIR lies outside the standby folder
 *     and the folder of `--hq-config` (real paths); the hq config names `hq.hostName`; the
 *     promoted `config.json` (if any) is a JSON object and every `pollersOff` key path in it is an
 *     object, a boolean or absent (with objects, or nothing, on the way).
 *  2. DIR is created 0700 and filled: files copied (hashed while they stream and compared with
 *     the manifest), with their modes and times; when a path is in several tiers, the newest
 *     generation wins.
 *  3. `config.json`: the configured pollers are turned off (`replication.pollersOff`, key paths:
 *     an object gets `enabled: false`, a boolean becomes false, an absent key `{enabled: false}`;
 *     none by default, and the summary says `pollers-off=none`) and the host's `hq` block is
 *     injected. When that changes anything, the copy is kept as `config.json.pre-promote`;
 *     otherwise `config.json` stays byte for byte as received.
 *  4. Any failure after DIR was created removes DIR.
 */
import type { Stats } from 'node:fs';
import { lstat, mkdir, readFile, realpath, rm, stat, utimes, chmod } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { wallClockMs } from '@hq/runtime/clock';
import { fsyncDir } from '@hq/runtime/files';
import { copyHashed, writeFileNew } from './fsx.js';
import type { Tier } from '@hq/protocol';
import { verifyTier, type TierVerification } from './verify.js';

export class PromoteError extends Error {
  override readonly name = 'PromoteError';
}

export interface PromoteOptions {
  readonly standbyDir: string;
  readonly to: string;
  readonly tiers: readonly Tier[];
  /** A JSON file with the host's `hq` block (a folder: its `config.json`). */
  readonly hqConfig?: string;
  /** Key paths in the promoted `config.json` to turn off (`replication.pollersOff`). Default: none. */
  readonly pollersOff?: readonly string[];
  readonly dryRun?: boolean;
  readonly now?: () => number;
  /** Called after every check passed, before DIR is created (tests use it to race a change). */
  readonly onVerified?: () => Promise<void>;
}

export interface PromoteSummary {
  readonly to: string;
  readonly tiers: { readonly [t: string]: string };
  readonly files: number;
  readonly bytes: number;
  /** The key paths turned off in the promoted `config.json` (empty: none configured, or no config.json). */
  readonly pollersOff: readonly string[];
  readonly hq: string;
  readonly seconds: number;
  readonly dryRun: boolean;
}

function inside(base: string, path: string): boolean {
  const rel = relative(base, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

function objectOf(text: string, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new PromoteError(`${what} is not valid JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new PromoteError(`${what} is not a JSON object`);
  return v as Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Turns the poller at key path `path` (`a.b.c`) of `config` off, in place. */
function pollerOff(config: Record<string, unknown>, path: string): void {
  const parts = path.split('.');
  if (parts.some((x) => x === '' || x === '__proto__' || x === 'prototype' || x === 'constructor'))
    throw new PromoteError(`pollersOff ${JSON.stringify(path)} is not a key path`);
  let node = config;
  for (const [i, part] of parts.slice(0, -1).entries()) {
    const next = Object.hasOwn(node, part) ? node[part] : undefined;
    if (next === undefined) node[part] = {};
    else if (!isObject(next))
      throw new PromoteError(`config.json ${parts.slice(0, i + 1).join('.')} is not an object (pollersOff ${path})`);
    node = node[part] as Record<string, unknown>;
  }
  const leaf = parts[parts.length - 1] as string;
  const value = Object.hasOwn(node, leaf) ? node[leaf] : undefined;
  if (value === undefined) node[leaf] = { enabled: false };
  else if (typeof value === 'boolean') node[leaf] = false;
  else if (isObject(value)) node[leaf] = { ...value, enabled: false };
  else throw new PromoteError(`config.json ${path} is not an object or a boolean`);
}

async function hqBlock(file: string): Promise<{ block: Record<string, unknown>; host: string; folder: string }> {
  let path = resolve(file);
  let st: Stats;
  try {
    st = await stat(path);
  } catch {
    throw new PromoteError(`--hq-config ${file} does not exist`);
  }
  if (st.isDirectory()) path = join(path, 'config.json');
  const text = await readFile(path, 'utf8').catch(() => {
    throw new PromoteError(`--hq-config ${path} cannot be read`);
  });
  const o = objectOf(text, `--hq-config ${path}`);
  const block = o['hq'];
  if (typeof block !== 'object' || block === null || Array.isArray(block))
    throw new PromoteError(`--hq-config ${path} has no hq block`);
  const host = (block as Record<string, unknown>)['hostName'];
  if (typeof host !== 'string' || host === '') throw new PromoteError(`--hq-config ${path} has no hq.hostName`);
  return { block: block as Record<string, unknown>, host, folder: await realpath(dirname(path)) };
}

type HqBlock = Awaited<ReturnType<typeof hqBlock>>;
/** A file to promote: the newest kept copy of its path. */
type Chosen = { abs: string; sha256: string; bytes: number; generation: string };

export async function promote(opts: PromoteOptions): Promise<PromoteSummary> {
  const started = (opts.now ?? wallClockMs.now)();
  if (opts.tiers.length === 0) throw new PromoteError('no tiers to promote');
  // 1. Everything is checked before DIR exists.
  const { to, parent, target, hq } = await checkTarget(opts);
  const verified: TierVerification[] = [];
  for (const t of opts.tiers) {
    const v = await verifyTier(opts.standbyDir, t, (opts.now ?? wallClockMs.now)());
    if (!v.ok) throw new PromoteError(`verification failed: ${v.reason ?? t}`);
    verified.push(v);
  }
  try {
    await lstat(target);
    throw new PromoteError(`--to ${to} already exists`);
  } catch (err) {
    if (err instanceof PromoteError) throw err;
  }
  const chosen = newestCopies(verified);
  const pollersOff = opts.pollersOff ?? [];
  const config = await promotedConfig(chosen, pollersOff, hq);
  const summary: PromoteSummary = {
    to: target,
    tiers: Object.fromEntries(verified.map((v) => [v.tier, v.generation as string])),
    files: chosen.size,
    bytes: [...chosen.values()].reduce((n, f) => n + f.bytes, 0),
    pollersOff: config === null ? [] : [...pollersOff],
    hq: hq?.host ?? '-',
    seconds: 0,
    dryRun: opts.dryRun === true,
  };
  if (opts.dryRun === true) return summary;
  await opts.onVerified?.();
  // 2. Create and fill.
  await mkdir(target, { mode: 0o700 });
  try {
    await chmod(target, 0o700);
    const made = await copyFiles(target, chosen);
    // 3. config.json, when promotion changes it: keep the copy, write the promoted one.
    if (config !== null) await rewriteConfig(target, config);
    for (const d of [...made].sort((a, b) => b.length - a.length)) await fsyncDir(d);
    await fsyncDir(parent);
    return { ...summary, seconds: Math.round(((opts.now ?? wallClockMs.now)() - started) / 100) / 10 };
  } catch (err) {
    // 4. Roll back.
    await rm(target, { recursive: true, force: true });
    throw err;
  }
}

/** `--to` resolved (its parent must exist) and the hq config read; the target lies outside both the standby and the hq-config folders. */
async function checkTarget(
  opts: PromoteOptions,
): Promise<{ to: string; parent: string; target: string; hq: HqBlock | null }> {
  const to = resolve(opts.to);
  let parent: string;
  try {
    parent = await realpath(dirname(to));
  } catch {
    throw new PromoteError(`the parent of --to ${to} does not exist`);
  }
  const target = join(parent, basename(to));
  let standbyReal: string;
  try {
    standbyReal = await realpath(opts.standbyDir);
  } catch {
    throw new PromoteError(`the standby folder ${opts.standbyDir} does not exist`);
  }
  if (inside(standbyReal, target))
    throw new PromoteError(`--to ${to} must lie outside the standby folder ${standbyReal}`);
  const hq = opts.hqConfig === undefined ? null : await hqBlock(opts.hqConfig);
  if (hq !== null && inside(hq.folder, target))
    throw new PromoteError(`--to ${to} must lie outside the hq-config folder ${hq.folder}`);
  return { to, parent, target, hq };
}

/** Newest generation wins a path present in several tiers. */
function newestCopies(verified: readonly TierVerification[]): Map<string, Chosen> {
  const chosen = new Map<string, Chosen>();
  for (const v of [...verified].sort((a, b) => Date.parse(a.createdAt ?? '') - Date.parse(b.createdAt ?? ''))) {
    for (const f of v.files)
      chosen.set(f.path, { abs: f.abs, sha256: f.sha256, bytes: f.bytes, generation: v.generation as string });
  }
  return chosen;
}

/** The promoted config.json when promotion changes it (pollers off, the hq block), else null. */
async function promotedConfig(
  chosen: ReadonlyMap<string, Chosen>,
  pollersOff: readonly string[],
  hq: HqBlock | null,
): Promise<Record<string, unknown> | null> {
  const cfgSource = chosen.get('config.json');
  if (cfgSource === undefined || (pollersOff.length === 0 && hq === null)) return null;
  const config = objectOf(await readFile(cfgSource.abs, 'utf8'), 'the promoted config.json');
  for (const p of pollersOff) pollerOff(config, p);
  if (hq !== null) config['hq'] = hq.block;
  return config;
}

/** Copies each chosen file into the target (hashed as copied, mode and times kept); answers the folders made. */
async function copyFiles(target: string, chosen: ReadonlyMap<string, Chosen>): Promise<Set<string>> {
  const made = new Set<string>([target]);
  for (const p of [...chosen.keys()].sort()) {
    const f = chosen.get(p) as Chosen;
    const dest = join(target, p);
    if (!inside(target, dest)) throw new PromoteError(`path escapes --to: ${p}`);
    let cur = target;
    for (const part of p.split('/').slice(0, -1)) {
      cur = join(cur, part);
      if (!made.has(cur)) {
        await mkdir(cur, { mode: 0o700 });
        made.add(cur);
      }
    }
    const st = await lstat(f.abs);
    if (!st.isFile()) throw new PromoteError(`${p} changed under the standby folder`);
    const h = await copyHashed(f.abs, dest, st.mode & 0o777);
    if (h.sha256 !== f.sha256 || h.bytes !== f.bytes) throw new PromoteError(`checksum mismatch while copying ${p}`);
    await chmod(dest, st.mode & 0o7777);
    await utimes(dest, st.atime, st.mtime);
  }
  return made;
}

/** Keeps the copied config.json as config.json.pre-promote and writes the promoted one. */
async function rewriteConfig(target: string, config: Record<string, unknown>): Promise<void> {
  const cfgPath = join(target, 'config.json');
  const pre = join(target, 'config.json.pre-promote');
  const st = await lstat(cfgPath);
  await copyHashed(cfgPath, pre, st.mode & 0o777);
  await utimes(pre, st.atime, st.mtime);
  await rm(cfgPath);
  await writeFileNew(cfgPath, `${JSON.stringify(config, null, 2)}\n`, st.mode & 0o777);
}

/** The seeds' one-line summary. */
export function formatPromote(s: PromoteSummary): string {
  const tiers = Object.entries(s.tiers)
    .map(([t, g]) => `${t}=${g}`)
    .join(' ');
  const off = s.pollersOff.length === 0 ? 'none' : s.pollersOff.join(',');
  return s.dryRun
    ? `promotion plan ${s.to} ${tiers} files=${s.files} pollers-off=${off}`
    : `promoted ${s.to} ${tiers} files=${s.files} pollers-off=${off} hq=${s.hq} ${s.seconds}s`;
}
