/**
 * What the non-hot commands share: the validated config, tokens, the arbiter and the agent.
 */
import { join } from 'node:path';
import { parseGeneration } from '@hq/lease-core';
import { ERRORS, fieldsOf, generationField, stringField } from '@hq/protocol';
import { loadConfig, resolveNetwork, type AgentConfig } from '../config.js';
import '../config-checker.js';
import { pause, realTimers, type Timers } from '@hq/runtime/clock';
import { readSecure } from '@hq/runtime/files';
import type { HttpResult } from '@hq/runtime/http';
import { readToken } from '../tokens.js';
import { CliError, flagString, type Parsed } from './args.js';
import { callAgent, type LocalResult } from './local.js';

export type Resolved = AgentConfig & { readonly arbiterUrl: string };

export function config(p: Parsed): AgentConfig {
  return loadConfig(flagString(p, 'config'));
}

export function network(p: Parsed): Promise<Resolved> {
  return resolveNetwork(config(p));
}

/** Where the arbiter listens by its own default (its `listen`: 127.0.0.1:8470). */
export const ARBITER_DEFAULT_URL = 'http://127.0.0.1:8470';

/**
 * The arbiter for a read-only command (`lease status`, `events`, `fleet`). With no agent config
 * at all (no --config, no $HQ_CONFIG, no ~/.hq/agent.json, no /etc/hq/agent.json) and no
 * arbiterUrl, that is the arbiter's own default on loopback — what `npm start` runs — and one
 * line on stderr says so. A config that exists but names no arbiter still gets the error: it
 * was meant for somewhere else.
 */
export function networkForReading(p: Parsed): Promise<Resolved> {
  const c = config(p);
  if (c.file === null && c.arbiterUrl === null) {
    process.stderr.write(
      `hq: no agent config (--config, $HQ_CONFIG, ~/.hq/agent.json, /etc/hq/agent.json): asking the arbiter at its default ${ARBITER_DEFAULT_URL}\n`,
    );
    return Promise.resolve({ ...c, arbiterUrl: ARBITER_DEFAULT_URL });
  }
  return resolveNetwork(c);
}

export async function memberToken(c: AgentConfig): Promise<string> {
  const t = await readToken(c.tokenFile);
  if (!t.ok) throw new CliError(2, `${t.problem} (the member token, tokenFile)`);
  return t.token;
}

export async function adminToken(c: AgentConfig, p: Parsed): Promise<string> {
  const env = process.env['HQ_ADMIN_TOKEN'];
  if (env !== undefined && env !== '') return env.replace(/\r?\n$/, '');
  const file = flagString(p, 'token-file') ?? join(c.stateDir, 'admin-token');
  const t = await readToken(file);
  if (!t.ok) throw new CliError(2, `${t.problem} (the admin token: set $HQ_ADMIN_TOKEN or pass --token-file)`);
  return t.token;
}

/** The HTTP client is loaded only by the commands that talk HTTP. */
export async function arbiter(
  c: Resolved,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  body: unknown,
  token: string | null,
): Promise<HttpResult> {
  const { ArbiterEndpoints } = await import('@hq/runtime/http');
  return new ArbiterEndpoints(c.arbiterUrls ?? [c.arbiterUrl]).request({
    method,
    path,
    body,
    token,
    timeoutSeconds: c.requestTimeoutSeconds,
  });
}

export function agent(
  c: AgentConfig,
  method: 'GET' | 'POST',
  path: string,
  timeoutSeconds?: number,
): Promise<LocalResult> {
  return callAgent(c.socketPath, method, path, timeoutSeconds ?? c.requestTimeoutSeconds);
}

/**
 * The highest generation this host has seen: the running agent's, else `seen-generation`.
 * A refused (insecure or corrupt) file is an error: acting on a guess could lower the floor.
 */
export async function seenGeneration(
  c: AgentConfig,
): Promise<{ generation: number; source: 'agent' | 'file' | 'none' }> {
  const r = await agent(c, 'GET', '/v1/seen', 2);
  if (r.kind === 'answer' && r.status === 200) {
    const g = generationField(r.body, 'generation');
    if (g !== null) return { generation: g, source: 'agent' };
  }
  const f = await readSecure(join(c.stateDir, 'seen-generation'));
  if (f.kind === 'missing') return { generation: 0, source: 'none' };
  if (f.kind === 'refused')
    throw new CliError(2, `${join(c.stateDir, 'seen-generation')} ${f.problem}; refusing to guess the seen generation`);
  const g = parseGeneration(f.text);
  if (g === null)
    throw new CliError(
      2,
      `${join(c.stateDir, 'seen-generation')} is not a generation; refusing to guess the seen generation`,
    );
  return { generation: g, source: 'file' };
}

/** Where the arbiter URL came from, for error lines (the file a user must edit). */
function urlSource(c: Resolved | undefined): string {
  if (c === undefined) return '';
  return c.file === null ? ' (arbiterUrl: no config file, the built-in default)' : ` (arbiterUrl from ${c.file})`;
}

/** The exit code and one line for an arbiter answer that is not a 200. */
export function failure(r: HttpResult, what: string, c?: Resolved): { code: number; line: string } {
  const at = c === undefined ? '' : ` at ${c.arbiterUrl}`;
  if (r.kind === 'unreachable')
    return { code: 3, line: `${what}: the arbiter${at} is unreachable (${r.problem})${urlSource(c)}` };
  const b = fieldsOf(r.body);
  const detail = [b.reason, b.error, b.message].filter((x) => typeof x === 'string').join(': ');
  // An hq agent's peer listener answers the arbiter's routes with its generic 404 (the arbiter's names the route).
  if (r.status === 404 && b.error === ERRORS.NOT_FOUND.code && b.message === ERRORS.NOT_FOUND.message) {
    return {
      code: 3,
      line: `${what}: ${c?.arbiterUrl ?? 'the arbiter URL'} is not the arbiter: it answers like an hq agent's peer listener (HTTP 404 for the arbiter's routes); set arbiterUrl to the arbiter's address (port 8470 by default)${urlSource(c)}`,
    };
  }
  // An hq arbiter answers every refusal with an HQ_ERR_ code; anything else is another server.
  if (r.status >= 400 && !(typeof b.error === 'string' && b.error.startsWith('HQ_ERR_'))) {
    return {
      code: 3,
      line: `${what}: ${c?.arbiterUrl ?? 'the arbiter URL'} answered HTTP ${r.status} but is not an hq arbiter${urlSource(c)}`,
    };
  }
  if (r.status >= 500)
    return { code: 3, line: `${what}: the arbiter failed (HTTP ${r.status}${detail === '' ? '' : `, ${detail}`})` };
  // A lease held by another host: name it and its generation, as the record in the answer does.
  const holder = stringField(b.lease, 'holder');
  const generation = generationField(b.lease, 'generation');
  if (b.reason === 'held' && holder !== null && generation !== null) {
    return { code: 1, line: `${what}: refused: held by ${holder} (generation ${generation}; HTTP ${r.status})` };
  }
  return { code: 1, line: `${what}: refused (HTTP ${r.status}${detail === '' ? '' : `, ${detail}`})` };
}

/**
 * A failed arbiter call: one line on stderr (`hq COMMAND: …`), and with --json the same as JSON
 * on stdout, so a script reading stdout learns why too.
 */
export function reportFailure(f: { code: number; line: string }, p: { flags: ReadonlyMap<string, unknown> }): void {
  process.stderr.write(`hq ${f.line}\n`);
  if (p.flags.has('json'))
    process.stdout.write(
      `${JSON.stringify({ ok: false, error: f.code === 3 ? 'unreachable' : 'refused', message: f.line, exitCode: f.code })}\n`,
    );
}

export function out(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : text.endsWith('\n') ? text : `${text}\n`);
}

/** Waits `ms` on `timers` (tests pass their own). */
export function sleep(ms: number, timers: Timers = realTimers): Promise<void> {
  return pause(timers, ms);
}
