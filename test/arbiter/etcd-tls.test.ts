/**
 * `store.tls`: the arbiter reaches etcd members that serve their client URLs over TLS and ask
 * for a client certificate (`--client-cert-auth`), with a CA, a server and a client certificate
 * made here by openssl. The arbiter is elected and decides over https; a client without the
 * client certificate is refused by etcd, and one that does not trust the members' CA refuses
 * them (certificates are verified, never skipped). A key file others can read, a missing file,
 * http:// beside tls: refused at start with one line naming the key.
 */
import t from 'tap';
import pino from 'pino';
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { validateConfig } from '../../apps/arbiter/src/config.js';
import '../../apps/arbiter/src/config-checker.js';
import { EtcdClient } from '../../apps/arbiter/src/store/etcd/client.js';
import { createRuntime } from '../../apps/arbiter/src/server/runtime.js';
import { missingTool } from '../missing-tool.js';
import { etcdMembers, onPath } from '../etcd/members.js';
import { sleep } from '../system/harness.js';
import { AGENT_REQUEST_TIMEOUT, FakeProber, fastConfig } from './helper.js';

function openssl(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA. */
function certificates(
  dir: string,
  name = 'ca',
): { ca: string; serverCert: string; serverKey: string; clientCert: string; clientKey: string } {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=hq-test-${name}`,
  ]);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const who of ['server', 'client']) {
    openssl(dir, ['req', ...ec, '-keyout', `${who}.key`, '-out', `${who}.csr`, '-subj', `/CN=hq-${who}`]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${who}.csr`,
      '-CA',
      `${name}.pem`,
      '-CAkey',
      `${name}.key`,
      '-CAcreateserial',
      '-out',
      `${who}.pem`,
      '-days',
      '2',
      '-extfile',
      `${who}.ext`,
    ]);
    chmodSync(join(dir, `${who}.key`), 0o600);
  }
  return {
    ca: join(dir, `${name}.pem`),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
  };
}

t.test('the arbiter on etcd over TLS with client certificates', async (t) => {
  if (onPath('openssl') === null) return missingTool(t, 'no openssl on PATH (Debian: apt-get install openssl)');
  const dir = t.testdir({ other: {} });
  const c = certificates(dir);
  const etcd = await etcdMembers(t, {
    size: 1,
    tls: {
      certFile: c.serverCert,
      keyFile: c.serverKey,
      caFile: c.ca,
      clientCertAuth: true,
      client: {
        ca: readFileSync(c.ca, 'utf8'),
        cert: readFileSync(c.clientCert, 'utf8'),
        key: readFileSync(c.clientKey, 'utf8'),
      },
    },
  });
  if (etcd === null) return;
  t.match(etcd.endpoints[0], /^https:\/\/127\.0\.0\.1:\d+$/, 'the member serves https://');

  const config = fastConfig(join(dir, 'var'), {
    store: {
      kind: 'etcd',
      endpoints: etcd.endpoints,
      prefix: '/hq-tls',
      dialTimeoutSeconds: 1,
      requestTimeoutSeconds: 2,
      electionTtlSeconds: 5,
      advertiseUrl: 'http://127.0.0.1:1',
      tls: { caFile: c.ca, certFile: c.clientCert, keyFile: c.clientKey },
    },
  });
  t.match(
    config.store,
    { kind: 'etcd', tls: { caFile: c.ca, certFile: c.clientCert, keyFile: c.clientKey } },
    'the config keeps the three files',
  );
  const rt = await createRuntime({
    config,
    log: pino({ level: 'silent' }),
    prober: new FakeProber(),
    processMetrics: false,
    elect: true,
    ensureAdmin: false,
  });
  t.teardown(() => rt.close());
  const app = await rt.app();
  rt.start();
  for (let i = 0; i < 200 && rt.leadership?.mayDecide() !== true; i++) await sleep(50);
  t.equal(rt.leadership?.mayDecide(), true, 'elected over TLS');
  const { issueToken } = await import('../../apps/arbiter/src/auth.js');
  const token = await issueToken(rt.store, 'mbp', 'member', Date.now() / 1000);
  const hb = await app.inject({
    method: 'POST',
    url: '/v1/heartbeat',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ host: 'mbp', seenGeneration: 0, requestTimeoutSeconds: AGENT_REQUEST_TIMEOUT }),
  });
  t.equal(hb.statusCode, 200, `a heartbeat is decided and written over TLS (${hb.body.slice(0, 120)})`);

  // Without the client certificate etcd refuses the connection.
  const noCert = new EtcdClient({
    endpoints: etcd.endpoints,
    dialTimeoutMs: 1000,
    requestTimeoutMs: 2000,
    tls: { ca: readFileSync(c.ca, 'utf8') },
  });
  t.teardown(() => noCert.close());
  const e1 = await noCert.get('/hq-tls/state').then(
    () => null,
    (err: Error) => err.message,
  );
  t.match(
    e1,
    /certificate|handshake|alert|ECONNRESET|socket/i,
    `a client without the client certificate is refused (${e1})`,
  );
  // A client that does not trust the members' CA refuses them.
  const other = certificates(join(dir, 'other'), 'other-ca');
  const wrongCa = new EtcdClient({
    endpoints: etcd.endpoints,
    dialTimeoutMs: 1000,
    requestTimeoutMs: 2000,
    tls: {
      ca: readFileSync(other.ca, 'utf8'),
      cert: readFileSync(c.clientCert, 'utf8'),
      key: readFileSync(c.clientKey, 'utf8'),
    },
  });
  t.teardown(() => wrongCa.close());
  const e2 = await wrongCa.get('/hq-tls/state').then(
    () => null,
    (err: Error) => err.message,
  );
  t.match(
    e2,
    /UNABLE_TO_VERIFY|self.signed|certificate/i,
    `a member whose certificate another CA signed is refused (${e2})`,
  );
  // With the right files, the same client reads the state the arbiter wrote.
  const good = new EtcdClient({
    endpoints: etcd.endpoints,
    dialTimeoutMs: 1000,
    requestTimeoutMs: 2000,
    tls: {
      ca: readFileSync(c.ca, 'utf8'),
      cert: readFileSync(c.clientCert, 'utf8'),
      key: readFileSync(c.clientKey, 'utf8'),
    },
  });
  t.teardown(() => good.close());
  t.ok((await good.get('/hq-tls/state')).kv !== undefined, 'and with them the state is read');
});

t.test('store.tls that cannot work is refused at start, one line naming the key', async (t) => {
  if (onPath('openssl') === null) return missingTool(t, 'no openssl on PATH (Debian: apt-get install openssl)');
  const dir = t.testdir();
  const c = certificates(dir);
  chmodSync(c.clientKey, 0o644);
  const r = validateConfig({
    store: {
      kind: 'etcd',
      endpoints: ['https://127.0.0.1:2379'],
      tls: { caFile: c.ca, certFile: c.clientCert, keyFile: c.clientKey },
    },
  });
  t.match(
    r,
    { ok: false, key: 'store.tls.keyFile', message: /is readable by others \(mode 644\): chmod 600 it/ },
    'a key file others can read',
  );
  chmodSync(c.clientKey, 0o600);
  const rel = validateConfig(
    { store: { kind: 'etcd', endpoints: ['https://127.0.0.1:2379'], tls: { caFile: 'ca.pem' } } },
    dir,
  );
  t.match(
    rel,
    { ok: true, config: { store: { tls: { caFile: c.ca, certFile: null, keyFile: null } } } },
    'a relative path is resolved like dataDir, a CA alone is enough',
  );
  t.throws(
    () => new EtcdClient({ endpoints: ['http://127.0.0.1:2379'], tls: { ca: 'x' } }),
    /is http:\/\/ but store\.tls is given/,
    'the client refuses http:// with tls too',
  );
});
