/**
 * deploy/grafana/hq-dashboard.json and deploy/prometheus/alerts.yml against a real arbiter and
 * the agent's metrics registry: both parse, every metric they name is in the arbiter's /metrics
 * (scraped from the real app) or the agent's (its real registry, attached to a stub agent),
 * every label they group by is a label of those metrics, one label name per concept (`host` for
 * a machine, never `machine`), the panels and alerts the operator needs are there (an agents
 * row), and `promtool check rules` plus the rules' unit tests (`promtool test rules
 * alerts.test.yml`) pass — skipped where promtool is not installed, a failure under CI=true.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import type { Registry } from 'prom-client';
import { operatorHarness } from './helper.js';
import { missingTool } from '../missing-tool.js';
import { createMetrics, type ScrapedAgent } from '../../apps/agent/src/daemon/metrics.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
const DASHBOARD = resolve(ROOT, 'deploy/grafana/hq-dashboard.json');
const ALERTS = resolve(ROOT, 'deploy/prometheus/alerts.yml');
const ALERT_TESTS = resolve(ROOT, 'deploy/prometheus/alerts.test.yml');

/** Series Prometheus makes itself, not the arbiter. */
const SYNTHETIC = new Set(['up']);
/** Labels Prometheus adds (target labels) or that histograms carry. */
const TARGET_LABELS = new Set(['job', 'instance', 'le']);
const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
]);

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos?: unknown;
  datasource?: { uid?: string };
  targets?: Array<{ expr?: string; datasource?: { uid?: string } }>;
}
interface Dashboard {
  uid: string;
  title: string;
  __inputs: Array<{ name: string; pluginId: string }>;
  panels: Panel[];
  templating: { list: Array<{ query: { query: string } | string }> };
  annotations: { list: Array<{ expr?: string }> };
}
interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: { severity?: string };
  annotations?: { summary?: string; description?: string };
}

function metricNames(expr: string): string[] {
  const out = new Set<string>();
  // Strip strings (label values, templates) before looking for identifiers.
  const bare = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  for (const m of bare.matchAll(/\b(hq_[a-z0-9_]+|up)\b/g)) out.add(m[1] as string);
  return [...out];
}

function groupingLabels(expr: string): string[] {
  const out = new Set<string>();
  for (const m of expr.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g)) {
    for (const l of (m[1] as string)
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''))
      out.add(l);
  }
  for (const m of expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').matchAll(/\{([^}]*)\}/g)) {
    for (const part of (m[1] as string).split(',')) {
      const name = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/.exec(part)?.[1];
      if (name !== undefined) out.add(name);
    }
  }
  return [...out].filter((l) => !PROMQL_WORDS.has(l));
}

async function scrape(t: Tap.Test): Promise<{ types: Map<string, string>; labels: Set<string>; text: string }> {
  const h = await operatorHarness(t);
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  await h.post(
    '/v1/heartbeat',
    { host: 'node-b', heartbeatSeconds: 1, view: { target: 'mbp', reachable: true, ping: true, health: true } },
    h.tokens.nodeb,
  );
  await h.post('/v1/check', undefined);
  const res = await h.get('/metrics');
  t.equal(res.statusCode, 200, 'the real arbiter serves /metrics');
  const types = new Map<string, string>();
  for (const m of res.body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1] as string, m[2] as string);
  const labels = new Set<string>();
  const registry: Registry = h.rt.metrics.registry;
  for (const metric of await registry.getMetricsAsJSON()) {
    const one = registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] } | undefined;
    for (const l of one?.labelNames ?? []) labels.add(l);
  }
  return { types, labels, text: res.body };
}

/** The metric names and label names of a registry (default labels included). */
async function describe(
  registry: Registry,
): Promise<{ types: Map<string, string>; labels: Map<string, Set<string>>; text: string }> {
  const text = await registry.metrics();
  const types = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1] as string, m[2] as string);
  const labels = new Map<string, Set<string>>();
  const defaults = Object.keys(
    (registry as unknown as { _defaultLabels?: Record<string, string> })._defaultLabels ?? {},
  );
  for (const metric of await registry.getMetricsAsJSON()) {
    const one = registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] } | undefined;
    labels.set(metric.name, new Set([...(one?.labelNames ?? []), ...defaults]));
  }
  return { types, labels, text };
}

/** The agent's real registry, attached to a stub agent on host mbp (what its /metrics serves). */
async function agentMetrics(): Promise<{ types: Map<string, string>; labels: Map<string, Set<string>>; text: string }> {
  const m = createMetrics();
  const stub: ScrapedAgent = {
    host: 'mbp',
    clock: { now: () => ({ wall: 1_800_000_003, mono: 3 }) },
    store: { state: { seen: 3, known: { generation: 3 } } },
    fence: { validForSeconds: () => 42 },
    link: { tokenProblem: null, lastHeartbeat: { at: 1_800_000_000 } },
    peers: { peerPaths: new Map([['node-b', null]]) },
  };
  m.attach(stub);
  m.heartbeat('renewed');
  m.peerConfirm('confirmed');
  m.httpDuration.observe({ listener: 'peer', method: 'GET', route: '/v1/health', status: '200' }, 0.001);
  return describe(m.registry);
}

function known(types: Map<string, string>, name: string): boolean {
  if (SYNTHETIC.has(name) || types.has(name)) return true;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return base !== name && types.get(base) === 'histogram';
}

t.test('the Grafana dashboard parses, has the asked-for panels, and names only real metrics', async (t) => {
  let d: Dashboard;
  try {
    d = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  } catch (err) {
    t.fail(`hq-dashboard.json does not parse: ${(err as Error).message}`);
    return;
  }
  t.pass('hq-dashboard.json parses');
  t.equal(d.uid, 'hq-lease', 'the dashboard has a stable uid (re-import replaces it)');
  t.ok(
    d.__inputs.some((i) => i.name === 'DS_PROMETHEUS' && i.pluginId === 'prometheus'),
    'import asks for the Prometheus data source',
  );
  const ids = d.panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  const queries = d.panels.filter((p) => p.type !== 'row');
  for (const p of queries) {
    t.ok(p.gridPos !== undefined, `panel "${p.title}" has a position`);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own placeholder for the imported data source
    t.equal(p.datasource?.uid, '${DS_PROMETHEUS}', `panel "${p.title}" uses the imported data source`);
    t.ok(
      (p.targets ?? []).length > 0 && (p.targets ?? []).every((x) => typeof x.expr === 'string' && x.expr !== ''),
      `panel "${p.title}" has queries`,
    );
  }
  const titles = queries.map((p) => p.title.toLowerCase());
  const agentRow = d.panels.find((p) => p.type === 'row' && /agents/i.test(p.title) && /hq-agent/.test(p.title));
  t.ok(agentRow !== undefined, 'there is a row for the agents (their own /metrics, job hq-agent)');
  const agentPanels = queries.filter((p) => (p.targets ?? []).some((x) => (x.expr ?? '').includes('$agent_job')));
  t.ok(agentPanels.length >= 6, `the agents row has panels over the agent job (${agentPanels.length})`);
  t.ok(
    agentPanels.every(
      (p) => (p.gridPos as { y: number }).y > ((agentRow?.gridPos as { y: number } | undefined)?.y ?? Infinity),
    ),
    'and they sit under the agents row',
  );
  for (const want of [
    'holder over time',
    'generation over time',
    'validity left',
    'views by observer',
    'checks by result',
    'probe results',
    'promotions',
    'heartbeat age per host',
    'request latency',
  ]) {
    t.ok(
      titles.some((x) => x.startsWith(want)),
      `there is a "${want}" panel`,
    );
  }

  const { types: arbiterTypes, labels: arbiterLabels } = await scrape(t);
  const agent = await agentMetrics();
  const types = new Map([...agent.types, ...arbiterTypes]);
  const labels = new Set([...arbiterLabels, ...[...agent.labels.values()].flatMap((l) => [...l])]);
  const agentExprs = agentPanels.flatMap((p) => (p.targets ?? []).map((x) => x.expr as string));
  for (const name of new Set(agentExprs.flatMap(metricNames)))
    t.ok(known(agent.types, name), `agents-row metric ${name} is in the agent's /metrics`);
  for (const want of [
    'hq_agent_validity_remaining_seconds',
    'hq_agent_seen_generation',
    'hq_agent_heartbeats_total',
    'hq_agent_fence_decisions_total',
    'hq_agent_member_token_ok',
    'hq_agent_peer_confirmations_total',
    'hq_http_request_duration_seconds_bucket',
  ]) {
    t.ok(
      agentExprs.some((e) => metricNames(e).includes(want)),
      `the agents row shows ${want}`,
    );
  }
  t.ok(
    agentExprs.every((e) => e.includes('host=~"$host"') || !e.includes('hq_')),
    'every agents-row query can be narrowed to the chosen hosts',
  );
  const exprs = [
    ...queries.flatMap((p) => (p.targets ?? []).map((x) => x.expr as string)),
    ...d.templating.list.map((v) => (typeof v.query === 'string' ? v.query : v.query.query)),
    ...d.annotations.list.flatMap((a) => (a.expr === undefined ? [] : [a.expr])),
  ];
  const used = new Set(exprs.flatMap(metricNames));
  for (const name of used)
    t.ok(known(types, name), `dashboard metric ${name} is in the arbiter's or the agent's /metrics`);
  for (const l of new Set(exprs.flatMap(groupingLabels)))
    t.ok(labels.has(l) || TARGET_LABELS.has(l), `dashboard label ${l} is a label of an hq metric (or a target label)`);
  for (const spec of [
    'hq_lease_generation',
    'hq_lease_holder',
    'hq_lease_expires_in_seconds',
    'hq_lease_dual_unreachable_streak',
    'hq_view_reachable',
    'hq_view_age_seconds',
    'hq_checks_total',
    'hq_probe_total',
    'hq_promotions_total',
    'hq_lease_operations_total',
    'hq_agent_last_heartbeat_age_seconds',
    'hq_http_request_duration_seconds_bucket',
  ]) {
    t.ok(used.has(spec), `the dashboard shows ${spec}`);
  }
});

t.test('the alert rules parse, cover the six asked-for alerts, and name only real metrics', async (t) => {
  const doc = parseYaml(readFileSync(ALERTS, 'utf8')) as { groups: Array<{ name: string; rules: Rule[] }> };
  t.ok(Array.isArray(doc.groups) && doc.groups.length > 0, 'alerts.yml has rule groups');
  const rules = doc.groups.flatMap((g) => g.rules);
  t.same(
    rules.map((r) => r.alert).sort(),
    [
      'HqAgentDown',
      'HqAgentSilent',
      'HqAgentTokenBroken',
      'HqArbiterDown',
      'HqDualUnreachable',
      'HqLeaseValidityLow',
      'HqMaintenanceLeftOn',
      'HqNoHostMayRun',
      'HqPromotionHappened',
    ],
    'the alerts asked for: the lease, the agents, and no host that may run',
  );
  for (const r of rules) {
    t.ok(typeof r.expr === 'string' && r.expr.trim() !== '', `${r.alert} has an expression`);
    t.ok(['info', 'warning', 'critical'].includes(r.labels?.severity ?? ''), `${r.alert} has a severity`);
    t.ok(
      (r.annotations?.summary ?? '') !== '' && (r.annotations?.description ?? '') !== '',
      `${r.alert} says what happened and what to do`,
    );
  }
  const { types: arbiterTypes, labels: arbiterLabels } = await scrape(t);
  const agent = await agentMetrics();
  const labels = new Set([...arbiterLabels, ...[...agent.labels.values()].flatMap((l) => [...l])]);
  for (const r of rules) {
    const names = metricNames(r.expr);
    const both = names.filter((n) => n !== 'up' && agent.types.has(n) && arbiterTypes.has(n));
    const job =
      /job="(hq-arbiter|hq-agent)"/.exec(r.expr)?.[1] ??
      (names.every((n) => known(arbiterTypes, n)) ? 'hq-arbiter' : 'hq-agent');
    if (both.length > 0 || names.includes('up'))
      t.ok(
        /job="(hq-arbiter|hq-agent)"/.test(r.expr),
        `${r.alert} selects its job (${[...both, ...(names.includes('up') ? ['up'] : [])].join(', ')} come from both jobs)`,
      );
    const own = job === 'hq-agent' ? agent.types : arbiterTypes;
    for (const name of names) t.ok(known(own, name), `${r.alert}: metric ${name} is in the ${job}'s /metrics`);
    for (const l of groupingLabels(r.expr))
      t.ok(
        labels.has(l) || TARGET_LABELS.has(l),
        `${r.alert}: label ${l} is a label of an hq metric (or a target label)`,
      );
  }
});

/** $HQ_PROMTOOL names the binary ("" pretends it is not installed); else promtool on PATH; null: skipped (a failure under CI=true). */
function findPromtool(t: Tap.Test, what: string): string | null {
  const which = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  const promtool = process.env['HQ_PROMTOOL'] ?? (which.status === 0 ? which.stdout.trim() : '');
  if (promtool !== '') return promtool;
  missingTool(t, `${what} not run: promtool is not installed (Debian: apt-get install -y prometheus)`);
  return null;
}

t.test('promtool accepts the rules and their unit tests pass (where promtool is installed)', async (t) => {
  const promtool = findPromtool(t, 'promtool check rules');
  if (promtool === null) return;
  const check = spawnSync(promtool, ['check', 'rules', ALERTS], { encoding: 'utf8', timeout: 30_000 });
  t.equal(
    check.status,
    0,
    `promtool check rules passes: ${(check.stdout + check.stderr).trim().split('\n').slice(-3).join(' | ')}`,
  );
  const unit = spawnSync(promtool, ['test', 'rules', ALERT_TESTS], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd: resolve(ROOT, 'deploy/prometheus'),
  });
  t.equal(
    unit.status,
    0,
    `promtool test rules passes: ${(unit.stdout + unit.stderr).trim().split('\n').slice(-6).join(' | ')}`,
  );
  t.comment(`promtool: ${execFileSync(promtool, ['--version'], { encoding: 'utf8' }).split('\n')[0]}`);
});

t.test("promtool check metrics accepts both daemons' /metrics (where promtool is installed)", async (t) => {
  const promtool = findPromtool(t, 'promtool check metrics');
  if (promtool === null) return;
  const h = await operatorHarness(t, {}, { harness: { registry: true, processMetrics: true } });
  await h.settle();
  await h.post('/v1/lease/acquire', { host: 'mbp', seenGeneration: 0 }, h.tokens.mbp);
  await h.post(
    '/v1/heartbeat',
    {
      host: 'node-b',
      heartbeatSeconds: 1,
      view: { target: 'mbp', reachable: true, ping: true, health: true },
      peerPaths: [
        { peer: 'mbp', ok: false, problem: "http://mbp:8471 refuses this host's peer token (HTTP 401)", ageSeconds: 3 },
      ],
    },
    h.tokens.nodeb,
    { 'hq-protocol': '2' },
  );
  const arbiter = (await h.get('/metrics')).body;
  t.match(arbiter, /^nodejs_active_handles\{/m, "the arbiter's scrape has prom-client's process metrics");
  t.match(arbiter, /^hq_peer_path_ok\{host="node-b",peer="mbp"\} 0$/m, 'and the peer path node-b reported broken');
  for (const [who, text] of [
    ['arbiter', arbiter],
    ['agent', (await agentMetrics()).text],
  ] as const) {
    const r = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
    t.equal(
      r.status,
      0,
      `promtool check metrics passes on the ${who}'s /metrics: ${(r.stdout + r.stderr).trim().split('\n').slice(-4).join(' | ')}`,
    );
  }
});

t.test('one label name per concept: host names a machine in every metric, and views name their target', async (t) => {
  const h = await operatorHarness(t, {}, { harness: { registry: true } });
  await h.settle();
  await h.post(
    '/v1/heartbeat',
    { host: 'node-b', heartbeatSeconds: 1, view: { target: 'mbp', reachable: true, ping: true, health: true } },
    h.tokens.nodeb,
  );
  const arbiter = await describe(h.rt.metrics.registry);
  const agent = await agentMetrics();
  t.ok(arbiter.types.has('hq_fleet_member_up'), 'the registry gauges are part of the scrape');
  for (const [who, m] of [
    ['arbiter', arbiter],
    ['agent', agent],
  ] as const) {
    for (const [name, l] of m.labels) t.notOk(l.has('machine'), `${who} metric ${name} does not use a machine label`);
  }
  t.same([...(arbiter.labels.get('hq_fleet_member_up') ?? [])], ['host'], 'hq_fleet_member_up{host}');
  t.same([...(arbiter.labels.get('hq_fleet_member_load1') ?? [])], ['host'], 'hq_fleet_member_load1{host}');
  t.same(
    [...(arbiter.labels.get('hq_view_age_seconds') ?? [])].sort(),
    ['observer', 'target'],
    'hq_view_age_seconds{observer,target}',
  );
  t.match(
    (await h.get('/metrics')).body,
    /hq_view_age_seconds\{observer="node-b",target="mbp"\} \d/,
    'the view age names its target like hq_view_reachable does',
  );
  for (const name of agent.types.keys()) t.ok(agent.labels.get(name)?.has('host'), `agent metric ${name} carries host`);
  t.match(agent.text, /hq_agent_validity_remaining_seconds\{host="mbp"\} 42/, "the agent's series name their machine");
});

t.test('docs/REFERENCE.md "Metrics" names every hq metric both daemons export', async (t) => {
  const h = await operatorHarness(t, {}, { harness: { registry: true } });
  await h.settle();
  const text = readFileSync(resolve(ROOT, 'docs/REFERENCE.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Metrics\n'), text.indexOf('\n## ', text.indexOf('\n## Metrics\n') + 5));
  const names = [
    ...(await describe(h.rt.metrics.registry)).types.keys(),
    ...(await agentMetrics()).types.keys(),
  ].filter((n) => n.startsWith('hq_'));
  t.ok(names.includes('hq_fleet_member_load1'), 'the registry gauges are among them');
  for (const name of new Set(names))
    t.ok(
      section.includes(`\`${name}\``) || section.includes(`\`${name}{`),
      `${name} is in docs/REFERENCE.md "Metrics"`,
    );
});
