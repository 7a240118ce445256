/**
 * CheckLock, against every store factory: one owner at a time across handles, renewable by its
 * owner, free again after its expiry or its release.
 */
import t from 'tap';
import { STORE_FACTORIES } from './factories.js';

for (const factory of STORE_FACTORIES) {
  t.test(factory.name, async (t) => {
    t.test('one owner at a time, across handles; expiry and release free it', async (t) => {
      const a = factory.lease(t);
      const b = factory.again(t, a);
      t.equal(a.tryCheckLock('daemon', 1000, 2000), true, 'a free lock is taken');
      t.equal(b.tryCheckLock('cli', 1500, 2500), false, 'another owner (hq-arbiter check) waits while it is held');
      t.equal(a.tryCheckLock('daemon', 1600, 3000), true, 'its owner renews it');
      t.equal(b.tryCheckLock('cli', 2500, 3500), false, 'renewed: still held at 2500');
      b.releaseCheckLock('cli');
      t.equal(b.tryCheckLock('cli', 2600, 3600), false, 'a release by another owner does nothing');
      a.releaseCheckLock('daemon');
      t.equal(b.tryCheckLock('cli', 2700, 3700), true, 'released: the other owner takes it');
      t.equal(a.tryCheckLock('daemon', 3700, 4700), true, 'at its expiry a crashed owner no longer blocks');
      a.releaseCheckLock('daemon');
      a.releaseCheckLock('daemon');
      t.equal(b.tryCheckLock('cli', 3800, 4800), true, 'releasing twice is harmless');
    });
  });
}
