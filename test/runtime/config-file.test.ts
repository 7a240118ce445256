/** The config-file reader: JSON or the reason it is not, and the one ConfigError. */
import t from 'tap';
import { chmodSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, expandHome, readConfigFile } from '../../packages/runtime/src/config-file.js';

t.test('a config file is read as JSON, or says why it cannot be', async (t) => {
  const dir = t.testdir({ 'ok.json': '{"a": [1]}', 'broken.json': '{"a": ' });
  t.same(readConfigFile(join(dir, 'ok.json')), { ok: true, value: { a: [1] } }, 'JSON is parsed');
  t.match(readConfigFile(join(dir, 'broken.json')), { ok: false, problem: 'not-json', message: /JSON/ }, 'broken JSON says so');
  t.match(readConfigFile(join(dir, 'none.json')), { ok: false, problem: 'unreadable', code: 'ENOENT', message: /none\.json/ }, 'a missing file is unreadable, with its code');
  if (process.getuid?.() !== 0) {
    writeFileSync(join(dir, 'locked.json'), '{}');
    chmodSync(join(dir, 'locked.json'), 0o000);
    t.match(readConfigFile(join(dir, 'locked.json')), { ok: false, problem: 'unreadable', code: 'EACCES' }, 'a file this user may not read is unreadable');
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
