// Store etcd: issues the harness's tokens into the etcd prefix, from inside the arbiters'
// namespace (the only one with a link to etcd), with the tested build's own store and
// `issueToken` (what `hq-arbiter token issue` runs). argv: build root, arbiter config, then
// MACHINE:SCOPE pairs; prints one JSON object {MACHINE: token}.
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [root, configPath, ...pairs] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(root, 'apps/arbiter/dist', p)).href);
const { loadConfig } = await load('config.js');
await load('config-checker.js'); // names the problem of any file, as the CLI does
const { openStores } = await load('server/runtime.js');
const { issueToken } = await load('auth.js');
const stores = await openStores(loadConfig(configPath), false);
try {
  const out = {};
  for (const pair of pairs) {
    const [machine, scope] = pair.split(':');
    out[machine] = await issueToken(stores.store, machine, scope, Date.now() / 1000);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
  await stores.close();
}
