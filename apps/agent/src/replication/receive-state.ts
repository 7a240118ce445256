/**
 * What the standby side of a push keeps between requests: the receiver's options and folders,
 * the open pushes, and for each its blobs (whole files), the chunks it still needs and the
 * files being assembled from them. Every step of a push (receive-begin, -blob, -recipe, -chunks,
 * -assemble, -publish) reads and updates these; receiver.ts holds one and hands it to them.
 */
import type { FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { MsClock } from '@hq/runtime/clock';
import type { Chunk, Manifest, Tier } from '@hq/protocol';
import type { RecipeStore } from './recipes.js';

export interface ReceiverLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface ReceiverOptions {
  readonly standbyDir: string;
  readonly keep: Readonly<Record<Tier, number>>;
  /** Open pushes at once; more are refused (503). Default 4. */
  readonly maxPushes?: number;
  /** A push untouched this long is dropped. Default 10 minutes. */
  readonly idleMs?: number;
  readonly log?: ReceiverLog;
  /**
   * This host's seen generation (the agent's), a floor under the accepted mark: once this host
   * has seen generation g (it may hold the lease itself), a copy from a lower one is stale.
   */
  readonly seenGeneration?: () => number | Promise<number>;
  /**
   * The highest lease generation this host knows of from the arbiter or its peers (the agent's
   * seen generation). A push naming a higher one is a claim nothing here can check — a holder
   * that invented it would lock the real one out for good (S7 turned against its owner) — so it
   * is refused and never raises the accepted mark.
   */
  readonly knownGeneration: () => number | Promise<number>;
  /** Asks the arbiter now (one heartbeat), once, before a push above `knownGeneration` is refused: a new holder pushes before this standby's next refresh. */
  readonly learnGeneration?: () => Promise<unknown>;
  /** Epoch ms for the idle timeout (a local duration). Default: sleep-safe, so a wall jump back cannot keep a push alive. */
  readonly clock?: MsClock;
}

/** The receiver's state, shared by the steps of a push. */
export interface ReceiverState {
  readonly opts: ReceiverOptions;
  readonly log: ReceiverLog;
  readonly clock: MsClock;
  /** `<standbyDir>/.staging`: one folder per open push. */
  readonly staging: string;
  /** `<standbyDir>/accepted-generation`: the highest lease generation accepted. */
  readonly markFile: string;
  /** `<standbyDir>/.chunks`: the chunk lists of the files of kept generations. */
  readonly recipes: RecipeStore;
  readonly pushes: Map<string, Push>;
}

export interface Blob {
  readonly sha256: string;
  readonly bytes: number;
  /** Received bytes so far (a `.part` file), or done. */
  received: number;
  done: boolean;
  /** Linked from a generation this standby already held (not sent). */
  linked: boolean;
  busy: boolean;
}

/** A missing file being assembled from its chunk list in `asm/<sha256>` (sparse until filled). */
export interface Assembly {
  readonly sha256: string;
  readonly path: string;
  readonly chunks: readonly Chunk[];
  readonly offsets: readonly number[];
  /** 1 where the chunk's bytes are in the file already (written as it arrived, or copied). */
  readonly written: Uint8Array;
}

/** A chunk a push needs: `wanted` until it arrives, then `have`; or `have` at once when held here. */
export interface ChunkNeed {
  readonly bytes: number;
  state: 'wanted' | 'have';
  /** Asked for in a chunk-list answer already (so a second list that names it does not ask again). */
  asked: boolean;
  /** Where its bytes can be read: a hard link in staging to a file held here, or an assembly of this push. */
  src: { readonly file: string; readonly offset: number } | null;
  /** The places it is written to when it arrives. */
  targets: { readonly asm: Assembly; readonly index: number }[];
}

/** Where a chunk held here lies: a file of a kept generation (by content) and the offset. */
export interface Held {
  readonly file: string;
  readonly offset: number;
  readonly bytes: number;
}

/** A file of a kept generation, by its sha256. */
export type HeldFiles = ReadonlyMap<string, { abs: string; bytes: number }>;

export interface Push {
  readonly id: string;
  readonly manifest: Manifest;
  readonly sums: string;
  readonly dir: string;
  readonly blobs: Map<string, Blob>;
  /** File sha256 → a file of a kept generation holding it (begin's index). */
  readonly held: HeldFiles;
  /** The missing files sent as chunk lists, by file sha256. */
  readonly assemblies: Map<string, Assembly>;
  readonly chunks: Map<string, ChunkNeed>;
  /** Chunk sha256 → where this standby holds it; built at the first chunk list. */
  heldChunks: Map<string, Held> | null;
  /** Files held here found damaged: none of their chunks is used. */
  readonly damaged: Set<string>;
  /** Files held here linked into `src/` (by sha256). */
  readonly linked: Set<string>;
  receiving: boolean;
  /** Chunk lists being taken now: a commit waits for them (their assembly and needs come together). */
  recipes: number;
  lastActive: number;
  committing: boolean;
}

export type Ok<T> = { readonly ok: true } & T;

/** `POST /v1/standby/pushes` (schema StandbyPushBody): a full manifest, or one as differences from `base`. */
export interface BeginBody {
  readonly manifest: unknown;
  readonly sums?: unknown;
  readonly base?: string;
  readonly changed?: readonly unknown[];
  readonly removed?: readonly string[];
  readonly commit?: boolean;
  readonly inline?: readonly { readonly sha256: string; readonly data: string }[];
}

export interface Committed {
  readonly tier: Tier;
  readonly generation: string;
  readonly latest: string;
  readonly received: number;
  readonly linked: number;
}

export interface Begun {
  readonly push: string;
  readonly missing: string[];
  readonly have: number;
  readonly chunked: true;
  readonly committed?: Committed;
}

/** Reads and writes of chunks are grouped up to this size: one system call per stretch, not per chunk. */
export const WRITE_RUN_BYTES = 4 * 1024 * 1024;

/** Writes buffers back to back from `position` (one writev while it writes everything). */
export async function writeAll(fh: FileHandle, data: Buffer | readonly Buffer[], position: number): Promise<void> {
  const bufs = Array.isArray(data) ? (data as readonly Buffer[]) : [data as Buffer];
  const total = bufs.reduce((n, b) => n + b.length, 0);
  let done = (await fh.writev(bufs as Buffer[], position)).bytesWritten;
  if (done >= total) return;
  const rest = Buffer.concat(bufs as Buffer[]);
  while (done < total) done += (await fh.write(rest, done, total - done, position + done)).bytesWritten;
}

/** Answers without reading the body: what is left of it is discarded. */
export function drain<T>(stream: Readable, answer: T): T {
  stream.resume();
  return answer;
}
