/**
 * A value now or a promise of it: what the storage seams return (store/store.ts says why).
 * `andThen` keeps a synchronous value synchronous, so a SQLite path through a seam costs no
 * extra turn of the event loop; an asynchronous one becomes a promise.
 */
export type Awaitable<T> = T | Promise<T>;

export function isPromise<T>(v: Awaitable<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

/** `f(v)` now when `v` is a value, after it settles when it is a promise. */
export function andThen<T, U>(v: Awaitable<T>, f: (value: T) => Awaitable<U>): Awaitable<U> {
  return isPromise(v) ? v.then(f) : f(v);
}
