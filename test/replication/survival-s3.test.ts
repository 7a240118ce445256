/**
 * Survival copies in an S3-compatible bucket, against a real S3 server on 127.0.0.1 (s3rver, its
 * filesystem store; it checks the access key, the test's front checks the signature), with every
 * request it received recorded on the way in:
 * `hq standby snapshot --survival` sends the subset while the arbiter is down, every PUT asks for
 * server-side encryption, no secret reaches the bucket, each tier keeps its newest N, `hq standby
 * verify --s3` reads the copy back and finds an object corrupted on the server's disk. Then the
 * config's refusals (credentials by name, before anything else) and the AWS credential chain.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { standbyCommand } from '../../apps/agent/src/cli/standby.js';
import { awsIdentity, pushSurvivalS3, S3Bucket } from '../../apps/agent/src/replication/survival-s3.js';
import { resolveReplication, validateReplication, type S3Target } from '../../apps/agent/src/replication/config.js';
import { ConfigError } from '@hq/runtime/config-file';
import { tmp, write } from './helpers.js';

interface S3rverInstance {
  configureBuckets(): Promise<void>;
  callback(): (req: unknown, res: unknown) => void;
}
const S3rver = createRequire(import.meta.url)('s3rver') as new (o: object) => S3rverInstance;

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

const rfc3986 = (v: string) =>
  encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

/**
 * s3rver checks the access key but not the signature: this checks it, written from the SigV4
 * description apart from the client's signer, so a request AWS would refuse is refused here too.
 */
function signatureProblem(method: string, url: string, headers: IncomingHttpHeaders, secret: string): string | null {
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(
      String(headers['authorization']),
    );
  if (m === null) return 'no SigV4 Authorization header';
  const [, , day, region, signed, signature] = m as unknown as [string, string, string, string, string, string];
  const names = signed.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date') || !names.includes('x-amz-content-sha256'))
    return 'host, x-amz-date or x-amz-content-sha256 not signed';
  const [rawPath, rawQuery = ''] = url.split('?') as [string, string?];
  const path = rawPath
    .split('/')
    .map((seg) => rfc3986(decodeURIComponent(seg)))
    .join('/');
  const query =
    rawQuery === ''
      ? ''
      : rawQuery
          .split('&')
          .map((kv) => kv.split('=').map((x) => rfc3986(decodeURIComponent(x ?? ''))) as [string, string])
          .map(([k, v = '']) => `${k}=${v}`)
          .sort()
          .join('&');
  const canonical = [
    method,
    path,
    query,
    ...names.map(
      (n) =>
        `${n}:${String(headers[n] ?? '')
          .trim()
          .replace(/\s+/g, ' ')}`,
    ),
    '',
    signed,
    String(headers['x-amz-content-sha256']),
  ].join('\n');
  const scope = `${day}/${region}/s3/aws4_request`;
  const toSign = [
    'AWS4-HMAC-SHA256',
    String(headers['x-amz-date']),
    scope,
    createHash('sha256').update(canonical).digest('hex'),
  ].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), 's3'), 'aws4_request');
  return hmac(key, toSign).toString('hex') === signature ? null : 'signature does not match';
}

/** s3rver on 127.0.0.1 with one bucket; `seen` is every request it was sent. Its keys: S3RVER/S3RVER. */
async function s3server(
  t: { teardown(fn: () => unknown): void },
  dir: string,
): Promise<{ endpoint: string; seen: Seen[]; object: (key: string) => string }> {
  const server = new S3rver({
    silent: true,
    directory: dir,
    configureBuckets: [{ name: 'hq-survival' }],
    vhostBuckets: false,
  });
  await server.configureBuckets();
  const handle = server.callback();
  const seen: Seen[] = [];
  const http = createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const problem = signatureProblem(req.method ?? '', req.url ?? '', req.headers, 'S3RVER');
    if (problem !== null) {
      req.resume();
      res
        .writeHead(403, { 'content-type': 'application/xml' })
        .end(
          `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>${problem}</Message></Error>`,
        );
      return;
    }
    handle(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => http.close(resolve)));
  const port = (http.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    seen,
    object: (key) => join(dir, 'hq-survival', `${key}._S3rver_object`),
  };
}

const KEYS = {
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
  AWS_CONFIG_FILE: '/nonexistent',
};
const T0 = Date.parse('2026-12-01T07:00:00.000Z');

async function hq(
  argv: string[],
  env: NodeJS.ProcessEnv,
  now?: () => number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await standbyCommand(argv, {
    stdout: (s) => {
      stdout += s;
    },
    stderr: (s) => {
      stderr += s;
    },
    env: { ...env, HQ_CONFIG: '', HOME: '/nonexistent' },
    ...(now === undefined ? {} : { now }),
  });
  return { code, stdout, stderr };
}

function setup(base: string, s3: { [k: string]: unknown }): { file: string; app: string } {
  const app = join(base, 'app');
  const hqDir = join(base, 'hq');
  write(hqDir, 'token', `${'d'.repeat(64)}\n`);
  chmodSync(join(hqDir, 'token'), 0o600);
  const file = join(base, 'agent.json');
  writeFileSync(
    file,
    JSON.stringify({
      hostName: 'mbp',
      stateDir: hqDir,
      // Nothing listens there: the arbiter's machine is lost, the bucket must still get the copy.
      arbiterUrl: 'http://127.0.0.1:9',
      tailscaleBin: '',
      replication: {
        stateDir: app,
        standbyDir: join(base, 'standby'),
        outboxDir: join(base, 'outbox'),
        plan: { files: [{ path: 'config.json' }], dirs: [{ path: 'decisions', survival: true }] },
        survival: { s3 },
      },
    }),
  );
  write(app, 'config.json', '{}');
  write(app, 'decisions/keep.md', 'keep\n');
  write(app, 'decisions/notes/empty.md', '');
  for (const secret of [
    'decisions/api-token.txt',
    'decisions/auth.json',
    'decisions/deploy.pem',
    'decisions/secrets/x.md',
    'decisions/.env',
  ])
    write(app, secret, 'shh');
  return { file, app };
}

const puts = (seen: readonly Seen[]) => seen.filter((s) => s.method === 'PUT');
const keyOf = (s: Seen) => decodeURIComponent(new URL(s.url, 'http://x').pathname).replace(/^\/hq-survival\//, '');

t.test(
  'the survival subset goes to the bucket encrypted while the arbiter is down, keeps N and verifies',
  async (t) => {
    const base = tmp(t);
    const s3 = await s3server(t, join(base, 's3'));
    const { file, app } = setup(base, {
      bucket: 'hq-survival',
      prefix: 'home/hq',
      endpoint: s3.endpoint,
      keep: { core: 2 },
    });

    const r1 = await hq(
      ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
      { ...KEYS, HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
      () => T0,
    );
    t.equal(r1.code, 3, `the arbiter unreachable makes it exit 3 (${r1.stderr})`);
    const out1 = JSON.parse(r1.stdout) as {
      survivalCopy: { ok: boolean };
      survivalS3: { ok: boolean; files: number; pruned: string[] };
    };
    t.equal(out1.survivalCopy.ok, false, 'the arbiter did not take the copy');
    t.match(out1.survivalS3, { ok: true, files: 2, pruned: [] }, 'the bucket took the two survival files');

    const sent = puts(s3.seen);
    t.same(
      sent.map(keyOf).sort(),
      [
        'home/hq/core/20261201T070000Z/MANIFEST.json',
        'home/hq/core/20261201T070000Z/SHA256SUMS',
        'home/hq/core/20261201T070000Z/files/decisions/keep.md',
        'home/hq/core/20261201T070000Z/files/decisions/notes/empty.md',
      ],
      'the files, their sums and the manifest went up, and nothing else: no secret, no item not marked survival',
    );
    t.ok(
      sent.every((s) => s.headers['x-amz-server-side-encryption'] === 'AES256'),
      'every PUT the server received asked for server-side encryption (AES256)',
    );
    t.ok(
      sent.every((s) => /x-amz-server-side-encryption/.test(String(s.headers['authorization']))),
      'and the encryption header is signed, so nothing on the way can strip it',
    );
    t.equal(
      keyOf(sent.at(-1) as Seen),
      'home/hq/core/20261201T070000Z/MANIFEST.json',
      'the manifest went last: it publishes the generation',
    );
    const keep = sent.find((s) => keyOf(s).endsWith('keep.md')) as Seen;
    t.equal(
      keep.headers['x-amz-content-sha256'],
      createHash('sha256').update('keep\n').digest('hex'),
      "the file's sha256 rides the request, so the server refuses a body changed on the way",
    );
    t.equal(
      readFileSync(s3.object('home/hq/core/20261201T070000Z/files/decisions/keep.md'), 'utf8'),
      'keep\n',
      'the server stored the file as it is',
    );
    t.notOk(
      s3.seen.some((s) => /token|auth\.json|\.pem|secrets|\.env|config\.json/.test(keyOf(s))),
      'no request ever named a secret or config.json',
    );

    write(app, 'decisions/keep.md', 'keep 2\n');
    const r2 = await hq(
      ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival'],
      { ...KEYS, HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
      () => T0 + 1000,
    );
    t.match(r2.stdout, /survival arbiter failed: .*, s3 ok \(2 files\) · /, 'the text summary names both targets');
    // An unfinished push of an older generation (files, no manifest) is cleared with the pruning.
    const id = await awsIdentity({}, KEYS);
    if ('problem' in id) throw new Error(id.problem);
    const target = resolveReplication(
      validateReplication({
        stateDir: app,
        survival: { s3: { bucket: 'hq-survival', prefix: 'home/hq', endpoint: s3.endpoint } },
      }),
      base,
    ).survivalS3 as S3Target;
    const bucket = await S3Bucket.open(target, id, 10);
    await bucket.expect('PUT', 'home/hq/core/20261130T000000Z/files/decisions/keep.md', {
      body: 'old',
      bytes: 3,
      sha256: createHash('sha256').update('old').digest('hex'),
    });
    write(app, 'decisions/keep.md', 'keep 3\n');
    const r3 = await hq(
      ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
      { ...KEYS, HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
      () => T0 + 2000,
    );
    t.same(
      (JSON.parse(r3.stdout) as { survivalS3: { pruned: string[] } }).survivalS3.pruned,
      ['20261130T000000Z', '20261201T070000Z'],
      'keep 2: the oldest published copy and the unfinished one are deleted',
    );
    const left = (await bucket.list('home/hq/core/')).keys;
    t.same(
      [...new Set(left.map((k) => k.split('/')[3]))],
      ['20261201T070001Z', '20261201T070002Z'],
      'the bucket keeps the two newest generations of the tier',
    );
    t.notOk(
      existsSync(s3.object('home/hq/core/20261201T070000Z/MANIFEST.json')),
      'the pruned manifest is gone from the server',
    );

    const stale = await hq(
      ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
      { ...KEYS, HQ_GENERATION: '2', HQ_HOLDER: 'mbp' },
      () => T0 + 5000,
    );
    t.equal(stale.code, 1, 'a copy from an older lease generation exits 1');
    t.match(
      JSON.parse(stale.stdout),
      { survivalS3: { ok: false, kind: 'refused', error: 'HQ_ERR_STALE_GENERATION' } },
      'refused as stale, as the arbiter would',
    );
    t.notOk(
      s3.seen.some((s) => s.method === 'PUT' && keyOf(s).includes('20261201T070005Z')),
      'and nothing of it was put',
    );
    const v = await hq(['verify', '--s3', '--config', file], KEYS);
    t.equal(v.code, 0, `verify --s3 reads the newest copy back (${v.stderr})`);
    t.match(
      v.stdout,
      /^hq-standby verify s3:\/\/hq-survival\/home\/hq core=20261201T070002Z\(mbp · ok 2\/2 · 2 kept\) OK\n$/,
      'and says so on one line',
    );
    writeFileSync(s3.object('home/hq/core/20261201T070002Z/files/decisions/keep.md'), 'keep 3 but rotten\n');
    const bad = await hq(['verify', '--s3', '--config', file, '--json'], KEYS);
    t.equal(bad.code, 1, 'an object corrupted on the server fails verify');
    t.match(
      JSON.parse(bad.stdout),
      { ok: false, reasons: ['core: checksum mismatch: decisions/keep.md'] },
      'naming the file',
    );
    const noTier = await hq(['verify', '--s3', '--tier', 'big', '--config', file], KEYS);
    t.equal(noTier.code, 1, 'a tier asked for without a copy fails');
    t.match(noTier.stdout, /big: no published generation in the bucket/, 'and says there is none');
    const both = await hq(['verify', '--s3', '--standby', base, '--config', file], KEYS);
    t.same(
      [both.code, both.stderr],
      [2, 'hq standby verify: --s3 checks the bucket of replication.survival.s3; it takes no --standby\n'],
      '--s3 with --standby is a usage error',
    );
  },
);

t.test('aws:kms names its key on every PUT; credentials refused or missing stop the copy', async (t) => {
  const base = tmp(t);
  const s3 = await s3server(t, join(base, 's3'));
  const { file } = setup(base, { bucket: 'hq-survival', endpoint: s3.endpoint, sse: 'aws:kms', kmsKeyId: 'alias/hq' });
  const r = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { ...KEYS, HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
    () => T0,
  );
  t.equal(
    (JSON.parse(r.stdout) as { survivalS3: { ok: boolean } }).survivalS3.ok,
    true,
    `the copy went up (${r.stdout})`,
  );
  t.ok(
    puts(s3.seen).every(
      (s) =>
        s.headers['x-amz-server-side-encryption'] === 'aws:kms' &&
        s.headers['x-amz-server-side-encryption-aws-kms-key-id'] === 'alias/hq',
    ),
    'every PUT asked for aws:kms with the configured key',
  );
  const before = s3.seen.length;
  const wrong = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { ...KEYS, AWS_ACCESS_KEY_ID: 'AKUNKNOWN', HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
    () => T0 + 1000,
  );
  t.equal(wrong.code, 1, 'a bucket that refuses the credentials makes the snapshot exit 1');
  t.match(
    JSON.parse(wrong.stdout),
    { survivalS3: { ok: false, kind: 'refused', status: 403, error: 'InvalidAccessKeyId' } },
    'with the S3 error code',
  );
  t.ok(s3.seen.length > before, 'the server was asked');
  const forged = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    { ...KEYS, AWS_SECRET_ACCESS_KEY: 'wrong', HQ_GENERATION: '3', HQ_HOLDER: 'mbp' },
    () => T0 + 3000,
  );
  t.match(
    JSON.parse(forged.stdout),
    { survivalS3: { ok: false, kind: 'refused', status: 403, error: 'SignatureDoesNotMatch' } },
    'a wrong secret key is refused by the signature check',
  );
  const after = s3.seen.length;
  const none = await hq(
    ['snapshot', '--tier', 'core', '--config', file, '--no-push', '--survival', '--json'],
    {
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
      AWS_CONFIG_FILE: '/nonexistent',
      HQ_GENERATION: '3',
      HQ_HOLDER: 'mbp',
    },
    () => T0 + 2000,
  );
  t.equal(none.code, 1, 'no credentials at all: exit 1');
  t.match(
    (JSON.parse(none.stdout) as { survivalS3: { message: string } }).survivalS3.message,
    /^no AWS credentials: set AWS_ACCESS_KEY_ID/,
    'saying where credentials come from',
  );
  t.equal(s3.seen.length, after, 'and nothing was sent');
});

t.test('a secret in the subset refuses the whole copy before anything is sent', async (t) => {
  const base = tmp(t);
  const s3 = await s3server(t, join(base, 's3'));
  const dir = join(base, 'gen');
  write(dir, 'decisions/keep.md', 'keep\n');
  write(dir, 'notes/backup-key.txt', 'shh');
  const entry = (path: string, data: string) => ({
    path,
    bytes: data.length,
    sha256: createHash('sha256').update(data).digest('hex'),
    kind: 'file' as const,
    reused: false,
  });
  const manifest = {
    generation: '20261201T070000Z',
    tier: 'core' as const,
    createdAt: '2026-12-01T07:00:00.000Z',
    source: dir,
    host: 'mbp',
    leaseGeneration: 3,
    holder: 'mbp',
    entries: [entry('decisions/keep.md', 'keep\n'), entry('notes/backup-key.txt', 'shh')],
  };
  const target = resolveReplication(
    validateReplication({
      stateDir: join(base, 'state'),
      survival: { s3: { bucket: 'hq-survival', endpoint: s3.endpoint } },
    }),
    base,
  ).survivalS3 as S3Target;
  // The configured patterns say nothing: the default secret names (the arbiter's) still apply.
  const r = await pushSurvivalS3({
    dir,
    manifest,
    entries: manifest.entries,
    target,
    secretPatterns: [],
    timeoutSeconds: 10,
    env: KEYS,
  });
  t.same(
    r,
    {
      ok: false,
      kind: 'refused',
      status: null,
      error: null,
      message: 'notes/backup-key.txt is a secret and never goes to a survival copy',
    },
    'refused, naming the secret',
  );
  const custom = await pushSurvivalS3({
    dir,
    manifest,
    entries: [entry('decisions/keep.md', 'keep\n')],
    target,
    secretPatterns: [/keep/],
    timeoutSeconds: 10,
    env: KEYS,
  });
  t.match(
    custom,
    { ok: false, message: 'decisions/keep.md is a secret and never goes to a survival copy' },
    'so do the configured patterns',
  );
  t.equal(s3.seen.length, 0, 'the server never heard of it');
});

t.test('the config refuses credentials by name and fills the defaults', async (t) => {
  const block = (s3: { [k: string]: unknown }) => ({
    stateDir: '/srv/app',
    survival: { s3: { bucket: 'hq-survival', ...s3 } },
  });
  const refused = (s3: { [k: string]: unknown }): string => {
    try {
      resolveReplication(validateReplication(block(s3)), '/srv/hq');
      return 'accepted';
    } catch (err) {
      return err instanceof ConfigError ? err.message : `threw ${(err as Error).message}`;
    }
  };
  const creds =
    "credentials never go in hq's config; give them as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile (AWS_PROFILE, ~/.aws/credentials)";
  for (const [name, s3, line] of [
    ['an access key', { accessKeyId: 'AKIA…' }, `replication.survival.s3.accessKeyId: ${creds}`],
    ['a secret key', { secretAccessKey: 'x' }, `replication.survival.s3.secretAccessKey: ${creds}`],
    ['a session token', { sessionToken: 'x' }, `replication.survival.s3.sessionToken: ${creds}`],
    ['the CLI spelling', { aws_secret_access_key: 'x' }, `replication.survival.s3.aws_secret_access_key: ${creds}`],
    [
      'a password in the endpoint',
      { endpoint: 'https://key:secret@s3.example.net' },
      "replication.survival.s3.endpoint: holds a user name or password; credentials never go in hq's config (use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile)",
    ],
    ['an unknown key', { colour: 'blue' }, 'replication.survival.s3.colour: is not a known key'],
    [
      'a KMS key without aws:kms',
      { kmsKeyId: 'alias/hq' },
      'replication.survival.s3.kmsKeyId: only with sse "aws:kms"',
    ],
    ['no encryption', { sse: 'none' }, 'replication.survival.s3.sse: '],
    ['an escaping prefix', { prefix: 'a/../b' }, 'replication.survival.s3.prefix: '],
    [
      'an endpoint that is no URL',
      { endpoint: 'minio:9000' },
      'replication.survival.s3.endpoint: must be an http or https URL',
    ],
  ] as const) {
    t.match(
      refused(s3),
      new RegExp(`^${line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
      `${name} is refused with one line`,
    );
  }
  const aws = resolveReplication(validateReplication(block({ prefix: '/hq/' })), '/srv/hq').survivalS3;
  t.same(
    aws,
    { bucket: 'hq-survival', prefix: 'hq', forcePathStyle: false, sse: 'AES256', keep: { core: 36, big: 8, obs: 8 } },
    'AWS S3: AES256, virtual-host style, the arbiter keep numbers',
  );
  const minio = resolveReplication(
    validateReplication(block({ endpoint: 'http://127.0.0.1:9000', keep: { big: 3 } })),
    '/srv/hq',
  ).survivalS3;
  t.match(
    minio,
    { forcePathStyle: true, keep: { core: 36, big: 3, obs: 8 } },
    'a custom endpoint is reached by path; keep per tier',
  );
  t.equal(
    resolveReplication(validateReplication({ stateDir: '/srv/app' }), '/srv/hq').survivalS3,
    null,
    'no survival block: the arbiter only',
  );
});

t.test('credentials come from the environment, else the profile files; the region likewise', async (t) => {
  const base = tmp(t);
  const credFile = write(
    base,
    'aws/credentials',
    '[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = sdefault\n\n[backup]\naws_access_key_id=AKBACKUP\naws_secret_access_key=sbackup\naws_session_token=tok\n',
  );
  const confFile = write(
    base,
    'aws/config',
    '[default]\nregion = eu-west-1\n\n[profile backup]\nregion = eu-central-1\n\n[profile only-config]\naws_access_key_id = AKCONF\naws_secret_access_key = sconf\n',
  );
  const files = { AWS_SHARED_CREDENTIALS_FILE: credFile, AWS_CONFIG_FILE: confFile };
  t.match(
    await awsIdentity(
      {},
      { ...files, AWS_ACCESS_KEY_ID: 'AKENV', AWS_SECRET_ACCESS_KEY: 's', AWS_REGION: 'us-west-2' },
    ),
    { credentials: { accessKeyId: 'AKENV' }, region: 'us-west-2', source: 'environment' },
    'the environment first',
  );
  t.match(
    await awsIdentity({}, files),
    { credentials: { accessKeyId: 'AKDEFAULT', secretAccessKey: 'sdefault' }, region: 'eu-west-1' },
    'else the default profile, its region from the config file',
  );
  t.match(
    await awsIdentity({}, { ...files, AWS_PROFILE: 'backup' }),
    { credentials: { accessKeyId: 'AKBACKUP', sessionToken: 'tok' }, region: 'eu-central-1' },
    'AWS_PROFILE picks the profile',
  );
  t.match(
    await awsIdentity({ region: 'ap-south-1' }, { ...files, AWS_PROFILE: 'only-config' }),
    { credentials: { accessKeyId: 'AKCONF' }, region: 'ap-south-1' },
    "keys in the config file's profile; the target's region wins",
  );
  t.match(
    await awsIdentity({}, { ...files, AWS_PROFILE: 'missing' }),
    { problem: /^no AWS credentials: .*AWS_PROFILE=missing/ },
    'an unknown profile finds none',
  );
  t.match(
    await awsIdentity({}, { HOME: join(base, 'nohome') }),
    { problem: /nohome\/\.aws\/credentials/ },
    'the default files are under ~/.aws',
  );
});
