/**
 * The checks of `hq doctor` that ask another machine: the arbiter's URL, the arbiter itself
 * (health, the token, etcd's space, the clock offset), the timing and refused generations it
 * reports, the peers and their confirmation path, and the versions every host speaks.
 */
import { resolveNetwork } from '../config.js';
import { readToken } from '../tokens.js';
import { peerPathProblem } from '../daemon/peers.js';
import { joinUrl, requestJson } from '@hq/runtime/http';
import { callAgent } from './local.js';
import { PROTOCOL_UNSTATED, PROTOCOL_VERSION, upgradeNote } from '@hq/protocol/version';
import { fieldsOf, stringField } from '@hq/protocol/answer';
import { answerLine, fail, pass, secs, skip, type DoctorCheck, type DoctorRun } from './doctor-checks.js';

/** Store etcd: etcd's space as the arbiter's /v1/health read it; null for a SQLite arbiter. */
export function etcdSpaceCheck(arbiters: unknown): DoctorCheck | null {
  if (arbiters === undefined) return null;
  const s = fieldsOf(fieldsOf(fieldsOf(arbiters).etcd).space);
  if (typeof s.dbSizeBytes !== 'number' || typeof s.quotaBytes !== 'number')
    return skip('etcd-space', "the arbiter has not read etcd's database size yet (or is older than this hq)");
  const used = `etcd's database is ${(s.dbSizeBytes / 1024 ** 2).toFixed(1)} MiB of its ${(s.quotaBytes / 1024 ** 2).toFixed(0)} MiB quota (${Math.round((s.dbSizeBytes / s.quotaBytes) * 100)} %)`;
  if (s.level === 'ok') return pass('etcd-space', used);
  return fail(
    'etcd-space',
    typeof s.warning === 'string' ? s.warning : used,
    'compact, defragment and disarm as deploy/README.md "etcd\'s space" says (etcdctl defrag on each member; etcdctl alarm disarm), or raise --quota-backend-bytes',
  );
}

/** "; store etcd: … is elected, etcd 3/3 members up" (nothing for a SQLite arbiter). */
export function electedLine(arbiters: unknown): string {
  if (arbiters === undefined) return '';
  const a = fieldsOf(arbiters);
  const etcd = fieldsOf(a.etcd);
  const members: unknown[] = Array.isArray(etcd.members) ? etcd.members : [];
  const who =
    a.elected === true
      ? 'this arbiter is elected'
      : a.leader == null
        ? 'no arbiter is elected'
        : `${String(a.leader)} is elected`;
  return `; store etcd: ${who}, etcd ${members.filter((m) => fieldsOf(m).ok === true).length}/${members.length} members up${etcd.healthy === true ? '' : ' (no quorum)'}`;
}

/** The network settings (arbiterUrl may come from the tailnet). */
export async function checkArbiterUrl(r: DoctorRun): Promise<DoctorCheck[]> {
  try {
    const net = await resolveNetwork(r.c);
    r.url = net.arbiterUrl;
    r.net = net;
    return [pass('arbiter-url', net.arbiterUrl)];
  } catch (err) {
    return [
      fail(
        'arbiter-url',
        (err as Error).message,
        'set arbiterUrl (or tailnetDomain) in the agent config, or make `tailscale status` work',
      ),
    ];
  }
}

/** The arbiter: health, the token, etcd's space, the clock offset. */
export async function checkArbiter(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, url } = r;
  if (url === null) return [skip('arbiter', 'no arbiter URL'), skip('clock', 'no arbiter URL')];
  const timeoutSeconds = c.requestTimeoutSeconds;
  const health = await requestJson({ method: 'GET', url: joinUrl(url, '/v1/health'), timeoutSeconds });
  const hb = fieldsOf(health.kind === 'answer' ? health.body : null);
  if (health.kind !== 'answer' || health.status !== 200 || hb.role !== 'arbiter') {
    return [
      fail(
        'arbiter',
        `${url}/v1/health: ${health.kind === 'answer' && health.status === 200 ? 'answered, but not as an arbiter' : answerLine(health)}`,
        `check that hq-arbiter runs on ${c.arbiter} and that ${url} is reachable from here (tailscale ping ${c.arbiter})`,
      ),
      skip('clock', 'the arbiter is unreachable'),
    ];
  }
  const token = await readToken(c.tokenFile);
  const t0 = r.now();
  const lease = await requestJson({
    method: 'GET',
    url: joinUrl(url, '/v1/lease'),
    token: token.ok ? token.token : null,
    timeoutSeconds,
  });
  const t1 = r.now();
  if (lease.kind === 'answer' && lease.status === 401) {
    return [
      fail(
        'arbiter',
        `${url} refuses this host's token (${answerLine(lease)})`,
        `the token was revoked or belongs to another arbiter: join again (on the arbiter: hq-arbiter join ${c.hostName} --config /etc/hq/arbiter.json, then the hq join line here with --force)`,
      ),
      skip('clock', 'the lease could not be read'),
    ];
  }
  if (lease.kind !== 'answer' || lease.status !== 200) {
    return [
      fail('arbiter', `${url}/v1/lease: ${answerLine(lease)}`, `check the arbiter's log (journalctl -u hq-arbiter)`),
      skip('clock', 'the lease could not be read'),
    ];
  }
  const rec = fieldsOf(lease.body);
  const note = upgradeNote(
    `${String(hb.host)} (the arbiter)`,
    health.protocol ?? PROTOCOL_UNSTATED,
    typeof hb.version === 'string' ? hb.version : null,
  );
  if (note !== null) r.behind.push(note);
  const out = [
    pass(
      'arbiter',
      `${url} is ${String(hb.host)} ${String(hb.version)}; holder ${typeof rec.holder === 'string' ? rec.holder : 'none'}, generation ${String(rec.generation ?? '?')}${token.ok ? ', token accepted' : ''}${electedLine(hb.arbiters)}`,
    ),
  ];
  const space = etcdSpaceCheck(hb.arbiters);
  if (space !== null) out.push(space);
  out.push(clockCheck(rec.now, t0, t1, r.maxOffset));
  return out;
}

/** The offset between the arbiter's `now` and this host's clock at the midpoint of the request [t0, t1]. */
export function clockCheck(arbiterNow: unknown, t0: number, t1: number, maxOffset: number): DoctorCheck {
  if (typeof arbiterNow !== 'number' || !Number.isFinite(arbiterNow))
    return fail('clock', 'the record has no "now"', 'upgrade hq-arbiter');
  const offset = arbiterNow - (t0 + t1) / 2;
  const uncertainty = (t1 - t0) / 2;
  const line = `this host's clock is ${secs(Math.abs(offset))} ${offset >= 0 ? 'behind' : 'ahead of'} the arbiter's (± ${secs(uncertainty)})`;
  if (Math.abs(offset) - uncertainty > maxOffset) {
    return fail(
      'clock',
      `${line}, more than ${maxOffset} s`,
      'enable time sync on both hosts (timedatectl set-ntp true / chrony; macOS: System Settings → Date & Time → set automatically)',
    );
  }
  return pass('clock', line);
}

/**
 * The timing across the sides (S6): the arbiter checks this host's reported cadence against its
 * lease timing on every heartbeat; doctor shows what it found and the failover it implies, and
 * the last generation the arbiter refused. Each host's version as its last heartbeat said it.
 */
export async function checkTiming(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, url } = r;
  if (url === null) return [skip('timing', 'no arbiter URL')];
  const token = await readToken(c.tokenFile);
  const st = await requestJson({
    method: 'GET',
    url: joinUrl(url, '/v1/status'),
    token: token.ok ? token.token : null,
    timeoutSeconds: c.requestTimeoutSeconds,
  });
  const b = st.kind === 'answer' && st.status === 200 ? fieldsOf(st.body) : null;
  if (b === null) return [skip('timing', `${url}/v1/status: ${answerLine(st)}`)];
  // Protocol 2: each host's version as its last heartbeat said it (an arbiter of protocol 1 has no such field).
  for (const h of Array.isArray(b.hosts) ? b.hosts : []) {
    const { upgrade: u, host } = fieldsOf(h);
    if (typeof u === 'string' && !r.behind.some((n) => n.startsWith(`${String(host)} `))) r.behind.push(u);
  }
  const problems = (Array.isArray(b.timingProblems) ? b.timingProblems : [])
    .map((p) => fieldsOf(p))
    .filter((p) => typeof p.message === 'string');
  const mine = problems.filter((p) => p.host === c.hostName).map((p) => String(p.message));
  const others = problems.filter((p) => p.host !== c.hostName).map((p) => String(p.message));
  const failover = stringField(b.failover, 'text') ?? 'unknown';
  const out: DoctorCheck[] = [];
  if (mine.length > 0)
    out.push(
      fail(
        'timing',
        mine.join('; '),
        `change this host's key named above in ${c.file ?? 'the agent config'}, or the arbiter's key on ${c.arbiter}`,
      ),
    );
  else if (others.length > 0)
    out.push(fail('timing', `another host: ${others.join('; ')}`, 'run hq doctor on that host'));
  else out.push(pass('timing', `the arbiter reports no timing problem; failover ${failover}`));
  // The last report or grant the generation bounds refused since the arbiter started.
  const refusal = b.generationRefusal;
  const g = fieldsOf(refusal);
  if (refusal !== undefined && refusal !== null && typeof g.message === 'string') {
    const fix =
      g.kind === 'ceiling'
        ? 'the floor came from an accepted report: read the generation-refused and generation-accepted events (hq events)'
        : `if ${String(g.host ?? 'that host')} really saw generation ${String(g.generation)} (a restored or lost arbiter database), accept it: hq lease accept ${String(g.generation)}; else find what sends it`;
    out.push(fail('generation', g.message, fix));
  } else if (refusal === null)
    out.push(pass('generation', 'the arbiter refused no reported generation since it started'));
  return out;
}

/** Every peer's health, then the confirmation path itself with this host's peer token. */
export async function checkPeers(r: DoctorRun): Promise<DoctorCheck[]> {
  const { c, net } = r;
  if (net.peers.size === 0) return [skip('peers', 'no peers configured (set peers or tailnetDomain)')];
  const down: string[] = [];
  const up: string[] = [];
  await Promise.all(
    [...net.peers].map(async ([host, base]) => {
      const a = await requestJson({
        method: 'GET',
        url: joinUrl(base, '/v1/health'),
        timeoutSeconds: c.requestTimeoutSeconds,
      });
      if (a.kind === 'answer' && a.status === 200) {
        up.push(host);
        const note = upgradeNote(host, a.protocol ?? PROTOCOL_UNSTATED, stringField(a.body, 'version'));
        if (note !== null && !r.behind.some((n) => n.startsWith(`${host} `))) r.behind.push(note);
      } else down.push(`${host} (${base}: ${answerLine(a)})`);
    }),
  );
  if (down.length > 0)
    return [
      fail(
        'peers',
        `not answering: ${down.sort().join('; ')}`,
        `check that hq-agent runs on each of them and that port ${c.listen.port} is reachable over the tailnet (hq doctor there)`,
      ),
    ];
  // Health is not the path an arbiter outage needs: probe the confirmation itself, with this host's peer token.
  const pt = await readToken(c.peerTokenFile);
  const broken: string[] = [];
  if (!pt.ok) broken.push(`this host's peer token: ${pt.problem}`);
  else {
    await Promise.all(
      [...net.peers].map(async ([host, base]) => {
        const a = await requestJson({
          method: 'POST',
          url: joinUrl(base, '/v1/peer/confirm'),
          body: { host: c.hostName, generation: 1, probe: true },
          token: pt.token,
          timeoutSeconds: c.requestTimeoutSeconds,
        });
        const problem = peerPathProblem(base, a);
        if (problem !== null) broken.push(`${host}: ${problem}`);
      }),
    );
  }
  if (broken.length === 0)
    return [
      pass('peers', `${up.sort().join(', ')} answer /v1/health and accept this host's peer token (confirmation probe)`),
    ];
  return [
    fail(
      'peers',
      `the confirmation path is broken — ${broken.sort().join('; ')}`,
      'in an arbiter outage the holder would stop for want of a confirmation: make the peer-token files the same bytes on every candidate (0600), then hq doctor again',
    ),
  ];
}

/** Versions (docs/PROTOCOL.md "Versions"): every host behind this release, one line each. */
export async function checkVersions({ c, behind }: DoctorRun): Promise<DoctorCheck[]> {
  const local = await callAgent(c.socketPath, 'GET', '/v1/seen', c.requestTimeoutSeconds);
  if (local.kind === 'answer' && (local.protocol ?? PROTOCOL_UNSTATED) < PROTOCOL_VERSION) {
    behind.unshift(
      `the hq-agent daemon on this host speaks protocol ${local.protocol ?? PROTOCOL_UNSTATED} (an older hq still running); restart it`,
    );
  }
  if (behind.length > 0)
    return [
      fail(
        'versions',
        behind.join('; '),
        'upgrade one host at a time: the arbiter, then the standby, then the holder after a handover (deploy/README.md "Upgrading")',
      ),
    ];
  return [pass('versions', `every host heard from speaks hq protocol ${PROTOCOL_VERSION}`)];
}
