/**
 * What every store's `transactAll` does between its read and its write, in one place: each
 * decision on the state the one before it left, a throwing one left out (its error is its
 * outcome), and a lease change that does not raise the revision refused for the whole group.
 * Pure: no storage, no clock.
 */
import type { ArbiterState, LeaseState } from '@hq/lease-core';
import type { Committed, Decision, EventInput, Outcome } from './store.js';
import { andThen, type Awaitable } from '../awaitable.js';

export type Decided =
  | {
      readonly ok: true;
      readonly state: ArbiterState;
      readonly events: readonly EventInput[];
      readonly result: unknown;
    }
  | { readonly ok: false; readonly error: unknown };

/** Field-by-field equality (a decision may return an equal copy for "unchanged"). */
export function sameLease(a: LeaseState, b: LeaseState): boolean {
  const keys = Object.keys(a) as Array<keyof LeaseState>;
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/** True when `next`'s lease differs from `before`'s (not merely an equal copy). */
export function leaseChanged(before: ArbiterState, next: ArbiterState): boolean {
  return next.lease !== before.lease && !sameLease(next.lease, before.lease);
}

/** Runs `decisions` in order from `before`; throws (nothing may be written) on a lease change without a new revision. */
export function decideAll(
  before: ArbiterState,
  decisions: readonly ((state: ArbiterState) => Decision<unknown>)[],
): { readonly decided: Decided[]; readonly state: ArbiterState } {
  const decided: Decided[] = [];
  let state = before;
  for (const decide of decisions) {
    let d: Decision<unknown>;
    try {
      d = decide(state);
    } catch (error) {
      decided.push({ ok: false, error });
      continue;
    }
    if (leaseChanged(state, d.next) && d.next.lease.revision <= state.lease.revision) {
      throw new Error('a decision changed the lease without advancing its revision');
    }
    decided.push({ ok: true, state: d.next, events: d.events, result: d.result });
    state = d.next;
  }
  return { decided, state };
}

/**
 * `transact` in terms of `transactAll`: one decision, its own error thrown (not returned as an
 * outcome). Synchronous when `transactAll` is (SQLite).
 */
export function transactOne<T>(
  transactAll: (decisions: readonly ((state: ArbiterState) => Decision<unknown>)[]) => Awaitable<readonly Outcome[]>,
  decide: (state: ArbiterState) => Decision<T>,
): Awaitable<Committed<T>> {
  let failure: { error: unknown } | null = null;
  const run = (state: ArbiterState): Decision<T> => {
    try {
      return decide(state);
    } catch (error) {
      failure = { error };
      throw error;
    }
  };
  return andThen(transactAll([run]), ([outcome]) => {
    if (failure !== null) throw (failure as { error: unknown }).error;
    return (outcome as Outcome & { ok: true }).committed as Committed<T>;
  });
}
