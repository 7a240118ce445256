/**
 * The status page's model (apps/arbiter/src/routes/status-page/model.ts), without a server: the
 * phase line of each state, the "view of holder" cell, the load cell and the event times.
 */
import t from 'tap';
import {
  emptyLease,
  leaseWait,
  newBoot,
  toRecord,
  type Boot,
  type LeaseState,
  type Observer,
  type TimingProblem,
} from '@hq/lease-core';
import { lockDelayText } from '../../apps/arbiter/src/routes/status-page/render.js';
import {
  arbitersText,
  clockTime,
  eventData,
  eventTime,
  peerPathRows,
  statusModel,
  type PeerPaths,
  type StatusSettings,
} from '../../apps/arbiter/src/routes/status-page/model.js';

const NOW = 1_800_000_100;

const TIMING: TimingProblem = {
  host: 'node-b',
  arbiterKey: 'ttlSeconds',
  agentKey: 'refreshSeconds',
  message: 'refreshSeconds (10 s on node-b) must be shorter than ttlSeconds (6 s, arbiter cloud-vm)',
};

/** A held lease, renewed 1 s ago; every candidate reported 0.5 s ago. */
const HELD: Partial<LeaseState> = {
  holder: 'mbp',
  generation: 1,
  revision: 5,
  acquiredAt: NOW - 50,
  renewedAt: NOW - 1,
  expiresAt: NOW + 5,
  notBefore: NOW - 50,
};

function observer(o: Partial<Observer>): Observer {
  return { view: null, confirmation: null, lastHeartbeatAt: NOW - 0.5, heartbeatSeconds: 1, ...o };
}

function model(
  lease: Partial<LeaseState>,
  observers: Record<string, Partial<Observer>>,
  opts: {
    candidates?: string[];
    problems?: TimingProblem[];
    load?: Parameters<typeof statusModel>[3];
    paths?: PeerPaths;
    boot?: Boot;
  } = {},
) {
  const l = { ...emptyLease(6, 1), ...lease };
  const candidates = opts.candidates ?? ['mbp', 'node-b'];
  const obs = new Map<string, Observer>(Object.entries(observers).map(([h, o]) => [h, observer(o)]));
  const problems = opts.problems ?? [];
  const settings: StatusSettings = {
    arbiter: 'cloud-vm',
    candidates,
    ttlSeconds: 6,
    viewFreshSeconds: 6,
    checkSeconds: 1,
    heartbeatSeconds: 1,
    promoteAfterChecks: 2,
    failoverSeconds: 7,
    lockDelaySeconds: 7,
    failoverText: '7 s worst case',
    timingProblems: problems,
    timingProblem: problems[0]?.message ?? null,
  };
  const state = { lease: l, observers: obs, floor: 0 };
  // The record as the arbiter answers it: with the wait its life's boot says holds the holder.
  const wait = leaseWait(state, {
    now: NOW,
    boot: opts.boot ?? newBoot(0),
    settings: {
      arbiter: 'cloud-vm',
      candidates,
      ttlSeconds: 6,
      safetyMarginSeconds: 1,
      promoteAfterChecks: 2,
      viewFreshSeconds: 6,
    },
  });
  return statusModel(state, toRecord(l, obs, NOW, wait), settings, opts.load, undefined, undefined, opts.paths);
}

const both = { mbp: {}, 'node-b': {} };
const silent = { lastHeartbeatAt: NOW - 3 };

t.test('the phase line says what is going on, in order of precedence', async (t) => {
  const young: Boot = { startAt: NOW - 2, reports: new Map(), noEarlierLife: false };
  const cases: Array<
    [
      string,
      Partial<LeaseState>,
      Record<string, Partial<Observer>>,
      { name: string; level: string; text: string | RegExp },
      { candidates?: string[]; problems?: TimingProblem[]; boot?: Boot }?,
    ]
  > = [
    [
      'a lease nobody holds is no holder',
      {},
      both,
      {
        name: 'no-holder',
        level: 'bad',
        text: 'no host may run: nobody holds the lease; nothing runs until a candidate runs hq lease acquire',
      },
    ],
    [
      'an expired lease is no holder, naming who let it lapse',
      { ...HELD, expiresAt: NOW - 1 },
      both,
      {
        name: 'no-holder',
        level: 'bad',
        text: "no host may run: mbp's lease expired; nothing runs until a candidate acquires it",
      },
    ],
    [
      'a released lease is no holder',
      { ...HELD, released: true },
      both,
      {
        name: 'no-holder',
        level: 'bad',
        text: /^no host may run: mbp released the lease without a handover; nothing brings HQ back until a candidate runs hq lease acquire$/,
      },
    ],
    [
      'a new database without a holder waits for the reports',
      { floorPending: true },
      both,
      { name: 'no-holder', level: 'bad', text: /a new database waits until every candidate reports/ },
    ],
    [
      'a renewing holder and a reporting standby are healthy',
      HELD,
      both,
      { name: 'healthy', level: 'ok', text: 'mbp holds the lease and runs; node-b stands by' },
    ],
    [
      'a holder silent past 2 × its interval is the first problem',
      HELD,
      { mbp: silent, 'node-b': {} },
      {
        name: 'holder-silent',
        level: 'bad',
        text: 'mbp, the holder, is silent: no heartbeat for 3.0 s; its lease runs out unless it renews',
      },
    ],
    [
      'a silent holder with a streak says how far the streak is',
      { ...HELD, dualUnreachableStreak: 1 },
      { mbp: silent, 'node-b': {} },
      { name: 'holder-silent', level: 'bad', text: /unreachable in 1 of the 2 checks that promote a standby$/ },
    ],
    [
      'a reporting holder the checks cannot reach is unreachable',
      { ...HELD, dualUnreachableStreak: 1 },
      both,
      { name: 'holder-silent', level: 'bad', text: /^mbp, the holder, is unreachable \(it still reports\)/ },
    ],
    [
      'a holder never heard from says so',
      HELD,
      { 'node-b': {} },
      { name: 'holder-silent', level: 'bad', text: /is silent \(heartbeat: never\)/ },
    ],
    [
      'a silent holder outranks a timing problem',
      HELD,
      { mbp: silent, 'node-b': {} },
      { name: 'holder-silent', level: 'bad', text: /silent/ },
      { problems: [TIMING] },
    ],
    [
      'a promotion behind lock-delay may not run yet',
      { ...HELD, holder: 'node-b', generation: 2, acquiredAt: NOW - 1, promotedFrom: 'mbp', notBefore: NOW + 3 },
      { mbp: silent, 'node-b': {} },
      {
        name: 'lock-delay',
        level: 'warn',
        text: /^node-b was promoted from mbp and may not run yet: lock-delay until 2027-01-15T08:01:43\.000Z: it waits out mbp's last possible validity; it ends at once when mbp's agent acknowledges its step-down$/,
      },
    ],
    [
      'an acquire behind lock-delay says acquired',
      { ...HELD, notBefore: NOW + 3 },
      both,
      { name: 'lock-delay', level: 'warn', text: /^mbp acquired the lease and may not run yet/ },
    ],
    [
      'a held lease on a new database waits for the reports, naming who has not reported',
      { ...HELD, floorPending: true },
      both,
      {
        name: 'lock-delay',
        level: 'warn',
        text: /the arbiter's database is new: mbp may run once every candidate has reported .*\(mbp, node-b have not yet\)/,
      },
    ],
    [
      'a move right after a restart waits for the start wait, not for the old holder',
      {
        ...HELD,
        holder: 'node-b',
        generation: 2,
        acquiredAt: NOW - 1,
        promotedFrom: 'mbp',
        notBefore: NOW - 2 + 7,
        displaced: { host: 'mbp', generation: 1, revision: 6, floor: null, acknowledgedAt: null, savedSeconds: null },
      },
      both,
      {
        name: 'lock-delay',
        level: 'warn',
        text: /^node-b was promoted from mbp and may not run yet: the arbiter's start wait until .*it ends sooner once every candidate has reported.*mbp acknowledges its step-down saying it ran generation 1$/,
      },
      { boot: young },
    ],
    [
      'a timing problem is said with its message',
      HELD,
      both,
      { name: 'timing-problem', level: 'bad', text: `timing problem: ${TIMING.message}` },
      { problems: [TIMING] },
    ],
    [
      'more timing problems are counted',
      HELD,
      both,
      { name: 'timing-problem', level: 'bad', text: /\(and 1 more below\)$/ },
      { problems: [TIMING, TIMING] },
    ],
    [
      'after a failover the silent old holder leaves no standby',
      { ...HELD, holder: 'node-b', generation: 2, promotedFrom: 'mbp' },
      { mbp: silent, 'node-b': {} },
      {
        name: 'failed-over',
        level: 'warn',
        text: 'node-b took over from mbp (generation 2) and runs; mbp is silent, so there is no standby until it is back',
      },
    ],
    [
      'a silent standby without a failover is standby-down',
      HELD,
      { mbp: {}, 'node-b': silent },
      {
        name: 'standby-down',
        level: 'warn',
        text: 'mbp holds the lease and runs; standby node-b is silent, so there is no standby until it is back',
      },
    ],
    [
      'with a third candidate a silent standby leaves the other',
      HELD,
      { mbp: {}, 'node-b': silent, 'node-c': {} },
      {
        name: 'standby-down',
        level: 'warn',
        text: 'mbp holds the lease and runs; standby node-b is silent, node-c stands by',
      },
      { candidates: ['mbp', 'node-b', 'node-c'] },
    ],
  ];
  for (const [name, lease, observers, want, opts] of cases) t.match(model(lease, observers, opts).phase, want, name);
  const start = model({ ...HELD, holder: 'node-b', generation: 2, promotedFrom: 'mbp', notBefore: NOW + 5 }, both, {
    boot: young,
  }).phase.text;
  t.notMatch(
    start,
    /mbp's last possible validity|old holder's validity/,
    'the start wait is never put on the old holder’s validity',
  );
  t.notMatch(start, /lock-delay/, 'nor called a lock-delay');
});

t.test('the wait under the validity is called by its name and counts down to its end', async (t) => {
  const rec = (lease: Partial<LeaseState>, boot: Boot = newBoot(0)) => {
    const l = { ...emptyLease(6, 1), ...lease };
    const state = { lease: l, observers: new Map<string, Observer>(), floor: 0 };
    return toRecord(
      l,
      state.observers,
      NOW,
      leaseWait(state, {
        now: NOW,
        boot,
        settings: {
          arbiter: 'cloud-vm',
          candidates: ['mbp', 'node-b'],
          ttlSeconds: 6,
          safetyMarginSeconds: 1,
          promoteAfterChecks: 2,
          viewFreshSeconds: 6,
        },
      }),
    );
  };
  t.equal(
    lockDelayText(rec({ ...HELD, notBefore: NOW + 3 })),
    'lock-delay: may run in 3.0 s',
    'the old holder’s lock-delay',
  );
  t.equal(
    lockDelayText(rec({ ...HELD, notBefore: NOW + 5 }, { startAt: NOW - 2, reports: new Map(), noEarlierLife: false })),
    "the arbiter's start wait: may run in 5.0 s",
    'the start wait, by its name',
  );
  t.equal(
    lockDelayText(
      rec({ ...HELD, floorPending: true }, { startAt: NOW - 20, reports: new Map([['mbp', 0]]), noEarlierLife: false }),
    ),
    'floor: pending until node-b reports',
    'a pending floor names who has not reported',
  );
  t.equal(lockDelayText(rec(HELD)), '', 'nothing when the holder may run');
  const old = { ...toRecord({ ...emptyLease(6, 1), ...HELD, notBefore: NOW + 3 }, new Map(), NOW) };
  delete (old as { wait?: unknown }).wait;
  t.equal(lockDelayText(old), 'lock-delay: may run in 3.0 s', 'a record without wait (hq 0.1) still counts down');
});

t.test('the view of holder cell: green or red only for a view a check would count', async (t) => {
  const up = { target: 'mbp', reachable: true, ping: true, health: true, at: NOW - 1 };
  const cell = (lease: Partial<LeaseState>, observers: Record<string, Partial<Observer>>, host: string) => {
    const h = model(lease, observers).hosts.find((x) => x.host === host);
    return { text: h?.viewText, level: h?.viewLevel };
  };
  t.same(
    cell(HELD, { mbp: { view: { ...up, target: 'node-b', reachable: false } }, 'node-b': {} }, 'mbp'),
    { text: 'it is the holder', level: 'muted' },
    "the holder's row never shows its view of its peer",
  );
  t.same(cell(HELD, both, 'node-b'), { text: 'no view', level: 'muted' }, 'no view yet is grey');
  t.same(
    cell(HELD, { mbp: {}, 'node-b': { view: up } }, 'node-b'),
    { text: 'mbp reachable (ping ok, health ok), 1.0 s ago', level: 'ok' },
    'a fresh view of the holder: reachable is green',
  );
  t.match(
    cell(HELD, { mbp: {}, 'node-b': { view: { ...up, reachable: false, ping: false, health: false } } }, 'node-b'),
    { text: /^mbp unreachable \(ping no, health no\)/, level: 'bad' },
    'unreachable is red',
  );
  t.match(
    cell(HELD, { mbp: {}, 'node-b': { view: { ...up, at: NOW - 10 } } }, 'node-b'),
    { text: /\(stale: older than viewFreshSeconds 6\.0 s\)$/, level: 'muted' },
    'a view older than viewFreshSeconds is grey',
  );
  t.match(
    cell(HELD, { mbp: {}, 'node-b': { ...silent, view: up } }, 'node-b'),
    { text: /\(stale: this host is silent\)$/, level: 'muted' },
    'the view of a silent host is grey',
  );
  t.match(
    cell({ ...HELD, acquiredAt: NOW - 0.5 }, { mbp: {}, 'node-b': { view: up } }, 'node-b'),
    { text: /\(from before mbp held the lease\)$/, level: 'muted' },
    'a view from before the tenure is grey',
  );
  t.match(
    cell(HELD, { mbp: {}, 'node-b': { view: { ...up, target: 'node-c' } } }, 'node-b'),
    { text: /^no view of mbp yet \(last: node-c reachable/, level: 'muted' },
    'a view of another host is not a view of the holder',
  );
  t.match(
    cell({}, { mbp: {}, 'node-b': { view: up } }, 'node-b'),
    { text: /\(no holder now\)$/, level: 'muted' },
    'without a holder every view is grey',
  );
});

t.test('the load cell prints the registry figures or a dash', async (t) => {
  const m = model(HELD, both, {
    load: (h) =>
      h === 'mbp'
        ? { loadAvg: [0.5, 0.25, 0.1, 9], cpuCount: 8, freeMem: 4e9, totalMem: 16e9, observedAt: NOW - 2 }
        : h === 'node-b'
          ? {}
          : null,
  });
  t.equal(m.hosts[0]?.loadText, 'load 0.50 0.25 0.10, 8 cpu, mem 75%', 'three load averages, cpus and memory in use');
  t.equal(m.hosts[0]?.load?.ageSeconds, 2, 'the age of the figures');
  t.equal(m.hosts[1]?.loadText, '—', 'a machine without figures is a dash');
  t.equal(m.hosts[2]?.loadText, '—', 'a host without a machine row is a dash');
  const thrown = model(HELD, both, {
    load: () => {
      throw new Error('registry closed');
    },
  });
  t.equal(thrown.hosts[0]?.loadText, '—', 'a failing registry is a dash, not a failed page');
});

t.test('event times are readable, never raw epochs', async (t) => {
  const at = 1_796_147_350.5;
  t.equal(clockTime(at), '2026-12-01 17:49:10.5Z', 'the timeline time keeps tenths');
  t.equal(clockTime(1_796_147_350), '2026-12-01 17:49:10Z', 'and drops them when there are none');
  t.equal(
    eventTime(1_796_147_357.0090392, at),
    '17:49:17Z (+6.5 s)',
    'a time of the same day: the time and how far from the event',
  );
  t.equal(eventTime(at - 86_400, at), '2026-11-30 17:49:10.5Z (-24.0 h)', 'another day keeps its date');
  t.equal(eventTime(Number.NaN, at), 'NaN', 'a time that is no time is printed as it is');
  t.equal(
    eventData({ at, data: { generation: 2, from: 'mbp', notBefore: 1_796_147_357.0090392, streak: 2 } }),
    'generation=2 from=mbp notBefore=17:49:17Z (+6.5 s) streak=2',
    'notBefore=1796147357.0090392 reads as a time',
  );
  t.equal(
    eventData({ at, data: { lastHeartbeatAt: at - 12, silentSeconds: 12, was: null } }),
    'lastHeartbeatAt=17:48:58.5Z (-12 s) silentSeconds=12 was=null',
    'times under *At and was too; other numbers stay numbers',
  );
  t.equal(eventData({ at, data: { note: 'x'.repeat(300) } }).length, 200, 'the line is cut at 200 characters');
});

t.test(
  "the arbiters line: etcd's space says nothing while it is ok, its warning and level once it matters",
  async (t) => {
    const base = { elected: true, leader: 'http://a:8470', self: 'http://a:8470', termSeconds: 5 };
    const member = { endpoint: 'http://e:2379', ok: true };
    const space = (level: 'ok' | 'warn' | 'bad', warning: string | null) => ({
      dbSizeBytes: 1,
      dbSizeInUseBytes: 1,
      quotaBytes: 10,
      quotaFrom: 'config' as const,
      usedRatio: 0.1,
      alarm: level === 'bad',
      level,
      warning,
    });
    const line = (s: ReturnType<typeof space>) =>
      arbitersText({ ...base, etcd: { healthy: true, members: [member], space: s } });
    t.same(
      line(space('ok', null)),
      { text: 'this arbiter (http://a:8470) is elected and decides · etcd 1/1 members up', level: 'ok' },
      'ok: the line as before',
    );
    t.same(
      line(space('warn', 'near the quota: defrag')),
      {
        text: 'this arbiter (http://a:8470) is elected and decides · etcd 1/1 members up · near the quota: defrag',
        level: 'warn',
      },
      'warn: the warning, in the warn colour',
    );
    t.match(line(space('bad', 'NOSPACE: disarm')), { text: /· NOSPACE: disarm$/, level: 'bad' }, 'the alarm: bad');
  },
);

t.test(
  'a broken peer path: its own phase after a timing problem and before a silent standby; rows broken first',
  async (t) => {
    const problem = "http://node-b:8471 refuses this host's peer token (HTTP 401): the peer tokens differ";
    const paths: PeerPaths = new Map([
      ['node-b', new Map([['mbp', { ok: true, problem: null, since: NOW - 60 }]])],
      ['mbp', new Map([['node-b', { ok: false, problem, since: NOW - 120 }]])],
    ]);
    const rows = peerPathRows(paths, NOW);
    t.same(
      rows.map((r) => [r.host, r.peer, r.ok, r.forSeconds]),
      [
        ['mbp', 'node-b', false, 120],
        ['node-b', 'mbp', true, 60],
      ],
      'broken first, each with how long it has been so',
    );
    t.equal(
      rows[0]?.text,
      `mbp → node-b broken for 2.0 min: node-b could not confirm mbp if the arbiter went down: ${problem}`,
      'both hosts and the cause',
    );
    t.equal(rows[1]?.text, 'node-b → mbp works (for 60 s)', 'a working path says so');
    const held = { mbp: {}, 'node-b': {} };
    t.match(
      model(HELD, held, { paths }).phase,
      { name: 'peer-path-broken', level: 'bad', text: /^peer path broken: mbp → node-b broken for 2\.0 min: / },
      'a held lease with a broken path: the phase says it, in red',
    );
    t.match(
      model(HELD, held, { paths, problems: [TIMING] }).phase,
      { name: 'timing-problem' },
      'a timing problem comes first',
    );
    t.match(
      model(HELD, { mbp: {}, 'node-b': { lastHeartbeatAt: NOW - 10 } }, { paths }).phase,
      { name: 'peer-path-broken' },
      'before a silent standby',
    );
    const mended: PeerPaths = new Map([['mbp', new Map([['node-b', { ok: true, problem: null, since: NOW - 1 }]])]]);
    t.match(model(HELD, held, { paths: mended }).phase, { name: 'healthy' }, 'every path working: healthy');
    t.same(model(HELD, held).peerPaths, [], 'no report yet: no rows');
  },
);
