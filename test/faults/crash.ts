/**
 * Crash durability (S4): a real `hq-arbiter serve` on 127.0.0.1, streams of CAS requests over
 * HTTP with real tokens (renew and re-acquire by the holder's member token, transfer by the
 * admin token), a kill -9 at a random moment of each life, then — with the process gone — the
 * database opened read-only with better-sqlite3: `PRAGMA integrity_check` must say `ok` and
 * the lease row must carry at least the generation and revision of every acknowledged (200)
 * write; then a restart, and the served record is compared too. One kill point per life.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { rng } from './schedule.js';
import { buildRoot } from './build.js';

// Resolved at each use: a run may pin its build (HQF_ROOT, see build.ts).
const cli = (): string => join(buildRoot(), 'apps/arbiter/dist/cli.js');

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k === 'NODE_OPTIONS' ||
      k === 'NODE_V8_COVERAGE' ||
      k === 'LD_PRELOAD' ||
      k.startsWith('_TAPJS_') ||
      k.startsWith('TAP')
    )
      continue;
    env[k] = v;
  }
  return env;
}

export interface CrashResult {
  killPoints: number;
  acknowledged: number;
  byOp: Record<string, number>;
  losses: number;
  integrityFailures: number;
  errors: string[];
  minutes: number;
}

interface Life {
  proc: ChildProcess;
  base: string;
  exited: Promise<void>;
}

async function startArbiter(config: string): Promise<Life> {
  const proc = spawn(process.execPath, [cli(), 'serve', '--config', config], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv(),
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += String(d)));
  const port = await new Promise<number>((done, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`the arbiter did not listen within 60 s: ${stderr.slice(-400)}`)),
      60_000,
    );
    void exited.then(() => fail(new Error(`the arbiter exited at start: ${stderr.slice(-400)}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        const r = JSON.parse(line) as { msg?: string; port?: number };
        if (r.msg === 'hq-arbiter listening' && typeof r.port === 'number') {
          clearTimeout(timer);
          done(r.port);
        }
      } catch {
        /* not JSON */
      }
    });
  });
  return { proc, base: `http://127.0.0.1:${port}`, exited };
}

async function call(
  base: string,
  method: string,
  path: string,
  body: unknown,
  token: string | null,
): Promise<{ status: number; body: any }> {
  const r = await fetch(base + path, {
    method,
    headers: {
      ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(5000),
  });
  const text = await r.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: r.status, body: parsed };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function crashRun(opts: {
  killPoints: number;
  seed: number;
  log?: (s: string) => void;
  streams?: number;
}): Promise<CrashResult> {
  const began = Date.now();
  const log = opts.log ?? (() => undefined);
  const r = rng(opts.seed ^ 0x1234567);
  const dir = mkdtempSync(join(tmpdir(), 'hqf-crash-'));
  const config = join(dir, 'arbiter.json');
  writeFileSync(
    config,
    JSON.stringify({
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      checkCron: '* * * * * *',
      viewFreshSeconds: 3,
      tailscaleBin: '',
      candidates: ['mbp', 'node-b'],
      listen: { host: '127.0.0.1', port: 0 },
      dataDir: join(dir, 'var'),
    }),
  );
  const issue = (m: string, scope: string): string =>
    execFileSync(process.execPath, [cli(), 'token', 'issue', m, '--scope', scope, '--config', config], {
      encoding: 'utf8',
      env: childEnv(),
    }).trim();
  const member: Record<string, string> = { mbp: issue('mbp', 'member'), 'node-b': issue('node-b', 'member') };
  const admin = issue('ops', 'admin');
  const res: CrashResult = {
    killPoints: 0,
    acknowledged: 0,
    byOp: { acquire: 0, renew: 0, transfer: 0 },
    losses: 0,
    integrityFailures: 0,
    errors: [],
    minutes: 0,
  };
  let maxGen = 0;
  let maxRev = 0;
  let life: Life | null = null;
  const onExit = (): void => {
    if (life !== null && life.proc.exitCode === null) life.proc.kill('SIGKILL');
  };
  process.once('exit', onExit);
  try {
    // First life: both candidates report (never seen a generation) so the first grant is not held back.
    life = await startArbiter(config);
    await sleep(1200);
    for (const h of ['mbp', 'node-b'])
      await call(
        life.base,
        'POST',
        '/v1/heartbeat',
        { host: h, seenGeneration: 0, requestTimeoutSeconds: 0.5 },
        member[h]!,
      );
    let granted = false;
    for (let i = 0; i < 100 && !granted; i++) {
      const a = await call(
        life.base,
        'POST',
        '/v1/lease/acquire',
        { host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: 0.5 },
        member.mbp!,
      );
      if (a.status === 200) {
        granted = true;
        maxGen = a.body.lease.generation;
        maxRev = a.body.lease.revision;
        res.acknowledged++;
        res.byOp.acquire!++;
      } else await sleep(200);
    }
    if (!granted) throw new Error('the first acquire was never granted');

    for (let k = 0; k < opts.killPoints; k++) {
      const lease = await call(life.base, 'GET', '/v1/lease', undefined, null);
      if (lease.status !== 200) throw new Error(`GET /v1/lease answered ${lease.status} after restart ${k}`);
      let holder: string = lease.body.holder;
      let generation: number = lease.body.generation;
      if (lease.body.generation < maxGen || lease.body.revision < maxRev) {
        res.losses++;
        res.errors.push(
          `life ${k}: served g${lease.body.generation} r${lease.body.revision} below acknowledged g${maxGen} r${maxRev}`,
        );
      }
      let stop = false;
      let first = false;
      const base = life.base;
      const stream = async (): Promise<void> => {
        while (!stop) {
          const x = r();
          const other = holder === 'mbp' ? 'node-b' : 'mbp';
          const [op, path, body, token] =
            // force: no agent heartbeats here, and the target's liveness is not what this run tests.
            x < 0.03
              ? (['transfer', '/v1/lease/transfer', { to: other, force: true }, admin] as const)
              : x < 0.15
                ? ([
                    'acquire',
                    '/v1/lease/acquire',
                    { host: holder, seenGeneration: generation },
                    member[holder]!,
                  ] as const)
                : (['renew', '/v1/lease/renew', { host: holder, generation }, member[holder]!] as const);
          let a: { status: number; body: any };
          try {
            a = await call(base, 'POST', path, body, token);
          } catch {
            return; // the arbiter is gone: answers not received are not acknowledged
          }
          if (a.status >= 500) res.errors.push(`${op} answered ${a.status}: ${JSON.stringify(a.body).slice(0, 200)}`);
          if (a.status === 200 && a.body?.lease !== undefined) {
            res.acknowledged++;
            res.byOp[op]!++;
            first = true;
            maxGen = Math.max(maxGen, a.body.lease.generation);
            maxRev = Math.max(maxRev, a.body.lease.revision);
            if (a.body.lease.generation >= generation) {
              holder = a.body.lease.holder;
              generation = a.body.lease.generation;
            }
          } else if (a.status === 409 && a.body?.lease !== undefined && a.body.lease.generation > generation) {
            holder = a.body.lease.holder;
            generation = a.body.lease.generation;
          }
        }
      };
      const streams = Array.from({ length: opts.streams ?? 4 }, () => stream());
      const deadline = Date.now() + 10_000;
      while (!first && Date.now() < deadline) await sleep(5);
      await sleep(r() * 150);
      life.proc.kill('SIGKILL');
      await life.exited;
      stop = true;
      await Promise.all(streams);
      res.killPoints++;
      // With the process gone: the file itself, read-only.
      const db = new Database(join(dir, 'var', 'hq.db'), { readonly: true, fileMustExist: true });
      try {
        const ic = String(db.pragma('integrity_check', { simple: true }));
        if (ic !== 'ok') {
          res.integrityFailures++;
          res.errors.push(`kill point ${k}: integrity_check says ${ic}`);
        }
        const row = db.prepare("SELECT generation, revision FROM lease WHERE name = 'hq'").get() as
          | { generation: number; revision: number }
          | undefined;
        if (row === undefined || row.generation < maxGen || row.revision < maxRev) {
          res.losses++;
          res.errors.push(
            `kill point ${k}: the database holds g${row?.generation} r${row?.revision}, acknowledged g${maxGen} r${maxRev}`,
          );
        }
      } finally {
        db.close();
      }
      if (k % 50 === 49)
        log(
          `crash: ${k + 1} kill points, ${res.acknowledged} acknowledged writes, ${res.losses} losses, ${res.integrityFailures} integrity failures`,
        );
      life = await startArbiter(config);
    }
    const last = await call(life.base, 'GET', '/v1/lease', undefined, null);
    if (last.body.generation < maxGen || last.body.revision < maxRev) {
      res.losses++;
      res.errors.push(
        `the last life serves g${last.body.generation} r${last.body.revision} below acknowledged g${maxGen} r${maxRev}`,
      );
    }
  } catch (err) {
    res.errors.push(`harness: ${(err as Error).message}`);
  } finally {
    onExit();
    if (life !== null) await Promise.race([life.exited, sleep(3000)]);
    process.removeListener('exit', onExit);
    rmSync(dir, { recursive: true, force: true });
  }
  res.minutes = Math.round((Date.now() - began) / 600) / 100;
  log(
    `crash: ${res.killPoints} kill points, ${res.acknowledged} acknowledged writes (${Object.entries(res.byOp)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}), ${res.losses} losses, ${res.integrityFailures} integrity failures, ${res.minutes} min`,
  );
  return res;
}
