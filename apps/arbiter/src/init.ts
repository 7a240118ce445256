/**
 * `hq-arbiter init`: the arbiter's first step on a new fleet. It writes a config only where none
 * exists (never over an operator's file), validates it as the daemon will, then makes the data
 * directory and the fleet's secrets (join.ts). Nothing here touches the database.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { isHost, HOST_PATTERN } from '@hq/protocol';
import { PEER_PORT } from '@hq/runtime/probe';
import { mkdir } from 'node:fs/promises';
import { writeAtomic } from '@hq/runtime/files';
import { ConfigError, loadConfigLazily } from './config.js';
import { ensureFleetSecrets, joinProblem } from './join.js';

export interface InitOptions {
  readonly config: string | undefined;
  readonly candidates: string | undefined;
  readonly arbiter: string | undefined;
  readonly listen: string | undefined;
  readonly dataDir: string | undefined;
  readonly tailnetDomain: string | undefined;
  readonly tailscaleBin: string | undefined;
}

type Result = { ok: true; lines: string[] } | { ok: false; problem: string };

/** `NAME[=URL],…` → candidates and their health URLs, or the problem. */
function parseCandidates(text: string): { names: string[]; health: Record<string, string> } | string {
  const names: string[] = [];
  const health: Record<string, string> = {};
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    const name = eq === -1 ? part : part.slice(0, eq);
    if (!isHost(name)) return `--candidates: "${name}" is not a host name (${HOST_PATTERN.source})`;
    if (names.includes(name)) return `--candidates: "${name}" is named twice`;
    names.push(name);
    if (eq === -1) continue;
    const url = part.slice(eq + 1);
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return `--candidates: ${name}'s URL "${url}" is not a URL (like http://100.64.0.2:${PEER_PORT})`;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      return `--candidates: ${name}'s URL "${url}" must be http:// or https://`;
    if (u.pathname !== '/' && u.pathname !== '')
      return `--candidates: ${name}'s URL "${url}" must be the peer listener's origin, without a path`;
    health[name] = `${u.origin}/v1/health`;
  }
  return { names, health };
}

export async function initArbiter(o: InitOptions): Promise<Result> {
  const path = resolve(o.config ?? join(homedir(), '.hq', 'arbiter.json'));
  const lines: string[] = [];
  const writing =
    o.candidates !== undefined ||
    o.arbiter !== undefined ||
    o.listen !== undefined ||
    o.dataDir !== undefined ||
    o.tailnetDomain !== undefined ||
    o.tailscaleBin !== undefined;
  if (existsSync(path)) {
    if (writing)
      return {
        ok: false,
        problem: `init: ${path} exists and is kept as it is; edit it instead, or drop the flags that would write a new one`,
      };
    lines.push(`config ${path} exists: kept`);
  } else {
    const file: Record<string, unknown> = {};
    if (o.arbiter !== undefined) file['arbiter'] = o.arbiter;
    if (o.candidates !== undefined) {
      const c = parseCandidates(o.candidates);
      if (typeof c === 'string') return { ok: false, problem: c };
      file['candidates'] = c.names;
      if (Object.keys(c.health).length > 0) file['healthUrls'] = c.health;
    }
    if (o.tailnetDomain !== undefined) file['tailnetDomain'] = o.tailnetDomain;
    if (o.tailscaleBin !== undefined) file['tailscaleBin'] = o.tailscaleBin;
    if (o.listen !== undefined) {
      const m = /^(.+):([0-9]{1,5})$/.exec(o.listen);
      if (m === null)
        return { ok: false, problem: `--listen must be HOST:PORT, like 127.0.0.1:8470 (got "${o.listen}")` };
      file['listen'] = { host: (m[1] as string).replace(/^\[(.*)\]$/, '$1'), port: Number(m[2]) };
    }
    file['dataDir'] = resolve(o.dataDir ?? join(dirname(path), 'var'));
    const text = `${JSON.stringify(file, null, 2)}\n`;
    // Validate exactly what will be written, before anything is: a refused flag writes nothing.
    const probe = join(dirname(path), `.init-check-${process.pid}.json`);
    try {
      // The config's directory is not secret (/etc/hq); only a missing one is created.
      await mkdir(dirname(path), { recursive: true, mode: 0o755 });
      await writeAtomic(probe, text);
      await loadConfigLazily(probe);
    } catch (err) {
      const { unlink } = await import('node:fs/promises');
      await unlink(probe).catch(() => undefined);
      if (err instanceof ConfigError) return { ok: false, problem: err.message.replace(probe, path) };
      throw err;
    }
    const { unlink } = await import('node:fs/promises');
    await unlink(probe);
    // Not a secret (the daemon's user reads it; the secrets live in dataDir): 0644.
    await writeAtomic(path, text, 0o644);
    lines.push(`config ${path} written`);
  }
  const cfg = await loadConfigLazily(path);
  const made = await ensureFleetSecrets(cfg.dataDir);
  lines.push(`data directory ${cfg.dataDir} (0700)`);
  for (const f of made) lines.push(`${f} created (0600)`);
  if (made.length === 0) lines.push('peer token and identity key exist: kept');
  const missing = cfg.candidates.map((c) => joinProblem(cfg, c)).find((x) => x !== null);
  if (missing !== undefined && missing !== null) lines.push(`before joining: ${missing}`);
  lines.push(
    `next: start the daemon (hq-arbiter serve --config ${path}), then on this host for each candidate: hq-arbiter join HOST --config ${path} (${cfg.candidates.join(', ')})`,
  );
  return { ok: true, lines };
}
