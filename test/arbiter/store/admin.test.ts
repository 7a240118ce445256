/**
 * StoreAdmin, against every store factory: a backup taken while the store serves holds
 * everything, is owner-only, and opens as a store.
 */
import t from 'tap';
import { statSync } from 'node:fs';
import { forEachStore } from './factories.js';

forEachStore(t, async (factory, t) => {
  t.test('a backup holds the record, the events and the tokens, owner-only', async (t) => {
    const store = await factory.lease(t);
    await store.transact((s) => ({
      next: { ...s, lease: { ...s.lease, holder: 'mbp', generation: 4, revision: s.lease.revision + 1 }, floor: 3 },
      events: [{ at: 1, category: 'lease', event: 'acquired', host: 'mbp', data: { generation: 4 } }],
      result: null,
    }));
    await store.insertToken('mbp', 'member', 'a'.repeat(64), 1);
    const to = factory.backupTarget(t);
    await store.backup(to);
    t.equal(statSync(to).mode & 0o077, 0, 'the copy is owner-only');
    await store.transact((s) => ({
      next: { ...s, lease: { ...s.lease, generation: 5, revision: s.lease.revision + 1 } },
      events: [],
      result: null,
    }));
    const copy = await factory.fromBackup(t, to);
    t.equal(copy.createdNow, false, 'the copy is an existing store (its floor is not pending)');
    t.match(
      await copy.read(),
      { lease: { holder: 'mbp', generation: 4 }, floor: 3 },
      'the record as it was at the backup',
    );
    t.same(
      (await copy.listEvents(0, 10)).map((e) => e.event),
      ['acquired'],
      'its events',
    );
    t.equal((await copy.findToken('a'.repeat(64)))?.machine, 'mbp', 'its tokens');
    await store.close();
    await t.resolves(async () => store.close(), 'closing twice is harmless');
  });
});
