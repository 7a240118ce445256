/**
 * What a check of `hq doctor` answers (pass, fail with the fix, or skip), the state the checks
 * share once the config is valid, and the small formatters their lines use.
 */
import type { AgentConfig } from '../config.js';
import { stringField } from '@hq/protocol/answer';
import type { HttpResult } from '@hq/runtime/http';

export type Status = 'pass' | 'fail' | 'skip';

export interface DoctorCheck {
  readonly name: string;
  readonly status: Status;
  readonly detail: string;
  /** What to do about a failure (empty when it passed). */
  readonly fix: string;
}

export function pass(name: string, detail: string): DoctorCheck {
  return { name, status: 'pass', detail, fix: '' };
}
export function fail(name: string, detail: string, fix: string): DoctorCheck {
  return { name, status: 'fail', detail, fix };
}
export function skip(name: string, detail: string): DoctorCheck {
  return { name, status: 'skip', detail, fix: '' };
}

export function mode(m: number): string {
  return (m & 0o777).toString(8).padStart(4, '0');
}

export function secs(s: number): string {
  if (Math.abs(s) < 120) return `${s.toFixed(Math.abs(s) < 10 ? 2 : 0)} s`;
  if (Math.abs(s) < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

export function answerLine(r: HttpResult): string {
  if (r.kind === 'unreachable') return `unreachable (${r.problem})`;
  const error = stringField(r.body, 'error');
  const message = stringField(r.body, 'message');
  return `HTTP ${r.status}${error !== null ? ` ${error}` : ''}${message !== null ? `: ${message}` : ''}`;
}

/** What the checks share once the config is valid; the earlier checks fill in what later ones need. */
export interface DoctorRun {
  readonly c: AgentConfig;
  readonly now: () => number;
  readonly platform: NodeJS.Platform;
  readonly home: string;
  readonly unitPaths: readonly string[] | undefined;
  readonly maxOffset: number;
  /** The arbiter's URL, once resolved (null: unknown). */
  url: string | null;
  /** The config with its network settings resolved (the tailnet's peers included). */
  net: AgentConfig;
  /** "… runs hq 0.1 (protocol 1); upgrade it" for each host behind this release. */
  readonly behind: string[];
  /** The agent answered GET /v1/status on its socket. */
  agentRuns: boolean;
}

export type Check = (r: DoctorRun) => Promise<DoctorCheck[]>;
