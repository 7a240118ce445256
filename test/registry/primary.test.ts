/**
 * resolvePrimary across real peer HTTP servers on 127.0.0.1 (two alive, one dead, one slow, one
 * redirecting), the seen-generation floor, token binding, and the static mode's join file.
 */
import t from 'tap';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import {
  readJoinFile,
  resolvePrimary,
  seenFloor,
  type GenerationFloor,
  type PrimaryCandidate,
} from '../../apps/agent/src/primary.js';

interface Peer {
  readonly url: string;
  readonly auth: (string | undefined)[];
  answer: unknown;
  close(): Promise<void>;
}

async function peer(
  t: { teardown(fn: () => unknown): void },
  answer: unknown,
  opts: { delayMs?: number; redirectTo?: string } = {},
): Promise<Peer> {
  const auth: (string | undefined)[] = [];
  const p = { answer } as { answer: unknown };
  const server: Server = createServer((req, res) => {
    auth.push(req.headers.authorization);
    if (opts.redirectTo !== undefined) {
      res.writeHead(307, { location: `${opts.redirectTo}${req.url ?? ''}` });
      res.end();
      return;
    }
    setTimeout(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(p.answer));
    }, opts.delayMs ?? 0);
  });
  await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1' }, () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  t.teardown(close);
  return Object.assign(p, { url, auth, close });
}

/** A port that was just listening and is now closed: connection refused. */
async function deadUrl(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const p = await peer(t, null);
  await p.close();
  return p.url;
}

t.test('lease mode picks the highest generation among two live agents and a dead one', async (t) => {
  const a = await peer(t, { known: true, holder: 'node-b', generation: 7 });
  const b = await peer(t, { known: true, holder: 'mbp', generation: 5 });
  const dead = await deadUrl(t);
  const candidates: PrimaryCandidate[] = [
    { host: 'mbp', url: a.url },
    { host: 'node-b', url: b.url },
    { host: 'spare', url: dead },
  ];
  const r = await resolvePrimary({ mode: 'lease', candidates, seenGeneration: 3, timeoutMs: 2000 });
  t.match(
    r,
    { mode: 'lease', source: 'answer', known: true, holder: 'node-b', generation: 7, url: b.url },
    "node-b at generation 7 wins, and its URL is node-b's",
  );
  t.match(
    r.mode === 'lease' ? r.answers.map((x) => x.status) : [],
    ['usable', 'usable', 'unreachable'],
    'the dead candidate is reported unreachable',
  );
});

t.test('an answer older than the seen generation is never accepted', async (t) => {
  const a = await peer(t, { known: true, holder: 'node-b', generation: 7 });
  const b = await peer(t, { known: true, holder: 'mbp', generation: 5 });
  const candidates: PrimaryCandidate[] = [
    { host: 'mbp', url: a.url },
    { host: 'node-b', url: b.url },
  ];
  const none = await resolvePrimary({ mode: 'lease', candidates, seenGeneration: 8, timeoutMs: 2000 });
  t.match(
    none,
    { source: 'fallback', known: false, holder: 'mbp', generation: null, floor: 8 },
    'with every answer below the floor it falls back to the first candidate, unknown',
  );
  t.match(
    none.mode === 'lease' && none.source === 'fallback' ? none.reason : '',
    /older than generation 8/,
    'and says why',
  );
  const floor: GenerationFloor = { value: 0 };
  const first = await resolvePrimary({ mode: 'lease', candidates, floor, timeoutMs: 2000 });
  t.equal(first.mode === 'lease' ? first.generation : null, 7, 'generation 7 is accepted');
  t.equal(floor.value, 7, 'and raises the floor');
  a.answer = { known: true, holder: 'mbp', generation: 6 };
  const older = await resolvePrimary({ mode: 'lease', candidates, floor, timeoutMs: 2000 });
  t.match(older, { source: 'fallback', known: false }, 'a later call never goes back to generation 6 or 5');
  t.equal(floor.value, 7, 'the floor never goes down');
});

t.test('only a listed candidate can be the holder, and malformed answers are ignored', async (t) => {
  const a = await peer(t, { known: true, holder: 'intruder', generation: 99 });
  const b = await peer(t, { known: true, holder: 'node-b', generation: '100' });
  const c = await peer(t, { known: true, holder: 'mbp', generation: 4 });
  const d = await peer(t, { known: false, holder: null, generation: 50 });
  const candidates: PrimaryCandidate[] = [
    { host: 'mbp', url: a.url },
    { host: 'node-b', url: b.url },
    { host: 'c', url: c.url },
    { host: 'd', url: d.url },
  ];
  const r = await resolvePrimary({ mode: 'lease', candidates, timeoutMs: 2000 });
  t.match(
    r,
    { source: 'answer', holder: 'mbp', generation: 4 },
    'the usable answer wins over higher generations that are not usable',
  );
  t.same(
    r.mode === 'lease' ? r.answers.map((x) => x.status) : [],
    ['not-a-candidate', 'invalid', 'usable', 'unknown'],
    'each answer is classified',
  );
});

t.test('a slow candidate is abandoned after the timeout', async (t) => {
  const slow = await peer(t, { known: true, holder: 'mbp', generation: 9 }, { delayMs: 1500 });
  const fast = await peer(t, { known: true, holder: 'mbp', generation: 2 });
  const started = Date.now();
  const r = await resolvePrimary({
    mode: 'lease',
    candidates: [
      { host: 'mbp', url: slow.url },
      { host: 'node-b', url: fast.url },
    ],
    timeoutMs: 300,
  });
  t.ok(Date.now() - started < 1200, 'the resolution does not wait for the slow answer');
  t.match(r, { source: 'answer', generation: 2 }, 'the late generation 9 is never acted on');
});

t.test('no answer at all falls back to the first candidate', async (t) => {
  const dead1 = await deadUrl(t);
  const dead2 = await deadUrl(t);
  const r = await resolvePrimary({
    mode: 'lease',
    candidates: [
      { host: 'mbp', url: dead1 },
      { host: 'node-b', url: dead2 },
    ],
    timeoutMs: 1000,
  });
  t.match(
    r,
    {
      source: 'fallback',
      known: false,
      holder: 'mbp',
      url: dead1,
      reason: 'no candidate answered with a known holder',
    },
    'the first candidate, marked unknown',
  );
});

t.test('a token is only ever sent to the URL it belongs to, also across a redirect', async (t) => {
  const a = await peer(t, { known: true, holder: 'mbp', generation: 3 });
  const b = await peer(t, { known: true, holder: 'mbp', generation: 3 });
  const redirector = await peer(t, null, { redirectTo: a.url });
  const ta = 'a'.repeat(64);
  const tb = 'b'.repeat(64);
  const tr = 'c'.repeat(64);
  await resolvePrimary({
    mode: 'lease',
    candidates: [
      { host: 'mbp', url: a.url, token: ta },
      { host: 'node-b', url: b.url, token: tb },
      { host: 'r', url: redirector.url, token: tr },
    ],
    timeoutMs: 2000,
  });
  t.same(a.auth, [`Bearer ${ta}`], "mbp's agent saw only its own token");
  t.same(b.auth, [`Bearer ${tb}`], "node-b's agent saw only its own token");
  t.same(redirector.auth, [`Bearer ${tr}`], 'the redirecting peer saw its own token');
  t.notOk(a.auth.includes(`Bearer ${tr}`), 'the redirect was not followed with its token');
  const c = await peer(t, { known: true, holder: 'mbp', generation: 3 });
  await resolvePrimary({ mode: 'lease', candidates: [{ host: 'mbp', url: c.url }], timeoutMs: 2000 });
  t.same(c.auth, [undefined], 'a candidate without a token gets no Authorization header');
});

t.test('static mode: the configured URL, else a well-formed 0600 join file, else this host', async (t) => {
  const dir = t.testdir();
  const join0600 = join(dir, 'join.json');
  writeFileSync(join0600, JSON.stringify({ url: 'http://127.0.0.1:8470', token: 'd'.repeat(64), host: 'cloud-vm' }));
  chmodSync(join0600, 0o600);
  const cfg = await resolvePrimary({
    mode: 'static',
    configUrl: 'http://127.0.0.1:9999',
    joinFile: join0600,
    localUrl: 'http://127.0.0.1:8471',
  });
  t.match(
    cfg,
    { source: 'config', url: 'http://127.0.0.1:9999', token: null },
    'the configured URL comes first and carries no token',
  );
  const j = await resolvePrimary({ mode: 'static', joinFile: join0600, localUrl: 'http://127.0.0.1:8471' });
  t.match(
    j,
    { source: 'join-file', url: 'http://127.0.0.1:8470', token: 'd'.repeat(64), host: 'cloud-vm' },
    "the join file's URL comes with its own token",
  );
  const bad: [string, (p: string) => void][] = [
    [
      'a group-readable join file',
      (p) => {
        writeFileSync(p, JSON.stringify({ url: 'http://127.0.0.1:1' }));
        chmodSync(p, 0o640);
      },
    ],
    [
      'a join file that is not JSON',
      (p) => {
        writeFileSync(p, 'url=http://x');
        chmodSync(p, 0o600);
      },
    ],
    [
      'a join file with an unknown key',
      (p) => {
        writeFileSync(p, JSON.stringify({ url: 'http://127.0.0.1:1', admin: true }));
        chmodSync(p, 0o600);
      },
    ],
    [
      'a join file without a URL',
      (p) => {
        writeFileSync(p, JSON.stringify({ token: 'd'.repeat(64) }));
        chmodSync(p, 0o600);
      },
    ],
    [
      'a join file with credentials in the URL',
      (p) => {
        writeFileSync(p, JSON.stringify({ url: 'http://u:p@127.0.0.1:1' }));
        chmodSync(p, 0o600);
      },
    ],
    [
      'a join file with a non-http URL',
      (p) => {
        writeFileSync(p, JSON.stringify({ url: 'file:///etc/passwd' }));
        chmodSync(p, 0o600);
      },
    ],
    [
      'a join file whose token is not a token',
      (p) => {
        writeFileSync(p, JSON.stringify({ url: 'http://127.0.0.1:1', token: 'short' }));
        chmodSync(p, 0o600);
      },
    ],
    ['a symlinked join file', (p) => symlinkSync(join0600, p)],
  ];
  for (const [i, [name, make]] of bad.entries()) {
    const sub = join(dir, `case-${i}`);
    mkdirSync(sub);
    const p = join(sub, 'join.json');
    make(p);
    const r = await resolvePrimary({ mode: 'static', joinFile: p, localUrl: 'http://127.0.0.1:8471' });
    t.match(r, { source: 'local', url: 'http://127.0.0.1:8471', token: null }, `${name} is ignored: this host is used`);
    t.ok(r.mode === 'static' && typeof r.ignored === 'string', `${name}: the reason is reported`);
  }
  const missing = await resolvePrimary({
    mode: 'static',
    joinFile: join(dir, 'none.json'),
    localUrl: 'http://127.0.0.1:8471',
  });
  t.match(missing, { source: 'local' }, 'no join file: this host');
  t.match(await readJoinFile(join0600), { ok: true }, 'readJoinFile accepts the good file');
});

t.test('the seen-generation floor comes from the state directory and fails closed', async (t) => {
  const dir = t.testdir();
  t.equal(await seenFloor(dir), 0, 'a missing seen-generation is 0');
  writeFileSync(join(dir, 'seen-generation'), '12\n', { mode: 0o600 });
  t.equal(await seenFloor(dir), 12, 'the file gives the floor');
  writeFileSync(join(dir, 'seen-generation'), 'twelve\n');
  await t.rejects(seenFloor(dir), /refusing to guess/, 'a corrupt file is an error, not 0');
});

t.test('an answer above the generation ceiling is invalid: it neither wins nor raises the floor', async (t) => {
  const a = await peer(t, { known: true, holder: 'node-b', generation: 9_007_199_254_740_990 });
  const b = await peer(t, { known: true, holder: 'mbp', generation: 4 });
  const floor = { value: 0 };
  const r = await resolvePrimary({
    mode: 'lease',
    candidates: [
      { host: 'node-b', url: a.url },
      { host: 'mbp', url: b.url },
    ],
    timeoutMs: 2000,
    floor,
  });
  t.match(r, { source: 'answer', holder: 'mbp', generation: 4 }, 'the real answer wins');
  t.match(
    r.mode === 'lease' ? r.answers[0] : null,
    { status: 'invalid', problem: /above the generation ceiling/ },
    'the bogus one is named invalid',
  );
  t.equal(floor.value, 4, 'the floor is the real generation');
});
