/**
 * The local agent over its unix socket, with node:http only (light: no Fastify, no undici), and
 * where that socket is: the few paths the config names, read without TypeBox (loading the
 * validator costs more than the whole fence query). `hq fence check|run` ask the running agent,
 * which validated the same file at its start; when the agent does not answer they fall back to
 * the full validation of `config.ts`.
 */
import { request } from 'node:http';
import { join, resolve } from 'node:path';
import { AGENT_CONFIG, ConfigError, expandHome, findConfigFile, readConfigObject } from '@hq/runtime/config-file';
import { PROTOCOL_HEADER, PROTOCOL_UNSTATED, PROTOCOL_VERSION, spokenVersion } from '@hq/protocol/version';
import type { Timers } from '@hq/runtime/clock';

export interface LightPaths {
  readonly file: string | null;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly requestTimeoutSeconds: number;
}

/** The socket path and state dir from the config, checked only as far as it needs them. */
export function lightPaths(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): LightPaths {
  const file = findConfigFile(explicit, AGENT_CONFIG, env);
  const raw = readConfigObject(file);
  const str = (k: string): string | undefined => {
    const v = raw[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '') throw new ConfigError(k, `${k}: must be a non-empty string`);
    return v;
  };
  const stateDir = resolve(expandHome(str('stateDir') ?? '~/.hq'));
  const socket = str('socketPath');
  const rt = raw['requestTimeoutSeconds'];
  return {
    file,
    stateDir,
    socketPath: resolve(expandHome(socket ?? join(stateDir, 'agent.sock'))),
    requestTimeoutSeconds: typeof rt === 'number' && rt > 0 ? rt : 5,
  };
}

export type LocalResult =
  | {
      readonly kind: 'answer';
      readonly status: number;
      readonly body: unknown;
      /** The protocol version the agent answered in (its `hq-protocol` header; 1 without one). */
      readonly protocol?: number;
    }
  | { readonly kind: 'unreachable'; readonly problem: string };

/**
 * One request to the agent over its unix socket (the CLI's one client of that transport; the TCP
 * one is @hq/runtime/http, which the fence path does not load): answered within `timeoutSeconds`
 * on `timers`, else `unreachable`; `signal` aborted gives up on it at once (as `unreachable`).
 * The clock module's real timers are loaded when none are given, after the fence entry's own
 * modules (the bundle holds it).
 */
export async function callAgent(
  socketPath: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  timeoutSeconds: number,
  body?: unknown,
  signal?: AbortSignal,
  given?: Timers,
): Promise<LocalResult> {
  const timers = given ?? (await import('@hq/runtime/clock')).realTimers;
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body), 'utf8');
  return new Promise((done) => {
    let settled = false;
    const finish = (r: LocalResult): void => {
      if (settled) return;
      settled = true;
      timers.clear(timer);
      done(r);
    };
    const headers: { [k: string]: string } = {
      [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
      ...(payload !== null
        ? { 'content-type': 'application/json', 'content-length': String(payload.length) }
        : method !== 'GET'
          ? { 'content-length': '0' }
          : {}),
    };
    const req = request({ socketPath, method, path, headers, ...(signal === undefined ? {} : { signal }) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => finish({ kind: 'unreachable', problem: err.message }));
      res.on('end', () => {
        let body: unknown = null;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = null;
        }
        const said = spokenVersion(res.headers[PROTOCOL_HEADER]);
        finish({
          kind: 'answer',
          status: res.statusCode ?? 0,
          body,
          protocol: said.ok ? said.version : PROTOCOL_UNSTATED,
        });
      });
    });
    const timer = timers.set(
      () => {
        req.destroy();
        finish({ kind: 'unreachable', problem: `no answer within ${timeoutSeconds} s` });
      },
      Math.max(1, timeoutSeconds * 1000),
    );
    req.on('error', (err: NodeJS.ErrnoException) => finish({ kind: 'unreachable', problem: err.code ?? err.message }));
    req.end(payload ?? undefined);
  });
}

/**
 * Why the agent could not be asked, from the socket error: a permission (this user is not in the
 * socket's group), no socket (the agent is not running, or listens elsewhere), a socket nobody
 * listens on (the agent stopped), or no answer in time.
 */
export function agentProblem(socketPath: string, problem: string, configFile: string | null): string {
  const where =
    configFile === null
      ? 'no config file was found, so the default socketPath is used'
      : `socketPath from ${configFile}`;
  const user = process.env['USER'] ?? process.env['LOGNAME'] ?? 'this user';
  if (problem === 'EACCES' || problem === 'EPERM')
    return `this user may not use the agent's socket ${socketPath} (${problem}): add ${user} to its group (sudo usermod -aG hq ${user}; cron and new logins pick it up)`;
  if (problem === 'ENOENT')
    return `no agent socket at ${socketPath} (ENOENT; ${where}): the agent is not running, or it listens on another socketPath`;
  if (problem === 'ECONNREFUSED') return `nothing listens on ${socketPath} (ECONNREFUSED): the agent stopped; start it`;
  if (problem.startsWith('no answer within'))
    return `the agent did not answer on ${socketPath}: ${problem} (it is overloaded or stopped with SIGSTOP)`;
  return `the agent is not answering on ${socketPath} (${problem})`;
}
