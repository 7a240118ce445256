// The stack's ceiling: bare Fastify + better-sqlite3 doing what the arbiter's hot paths do at
// the bottom — read the one lease row, and a synchronous=FULL update of it — with nothing else
// (no auth, no schemas, no lease-core, no events). Started by bench/arbiter.ts.
import Fastify from 'fastify';
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
mkdirSync(dir, { recursive: true });
const db = new Database(join(dir, 'ceiling.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.exec(
  'CREATE TABLE IF NOT EXISTS lease (name TEXT PRIMARY KEY, holder TEXT, generation INTEGER, revision INTEGER, renewed_at REAL, expires_at REAL)',
);
db.prepare("INSERT OR IGNORE INTO lease VALUES ('hq', 'mbp', 1, 0, 0, 0)").run();
const read = db.prepare("SELECT * FROM lease WHERE name = 'hq'");
const update = db.prepare(
  "UPDATE lease SET revision = revision + 1, renewed_at = ?, expires_at = ? WHERE name = 'hq' AND revision = ?",
);
const app = Fastify({ logger: false });
app.get('/v1/lease', async () => read.get());
app.post('/v1/lease/renew', async () =>
  db
    .transaction(() => {
      const row = read.get();
      const now = Date.now() / 1000;
      if (update.run(now, now + 1500, row.revision).changes !== 1) throw new Error('cas');
      return { ok: true, lease: { ...row, revision: row.revision + 1 } };
    })
    .immediate(),
);
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ msg: 'ceiling listening', port: app.server.address().port, address })}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
