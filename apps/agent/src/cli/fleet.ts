/**
 * `hq fleet [--json]`: the machines in the arbiter's registry with their load, the age
 * of their last heartbeat (arbiter clock) and their lease role. Light module: the config and
 * undici load only when the command runs. Wiring in cli/main.ts: one COMMANDS entry,
 * `FLEET_COMMAND`.
 */
import { fieldsOf, generationField, stringField } from '@hq/protocol';
import { wallClockMs, type MsClock } from '@hq/runtime/clock';
import { CONFIG_FLAG, JSON_FLAG, flagBool, runCommand, type CommandSpec, type Parsed } from './args.js';

export const FLEET_SPEC: CommandSpec = {
  name: 'fleet',
  summary:
    'Lists the machines registered at the arbiter (expired records are not shown): the 1-minute load and CPU count they last reported, free memory, how long ago the arbiter heard from them, their role for the lease (holder, standby, arbiter, or - for other machines) and the duties they report.',
  flags: [CONFIG_FLAG, JSON_FLAG],
  exits: '0 listed, 1 refused by the arbiter, 2 usage or config error, 3 arbiter unreachable.',
};

export interface FleetRow {
  readonly machine: string;
  readonly name: string;
  readonly load1: number | null;
  readonly cpuCount: number | null;
  readonly freeMem: number | null;
  readonly totalMem: number | null;
  readonly heartbeatAgeSeconds: number;
  /** From `GET /v1/lease` only (never the duties a machine last reported): `?` when unreadable. */
  readonly role: 'holder' | 'standby' | 'arbiter' | '-' | '?';
  readonly duties: readonly string[];
  readonly expiresInSeconds: number;
}

interface ResourceIn {
  machine: string;
  name: string;
  attrs: { [k: string]: unknown };
  renewedAt: number;
  expiresAt: number;
}

/** A registry record as the table reads it; one without its machine or its times is left out. */
function resourceIn(v: unknown): ResourceIn | null {
  const f = fieldsOf(v);
  if (typeof f.machine !== 'string' || typeof f.renewedAt !== 'number' || typeof f.expiresAt !== 'number') return null;
  return {
    machine: f.machine,
    name: typeof f.name === 'string' ? f.name : '',
    attrs: fieldsOf(f.attrs),
    renewedAt: f.renewedAt,
    expiresAt: f.expiresAt,
  };
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * Pure: the rows of the table from the two answers. The holder is the lease record's (`GET
 * /v1/lease`, current the moment a failover commits), never read from the registry: the duties a
 * machine reports lag by up to its registration interval (30 s) after a failover. With no
 * readable lease (`null`) the role column says `?` rather than guessing.
 */
export function fleetRows(
  resources: readonly ResourceIn[],
  nowMs: number,
  lease: { holder: string | null; expired: boolean } | null,
  candidates: readonly string[],
  arbiterHost: string,
): FleetRow[] {
  return resources.map((r) => {
    const load = r.attrs['loadAvg'];
    const duties = r.attrs['duties'] ?? r.attrs['roles'];
    const role: FleetRow['role'] =
      r.machine === arbiterHost
        ? 'arbiter'
        : lease === null
          ? '?'
          : lease.holder === r.machine && !lease.expired
            ? 'holder'
            : candidates.includes(r.machine)
              ? 'standby'
              : '-';
    return {
      machine: r.machine,
      name: r.name,
      load1: Array.isArray(load) ? num(load[0]) : null,
      cpuCount: num(r.attrs['cpuCount']),
      freeMem: num(r.attrs['freeMem']),
      totalMem: num(r.attrs['totalMem']),
      heartbeatAgeSeconds: Math.max(0, (nowMs - r.renewedAt) / 1000),
      role,
      duties: Array.isArray(duties) ? duties.filter((d): d is string => typeof d === 'string') : [],
      expiresInSeconds: Math.max(0, (r.expiresAt - nowMs) / 1000),
    };
  });
}

function gib(bytes: number | null): string {
  return bytes === null ? '?' : `${(bytes / 2 ** 30).toFixed(1)}G`;
}

export function fleetTable(rows: readonly FleetRow[]): string {
  if (rows.length === 0) return 'no machines registered';
  const head = ['MACHINE', 'ROLE', 'LOAD1', 'CPUS', 'FREE/TOTAL', 'HEARTBEAT', 'DUTIES'];
  const body = rows.map((r) => [
    r.machine,
    r.role,
    r.load1 === null ? '?' : r.load1.toFixed(2),
    r.cpuCount === null ? '?' : String(r.cpuCount),
    `${gib(r.freeMem)}/${gib(r.totalMem)}`,
    `${r.heartbeatAgeSeconds.toFixed(0)} s ago`,
    r.duties.length === 0 ? '-' : r.duties.join(','),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] as string).length)));
  return [head, ...body]
    .map((cols) => cols.map((c, i) => (i === cols.length - 1 ? c : c.padEnd((widths[i] as number) + 2))).join(''))
    .join('\n');
}

/** `clock` (epoch ms, the wall: heartbeat times are the members') stands in when the arbiter sends no `now`. */
export async function fleet(p: Parsed, clock: MsClock = wallClockMs): Promise<number> {
  const { arbiter, failure, memberToken, networkForReading, out, reportFailure } = await import('./context.js');
  const c = await networkForReading(p);
  const token = await memberToken(c).catch(() => null);
  const [r, l] = await Promise.all([
    arbiter(c, 'GET', '/v1/resources?kind=machine', undefined, token),
    arbiter(c, 'GET', '/v1/lease', undefined, token),
  ]);
  if (r.kind !== 'answer' || r.status !== 200) {
    const f = failure(r, 'fleet', c);
    reportFailure(f, p);
    return f.code;
  }
  const body = fieldsOf(r.body);
  const resources = (Array.isArray(body.resources) ? body.resources : [])
    .map(resourceIn)
    .filter((x): x is ResourceIn => x !== null);
  const nowMs = typeof body.now === 'number' ? body.now : clock.now();
  const rec = l.kind === 'answer' && l.status === 200 ? fieldsOf(l.body) : null;
  const lease =
    rec === null
      ? null
      : {
          holder: stringField(rec, 'holder'),
          expired: rec.expired === true,
          generation: generationField(rec, 'generation'),
        };
  if (lease === null)
    process.stderr.write(
      `hq: fleet: ${failure(l, 'reading the lease').line} — the ROLE column shows ? (the holder comes from GET /v1/lease)\n`,
    );
  const rows = fleetRows(resources, nowMs, lease, c.candidates, c.arbiter);
  out(
    flagBool(p, 'json'),
    { machines: rows, holder: lease?.holder ?? null, generation: lease?.generation ?? null, now: nowMs },
    fleetTable(rows),
  );
  return 0;
}

/** The COMMANDS entry for cli/main.ts. */
export const FLEET_COMMAND = {
  spec: FLEET_SPEC,
  load: async (): Promise<(p: Parsed) => Promise<number>> => fleet,
};

/** `hq fleet ARGS…` without the command table (argv after "fleet"). */
export function fleetCommand(argv: readonly string[]): Promise<number> {
  return runCommand(FLEET_SPEC, async () => fleet, argv);
}
