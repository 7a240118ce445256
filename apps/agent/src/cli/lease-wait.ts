/**
 * The `--wait` of `hq failover` and `hq lease release --handover-to`: reads the record until the new holder may
 * run, saying which wait holds it. Shared by both commands, so it is its own file.
 */
import type { LeaseRecord } from '@hq/protocol';
import type { MsClock } from '@hq/runtime/clock';
import { arbiter, failure, sleep, type Resolved } from './context.js';
import { agentRefuses, fmtAge, waitNote } from './lease-record.js';

interface Waited {
  readonly code: number;
  readonly line: string;
  readonly lease: LeaseRecord | null;
  readonly result: {
    readonly to: string;
    readonly generation: number;
    readonly mayRun: boolean;
    readonly acknowledged: boolean;
    readonly savedSeconds: number | null;
    readonly waitedSeconds: number;
  };
}

/**
 * `hq failover --wait` and `hq lease release --handover-to H --wait`: reads the record until `to`
 * may run at `generation` (no wait of the record holds it any more), printing which wait holds it,
 * until when and why, whenever that changes. 0 when it may run, 1 when the wait ran out or the lease moved on, 3 when the arbiter
 * stopped answering.
 */
export async function waitUntilRuns(
  c: Resolved,
  clock: MsClock,
  token: string | null,
  to: string,
  generation: number,
  started: number,
  wait: number,
  json: boolean,
  command: string,
): Promise<Waited> {
  const deadline = started + wait * 1000;
  const waited = (): number => Math.round((clock.now() - started) / 100) / 10;
  let said = '';
  let last: LeaseRecord | null = null;
  const result = (mayRun: boolean, rec: LeaseRecord | null): Waited['result'] => {
    const d = rec?.displaced ?? null;
    const acknowledged = d !== null && d.acknowledgedAt !== null;
    return {
      to,
      generation,
      mayRun,
      acknowledged,
      savedSeconds: acknowledged ? d.savedSeconds : null,
      waitedSeconds: waited(),
    };
  };
  for (;;) {
    const r = await arbiter(c, 'GET', '/v1/lease', undefined, token);
    if (r.kind === 'answer' && r.status === 200) {
      const rec = r.body as LeaseRecord;
      last = rec;
      const read = readingOf(rec, to, generation, command, waited());
      if (read.done) return { code: read.code, line: read.line, lease: rec, result: result(read.code === 0, rec) };
      if (!json && read.text !== said) {
        said = read.text;
        process.stdout.write(`${read.line}\n`);
      }
    } else if (clock.now() + 1000 > deadline) {
      const f = failure(r, `${command} --wait`, c);
      return {
        code: f.code,
        line: f.line.replace(`${command} --wait: `, ''),
        lease: last,
        result: result(false, last),
      };
    }
    if (clock.now() >= deadline) {
      const still = last === null ? null : waitNote(last);
      return {
        code: 1,
        line: `${to} may not run yet after ${waited()} s${still === null ? '' : `: ${still.text}`}`,
        lease: last,
        result: result(false, last),
      };
    }
    await sleep(Math.min(WAIT_POLL_MS, Math.max(0, deadline - clock.now())));
  }
}

/**
 * One reading of the record during `--wait`: the wait is over (the lease moved on or `to`'s agent
 * refuses the record: 1; `to` may run: 0), or which wait holds `to`, until when and why.
 */
function readingOf(
  rec: LeaseRecord,
  to: string,
  generation: number,
  command: string,
  waited: number,
): { done: true; code: number; line: string } | { done: false; text: string; line: string } {
  if (rec.holder !== to || rec.generation !== generation)
    return {
      done: true,
      code: 1,
      line: `the lease moved on: ${rec.holder ?? 'nobody'} holds generation ${rec.generation} (${waited} s)`,
    };
  // An arbiter of hq 0.1 sends no displaced.
  const d = rec.displaced ?? null;
  const wait = waitNote(rec);
  const refused = agentRefuses(rec);
  if (refused !== null)
    return { done: true, code: 1, line: `${to} will not run: its agent refuses the record (${refused}) (${waited} s)` };
  if (wait === null) {
    // A handover carries no lock-delay of the old holder: it stepped down before it asked.
    const how =
      d !== null && d.acknowledgedAt !== null
        ? `${d.host} acknowledged its step-down from generation ${d.generation} (${(d.savedSeconds ?? 0).toFixed(1)} s of lock-delay saved)`
        : command === 'lease release'
          ? `${d?.host ?? 'the old holder'} stepped down before it handed over: no lock-delay to wait for`
          : d !== null
            ? `the lock-delay ran out (${d.host} did not acknowledge its step-down)`
            : 'no lock-delay to wait for';
    return { done: true, code: 0, line: `${to} may run at generation ${generation} after ${waited} s: ${how}` };
  }
  return {
    done: false,
    text: wait.text,
    line: `waiting: ${wait.left === null ? '' : `${fmtAge(wait.left)} left: `}${wait.text}`,
  };
}

/** How often `failover --wait` reads the record. */
const WAIT_POLL_MS = 250;
