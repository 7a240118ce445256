/**
 * `npx tsx bench/etcd-calls.ts`: what one etcd member does for the hq(etcd) arbiter's
 * heartbeats, from etcd's own `/metrics` — gRPC calls by method, raft proposals, WAL fsyncs, the
 * MVCC puts, ranges (a txn's compares) and txns — each divided by the heartbeats answered, beside
 * the CPU per heartbeat of the arbiter and of etcd (/proc). One etcd arbiter (bench/hq-arbiter.ts)
 * on one etcd member, the holder's `POST /v1/heartbeat` on 32 connections, every answer a 200;
 * `R` rounds (2) of `S` seconds (5) after 3 s of warm-up.
 */
import { holderHeartbeat, startArbiter } from './hq-arbiter.js';
import { cpuSeconds, load, machineLine, oneEtcdMember } from './lib.js';

const SECONDS = Number(process.env['S'] ?? 5);
const ROUNDS = Number(process.env['R'] ?? 2);
const cluster = await oneEtcdMember('bench/etcd-calls.ts', 'hq-bench-calls');
const member = cluster.members[0]!;
const base = member.clientUrl;
/** etcd's counters read before and after each round (3.4 also exports the MVCC ones as `etcd_debugging_mvcc_*`). */
const COUNTERS = [
  'grpc_server_handled_total',
  'etcd_server_proposals_committed_total',
  'etcd_disk_wal_fsync_duration_seconds_count',
  'etcd_disk_backend_commit_duration_seconds_count',
  'etcd_mvcc_put_total',
  'etcd_mvcc_range_total',
  'etcd_mvcc_txn_total',
  'etcd_network_client_grpc_received_bytes_total',
  'etcd_network_client_grpc_sent_bytes_total',
];
// Should it fail, startArbiter stops what it started, and the member is killed at exit.
const hq = await startArbiter({
  build: false,
  store: { kind: 'etcd', endpoints: [base], prefix: '/b', advertiseUrl: 'http://127.0.0.1:1' },
});
const req = holderHeartbeat(hq);
async function metrics(): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    if (COUNTERS.some((name) => line.startsWith(name))) {
      const i = line.lastIndexOf(' ');
      m.set(line.slice(0, i), Number(line.slice(i + 1)));
    }
  }
  return m;
}
try {
  await load('warm', hq.base, req, { seconds: 3, connections: 32 });
  for (let r = 0; r < ROUNDS; r++) {
    const m0 = await metrics();
    const c0 = cpuSeconds(member.pid!),
      a0 = cpuSeconds(hq.daemon.proc.pid!);
    const res = await load('renew', hq.base, req, { seconds: SECONDS, connections: 32 });
    if ((res.statuses.get(200) ?? 0) !== res.requests) throw new Error(`statuses ${JSON.stringify([...res.statuses])}`);
    const m1 = await metrics();
    const c1 = cpuSeconds(member.pid!),
      a1 = cpuSeconds(hq.daemon.proc.pid!);
    console.log(
      `${Math.round(res.rps)}/s ${res.requests} answers; etcd ${(((c1 - c0) * 1e6) / res.requests).toFixed(0)} µs/answer, arbiter ${(((a1 - a0) * 1e6) / res.requests).toFixed(0)} µs/answer`,
    );
    for (const [k, v] of m1) {
      const d = v - (m0.get(k) ?? 0);
      if (d > 0) console.log(`  ${k}: ${d} (${(d / res.requests).toFixed(3)} per answer)`);
    }
  }
  console.log(
    `\n${new Date().toISOString()} — ${machineLine(`, etcd ${cluster.version} (one member), 32 connections, ${SECONDS} s per round`)}`,
  );
} finally {
  await hq.stop();
  await cluster.stop();
}
