#!/usr/bin/env node
// Which S3 client for survival copies: install footprint and cold start (import + the first
// signed PUT, server-side encrypted, against s3rver on 127.0.0.1), each candidate in a fresh
// process, RUNS times, medians. Candidates are installed into a scratch folder with npm (not into
// the project). `node bench/s3-client.mjs` (RUNS=5); prints a Markdown table.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const RUNS = Number(process.env.RUNS ?? 5);
const root = join(import.meta.dirname, '..');
const scratch = mkdtempSync(join(tmpdir(), 'hq-s3-bench-'));
const put = `const body = 'hello'; const url = process.env.S3_URL;`;

const candidates = {
  'aws4 + undici (chosen)': {
    install: ['aws4'],
    // undici is the project's own dependency: the snapshot command has loaded it already.
    pre: `const { request } = await import(${JSON.stringify(join(root, 'node_modules/undici/index.js'))});`,
    code: `const aws4 = (await import('aws4')).default; const t1 = performance.now();
      const u = new URL(url + '/bench/k-aws4'); const sha = (await import('node:crypto')).createHash('sha256').update(body).digest('hex');
      const o = aws4.sign({ host: u.host, path: u.pathname, method: 'PUT', service: 's3', region: 'us-east-1', headers: { 'x-amz-server-side-encryption': 'AES256', 'x-amz-content-sha256': sha } }, { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
      const r = await request(u, { method: 'PUT', headers: o.headers, body }); await r.body.text(); if (r.statusCode !== 200) throw new Error(String(r.statusCode));`,
  },
  aws4fetch: {
    install: ['aws4fetch'],
    pre: '',
    code: `const { AwsClient } = await import('aws4fetch'); const t1 = performance.now();
      const c = new AwsClient({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', service: 's3', region: 'us-east-1' });
      const r = await c.fetch(url + '/bench/k-aws4fetch', { method: 'PUT', headers: { 'x-amz-server-side-encryption': 'AES256' }, body }); await r.text(); if (r.status !== 200) throw new Error(String(r.status));`,
  },
  minio: {
    install: ['minio'],
    pre: '',
    code: `const Minio = await import('minio'); const t1 = performance.now(); const u = new URL(url);
      const c = new Minio.Client({ endPoint: u.hostname, port: Number(u.port), useSSL: false, accessKey: 'S3RVER', secretKey: 'S3RVER', region: 'us-east-1', pathStyle: true });
      await c.putObject('bench', 'k-minio', Buffer.from(body), body.length, { 'x-amz-server-side-encryption': 'AES256' });`,
  },
  '@aws-sdk/client-s3 + credential-providers': {
    install: ['@aws-sdk/client-s3', '@aws-sdk/credential-providers'],
    pre: '',
    code: `const { S3Client, PutObjectCommand } = await import('@aws-sdk/client-s3'); const { fromNodeProviderChain } = await import('@aws-sdk/credential-providers'); const t1 = performance.now();
      process.env.AWS_ACCESS_KEY_ID = 'S3RVER'; process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
      const c = new S3Client({ region: 'us-east-1', endpoint: url, forcePathStyle: true, credentials: fromNodeProviderChain() });
      await c.send(new PutObjectCommand({ Bucket: 'bench', Key: 'k-sdk', Body: body, ServerSideEncryption: 'AES256' }));`,
  },
};

function du(dir) {
  let bytes = 0;
  let files = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (st === undefined) continue;
    if (st.isDirectory()) {
      const d = du(p);
      bytes += d.bytes;
      files += d.files;
    } else {
      bytes += st.size;
      files++;
    }
  }
  return { bytes, files };
}

const S3rver = createRequire(import.meta.url)(join(root, 'node_modules/s3rver'));
const server = new S3rver({
  port: 0,
  address: '127.0.0.1',
  silent: true,
  directory: join(scratch, 's3'),
  configureBuckets: [{ name: 'bench' }],
  vhostBuckets: false,
});
const { port } = await server.run();
const url = `http://127.0.0.1:${port}`;
const med = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const rows = [];
try {
  for (const [name, c] of Object.entries(candidates)) {
    const dir = join(scratch, name.replace(/[^a-z0-9]+/gi, '-'));
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), '{"name":"bench","version":"1.0.0","type":"module","private":true}');
    execFileSync('npm', ['i', '--no-audit', '--no-fund', '--silent', ...c.install], { cwd: dir, stdio: 'ignore' });
    const packages =
      execFileSync('npm', ['ls', '--all', '--parseable'], { cwd: dir, encoding: 'utf8' }).trim().split('\n').length - 1;
    const size = du(join(dir, 'node_modules'));
    writeFileSync(
      join(dir, 'b.mjs'),
      `${put}\n${c.pre}\nconst t0 = performance.now();\n${c.code}\nconst t2 = performance.now();\nconsole.log(JSON.stringify({ importMs: t1 - t0, putMs: t2 - t1, rss: process.memoryUsage().rss }));\n`,
    );
    const runs = [];
    for (let i = 0; i < RUNS; i++) {
      // Asynchronously: the server runs in this process and must answer meanwhile.
      const r = await promisify(execFile)(process.execPath, ['b.mjs'], {
        cwd: dir,
        env: { ...process.env, S3_URL: url, NODE_OPTIONS: '' },
        encoding: 'utf8',
      });
      runs.push(JSON.parse(r.stdout.trim().split('\n').at(-1)));
    }
    rows.push(
      `| ${name} | ${packages} | ${(size.bytes / 1024).toFixed(0)} KiB in ${size.files} files | ${med(runs.map((r) => r.importMs)).toFixed(0)} ms | ${med(runs.map((r) => r.putMs)).toFixed(0)} ms | ${med(runs.map((r) => r.importMs + r.putMs)).toFixed(0)} ms | ${(med(runs.map((r) => r.rss)) / 1048576).toFixed(1)} MiB |`,
    );
  }
} finally {
  await server.close();
  rmSync(scratch, { recursive: true, force: true });
}
console.log(
  '| client | packages | installed | import | first PUT | cold start | RSS after |\n|---|---|---|---|---|---|---|',
);
console.log(rows.join('\n'));
