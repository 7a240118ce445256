/**
 * Shared helpers of the replication tests: throwaway folders, a resolved replication config,
 * real peer servers (Fastify + replicationPeerRoutes on 127.0.0.1), a writer child process that
 * keeps inserting into a SQLite database.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import Fastify, { type FastifyInstance } from 'fastify';
import {
  resolveReplication,
  validateReplication,
  type ReplicationConfig,
} from '../../apps/agent/src/replication/config.js';
import { StandbyReceiver } from '../../apps/agent/src/replication/receiver.js';
import { replicationPeerRoutes } from '../../apps/agent/src/replication/routes.js';
import { bearer, tokensEqual } from '../../apps/agent/src/tokens.js';
import { HttpError, refusalBody } from '@hq/runtime/refusal';

/** A bare app answers the routes' refusals as the daemons' error handlers do (the rest as Fastify does). */
export function answerRefusals<A extends FastifyInstance>(app: A): A {
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof HttpError) return reply.code(err.statusCode).send(refusalBody(err));
    return reply.send(err);
  });
  return app;
}

export const ROOT = resolve(import.meta.dirname, '../..');
export const TOKEN = 'a'.repeat(64);

export function tmp(t: { teardown(fn: () => void): void }): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'hq-rep-')));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function write(root: string, rel: string, data: string | Buffer): string {
  const p = join(root, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, data);
  return p;
}

/** A replication config over `base/state`, `base/standby`, `base/outbox`. */
export function config(base: string, block: { [k: string]: unknown } = {}): ReplicationConfig {
  return resolveReplication(
    validateReplication({
      stateDir: join(base, 'state'),
      standbyDir: join(base, 'standby'),
      outboxDir: join(base, 'outbox'),
      ...block,
    }),
    base,
  );
}

export interface Peer {
  readonly url: string;
  readonly app: FastifyInstance;
  readonly receiver: StandbyReceiver;
}

/** What a standby of these tests has heard from its arbiter, unless a test says: every lease generation they push. */
export const KNOWN_GENERATION = 1000;

/** A peer listener like the agent's (same limits), with the replication routes, on 127.0.0.1. */
export async function peer(
  t: { teardown(fn: () => Promise<void> | void): void },
  standbyDir: string,
  keep = { core: 36, big: 8, obs: 8 },
  seenGeneration?: () => number,
  knownGeneration: () => number = seenGeneration ?? (() => KNOWN_GENERATION),
): Promise<Peer> {
  const receiver = await StandbyReceiver.open({
    standbyDir,
    keep,
    knownGeneration,
    ...(seenGeneration === undefined ? {} : { seenGeneration }),
  });
  const app = answerRefusals(
    Fastify({
      logger: false,
      bodyLimit: 64 * 1024,
      requestTimeout: 10_000,
      connectionTimeout: 10_000,
      onProtoPoisoning: 'error',
    }),
  );
  await app.register(replicationPeerRoutes, {
    receiver,
    verifyPeer: (h) => {
      const given = bearer(h);
      return given !== null && tokensEqual(given, TOKEN);
    },
  });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  return { url: address, app, receiver };
}

/**
 * A child process that inserts into `db` until killed: each transaction adds one row to `a` and
 * one to `b` and bumps `counter.n`, so a consistent copy has count(a) = count(b) = n.
 */
export function writer(db: string): Promise<ChildProcess> {
  const script = `
    const Database = require(${JSON.stringify(join(ROOT, 'node_modules/better-sqlite3'))});
    const db = new Database(process.argv[1]);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec("CREATE TABLE IF NOT EXISTS a (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE IF NOT EXISTS b (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE IF NOT EXISTS counter (k INTEGER PRIMARY KEY, n INTEGER); INSERT OR IGNORE INTO counter VALUES (1, 0);");
    const ia = db.prepare('INSERT INTO a (v) VALUES (?)');
    const ib = db.prepare('INSERT INTO b (v) VALUES (?)');
    const up = db.prepare('UPDATE counter SET n = n + 1 WHERE k = 1');
    const tx = db.transaction((v) => { ia.run(v); ib.run(v); up.run(); });
    const pad = 'x'.repeat(200);
    for (let i = 0; i < 2000; i++) tx(pad + i);
    process.stdout.write('ready\\n');
    let i = 0;
    const tick = () => { for (let k = 0; k < 20; k++) tx(pad + (i++)); setTimeout(tick, 2); };
    tick();
  `;
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['-e', script, db], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    child.stdout?.once('data', () => done(child));
    child.once('error', fail);
    child.once('exit', (code) => fail(new Error(`writer exited ${code}`)));
  });
}

/** A WAL SQLite database of `rows` rows of 1000 random bytes (four to a 4 KiB page), checkpointed; open. */
export function ledger(path: string, rows: number): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE rows (id INTEGER PRIMARY KEY, payload BLOB)');
  const ins = db.prepare('INSERT INTO rows (payload) VALUES (?)');
  db.transaction(() => {
    for (let i = 0; i < rows; i++) ins.run(randomBytes(1000));
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  return db;
}
