/**
 * TokenStore, against every store factory (and auth.ts on top of it): hashes only, replace and
 * revoke, and a revocation by another handle effective from the next look-up.
 */
import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { authenticate, ensureAdminToken, sha256Hex } from '../../../apps/arbiter/src/auth.js';
import { forEachStore } from './factories.js';

const SHA = (c: string): string => c.repeat(64);

forEachStore(t, async (factory, t) => {
  t.test('insert, find, replace, revoke one, revoke all, list', async (t) => {
    const store = await factory.lease(t);
    t.equal(await store.hasActiveAdmin(), false, 'no admin yet');
    t.equal(await store.findToken(SHA('a')), undefined, 'an unknown hash finds nothing');
    await store.insertToken('mbp', 'member', SHA('a'), 10);
    await store.insertToken('mbp', 'query', SHA('b'), 11);
    await store.insertToken('ops', 'admin', SHA('c'), 12);
    t.equal(await store.hasActiveAdmin(), true, 'an admin token now');
    t.same(
      await store.findToken(SHA('a')),
      { id: 1, machine: 'mbp', scope: 'member', sha256: SHA('a'), created: 10, revoked: null },
      'found by its hash',
    );
    await t.rejects(async () => store.insertToken('node-b', 'member', SHA('a'), 13), 'a hash is stored once');
    t.equal(await store.replaceToken('mbp', 'member', SHA('d'), 20), 1, "replace revokes mbp's member token");
    t.equal((await store.findToken(SHA('a')))?.revoked, 20, "the old one is revoked at the new one's time");
    t.equal((await store.findToken(SHA('b')))?.revoked, null, 'another scope of the same machine is kept');
    t.equal((await store.findToken(SHA('d')))?.machine, 'mbp', 'the new one is in');
    t.equal(await store.revokeToken('mbp', 99, 30), 0, 'an unknown id revokes nothing');
    t.equal(await store.revokeToken('ops', 2, 30), 0, "another machine's id revokes nothing");
    t.equal(await store.revokeToken('mbp', 2, 30), 1, 'one token by id');
    t.equal(await store.revokeToken('mbp', 2, 31), 0, 'an already revoked one is not revoked again');
    t.equal(await store.revokeTokens('mbp', 40), 1, "the machine's remaining active token");
    t.equal(await store.revokeTokens('mbp', 41), 0, 'none left');
    t.same(
      (await store.listTokens()).map((r) => [r.id, r.machine, r.scope, r.revoked]),
      [
        [1, 'mbp', 'member', 20],
        [2, 'mbp', 'query', 30],
        [3, 'ops', 'admin', null],
        [4, 'mbp', 'member', 40],
      ],
      'every token by id, revoked ones included',
    );
  });

  t.test('a revocation by another handle is effective from the next request on', async (t) => {
    const a = await factory.lease(t);
    const b = await factory.again(t, a);
    const token = 'ab'.repeat(32);
    await a.insertToken('mbp', 'member', sha256Hex(token), 1);
    t.equal(
      (await authenticate(a, ['Authorization', `Bearer ${token}`])).ok,
      true,
      'a token authenticates (a store may now cache it)',
    );
    t.equal(await b.revokeTokens('mbp', 2), 1, 'revoked by another handle (hq-arbiter token revoke)');
    t.same(
      await authenticate(a, ['Authorization', `Bearer ${token}`]),
      { ok: false, status: 401, message: 'the token is not valid' },
      'refused on the next request',
    );
    const again = 'cd'.repeat(32);
    await b.insertToken('mbp', 'member', sha256Hex(again), 3);
    t.equal(
      (await authenticate(a, ['Authorization', `Bearer ${again}`])).ok,
      true,
      "another handle's new token works at once",
    );
  });

  t.test(
    'the first start writes an admin token file 0600, replaces a stale one, and keeps it once an admin exists',
    async (t) => {
      const dir = t.testdir({ 'admin.token': 'stale\n' });
      const store = await factory.lease(t);
      const path = await ensureAdminToken(store, dir, 'cloud-vm', 1);
      t.equal(path, join(dir, 'admin.token'), 'written to dataDir/admin.token');
      t.equal(statSync(path!).mode & 0o777, 0o600, 'mode 0600');
      const token = readFileSync(path!, 'utf8');
      t.match(token, /^[0-9a-f]{64}\n$/, 'the stale file was replaced by a 64-hex token');
      t.same(
        await authenticate(store, ['Authorization', `Bearer ${token.trim()}`]),
        { ok: true, principal: { machine: 'cloud-vm', scope: 'admin' } },
        'the token authenticates as admin',
      );
      t.equal((await store.findToken(sha256Hex(token.trim())))?.scope, 'admin', 'stored as its sha256');
      t.equal(await ensureAdminToken(store, dir, 'cloud-vm', 2), null, 'not issued again while an admin token exists');
    },
  );
});
