/**
 * The generation bounds on every route that takes a generation, on both stores: one report may
 * raise the floor at most MAX_REPORT_JUMP above the highest generation the arbiter granted or
 * learned, and no grant goes above GENERATION_CEILING. Each case runs twice: on the real
 * arbiter, and on the mutant without the bounds (limits of Infinity), which must show the
 * damage the bound stops — so the test fails when the mechanism is removed.
 * A lost database still learns a real floor from the agents' reports.
 */
import t, { type Test } from 'tap';
import { GENERATION_CEILING } from '../../packages/protocol/src/index.js';
import { MAX_REPORT_JUMP, type GenerationLimits } from '../../packages/lease-core/src/index.js';
import { etcdMembers } from '../etcd/members.js';
import { AGENT_REQUEST_TIMEOUT, harness, type Harness } from './helper.js';

/** The mutant: no bound on reports, no ceiling on grants. */
const NO_BOUND: GenerationLimits = { ceiling: Infinity, maxJump: Infinity };
/** The request of the report that bricked the fleet: two below 2^53. */
const HUGE = 9_007_199_254_740_990;

type Store = (t: Test) => Promise<Record<string, unknown>>;

interface Route {
  readonly name: string;
  /** Sends the report (after mbp acquired generation 1 and both candidates settled). */
  send(h: Harness, generation: number): ReturnType<Harness['post']>;
}

const ROUTES: readonly Route[] = [
  {
    name: 'POST /v1/lease/acquire seenGeneration',
    send: (h, g) => h.post('/v1/lease/acquire', { host: 'node-b', seenGeneration: g }, h.tokens.nodeb),
  },
  {
    name: 'POST /v1/heartbeat seenGeneration',
    send: (h, g) =>
      h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: g, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.nodeb,
      ),
  },
  {
    name: 'POST /v1/heartbeat generation',
    send: (h, g) => h.post('/v1/heartbeat', { host: 'mbp', generation: g }, h.tokens.mbp),
  },
  {
    name: 'POST /v1/lease/renew generation',
    send: (h, g) => h.post('/v1/lease/renew', { host: 'mbp', generation: g }, h.tokens.mbp),
  },
  {
    name: 'POST /v1/lease/release generation',
    send: (h, g) => h.post('/v1/lease/release', { host: 'mbp', generation: g }, h.tokens.mbp),
  },
  {
    name: 'POST /v1/lease/stepped-down generation',
    send: (h, g) => h.post('/v1/lease/stepped-down', { host: 'mbp', generation: g, revision: 1 }, h.tokens.mbp),
  },
  {
    name: 'POST /v1/lease/acquire seenGeneration, admin token',
    send: (h, g) => h.post('/v1/lease/acquire', { host: 'node-b', seenGeneration: g }),
  },
];

async function leased(
  t: Test,
  store: Record<string, unknown>,
  limits?: GenerationLimits,
  operator = false,
): Promise<Harness> {
  const h = await harness(t, store, { operator, ...(limits === undefined ? {} : { limits }) });
  await h.settle();
  const a = await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
  t.equal(a.json().lease?.generation, 1, 'mbp holds generation 1');
  return h;
}

/** What a failover after the report grants: the damage a bogus floor does shows here. */
async function nextGrant(h: Harness): Promise<number | null> {
  const r = await h.post('/v1/lease/transfer', { to: 'node-b', force: true });
  return r.statusCode === 200 ? (r.json().lease.generation as number) : null;
}

function routeTests(t: Test, store: Store): void {
  for (const route of ROUTES) {
    t.test(
      `${route.name}: a report no real history produces is refused, and the mutant without the bound is caught`,
      async (t) => {
        const h = await leased(t, await store(t));
        const r = await route.send(h, HUGE);
        t.equal(r.statusCode, 409, 'refused with 409');
        t.equal(r.json().error, 'HQ_ERR_GENERATION_JUMP', 'with the generation-jump code');
        t.match(
          r.json().message,
          /^[^\n]*9007199254740990[^\n]*hq lease accept/,
          'one line naming the report and how an admin accepts it',
        );
        t.equal(await nextGrant(h), 2, 'the next grant is generation 2: the report raised nothing');

        const m = await leased(t, await store(t), NO_BOUND);
        await route.send(m, HUGE);
        const g = await nextGrant(m);
        t.not(g, 2, `the mutant is caught: its next grant is ${g}, above the bogus report`);
        t.ok(g === null || g > HUGE, 'the mutant grants above the report (past the safe integers)');
      },
    );

    t.test(`${route.name}: a report within the bound raises the floor as before`, async (t) => {
      const h = await leased(t, await store(t));
      const r = await route.send(h, 1 + MAX_REPORT_JUMP);
      t.not(r.json().error, 'HQ_ERR_GENERATION_JUMP', 'not refused by the bound');
      const g = await nextGrant(h);
      t.ok(g !== null && g > 1 + MAX_REPORT_JUMP, `the next grant (${g}) is above the report`);
    });
  }

  t.test(
    'a grant that would pass the ceiling is refused; the mutant without the ceiling writes above it',
    async (t) => {
      for (const limits of [undefined, NO_BOUND]) {
        const h = await harness(t, await store(t), limits === undefined ? {} : { limits });
        await h.settle();
        const acc = await h.post('/v1/lease/accept-generation', { generation: GENERATION_CEILING - 1 });
        t.equal(acc.statusCode, 200, 'an admin accepts a generation one below the ceiling');
        t.equal(
          (await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp)).json().lease.generation,
          GENERATION_CEILING,
          'the last grant is the ceiling itself',
        );
        const tr = await h.post('/v1/lease/transfer', { to: 'node-b', force: true });
        if (limits === undefined) {
          t.equal(tr.statusCode, 409, 'the transfer past the ceiling is refused');
          t.equal(tr.json().error, 'HQ_ERR_GENERATION_CEILING', 'with the ceiling code');
          t.match(tr.json().message, /above the ceiling 281474976710656/, 'the line names the ceiling');
          const rec = (await h.get('/v1/lease')).json();
          t.same([rec.holder, rec.generation], ['mbp', GENERATION_CEILING], 'nothing was written');
        } else {
          t.equal(
            tr.json().lease?.generation,
            GENERATION_CEILING + 1,
            'the mutant is caught: it writes a generation above the ceiling',
          );
        }
      }
    },
  );

  t.test('a promotion that would pass the ceiling is refused; the mutant promotes above it', async (t) => {
    for (const limits of [undefined, NO_BOUND]) {
      const h = await harness(t, await store(t), limits === undefined ? {} : { limits });
      await h.settle();
      await h.post('/v1/lease/accept-generation', { generation: GENERATION_CEILING - 1 });
      await h.post('/v1/lease/acquire', { host: 'mbp' }, h.tokens.mbp);
      h.clock.advance(1);
      await h.post(
        '/v1/heartbeat',
        {
          host: 'node-b',
          seenGeneration: GENERATION_CEILING,
          view: { target: 'mbp', reachable: false, ping: false, health: false },
        },
        h.tokens.nodeb,
      );
      const checks = [await h.post('/v1/check', undefined), await h.post('/v1/check', undefined)];
      const rec = (await h.get('/v1/lease')).json();
      if (limits === undefined) {
        t.equal(
          checks[1]?.json().error,
          'HQ_ERR_GENERATION_CEILING',
          'the promoting check is refused with the ceiling code',
        );
        t.same([rec.holder, rec.generation], ['mbp', GENERATION_CEILING], 'nothing was promoted');
      } else {
        t.same(
          [rec.holder, rec.generation],
          ['node-b', GENERATION_CEILING + 1],
          'the mutant is caught: it promotes above the ceiling',
        );
      }
    }
  });

  t.test('an admin cannot accept a generation at the ceiling', async (t) => {
    const h = await harness(t, await store(t));
    const r = await h.post('/v1/lease/accept-generation', { generation: GENERATION_CEILING });
    t.equal(r.statusCode, 409, 'refused');
    t.equal(r.json().error, 'HQ_ERR_GENERATION_CEILING', 'with the ceiling code');
    const m = await h.post('/v1/lease/accept-generation', { generation: 5 }, h.tokens.mbp);
    t.equal(m.statusCode, 403, 'a member token may not accept');
  });

  t.test(
    'a lost database learns a real floor from the reports; a jump beyond the bound waits for an admin',
    async (t) => {
      const h = await harness(t, await store(t));
      const fresh = (await h.get('/v1/lease')).json();
      t.equal(fresh.floorPending, true, 'a store created now has a pending floor');
      h.clock.advance(2 * AGENT_REQUEST_TIMEOUT + 0.5);
      // 58 is granted below: a report may reach 58 + MAX_REPORT_JUMP, and this one is one above that.
      const far = 58 + MAX_REPORT_JUMP + 1;
      const mb = await h.post(
        '/v1/heartbeat',
        { host: 'mbp', seenGeneration: 57, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.mbp,
      );
      t.equal(mb.statusCode, 200, 'a report of 57 on a new store is accepted');
      const a = await h.post(
        '/v1/lease/acquire',
        { host: 'mbp', seenGeneration: 57, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.mbp,
      );
      t.equal(a.json().lease.generation, 58, 'the grant is above the reported 57');
      const nb = await h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: far, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.nodeb,
      );
      t.equal(
        nb.json().error,
        'HQ_ERR_GENERATION_JUMP',
        'a report more than the bound above what was learned is refused',
      );
      t.equal(
        (await h.get('/v1/lease')).json().floorPending,
        true,
        'the refused report does not count: the floor stays pending (nobody runs)',
      );
      const acc = await h.post('/v1/lease/accept-generation', { generation: far });
      t.same([acc.statusCode, acc.json().floor], [200, far], 'an admin accepts it');
      const again = await h.post(
        '/v1/heartbeat',
        { host: 'node-b', seenGeneration: far, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT },
        h.tokens.nodeb,
      );
      t.equal(again.statusCode, 200, 'the same report is taken now');
      const rec = again.json().lease;
      t.same(
        [rec.holder, rec.generation, rec.floorPending],
        ['mbp', far + 1, false],
        'the pending grant is raised above it and the floor completes',
      );
      const events = (await h.get('/v1/events?limit=1000')).json().events as Array<{
        event: string;
        data: Record<string, unknown>;
      }>;
      t.ok(
        events.some((e) => e.event === 'generation-refused' && e.data['reported'] === far),
        'the refusal is in the event log',
      );
      t.ok(
        events.some((e) => e.event === 'generation-accepted' && e.data['to'] === far),
        'the acceptance is in the event log',
      );
    },
  );

  t.test('a refusal is counted in the metric and shown by /v1/status and the status page', async (t) => {
    const h = await leased(t, await store(t), undefined, true);
    h.clock.advance(1);
    await h.post('/v1/heartbeat', { host: 'node-b', seenGeneration: HUGE }, h.tokens.nodeb);
    const metrics = (await h.get('/metrics', h.tokens.admin)).body;
    t.match(metrics, /^hq_generation_reports_refused_total\{reason="report-jump"\} 1$/m, 'counted once');
    const status = (await h.get('/v1/status', h.tokens.admin)).json();
    t.match(
      status.generationRefusal,
      { host: 'node-b', kind: 'report-jump', generation: HUGE },
      'the status model names the last refusal',
    );
    const row = (status.hosts as Array<{ host: string; heartbeatText: string; heartbeatProblem: boolean }>).find(
      (x) => x.host === 'node-b',
    );
    t.match(
      row,
      { heartbeatProblem: true, heartbeatText: /refused .*9007199254740990/ },
      "node-b's row says its report was refused",
    );
    t.match((await h.get('/', h.tokens.admin)).body, /generation-refused/, 'the page shows the refusal event');
  });
}

t.test('store sqlite', async (t) => routeTests(t, async () => ({})));

t.test('store etcd', async (t) => {
  const etcd = await etcdMembers(t, { size: 1 });
  if (etcd === null) return;
  let n = 0;
  routeTests(t, async () => ({
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix: `/hq-bound-${process.pid}-${n++}`,
      dialTimeoutSeconds: 0.5,
      requestTimeoutSeconds: 2,
    },
  }));
});
