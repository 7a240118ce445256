/**
 * The agent side of the generation ceiling: an agent refuses a record above it (lease-core
 * parseRecord), never adopts a peer's generation above it, and `hq` never prints an answer that
 * promises a run (`hq failover --wait` "may run", exit 0; `hq lease acquire` "acquired") for a
 * record no agent runs on — the arbiter's answer of the fleet the issue bricked.
 */
import t from 'tap';
import { createServer } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { GENERATION_CEILING } from '../../packages/protocol/src/index.js';
import { parseRecord } from '../../packages/lease-core/src/index.js';
import { hq, record, shortDir, writeConfig } from './helpers.js';

t.test('an agent refuses a record above the ceiling with one line, and takes one at it', async (t) => {
  const above = parseRecord(record({ generation: GENERATION_CEILING + 1 }));
  t.same(
    above,
    {
      ok: false,
      problem: `record.generation ${GENERATION_CEILING + 1} is above the generation ceiling ${GENERATION_CEILING}`,
    },
    'refused, naming both numbers',
  );
  t.ok(parseRecord(record({ generation: GENERATION_CEILING })).ok, 'the ceiling itself is a record');
});

/** A fake arbiter whose transfer, acquire and record answers carry `generation`. */
async function arbiterAt(t: Parameters<Parameters<typeof t.test>[1]>[0], generation: number): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      const lease = record({ holder: 'node-b', generation, notBefore: Date.now() / 1000 - 1, displaced: null });
      if (req.url === '/v1/lease') res.end(JSON.stringify(lease));
      else if (req.url === '/v1/lease/transfer' || req.url === '/v1/lease/acquire')
        res.end(JSON.stringify({ ok: true, lease }));
      else {
        res.statusCode = 404;
        res.end('{}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function configFor(dir: string, arbiterUrl: string, host = 'mbp'): string {
  mkdirSync(join(dir, 'state'), { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, 'state', 'token'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
  return writeConfig(dir, { arbiterUrl, hostName: host });
}

t.test('hq failover --wait never says "may run" for a record above the ceiling; it does at the ceiling', async (t) => {
  const env = { env: { HQ_ADMIN_TOKEN: 'cd'.repeat(32) } };
  const dir = shortDir(t);
  const bricked = await hq(
    [
      'failover',
      '--to',
      'node-b',
      '--wait',
      '2',
      '--config',
      configFor(dir, await arbiterAt(t, 9_007_199_254_740_991)),
    ],
    env,
  );
  t.equal(bricked.code, 1, 'exit 1');
  t.notMatch(bricked.stdout, /may run/, 'no "may run"');
  t.match(
    bricked.stderr,
    /^hq failover: [^\n]*above the generation ceiling 281474976710656[^\n]*\n$/,
    'one line naming the ceiling',
  );

  const dir2 = shortDir(t);
  const fine = await hq(
    ['failover', '--to', 'node-b', '--wait', '2', '--config', configFor(dir2, await arbiterAt(t, GENERATION_CEILING))],
    env,
  );
  t.equal(fine.code, 0, `a record at the ceiling may run (${fine.stderr.trim()})`);
  t.match(fine.stdout, /node-b may run at generation 281474976710656/, 'and says so');
});

t.test('hq lease acquire never says "acquired" for a record above the ceiling', async (t) => {
  const dir = shortDir(t);
  const r = await hq([
    'lease',
    'acquire',
    '--config',
    configFor(dir, await arbiterAt(t, GENERATION_CEILING + 1), 'node-b'),
  ]);
  t.equal(r.code, 1, 'exit 1');
  t.notMatch(r.stdout, /acquired/, 'no "acquired"');
  t.match(r.stderr, /above the generation ceiling/, 'the line says why');
});

t.test(
  'hq lease accept G sends the generation with the admin token and says the new floor; a bad G is a usage error',
  async (t) => {
    const seen: Array<{ url: string; auth: string | undefined; body: unknown }> = [];
    const server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        seen.push({ url: req.url ?? '', auth: req.headers.authorization, body: JSON.parse(text || 'null') });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, floor: 1048700, was: 57, lease: record() }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const config = configFor(shortDir(t), `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const env = { env: { HQ_ADMIN_TOKEN: 'cd'.repeat(32) } };
    const r = await hq(['lease', 'accept', '1048700', '--config', config], env);
    t.equal(r.code, 0, `exit 0 (${r.stderr.trim()})`);
    t.same(
      seen,
      [{ url: '/v1/lease/accept-generation', auth: `Bearer ${'cd'.repeat(32)}`, body: { generation: 1048700 } }],
      'one request with the admin token',
    );
    t.equal(r.stdout, 'accepted: the floor is 1048700 (was 57); reports up to it are taken\n', 'says the new floor');
    for (const bad of ['0', '-3', '1.5', 'x', '99999999999999999']) {
      const u = await hq(['lease', 'accept', bad, '--config', config], env);
      t.equal(u.code, 2, `G ${bad} is a usage error`);
    }
    t.equal(seen.length, 1, 'nothing sent for a bad G');
  },
);
