import t from 'tap';
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { buildDist, startArbiter, writeConfig } from './child.js';
import { main } from '../../apps/arbiter/src/commands.js';

/** `hq-arbiter token issue MACHINE --scope member`, in-process (the same command the bin runs). */
async function issue(config: string, machine: string): Promise<string> {
  let out = '';
  const code = await main(['token', 'issue', machine, '--scope', 'member', '--config', config], {
    out: (s) => (out += s),
    err: () => undefined,
  });
  if (code !== 0) throw new Error(`token issue exited ${code}`);
  return out.trim();
}

t.test(
  'kill -9 in the middle of acknowledged renewals loses no acknowledged write and leaves an intact database (S4)',
  async (t) => {
    const dir = t.testdir();
    const config = writeConfig(dir);
    buildDist();
    const members = { mbp: await issue(config, 'mbp'), 'node-b': await issue(config, 'node-b') };
    const t0 = Date.now();
    const a = await startArbiter(t, config);
    t.comment(`started in ${Date.now() - t0} ms`);
    const started = Date.now();
    const token = readFileSync(join(dir, 'var', 'admin.token'), 'utf8').trim();
    t.match(token, /^[0-9a-f]{64}$/, 'the first start wrote an admin token');
    const dispatcher = new Agent({ connections: 8 });
    t.teardown(() => dispatcher.close());
    const post = async (base: string, path: string, body: unknown, bearer = token) => {
      const res = await request(`${base}${path}`, {
        method: 'POST',
        dispatcher,
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, body: (await res.body.json()) as any };
    };
    // Complete the floor of this new database (S2.4): both candidates report after 2 × requestTimeout.
    await new Promise((r) => setTimeout(r, Math.max(0, 2300 - (Date.now() - started))));
    for (const [host, member] of Object.entries(members)) {
      const hb = await post(a.base, '/v1/heartbeat', { host, seenGeneration: 0, requestTimeoutSeconds: 1 }, member);
      t.equal(hb.status, 200, `${host} heartbeats`);
    }
    const acq = await post(a.base, '/v1/lease/acquire', { host: 'mbp' });
    t.equal(acq.status, 200, 'acquired');
    t.equal(acq.body.lease.floorPending, false, 'the floor is complete');
    const generation = acq.body.lease.generation;

    let maxRevision = 0;
    let maxRenewedAt = 0;
    let acked = 0;
    let stop = false;
    const stream = async () => {
      while (!stop) {
        try {
          const r = await post(a.base, '/v1/lease/renew', { host: 'mbp', generation });
          if (r.status === 200) {
            acked++;
            maxRevision = Math.max(maxRevision, r.body.lease.revision);
            maxRenewedAt = Math.max(maxRenewedAt, r.body.lease.renewedAt);
          }
        } catch {
          return; // the arbiter is gone
        }
      }
    };
    let alive = 4;
    const streams = [stream(), stream(), stream(), stream()].map((p) => p.finally(() => alive--));
    const deadline = Date.now() + 60_000;
    await new Promise<void>((res) => {
      const tick = setInterval(() => {
        if (acked >= 200 || alive === 0 || Date.now() > deadline) {
          clearInterval(tick);
          res();
        }
      }, 5);
    });
    t.comment(`${acked} renewals in ${Date.now() - started} ms since start`);
    a.proc.kill('SIGKILL');
    const gone = await a.exited;
    stop = true;
    await Promise.all(streams);
    t.equal(gone.signal, 'SIGKILL', 'the arbiter was killed with SIGKILL');
    t.ok(acked >= 200, `renewals were acknowledged before the kill (${acked})`);

    const t1 = Date.now();
    const b = await startArbiter(t, config);
    t.comment(`restarted in ${Date.now() - t1} ms`);
    const res = await request(`${b.base}/v1/lease`, { dispatcher });
    const lease = (await res.body.json()) as any;
    t.equal(lease.holder, 'mbp', 'the holder survived');
    t.equal(lease.generation, generation, 'the generation survived');
    t.ok(lease.revision >= maxRevision, `no acknowledged revision is lost (${lease.revision} ≥ ${maxRevision})`);
    t.ok(lease.renewedAt >= maxRenewedAt, 'the last acknowledged renewal time is kept');
    b.proc.kill('SIGTERM');
    const ended = await b.exited;
    t.equal(ended.code, 0, 'the restarted arbiter exits 0 on SIGTERM');

    const db = new Database(join(dir, 'var', 'hq.db'), { readonly: true });
    t.equal(db.pragma('integrity_check', { simple: true }), 'ok', 'PRAGMA integrity_check is ok');
    const renewed = db.prepare("SELECT count(*) AS n FROM events WHERE event = 'renewed'").get() as { n: number };
    t.ok(renewed.n >= acked, 'every acknowledged renewal left its event row');
    db.close();
  },
);
