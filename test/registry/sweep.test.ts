/** The daemon's hourly registry sweep (Runtime.sweepRegistry): expired rows go an hour after expiry, live ones stay. */
import t from 'tap';
import Database from 'better-sqlite3';
import { harness } from '../arbiter/helper.js';
import { machineBody } from './helper.js';

t.test('sweepRegistry drops rows expired for more than an hour and nothing else', async (t) => {
  const h = await harness(t, {}, { registry: true });
  const reg = (machine: string, token: string, ttlMs: number) =>
    h.post('/v1/resources/register', machineBody(machine, { ttlMs }), token);
  t.equal((await reg('mbp', h.tokens.mbp, 1_000)).statusCode, 200, 'a short-lived resource');
  t.equal((await reg('node-b', h.tokens.nodeb, 24 * 3_600_000)).statusCode, 200, 'a long-lived one');
  const lease = await h.post('/v1/leases/port', { machine: 'mbp', purpose: 'test', ttlMs: 1_000 }, h.tokens.mbp);
  t.equal(lease.statusCode, 200, 'a short port lease');
  const count = () => {
    const db = new Database(h.rt.databasePath!, { readonly: true });
    try {
      return {
        resources: (db.prepare('SELECT count(*) AS n FROM resources').get() as { n: number }).n,
        leases: (db.prepare('SELECT count(*) AS n FROM port_leases').get() as { n: number }).n,
      };
    } finally {
      db.close();
    }
  };
  h.clock.advance(60);
  t.same(await h.rt.sweepRegistry(), { resources: 0, leases: 0 }, 'expired a minute ago: kept');
  t.same(count(), { resources: 2, leases: 1 }, 'all rows still there');
  h.clock.advance(3_600);
  t.same(await h.rt.sweepRegistry(), { resources: 1, leases: 1 }, 'expired over an hour ago: swept');
  t.same(count(), { resources: 1, leases: 0 }, 'the live resource stays');
  const list = (await h.get('/v1/resources', h.tokens.query)).json() as { resources: Array<{ id: string }> };
  t.same(
    list.resources.map((r) => r.id),
    ['node-b'],
    'and is still listed',
  );
});
