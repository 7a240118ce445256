/**
 * The start of a push: idle pushes are expired; the manifest is taken (whole, or rebuilt from
 * its differences to a generation kept here) and checked with its SHA256SUMS and the generation
 * guard; a staging folder is made, where every file this standby already holds is hard-linked
 * at once and the small files sent inline are written. The answer lists the files to send.
 */
import { createHash } from 'node:crypto';
import { link } from 'node:fs/promises';
import { join } from 'node:path';
import { mkdirPrivate } from '@hq/runtime/files';
import {
  formatSums,
  GENERATION_RE,
  isTier,
  parseSums,
  sumsDisagreement,
  type Manifest,
  type ManifestEntry,
} from '@hq/protocol';
import { checkManifest } from '@hq/protocol/schemas';
import { applyEntries } from './delta.js';
import { refuse, type Refusal } from './errors.js';
import { rand, removeTree, writeFileNew } from './fsx.js';
import { admits } from './receive-guard.js';
import { heldFiles, keptManifest } from './receive-kept.js';
import type { BeginBody, Blob, HeldFiles, Ok, Push, ReceiverState } from './receive-state.js';

/** Drops every push untouched for the idle time (and not committing), with what it staged. */
export async function expireIdle(st: ReceiverState, now: number): Promise<void> {
  const idle = st.opts.idleMs ?? 10 * 60_000;
  for (const p of [...st.pushes.values()]) {
    if (!p.committing && now - p.lastActive > idle) {
      st.pushes.delete(p.id);
      await removeTree(p.dir);
      st.log.warn(
        { category: 'hq.standby', event: 'push-expired', push: p.id, generation: p.manifest.generation },
        'push expired',
      );
    }
  }
}

/** The manifest a begin names: the one sent, or one sent as differences from a generation kept here, rebuilt. */
async function wholeManifest(st: ReceiverState, body: BeginBody): Promise<{ manifest: unknown } | Refusal> {
  if (body.base === undefined) return { manifest: body.manifest };
  const head = body.manifest;
  if (typeof head !== 'object' || head === null || Array.isArray(head) || Object.hasOwn(head, 'entries')) {
    return refuse('BAD_MANIFEST', 'a manifest sent as differences has no entries of its own');
  }
  const tier = (head as { tier?: unknown }).tier;
  const base = isTier(tier) && GENERATION_RE.test(body.base) ? await keptManifest(st, tier, body.base) : null;
  if (base === null) return refuse('UNKNOWN_BASE', `this standby keeps no generation ${String(tier)}/${body.base}`);
  const changed = body.changed ?? [];
  if (
    !changed.every((e) => typeof e === 'object' && e !== null && typeof (e as { path?: unknown }).path === 'string')
  ) {
    return refuse('BAD_MANIFEST', 'every changed entry needs a path');
  }
  return { manifest: { ...head, entries: applyEntries(base.entries, changed as ManifestEntry[], body.removed ?? []) } };
}

/** The checked manifest and the text of its SHA256SUMS (made from the manifest when not sent), which must agree. */
export async function checkedManifest(
  st: ReceiverState,
  body: BeginBody,
): Promise<Ok<{ manifest: Manifest; sums: string }> | Refusal> {
  const whole = await wholeManifest(st, body);
  if ('ok' in whole) return whole;
  const m = checkManifest(whole.manifest);
  if (typeof m === 'string') return refuse('BAD_MANIFEST', m);
  const sumsText = body.sums ?? formatSums(m.entries);
  if (typeof sumsText !== 'string') return refuse('BAD_MANIFEST', 'sums must be the text of SHA256SUMS');
  const sums = parseSums(sumsText);
  if (!sums.ok) return refuse('BAD_MANIFEST', sums.reason);
  const dis = sumsDisagreement(m, sums.sums);
  if (dis !== null) return refuse('BAD_MANIFEST', `manifest/checksum list mismatch: ${dis}`);
  return { ok: true, manifest: m, sums: sumsText };
}

/** One blob per distinct file of the manifest; those held here are hard-linked into `blobs/` now. */
async function linkHeld(m: Manifest, dir: string, idx: HeldFiles): Promise<{ blobs: Map<string, Blob>; have: number }> {
  const blobs = new Map<string, Blob>();
  let have = 0;
  for (const e of m.entries) {
    if (blobs.has(e.sha256)) continue;
    const blob: Blob = { sha256: e.sha256, bytes: e.bytes, received: 0, done: false, linked: false, busy: false };
    const found = idx.get(e.sha256);
    if (found !== undefined && found.bytes === e.bytes) {
      // Link it now: a prune by another commit cannot take it away from this push.
      try {
        await link(found.abs, join(dir, 'blobs', e.sha256));
        blob.done = true;
        blob.linked = true;
        have++;
      } catch {
        /* gone meanwhile: ask for it */
      }
    }
    blobs.set(e.sha256, blob);
  }
  return { blobs, have };
}

/** Small files sent inline: checked like any blob, kept like one received. */
async function takeInline(body: BeginBody, dir: string, blobs: Map<string, Blob>): Promise<Refusal | null> {
  for (const f of body.inline ?? []) {
    const blob = blobs.get(f.sha256);
    if (blob === undefined || blob.done) continue;
    const data = Buffer.from(f.data, 'base64');
    if (data.length !== blob.bytes || createHash('sha256').update(data).digest('hex') !== f.sha256) {
      return refuse('CHECKSUM', `the file sent inline as ${f.sha256} does not hash to it`);
    }
    await writeFileNew(join(dir, 'blobs', f.sha256), data);
    blob.received = blob.bytes;
    blob.done = true;
  }
  return null;
}

/** Checks a push and opens it: its staging folder with what is held here and what came inline. */
export async function openPush(
  st: ReceiverState,
  body: BeginBody,
  now: number,
): Promise<Ok<{ push: Push; have: number }> | Refusal> {
  const checked = await checkedManifest(st, body);
  if (!checked.ok) return checked;
  const m = checked.manifest;
  const refused = await admits(st, m, true);
  if (refused !== null) return refused;
  if (st.pushes.size >= (st.opts.maxPushes ?? 4)) return refuse('TOO_MANY_PUSHES');
  const id = rand() + rand();
  const dir = join(st.staging, id);
  await mkdirPrivate(join(dir, 'blobs'));
  const idx = await heldFiles(st);
  const { blobs, have } = await linkHeld(m, dir, idx);
  const bad = await takeInline(body, dir, blobs);
  if (bad !== null) {
    await removeTree(dir);
    return bad;
  }
  const push: Push = {
    id,
    manifest: m,
    sums: checked.sums,
    dir,
    blobs,
    held: idx,
    assemblies: new Map(),
    chunks: new Map(),
    heldChunks: null,
    damaged: new Set(),
    linked: new Set(),
    receiving: false,
    recipes: 0,
    lastActive: now,
    committing: false,
  };
  st.pushes.set(id, push);
  return { ok: true, push, have };
}
