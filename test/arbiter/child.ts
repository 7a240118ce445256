/** Spawned-daemon helpers: build dist once, start `hq-arbiter serve`, wait until it listens. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { FAST } from './helper.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const CLI = join(ROOT, 'apps/arbiter/dist/cli.js');

/** The environment for spawned daemons: without tap's NODE_OPTIONS hooks (they slow every start). */
export function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'NODE_OPTIONS' || k === 'NODE_V8_COVERAGE' || k.startsWith('_TAPJS_') || k.startsWith('TAP')) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

let built = false;

/** True when some `src/**.ts` of the project is newer than its `dist/**.js` (or that is missing). */
function stale(project: string): boolean {
  const src = join(ROOT, project, 'src');
  for (const entry of readdirSync(src, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = join(entry.parentPath, entry.name);
    const out = join(ROOT, project, 'dist', relative(src, file).replace(/\.ts$/, '.js'));
    if (!existsSync(out) || statSync(out).mtimeMs < statSync(file).mtimeMs) return true;
  }
  return false;
}

/** `tsc -b apps/arbiter` when its dist (or lease-core's) is older than the sources. */
export function buildDist(): void {
  if (built) return;
  built = true;
  if (!stale('apps/arbiter') && !stale('packages/lease-core') && !stale('packages/runtime')) return;
  try {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-b', join(ROOT, 'apps/arbiter')], {
      stdio: 'pipe',
      env: childEnv(),
    });
  } catch (err) {
    // Type errors elsewhere in the shared checkout (work in progress) must not stop these tests
    // while tsc still emitted a dist to run; without a dist there is nothing to test.
    if (!existsSync(CLI)) throw err;
    process.stderr.write(
      `tsc -b apps/arbiter reported errors; testing the emitted dist\n${String((err as { stdout?: unknown }).stdout ?? '')}`,
    );
  }
}

export function writeConfig(dir: string, extra: Record<string, unknown> = {}): string {
  const path = join(dir, 'arbiter.json');
  writeFileSync(
    path,
    JSON.stringify({ ...FAST, dataDir: join(dir, 'var'), listen: { host: '127.0.0.1', port: 0 }, ...extra }),
  );
  return path;
}

export interface Child {
  readonly proc: ChildProcess;
  readonly port: number;
  readonly base: string;
  readonly lines: Array<Record<string, unknown>>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `hq-arbiter serve`; the child is SIGKILLed at teardown if the test left it running. */
export async function startArbiter(
  t: { teardown(fn: () => void): void },
  configPath: string,
  timeoutMs = 60_000,
): Promise<Child> {
  buildDist();
  const proc = spawn(process.execPath, [CLI, 'serve', '--config', configPath], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv(),
  });
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = '';
  proc.stderr!.on('data', (d) => {
    stderr += String(d);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.on('exit', (code, signal) => res({ code, signal })),
  );
  const port = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`arbiter did not listen in time; stderr: ${stderr}`)), timeoutMs);
    void exited.then((e) => rej(new Error(`arbiter exited ${e.code ?? e.signal}: ${stderr}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        const rec = JSON.parse(line) as Record<string, unknown>;
        lines.push(rec);
        if (rec['msg'] === 'hq-arbiter listening') {
          clearTimeout(timer);
          res(rec['port'] as number);
        }
      } catch {
        // not JSON
      }
    });
  });
  return { proc, port, base: `http://127.0.0.1:${port}`, lines, exited };
}
