/**
 * State files: atomic writes with their modes, suspicious reads, and the agent failing closed
 * (start guard, "no confirmation") on a corrupt, insecure, foreign-owned or symlinked file.
 */
import t from 'tap';
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { parsePersisted, loadPersisted, loadSeen } from '../../apps/agent/src/state.js';
import { readToken, TokenFile, tokensEqual, bearer, peerTokenMatches } from '../../apps/agent/src/tokens.js';
import { openAgent as openParts, stopAgent, type Log } from '../../apps/agent/src/daemon/parts.js';
import { stampClock } from '../../packages/runtime/src/clock.js';
import { agentSetup, shortDir } from './helpers.js';

const silent: Log = { info() {}, warn() {}, error() {}, debug() {} };

function recording(): Log & { lines: { obj: object; msg: string }[] } {
  const lines: { obj: object; msg: string }[] = [];
  const add = (obj: object, msg: string): void => void lines.push({ obj, msg });
  return { lines, info: add, warn: add, error: add, debug: add };
}

t.test('readToken refuses a group-readable token file and reads a 0600 one', async (t) => {
  const dir = shortDir(t);
  writeFileSync(join(dir, 'tok'), '5\n', { mode: 0o640 });
  chmodSync(join(dir, 'tok'), 0o640);
  t.match(await readToken(join(dir, 'tok')), { ok: false, problem: /0600/ }, 'a group-readable token file is refused');
  writeFileSync(join(dir, 'tok2'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
  t.same(
    await readToken(join(dir, 'tok2')),
    { ok: true, token: 'ab'.repeat(32) },
    'a 0600 token file is read, trailing newline dropped',
  );
});

t.test('parsePersisted refuses every malformed local.json', async (t) => {
  const good = {
    holder: 'mbp',
    generation: 2,
    confirmedAt: 1,
    ttlSeconds: 6,
    safetyMarginSeconds: 1,
    gaveConfirmation: null,
    lockDelayPending: false,
  };
  t.same(
    parsePersisted(JSON.stringify(good)),
    { ...good, steppedDown: 0, lost: 0 },
    'a well-formed file is accepted (one written before the step-down marks has none)',
  );
  const marked = { ...good, steppedDown: 3, lost: 2 };
  t.same(parsePersisted(JSON.stringify(marked)), marked, 'the step-down marks are kept (lease-core A7)');
  const bad: [string, string][] = [
    ['not JSON', '{'],
    ['an array', '[]'],
    ['an unknown field', JSON.stringify({ ...good, extra: 1 })],
    ['a bad holder', JSON.stringify({ ...good, holder: 'MBP' })],
    ['a string generation', JSON.stringify({ ...good, generation: '2' })],
    ['a negative generation', JSON.stringify({ ...good, generation: -1 })],
    ['a missing flag', JSON.stringify({ ...good, lockDelayPending: undefined })],
    ['a malformed confirmation', JSON.stringify({ ...good, gaveConfirmation: { holder: 'mbp' } })],
    ['a fractional step-down mark', JSON.stringify({ ...good, steppedDown: 1.5 })],
    ['a negative lost generation', JSON.stringify({ ...good, lost: -1 })],
  ];
  for (const [name, text] of bad) t.type(parsePersisted(text), 'string', `${name} is refused`);
});

async function openAgent(t: Parameters<Parameters<typeof t.test>[1]>[0], dir: string, log: Log = silent) {
  const { arb, config } = await agentSetup(t, dir, { socketPath: join(dir, 'a.sock'), peerToken: false });
  const agent = await openParts({ config, clock: stampClock, log });
  t.teardown(() => stopAgent(agent));
  return { agent, arb, config };
}

t.test('a clean start with no state runs as soon as the arbiter renews it', async (t) => {
  const dir = shortDir(t);
  const { agent } = await openAgent(t, dir);
  t.equal(agent.store.state.startGuardUntilMono, null, 'no start guard without flags on disk');
  const hb = await agent.link.heartbeat();
  t.equal(hb.outcome, 'renewed', 'the fake arbiter renews mbp');
  t.equal(agent.fence.decide('cron').reason, 'holder', 'the fence says holder');
  const local = JSON.parse(readFileSync(join(dir, 'state', 'local.json'), 'utf8')) as {
    holder: string;
    generation: number;
  };
  t.equal(local.holder, 'mbp', 'local.json records the holder');
  t.equal(
    readFileSync(join(dir, 'state', 'seen-generation'), 'utf8'),
    '1\n',
    'seen-generation holds the number and a newline',
  );
  t.equal(statSync(join(dir, 'state', 'local.json')).mode & 0o777, 0o600, 'local.json is 0600');
  t.equal(statSync(join(dir, 'state')).mode & 0o777, 0o700, 'the state directory is 0700');
});

const failClosedCases: [string, (state: string) => void][] = [
  ['a corrupt local.json', (s) => writeFileSync(join(s, 'local.json'), '{"holder":', { mode: 0o600 })],
  [
    'a group-writable local.json',
    (s) => {
      writeFileSync(
        join(s, 'local.json'),
        JSON.stringify({
          holder: null,
          generation: 0,
          confirmedAt: null,
          ttlSeconds: 0,
          gaveConfirmation: null,
          lockDelayPending: false,
        }),
      );
      chmodSync(join(s, 'local.json'), 0o664);
    },
  ],
  [
    'a symlinked local.json',
    (s) => {
      writeFileSync(
        join(s, 'elsewhere.json'),
        JSON.stringify({
          holder: null,
          generation: 0,
          confirmedAt: null,
          ttlSeconds: 0,
          gaveConfirmation: null,
          lockDelayPending: false,
        }),
        { mode: 0o600 },
      );
      symlinkSync(join(s, 'elsewhere.json'), join(s, 'local.json'));
    },
  ],
  ['a corrupt seen-generation', (s) => writeFileSync(join(s, 'seen-generation'), 'seven\n', { mode: 0o600 })],
];
if (process.getuid?.() === 0) {
  failClosedCases.push([
    'a foreign-owned seen-generation',
    (s) => {
      writeFileSync(join(s, 'seen-generation'), '4\n', { mode: 0o600 });
      chownSync(join(s, 'seen-generation'), 12345, 12345);
    },
  ]);
}

for (const [name, plant] of failClosedCases) {
  t.test(`${name} is refused and the agent fails closed instead of crashing`, async (t) => {
    const dir = shortDir(t);
    mkdirSync(join(dir, 'state'), { mode: 0o700 });
    plant(join(dir, 'state'));
    const log = recording();
    const { agent } = await openAgent(t, dir, log);
    t.ok(
      log.lines.some((l) => l.msg.includes('refused')),
      'the refusal is logged',
    );
    t.not(agent.store.state.startGuardUntilMono, null, 'the start guard applies');
    const hb = await agent.link.heartbeat();
    t.equal(hb.outcome, 'renewed', 'the arbiter renews the holder');
    const f = agent.fence.decide('cron');
    t.equal(f.run, false, 'nothing runs during the start guard even though the arbiter renewed');
    t.equal(f.reason, 'lock-delay', 'the reason is lock-delay');
    const st = lstatSync(join(dir, 'state', 'local.json'));
    t.ok(st.isFile() && !st.isSymbolicLink(), 'local.json was replaced by a regular file');
    const local = await loadPersisted(join(dir, 'state', 'local.json'));
    t.equal(local.kind === 'ok' && local.value.lockDelayPending, true, 'the rewritten local.json keeps the flag set');
    if (name.includes('symlinked')) {
      t.same(
        JSON.parse(readFileSync(join(dir, 'state', 'elsewhere.json'), 'utf8')).generation,
        0,
        'the symlink target was never written',
      );
    }
  });
}

t.test('a confirmation on record at start holds the agent back for ttl + margin', async (t) => {
  const dir = shortDir(t);
  mkdirSync(join(dir, 'state'), { mode: 0o700 });
  writeFileSync(
    join(dir, 'state', 'local.json'),
    JSON.stringify({
      holder: 'node-b',
      generation: 1,
      confirmedAt: null,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      gaveConfirmation: { holder: 'node-b', generation: 1, at: Date.now() / 1000 },
      lockDelayPending: false,
    }),
    { mode: 0o600 },
  );
  writeFileSync(join(dir, 'state', 'seen-generation'), '1\n', { mode: 0o600 });
  const { agent, arb } = await openAgent(t, dir);
  const guard = (agent.store.state.startGuardUntilMono ?? 0) - agent.store.state.started.mono;
  t.equal(guard, 7, 'the start guard is ttl + margin (6 + 1)');
  t.equal(agent.store.state.seen, 1, 'the seen generation is read back');
  await agent.link.heartbeat();
  t.equal(agent.fence.decide('cron').reason, 'lock-delay', 'the renewed holder still waits');
  const seen = await loadSeen(join(dir, 'state', 'seen-generation'));
  t.same(seen, { kind: 'ok', value: 1 }, 'seen-generation stays');
  const sent = arb.heartbeats[0] as { seenGeneration: number };
  t.equal(sent.seenGeneration, 1, 'the heartbeat reports the seen generation');
});

t.test('a token file is re-read when it changes, so rotation needs no restart', async (t) => {
  const dir = shortDir(t);
  const path = join(dir, 'token');
  writeFileSync(path, `${'aa'.repeat(32)}\n`, { mode: 0o600 });
  const tf = new TokenFile(path);
  t.same(await tf.get(), { ok: true, token: 'aa'.repeat(32) }, 'the first token is read');
  writeFileSync(path, `${'bb'.repeat(32)}\n`, { mode: 0o600 });
  t.same(await tf.get(), { ok: true, token: 'bb'.repeat(32) }, 'the rotated token is picked up');
  chmodSync(path, 0o644);
  t.match(await tf.get(), { ok: false, problem: /0600/ }, 'a token file that became readable by others is refused');
  t.ok(tokensEqual('x'.repeat(64), 'x'.repeat(64)), 'equal tokens compare equal');
  t.notOk(tokensEqual('x'.repeat(64), 'x'.repeat(63)), 'different lengths compare unequal without throwing');
  t.equal(bearer('bEaReR abc'), 'abc', 'the scheme is case-insensitive');
  t.equal(bearer('Basic abc'), null, 'another scheme is no bearer token');
});

t.test('the peer-token check: the bearer token must be the peer token, read anew each time', async (t) => {
  const dir = shortDir(t);
  const path = join(dir, 'peer-token');
  writeFileSync(path, `${'cc'.repeat(32)}\n`, { mode: 0o600 });
  const tf = new TokenFile(path);
  t.ok(await peerTokenMatches(tf, `Bearer ${'cc'.repeat(32)}`), 'the peer token matches');
  t.notOk(await peerTokenMatches(tf, `Bearer ${'dd'.repeat(32)}`), 'another token does not');
  t.notOk(await peerTokenMatches(tf, undefined), 'no header does not');
  t.notOk(await peerTokenMatches(tf, [`Bearer ${'cc'.repeat(32)}`, 'Bearer x']), 'two headers do not');
  writeFileSync(path, `${'dd'.repeat(32)}\n`, { mode: 0o600 });
  t.ok(await peerTokenMatches(tf, `Bearer ${'dd'.repeat(32)}`), 'a rotated token matches without a restart');
  chmodSync(path, 0o644);
  t.notOk(await peerTokenMatches(tf, `Bearer ${'dd'.repeat(32)}`), 'an unsafe token file matches nothing');
});
