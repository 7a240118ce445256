/** A manual clock and timer queue for the agent-side registry clients: nothing sleeps. */
import type { Timers } from '../../packages/runtime/src/clock.js';

export class FakeTime implements Timers {
  now = 1_800_000_000_000;
  private seq = 0;
  private queue: { id: number; at: number; fn: () => void }[] = [];
  readonly clock = { now: () => this.now };

  set(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.queue.push({ id, at: this.now + Math.max(0, ms), fn });
    return id;
  }

  clear(handle: unknown): void {
    this.queue = this.queue.filter((e) => e.id !== handle);
  }

  /** Pending timers, soonest first, as delays from now. */
  pending(): number[] {
    return this.queue.map((e) => e.at - this.now).sort((a, b) => a - b);
  }

  /** Moves time forward by `ms`, firing due timers in order and letting promises settle. */
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      await flush();
      this.queue.sort((a, b) => a.at - b.at || a.id - b.id);
      const next = this.queue[0];
      if (next === undefined || next.at > end) break;
      this.queue.shift();
      this.now = next.at;
      // From a macrotask, as a real timer fires: every promise chain already under way has run.
      await new Promise<void>((r, fail) =>
        setImmediate(() => {
          try {
            next.fn();
            r();
          } catch (err) {
            fail(err);
          }
        }),
      );
    }
    this.now = end;
    await flush();
  }
}

export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}

/**
 * Resolves once `ok()` holds, looking again after each turn of the event loop: for real I/O (a
 * loopback answer) between two steps of fake time. `ms` bounds the test, not a timing claim.
 */
export async function eventually(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((r) => setImmediate(r));
  }
}
