/**
 * deploy/systemd: the unit files parse, use only directives systemd knows, agree with the
 * example configs and the packages' bin entries, and — where `systemd-analyze` is installed —
 * reach an exposure level of at most 2.5 (`security --offline=yes`) and verify cleanly.
 * Without `systemd-analyze` the exposure and verify checks are not run, and the suite says so.
 */
import t from 'tap';
import { missingTool } from '../missing-tool.js';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const unitDir = join(root, 'deploy/systemd');
const MAX_EXPOSURE = 2.5;
const DAEMONS = ['hq-arbiter.service', 'hq-agent.service'] as const;

interface Entry {
  readonly key: string;
  readonly value: string;
  readonly line: number;
}
interface Unit {
  readonly sections: Map<string, Entry[]>;
  readonly problems: string[];
}

/** systemd's unit syntax: `[Section]`, `Key=Value`, `#`/`;` comments, `\` continuations. */
function parseUnit(text: string): Unit {
  const sections = new Map<string, Entry[]>();
  const problems: string[] = [];
  let current: Entry[] | null = null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    let line = (lines[i] ?? '').trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[([A-Za-z]+)\]$/.exec(line);
    if (section !== null) {
      const name = section[1] as string;
      if (sections.has(name)) problems.push(`line ${lineNo}: section [${name}] appears twice`);
      current = [];
      sections.set(name, current);
      continue;
    }
    while (line.endsWith('\\') && i + 1 < lines.length) {
      i++;
      line = `${line.slice(0, -1)} ${(lines[i] ?? '').trim()}`;
    }
    const kv = /^([A-Za-z][A-Za-z0-9]*)\s*=\s*(.*)$/.exec(line);
    if (kv === null) {
      problems.push(`line ${lineNo}: not a Key=Value line: ${line}`);
      continue;
    }
    if (current === null) {
      problems.push(`line ${lineNo}: ${kv[1]}= before any section`);
      continue;
    }
    current.push({ key: kv[1] as string, value: kv[2] as string, line: lineNo });
  }
  return { sections, problems };
}

/** The directive names systemd 252 knows (fixtures/systemd-directives.txt), per section. */
function knownDirectives(): Map<string, Set<string>> {
  const known = new Map<string, Set<string>>();
  let current: Set<string> | null = null;
  for (const raw of readFileSync(join(root, 'test/deploy/fixtures/systemd-directives.txt'), 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const section = /^\[([A-Za-z]+)\]$/.exec(line);
    if (section !== null) {
      current = new Set();
      known.set(section[1] as string, current);
    } else if (current !== null) {
      current.add(line);
    }
  }
  return known;
}

function values(unit: Unit, section: string, key: string): string[] {
  return (unit.sections.get(section) ?? []).filter((e) => e.key === key).map((e) => e.value);
}

function one(unit: Unit, section: string, key: string): string | undefined {
  const all = values(unit, section, key);
  return all[all.length - 1];
}

const unitFiles = readdirSync(unitDir)
  .filter((f) => f.endsWith('.service') || f.endsWith('.timer'))
  .sort();
const units = new Map<string, Unit>(unitFiles.map((f) => [f, parseUnit(readFileSync(join(unitDir, f), 'utf8'))]));
const unit = (name: string): Unit => {
  const u = units.get(name);
  if (u === undefined) throw new Error(`deploy/systemd/${name} is missing`);
  return u;
};

function readJson(rel: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(root, rel), 'utf8')) as Record<string, unknown>;
}

t.test(
  'the deploy directory holds both daemon units, the fenced example with its timer and the service example',
  async (t) => {
    for (const name of [
      ...DAEMONS,
      'hq-fenced-example.service',
      'hq-fenced-example.timer',
      'hq-service-example.service',
    ]) {
      t.ok(unitFiles.includes(name), `deploy/systemd/${name} exists`);
    }
  },
);

t.test('every unit file parses and uses only sections and directives systemd knows', async (t) => {
  const known = knownDirectives();
  for (const [name, u] of units) {
    t.same(u.problems, [], `${name} has no malformed lines`);
    const allowed = name.endsWith('.timer') ? ['Unit', 'Timer', 'Install'] : ['Unit', 'Service', 'Install'];
    for (const [section, entries] of u.sections) {
      t.ok(allowed.includes(section), `${name}: section [${section}] belongs in a ${name.split('.').pop()} unit`);
      const directives = known.get(section) ?? new Set<string>();
      for (const e of entries) {
        t.ok(directives.has(e.key), `${name}:${e.line}: ${e.key}= is a directive of [${section}]`);
      }
    }
    t.ok(u.sections.has('Unit'), `${name} has a [Unit] section`);
    t.ok(one(u, 'Unit', 'Description') !== undefined, `${name} has a Description=`);
  }
});

t.test('no unit sets MemoryDenyWriteExecute, which would break V8’s JIT', async (t) => {
  for (const [name, u] of units) {
    for (const [section, entries] of u.sections) {
      t.notOk(
        entries.some((e) => e.key === 'MemoryDenyWriteExecute'),
        `${name} [${section}] does not set MemoryDenyWriteExecute=`,
      );
    }
  }
});

t.test('both daemons run as the static hq user with restart, stop timeout, umask and state directory', async (t) => {
  for (const name of DAEMONS) {
    const u = unit(name);
    t.equal(one(u, 'Service', 'User'), 'hq', `${name} runs as User=hq`);
    t.equal(one(u, 'Service', 'Group'), 'hq', `${name} runs with Group=hq, the group fenced jobs join`);
    t.equal(
      one(u, 'Service', 'DynamicUser'),
      undefined,
      `${name} does not use DynamicUser= (a static group is needed)`,
    );
    t.equal(one(u, 'Service', 'Restart'), 'on-failure', `${name} restarts on failure`);
    t.equal(
      one(u, 'Service', 'RestartPreventExitStatus'),
      '2',
      `${name} does not restart after a config error (exit 2)`,
    );
    t.equal(one(u, 'Service', 'UMask'), '0077', `${name} creates private files (UMask=0077)`);
    t.equal(one(u, 'Service', 'NoNewPrivileges'), 'yes', `${name} sets NoNewPrivileges=yes`);
    t.equal(one(u, 'Service', 'ProtectSystem'), 'strict', `${name} mounts the OS read-only (ProtectSystem=strict)`);
    t.equal(one(u, 'Service', 'CapabilityBoundingSet'), '', `${name} drops every capability`);
    t.equal(one(u, 'Install', 'WantedBy'), 'multi-user.target', `${name} is wanted by multi-user.target`);
    const stop = one(u, 'Service', 'TimeoutStopSec') ?? '';
    const seconds = Number(/^(\d+)s?$/.exec(stop)?.[1]);
    t.ok(
      seconds > 10 && seconds <= 30,
      `${name}: TimeoutStopSec=${stop} leaves room for the 10 s shutdown and stays short`,
    );
    t.equal(
      one(u, 'Service', 'KillMode'),
      undefined,
      `${name} keeps the default control-group kill (fenced jobs are not its children)`,
    );
  }
});

/** The TypeScript source that `tsc -b` compiles to `dist/…js` in a workspace package (its tsconfig's rootDir → outDir). */
function sourceOf(pkgDir: string, built: string): string {
  const ts = readJson(`${pkgDir}/tsconfig.json`) as { compilerOptions?: { rootDir?: string; outDir?: string } };
  const outDir = ts.compilerOptions?.outDir ?? 'dist';
  const rootDir = ts.compilerOptions?.rootDir ?? 'src';
  const rel = built.slice(pkgDir.length + 1);
  return rel.startsWith(`${outDir}/`)
    ? join(pkgDir, rootDir, rel.slice(outDir.length + 1).replace(/\.js$/, '.ts'))
    : '';
}

t.test(
  'each daemon starts its package’s built CLI, installed globally under /usr/local, through /usr/bin/env node',
  async (t) => {
    const cases = [
      ['hq-arbiter.service', 'apps/arbiter', 'apps/arbiter/dist/cli.js', ['serve', '--config', '/etc/hq/arbiter.json']],
      ['hq-agent.service', 'apps/agent', 'apps/agent/dist/daemon-cli.js', ['--config', '/etc/hq/agent.json']],
    ] as const;
    for (const [name, pkgDir, built, rest] of cases) {
      const exec = (one(unit(name), 'Service', 'ExecStart') ?? '').split(/\s+/);
      t.same(exec.slice(0, 2), ['/usr/bin/env', 'node'], `${name} runs node found by /usr/bin/env`);
      const pkgName = (readJson(`${pkgDir}/package.json`) as { name: string }).name;
      const installed = `/usr/local/lib/node_modules/${pkgName}/${built.slice(pkgDir.length + 1)}`;
      t.equal(exec[2], installed, `${name} runs ${installed} (npm install -g of the tarball)`);
      const source = sourceOf(pkgDir, built);
      t.ok(source !== '' && existsSync(join(root, source)), `${built} is built from ${source}, which exists`);
      t.same(exec.slice(3), [...rest], `${name} passes ${rest.join(' ')}`);
    }
  },
);

t.test('the arbiter unit’s state directory is the dataDir of the example arbiter config', async (t) => {
  const u = unit('hq-arbiter.service');
  const config = readJson('deploy/config/arbiter.json');
  t.equal(one(u, 'Service', 'StateDirectory'), 'hq', 'StateDirectory=hq (→ /var/lib/hq)');
  t.equal(one(u, 'Service', 'StateDirectoryMode'), '0700', 'the data directory is private to hq');
  t.equal(config['dataDir'], '/var/lib/hq', 'arbiter.json puts dataDir in /var/lib/hq');
});

t.test('the agent unit’s state and runtime directories hold the example node-b stateDir and socket', async (t) => {
  const u = unit('hq-agent.service');
  const config = readJson('deploy/config/agent.node-b.json');
  t.equal(one(u, 'Service', 'StateDirectory'), 'hq-agent', 'StateDirectory=hq-agent (→ /var/lib/hq-agent)');
  t.equal(one(u, 'Service', 'StateDirectoryMode'), '0700', 'the state directory is 0700, as the agent requires');
  t.equal(
    one(u, 'Service', 'RuntimeDirectory'),
    'hq-agent',
    'RuntimeDirectory=hq-agent (→ /run/hq-agent) for the socket',
  );
  t.equal(one(u, 'Service', 'RuntimeDirectoryMode'), '0750', 'group hq may enter the socket directory, nobody else');
  t.equal(config['stateDir'], '/var/lib/hq-agent', 'agent.node-b.json puts stateDir in the StateDirectory');
  t.equal(
    config['socketPath'],
    '/run/hq-agent/agent.sock',
    'agent.node-b.json puts the socket in the RuntimeDirectory',
  );
  for (const key of ['tokenFile', 'peerTokenFile']) {
    t.match(
      String(config[key]),
      /^\/var\/lib\/hq-agent\/[^/]+$/,
      `agent.node-b.json keeps ${key} in the state directory`,
    );
  }
});

t.test('the fenced example runs its job through hq fence run --role cron from a 5-minute timer', async (t) => {
  const svc = unit('hq-fenced-example.service');
  const timer = unit('hq-fenced-example.timer');
  const exec = (one(svc, 'Service', 'ExecStart') ?? '').split(/\s+/);
  t.same(
    exec,
    ['/usr/bin/env', 'hq', 'fence', 'run', '--role', 'cron', '--', '/usr/local/bin/job.sh'],
    'ExecStart is hq fence run --role cron -- /usr/local/bin/job.sh',
  );
  t.equal(one(svc, 'Service', 'Type'), 'oneshot', 'the job is a oneshot service');
  t.equal(one(svc, 'Service', 'SupplementaryGroups'), 'hq', 'the job joins group hq to reach the fence socket');
  t.equal(
    one(svc, 'Service', 'KillMode'),
    'mixed',
    'stop signals hq fence run, which forwards to the job (KillMode=mixed)',
  );
  t.not(one(svc, 'Service', 'User'), undefined, 'the job runs as a named user, not root');
  t.equal(one(timer, 'Timer', 'OnCalendar'), '*:0/5', 'the timer fires every 5 minutes');
  t.equal(one(timer, 'Install', 'WantedBy'), 'timers.target', 'the timer is wanted by timers.target');
});

t.test(
  'the service example follows HQ: hq fence run --follow, the follower restarted always, never after a config error',
  async (t) => {
    const svc = unit('hq-service-example.service');
    const exec = (one(svc, 'Service', 'ExecStart') ?? '').split(/\s+/);
    t.same(
      exec,
      ['/usr/bin/env', 'hq', 'fence', 'run', '--follow', '--role', 'telegram-poller', '--', '/usr/local/bin/poller'],
      'ExecStart is hq fence run --follow --role telegram-poller -- /usr/local/bin/poller',
    );
    t.equal(one(svc, 'Service', 'Type'), 'exec', 'a long-running service (Type=exec: a missing hq fails the start)');
    t.equal(one(svc, 'Service', 'Restart'), 'always', 'the follower is restarted whatever its exit (Restart=always)');
    t.equal(one(svc, 'Service', 'RestartPreventExitStatus'), '2', 'but not after a usage or config error (exit 2)');
    t.equal(
      one(svc, 'Service', 'KillMode'),
      'mixed',
      'stop signals the follower, which stops the command (KillMode=mixed)',
    );
    t.equal(one(svc, 'Service', 'SupplementaryGroups'), 'hq', 'the service joins group hq to reach the fence socket');
    t.not(one(svc, 'Service', 'User'), undefined, 'it runs as a named user, not root');
    t.equal(one(svc, 'Service', 'NoNewPrivileges'), 'yes', 'NoNewPrivileges=yes, as the fenced example');
    t.equal(one(svc, 'Service', 'ProtectSystem'), 'full', 'ProtectSystem=full, as the fenced example');
    t.equal(one(svc, 'Service', 'PrivateTmp'), 'yes', 'PrivateTmp=yes, as the fenced example');
    const stop = Number(/^(\d+)s?$/.exec(one(svc, 'Service', 'TimeoutStopSec') ?? '')?.[1]);
    t.ok(stop > 5, `TimeoutStopSec=${stop} s leaves the follower its 5 s grace`);
    t.equal(one(svc, 'Install', 'WantedBy'), 'multi-user.target', 'enabled at boot');
  },
);

// ---- systemd-analyze --------------------------------------------------------------------

function run(args: string[]): { status: number | null; out: string; missing: boolean } {
  const r = spawnSync('systemd-analyze', args, {
    cwd: unitDir,
    encoding: 'utf8',
    env: { ...process.env, SYSTEMD_COLORS: '0', SYSTEMD_PAGER: '' },
  });
  const missing = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, missing };
}

const version = run(['--version']);
const systemdVersion = Number(/systemd (\d+)/.exec(version.out)?.[1] ?? 0);

if (version.missing) {
  t.test('systemd-analyze checks', async (t) => {
    t.comment('systemd-analyze is not on PATH (install the "systemd" package to run these checks)');
    missingTool(t, 'systemd-analyze not installed: exposure/verify checks not run');
  });
} else if (systemdVersion < 250) {
  t.test('systemd-analyze checks', async (t) => {
    t.comment(`systemd ${systemdVersion} has no "security --offline" (needs 250 or later)`);
    missingTool(t, `systemd-analyze ${systemdVersion} too old: exposure/verify checks not run`);
  });
} else {
  t.test(`both daemons reach an exposure level of at most ${MAX_EXPOSURE} offline`, async (t) => {
    for (const name of DAEMONS) {
      const r = run(['security', '--offline=yes', '--no-pager', name]);
      t.equal(r.status, 0, `systemd-analyze security --offline=yes ${name} exits 0`);
      const m = /Overall exposure level for (\S+): ([0-9.]+)/.exec(r.out);
      t.ok(m !== null, `the security report for ${name} states an overall exposure level`);
      const level = Number(m?.[2]);
      t.comment(`systemd ${systemdVersion}: ${name} exposure ${level}`);
      t.ok(level <= MAX_EXPOSURE, `${name} exposure ${level} is at most ${MAX_EXPOSURE}`);
    }
  });

  t.test('systemd-analyze verify accepts every unit without a warning about it', async (t) => {
    const r = run(['verify', '--man=no', ...unitFiles]);
    t.equal(r.status, 0, `systemd-analyze verify ${unitFiles.join(' ')} exits 0`);
    const ours = r.out.split('\n').filter((line) => unitFiles.some((f) => line.includes(f)));
    t.same(ours, [], 'verify prints nothing about our units');
    if (r.out.trim() !== '') t.comment(`verify said (about other units):\n${r.out.trim()}`);
  });

  t.test('the checks are real: a broken copy of a unit fails them', async (t) => {
    const dir = t.testdir({
      'hq-agent.service': readFileSync(join(unitDir, 'hq-agent.service'), 'utf8')
        .replace(/^ExecStart=\/usr\/bin\/env /m, 'ExecStart=/nonexistent/env ')
        .replace(/^\[Install\]$/m, 'NoSuchDirective=yes\n[Install]'),
      'bare.service': '[Unit]\nDescription=bare\n[Service]\nExecStart=/usr/bin/env true\n',
    });
    const verify = spawnSync('systemd-analyze', ['verify', '--man=no', 'hq-agent.service'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const said = `${verify.stdout}${verify.stderr}`;
    t.not(verify.status, 0, 'verify fails when ExecStart= is not executable');
    t.match(said, /NoSuchDirective/, 'verify reports the unknown directive');
    const security = spawnSync('systemd-analyze', ['security', '--offline=yes', '--no-pager', 'bare.service'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const level = Number(/Overall exposure level for \S+: ([0-9.]+)/.exec(`${security.stdout}`)?.[1]);
    t.ok(level > MAX_EXPOSURE, `an unhardened unit scores above ${MAX_EXPOSURE} (got ${level})`);
  });
}
