/**
 * The holder's side of a push: the manifest first; for each file the standby lacks (by sha256)
 * its chunk list, and then only the chunks the standby asks for, read from disk and sent in
 * batches of about `chunkBytes`; then the commit. A standby that does not take chunks (no
 * `chunked` in its answer) gets each missing file whole, in `chunkBytes` pieces. Every request
 * carries the peer token and has a deadline; an answer after it is never acted on. A failed
 * push is aborted (best effort) so the standby drops its staging at once instead of at expiry.
 */
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { GENERATION_RE, INLINE_MAX_BYTES, INLINE_TOTAL_BYTES, REPLICATION_ERRORS, type Manifest } from '@hq/protocol';
import { parseManifest } from '@hq/protocol/schemas';
import { diffEntries } from './delta.js';
import { call, refusal, type Answer, type PushOptions, type PushResult } from './push-call.js';
import { newSession, sendMissing, type PushSession } from './push-send.js';

export type { PushOptions, PushResult } from './push-call.js';

/** The manifest of the newest local generation of the tier before this one, or null. */
async function previousManifest(dir: string, m: Manifest): Promise<Manifest | null> {
  const names = (await readdir(dirname(dir)).catch(() => [] as string[]))
    .filter((n) => GENERATION_RE.test(n) && n < m.generation)
    .sort();
  const name = names.at(-1);
  if (name === undefined) return null;
  const prev = parseManifest(await readFile(join(dirname(dir), name, 'MANIFEST.json'), 'utf8').catch(() => ''));
  return typeof prev === 'string' || prev.tier !== m.tier ? null : prev;
}

/**
 * The small files that changed since the base (none without one: a first push has nothing to
 * save round trips on), up to `INLINE_TOTAL_BYTES`, as the begin body's `inline`.
 */
async function inlineFiles(
  dir: string,
  m: Manifest,
  base: Manifest | null,
): Promise<{ body: { inline?: { sha256: string; data: string }[] }; count: number }> {
  if (base === null) return { body: {}, count: 0 };
  const was = new Map(base.entries.map((e) => [e.path, e.sha256] as const));
  const seen = new Set<string>();
  const inline: { sha256: string; data: string }[] = [];
  let total = 0;
  for (const e of m.entries) {
    if (
      e.bytes > INLINE_MAX_BYTES ||
      was.get(e.path) === e.sha256 ||
      seen.has(e.sha256) ||
      total + e.bytes > INLINE_TOTAL_BYTES
    )
      continue;
    inline.push({ sha256: e.sha256, data: (await readFile(join(dir, e.path))).toString('base64') });
    seen.add(e.sha256);
    total += e.bytes;
  }
  return inline.length === 0 ? { body: {}, count: 0 } : { body: { inline }, count: inline.length };
}

/** Pushes one generation folder. Never throws for a refusal or a network failure. */
export async function pushGeneration(opts: PushOptions): Promise<PushResult> {
  const read = await readGeneration(opts.dir);
  if (!('manifest' in read)) return read;
  const s = newSession(opts, read.manifest);
  try {
    const base = await previousManifest(opts.dir, read.manifest);
    const { begun, inlined } = await beginPush(s, base, read.sums);
    if (
      begun === null ||
      begun.status !== 200 ||
      typeof begun.body?.['push'] !== 'string' ||
      !Array.isArray(begun.body['missing'])
    )
      return refusal(begun as Answer, s.sentBytes);
    s.sentBlobs = inlined;
    const haveBlobs = typeof begun.body['have'] === 'number' ? (begun.body['have'] as number) : 0;
    if (typeof begun.body['committed'] === 'object' && begun.body['committed'] !== null) {
      // Nothing was missing: the standby committed at once.
      return {
        ok: true,
        tier: s.manifest.tier,
        generation: s.manifest.generation,
        sentBytes: s.sentBytes,
        sentBlobs: inlined,
        haveBlobs,
        sentChunks: 0,
      };
    }
    s.push = begun.body['push'] as string;
    s.chunked = begun.body['chunked'] === true;
    s.baseFiles = new Map((base?.entries ?? []).map((e) => [e.path, e] as const));
    const failed = await sendMissing(
      s,
      new Set((begun.body['missing'] as unknown[]).filter((x): x is string => typeof x === 'string')),
    );
    if (failed !== null) return failed;
    const done = await commitPush(s);
    if ('failed' in done) return done.failed;
    if (done.committed.status !== 200) return refusal(done.committed, s.sentBytes);
    s.push = null;
    return {
      ok: true,
      tier: s.manifest.tier,
      generation: s.manifest.generation,
      sentBytes: s.sentBytes,
      sentBlobs: s.sentBlobs,
      haveBlobs,
      sentChunks: s.sentChunks,
    };
  } catch (err) {
    return {
      ok: false,
      kind: 'unreachable',
      error: null,
      message: (err as Error).message,
      status: null,
      sentBytes: s.sentBytes,
    };
  } finally {
    if (s.push !== null)
      await call(opts, 'DELETE', `/v1/standby/pushes/${s.push}`, undefined, {}).catch(() => undefined);
  }
}

/** The generation's manifest and SHA256SUMS, or the refusal to push it. */
async function readGeneration(dir: string): Promise<{ manifest: Manifest; sums: string } | PushResult> {
  try {
    const m = parseManifest(await readFile(join(dir, 'MANIFEST.json'), 'utf8'));
    if (typeof m === 'string')
      return {
        ok: false,
        kind: 'refused',
        error: REPLICATION_ERRORS.BAD_MANIFEST.code,
        message: m,
        status: null,
        sentBytes: 0,
      };
    return { manifest: m, sums: await readFile(join(dir, 'SHA256SUMS'), 'utf8') };
  } catch (err) {
    return {
      ok: false,
      kind: 'refused',
      error: null,
      message: `cannot read ${dir}: ${(err as Error).message}`,
      status: null,
      sentBytes: 0,
    };
  }
}

/**
 * Begin: the manifest as differences from the previous local generation (the standby most
 * likely keeps it), else whole; a standby that keeps no such base, or reads neither `base` nor
 * `commit` (an older one: 400), is asked again the plainer way. The small changed files go inline.
 */
async function beginPush(
  s: PushSession,
  base: Manifest | null,
  sums: string,
): Promise<{ begun: Answer | null; inlined: number }> {
  const manifest = s.manifest;
  const diff = base === null ? null : diffEntries(base.entries, manifest.entries);
  const { entries: _entries, ...head } = manifest;
  const inline = await inlineFiles(s.opts.dir, manifest, base);
  const bodies = [
    ...(base !== null && diff !== null
      ? [
          {
            base: base.generation,
            manifest: head,
            changed: diff.changed,
            removed: diff.removed,
            commit: true,
            ...inline.body,
          },
        ]
      : []),
    { manifest, sums, commit: true, ...inline.body },
    { manifest, sums },
  ];
  let begun: Answer | null = null;
  for (const b of bodies) {
    const body = JSON.stringify(b);
    s.sentBytes += Buffer.byteLength(body);
    begun = await call(s.opts, 'POST', '/v1/standby/pushes', body, { 'content-type': 'application/json' });
    if (begun.status !== 400 && begun.body?.['error'] !== REPLICATION_ERRORS.UNKNOWN_BASE.code) break;
  }
  return { begun, inlined: begun?.body?.['chunked'] === true ? inline.count : 0 };
}

/**
 * Commit; when the standby found something it held damaged, those files are sent once more
 * (a chunk list again asks only for what is still missing) and the commit asked again, up to 3 rounds.
 */
async function commitPush(s: PushSession): Promise<{ committed: Answer } | { failed: PushResult }> {
  let committed = await call(s.opts, 'POST', `/v1/standby/pushes/${s.push}/commit`, undefined, {});
  for (
    let round = 0;
    round < 3 &&
    committed.status === 409 &&
    committed.body?.['error'] === REPLICATION_ERRORS.INCOMPLETE.code &&
    Array.isArray(committed.body['missing']);
    round++
  ) {
    const again = [
      ...new Set((committed.body['missing'] as unknown[]).filter((x): x is string => typeof x === 'string')),
    ];
    s.sent.clear();
    const failedAgain = await sendMissing(s, again);
    if (failedAgain !== null) return { failed: failedAgain };
    committed = await call(s.opts, 'POST', `/v1/standby/pushes/${s.push}/commit`, undefined, {});
  }
  return { committed };
}
