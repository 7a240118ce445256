/**
 * hq-arbiter's one-shot commands with `store: etcd`, in-process against one real member: tokens
 * are issued, listed and revoked in etcd (every arbiter sees them), a backup is every key under
 * the prefix but the election's and the compaction's as one owner-only JSON document, and `check` refuses with one line (only the
 * elected arbiter checks). A bad store key stops every command with one line, exit 2.
 */
import t from 'tap';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { etcdMembers } from '../etcd/members.js';
import { arbiterCommand } from './helper.js';

t.test('one-shot commands on the etcd store', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  const dir = t.testdir();
  const config = join(dir, 'arbiter.json');
  writeFileSync(
    config,
    JSON.stringify({
      dataDir: join(dir, 'var'),
      tailscaleBin: '',
      store: { kind: 'etcd', endpoints: etcd.endpoints, prefix: '/hq-cli' },
    }),
  );

  const issued = await arbiterCommand(['token', 'issue', 'mbp', '--config', config]);
  t.equal(issued.code, 0, `token issue exits 0 (${issued.stderr.trim()})`);
  t.match(issued.stdout, /^[0-9a-f]{64}\n$/, 'the token, once');
  const list = await arbiterCommand(['token', 'list', '--json', '--config', config]);
  t.match(JSON.parse(list.stdout), [{ id: 1, machine: 'mbp', scope: 'member', revoked: null }], 'listed from etcd');
  const revoked = await arbiterCommand(['token', 'revoke', 'mbp', '--config', config]);
  t.same([revoked.code, revoked.stdout], [0, 'revoked 1 token(s) of mbp\n'], 'revoked in etcd');

  // an arbiter's compaction turn and an election key: cluster bookkeeping, not state to restore
  await fetch(`${etcd.endpoints[0]}/v3/kv/put`, {
    method: 'POST',
    body: JSON.stringify({
      key: Buffer.from('/hq-cli/compaction').toString('base64'),
      value: Buffer.from('42').toString('base64'),
    }),
  });
  await fetch(`${etcd.endpoints[0]}/v3/kv/put`, {
    method: 'POST',
    body: JSON.stringify({
      key: Buffer.from('/hq-cli/election/1f').toString('base64'),
      value: Buffer.from('http://a:8470').toString('base64'),
    }),
  });
  const to = join(dir, 'backup.json');
  const backup = await arbiterCommand(['backup', '--to', to, '--config', config]);
  t.equal(backup.code, 0, `backup exits 0 (${backup.stderr.trim()})`);
  t.equal(statSync(to).mode & 0o077, 0, 'owner-only');
  const doc = JSON.parse(readFileSync(to, 'utf8')) as { format: string; prefix: string; kvs: Array<{ key: string }> };
  t.match(doc, { format: 'hq-etcd-backup/1', prefix: '/hq-cli' }, 'an hq etcd backup of the prefix');
  t.ok(
    doc.kvs.some((kv) => kv.key === '/state') && doc.kvs.some((kv) => kv.key.startsWith('/tokens/h/')),
    'with the state and the tokens',
  );
  t.same(
    doc.kvs.filter((kv) => kv.key === '/compaction' || kv.key.startsWith('/election/')),
    [],
    'without the compaction turn and the election keys',
  );

  const check = await arbiterCommand(['check', '--config', config]);
  t.equal(check.code, 2, 'check refuses with exit 2');
  t.match(
    check.stderr,
    /^hq-arbiter: check: with store "etcd" only the elected arbiter checks[^\n]*\n$/,
    'in one line saying what to do instead',
  );

  writeFileSync(
    config,
    JSON.stringify({ dataDir: join(dir, 'var'), store: { kind: 'etcd', endpoints: etcd.endpoints, tls: {} } }),
  );
  const tls = await arbiterCommand(['token', 'list', '--config', config]);
  t.equal(tls.code, 2, 'store.tls naming no file: exit 2');
  t.match(tls.stderr, /^hq-arbiter: [^\n]*store\.tls[^\n]*names no file[^\n]*\n$/, 'one line naming the key');
});
