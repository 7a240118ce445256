/**
 * An HTTP server that does not wake an idle daemon. Node's server sweeps its connections every
 * `connectionsCheckingInterval` (30 s) to end the requests past `requestTimeout` and
 * `headersTimeout` — from `listen` on, with no connection open too: twice a minute for each of
 * the agent's two listeners, between the agent's own ticks (docs/BENCH.md "Footprint of idle
 * daemons"). `sweepOnlyWhileConnected` runs the same sweep, at the same interval, only while a
 * connection is open, so every deadline the server enforces stays as it was.
 *
 * It takes Node's own sweep from the interval's handle (`_onTimeout` of the Timeout Node keeps
 * under the symbol `http.server.connectionsCheckingInterval`, Node 18.3 to 24); when that handle
 * is not there as expected, the server is left as Node made it and this answers false.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { every, unrefTimers, type Timers } from './clock.js';

const HANDLE = 'http.server.connectionsCheckingInterval';

interface SweepHandle {
  readonly _onTimeout: () => void;
  readonly _idleTimeout: number;
}

function isSweep(v: unknown): v is SweepHandle {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as SweepHandle)._onTimeout === 'function' &&
    typeof (v as SweepHandle)._idleTimeout === 'number'
  );
}

/**
 * From `listen` on (call it before), the server sweeps its connections only while one is open.
 * Resolves true once that is so, false when Node's sweep was left alone (see the module's note).
 * `timers` run the sweep (default: real ones that never keep the process alive).
 */
export function sweepOnlyWhileConnected(server: Server, timers: Timers = unrefTimers): Promise<boolean> {
  return new Promise((done) => {
    // After Node's own 'listening' listener (registered by the constructor), which starts its interval.
    server.once('listening', () => {
      const key = Object.getOwnPropertySymbols(server).find((s) => s.description === HANDLE);
      const handle: unknown = key === undefined ? undefined : (server as unknown as Record<symbol, unknown>)[key];
      if (!isSweep(handle)) return done(false);
      const sweep = handle._onTimeout;
      const sweepEveryMs = handle._idleTimeout;
      clearInterval(handle as unknown as NodeJS.Timeout);
      let open = 0;
      let stopSweeps: (() => void) | null = null;
      const stop = (): void => {
        stopSweeps?.();
        stopSweeps = null;
      };
      server.on('connection', (socket: Socket) => {
        open++;
        stopSweeps ??= every(timers, sweepEveryMs, sweep);
        socket.once('close', () => {
          if (--open === 0) stop();
        });
      });
      server.once('close', stop);
      done(true);
    });
  });
}
