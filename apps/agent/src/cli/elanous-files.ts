/**
 * The files of elanous HQ as `hq import elanous` reads them: the host file, the seen-generation
 * marker, the local cache (local.json), the `hq` block of the old config, and the crontab's
 * lines that ran `elanous hq …` with what replaces each. Each parser answers the value or one
 * line saying what is wrong.
 */
import { isGeneration } from '@hq/lease-core';
import { GENERATION_CEILING, hostProblem } from '@hq/protocol';
import { parseJsonObject } from '@hq/runtime/config-file';
export type Read<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

/** The old host file: a host name, with no line end or one plain newline. */
export function parseOldHost(text: string): Read<string> {
  if (text.includes('\r'))
    return { ok: false, problem: 'has a CR LF (Windows) line end: write the name with a plain newline or none' };
  const name = text.endsWith('\n') ? text.slice(0, -1) : text;
  const problem = hostProblem(name);
  return problem === null
    ? { ok: true, value: name }
    : { ok: false, problem: `holds ${JSON.stringify(name)}, which ${problem}` };
}

/** The old seen-generation marker: an integer ≥ 0, optionally followed by one newline. */
export function parseOldSeen(text: string): Read<number> {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (text.includes('\r'))
    return { ok: false, problem: 'has a CR LF (Windows) line end: write the number with a plain newline or none' };
  if (!/^-?\d{1,16}$/.test(body))
    return { ok: false, problem: `holds ${JSON.stringify(body)}, not a generation (an integer ≥ 0)` };
  const n = Number(body);
  if (!isGeneration(n) || n > GENERATION_CEILING)
    return { ok: false, problem: `holds ${body}: a generation is an integer from 0 to ${GENERATION_CEILING}` };
  return { ok: true, value: n };
}

export interface OldLocal {
  readonly holder: string | null;
  readonly generation: number;
  readonly ttlSeconds: number | null;
}

/** The old local cache `{holder, generation, confirmedAt, ttlSeconds}` (other fields ignored). */
export function parseOldLocal(text: string): Read<OldLocal> {
  const j = parseJsonObject(text);
  if (!j.ok) return j;
  const o = j.value;
  const holder = o['holder'] ?? null;
  if (holder !== null && hostProblem(holder) !== null)
    return { ok: false, problem: `holder ${JSON.stringify(holder)} ${hostProblem(holder)}` };
  const g = o['generation'];
  if (!isGeneration(g) || g > GENERATION_CEILING)
    return {
      ok: false,
      problem: `generation must be an integer from 0 to ${GENERATION_CEILING} (got ${JSON.stringify(g) ?? 'nothing'})`,
    };
  const c = o['confirmedAt'] ?? null;
  if (c !== null && !(typeof c === 'number' && Number.isFinite(c)) && typeof c !== 'string')
    return { ok: false, problem: `confirmedAt must be a time or null (got ${JSON.stringify(c)})` };
  const ttl = o['ttlSeconds'] ?? null;
  if (ttl !== null && !(typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0))
    return { ok: false, problem: `ttlSeconds must be a number ≥ 0 (got ${JSON.stringify(ttl)})` };
  return { ok: true, value: { holder: holder as string | null, generation: g, ttlSeconds: ttl as number | null } };
}

/** The keys of the old `hq` block, and where each goes in hq. */
export const AGENT_KEYS = [
  'arbiter',
  'failOpenRoles',
  'healthUrls',
  'hostName',
  'tailscaleBin',
  'probeTimeoutSeconds',
] as const;
export const ARBITER_KEYS = ['standby', 'ttlSeconds'] as const;
/** Read by both daemons in hq: written to the agent's config, and the arbiter's needs them too. */
export const SHARED_KEYS: readonly string[] = ['arbiter', 'healthUrls', 'tailscaleBin', 'probeTimeoutSeconds'];

export interface OldConfig {
  /** The `hq` block (absent: empty). */
  readonly hq: { readonly [k: string]: unknown };
  /** Keys of the block hq has no place for. */
  readonly unknown: readonly string[];
}

/** The old `~/.elanous/config.json`: only its `hq` block is read; its types are checked here. */
export function parseOldConfig(text: string): Read<OldConfig> {
  const j = parseJsonObject(text);
  if (!j.ok) return j;
  const block = j.value['hq'];
  if (block === undefined) return { ok: true, value: { hq: {}, unknown: [] } };
  if (typeof block !== 'object' || block === null || Array.isArray(block))
    return { ok: false, problem: 'hq must be a JSON object' };
  const hq = block as { [k: string]: unknown };
  const str = (k: string) => hq[k] === undefined || typeof hq[k] === 'string';
  for (const k of ['arbiter', 'standby', 'hostName', 'tailscaleBin', 'seenGenerationFile'])
    if (!str(k)) return { ok: false, problem: `hq.${k} must be a string` };
  for (const k of ['arbiter', 'standby', 'hostName']) {
    if (hq[k] !== undefined && hostProblem(hq[k]) !== null)
      return { ok: false, problem: `hq.${k} ${JSON.stringify(hq[k])} ${hostProblem(hq[k])}` };
  }
  for (const k of ['ttlSeconds', 'probeTimeoutSeconds']) {
    const v = hq[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0))
      return { ok: false, problem: `hq.${k} must be a positive number (got ${JSON.stringify(v)})` };
  }
  const roles = hq['failOpenRoles'];
  if (roles !== undefined && !(Array.isArray(roles) && roles.every((r) => typeof r === 'string')))
    return { ok: false, problem: 'hq.failOpenRoles must be a list of role names' };
  const urls = hq['healthUrls'];
  if (
    urls !== undefined &&
    (typeof urls !== 'object' ||
      urls === null ||
      Array.isArray(urls) ||
      !Object.values(urls).every((u) => typeof u === 'string'))
  ) {
    return { ok: false, problem: 'hq.healthUrls must map host names to URLs' };
  }
  const known = new Set<string>([...AGENT_KEYS, ...ARBITER_KEYS, 'seenGenerationFile']);
  return { ok: true, value: { hq, unknown: Object.keys(hq).filter((k) => !known.has(k)) } };
}

export interface CronLine {
  readonly line: string;
  /** remove: the daemons do its work; replace: a fenced job; review: rewrite it by hand. */
  readonly action: 'remove' | 'replace' | 'review';
  /** What replaces it: null when the line goes (the daemons do its work). */
  readonly replacement: string | null;
  readonly why: string;
  /** The fence role of a fenced job. */
  readonly role?: string;
}

const ELANOUS_HQ = /(^|\s)((?:\S*\/)?elanous)\s+hq(\s+|$)/;

/**
 * The crontab's lines that run `elanous hq …`, each with its hq replacement: the heartbeat and
 * the arbiter check go (hq-agent and hq-arbiter do them), a fenced job becomes
 * `hq fence run --role R -- CMD`, anything else is named for a look by hand.
 */
export function crontabReplacements(crontab: string): CronLine[] {
  const out: CronLine[] = [];
  for (const raw of crontab.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (line.trim().startsWith('#')) continue;
    const m = ELANOUS_HQ.exec(line);
    if (m === null) continue;
    const before = line.slice(0, m.index + m[1]!.length);
    const after = line.slice(m.index + m[0].length);
    // Each word with where it starts: CMD is kept exactly as written (quotes, spacing).
    const tokens = [...after.matchAll(/\S+/g)].map((x) => ({ word: x[0], at: x.index }));
    const words = tokens.map((x) => x.word);
    const verb = words[0] ?? '';
    if (verb === 'heartbeat')
      out.push({ line, action: 'remove', replacement: null, why: 'hq-agent heartbeats by itself (heartbeatCron)' });
    else if (verb === 'arbiter-check' || verb === 'check')
      out.push({ line, action: 'remove', replacement: null, why: 'hq-arbiter checks by itself (checkCron)' });
    else if (verb === 'fence') {
      let role: string | null = null;
      let i = 1;
      const flags: string[] = [];
      for (; i < words.length; i++) {
        const w = words[i]!;
        if (w === '--') {
          i++;
          break;
        }
        if (w === '--role') role = words[++i] ?? null;
        else if (w.startsWith('--role=')) role = w.slice('--role='.length);
        else if (w === '--verbose' || w === '-v') flags.push('--verbose');
        else if (w.startsWith('-')) flags.push(w);
        else break;
      }
      const cmd = i < tokens.length ? after.slice(tokens[i]!.at).trimEnd() : '';
      if (role === null || cmd === '')
        out.push({
          line,
          action: 'review',
          replacement: null,
          why: 'a fence line without --role or a command: rewrite it by hand as hq fence run --role R -- CMD',
        });
      else {
        const extra = flags.length === 0 ? '' : ` ${flags.join(' ')}`;
        out.push({
          line,
          action: 'replace',
          replacement: `${before}hq fence run --role ${role}${extra} -- ${cmd}`,
          why: 'a fenced job',
          role,
        });
      }
    } else {
      const map: { [k: string]: string } = {
        status: 'hq lease status',
        acquire: 'hq lease acquire',
        release: 'hq lease release',
        seen: 'hq seen',
        guard: 'hq guard (--hq-override is --override)',
      };
      out.push({
        line,
        action: 'review',
        replacement: null,
        why: `no direct replacement for "elanous hq ${verb}"${map[verb] === undefined ? '' : `: see ${map[verb]}`}; rewrite it by hand`,
      });
    }
  }
  return out;
}
