import t from 'tap';
import type { Probe } from '@hq/lease-core';
import { FakeProber, harness } from './helper.js';
import { flush } from '../registry/fake-time.js';

class SlowProber extends FakeProber {
  active = 0;
  maxActive = 0;
  during: (() => Promise<void>) | null = null;
  override async probe(host: string): Promise<Probe> {
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    await flush(); // long enough for a second check that did not wait to reach its probe
    if (this.during !== null) {
      const f = this.during;
      this.during = null;
      await f();
    }
    this.active--;
    return super.probe(host);
  }
}

t.test('a check whose holder changed during the probe is skipped', async (t) => {
  const prober = new SlowProber();
  const h = await harness(t, {}, { prober });
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  prober.during = async () => {
    await h.post('/v1/lease/transfer', { to: 'node-b' });
  };
  const res = await h.post('/v1/check', undefined);
  t.equal(res.statusCode, 200, '200');
  t.match(
    res.json(),
    { promoted: false, holder: 'node-b', skipped: 'holder-changed' },
    'skipped: the probe was about mbp',
  );
  t.equal((await h.get('/v1/lease')).json().views['cloud-vm'], undefined, 'no view about the old holder was recorded');
});

t.test('two checks never overlap: a requested check waits, a scheduled tick is skipped', async (t) => {
  const prober = new SlowProber();
  const h = await harness(t, {}, { prober });
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  const [a, b] = await Promise.all([h.post('/v1/check', undefined), h.post('/v1/check', undefined)]);
  t.equal(a.statusCode, 200, 'first check ran');
  t.equal(b.statusCode, 200, 'second check ran after it');
  t.equal(prober.maxActive, 1, 'never two probes at once');
  t.equal(prober.calls.length, 2, 'both checks probed');
  const running = h.rt.checker.run(true);
  const tick = await h.rt.checker.run(false);
  t.match(tick, { ran: false, reason: 'busy' }, 'a tick during a check is skipped');
  await running;
  t.match((await h.get('/metrics')).body, /hq_checks_total\{result="skipped"\} 1/, 'the skip is counted');
});

t.test(
  "another process's check lock: skipped or waited for, its expiry and the wait's end decided on the injected wall clock",
  async (t) => {
    const h = await harness(t);
    await h.settle();
    await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
    const wallMs = (): number => h.clock.now() * 1000;
    // `hq-arbiter check` in another process holds the lock for an hour of the (driven) wall clock.
    t.equal(
      await h.rt.store.tryCheckLock('other-process', wallMs(), wallMs() + 3_600_000),
      true,
      'the other process takes the lock',
    );
    t.match(await h.rt.checker.run(false), { ran: false, reason: 'busy' }, 'a tick skips while it is held');
    const gaveUp = h.rt.checker.run(true);
    await h.tick(600); // the clock past the wait's deadline, then the 100 ms retry pause
    t.match(
      await gaveUp,
      { ran: false, reason: 'busy' },
      'a waiting check gives up at its deadline on the clock, the lock still held',
    );
    t.equal(h.prober.calls.length, 0, 'nothing was probed while the lock was held');
    h.clock.advance(3600);
    t.match(await h.rt.checker.run(false), { ran: true }, 'past its expiry on the clock the lock no longer blocks');
    t.equal(h.prober.calls.length, 1, 'the check probed');
    t.equal(
      await h.rt.store.tryCheckLock('other-process', wallMs(), wallMs() + 1000),
      true,
      'released after the check: the other process takes it again, for a second',
    );
    const waited = h.rt.checker.run(true);
    await h.tick(2);
    t.match(
      await waited,
      { ran: true },
      'a waiting check runs once the lock expires on the clock, before its own deadline',
    );
    t.equal(h.prober.calls.length, 2, 'and probed');
  },
);

t.test('the checkCron schedule runs checks by itself', async (t) => {
  const h = await harness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  h.rt.checker.start();
  // checkCron fires on each whole second; settle left the clock half-way through one.
  t.equal(h.clock.now() % 1, 0.5, 'half a second before the next firing');
  await h.tick(0.25);
  t.equal(h.prober.calls.length, 0, 'nothing runs before the firing');
  await h.tick(0.25);
  t.equal(h.prober.calls.length, 1, 'at the firing a scheduled check probed the holder');
  t.ok((await h.get('/v1/lease')).json().lastCheckAt !== null, 'and recorded lastCheckAt');
  for (let i = 0; i < 3; i++) await h.tick(1);
  t.equal(h.prober.calls.length, 4, 'and once each second after');
  await h.rt.checker.stop();
  for (let i = 0; i < 3; i++) await h.tick(1);
  t.equal(h.prober.calls.length, 4, 'stopped, the schedule runs nothing');
});
