/**
 * hq installs as it would be published: `npm run package` writes the two tarballs, and
 * `npm install -g --prefix TMP` of them — hq's own packages from the tarballs, the third-party
 * ones from the registry — puts hq, hq-agent and hq-arbiter on PATH. Each bin then runs from
 * that PATH alone: --version, a token (the native SQLite module), an arbiter and an agent that
 * start and stop, a fence check.
 *
 * Needs the npm registry: without it the test is skipped and says so, except under CI=true,
 * where it fails. better-sqlite3's install downloads its prebuilt binary; the test serves that
 * download on loopback, packed from the binary this checkout's own install built for this Node, so
 * the install neither depends on GitHub nor compiles SQLite (minutes of CPU). A version this
 * checkout does not have is not served, and the install compiles it as a user's would.
 */
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { VERSION } from '../../packages/runtime/src/version.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CI = process.env['CI'] === 'true';
// Longer than the suite's 300 s per file: a compile of better-sqlite3 alone can take minutes.
t.setTimeout(20 * 60_000);

/** The environment of a user's shell: no npm_* of the test runner, no tap hooks, PATH = the prefix and node. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      /^npm_/i.test(k) ||
      k === 'NODE_OPTIONS' ||
      k === 'NODE_V8_COVERAGE' ||
      k.startsWith('TAP') ||
      k.startsWith('_TAPJS')
    )
      continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

function registryReachable(): { ok: boolean; why: string } {
  const r = spawnSync('npm', ['ping'], { encoding: 'utf8', timeout: 20_000, env: cleanEnv() });
  return r.status === 0
    ? { ok: true, why: '' }
    : { ok: false, why: (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n').pop() ?? '' };
}

/** Starts a bin, waits for a JSON log line that `ready` accepts, returns it and the process. */
function startUntil(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (line: Record<string, unknown>) => boolean,
) {
  const proc = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((done) => proc.on('exit', (code) => done(code)));
  const line = new Promise<Record<string, unknown>>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`${cmd} did not get ready in 30 s: ${stderr.trim()}`)), 30_000);
    createInterface({ input: proc.stdout }).on('line', (raw) => {
      try {
        const l = JSON.parse(raw) as Record<string, unknown>;
        if (ready(l)) {
          clearTimeout(timer);
          done(l);
        }
      } catch {
        /* not JSON */
      }
    });
    proc.on('exit', (code) => fail(new Error(`${cmd} exited ${code} before it was ready: ${stderr.trim()}`)));
  });
  return { proc, line, exited };
}

/**
 * A loopback mirror of better-sqlite3's prebuilt binaries holding one: this checkout's build, for
 * this Node's ABI, platform and arch (prebuild-install asks for exactly that file). Returns the env
 * that points the install at it, and whether it was asked for; null when there is nothing to serve.
 */
async function prebuiltMirror(t: Test, dir: string): Promise<{ env: NodeJS.ProcessEnv; served: () => boolean } | null> {
  const pkgDir = resolve(createRequire(import.meta.url).resolve('better-sqlite3/package.json'), '..');
  const version = (JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  const file = join(dir, 'better-sqlite3-prebuilt.tar.gz');
  const tar = spawnSync('tar', ['-czf', file, '-C', pkgDir, 'build/Release/better_sqlite3.node'], { encoding: 'utf8' });
  if (tar.status !== 0) return null;
  const wanted = `/v${version}/better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  let served = false;
  const server = createServer((req, res) => {
    if (req.url !== wanted) return void res.writeHead(404).end();
    served = true;
    res.writeHead(200, { 'content-type': 'application/gzip' }).end(readFileSync(file));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  t.teardown(() => void server.close());
  const port = (server.address() as { port: number }).port;
  return { env: { npm_config_better_sqlite3_binary_host: `http://127.0.0.1:${port}` }, served: () => served };
}

t.test('npm install -g of the packed tarballs puts hq, hq-agent and hq-arbiter on PATH, and each runs', async (t) => {
  const reach = registryReachable();
  if (!reach.ok) {
    if (CI) t.fail(`the npm registry is unreachable under CI=true (${reach.why})`);
    else
      t.skip(`the npm registry is unreachable (${reach.why}); the install needs it for the third-party dependencies`);
    return;
  }
  t.setTimeout(20 * 60_000);
  const dir = mkdtempSync(join(tmpdir(), 'hq-install-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  const pack = spawnSync(process.execPath, [join(ROOT, 'scripts/pack.mjs'), '--out', join(dir, 'tgz')], {
    encoding: 'utf8',
    env: cleanEnv(),
    timeout: 300_000,
  });
  t.equal(pack.status, 0, `npm run package succeeds (${pack.stderr.trim().split('\n').pop()})`);
  const tarballs = readdirSync(join(dir, 'tgz')).sort();
  t.same(tarballs, [`hq-agent-${VERSION}.tgz`, `hq-arbiter-${VERSION}.tgz`], 'two tarballs, named with the version');

  const prefix = join(dir, 'prefix');
  const mirror = await prebuiltMirror(t, dir);
  // Asynchronous: the mirror answers from this process while npm installs.
  const install = await new Promise<{ status: number | null; stderr: string }>((done) => {
    const p = spawn(
      'npm',
      [
        'install',
        '-g',
        '--prefer-offline',
        '--prefix',
        prefix,
        '--no-audit',
        '--no-fund',
        ...tarballs.map((f) => join(dir, 'tgz', f)),
      ],
      {
        env: cleanEnv(mirror?.env),
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 15 * 60_000,
      },
    );
    let stderr = '';
    p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    p.on('close', (status) => done({ status, stderr }));
  });
  t.equal(install.status, 0, `npm install -g succeeds (${install.stderr.trim().split('\n').slice(-3).join(' | ')})`);
  t.comment(
    mirror?.served() === true
      ? "better-sqlite3's binary came from the loopback mirror"
      : 'better-sqlite3 was compiled: the mirror had no binary for the version npm chose',
  );
  const bin = join(prefix, 'bin');
  t.same(readdirSync(bin).sort(), ['hq', 'hq-agent', 'hq-arbiter'], 'the prefix has the three bins');

  // From here on only PATH finds them, as in a user's shell.
  const env = cleanEnv({
    PATH: `${bin}:${resolve(process.execPath, '..')}:/usr/bin:/bin`,
    HOME: dir,
    HQ_CONFIG: '',
    HQ_ARBITER_CONFIG: '',
  });
  for (const name of ['hq', 'hq-agent', 'hq-arbiter']) {
    const r = spawnSync(name, ['--version'], { encoding: 'utf8', env });
    t.equal(r.status, 0, `${name} --version exits 0 (${r.stderr.trim()})`);
    t.equal(r.stdout, `${VERSION}\n`, `${name} --version prints ${VERSION}`);
  }

  const arbiterConfig = join(dir, 'arbiter.json');
  writeFileSync(
    arbiterConfig,
    JSON.stringify({ dataDir: join(dir, 'var'), listen: { host: '127.0.0.1', port: 0 }, tailscaleBin: '' }),
  );
  const token = spawnSync('hq-arbiter', ['token', 'issue', 'mbp', '--config', arbiterConfig], {
    encoding: 'utf8',
    env,
  });
  t.equal(token.status, 0, `hq-arbiter token issue exits 0: the native SQLite module loads (${token.stderr.trim()})`);
  t.match(token.stdout, /^[0-9a-f]{64}\n$/, 'and prints a token');

  const arbiter = startUntil(
    'hq-arbiter',
    ['serve', '--config', arbiterConfig],
    env,
    (l) => typeof l['port'] === 'number' && l['msg'] === 'hq-arbiter listening',
  );
  t.teardown(() => void arbiter.proc.kill('SIGKILL'));
  const port = (await arbiter.line)['port'] as number;
  const health = (await (await fetch(`http://127.0.0.1:${port}/v1/health`)).json()) as {
    status: string;
    version: string;
  };
  t.match(health, { status: 'ok', version: VERSION }, 'the installed arbiter serves /v1/health with the version');

  const state = join(dir, 'state');
  // The member token issued above, where the agent looks for it (it refuses to start without).
  mkdirSync(state, { recursive: true, mode: 0o700 });
  writeFileSync(join(state, 'token'), token.stdout, { mode: 0o600 });
  const agentConfig = join(dir, 'agent.json');
  writeFileSync(
    agentConfig,
    JSON.stringify({
      hostName: 'mbp',
      stateDir: state,
      arbiterUrl: `http://127.0.0.1:${port}`,
      listen: { host: '127.0.0.1', port: 0 },
      tailscaleBin: '',
      peers: {},
    }),
  );
  const agent = startUntil('hq-agent', ['--config', agentConfig], env, (l) => l['event'] === 'agent-started');
  t.teardown(() => void agent.proc.kill('SIGKILL'));
  await agent.line;
  const fence = spawnSync('hq', ['fence', 'check', '--role', 'cron', '--config', agentConfig], {
    encoding: 'utf8',
    env,
  });
  t.equal(fence.status, 1, `hq fence check answers skip (no lease yet) with exit 1 (${fence.stderr.trim()})`);
  t.match(fence.stdout, /^skip: no-lease/, 'from the installed agent');

  agent.proc.kill('SIGTERM');
  arbiter.proc.kill('SIGTERM');
  t.equal(await agent.exited, 0, 'the installed agent stops on SIGTERM with exit 0');
  t.equal(await arbiter.exited, 0, 'the installed arbiter stops on SIGTERM with exit 0');
});
