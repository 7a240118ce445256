#!/usr/bin/env node
/**
 * `npm run model`: checks model/hq.pml with spin (docs/SAFETY.md, "The model
 * check"). Every configuration is searched exhaustively for S1, S2 and S2w (errors must be 0),
 * except the `mutantsOnly` ones, whose search does not fit (SAFETY.md records how far it got);
 * then every mutant — the model with one mechanism removed by one -D switch — must give a
 * counterexample in its configuration. Prints a table; exit 1 when anything is not as expected.
 *
 *   node scripts/model.mjs            the big configurations (3 candidates, deeper bounds)
 *   node scripts/model.mjs --small    the small ones (test/model/spin.test.ts runs these)
 *   node scripts/model.mjs --all      both
 *   node scripts/model.mjs --only NAME[,NAME…]   some configurations by name
 *   node scripts/model.mjs --json     one JSON line per run instead of the table
 *
 * Each run builds its own pan in a fresh temporary directory (spin writes pan.c and trail
 * files into the working directory) and removes it afterwards; nothing is written elsewhere.
 * Needs `spin` (Debian package spin) and a C compiler (`cc`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MODEL = resolve(dirname(fileURLToPath(import.meta.url)), '../model/hq.pml');

/** Faults a configuration leaves out (the model's size switches), in the table's words. */
const OFF = {
  DRIFT: 'NO_DRIFT',
  SLEEP: 'NO_SLEEP',
  JUMPS: 'NO_JUMPS',
  READS: 'NO_READS',
  ARBITER_RESTART: 'NO_ARBITER_RESTART',
  AGENT_RESTART: 'NO_AGENT_RESTART',
  ROUNDS: 'NO_ROUNDS',
  STEP_DOWN: 'NO_STEP_DOWN',
};

/**
 * The configurations. `on` lists the faults a configuration includes beyond the ones every
 * configuration has (lost messages, answers delayed up to RT, pauses, forced transfers and
 * promotions at any moment, the operator's acquire); everything else is switched off.
 * `budget` bounds restarts per run. `states` is the order of magnitude of the exhaustive
 * search (the test holds the small ones to it: a model change that shrinks or blows up the
 * search shows). `mutants` must each give a counterexample here. `memoryMb` and `hash` (pan's
 * -w) size a big search; `mutantsOnly` marks a configuration whose unmutated search does not
 * fit and is not run (only its mutants are); `mutantDepth` bounds a mutant's search depth (a
 * counterexample found within a bound is a real execution; the bound only makes it found sooner).
 * `narrow` lists size switches that leave out further behaviours (never add one) to make a search
 * exhaustive that would not fit otherwise: budgets go in `defs` (TICKS, ACQUIRES, TRANSFERS).
 * `SYMMETRY: 1` in `defs` builds the model with the symmetry reduction between the hosts (hq.pml,
 * `hq_canon`; SAFETY.md, "Symmetry reduction": why it is sound for these configurations).
 */
export const CONFIGS = [
  {
    name: 'step-down',
    small: true,
    defs: { N: 2, G: 2, TTL: 2, RT: 0 },
    on: ['STEP_DOWN'],
    states: 3e5,
    mutants: ['NO_LOCK_DELAY', 'ACK_BEFORE_PERSIST', 'ACK_BEFORE_CHILDREN_GONE', 'ACCEPT_FORGED_ACK'],
  },
  {
    name: 'outage',
    small: true,
    defs: { N: 2, G: 2, TTL: 2, RT: 0 },
    on: ['ROUNDS', 'AGENT_RESTART'],
    states: 1e6,
    mutants: ['NO_STANDBY_WAIT', 'NO_START_GUARD'],
  },
  {
    name: 'database-loss',
    small: true,
    defs: { N: 2, G: 2, TTL: 2, RT: 0, ARBITER_RESTARTS: 1 },
    on: ['ARBITER_RESTART'],
    states: 9e5,
    mutants: ['NO_FLOOR', 'NO_FLOOR_WAIT'],
  },
  {
    name: 'clocks',
    small: true,
    defs: { N: 2, G: 2, TTL: 2, RT: 0 },
    on: ['DRIFT', 'SLEEP'],
    states: 1.8e6,
    mutants: ['NO_SAFETY_MARGIN', 'MONO_VALIDITY'],
  },
  {
    name: 'outage-jumps',
    small: true,
    defs: { N: 2, G: 2, TTL: 2, RT: 0 },
    on: ['ROUNDS', 'JUMPS'],
    states: 1.7e5,
    mutants: ['WALL_WAITS'],
  },
  {
    // The lift of G7 with `ran` removed: a chain of three hosts and three generations during the
    // start wait after an arbiter restart. host A acquires g1, the arbiter restarts on its kept
    // database, A reports and renews (nothing above g1 reported) and runs; a transfer gives g2 to
    // B behind A's lock-delay (B never runs), another gives g3 to C; B steps down from g2 and
    // acknowledges. Without `ran` that ends every wait: C runs beside A. The narrowing only removes
    // behaviours: two ticks in all, one acquire, two transfers, one restart (database kept, no
    // jump), every answer arriving with its request, no replayed, forged or handover acknowledgements.
    name: 'ack-lift-3c',
    small: true,
    hash: 24,
    defs: {
      N: 3,
      G: 3,
      TTL: 3,
      RT: 0,
      ARBITER_RESTARTS: 1,
      TICKS: 2,
      ACQUIRES: 1,
      TRANSFERS: 2,
      LOSSES: 0,
      SYMMETRY: 1,
    },
    narrow: ['ANSWER_AT_ONCE', 'NO_REPLAY', 'NO_FORGE', 'NO_HANDOVER', 'NO_LOST_RESTART', 'NO_RESTART_JUMP'],
    on: ['STEP_DOWN', 'ARBITER_RESTART'],
    states: 1.8e6,
    mutants: ['ACK_LIFT_WITHOUT_RAN'],
  },
  {
    name: 'delays-jumps',
    memoryMb: 13000,
    hash: 26,
    defs: { N: 2, G: 2, TTL: 3, RT: 1 },
    on: ['DRIFT', 'JUMPS', 'READS'],
    states: 8e6,
    mutants: ['VALIDITY_FROM_RECEIVE'],
  },
  {
    name: 'restart-jump',
    memoryMb: 13000,
    hash: 26,
    defs: { N: 2, G: 2, TTL: 4, RT: 1, ARBITER_RESTARTS: 1 },
    on: ['ARBITER_RESTART'],
    states: 4e6,
    mutants: ['NO_START_WAIT', 'RESTART_KEEPS_NB'],
  },
  {
    name: 'step-down-crash',
    memoryMb: 13000,
    hash: 26,
    defs: { N: 2, G: 2, TTL: 2, RT: 0 },
    on: ['STEP_DOWN', 'AGENT_RESTART'],
    states: 3e6,
    mutants: ['SD_IN_MEMORY'],
  },
  {
    // An agent restart inside an arbiter outage, with the database lost or kept: the restarted
    // holder knows its record again from local.json, only when it was final (its floor complete).
    name: 'restart-in-outage',
    memoryMb: 13000,
    hash: 25,
    defs: { N: 2, G: 2, TTL: 2, RT: 0, ARBITER_RESTARTS: 1, AGENT_RESTARTS: 1 },
    on: ['ARBITER_RESTART', 'AGENT_RESTART', 'ROUNDS'],
    states: 1.5e7,
    mutants: ['RESTORE_PENDING', 'NO_START_GUARD'],
  },
  {
    // A planned move during the start wait after an arbiter restart (database kept with a forward
    // jump, or lost): the acknowledgement of a holder that ran ends every wait (G7).
    name: 'restart-step-down',
    memoryMb: 13000,
    hash: 26,
    defs: { N: 2, G: 2, TTL: 2, RT: 0, ARBITER_RESTARTS: 1 },
    on: ['STEP_DOWN', 'ARBITER_RESTART'],
    states: 1.25e7,
    mutants: ['ACK_BEFORE_PERSIST'],
  },
  {
    // ack-lift-3c with lost answers and every arbiter restart (database lost, or kept with a
    // forward jump of 0 .. TTL + M): the same narrowing otherwise.
    name: 'ack-lift-3c-restarts',
    memoryMb: 8000,
    hash: 26,
    defs: { N: 3, G: 3, TTL: 3, RT: 0, ARBITER_RESTARTS: 1, TICKS: 2, ACQUIRES: 1, TRANSFERS: 2, SYMMETRY: 1 },
    narrow: ['ANSWER_AT_ONCE', 'NO_REPLAY', 'NO_FORGE', 'NO_HANDOVER'],
    on: ['STEP_DOWN', 'ARBITER_RESTART'],
    states: 2.75e7,
    mutants: ['ACK_LIFT_WITHOUT_RAN'],
  },
  {
    name: 'step-down-4',
    memoryMb: 13000,
    hash: 27,
    defs: { N: 2, G: 4, TTL: 2, RT: 0 },
    on: ['STEP_DOWN'],
    states: 5e7,
    mutants: ['ACCEPT_ANY_GEN_ACK'],
  },
  {
    name: 'step-down-3c',
    memoryMb: 13000,
    hash: 27,
    defs: { N: 3, G: 2, TTL: 2, RT: 0 },
    on: ['STEP_DOWN'],
    states: 4e7,
    mutants: ['NO_LOCK_DELAY', 'ACK_BEFORE_PERSIST', 'ACK_BEFORE_CHILDREN_GONE', 'ACCEPT_FORGED_ACK'],
  },
  {
    // Only for its mutant: three hosts and three generations (host0's lock-delay carried by
    // host1's grant into host2's). Its unmutated search does not fit, even with the symmetry
    // reduction (SAFETY.md: 65.1 M states in 13 GiB with -DSYMMETRY, no violation, not
    // exhaustive), so `npm run model` runs the mutant alone (with -DSYMMETRY: 2.1 M states).
    name: 'step-down-3c-g3',
    mutantsOnly: true,
    mutantDepth: 60,
    memoryMb: 13000,
    hash: 27,
    defs: { N: 3, G: 3, TTL: 2, RT: 0, SYMMETRY: 1 },
    on: ['STEP_DOWN'],
    states: 1e8,
    mutants: ['ACK_ENDS_WHOLE_DELAY'],
  },
  {
    name: 'outage-3c',
    memoryMb: 13000,
    hash: 27,
    defs: { N: 3, G: 2, TTL: 2, RT: 0 },
    on: ['ROUNDS'],
    states: 3e7,
    mutants: ['NO_STANDBY_WAIT'],
  },
  {
    // outage-3c with one agent restart. Exhaustive with the symmetry reduction (-DSYMMETRY,
    // hq.pml): 30.4 M states in 6.5 GiB (without it, 65 M states filled 13 GiB and the search
    // stopped). outage-3c above is the same search without the restart and without the switch.
    name: 'outage-3c-restart',
    memoryMb: 13000,
    hash: 27,
    defs: { N: 3, G: 2, TTL: 2, RT: 0, AGENT_RESTARTS: 1, SYMMETRY: 1 },
    on: ['ROUNDS', 'AGENT_RESTART'],
    states: 3e7,
    mutants: ['NO_STANDBY_WAIT', 'NO_START_GUARD'],
  },
  {
    // With the symmetry reduction (-DSYMMETRY, hq.pml) the search is exhaustive with every
    // arbiter restart (database lost, or kept with a forward jump of 0 .. TTL + M): 26.1 M states
    // in 5.7 GiB (without it, 65 M states filled 13 GiB and the search stopped).
    name: 'database-loss-3c',
    memoryMb: 13000,
    hash: 27,
    defs: { N: 3, G: 2, TTL: 2, RT: 0, ARBITER_RESTARTS: 1, SYMMETRY: 1 },
    on: ['ARBITER_RESTART'],
    states: 2.6e7,
    mutants: ['NO_FLOOR', 'NO_FLOOR_WAIT'],
  },
];

/** The -D flags of a configuration (plus extra switches, e.g. one mutant). */
export function flags(config, extra = []) {
  const out = Object.entries(config.defs).map(([k, v]) => `-D${k}=${v}`);
  for (const [fault, sw] of Object.entries(OFF)) if (!config.on.includes(fault)) out.push(`-D${sw}`);
  for (const sw of config.narrow ?? []) out.push(`-D${sw}`);
  return [...out, ...extra.map((m) => `-D${m}`)];
}

function run(cmd, args, cwd, timeoutMs) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, error: r.error };
}

/** True when spin and a C compiler are on PATH. */
export function toolsPresent() {
  const spin = spawnSync('spin', ['-V'], { encoding: 'utf8' });
  const cc = spawnSync('cc', ['--version'], { encoding: 'utf8' });
  return spin.status === 0 && cc.status === 0;
}

/**
 * Builds and runs pan for one configuration (optionally with one mutant) in a fresh temporary
 * directory. Returns what pan said: errors, states stored, depth, seconds, whether the search
 * was complete, the property violated and whether a trail file was written.
 */
export function check(
  config,
  mutant = null,
  {
    optimize = '-O2',
    memoryMb = config.memoryMb ?? 6000,
    hash = config.hash ?? (config.defs.N === 3 ? 26 : 24),
    compress = config.compress ?? ['-DCOLLAPSE'],
    depth = mutant !== null && config.mutantDepth !== undefined ? config.mutantDepth : 1000000,
    timeoutMs = 3 * 3600 * 1000,
    keep = false,
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'hq-model-'));
  try {
    const f = flags(config, mutant === null ? [] : [mutant]);
    const gen = run('spin', ['-a', ...f, MODEL], dir, 120_000);
    if (gen.code !== 0 || !existsSync(join(dir, 'pan.c')))
      throw new Error(`spin -a ${f.join(' ')} failed: ${gen.out.trim()}`);
    const cc = run(
      'cc',
      [optimize, '-w', '-DSAFETY', ...compress, `-DMEMLIM=${memoryMb}`, '-o', 'pan', 'pan.c'],
      dir,
      600_000,
    );
    if (cc.code !== 0) throw new Error(`cc pan.c failed: ${cc.out.trim().slice(0, 2000)}`);
    const started = Date.now();
    // -m: search depth (unmutated runs never come close; a mutant's may be bounded, see
    // `mutantDepth`); -w: hash table 2^w slots.
    const pan = run('./pan', [`-m${depth}`, `-w${hash}`], dir, timeoutMs);
    const out = pan.out;
    const num = (re) => {
      const m = re.exec(out);
      return m === null ? null : Number(m[1]);
    };
    const violated = /assertion violated (\S+)/.exec(out)?.[1] ?? null;
    const result = {
      config: config.name,
      mutant,
      flags: f.join(' '),
      errors: num(/errors: (\d+)/),
      states: num(/(\d+) states, stored/),
      depth: num(/depth reached (\d+)/),
      seconds: num(/elapsed time ([\d.e+]+) seconds/) ?? (Date.now() - started) / 1000,
      memoryMb: num(/([\d.]+)\s+total actual memory usage/),
      complete:
        !/max search depth too small|out of memory|reached -DMEMLIM|Search not completed/.test(out) && pan.code === 0,
      violated:
        violated === null ? null : ({ ok1: 'S1 (worker generation)', ok2: 'S2', ok3: 'S2w' }[violated] ?? violated),
      trail: existsSync(join(dir, 'hq.pml.trail')),
      dir: keep ? dir : null,
      output: out,
    };
    if (/assertion violated .*owner|assertion violated .*maxobs/.test(out)) result.violated = 'S1';
    return result;
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

/** The machine a run was on, for SAFETY.md's numbers. */
export function machine() {
  const cpu =
    /model name\s*:\s*(.+)/.exec(existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '')?.[1] ??
    'unknown cpu';
  const spin = spawnSync('spin', ['-V'], { encoding: 'utf8' }).stdout.trim();
  return `${cpu}; ${spin}`;
}

function faultsOf(config) {
  const b = [];
  if (config.defs.ARBITER_RESTARTS !== undefined) b.push(`≤${config.defs.ARBITER_RESTARTS} arbiter restart`);
  if (config.defs.AGENT_RESTARTS !== undefined) b.push(`≤${config.defs.AGENT_RESTARTS} agent restart`);
  if (config.defs.TICKS !== undefined) b.push(`≤${config.defs.TICKS} ticks`);
  if (config.defs.ACQUIRES !== undefined) b.push(`≤${config.defs.ACQUIRES} acquire`);
  if (config.defs.TRANSFERS !== undefined) b.push(`≤${config.defs.TRANSFERS} transfers`);
  if (config.defs.LOSSES !== undefined) b.push(`≤${config.defs.LOSSES} lost answers`);
  if (config.narrow !== undefined) b.push(config.narrow.join(' '));
  const on = config.on.map((f) => f.toLowerCase().replace('_', '-'));
  return [...on, ...b].join(', ');
}

function main(argv) {
  const json = argv.includes('--json');
  const only = argv.includes('--only') ? (argv[argv.indexOf('--only') + 1] ?? '').split(',') : null;
  const pick = argv.includes('--all')
    ? CONFIGS
    : argv.includes('--small')
      ? CONFIGS.filter((c) => c.small)
      : CONFIGS.filter((c) => !c.small);
  const configs = only === null ? pick : CONFIGS.filter((c) => only.includes(c.name));
  if (!toolsPresent()) {
    process.stderr.write('spin or cc is missing (Debian: apt-get install spin gcc)\n');
    return 2;
  }
  let bad = 0;
  const rows = [];
  const say = (r, expect) => {
    const ok = expect === 'pass' ? r.complete && r.errors === 0 : (r.errors ?? 0) >= 1 && r.trail;
    if (!ok) bad++;
    if (json) process.stdout.write(`${JSON.stringify({ ...r, output: undefined, expect, ok })}\n`);
    else {
      const what =
        r.mutant === null
          ? `checked: ${r.errors === 0 && r.complete ? 'no error' : `errors ${r.errors}${r.complete ? '' : ' (incomplete)'}`}`
          : `-D${r.mutant}: ${r.errors ? `counterexample, ${r.violated} at depth ${r.depth}` : 'NO counterexample'}`;
      rows.push(r);
      process.stdout.write(
        `${ok ? 'ok  ' : 'FAIL'} ${r.config.padEnd(17)} ${what.padEnd(58)} ${String(r.states ?? '?').padStart(11)} states ${r.seconds.toFixed(1).padStart(8)} s\n`,
      );
    }
  };
  if (!json) process.stdout.write(`model/hq.pml on ${machine()}\n`);
  for (const c of configs) {
    if (!json)
      process.stdout.write(
        `# ${c.name}: N=${c.defs.N} G=${c.defs.G} TTL=${c.defs.TTL} RT=${c.defs.RT}; ${faultsOf(c) || 'no optional faults'}\n`,
      );
    if (c.mutantsOnly !== true) say(check(c), 'pass');
    for (const m of c.mutants) say(check(c, m), 'cex');
  }
  if (!json) process.stdout.write(bad === 0 ? 'all as expected\n' : `${bad} not as expected\n`);
  return bad === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
