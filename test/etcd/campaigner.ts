/**
 * A campaigner in its own process, for election.test.ts: campaigns, says when elected, then
 * before each of its "decisions" (every 20 ms) asks `stillElected()` and prints the answer with
 * its wall time — a process killed or stopped by the test is a real one.
 * argv: endpoints (JSON list), prefix, value, ttlSeconds, marginSeconds. SIGTERM: resign, exit.
 */
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { Election } from '../../apps/arbiter/src/store/etcd/election.js';

const [endpoints = '[]', prefix = 'hq', value = 'child', ttl = '3', margin = '1'] = process.argv.slice(2);
const client = new EtcdClient({ endpoints: JSON.parse(endpoints) as string[], dialTimeoutMs: 1000, requestTimeoutMs: 2000 });
const election = new Election(client, { prefix, value, ttlSeconds: Number(ttl), marginSeconds: Number(margin) });
const say = (o: Record<string, unknown>): boolean => process.stdout.write(`${JSON.stringify({ ...o, wall: Date.now() })}\n`);

process.once('SIGTERM', () => {
  void election.resign().finally(() => process.exit(0));
});

say({ event: 'campaigning', pid: process.pid });
const r = await election.campaign();
if (!r.elected) {
  say({ event: 'not-elected', reason: r.reason });
  process.exit(1);
}
say({ event: 'elected', key: r.term.key, lease: String(r.term.lease) });
void r.term.ended.then((why) => say({ event: 'ended', why }));
setInterval(() => say({ event: 'check', ok: election.stillElected() }), 20);
