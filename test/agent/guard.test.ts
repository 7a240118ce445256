/**
 * `hq guard` and the physical path check under it: symlinks resolved one component at a time,
 * `..` applied to the physical directory, paths that do not exist yet still resolved through
 * the links of their existing prefix.
 */
import t from 'tap';
import { mkdirSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { isInside, physicalPath } from '../../apps/agent/src/guard-path.js';
import { FakeAgent, hq, shortDir, writeConfig } from './helpers.js';

function tree(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const dir = shortDir(t);
  const op = join(dir, 'live');
  const inst = join(dir, 'copy');
  mkdirSync(join(op, 'data', 'sub'), { recursive: true });
  mkdirSync(join(inst, 'data'), { recursive: true });
  symlinkSync(join(op, 'data'), join(inst, 'escape')); // copy/escape → live/data
  symlinkSync('../live', join(inst, 'rel')); // relative link out of the copy
  symlinkSync('data', join(inst, 'inner')); // a link that stays inside
  symlinkSync(op, join(dir, 'alias')); // alias → live
  symlinkSync(join(dir, 'loop1'), join(dir, 'loop2'));
  symlinkSync(join(dir, 'loop2'), join(dir, 'loop1'));
  return { dir, op, inst };
}

t.test('physicalPath resolves links component by component', async (t) => {
  const { dir, op, inst } = tree(t);
  t.equal(
    await physicalPath(join(inst, 'data', 'new', 'file')),
    join(inst, 'data', 'new', 'file'),
    'a path that does not exist yet is kept as written below its real prefix',
  );
  t.equal(await physicalPath(join(inst, 'escape', 'x')), join(op, 'data', 'x'), 'an absolute link is followed');
  t.equal(
    await physicalPath(join(inst, 'rel', 'data')),
    join(op, 'data'),
    'a relative link is followed from its directory',
  );
  t.equal(
    await physicalPath(join(inst, 'inner', 'y')),
    join(inst, 'data', 'y'),
    'a link that stays inside stays inside',
  );
  t.equal(
    await physicalPath(`${inst}/escape/../z`),
    join(op, 'z'),
    '.. applies to the physical directory, not the text',
  );
  t.equal(
    await physicalPath(join(dir, 'alias', 'data', 'sub', 'nope', 'deeper')),
    join(op, 'data', 'sub', 'nope', 'deeper'),
    'a missing tail below a link resolves through the link',
  );
  await t.rejects(physicalPath(join(dir, 'loop1', 'x')), /too many levels/, 'a symlink loop is an error, not a hang');
  t.ok(isInside(join(op, 'a'), op), 'a child is inside');
  t.notOk(isInside(`${op}-other`, op), 'a sibling sharing the prefix is not inside');
});

t.test('hq guard decides ledger writes by fence, seen generation and physical roots', async (t) => {
  const { dir, op, inst } = tree(t);
  const config = writeConfig(dir);
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  t.teardown(() => agent.close());
  const guard = (...args: string[]) => hq(['guard', '--command', 'ledger-post', '--config', config, ...args]);
  const roots = (p: string) => ['--write-root', p, '--instance-root', inst, '--operational-root', op];

  agent.answer = { run: true, reason: 'holder', generation: 3, holder: 'mbp', validForSeconds: 100 };
  t.equal((await guard()).code, 0, 'allowed while this host may run ledger-cli');

  agent.answer = { run: false, reason: 'not-holder', generation: 3, holder: 'node-b', validForSeconds: null };
  const refused = await guard();
  t.equal(refused.code, 4, 'refused on a standby');
  t.match(refused.stderr, /"event":"cli-refused"/, 'the refusal is logged as cli-refused');

  const override = await guard('--override');
  t.equal(override.code, 0, '--override allows');
  t.match(override.stderr, /"event":"cli-override"/, 'and logs cli-override');

  t.equal(
    (await guard(...roots(join(inst, 'data', 'ledger')))).code,
    0,
    'a write root physically inside the non-operational instance is allowed',
  );
  t.equal(
    (await guard(...roots(join(inst, 'escape', 'ledger')))).code,
    4,
    'a symlink from the instance into the operational root is refused',
  );
  t.equal(
    (await guard(...roots(join(inst, 'rel', 'data')))).code,
    4,
    'a relative symlink out of the instance is refused',
  );
  t.equal(
    (await guard(...roots(`${inst}/escape/../../copy/data`))).code,
    0,
    'climbing back into the instance through .. is allowed',
  );
  t.equal(
    (await guard('--write-root', join(op, 'data'), '--instance-root', join(dir, 'alias'), '--operational-root', op))
      .code,
    4,
    'an instance root that is the operational root through a symlink is refused',
  );
  t.equal(
    (await guard('--write-root', join(inst, 'data'))).code,
    2,
    '--write-root without the other roots is a usage error',
  );
});

/** A loopback arbiter answering `GET /v1/lease` with `record` (null: HTTP 503). */
async function fakeArbiter(t: Parameters<Parameters<typeof t.test>[1]>[0]) {
  const state: { record: unknown } = { record: { name: 'hq', holder: null, generation: 0, revision: 1 } };
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/v1/lease' && state.record !== null) res.end(JSON.stringify(state.record));
    else {
      res.statusCode = 503;
      res.end('{}');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

t.test('hq guard allows the never-seen bootstrap only when the arbiter answers that no lease exists', async (t) => {
  const dir = shortDir(t);
  const arb = await fakeArbiter(t);
  const up = writeConfig(dir, { arbiterUrl: arb.url });
  mkdirSync(join(dir, 'down'));
  const down = writeConfig(join(dir, 'down'), { arbiterUrl: 'http://127.0.0.1:9' }); // no agent on its socket
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  agent.seen = 0;
  agent.answer = { run: false, reason: 'no-lease', generation: 0, holder: null, validForSeconds: null };
  const guard = (config: string, ...args: string[]) =>
    hq(['guard', '--command', 'ledger-post', '--config', config, ...args]);

  const fresh = await guard(up, '--json');
  t.equal(fresh.code, 0, 'allowed before any generation was seen when the arbiter has no record');
  t.equal((JSON.parse(fresh.stdout) as { reason: string }).reason, 'never-seen', 'with the reason never-seen');

  arb.state.record = { name: 'hq', holder: 'node-b', generation: 5, revision: 9 };
  const held = await guard(up);
  t.equal(held.code, 4, 'never seen, but the arbiter says node-b holds generation 5: refused');
  t.match(
    held.stdout,
    /^refused: ledger-post \(never-seen-lease-exists; holder node-b, generation 5\)\n$/,
    'the refusal names the holder and the generation',
  );
  t.match(held.stderr, /"event":"cli-refused"/, 'and is logged');

  arb.state.record = null;
  const odd = await guard(up);
  t.equal(odd.code, 4, 'an arbiter answering 503 confirms nothing: refused');
  t.match(odd.stdout, /never-seen-arbiter-unreachable; holder unknown, generation 0; HTTP 503/, 'the refusal says why');

  const unreachable = await guard(down);
  t.equal(unreachable.code, 4, 'the agent down and the arbiter unreachable: refused (fail closed)');
  t.match(
    unreachable.stdout,
    /^refused: ledger-post \(never-seen-arbiter-unreachable; holder unknown, generation unknown; /,
    'naming the unreachable arbiter',
  );

  await agent.close();
  arb.state.record = { name: 'hq', holder: 'node-b', generation: 5, revision: 9 };
  const agentDown = await guard(up, '--json');
  t.equal(agentDown.code, 4, 'the agent down while node-b holds the lease: refused');
  t.match(
    JSON.parse(agentDown.stdout),
    { allowed: false, reason: 'never-seen-lease-exists', holder: 'node-b', generation: 5, fence: 'agent-unreachable' },
    'the answer carries the holder, the generation and the fence problem',
  );
  arb.state.record = { name: 'hq', holder: null, generation: 0, revision: 1 };
  t.equal(
    (await guard(up)).code,
    0,
    'the agent down and the arbiter answering "no record": the bootstrap path is allowed',
  );
});

t.test('hq guard --override logs what it overrode; a refusal names holder and generation', async (t) => {
  const dir = shortDir(t);
  const config = writeConfig(dir);
  const agent = new FakeAgent(join(dir, 'agent.sock'));
  await agent.listen();
  t.teardown(() => agent.close());
  agent.seen = 7;
  agent.answer = { run: false, reason: 'not-holder', generation: 7, holder: 'node-b', validForSeconds: null };
  const refused = await hq(['guard', '--command', 'ledger-post', '--config', config]);
  t.equal(refused.code, 4, 'refused on a standby');
  t.equal(
    refused.stdout,
    'refused: ledger-post (not-holder; holder node-b, generation 7)\n',
    'the line names the holder and the generation',
  );
  const o = await hq(['guard', '--command', 'ledger-post', '--override', '--config', config]);
  t.equal(o.code, 0, '--override allows');
  t.equal(
    o.stdout,
    'allowed: ledger-post (override of not-holder; holder node-b, generation 7)\n',
    'the answer says what it overrode',
  );
  const line = JSON.parse(
    o.stderr
      .trim()
      .split('\n')
      .find((l) => l.includes('cli-override')) ?? '{}',
  ) as Record<string, unknown>;
  t.match(
    line,
    {
      category: 'hq.fence',
      event: 'cli-override',
      host: 'mbp',
      command: 'ledger-post',
      reason: 'override',
      overridden: 'not-holder',
      holder: 'node-b',
      generation: 7,
    },
    'the cli-override event logs the command, the overridden reason, the holder and the generation',
  );
  agent.answer = { run: true, reason: 'holder', generation: 8, holder: 'mbp', validForSeconds: 100 };
  const notNeeded = await hq(['guard', '--command', 'ledger-post', '--override', '--config', config, '--json']);
  t.equal(notNeeded.code, 0, '--override on an allowed write is allowed');
  t.match(
    JSON.parse(notNeeded.stdout),
    { allowed: true, reason: 'fence' },
    'with its own reason: nothing was overridden',
  );
  t.notMatch(notNeeded.stderr, /cli-override/, 'and no override is logged');
});
