/**
 * The daemon: listen, run checks on `checkCron`, and on SIGTERM/SIGINT stop accepting,
 * finish in-flight requests, stop the schedule and close the database — within 10 s.
 */
import closeWithGrace from 'close-with-grace';
import type { ArbiterConfig } from '../config.js';
import { takeServeLock } from '../serve-lock.js';
import { createRuntime, type Runtime } from './runtime.js';
import { failoverOf } from '../timing.js';
import type { ArbiterState } from '@hq/lease-core';
import { every, unrefTimers, type Timers } from '@hq/runtime/clock';

function failoverFields(config: ArbiterConfig, state: ArbiterState): { failoverSeconds: number; failover: string } {
  const f = failoverOf(config, state);
  return { failoverSeconds: f.seconds, failover: f.text };
}

/** Graceful close must end before a supervisor's patience (systemd's default is 90 s; ours 10 s). */
export const CLOSE_GRACE_MS = 9_000;

/** How often `--exit-with-parent` looks at the parent: a second is fast next to a failover. */
export const PARENT_POLL_MS = 1_000;

/** How often the registry and the event history are swept: hourly costs nothing between runs. */
export const SWEEP_EVERY_MS = 3_600_000;

export interface ServeOptions {
  /**
   * Stop (as on SIGTERM) once the process that started the daemon is gone, i.e. when this
   * process is re-parented. `npm start` passes it (and `exec`s node, so that npm itself is the
   * parent): killing npm, even with SIGKILL, then stops the arbiter instead of orphaning it.
   */
  readonly exitWithParent?: boolean;
  /** Called once the daemon listens and has logged so (the bin turns V8's optimizing compiler back on). */
  readonly onStarted?: () => void;
  /**
   * The sweeps' and the parent watch's timers (default: real ones that never keep the process
   * alive), and, when given, the runtime's (`createRuntime`'s `timers`).
   */
  readonly timers?: Timers;
}

export async function serve(config: ArbiterConfig, opts: ServeOptions = {}): Promise<Runtime> {
  const parent = process.ppid;
  const timers = opts.timers ?? unrefTimers;
  // One daemon per database, for the daemon's whole life (throws LockError: exit 2).
  const lock = takeServeLock(config.dataDir);
  let rt: Runtime;
  let address: string;
  let app: Awaited<ReturnType<Runtime['app']>>;
  try {
    rt = await createRuntime({
      config,
      ensureAdmin: true,
      restart: true,
      registry: true,
      operator: true,
      elect: true,
      ...(opts.timers === undefined ? {} : { timers: opts.timers }),
    });
    app = await rt.app();
    address = await app.listen({ host: config.listen.host, port: config.listen.port });
  } catch (err) {
    lock.release();
    throw err;
  }
  const port = (app.server.address() as { port: number } | null)?.port ?? config.listen.port;
  // SQLite: the checks start now. etcd: the campaign starts; the elected arbiter runs them.
  rt.start();
  const sweepEvents = (): Promise<void> =>
    rt.sweepEvents().then(
      () => undefined,
      (err: unknown) => rt.log.error({ err }, 'event sweep failed'),
    );
  await sweepEvents(); // at start: a long-stopped arbiter trims its history before it grows further
  const stopSweeps = every(timers, SWEEP_EVERY_MS, () => {
    rt.sweepRegistry().catch((err: unknown) => rt.log.error({ err }, 'registry sweep failed'));
    void sweepEvents();
  });
  rt.log.info(
    {
      address,
      port,
      dataDir: config.dataDir,
      candidates: config.candidates,
      ...failoverFields(config, await rt.store.read()),
    },
    'hq-arbiter listening',
  );
  rt.log.info({ path: lock.path, pid: process.pid }, 'serve lock held');
  opts.onStarted?.();
  closeWithGrace(
    { delay: CLOSE_GRACE_MS, logger: { error: (m: unknown) => rt.log.error({ err: m }, 'close') } },
    async ({ signal, err }) => {
      if (err !== undefined) rt.log.error({ err }, 'closing after an error');
      else rt.log.info({ signal }, 'closing');
      stopSweeps();
      await rt.close();
      lock.release();
      rt.log.info({}, 'closed');
    },
  );
  if (opts.exitWithParent === true) {
    const stopWatch = every(timers, PARENT_POLL_MS, () => {
      if (process.ppid === parent) return;
      stopWatch();
      rt.log.info({ parent, now: process.ppid }, 'parent exited; stopping');
      process.kill(process.pid, 'SIGTERM');
    });
  }
  return rt;
}
