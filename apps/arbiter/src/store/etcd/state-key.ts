/**
 * The state key's value (the lease record, the floor and the views, one JSON value) and what a decision stands
 * on (`Base`); the reads every writer of the prefix shares, apart from the writes that use them.
 */
import type { ArbiterState, LeaseState, Observer } from '@hq/lease-core';
import type { EtcdClient, KeyValue, TxnResult } from './client.js';
import { op } from './client.js';
import { isEtcdError } from './errors.js';
import type { EventKv } from './event-keys.js';
import type { EtcdKeys } from './keys.js';

interface StoredState {
  readonly lease: LeaseState;
  readonly floor: number;
  readonly observers: { readonly [name: string]: Observer };
}

export function encodeState(s: ArbiterState): string {
  const observers: Record<string, Observer> = {};
  for (const name of [...s.observers.keys()].sort()) {
    const o = s.observers.get(name) as Observer;
    observers[name] = {
      ...o,
      refreshSeconds: o.refreshSeconds ?? null,
      requestTimeoutSeconds: o.requestTimeoutSeconds ?? null,
    };
  }
  return JSON.stringify({ lease: s.lease, floor: s.floor, observers } satisfies StoredState);
}

export function decodeState(text: string): ArbiterState {
  const s = JSON.parse(text) as StoredState;
  return { lease: s.lease, floor: s.floor, observers: new Map(Object.entries(s.observers)) };
}

export const seqOf = (kv: KeyValue | undefined): number => (kv === undefined ? 0 : Number(kv.value));

export const rangeKv = (r: TxnResult, i: number): KeyValue | undefined => {
  const x = r.responses[i];
  return x?.type === 'range' ? x.kvs[0] : undefined;
};

/** The state and the sequence from a txn's first two ranges (state, then sequence); null without a state. */
export function baseOf(r: TxnResult, confirmed: boolean): Base | null {
  const s = rangeKv(r, 0);
  const q = rangeKv(r, 1);
  return s === undefined
    ? null
    : { state: decodeState(s.value), stateRev: s.modRevision, seq: seqOf(q), seqRev: q?.modRevision ?? 0n, confirmed };
}

export interface Base {
  readonly state: ArbiterState;
  readonly stateRev: bigint;
  readonly seq: number;
  readonly seqRev: bigint;
  /** True when etcd was seen to hold this state (a read, a commit) after the decision began; false for a remembered one. */
  readonly confirmed: boolean;
}

/**
 * How often a write lost only to another writer of a key it does not decide on (the event or
 * token sequence) is tried again. Every lost round is another writer's commit, so with N writers
 * at once the last needs N − 1 rounds: far more than the elected arbiter and a one-shot command.
 */
export const SEQ_RETRIES = 64;
/** Reads after an indeterminate write before its outcome is given up as unknown. */
export const VERIFY_TRIES = 3;

/** After an indeterminate write: did it apply? Its state value, or the value of its last events key (`last`), tells. */
export async function appliedWrite(
  client: EtcdClient,
  keys: EtcdKeys,
  value: string | null,
  last: EventKv | undefined,
): Promise<{ known: false } | { known: true; yes: boolean; stateRev: bigint; seqRev: bigint }> {
  for (let i = 0; i < VERIFY_TRIES; i++) {
    try {
      const r = await client.txn({
        compare: [],
        success: [op.range(keys.state), op.range(keys.eventSeq), ...(last === undefined ? [] : [op.range(last.key)])],
      });
      const s = rangeKv(r, 0);
      const seq = rangeKv(r, 1);
      const yes = last !== undefined ? rangeKv(r, 2)?.value === last.value : s?.value === value;
      return { known: true, yes, stateRev: s?.modRevision ?? 0n, seqRev: seq?.modRevision ?? 0n };
    } catch (err) {
      if (!isEtcdError(err)) throw err;
    }
  }
  return { known: false };
}
