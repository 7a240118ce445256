/** Running tailscale as an argv with a deadline, the ping ⊕ health probe, and the MagicDNS look-up. */
import t from 'tap';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runFile } from '../../packages/runtime/src/exec.js';
import { healthOk, magicDnsSuffix, probe, tailnetHealthUrl, tailscalePing } from '../../packages/runtime/src/probe.js';

/** A fake tailscale: `ping … up` says pong, `status --json` prints `status`, `hang` never ends. */
function fakeTailscale(t: { teardown(fn: () => void): void }, status: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'hq-probe-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const bin = join(dir, 'tailscale');
  writeFileSync(
    bin,
    `#!/bin/sh
for last; do :; done
if [ "$1" = "hang" ]; then exec sleep 30; fi
if [ "$1" = "ping" ] && [ "$last" = "up" ]; then echo "pong from up (100.64.0.2) in 1ms"; exit 0; fi
if [ "$1" = "ping" ]; then echo "no reply"; exit 1; fi
if [ "$1" = "status" ]; then printf '%s\\n' '${status}'; exit 0; fi
exit 3
`,
    { mode: 0o755 },
  );
  return bin;
}

t.test('runFile runs an argv, never throws, and kills at the deadline', async (t) => {
  const bin = fakeTailscale(t, '{}');
  t.match(
    await runFile(bin, ['ping', 'up'], { timeoutMs: 5000 }),
    { ok: true, code: 0, stdout: /pong/, problem: null },
    'exit 0 is ok with its stdout',
  );
  t.match(
    await runFile(bin, ['other'], { timeoutMs: 5000 }),
    { ok: false, code: 3, problem: '3' },
    'an exit code is the problem',
  );
  t.match(
    await runFile(join(tmpdir(), 'no-such-tailscale'), [], { timeoutMs: 5000 }),
    { ok: false, code: 'ENOENT', problem: 'ENOENT' },
    'a missing program is ENOENT',
  );
  const t0 = Date.now();
  t.match(
    await runFile(bin, ['hang'], { timeoutMs: 300 }),
    { ok: false, problem: 'no answer within 0.3 s' },
    'an overrun is killed and named',
  );
  t.ok(Date.now() - t0 < 10_000, 'and does not wait for the program');
});

t.test('ping ⊕ health: reachable when either answers', async (t) => {
  const bin = fakeTailscale(t, '{}');
  const s = createServer((req, res) => {
    res.writeHead(req.url === '/v1/health' ? 200 : 503);
    res.end('{}');
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  const base = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  t.equal(await tailscalePing(bin, 'up', 2), true, 'pong is reachable');
  t.equal(await tailscalePing(bin, 'down', 2), false, 'no pong is not');
  t.equal(await tailscalePing('', 'up', 2), false, 'tailscaleBin "" never pings');
  t.equal(await healthOk(`${base}/v1/health`, 2), true, 'a 200 is healthy');
  t.equal(await healthOk(`${base}/other`, 2), false, 'anything else is not');
  t.equal(await healthOk(null, 2), false, 'no URL is not healthy');
  t.same(
    await probe('down', { tailscaleBin: bin, healthUrl: `${base}/v1/health`, timeoutSeconds: 2 }),
    { target: 'down', reachable: true, ping: false, health: true },
    'health alone makes it reachable',
  );
  t.same(
    await probe('down', { tailscaleBin: bin, healthUrl: null, timeoutSeconds: 2 }),
    { target: 'down', reachable: false, ping: false, health: false },
    'neither: unreachable',
  );
});

t.test('the MagicDNS suffix comes from tailscale status, without its trailing dot', async (t) => {
  t.same(
    await magicDnsSuffix(fakeTailscale(t, '{"MagicDNSSuffix":"tail1234.ts.net."}'), 2),
    { ok: true, suffix: 'tail1234.ts.net' },
    'the suffix',
  );
  t.match(
    await magicDnsSuffix(fakeTailscale(t, '{"BackendState":"Stopped"}'), 2),
    { ok: false, problem: /no MagicDNSSuffix/ },
    'none in the answer',
  );
  t.match(
    await magicDnsSuffix(fakeTailscale(t, 'not json'), 2),
    { ok: false, problem: /not JSON/ },
    'an answer that is not JSON',
  );
  t.match(
    await magicDnsSuffix(fakeTailscale(t, '{"MagicDNSSuffix":"a b"}'), 2),
    { ok: false, problem: /no MagicDNSSuffix/ },
    'a suffix that is no DNS name',
  );
  t.match(await magicDnsSuffix('', 2), { ok: false, problem: /tailscaleBin/ }, 'tailscaleBin "" asks nothing');
  t.equal(
    tailnetHealthUrl('node-b', 'tail1234.ts.net', 9000),
    'http://node-b.tail1234.ts.net:9000/v1/health',
    'the health URL takes the port it is given',
  );
});
