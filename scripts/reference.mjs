#!/usr/bin/env node
// Writes docs/REFERENCE.md: every `hq`, `hq-agent` and `hq-arbiter` command and flag (from the CLIs' command specs, the
// same text `--help` prints), every config key of both daemons with its owner, default and
// meaning (the key lists come from the TypeBox schemas the daemons validate with, so a key added
// without a line here fails `test/deploy/reference.test.ts`), the endpoints, exit codes, metrics
// and events. Run after `npm run build`: `node scripts/reference.mjs` (or `--check` to compare).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => import(join(root, p));

const { COMMANDS } = await dist('apps/agent/dist/cli/main.js');
const { COMMANDS: ARBITER_COMMANDS } = await dist('apps/arbiter/dist/commands.js');
const { DOCTOR_SPEC } = await dist('apps/agent/dist/cli/doctor-spec.js');
const { AGENT_SPEC } = await dist('apps/agent/dist/daemon-spec.js');
const { STANDBY_SPECS } = await dist('apps/agent/dist/cli/standby-specs.js');
const { AgentConfigSchema } = await dist('apps/agent/dist/config.js');
const { ConfigSchema } = await dist('apps/arbiter/dist/config.js');
const { ARBITER_ONLY_KEYS, AGENT_ONLY_KEYS } = await dist('packages/lease-core/dist/index.js');

/** Every config key: default and meaning. Owner comes from lease-core's keys.ts. */
export const KEYS = {
  arbiter: ['`cloud-vm`', "the arbiter's host name (the observer name of its views); never a candidate"],
  candidates: [
    '`["mbp","node-b"]`',
    'the hosts that may hold the lease, in promotion priority; agents learn them from heartbeat answers',
  ],
  standby: ['—', 'the preferred promotee: promoted first when eligible, then the others in `candidates` order'],
  ttlSeconds: ['`1500`', 'lease TTL; agents read it from the record; the holder renews three times per validity'],
  viewFreshSeconds: [
    '`1500`',
    "a view older than this is no evidence; must cover each agent's reported heartbeat interval (checked on every report)",
  ],
  promoteAfterChecks: ['`2`', 'consecutive dual-unreachable checks before a promotion'],
  safetyMarginSeconds: [
    '`30`',
    'clock-rate allowance shaved off every validity and added to every lock-delay; ≥ 1 % of the TTL and < half of it; agents read it from the record',
  ],
  checkCron: [
    '`*/10 * * * *`',
    'node-cron schedule of checks (6 fields = seconds); any valid expression, its real largest gap is used',
  ],
  heartbeatCron: ['`*/10 * * * *`', "the agent's heartbeat schedule; reported to the arbiter with every heartbeat"],
  refreshSeconds: [
    '`60`',
    'how often the agent reads the lease between heartbeats (every 2 s while it knows of no holder, so a standby learns of the first grant at once); must be shorter than the TTL (checked by the arbiter)',
  ],
  requestTimeoutSeconds: [
    '`5`',
    'an answer later than this is discarded, never acted on; declared in every request (the arbiter counts start-wait reports with it)',
  ],
  probeTimeoutSeconds: [
    '5, or half the check / heartbeat interval when shorter',
    "each daemon's own probe timeout; must be shorter than its own check / heartbeat interval",
  ],
  hostName: [
    '`{stateDir}/host`, else the OS host name without `.local`',
    'this host; wins over the host file (a difference is logged and shown by `hq doctor`)',
  ],
  arbiterUrl: [
    '`http://{arbiter}.{tailnetDomain}:8470`',
    "where the agent talks to the arbiter; a bare origin (no credentials, no path); `hq`'s read-only commands without any config use `http://127.0.0.1:8470`",
  ],
  failOpenRoles: [
    '`[]`',
    'roles that run when quorum is lost (never `ledger-cli`; never once a higher generation was seen)',
  ],
  roles: [
    '`telegram-poller, cron, release-run, git-push, ledger-cli`',
    'the known fence roles; others get 400 / exit 2',
  ],
  healthUrls: ['—', 'pinned health URL per host (`{host: url}`); default `http://HOST.{tailnetDomain}:8471/v1/health`'],
  tailnetDomain: ['`tailscale status --json` → MagicDNSSuffix', 'derives the default URLs'],
  tailscaleBin: ['`tailscale`', '`""` disables `tailscale ping` (health alone decides; nothing calls tailscale)'],
  listen: ['arbiter `127.0.0.1:8470`, agent `0.0.0.0:8471`', '`{host, port}` of the API / the peer listener'],
  dataDir: ['`./var`', 'holds `hq.db`, `admin.token` and, while the daemon runs, `arbiter.lock` (dir 0700)'],
  store: [
    '`{kind: "sqlite"}`',
    'where the state lives: the SQLite file in `dataDir`, or `{kind: "etcd", endpoints: ["http://host:2379", …], prefix: "/hq", dialTimeoutSeconds: 2, requestTimeoutSeconds: 5, electionTtlSeconds: 10, advertiseUrl, compactionIntervalSeconds: 300, quotaBackendBytes: 2147483648}` for several arbiters in front of one etcd cluster (one is elected and decides; `tls: {caFile, certFile, keyFile}` for `https://` members). The elected arbiter compacts etcd\'s history every `compactionIntervalSeconds` to the revision it noted one interval earlier (kube-apiserver\'s default of 5 minutes; shorter: a watch slower than one interval reads again, a backup longer than one interval fails; 0: never, for a cluster that compacts itself); `quotaBackendBytes` is the members\' `--quota-backend-bytes`, the yardstick of the space warning (80 %) when the members do not report their own (etcd < 3.6)',
  ],
  auth: ['`{openReads: true}`', 'GETs need no token (the tailnet is the fence); `false`: `query` scope'],
  hooks: [
    '—',
    '`{urls: [...], command: [...]}` called on promoted, renew-refused, a check streak, maintenance, agent silence, timing problems and a broken peer path',
  ],
  portBands: [
    'reserved `[31413, 31415, 31420]`, test `31450–31499`, offline `31500–31509`',
    "the registry's port bands",
  ],
  events: ['`{maxAgeDays: 90, maxCount: 100000}`', 'the bounded event history, swept at start and hourly'],
  stateDir: ['`~/.hq`', 'holds `local.json`, `seen-generation`, `host`, the tokens (dir 0700)'],
  socketPath: ['`{stateDir}/agent.sock`', 'the fence socket (mode 0660)'],
  tokenFile: [
    '`{stateDir}/token`',
    'the member token (mode 0600); checked at start (exit 2 when missing, insecure, or refused by the arbiter)',
  ],
  peers: ['from the candidates the arbiter names, with `tailnetDomain`', '`{host: url}` of the other agents'],
  peerTokenFile: ['`{stateDir}/peer-token`', 'the shared secret for agent ↔ agent calls (mode 0600)'],
  replication: [
    '—',
    'standby replication: the plan, keep, schedules, standbys, `pollersOff`, and `survival.s3` (a bucket that also takes survival copies, server-side encrypted; credentials from the AWS environment or profile only): see deploy/replication/README.md',
  ],
  advertiseUrl: [
    '`http://{hostName}.{tailnetDomain}:{port}`, else a specific `listen.host`',
    "this agent's peer URL as others reach it (a bare origin), registered as its `instance` resource",
  ],
  queryTokenFile: [
    '`{stateDir}/query-token` when present',
    '`hq primary --write-join` puts this query-scope token in the join file (else the member token)',
  ],
  arbiterUrls: ['`[arbiterUrl]`', 'several arbiters (etcd store), tried in order'],
  handoverOnStop: [
    '`false`',
    'on SIGTERM the holder ends its fenced children and hands over to the first standby (promotion order) the arbiter has heard from recently, then exits; off: a stopped holder keeps the lease',
  ],
};

function owner(key) {
  const inArbiter = Object.hasOwn(ConfigSchema.properties, key);
  const inAgent = Object.hasOwn(AgentConfigSchema.properties, key);
  if (ARBITER_ONLY_KEYS.includes(key)) return inArbiter ? 'hq-arbiter' : 'hq-arbiter (planned)';
  if (AGENT_ONLY_KEYS.includes(key)) return inAgent ? 'hq-agent' : 'hq-agent (planned)';
  return 'both (each its own)';
}

export function keyRows() {
  const keys = [...new Set([...Object.keys(ConfigSchema.properties), ...Object.keys(AgentConfigSchema.properties)])];
  return keys.map((k) => {
    const entry = KEYS[k];
    if (entry === undefined) throw new Error(`scripts/reference.mjs: config key "${k}" has no line in KEYS`);
    return `| \`${k}\` | ${owner(k)} | ${entry[0]} | ${entry[1]} |`;
  });
}

const cell = (s) => String(s).replaceAll('|', '\\|').replaceAll('\n', ' ');

function commandSection(spec, prefix = 'hq') {
  const pos = (spec.positionals ?? []).map((p) => ` ${p.name}`).join('');
  const rest = spec.rest === undefined ? '' : ` -- ${spec.rest.name}`;
  const name = spec.name === '' ? prefix : `${prefix} ${spec.name}`;
  const lines = [`### \`${name}${pos}${rest}\``, '', cell(spec.summary), ''];
  if (spec.flags.length > 0) {
    lines.push('| flag | meaning |', '|---|---|');
    for (const f of spec.flags)
      lines.push(`| \`--${f.name}${f.value === undefined ? '' : ` ${f.value}`}\` | ${cell(f.help)} |`);
    lines.push('');
  }
  lines.push(`Exit: ${cell(spec.exits)}`, '');
  return lines.join('\n');
}

export function render() {
  const standby = Object.values(STANDBY_SPECS);
  return `# hq reference

Generated by \`node scripts/reference.mjs\` from the code (the command specs \`--help\` prints, the
config schemas the daemons validate with); \`test/deploy/reference.test.ts\` fails when it is stale.
The behaviour behind it: [PROTOCOL.md](PROTOCOL.md) and [SAFETY.md](SAFETY.md).

## Configuration keys

One JSON file per daemon, validated at start; an invalid file stops it with one line naming the key
(exit 2). Each setting has one owner: a key in the wrong daemon's file is refused naming its owner.
Agents read the lease timing (\`ttlSeconds\`, \`safetyMarginSeconds\`) from the lease record and
report their cadence with every heartbeat; the arbiter checks the pairs across the two sides on
every report and reports a broken one everywhere (heartbeat answer, \`timing-problem\` event,
\`hq_timing_problem\` metric, status page, \`hq lease status\`, \`hq doctor\`).
\`hq\` reads the agent's file: \`--config PATH\`, else \`$HQ_CONFIG\`, else \`~/.hq/agent.json\`, else
\`/etc/hq/agent.json\`. \`hq-arbiter\`: \`--config\`, \`$HQ_ARBITER_CONFIG\`, \`~/.hq/arbiter.json\`,
\`/etc/hq/arbiter.json\`, else the defaults.

| key | owner | default | meaning |
|---|---|---|---|
${keyRows().join('\n')}

## \`hq-arbiter\`

${ARBITER_COMMANDS.map((c) => commandSection(c.spec, 'hq-arbiter')).join('\n')}
Every command takes \`--help\`; \`hq-arbiter --version\` prints hq's version (exit 0).
\`token\`, \`check\` and \`backup\` where no config file is found (no \`--config\`, \`$HQ_ARBITER_CONFIG\`,
\`~/.hq/arbiter.json\` or \`/etc/hq/arbiter.json\`) and no database exists under \`./var\` refuse (exit 2)
rather than create one no daemon reads.

## \`hq-agent\`

${commandSection(AGENT_SPEC, 'hq-agent')}
## \`hq\`

${COMMANDS.map((c) => commandSection(c.spec)).join('\n')}
${commandSection(DOCTOR_SPEC)}
${standby.map((s) => commandSection(s)).join('\n')}
## Exit codes

| code | meaning |
|---|---|
| 0 | ok; \`fence check\`: may run; \`fence run\`: the skip (or \`--skip-exit N\`) |
| 1 | refused (the arbiter said no), \`fence check\`: skip — also when it could not ask the agent (the line says why; \`fence run\` uses 69 for that), \`doctor\`: a check failed |
| 2 | usage or configuration error (one line naming the key or flag) |
| 3 | unreachable (the arbiter or the agent did not answer) |
| 4 | \`hq guard\`: the write is refused |
| 75 | \`hq fence run\` / \`hq port run\`: the fence or the port was lost and CMD stopped |

## Arbiter HTTP API (port 8470)

JSON in and out, times in epoch seconds on the arbiter's clock, bodies validated strictly (unknown
fields refused, no coercion); errors \`{error: "HQ_ERR_…", message}\` with 400, 401, 403, 404, 405, 409,
412, 413, 415, 422 — never a 5xx for bad input, and never \`400 HQ_ERR_BAD_REQUEST\` for a request the
document allows (a refusal the schema cannot express has its own code: \`HQ_ERR_BAD_MANIFEST\`,
\`HQ_ERR_PROTOCOL_VERSION\`). A path parameter over 100 characters or a malformed percent escape is
\`400 HQ_ERR_BAD_REQUEST\`; a known path asked with a method it does not answer is
\`405 HQ_ERR_METHOD_NOT_ALLOWED\` with an \`Allow\` header; \`HEAD\` answers like \`GET\` (with store etcd, \`503 HQ_ERR_NOT_ELECTED\` while no arbiter
is elected and \`503 HQ_ERR_STORE_UNAVAILABLE\` while etcd does not answer: nothing was decided). The full document: \`GET /v1/openapi.json\`.
Every request and answer carries \`hq-protocol: N\` (this release speaks 2 and serves 1; no header is 1,
hq 0.1.x); a version not served is \`400 HQ_ERR_PROTOCOL_VERSION\`, naming both versions and what to
upgrade; answers say the version they were spoken to (docs/PROTOCOL.md "Versions").
Generations stay at or below the ceiling 281474976710656 (2^48): a decision that would grant above it
is \`409 HQ_ERR_GENERATION_CEILING\`, and a reported generation (\`seenGeneration\`, or the \`generation\`
of a renewal, release, heartbeat or step-down) more than 1048576 (2^20) above the highest generation
the arbiter granted or learned is \`409 HQ_ERR_GENERATION_JUMP\` — nothing of that request is taken
until an admin accepts it (\`hq lease accept G\`; docs/SAFETY.md "The generation bounds").

| method, path | scope | what |
|---|---|---|
| \`GET /v1/health\` | none | \`{status, role, host, version}\`; with store etcd also \`store: "etcd"\` and \`arbiters {elected, leader, self, termSeconds, etcd {healthy, members, space {dbSizeBytes, dbSizeInUseBytes, quotaBytes, quotaFrom, usedRatio, alarm, level, warning}, compaction {intervalSeconds, revision}}}\` |
| \`GET /v1/lease\` | read | the record (\`ETag: "<revision>"\`), with \`ttlSeconds\` and \`safetyMarginSeconds\`, and \`wait\` (\`{kind, until, host, unreported, text}\` or null): which wait holds the holder — the old holder's \`lock-delay\`, the arbiter's \`start-wait\`, a \`floor-pending\` new database, or its own \`confirmation\` of the old holder — until when and why |
| \`POST /v1/lease/acquire\` | member/admin | \`{host, seenGeneration?, requestTimeoutSeconds?}\` |
| \`POST /v1/lease/renew\` | member/admin | \`{host, generation}\` |
| \`POST /v1/lease/release\` | member/admin | \`{host, generation?, handoverTo?, force?, ran?}\` (\`ran\`: the handing-over holder ran that generation; during the arbiter's start wait, once every candidate reported nothing above it, the handover then skips the start wait) |
| \`POST /v1/lease/stepped-down\` | member | \`{host, generation, revision, ran?}\`: the displaced holder stepped down, no fenced child alive → \`{accepted, reason, savedSeconds, lease}\`; accepted only for the generation its grant displaced, while the lock-delay runs, once — it then ends |
| \`POST /v1/heartbeat\` | member | \`{host, generation?, seenGeneration?, view?, confirmation?, heartbeatSeconds?, refreshSeconds?, requestTimeoutSeconds?, version?}\` (\`version\`: the agent's release, protocol 2) → \`{outcome, reason, lease, hold, reportInSeconds, timingProblems, failover, candidates, stepDown}\` |
| \`POST /v1/check\` | admin | one check now |
| \`POST /v1/join\` | none (the bundle's secret) | \`{host, secret, nonce, dryRun?}\` → \`{payload, publicKey, signature}\`: once per bundle, issues HOST's member token and answers its config and the peer token, signed (Ed25519 over the nonce and the payload) by the identity key; \`401 HQ_ERR_JOIN_REFUSED\` for a used, expired, replaced or another host's bundle |
| \`POST /v1/lease/transfer\` | admin | \`{to, force?}\` |
| \`POST /v1/lease/accept-generation\` | admin | \`{generation}\` → \`{ok, floor, was, lease}\`: raises the floor to a generation an agent really saw, beyond the report bound; 409 at or above the ceiling |
| \`PUT /v1/maintenance\` | admin | \`{enabled, reason?}\` |
| \`GET /v1/primary\` | read | \`{known, holder, generation}\` |
| \`GET /v1/events?after=ID&limit=N&tail=N&since=T\` | read | \`{events: [...]}\` ascending; each part optional, \`limit\` and \`tail\` 1–1000: \`after\` and \`since\` are lower bounds (the later wins), \`tail\` keeps the last events above them, \`limit\` caps the count (default 100) |
| \`GET /v1/events/stream\` | read | Server-Sent Events (from \`Last-Event-ID\`, else the newest 20) |
| \`GET /v1/status\` | read | the status page's data: the phase line, hosts (each with \`protocol\`, \`release\`, \`versionText\`, \`upgrade\`), failover sentence, timing problems, \`peerPaths\` (each candidate's path to each peer as its heartbeat reported it, broken first), \`generationRefusal\` (the last report or grant the generation bounds refused, or null) |
| \`GET /\` | read | the status page |
| \`GET /metrics\` | read | Prometheus text |
| \`/v1/resources…\`, \`/v1/leases/port…\` | member | the fleet registry and port leases; \`excluded\` ports outside the test band change nothing; one machine holds at most half the test band's allocatable ports at once (rounded up: 25 of the default 50), so a runaway loop or a stolen member token on one host leaves the other hosts their ports, while a one-host installation still runs its tests in parallel — beyond that share, or with the band full, \`503 HQ_ERR_BAND_FULL\` (the admin token may lease for any machine name, each with its own share) |
| \`PUT /v1/survival/…\`, \`GET /v1/survival\` | member / read | survival copies |

## Agent socket and peer listener

Socket: \`GET /v1/fence?role=R\`, \`GET /v1/status\`, \`GET /v1/seen\`, \`GET /v1/primary\`,
\`POST /v1/heartbeat\`, \`POST /v1/step-down\` (→ \`{ok, steppedDown, childrenGone}\`: persisted, the
generation's fenced children ended), \`POST /v1/resume\`, and the runs of \`hq fence run\`
supervisors: \`POST /v1/runs\` \`{role, generation, graceSeconds, supervisorPid}\` (409 unless the
fence says run for that generation), \`POST /v1/runs/{id}\` \`{pgid}\`, \`DELETE /v1/runs/{id}\` — a
pid the agent would signal is refused (400) when it is 1, the agent's own process or group, or
(Linux, from \`/proc\`) a group not led by a child of the run's supervisor. \`GET /v1/status\` says
\`stepDownSeconds\`: the longest a step-down can take now (each run's report wait, twice its grace,
slack), which \`hq lease release\` waits for. Peer listener (port 8471):
\`GET /v1/health\`, \`GET /v1/primary\`, \`GET /metrics\` (no auth); \`POST /v1/peer/confirm\`
\`{host, generation, ttlSeconds?, safetyMarginSeconds?, probe?}\` and \`GET /v1/peer\` with the peer token (\`probe: true\`
is answered \`{confirmed: false, reason: "probe"}\` without deciding or recording anything: each agent sends one to every
peer after each heartbeat the arbiter answers, and \`hq doctor\` one too, so a peer token that differs shows while the
arbiter is up: event \`peer-path-broken\`, \`hq_agent_peer_path_ok\`, \`peerPaths\` in \`GET /v1/status\`; the next heartbeat
carries the findings, at once when one changed, so the arbiter's status page, \`hq lease status\`, its log and
\`hq_peer_path_ok\` show them too);
\`/v1/standby/…\` replication pushes.

Fence reasons: \`holder, quorum-standby, within-ttl, lock-delay, not-holder, stale-generation,
no-quorum-expired, no-lease, no-lease-after-seen, fail-open\`.

## Metrics

Arbiter: \`hq_lease_generation\`, \`hq_lease_holder{host}\`, \`hq_lease_expires_in_seconds\`,
\`hq_lease_dual_unreachable_streak\`, \`hq_view_reachable{observer,target}\`,
\`hq_view_age_seconds{observer,target}\`, \`hq_checks_total{result}\`, \`hq_probe_total{kind,result}\`,
\`hq_promotions_total\`, \`hq_lease_operations_total{op,outcome}\`,
\`hq_agent_last_heartbeat_age_seconds{host}\`, \`hq_http_request_duration_seconds\`,
\`hq_maintenance_enabled\`, \`hq_lease_ttl_seconds\`, \`hq_agent_heartbeat_interval_seconds{host}\`,
\`hq_failover_worst_case_seconds\`, \`hq_timing_problem{host,arbiter_key,agent_key}\`,
\`hq_lease_runnable\` (1 while the record lets its holder run now, 0 while no host may: no holder, released,
expired, lock-delay; alert \`HqNoHostMayRun\`), \`hq_fleet_member_up{host}\`, \`hq_fleet_member_load1{host}\` (the machine's 1-minute load average, from its last registration), \`hq_port_leases\`, \`hq_step_down_saved_seconds_total\`, \`hq_generation_reports_refused_total{reason}\` (\`report-jump\`, \`ceiling\`), \`hq_host_version{host,version}\` (1 per host and the release its
last heartbeat spoke, \`0.1\` for protocol 1; the arbiter too), \`hq_peer_path_ok{host,peer}\` (0 when host's last heartbeat
said peer could not confirm it in an arbiter outage: peer tokens that differ, a peer listener not reached; kept in memory,
reported again by every agent after an arbiter restart); with store etcd also \`hq_arbiter_elected\` (1 on the
arbiter that decides), \`hq_etcd_member_up{endpoint}\`, \`hq_etcd_db_size_bytes{endpoint}\` (each member's database file),
\`hq_etcd_quota_bytes\` (the members' space quota, else \`store.quotaBackendBytes\`), \`hq_etcd_nospace_alarm\` (1: etcd refuses
every write) and \`hq_etcd_compactions_total{outcome}\` (\`compacted\`, \`failed\`).
Agent: \`hq_agent_fence_decisions_total\`, \`hq_agent_heartbeats_total\`,
\`hq_agent_peer_confirmations_total\`, \`hq_agent_step_downs_total{result}\`, \`hq_agent_validity_remaining_seconds\`, \`hq_lease_generation\`,
\`hq_agent_seen_generation\`, \`hq_agent_last_heartbeat_age_seconds{host}\`,
\`hq_agent_member_token_ok{host}\`, \`hq_agent_peer_path_ok{host,peer}\` (the last confirmation probe of each peer: 0 when
the peer tokens differ or the peer is not reached), \`hq_http_request_duration_seconds\`.

## Events

Logs are pino JSON lines with \`category\` (\`hq.lease\`, \`hq.fence\`, \`hq.standby\`, \`control\`) and
\`event\`; the arbiter keeps its events in a bounded table (\`GET /v1/events\`). Lease events:
\`acquired, renewed, released, acquire-refused, renew-refused, release-refused, standby,
quorum-standby, arbiter-unreachable, no-lease, generation-adopted, generation-raised,
floor-complete, start-wait-lifted, imported, expired-seen, promoted, arbiter-check, maintenance,
confirmation-given, confirmation-refused, stale-generation\`; step-down: \`step-down\`
(an agent lost a generation or releases), \`stepped-down\` (the arbiter accepted an acknowledgement,
with \`savedSeconds\`), \`step-down-refused\` (with the reason), \`step-down-acknowledged\`,
\`step-down-unacknowledged\`, \`step-down-undone\`, \`step-down-children-unknown\`, \`step-down-failed\`,
\`children-terminated\`, \`resume\` (a refused release undone); \`handoverOnStop\`: \`handover-on-stop\`,
\`handed-over\`, \`handover-refused\`, \`handover-skipped\`, \`handover-failed\`; peer paths: \`peer-path-broken\` (with \`peer\`
and \`problem\`; a warning, hooks called; the agent logs it, and the arbiter records it once per change from the
agent's heartbeat), \`peer-path-ok\`; fence: \`allowed, skipped\`; guard:
\`cli-override, cli-refused\`; control: \`generation-refused\` (a report or grant the generation bounds refused), \`generation-accepted\` (an admin accepted one), \`agent-silent, timing-problem, timing-ok,
hostname-mismatch, token-unavailable, token-ok, start-guard, state-refused\`.
`;
}

const out = join(root, 'docs/REFERENCE.md');
if (import.meta.url === `file://${process.argv[1]}`) {
  const text = render();
  if (process.argv.includes('--check')) {
    const now = readFileSync(out, 'utf8');
    if (now !== text) {
      process.stderr.write('docs/REFERENCE.md is stale: run node scripts/reference.mjs\n');
      process.exit(1);
    }
  } else writeFileSync(out, text);
}
