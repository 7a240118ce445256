/**
 * deploy/launchd: com.hq.agent.plist is a well-formed XML property list (checked by a small
 * strict parser here, since `plutil` exists only on macOS) with the keys launchd needs to keep
 * the agent running for the logged-in user, and its placeholders match the README and the
 * example mbp config.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HOME = '/Users/YOU';

type Plist = string | number | boolean | Date | Uint8Array | Plist[] | Map<string, Plist>;

class PlistError extends Error {
  override name = 'PlistError';
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function decodeText(raw: string): string {
  if (raw.includes('<')) throw new PlistError('a bare "<" in text');
  return raw.replace(/&([^;\s]*);?/g, (whole, name: string) => {
    if (!whole.endsWith(';')) throw new PlistError(`a bare "&" in text near "${whole}"`);
    if (/^#\d+$/.test(name)) return String.fromCodePoint(Number(name.slice(1)));
    if (/^#x[0-9a-fA-F]+$/.test(name)) return String.fromCodePoint(parseInt(name.slice(2), 16));
    const e = ENTITIES[name];
    if (e === undefined) throw new PlistError(`unknown entity &${name};`);
    return e;
  });
}

type Token = { kind: 'open' | 'close' | 'empty'; name: string; attrs: string } | { kind: 'text'; text: string };

/** Splits the document into tags and text; the prolog (XML declaration, DOCTYPE) and comments are checked and dropped. */
function tokenize(xml: string): Token[] {
  if (!xml.startsWith('<?xml ')) throw new PlistError('the document does not start with an XML declaration');
  const tokens: Token[] = [];
  const re =
    /<\?xml[^?]*\?>|<!DOCTYPE plist[^>]*>|<!--([\s\S]*?)-->|<(\/?)([A-Za-z]+)((?:\s+[A-Za-z]+="[^"<]*")*)\s*(\/?)>|([^<]+)/gy;
  let m: RegExpExecArray | null;
  let at = 0;
  while (at < xml.length) {
    re.lastIndex = at;
    m = re.exec(xml);
    if (m === null) throw new PlistError(`malformed markup at offset ${at}: ${JSON.stringify(xml.slice(at, at + 30))}`);
    at = re.lastIndex;
    const [whole, comment, slash, name, attrs, selfClose, text] = m;
    if (whole.startsWith('<?xml') || whole.startsWith('<!DOCTYPE')) continue;
    if (comment !== undefined) {
      if (comment.includes('--')) throw new PlistError('"--" inside a comment');
      continue;
    }
    if (text !== undefined) {
      tokens.push({ kind: 'text', text: decodeText(text) });
    } else if (slash === '/') {
      if (selfClose === '/' || (attrs ?? '') !== '') throw new PlistError(`malformed closing tag ${whole}`);
      tokens.push({ kind: 'close', name: name as string, attrs: '' });
    } else {
      tokens.push({ kind: selfClose === '/' ? 'empty' : 'open', name: name as string, attrs: attrs ?? '' });
    }
  }
  return tokens;
}

/** A strict parser for Apple's XML plist format (PropertyList-1.0.dtd). Throws PlistError. */
function parsePlist(xml: string): Plist {
  const tokens = tokenize(xml).filter((tk) => !(tk.kind === 'text' && tk.text.trim() === ''));
  let i = 0;
  const next = (): Token => {
    const tk = tokens[i++];
    if (tk === undefined) throw new PlistError('unexpected end of document');
    return tk;
  };
  const textUntilClose = (name: string): string => {
    let tk = next();
    let text = '';
    if (tk.kind === 'text') {
      text = tk.text;
      tk = next();
    }
    if (tk.kind !== 'close' || tk.name !== name) throw new PlistError(`<${name}> is not closed by </${name}>`);
    return text;
  };
  const value = (): Plist => {
    const tk = next();
    if (tk.kind === 'text') throw new PlistError(`text "${tk.text.trim()}" where a value was expected`);
    if (tk.kind === 'close') throw new PlistError(`</${tk.name}> where a value was expected`);
    if (tk.kind === 'empty') {
      if (tk.name === 'true') return true;
      if (tk.name === 'false') return false;
      if (tk.name === 'string') return '';
      if (tk.name === 'dict') return new Map();
      if (tk.name === 'array') return [];
      throw new PlistError(`<${tk.name}/> is not a plist value`);
    }
    switch (tk.name) {
      case 'string':
        return textUntilClose('string');
      case 'integer': {
        const s = textUntilClose('integer').trim();
        if (!/^[+-]?\d+$/.test(s)) throw new PlistError(`<integer>${s}</integer> is not an integer`);
        return Number(s);
      }
      case 'real': {
        const s = textUntilClose('real').trim();
        if (!Number.isFinite(Number(s)) || s === '') throw new PlistError(`<real>${s}</real> is not a number`);
        return Number(s);
      }
      case 'date':
        return new Date(textUntilClose('date').trim());
      case 'data':
        return Uint8Array.from(Buffer.from(textUntilClose('data').replace(/\s+/g, ''), 'base64'));
      case 'array': {
        const out: Plist[] = [];
        for (;;) {
          const peek = tokens[i];
          if (peek?.kind === 'close' && peek.name === 'array') {
            i++;
            return out;
          }
          out.push(value());
        }
      }
      case 'dict': {
        const out = new Map<string, Plist>();
        for (;;) {
          const tk2 = next();
          if (tk2.kind === 'close' && tk2.name === 'dict') return out;
          if (tk2.kind !== 'open' || tk2.name !== 'key')
            throw new PlistError('a <dict> entry does not start with <key>');
          const key = textUntilClose('key');
          if (out.has(key)) throw new PlistError(`key "${key}" appears twice in one <dict>`);
          out.set(key, value());
        }
      }
      default:
        throw new PlistError(`<${tk.name}> is not a plist value`);
    }
  };
  const top = next();
  if (top.kind !== 'open' || top.name !== 'plist' || !/version="1\.0"/.test(top.attrs)) {
    throw new PlistError('the root element is not <plist version="1.0">');
  }
  const result = value();
  const end = next();
  if (end.kind !== 'close' || end.name !== 'plist') throw new PlistError('<plist> holds more than one value');
  if (i !== tokens.length) throw new PlistError('content after </plist>');
  return result;
}

/** launchd.plist(5) keys (macOS 14), so that a typo does not pass silently. */
const LAUNCHD_KEYS = new Set([
  'Label',
  'Disabled',
  'UserName',
  'GroupName',
  'inetdCompatibility',
  'LimitLoadToHosts',
  'LimitLoadFromHosts',
  'LimitLoadToSessionType',
  'LimitLoadToHardware',
  'LimitLoadFromHardware',
  'Program',
  'ProgramArguments',
  'EnableGlobbing',
  'EnableTransactions',
  'EnablePressuredExit',
  'OnDemand',
  'ServiceIPC',
  'KeepAlive',
  'RunAtLoad',
  'RootDirectory',
  'WorkingDirectory',
  'EnvironmentVariables',
  'Umask',
  'TimeOut',
  'ExitTimeOut',
  'ThrottleInterval',
  'InitGroups',
  'WatchPaths',
  'QueueDirectories',
  'StartOnMount',
  'StartInterval',
  'StartCalendarInterval',
  'StandardInPath',
  'StandardOutPath',
  'StandardErrorPath',
  'Debug',
  'WaitForDebugger',
  'SoftResourceLimits',
  'HardResourceLimits',
  'Nice',
  'ProcessType',
  'AbandonProcessGroup',
  'LowPriorityIO',
  'LowPriorityBackgroundIO',
  'MaterializeDatalessFiles',
  'LaunchOnlyOnce',
  'MachServices',
  'Sockets',
  'AssociatedBundleIdentifiers',
  'SessionCreate',
  'LegacyTimers',
]);

const plistPath = join(root, 'deploy/launchd/com.hq.agent.plist');
const plistText = readFileSync(plistPath, 'utf8');

function parsed(): Map<string, Plist> {
  const p = parsePlist(plistText);
  if (!(p instanceof Map)) throw new PlistError('the top-level value is not a <dict>');
  return p;
}

t.test('the parser accepts well-formed plists and refuses malformed ones', async (t) => {
  const head =
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n';
  const ok = parsePlist(
    `${head}<plist version="1.0"><dict><key>A</key><string>x &amp; y</string><key>B</key><array><integer>-3</integer><true/></array></dict></plist>`,
  );
  t.same(
    ok,
    new Map<string, Plist>([
      ['A', 'x & y'],
      ['B', [-3, true]],
    ]),
    'a small dict with an entity, an array, an integer and a boolean parses',
  );
  const bad: ReadonlyArray<readonly [string, string]> = [
    ['a dict whose key has no value', '<plist version="1.0"><dict><key>A</key></dict></plist>'],
    ['mismatched closing tags', '<plist version="1.0"><dict><key>A</key><string>x</integer></dict></plist>'],
    ['a bare ampersand', '<plist version="1.0"><string>a & b</string></plist>'],
    ['a non-integer in <integer>', '<plist version="1.0"><integer>0o77</integer></plist>'],
    ['a duplicate key', '<plist version="1.0"><dict><key>A</key><true/><key>A</key><false/></dict></plist>'],
    ['an unclosed root', '<plist version="1.0"><dict></dict>'],
    ['a value outside any key', '<plist version="1.0"><dict><string>x</string></dict></plist>'],
    ['two root values', '<plist version="1.0"><true/><false/></plist>'],
  ];
  for (const [name, body] of bad) {
    t.throws(() => parsePlist(`${head}${body}`), { name: 'PlistError' }, `${name} is refused`);
  }
  t.throws(
    () => parsePlist('<plist version="1.0"><true/></plist>'),
    { name: 'PlistError' },
    'a document without the XML declaration is refused',
  );
});

t.test('com.hq.agent.plist is a well-formed plist whose top level is a dict of known launchd keys', async (t) => {
  let p: Map<string, Plist> | null = null;
  t.doesNotThrow(() => {
    p = parsed();
  }, 'the plist parses');
  for (const key of (p as Map<string, Plist> | null)?.keys() ?? []) {
    t.ok(LAUNCHD_KEYS.has(key), `${key} is a launchd.plist key`);
  }
});

t.test('the job is labelled com.hq.agent, starts at load, is kept alive and runs at background priority', async (t) => {
  const p = parsed();
  t.equal(p.get('Label'), 'com.hq.agent', 'Label matches the file name');
  t.equal(p.get('RunAtLoad'), true, 'RunAtLoad is true');
  t.equal(p.get('KeepAlive'), true, 'KeepAlive is true: launchd restarts the agent whenever it exits');
  t.equal(p.get('ProcessType'), 'Background', 'ProcessType is Background');
  t.equal(p.get('Umask'), 0o077, 'Umask is 077 (63 in decimal)');
  const exitTimeout = p.get('ExitTimeOut');
  t.ok(typeof exitTimeout === 'number' && exitTimeout > 10, 'ExitTimeOut leaves room for the 10 s shutdown');
});

t.test(
  'ProgramArguments run node on the agent daemon with --config ~/.hq/agent.json, all as absolute paths',
  async (t) => {
    const args = parsed().get('ProgramArguments');
    t.ok(Array.isArray(args) && args.every((a) => typeof a === 'string'), 'ProgramArguments is an array of strings');
    const list = args as string[];
    const daemon = 'apps/agent/dist/daemon-cli.js';
    t.equal(list.length, 4, 'four arguments: node, the daemon, --config, the file');
    t.match(list[0] ?? '', /^\/.*\/node$/, 'the first argument is an absolute path to node');
    t.equal(
      list[1],
      `/opt/homebrew/lib/node_modules/@hq/agent/${daemon.slice('apps/agent/'.length)}`,
      `the daemon is ${daemon} as npm install -g puts it under Homebrew's prefix`,
    );
    t.ok(
      existsSync(join(root, 'apps/agent/src/daemon-cli.ts')),
      `${daemon} is built from apps/agent/src/daemon-cli.ts, which exists`,
    );
    t.equal(list[2], '--config', 'the config is passed with --config');
    t.equal(list[3], `${HOME}/.hq/agent.json`, 'the config is ~/.hq/agent.json, spelled out');
    const strings = (v: Plist): string[] =>
      typeof v === 'string'
        ? [v]
        : Array.isArray(v)
          ? v.flatMap(strings)
          : v instanceof Map
            ? [...v.values()].flatMap(strings)
            : [];
    const unexpanded = strings(parsed()).filter((s) => s.includes('~') || s.includes('$'));
    t.same(unexpanded, [], 'no value holds ~ or $VARIABLES, which launchd would not expand');
  },
);

t.test('stdout and stderr go to files under ~/Library/Logs/hq/', async (t) => {
  const p = parsed();
  for (const key of ['StandardOutPath', 'StandardErrorPath']) {
    t.match(
      String(p.get(key)),
      new RegExp(`^${HOME}/Library/Logs/hq/[^/]+\\.log$`),
      `${key} is a log file in ~/Library/Logs/hq/`,
    );
  }
  t.not(p.get('StandardOutPath'), p.get('StandardErrorPath'), 'stdout and stderr go to separate files');
});

t.test('the environment gives the agent a PATH with Homebrew and the system tools', async (t) => {
  const env = parsed().get('EnvironmentVariables');
  t.ok(env instanceof Map, 'EnvironmentVariables is a dict');
  const path = String((env as Map<string, Plist>).get('PATH') ?? '').split(':');
  for (const dir of ['/opt/homebrew/bin', '/usr/local/bin', '/usr/bin', '/bin']) {
    t.ok(path.includes(dir), `PATH contains ${dir}`);
  }
});

t.test('the README and the mbp config use the same placeholders as the plist', async (t) => {
  const readme = readFileSync(join(root, 'deploy/launchd/README.md'), 'utf8');
  const config = JSON.parse(readFileSync(join(root, 'deploy/config/agent.mbp.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  t.ok(readme.includes(`s|${HOME}|$HOME|g`), `the README replaces ${HOME} with $HOME`);
  t.ok(
    readme.includes('s|/opt/homebrew/bin/node|$(command -v node)|g'),
    'the README replaces the node path with command -v node',
  );
  t.match(
    readme,
    /launchctl bootstrap gui\/\$\(id -u\) ~\/Library\/LaunchAgents\/com\.hq\.agent\.plist/,
    'the README bootstraps the job into gui/$(id -u)',
  );
  t.ok(readme.includes('mkdir -p ~/Library/Logs/hq'), 'the README creates the log directory, which launchd does not');
  t.equal(config['stateDir'], `${HOME}/.hq`, 'agent.mbp.json keeps its state in the same home placeholder');
  t.equal(config['hostName'], 'mbp', 'agent.mbp.json is for mbp');
});

t.test(
  'com.hq.service-example.plist keeps a follower of HQ alive: hq fence run --follow with the agent’s config',
  async (t) => {
    const p = parsePlist(readFileSync(join(root, 'deploy/launchd/com.hq.service-example.plist'), 'utf8'));
    if (!(p instanceof Map)) throw new PlistError('the top-level value is not a <dict>');
    for (const key of p.keys()) t.ok(LAUNCHD_KEYS.has(key), `${key} is a launchd.plist key`);
    t.equal(p.get('Label'), 'com.hq.service-example', 'Label matches the file name');
    t.equal(p.get('KeepAlive'), true, 'KeepAlive is true: the follower is restarted whenever it exits');
    t.equal(p.get('RunAtLoad'), true, 'RunAtLoad is true');
    t.equal(p.get('Umask'), 0o077, 'Umask is 077, as the agent’s');
    t.equal(p.get('ProcessType'), 'Background', 'ProcessType is Background, as the agent’s');
    const exitTimeout = p.get('ExitTimeOut');
    t.ok(typeof exitTimeout === 'number' && exitTimeout > 5, 'ExitTimeOut leaves the follower its 5 s grace');
    const args = p.get('ProgramArguments') as string[];
    t.match(args[0] ?? '', /^\/.*\/node$/, 'node, as an absolute path');
    t.equal(
      args[1],
      '/opt/homebrew/lib/node_modules/@hq/agent/bin/hq.cjs',
      'the hq CLI as npm install -g puts it under Homebrew',
    );
    t.ok(existsSync(join(root, 'apps/agent/bin/hq.cjs')), 'apps/agent/bin/hq.cjs exists');
    t.same(
      args.slice(2, 9),
      ['fence', 'run', '--follow', '--role', 'telegram-poller', '--config', `${HOME}/.hq/agent.json`],
      'hq fence run --follow with the agent’s config',
    );
    t.equal(args[9], '--', 'the command after --');
    t.match(args[10] ?? '', new RegExp(`^${HOME}/`), 'the command is an absolute path in the home placeholder');
    for (const key of ['StandardOutPath', 'StandardErrorPath']) {
      t.match(
        String(p.get(key)),
        new RegExp(`^${HOME}/Library/Logs/hq/[^/]+\\.log$`),
        `${key} is a log file in ~/Library/Logs/hq/`,
      );
    }
    const readme = readFileSync(join(root, 'deploy/launchd/README.md'), 'utf8');
    t.match(readme, /com\.hq\.service-example\.plist/, 'the README installs it');
  },
);

/** Runs a README's install line with a fake home, node and npm (nvm-style paths); returns the written file. */
function runInstallLine(
  t: Tap.Test,
  line: string,
  out: string,
  extraEnv: Record<string, string> = {},
): { home: string; node: string; npmRoot: string; text: string } {
  const dir = t.testdir({ bin: {}, home: { Library: { LaunchAgents: {} } } });
  const home = join(dir, 'home');
  const node = join(home, '.nvm/versions/node/v20.11.0/bin/node');
  const npmRoot = join(home, '.nvm/versions/node/v20.11.0/lib/node_modules');
  mkdirSync(dirname(node), { recursive: true });
  writeFileSync(node, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  writeFileSync(join(dirname(node), 'npm'), `#!/bin/sh\n[ "$1 $2" = "root -g" ] && echo ${npmRoot}\n`, { mode: 0o755 });
  const r = spawnSync('sh', ['-c', line], {
    cwd: root,
    encoding: 'utf8',
    env: { HOME: home, PATH: `${dirname(node)}:/usr/bin:/bin`, ...extraEnv },
  });
  t.equal(r.status, 0, `the install line runs (${r.stderr.trim()})`);
  return { home, node, npmRoot, text: readFileSync(out.replace(/^~/, home), 'utf8') };
}

t.test(
  "the README's install line writes the plist with this Mac's node, daemon and home (nvm, Intel, Apple silicon alike)",
  async (t) => {
    const readme = readFileSync(join(root, 'deploy/launchd/README.md'), 'utf8');
    const line = readme.split('\n').find((l) => l.startsWith('sed ') && l.includes('com.hq.agent.plist >'));
    t.ok(line !== undefined, 'the README has one sed line writing the plist');
    if (line === undefined) return;
    const { home, node, npmRoot, text } = runInstallLine(t, line, '~/Library/LaunchAgents/com.hq.agent.plist');
    const plist = parsePlist(text) as Map<string, Plist>;
    t.same(
      plist.get('ProgramArguments'),
      [node, `${npmRoot}/@hq/agent/dist/daemon-cli.js`, '--config', `${home}/.hq/agent.json`],
      'ProgramArguments: the node found on PATH and the daemon under npm root -g',
    );
    t.notMatch(
      text,
      /\/Users\/YOU|\/opt\/homebrew\/lib|\/opt\/homebrew\/bin\/node/,
      'no placeholder is left anywhere in the written plist',
    );
    t.ok(
      existsSync(join(root, 'apps/agent/dist/daemon-cli.js')) || existsSync(join(root, 'apps/agent/src/daemon-cli.ts')),
      "the daemon path is the @hq/agent package's dist/daemon-cli.js",
    );
    const header =
      /<!--([\s\S]*?)-->/.exec(readFileSync(join(root, 'deploy/launchd/com.hq.agent.plist'), 'utf8'))?.[1] ?? '';
    for (const placeholder of ['/Users/YOU', '/opt/homebrew/bin/node', '/opt/homebrew/lib/node_modules'])
      t.ok(header.includes(placeholder), `the plist's header explains ${placeholder}`);
    t.notMatch(header, /cloned|built there/, 'the header does not describe a checkout the plist does not run from');
  },
);

t.test("deploy/README.md installs each systemd unit with this host's node and daemon paths", async (t) => {
  const readme = readFileSync(join(root, 'deploy/README.md'), 'utf8');
  for (const [unit, daemon] of [
    ['hq-arbiter', '@hq/arbiter/dist/cli.js'],
    ['hq-agent', '@hq/agent/dist/daemon-cli.js'],
  ] as const) {
    const line = readme.split('\n').find((l) => l.startsWith('sed ') && l.includes(`systemd/${unit}.service |`));
    t.ok(line !== undefined, `the README writes ${unit}.service with one sed line`);
    if (line === undefined) continue;
    const local = line.replace(/\| sudo tee (\S+) >\/dev\/null$/, '> "$HOME/unit.service"');
    const { node, npmRoot, text } = runInstallLine(t, local, '~/unit.service', { D: join(root, 'deploy') });
    const exec = /^ExecStart=(.*)$/m.exec(text)?.[1]?.split(/\s+/) ?? [];
    t.same(
      exec.slice(0, 2),
      [node, `${npmRoot}/${daemon}`],
      `${unit}: ExecStart runs the node found on PATH and the daemon under npm root -g`,
    );
  }
});
