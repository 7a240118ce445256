/**
 * The largest gap of a cron expression, parsed by node-cron itself (the parser that schedules
 * it), measured by lease-core's `largestGapSeconds`. Both daemons' configs and the schedule's
 * watchdog use this one function, so "valid" and "how often" can never disagree.
 */
import cron from 'node-cron';
import { largestGapSeconds, type CronResult } from '@hq/lease-core';

export function cronGapSeconds(expr: string): CronResult {
  if (!cron.validate(expr))
    return { ok: false, message: `"${expr}" is not a valid cron expression (5 fields, or 6 with seconds first)` };
  let fields: ReturnType<typeof cron.parse>;
  try {
    fields = cron.parse(expr);
  } catch (err) {
    return { ok: false, message: `"${expr}": ${(err as Error).message}` };
  }
  const gap = largestGapSeconds(fields);
  return gap.ok ? gap : { ok: false, message: `"${expr}" ${gap.message}` };
}
