import t from 'tap';
import { leaseEvent } from '../../packages/lease-core/src/index.js';

t.test('a lease event defaults to the hq.lease category and empty data', async (t) => {
  const e = leaseEvent('acquired', 'mbp');
  t.same(e, { category: 'hq.lease', event: 'acquired', host: 'mbp', data: {} }, 'defaults applied');
});

t.test('an event keeps the data and the category it is given', async (t) => {
  const e = leaseEvent('maintenance', null, { enabled: true, reason: 'upgrade' }, 'control');
  t.equal(e.category, 'control', 'category kept');
  t.equal(e.host, null, 'an event may have no host');
  t.same(e.data, { enabled: true, reason: 'upgrade' }, 'data kept as given');
});

t.test('each call gets its own default data object', async (t) => {
  const a = leaseEvent('renewed', 'mbp');
  const b = leaseEvent('renewed', 'mbp');
  t.not(a.data, b.data, 'the default data is not shared between events');
});
