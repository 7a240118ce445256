/**
 * hq-arbiter's commands, callable in-process (tests) and from the bin (`cli.ts`).
 * Exit codes: 0 ok; 1 the command ran but did not succeed (nothing to revoke, check skipped,
 * start failed); 2 usage or configuration error (one line on stderr).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ARBITER_CONFIG, defaultConfigPaths } from '@hq/runtime/config-file';
import { HOST_PATTERN, isHost } from '@hq/protocol';
import { didYouMean } from '@hq/lease-core/suggest';
import { VERSION } from '@hq/lease-core/version';
import { wallClockMs, type MsClock } from '@hq/runtime/clock';
import { deferOptimizingCompiler, letYoungGenerationGrow } from '@hq/runtime/v8-footprint';
import { ConfigError, configPath, loadConfigLazily, type ArbiterConfig } from './config.js';
import { LockError } from './serve-lock.js';
import type { Scope } from './store/store.js';

// Heavy modules (Fastify, undici, prom-client) load only for the commands that need them.
const SCOPES: readonly Scope[] = ['admin', 'member', 'query'];
/** The configured store (SQLite's file, or etcd's prefix), for a one-shot command: no election. */
const openStore = async (cfg: ArbiterConfig) => {
  refuseUnnamedDatabase(cfg);
  const { openStores } = await import('./server/runtime.js');
  const s = await openStores(cfg, false);
  // the store, with a close() that also ends what opened it (etcd's client)
  return new Proxy(s.store, { get: (target, key, receiver) => (key === 'close' ? () => s.close() : Reflect.get(target, key, receiver)) });
};

class UsageError extends Error {}

/**
 * A one-shot command run where no config file was found would open the built-in default
 * database (./var/hq.db under the current directory): never create one there, because it is
 * not the daemon's and a token issued into it is refused by the real arbiter.
 */
function refuseUnnamedDatabase(cfg: ArbiterConfig): void {
  if (FROM_FILE.has(cfg) || cfg.store.kind !== 'sqlite') return;
  const db = join(cfg.dataDir, 'hq.db');
  if (existsSync(db)) return;
  const looked = defaultConfigPaths(ARBITER_CONFIG).join(', ');
  throw new UsageError(`no config file found (--config, $HQ_ARBITER_CONFIG, ${looked}), and no database at ${db}: pass the daemon's --config (for example --config /etc/hq/arbiter.json); nothing was created`);
}

const CONFIG_HELP = `  --config PATH   Read the configuration from PATH. Without it, $HQ_ARBITER_CONFIG is used, then
                  ~/.hq/arbiter.json, then /etc/hq/arbiter.json, and when none exists the built-in
                  defaults (listen on 127.0.0.1:8470, database under ./var).
  --help          Print this help and exit.
  --version       Print hq's version (the same for hq, hq-agent and hq-arbiter) and exit.`;

const HELP: Record<string, string> = {
  main: `Usage: hq-arbiter [COMMAND] [--config PATH]

The arbiter daemon of hq: it owns the lease record (in SQLite, or in etcd for several arbiters)
and serves the HTTP API.

Commands:
  serve            Run the daemon (the default when no command is given).
  token issue      Issue a bearer token for a machine and print it once.
  token revoke     Revoke every token of a machine.
  token list       List tokens without their secrets.
  init             Write a config (when none exists) and the fleet's secrets into the data directory.
  join             Print, once, the command that joins a candidate: hq join BUNDLE.
  check            Run one check against the database (for a system cron) and print its result.
  backup           Write an online backup of the database to a file.
  migrate          Copy a SQLite installation's state into a new etcd prefix (store "etcd").
  import elanous   Take over from elanous HQ: its lease record's generation becomes the floor.

Options:
${CONFIG_HELP}

Run "hq-arbiter COMMAND --help" for a command's flags. Exit codes: 0 ok, 1 not done, 2 usage or config error.`,
  serve: `Usage: hq-arbiter serve [--config PATH]

Runs the daemon: listens on listen.host:listen.port, runs a check on every checkCron tick, and on
SIGTERM or SIGINT stops accepting requests, finishes those in flight, closes the database and
exits 0. On first start it writes an admin token to {dataDir}/admin.token (mode 0600).

Options:
  --exit-with-parent
                  Stop, as on SIGTERM, when the process that started the daemon exits (checked
                  every second). npm start uses it, so that killing npm never leaves the arbiter
                  running on its own. Default: off (a supervisor such as systemd is the parent).
${CONFIG_HELP}`,
  token: `Usage: hq-arbiter token issue MACHINE [--scope member|admin|query] [--keep-old] [--config PATH]
       hq-arbiter token revoke MACHINE [--id N] [--config PATH]
       hq-arbiter token list [--json] [--config PATH]

issue prints a new 64-hex-character token alone on one line of stdout; only its sha256 is stored,
so it cannot be shown again. The new token replaces MACHINE's tokens of the same scope (they fail
from the next request on) unless --keep-old is given. A member token is issued only for one of
the candidates; an admin or query token only for a name that is not a candidate (the arbiter
host, an operator, a dashboard); anything else is refused with exit 2 and nothing written.
revoke disables every token of MACHINE (or only token N) from the next request on (exit 1 when
there was none to revoke). list prints id, machine, scope, created and revoked, never secrets.

Options:
  --scope SCOPE   The token's scope: member (acts only for MACHINE; the default), admin (every
                  verb, for operators) or query (reads only, for dashboards).
  --keep-old      Keep MACHINE's earlier tokens of this scope valid, for a rotation overlap:
                  install the new token, then "token revoke MACHINE --id N" the old one (ids from
                  "token list"). Off by default: issue replaces.
  --id N          Revoke only the token with id N, when it belongs to MACHINE (default: all).
  --json          Print the list as one JSON array instead of a table.
${CONFIG_HELP}`,
  init: `Usage: hq-arbiter init [--candidates LIST] [--arbiter NAME] [--listen HOST:PORT]
                       [--data-dir DIR] [--tailnet-domain DOMAIN] [--config PATH]

Prepares an arbiter. When the config file (--config, else $HQ_ARBITER_CONFIG, else
~/.hq/arbiter.json) does not exist, writes it from the flags (atomic, mode 0600); an existing
one is kept as it is and the flags are refused. Then creates the data directory (0700) and, when
missing, the fleet's peer token (peer-token, 0600: the shared secret of agent-to-agent calls,
handed to each agent by its join) and the arbiter's identity key (identity.key, 0600: joining
hosts check its fingerprint). Run it as the daemon's user. Prints what it wrote and what to run
next. The database and the admin token are created by the daemon's first start.

Options:
  --candidates LIST
                  The candidates in promotion order, comma-separated; each NAME or NAME=URL,
                  URL being that host's peer listener (http://ADDRESS:8471), whose /v1/health
                  the arbiter probes and the other agents call. Default: mbp,node-b.
  --arbiter NAME  This arbiter's host name (never a candidate). Default: cloud-vm.
  --listen HOST:PORT
                  Where the daemon listens. Default: 127.0.0.1:8470.
  --data-dir DIR  The data directory (made absolute). Default: ~/.hq/arbiter next to the config.
  --tailnet-domain DOMAIN
                  The MagicDNS suffix (lower case, like example-tailnet.ts.net): candidates
                  without a URL are found as NAME.DOMAIN:8471. Default: none.
  --tailscale-bin PATH
                  The tailscale CLI the probes run; --tailscale-bin= (empty) turns ping off for the
                  whole fleet (health alone decides; joins pass it on to the agents). Default:
                  tailscale.
${CONFIG_HELP}`,
  join: `Usage: hq-arbiter join HOST [--ttl T] [--url URL] [--config PATH]

Prints, once, one line to run on candidate HOST: "hq join BUNDLE". The bundle is single use,
expires after T, joins HOST only, and lets HOST check it talks to this arbiter (it carries the
sha256 of this arbiter's identity key). Redeeming it (POST /v1/join on the running daemon)
issues HOST's member token (replacing any earlier one) and hands HOST its config: the arbiter
URL, its peers and their health URLs, and the fleet's peer token. Only a hash of the bundle's
secret is kept, in {dataDir}/joins; a newer bundle for HOST replaces an unused older one. Run it
as the daemon's user (sudo -u hq …), on the arbiter's host: the daemon reads what it writes.

Options:
  --ttl T         How long the bundle can be redeemed: seconds, or with s, m or h (at most 24h).
                  Default: 15m.
  --url URL       The arbiter's URL as HOST reaches it. Default: http://ARBITER.TAILNETDOMAIN:PORT
                  with tailnetDomain, else http://LISTENHOST:PORT.
${CONFIG_HELP}`,
  check: `Usage: hq-arbiter check [--config PATH]

Runs one check now — probe the holder, record the arbiter's view, count the streak, maybe
promote — directly against the database, and prints the result as one JSON line. It waits for a
check already running in a daemon on the same database (bounded), so two checks never overlap.
Exit 0 when the check ran, 1 when it was skipped (another check kept running, or the holder
changed during the probe).

Options:
${CONFIG_HELP}`,
  backup: `Usage: hq-arbiter backup --to FILE [--config PATH]

Writes a consistent copy of the database to FILE (mode 0600) with SQLite's online backup, while
the daemon keeps serving. With store "etcd": every key under the prefix, read at one revision,
as one JSON document (the election's keys left out).

Options:
  --to FILE       The file to write. Required; an existing file is replaced.
${CONFIG_HELP}`,
  migrate: `Usage: hq-arbiter migrate --from sqlite:PATH --to etcd:URL[,URL…] [--prefix PREFIX]

Copies everything a SQLite arbiter keeps — the lease record, the generation floor, the views,
every token hash, the events, the registry's live resources and port leases — into PREFIX on an
etcd cluster, where arbiters with store {"kind": "etcd"} find it. PATH is the arbiter's dataDir
(or its hq.db). The database is read through SQLite's online backup, so the daemon may keep
serving; the copy is one instant of it. PREFIX must be empty (nothing is written otherwise);
the state is written last, so a migration cut short leaves no store, only keys to delete.
The floor is written as max(floor, generation): no etcd arbiter grants below a generation the
SQLite arbiter granted (S1). Then: stop the SQLite arbiter, start the etcd arbiters, point the
agents' arbiterUrls at them. Never run both: two stores would decide apart.

Options:
  --from sqlite:PATH
                  The SQLite installation: its dataDir or its hq.db. Required.
  --to etcd:URL[,URL…]
                  The etcd members' client URLs, http://host:port, comma-separated. Required.
  --prefix PREFIX The etcd prefix to write (like /hq or /site/hq). Default: /hq.
  --json          Print the report as one JSON line instead of a sentence.
${CONFIG_HELP}`,
  import: `Usage: hq-arbiter import elanous --lease FILE [--dry-run] [--json] [--config PATH]

Takes over from elanous HQ on a new installation. Reads the old lease record FILE (elanous kept
it in ~/.elanous-hq/lease.json on this host) and raises the generation floor to its generation,
so the first hq generation is above every elanous one. When the old record names a holder whose
lease has not ended, that holder keeps HQ: it is granted the next generation at once, and may
run only once the old lease's validity is over (its expiresAt, or now + its ttlSeconds for a
renewal that raced the import, plus safetyMarginSeconds), so a job still running under the old
lease never overlaps the first hq one. With no live old holder only the floor is set, and
"hq lease acquire" on the host that should be HQ takes the first lease. Stop elanous's arbiter
check on this host first: from here on elanous must not promote. A malformed FILE, an
installation that has already granted a generation, or a live old holder that is not one of
the candidates is refused with one line (exit 1) and nothing is written.

Options:
  --lease FILE    The old lease record (JSON: generation, holder, expiresAt or renewedAt,
                  ttlSeconds, released; times in epoch seconds or ISO). Required.
  --dry-run       Print what the import would do and write nothing. Default: off.
  --json          Print the result as one JSON line instead of a sentence.
${CONFIG_HELP}`,
};

interface Parsed {
  readonly positional: string[];
  readonly flags: Map<string, string | true>;
}

const VALUE_FLAGS = new Set(['config', 'scope', 'to', 'id', 'from', 'prefix', 'lease', 'ttl', 'url', 'candidates', 'arbiter', 'data-dir', 'listen', 'tailnet-domain', 'tailscale-bin']);
const BOOL_FLAGS = new Set(['json', 'help', 'keep-old', 'version', 'exit-with-parent', 'dry-run']);

function parseArgs(argv: readonly string[]): Parsed {
  const positional: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '-h') {
      flags.set('help', true);
      continue;
    }
    if (arg === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      if (BOOL_FLAGS.has(name)) {
        if (eq !== -1) throw new UsageError(`--${name} takes no value`);
        flags.set(name, true);
      } else if (VALUE_FLAGS.has(name)) {
        const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
        if (value === undefined || (value === '' && name !== 'tailscale-bin')) throw new UsageError(`--${name} needs a value`);
        flags.set(name, value);
      } else {
        throw new UsageError(`unknown flag --${name}${didYouMean(name, [...VALUE_FLAGS, ...BOOL_FLAGS], (n) => `--${n}`)}`);
      }
      continue;
    }
    if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown flag ${arg}`);
    positional.push(arg);
  }
  return { positional, flags };
}

function allowOnly(p: Parsed, allowed: readonly string[]): void {
  for (const name of p.flags.keys()) {
    if (name !== 'help' && name !== 'config' && !allowed.includes(name)) throw new UsageError(`--${name} does not apply here`);
  }
}

/** The configs read from a file (not the built-in defaults). */
const FROM_FILE = new WeakSet<ArbiterConfig>();

async function config(p: Parsed): Promise<ArbiterConfig> {
  const flag = p.flags.get('config');
  const path = configPath(typeof flag === 'string' ? flag : undefined, process.env, existsSync);
  const cfg = await loadConfigLazily(path);
  if (path !== null) FROM_FILE.add(cfg);
  return cfg;
}

async function stderrLog() {
  const { default: pino } = await import('pino');
  return pino({ name: 'hq-arbiter', base: { pid: process.pid } }, pino.destination(2));
}

async function dispatch(argv: readonly string[], io: Io, clock: MsClock): Promise<number> {
  const p = parseArgs(argv);
  if (p.flags.has('version')) {
    io.out(`${VERSION}\n`);
    return 0;
  }
  const [command = 'serve', ...rest] = p.positional;
  const help = p.flags.has('help');
  switch (command) {
    case 'help':
      io.out(`${HELP[rest[0] ?? 'main'] ?? HELP['main']}\n`);
      return 0;
    case 'serve': {
      if (help) return print(io, p.positional.length === 0 ? 'main' : 'serve');
      allowOnly(p, ['exit-with-parent']);
      if (rest.length > 0) throw new UsageError(`serve takes no arguments (got "${rest[0]}")`);
      const cfg = await config(p);
      // The daemon's modules and its start-up run without TurboFan; it is back once the daemon listens.
      // Once it listens, its young generation may grow under load again (heartbeats in flight
      // survive scavenges; a small one costs 1.5x the CPU per heartbeat, docs/BENCH.md).
      const optimize = deferOptimizingCompiler();
      const started = (): void => {
        optimize();
        letYoungGenerationGrow();
      };
      try {
        const { serve } = await import('./server/server.js');
        await serve(cfg, { exitWithParent: p.flags.has('exit-with-parent'), onStarted: started });
      } catch (err) {
        optimize();
        throw err;
      }
      return -1; // keep running
    }
    case 'token': {
      if (help) return print(io, 'token');
      const [verb, machine, ...extra] = rest;
      if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
      if (verb === 'issue') {
        allowOnly(p, ['scope', 'keep-old']);
        if (machine === undefined || !isHost(machine)) throw new UsageError(`token issue needs a MACHINE matching ${HOST_PATTERN.source}`);
        const scope = (p.flags.get('scope') ?? 'member') as string;
        if (!(SCOPES as readonly string[]).includes(scope)) throw new UsageError('--scope must be member, admin or query');
        const cfg = await config(p);
        const { issueToken, reissueToken, tokenNameProblem } = await import('./auth.js');
        const problem = tokenNameProblem(machine, scope as Scope, cfg);
        if (problem !== null) throw new UsageError(problem);
        const store = await openStore(cfg);
        try {
          const now = clock.now() / 1000;
          if (p.flags.has('keep-old')) {
            io.out(`${await issueToken(store, machine, scope as Scope, now)}\n`);
          } else {
            const { token, replaced } = await reissueToken(store, machine, scope as Scope, now);
            io.out(`${token}\n`);
            if (replaced > 0) io.err(`hq-arbiter: replaced ${replaced} earlier ${scope} token(s) of ${machine}; they fail from the next request on\n`);
          }
        } finally {
          await store.close();
        }
        return 0;
      }
      if (verb === 'revoke') {
        allowOnly(p, ['id']);
        if (machine === undefined || !isHost(machine)) throw new UsageError(`token revoke needs a MACHINE matching ${HOST_PATTERN.source}`);
        const idFlag = p.flags.get('id');
        const id = typeof idFlag === 'string' ? Number(idFlag) : null;
        if (id !== null && (!/^[1-9][0-9]*$/.test(idFlag as string) || !Number.isSafeInteger(id))) throw new UsageError('--id must be a token id from "token list" (a positive integer)');
        const cfg = await config(p);
        const store = await openStore(cfg);
        try {
          const now = clock.now() / 1000;
          const n = id === null ? await store.revokeTokens(machine, now) : await store.revokeToken(machine, id, now);
          io.out(id === null ? `revoked ${n} token(s) of ${machine}\n` : `revoked ${n} token(s) of ${machine} with id ${id}\n`);
          return n > 0 ? 0 : 1;
        } finally {
          await store.close();
        }
      }
      if (verb === 'list') {
        allowOnly(p, ['json']);
        if (machine !== undefined) throw new UsageError(`token list takes no arguments (got "${machine}")`);
        const cfg = await config(p);
        const store = await openStore(cfg);
        const { describeTokens } = await import('./auth.js');
        try {
          const rows = describeTokens(await store.listTokens());
          if (p.flags.has('json')) io.out(`${JSON.stringify(rows)}\n`);
          else {
            io.out('ID\tMACHINE\tSCOPE\tCREATED\tREVOKED\n');
            for (const r of rows) {
              const when = (t: number | null) => (t === null ? '-' : new Date(t * 1000).toISOString());
              io.out(`${r.id}\t${r.machine}\t${r.scope}\t${when(r.created)}\t${when(r.revoked)}\n`);
            }
          }
        } finally {
          await store.close();
        }
        return 0;
      }
      throw new UsageError(verb === undefined ? 'token needs issue, revoke or list' : `unknown token command "${verb}"${didYouMean(verb, ['issue', 'revoke', 'list'])}`);
    }
    case 'init': {
      if (help) return print(io, 'init');
      allowOnly(p, ['candidates', 'arbiter', 'listen', 'data-dir', 'tailnet-domain', 'tailscale-bin']);
      if (rest.length > 0) throw new UsageError(`init takes no arguments (got "${rest[0]}")`);
      const { initArbiter } = await import('./init.js');
      const flag = (n: string) => (typeof p.flags.get(n) === 'string' ? (p.flags.get(n) as string) : undefined);
      const r = await initArbiter({
        config: flag('config') ?? (process.env[ARBITER_CONFIG.envVar] || undefined),
        candidates: flag('candidates'),
        arbiter: flag('arbiter'),
        listen: flag('listen'),
        dataDir: flag('data-dir'),
        tailnetDomain: flag('tailnet-domain'),
        tailscaleBin: p.flags.get('tailscale-bin') === undefined ? undefined : String(p.flags.get('tailscale-bin')),
      });
      if (!r.ok) throw new UsageError(r.problem);
      for (const line of r.lines) io.out(`${line}\n`);
      return 0;
    }
    case 'join': {
      if (help) return print(io, 'join');
      allowOnly(p, ['ttl', 'url']);
      const [host, ...extra] = rest;
      if (host === undefined || !isHost(host)) throw new UsageError(`join needs a HOST matching ${HOST_PATTERN.source} (one of the candidates)`);
      if (extra.length > 0) throw new UsageError(`join takes one HOST (got "${extra[0]}" too)`);
      const ttlFlag = p.flags.get('ttl');
      const { JOIN_TTL_SECONDS, createJoin, defaultArbiterUrl, joinProblem, parseTtl } = await import('./join.js');
      const ttl = typeof ttlFlag === 'string' ? parseTtl(ttlFlag) : JOIN_TTL_SECONDS;
      if (ttl === null) throw new UsageError(`--ttl must be seconds, or a number with s, m or h, at most 24h (got "${String(ttlFlag)}")`);
      const cfg = await config(p);
      if (!FROM_FILE.has(cfg)) throw new UsageError('join: no config file found: pass the daemon\'s --config (hq-arbiter init writes one)');
      const problem = joinProblem(cfg, host);
      if (problem !== null) throw new UsageError(`join: ${problem}`);
      const urlFlag = p.flags.get('url');
      const url = typeof urlFlag === 'string' ? urlFlag : defaultArbiterUrl(cfg);
      if (url === null) throw new UsageError('join: the arbiter listens on every address: say how candidates reach it with --url http://ADDRESS:PORT');
      if (!/^https?:\/\/[^/?#@]+$/.test(url)) throw new UsageError(`--url must be a bare origin like http://cloud-vm.example-tailnet.ts.net:8470 (got "${url}")`);
      const now = clock.now() / 1000;
      const j = await createJoin(cfg, host, url, ttl, now);
      io.out(`hq join ${j.bundle}\n`);
      io.err(`hq-arbiter: run that line on ${host} before ${new Date(j.expiresAt * 1000).toISOString()} (${ttl % 60 === 0 ? `${ttl / 60} min` : `${ttl} s`}); it works once, for ${host} only, and is not shown again. The daemon must be running at ${url}.\n`);
      return 0;
    }
    case 'check': {
      if (help) return print(io, 'check');
      allowOnly(p, ['json']);
      if (rest.length > 0) throw new UsageError(`check takes no arguments (got "${rest[0]}")`);
      const cfg = await config(p);
      if (cfg.store.kind === 'etcd') {
        throw new UsageError('check: with store "etcd" only the elected arbiter checks (it needs the election): ask it with "curl -X POST -H \'authorization: Bearer $ADMIN\' http://ARBITER:8470/v1/check" (any arbiter forwards it)');
      }
      refuseUnnamedDatabase(cfg);
      const { createRuntime } = await import('./server/runtime.js');
      const rt = await createRuntime({ config: cfg, log: await stderrLog(), processMetrics: false });
      try {
        const r = await rt.checker.run(true);
        if (r.ran) {
          io.out(`${JSON.stringify(r.answer)}\n`);
          return 0;
        }
        const l = r.state.lease;
        io.out(`${JSON.stringify({ promoted: false, streak: l.dualUnreachableStreak, holder: l.holder, generation: l.generation, skipped: r.reason })}\n`);
        return 1;
      } finally {
        await rt.close();
      }
    }
    case 'backup': {
      if (help) return print(io, 'backup');
      allowOnly(p, ['to']);
      if (rest.length > 0) throw new UsageError(`backup takes no arguments (got "${rest[0]}")`);
      const to = p.flags.get('to');
      if (typeof to !== 'string') throw new UsageError('backup needs --to FILE');
      const cfg = await config(p);
      const store = await openStore(cfg);
      try {
        await store.backup(to);
      } finally {
        await store.close();
      }
      io.out(`backup written to ${to}\n`);
      return 0;
    }
    case 'migrate': {
      if (help) return print(io, 'migrate');
      allowOnly(p, ['from', 'to', 'prefix', 'json']);
      if (rest.length > 0) throw new UsageError(`migrate takes no arguments (got "${rest[0]}")`);
      const from = p.flags.get('from');
      const to = p.flags.get('to');
      if (typeof from !== 'string' || !from.startsWith('sqlite:') || from.length === 'sqlite:'.length) throw new UsageError('migrate needs --from sqlite:PATH (the SQLite arbiter\'s dataDir or its hq.db)');
      if (typeof to !== 'string' || !to.startsWith('etcd:') || to.length === 'etcd:'.length) throw new UsageError('migrate needs --to etcd:URL[,URL…] (the etcd members\' client URLs)');
      const prefixFlag = p.flags.get('prefix');
      const { etcdStoreOf } = await import('./config.js');
      const target = etcdStoreOf(to.slice('etcd:'.length).split(','), typeof prefixFlag === 'string' ? prefixFlag : undefined);
      if ('key' in target) throw new UsageError(`${target.key === 'store.prefix' ? '--prefix' : '--to'}: ${target.message}`);
      const { EtcdClient } = await import('./store/etcd/client.js');
      const { databaseFileOf, migrateSqliteToEtcd } = await import('./store/etcd/migrate.js');
      try {
        databaseFileOf(from.slice('sqlite:'.length));
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      const client = new EtcdClient({ endpoints: target.endpoints, dialTimeoutMs: target.dialTimeoutMs, requestTimeoutMs: target.requestTimeoutMs });
      try {
        const r = await migrateSqliteToEtcd({ path: from.slice('sqlite:'.length) }, client, target.prefix, clock.now());
        if (p.flags.has('json')) io.out(`${JSON.stringify(r)}\n`);
        else {
          io.out(
            `migrated ${r.from} to etcd ${target.endpoints.join(',')} ${r.prefix}: holder ${r.holder ?? 'none'}, generation ${r.generation}, floor ${r.floor}; ` +
              `${r.tokens} token(s), ${r.events} event(s), ${r.resources} resource(s), ${r.portLeases} port lease(s); ${r.keys} keys\n`,
          );
          io.err('hq-arbiter: now stop the SQLite arbiter before any etcd arbiter starts, then point the agents\' arbiterUrls at the etcd arbiters\n');
        }
        return 0;
      } catch (err) {
        const { PrefixNotEmptyError } = await import('./store/etcd/store.js');
        if (!(err instanceof PrefixNotEmptyError)) throw err;
        io.err(`hq-arbiter: migrate: ${err.message}; nothing was written\n`);
        return 1;
      } finally {
        await client.close();
      }
    }
    case 'import': {
      if (help) return print(io, 'import');
      allowOnly(p, ['lease', 'dry-run', 'json']);
      const [from, ...extra] = rest;
      if (from !== 'elanous') throw new UsageError(from === undefined ? 'import needs the system to import from: import elanous --lease FILE' : `import: unknown system "${from}" (only elanous)`);
      if (extra.length > 0) throw new UsageError(`import elanous takes no further arguments (got "${extra[0]}")`);
      const file = p.flags.get('lease');
      if (typeof file !== 'string') throw new UsageError('import elanous needs --lease FILE (the old lease record, ~/.elanous-hq/lease.json)');
      const cfg = await config(p);
      const mod = await import('./import-elanous.js');
      const old = await mod.readOldLease(file, cfg.ttlSeconds);
      if (!old.ok) {
        if (p.flags.has('json')) io.out(`${JSON.stringify({ ok: false, problem: old.problem })}\n`);
        io.err(`hq-arbiter: import elanous: ${old.problem}; nothing changed\n`);
        return 1;
      }
      const now = clock.now() / 1000;
      const dryRun = p.flags.has('dry-run');
      const blank = dryRun ? mod.notCreatedYet(cfg) : null;
      let r: import('./import-elanous.js').ImportResult;
      if (blank !== null) r = mod.dryImport(blank, cfg, old.value, now);
      else {
        const store = await openStore(cfg);
        try {
          r = await mod.importElanous(store, cfg, old.value, now, dryRun);
        } finally {
          await store.close();
        }
      }
      if (p.flags.has('json')) io.out(`${JSON.stringify({ ...r.answer, dryRun, old: r.old })}\n`);
      if (!r.answer.ok) {
        io.err(`hq-arbiter: import elanous: ${mod.describeImport(r)}\n`);
        return 1;
      }
      if (!p.flags.has('json')) io.out(`${mod.describeImport(r)}\n`);
      if (!dryRun) io.err('hq-arbiter: import elanous: retire the elanous arbiter-check line of this host\'s crontab now if it is still there: elanous must not promote any more\n');
      return 0;
    }
    default:
      if (help) return print(io, 'main');
      throw new UsageError(`unknown command "${command}"${didYouMean(command, ['serve', 'init', 'join', 'token', 'check', 'backup', 'migrate', 'import', 'help']) || ' (try --help)'}`);
  }
}



function print(io: Io, topic: string): number {
  io.out(`${HELP[topic]}\n`);
  return 0;
}

/** Where a command writes: stdout for results, stderr for the one-line errors. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/**
 * Runs one command line. Returns the exit code, or -1 for `serve` (the daemon keeps running
 * and exits through its signal handlers). Usage and config errors are one line, exit 2.
 * `clock` (epoch ms, the wall: token and migration times are read by other processes) stamps
 * what a command writes.
 */
export async function main(argv: readonly string[], io: Io, clock: MsClock = wallClockMs): Promise<number> {
  try {
    return await dispatch(argv, io, clock);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigError || err instanceof LockError) {
      io.err(`hq-arbiter: ${err.message}\n`);
      return 2;
    }
    const e = err as Error;
    io.err(`hq-arbiter: ${(e?.message ?? String(err)).replace(/\s+/g, ' ')}\n`);
    return 1;
  }
}
