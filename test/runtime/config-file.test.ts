/** The config-file reader: where the file is, JSON or the reason it is not, and the one ConfigError naming the file. */
import t from 'tap';
import { chmodSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  AGENT_CONFIG,
  ConfigError,
  expandHome,
  findConfigFile,
  namingFile,
  readConfigFile,
  readConfigObject,
} from '../../packages/runtime/src/config-file.js';
import { loadConfigFile, loadConfigFileLazily, type ConfigKind } from '../../packages/runtime/src/config-load.js';

t.test('a config file is read as JSON, or says why it cannot be', async (t) => {
  const dir = t.testdir({ 'ok.json': '{"a": [1]}', 'broken.json': '{"a": ' });
  t.same(readConfigFile(join(dir, 'ok.json')), { ok: true, value: { a: [1] } }, 'JSON is parsed');
  t.match(
    readConfigFile(join(dir, 'broken.json')),
    { ok: false, problem: 'not-json', message: /JSON/ },
    'broken JSON says so',
  );
  t.match(
    readConfigFile(join(dir, 'none.json')),
    { ok: false, problem: 'unreadable', code: 'ENOENT', message: /none\.json/ },
    'a missing file is unreadable, with its code',
  );
  if (process.getuid?.() !== 0) {
    writeFileSync(join(dir, 'locked.json'), '{}');
    chmodSync(join(dir, 'locked.json'), 0o000);
    t.match(
      readConfigFile(join(dir, 'locked.json')),
      { ok: false, problem: 'unreadable', code: 'EACCES' },
      'a file this user may not read is unreadable',
    );
  }
});

t.test('ConfigError carries the key and the one line', async (t) => {
  const e = new ConfigError('ttlSeconds', 'ttlSeconds: must be above 0');
  t.equal(e.name, 'ConfigError', 'the CLIs match it by name');
  t.equal(e.key, 'ttlSeconds', 'the key');
  t.equal(e.message, 'ttlSeconds: must be above 0', 'the line as given');
});

t.test('~ in a configured path is the home directory', async (t) => {
  t.equal(expandHome('~'), homedir(), '~ alone');
  t.equal(expandHome('~/.hq'), join(homedir(), '.hq'), '~/ prefix');
  t.equal(expandHome('/etc/~x'), '/etc/~x', 'anything else unchanged');
});

t.test('the file is --config, else the variable, else the defaults; a named file must exist', async (t) => {
  const dir = t.testdir({ 'a.json': '{}', 'b.json': '{}' });
  t.equal(
    findConfigFile(join(dir, 'a.json'), AGENT_CONFIG, { HQ_CONFIG: join(dir, 'b.json') }),
    join(dir, 'a.json'),
    '--config wins',
  );
  t.equal(
    findConfigFile(undefined, AGENT_CONFIG, { HQ_CONFIG: join(dir, 'b.json') }),
    join(dir, 'b.json'),
    'then $HQ_CONFIG',
  );
  t.throws(
    () => findConfigFile(join(dir, 'none.json'), AGENT_CONFIG, {}),
    { name: 'ConfigError', key: '--config', message: `config file ${join(dir, 'none.json')} does not exist` },
    'a missing --config file is an error',
  );
  t.throws(
    () => findConfigFile(undefined, AGENT_CONFIG, { HQ_CONFIG: join(dir, 'none.json') }),
    { key: 'HQ_CONFIG', message: /\(from \$HQ_CONFIG\) does not exist/ },
    'so is a missing $HQ_CONFIG file',
  );
});

t.test('a config object is read or refused with one line naming the file', async (t) => {
  const dir = t.testdir({ 'ok.json': '{"a": 1}', 'list.json': '[1]', 'broken.json': '{' });
  t.same(readConfigObject(null), {}, 'no file: every default');
  t.same(readConfigObject(join(dir, 'ok.json')), { a: 1 }, 'an object is read');
  t.throws(
    () => readConfigObject(join(dir, 'list.json')),
    { key: '(top level)', message: `${join(dir, 'list.json')}: the config must be a JSON object` },
    'a list is refused',
  );
  t.throws(
    () => readConfigObject(join(dir, 'broken.json')),
    { key: '(top level)', message: new RegExp(`^config file ${join(dir, 'broken.json')} is not valid JSON: `) },
    'broken JSON is refused',
  );
  t.throws(
    () => readConfigObject(join(dir, 'none.json')),
    { key: '--config', message: new RegExp(`^cannot read config file ${join(dir, 'none.json')}: `) },
    'an unreadable file is refused',
  );
  const file = join(dir, 'ok.json');
  t.throws(
    () =>
      namingFile(file, () => {
        throw new ConfigError('ttl', 'ttl: too small');
      }),
    { key: 'ttl', message: `${file}: ttl: too small` },
    'a validation problem is said with the file',
  );
  t.throws(
    () =>
      namingFile(null, () => {
        throw new ConfigError('ttl', 'ttl: too small');
      }),
    { message: 'ttl: too small' },
    'without a file, as it is',
  );
  t.equal(
    namingFile(file, () => 7),
    7,
    'a valid file passes its value through',
  );
});

t.test(
  'a ConfigError of another copy of the module is a ConfigError (the fence bundle beside the ES modules)',
  async (t) => {
    const url = new URL('../../packages/runtime/src/config-file.ts', import.meta.url).href;
    const copy = (await import(`${url}?copy=1`)) as typeof import('../../packages/runtime/src/config-file.js');
    t.not(copy.ConfigError, ConfigError, 'a second copy of the class');
    const err = new copy.ConfigError('ttlSeconds', 'ttlSeconds: must be a number');
    t.ok(err instanceof ConfigError, 'instanceof holds across the copies');
    t.ok(new ConfigError('k', 'm') instanceof copy.ConfigError, 'both ways');
    t.notOk(new Error('ttlSeconds: must be a number') instanceof ConfigError, 'a plain Error is not one');
    t.notOk(Object.assign(new Error('x'), { name: 'ConfigError' }) instanceof ConfigError, 'nor one merely named so');
    t.equal(err.key, 'ttlSeconds', 'its key');
  },
);

t.test('a JSON syntax error is given as the line and column an editor shows', async (t) => {
  const { atLineColumn, readConfigFile } = await import('../../packages/runtime/src/config-file.js');
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const file = join(t.testdir(), 'agent.json');
  writeFileSync(file, '{\n  "hostName": "mbp",\n  "stateDir": "/x"\n  "peers": {}\n}\n');
  const r = readConfigFile(file);
  t.match(
    r,
    { ok: false, problem: 'not-json', message: /at line 4, column 3$/ },
    'line 4, column 3: where the comma is missing',
  );
  t.notMatch((r as { message: string }).message, /position/, 'no character offset');
  t.equal(atLineColumn('x', 'no position here'), 'no position here', 'a message without a position is kept');
});

t.test(
  "the one config loader: TypeBox only for a file the quick check cannot pass, then the daemon's check",
  async (t) => {
    const dir = t.testdir({ 'ok.json': '{"a": 1}', 'odd.json': '{"a": "x"}', 'broken.json': '{"a":\n 1,,}' });
    let loads = 0;
    const kind: ConfigKind<{ [k: string]: unknown }> = {
      daemon: 'arbiter',
      schema: { type: 'object', properties: { a: { type: 'number' } }, additionalProperties: false },
      loadChecker: async () => {
        loads++;
      },
      check: (input, file) => {
        if (input['a'] !== undefined && typeof input['a'] !== 'number')
          throw new ConfigError('a', `${file}: a: must be a number`);
        return input;
      },
    };
    t.same(await loadConfigFileLazily(kind, join(dir, 'ok.json')), { a: 1 }, 'a valid file is checked and answered');
    t.equal(loads, 0, 'without loading the checker');
    await t.rejects(
      loadConfigFileLazily(kind, join(dir, 'odd.json')),
      { name: 'ConfigError', key: 'a', message: `${join(dir, 'odd.json')}: a: must be a number` },
      "the daemon's check says what is wrong",
    );
    t.equal(loads, 1, 'after loading the checker for it');
    t.same(loadConfigFile(kind, null), {}, 'no file: every default');
    t.throws(
      () => loadConfigFile(kind, join(dir, 'broken.json')),
      { name: 'ConfigError', message: /is not valid JSON: .* at line 2, column \d+$/ },
      'bad JSON is named with its line and column',
    );
  },
);
