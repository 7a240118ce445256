/**
 * `BENCH_A=/path/to/another/checkout npx tsx bench/etcd-ab.ts`: the heartbeat's CPU of
 * two builds side by side — arbiter A from the other checkout (built, `npm install` done there),
 * arbiter B from this one — each with `store: etcd` on its own prefix of one etcd member, both
 * started the same way (bench/hq-arbiter.ts), then renew rounds (the holder's `POST /v1/heartbeat`,
 * 32 connections, every answer a 200) that alternate between them, the order swapped each round,
 * so that drift on a shared machine falls on both. Prints each round's answers/s and the arbiter's
 * and etcd's CPU per answer (/proc), then the medians. `R` rounds (8) of `S` seconds (5);
 * `NODEARGS_A`/`NODEARGS_B`: extra node flags for one side (e.g. a V8 setting to compare).
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import * as mine from './hq-arbiter.js';
import { cpuSeconds, load, median, oneEtcdMember } from './lib.js';
const aRoot = process.env['BENCH_A'];
if (aRoot === undefined || aRoot === '') {
  process.stderr.write('bench/etcd-ab.ts: set BENCH_A to the other checkout (its apps built)\n');
  process.exit(2);
}
const other = (await import(join(aRoot, 'bench/hq-arbiter.ts'))) as typeof mine;
const SECONDS = Number(process.env['S'] ?? 5);
const ROUNDS = Number(process.env['R'] ?? 8);
const extraA = process.env['NODEARGS_A'] ? process.env['NODEARGS_A'].split(' ') : [];
const extraB = process.env['NODEARGS_B'] ? process.env['NODEARGS_B'].split(' ') : [];
const cluster = await oneEtcdMember('bench/etcd-ab.ts', 'hq-bench-ab');
const member = cluster.members[0]!;
const base = member.clientUrl;
const store = (p: string) => ({ kind: 'etcd', endpoints: [base], prefix: p, advertiseUrl: 'http://127.0.0.1:1' });
const [a, b] = await Promise.all([
  other.startArbiter({ build: false, nodeArgs: extraA, store: store('/a') }),
  mine.startArbiter({ build: false, nodeArgs: extraB, store: store('/b') }),
]);
const sides = [
  {
    name: `A ${aRoot}${extraA.length ? ` ${extraA.join(' ')}` : ''}`,
    hq: a,
    cpu: [] as number[],
    rps: [] as number[],
    etcd: [] as number[],
  },
  {
    name: `B this tree${extraB.length ? ` ${extraB.join(' ')}` : ''}`,
    hq: b,
    cpu: [] as number[],
    rps: [] as number[],
    etcd: [] as number[],
  },
];
try {
  for (const s of sides) await load('warm', s.hq.base, mine.holderHeartbeat(s.hq), { seconds: 3, connections: 32 });
  const l0 = loadavg()[0]!;
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const pid = s.hq.daemon.proc.pid!;
      const c0 = cpuSeconds(pid),
        e0 = cpuSeconds(member.pid!);
      const res = await load('renew', s.hq.base, mine.holderHeartbeat(s.hq), { seconds: SECONDS, connections: 32 });
      const c1 = cpuSeconds(pid),
        e1 = cpuSeconds(member.pid!);
      if ((res.statuses.get(200) ?? 0) !== res.requests)
        throw new Error(`statuses ${JSON.stringify([...res.statuses])}`);
      s.cpu.push(((c1 - c0) * 1e6) / res.requests);
      s.rps.push(res.rps);
      s.etcd.push(((e1 - e0) * 1e6) / res.requests);
      console.log(
        `round ${r + 1} ${s.name}: ${Math.round(res.rps)}/s arbiter ${s.cpu.at(-1)!.toFixed(1)} µs/answer etcd ${s.etcd.at(-1)!.toFixed(1)} load ${loadavg()[0]!.toFixed(1)}`,
      );
    }
  }
  for (const s of sides)
    console.log(
      `MEDIAN ${s.name}: arbiter ${median(s.cpu).toFixed(1)} µs/answer (min ${Math.min(...s.cpu).toFixed(1)}), ${Math.round(median(s.rps))}/s, etcd ${median(s.etcd).toFixed(1)} µs/answer; load ${l0.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}`,
    );
} finally {
  await Promise.all([a.stop(), b.stop()]);
  await cluster.stop();
}
