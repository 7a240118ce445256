/**
 * CheckLock, against every store factory: one owner at a time across handles, renewable by its
 * owner, free again after its expiry or its release.
 */
import t from 'tap';
import { forEachStore } from './factories.js';

forEachStore(t, async (factory, t) => {
  t.test('one owner at a time, across handles; expiry and release free it', async (t) => {
    const a = await factory.lease(t);
    const b = await factory.again(t, a);
    t.equal(await a.tryCheckLock('daemon', 1000, 2000), true, 'a free lock is taken');
    t.equal(await b.tryCheckLock('cli', 1500, 2500), false, 'another owner (hq-arbiter check) waits while it is held');
    t.equal(await a.tryCheckLock('daemon', 1600, 3000), true, 'its owner renews it');
    t.equal(await b.tryCheckLock('cli', 2500, 3500), false, 'renewed: still held at 2500');
    await b.releaseCheckLock('cli');
    t.equal(await b.tryCheckLock('cli', 2600, 3600), false, 'a release by another owner does nothing');
    await a.releaseCheckLock('daemon');
    t.equal(await b.tryCheckLock('cli', 2700, 3700), true, 'released: the other owner takes it');
    t.equal(await a.tryCheckLock('daemon', 3700, 4700), true, 'at its expiry a crashed owner no longer blocks');
    await a.releaseCheckLock('daemon');
    await a.releaseCheckLock('daemon');
    t.equal(await b.tryCheckLock('cli', 3800, 4800), true, 'releasing twice is harmless');
  });
});
