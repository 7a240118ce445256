/**
 * Which pushes this standby may accept, by lease generation: never one below the highest
 * accepted (the mark in `accepted-generation`, with this host's seen generation as a floor),
 * never one above any generation this host knows of from the arbiter or its peers, one without
 * a lease generation only while none with one was accepted, and within one lease generation
 * only a newer snapshot than the tier's `latest`. Checked at begin and again at commit.
 */
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkGeneration, parseGeneration } from '@hq/lease-core';
import type { Manifest } from '@hq/protocol';
import { refuse, type Refusal } from './errors.js';
import { latestManifest } from './receive-kept.js';
import type { ReceiverState } from './receive-state.js';

/** The highest lease generation accepted; null when the mark file is unreadable (fail closed). */
export async function acceptedGeneration(st: ReceiverState): Promise<number | null> {
  try {
    const s = await lstat(st.markFile);
    if (!s.isFile()) return null;
  } catch {
    return 0;
  }
  return parseGeneration(await readFile(st.markFile, 'utf8'));
}

/** The floor a push must reach: the accepted mark, raised to this host's seen generation. */
async function floor(st: ReceiverState): Promise<number | null> {
  const mark = await acceptedGeneration(st);
  if (mark === null) return null;
  const seen = st.opts.seenGeneration === undefined ? 0 : await st.opts.seenGeneration();
  return Math.max(mark, Number.isSafeInteger(seen) && seen > 0 ? seen : 0);
}

/** Null when this standby knows of lease generation `incoming` (asking the arbiter once when `learn`), else the refusal. */
async function unknownGeneration(st: ReceiverState, incoming: number, learn: boolean): Promise<Refusal | null> {
  if (incoming === 0) return null;
  let known = await st.opts.knownGeneration();
  if (incoming > known && learn && st.opts.learnGeneration !== undefined) {
    await st.opts.learnGeneration().catch(() => undefined);
    known = await st.opts.knownGeneration();
  }
  if (incoming <= known) return null;
  st.log.warn(
    { category: 'hq.standby', event: 'push-refused', reason: 'unknown-generation', leaseGeneration: incoming, known },
    'push refused',
  );
  return refuse(
    'UNKNOWN_GENERATION',
    `lease generation ${incoming} is higher than ${known}, the highest this standby has seen from the arbiter or its peers; nothing was accepted`,
    { highest: known },
  );
}

function guard(st: ReceiverState, highest: number | null, incoming: number): Refusal | null {
  if (highest === null)
    return refuse('INTERNAL', `${st.markFile} is unreadable; refusing every push until it is fixed`);
  if (incoming === 0) {
    return highest === 0
      ? null
      : refuse(
          'STALE_GENERATION',
          `a push without a lease generation is refused once generation ${highest} was accepted or seen`,
          { highest },
        );
  }
  const v = checkGeneration(highest, incoming);
  if (v.ok) return null;
  return v.reason === 'stale-generation'
    ? refuse(
        'STALE_GENERATION',
        `lease generation ${incoming} is lower than ${highest}, the highest accepted or seen`,
        { highest },
      )
    : refuse('BAD_GENERATION');
}

/** Within its tier: not accepted already, and newer than `latest` (a higher lease generation, or a later snapshot of the same one). */
async function order(st: ReceiverState, m: Manifest): Promise<Refusal | null> {
  try {
    await lstat(join(st.opts.standbyDir, m.tier, m.generation));
    return refuse('GENERATION_EXISTS', `generation ${m.tier}/${m.generation} was already accepted`);
  } catch {
    /* not there: fine */
  }
  const latest = await latestManifest(st, m.tier);
  if (latest === null) return null;
  if (m.leaseGeneration < latest.leaseGeneration) {
    return refuse(
      'STALE_GENERATION',
      `lease generation ${m.leaseGeneration} is lower than that of ${m.tier}/latest (${latest.leaseGeneration})`,
      {
        highest: latest.leaseGeneration,
      },
    );
  }
  if (m.leaseGeneration === latest.leaseGeneration && m.generation <= latest.generation) {
    return refuse(
      'OLDER_SNAPSHOT',
      `generation ${m.generation} is not newer than ${m.tier}/latest ${latest.generation} of the same lease generation`,
    );
  }
  return null;
}

/**
 * Null when a push of `m` may go on, else the refusal: the generation guard, then the tier's
 * order. `learn` asks the arbiter once about a generation higher than any known (at begin only:
 * at commit, what was learnt at begin stands).
 */
export async function admits(st: ReceiverState, m: Manifest, learn: boolean): Promise<Refusal | null> {
  const g = guard(st, await floor(st), m.leaseGeneration) ?? (await unknownGeneration(st, m.leaseGeneration, learn));
  if (g !== null) return g;
  return order(st, m);
}
