/**
 * `npx tsx bench/etcd-txn.ts`: what one etcd member takes of txns shaped like the
 * etcd store's group commit, with no arbiter in front — the question it answers is whether
 * sending two groups at once (txns in flight side by side) would give etcd more to do per
 * second than one group at a time. Each txn is the group's write: the state (900 bytes), the
 * event sequence and one events key of N events (120 bytes each, a heartbeat's `renewed`),
 * through the JSON gateway over undici like the store's. For each (depth, N): `depth` loops,
 * each sending its next txn when the last is answered, for `S` seconds (4); prints txns/s,
 * events/s and etcd's CPU per event and per txn (/proc). `R` repetitions of the whole list (2):
 * the machine's drift shows between them. `SHAPES="1x0,1x20,1x74"` (depth x events) replaces the
 * list, e.g. to see what the events' size costs etcd at depth 1.
 */
import { Pool } from 'undici';
import { cpuSeconds, machineLine, oneEtcdMember } from './lib.js';

const SECONDS = Number(process.env['S'] ?? 4);
const REPEAT = Number(process.env['R'] ?? 2);
/** (depth, events per txn): one group of 20 (what the arbiter sends under 32 connections), two of 10, two of 20, one of 32, two of 16. */
const SHAPES: ReadonlyArray<readonly [number, number]> = process.env['SHAPES']
  ? process.env['SHAPES'].split(',').map((s) => {
      const m = /^([1-9]\d*)x(\d+)$/.exec(s);
      if (m === null) {
        process.stderr.write(`bench/etcd-txn.ts: SHAPES: "${s}" is not DEPTHxEVENTS (e.g. 1x20)\n`);
        process.exit(2);
      }
      return [Number(m[1]), Number(m[2])] as const;
    })
  : [
      [1, 20],
      [2, 10],
      [2, 20],
      [1, 32],
      [2, 16],
    ];
const cluster = await oneEtcdMember('bench/etcd-txn.ts', 'hq-bench-txn');
const member = cluster.members[0]!;
const pool = new Pool(member.clientUrl, { connections: 8 });
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const state = b64('s'.repeat(900));

async function txn(id: number, events: string): Promise<void> {
  const body = JSON.stringify({
    compare: [],
    success: [
      { request_put: { key: b64('/bench/state'), value: state } },
      { request_put: { key: b64('/bench/events/seq'), value: b64(String(id)) } },
      { request_put: { key: b64(`/bench/events/e/${String(id).padStart(16, '0')}`), value: events } },
    ],
  });
  const r = await pool.request({ path: '/v3/kv/txn', method: 'POST', body });
  const text = await r.body.text();
  if (r.statusCode !== 200 || text.includes('"error"'))
    throw new Error(`etcd answered ${r.statusCode}: ${text.slice(0, 200)}`);
}

try {
  let id = 0;
  console.log(
    '| depth | events per txn | events bytes | txns/s | events/s | etcd CPU µs per event | etcd CPU µs per txn |\n|---:|---:|---:|---:|---:|---:|---:|',
  );
  for (let rep = 0; rep < REPEAT; rep++) {
    for (const [depth, n] of SHAPES) {
      // A txn of no events still puts the events key (one byte), as the shape of a write stays the same.
      const events = b64('e'.repeat(Math.max(1, n * 120)));
      let done = 0;
      const c0 = cpuSeconds(member.pid!);
      const t0 = performance.now();
      const end = t0 + SECONDS * 1000;
      await Promise.all(
        Array.from({ length: depth }, async () => {
          while (performance.now() < end) {
            await txn(++id, events);
            done++;
          }
        }),
      );
      const s = (performance.now() - t0) / 1000;
      const cpu = cpuSeconds(member.pid!) - c0;
      console.log(
        `| ${depth} | ${n} | ${n * 120} | ${Math.round(done / s)} | ${Math.round((done * n) / s)} | ${n === 0 ? '—' : ((cpu * 1e6) / (done * n)).toFixed(0)} | ${((cpu * 1e6) / done).toFixed(0)} |`,
      );
    }
  }
  console.log(
    `\n${new Date().toISOString()} — ${machineLine(`, etcd ${cluster.version} (one member), ${SECONDS} s per row`)}`,
  );
} finally {
  await pool.close();
  await cluster.stop();
}
