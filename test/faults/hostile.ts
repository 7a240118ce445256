/**
 * Hostile input against a real `hq-arbiter serve` over real HTTP on 127.0.0.1: a catalogue of
 * named cases (every route × malformed, truncated, BOM/NUL, 10^5-deep nesting, oversized and
 * chunked bodies, wrong content types, `__proto__`/`constructor` keys, duplicate keys, hostile
 * host names, bad numbers, auth header variants, every scope × route, hostile paths and
 * headers) and a seeded fuzzer. Requests are written byte for byte on a raw TCP socket (so
 * duplicate headers, bad chunking and CR/LF reach the server as sent).
 *
 * Every answer must be: not a 5xx, no stack trace in the body; and a rejected request (4xx
 * other than 409 — a 409 is a decided refusal, which is logged as `*-refused`) must change
 * nothing: the `GET /v1/lease` revision and the event log are the same after it as before.
 * The server must be alive at the end.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { rng } from './schedule.js';
import { buildRoot } from './build.js';

// Resolved at each use: a run may pin its build (HQF_ROOT, see build.ts).
const cli = (): string => join(buildRoot(), 'apps/arbiter/dist/cli.js');

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k === 'NODE_OPTIONS' ||
      k === 'NODE_V8_COVERAGE' ||
      k === 'LD_PRELOAD' ||
      k.startsWith('_TAPJS_') ||
      k.startsWith('TAP')
    )
      continue;
    env[k] = v;
  }
  return env;
}

export interface Answer {
  readonly status: number | null;
  readonly head: string;
  readonly body: string;
}

/** One raw HTTP/1.1 request; `null` status when the server closed without an answer. */
export function raw(port: number, bytes: Buffer, timeoutMs = 3000): Promise<Answer> {
  return new Promise((done) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let finished = false;
    const finish = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      s.destroy();
      let all = Buffer.concat(chunks).toString('latin1');
      // Interim 1xx answers (100 Continue) come before the real one.
      while (/^HTTP\/1\.[01] 1\d\d/.test(all) && all.includes('\r\n\r\n')) all = all.slice(all.indexOf('\r\n\r\n') + 4);
      const cut = all.indexOf('\r\n\r\n');
      const head = cut >= 0 ? all.slice(0, cut) : all;
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      done({ status: m !== null ? Number(m[1]) : null, head, body: cut >= 0 ? all.slice(cut + 4) : '' });
    };
    const timer = setTimeout(() => {
      // No complete answer in time: half-close (an incomplete body ends here) and wait a little.
      s.end();
      setTimeout(finish, 500);
    }, timeoutMs);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', finish);
    s.on('close', finish);
    s.on('error', finish);
    s.write(bytes);
  });
}

export interface Req {
  readonly method: string;
  readonly path: string;
  /** Raw header lines `[name, value]`; duplicates allowed. */
  readonly headers?: readonly (readonly [string, string])[];
  readonly body?: Buffer | string;
  /** Send the body with `Transfer-Encoding: chunked` in pieces of this size. */
  readonly chunked?: number;
  /** Omit Content-Length (for bodies sent otherwise). */
  readonly noLength?: boolean;
  /** Write exactly these bytes instead of building the request. */
  readonly bytes?: Buffer;
}

export function build(port: number, r: Req): Buffer {
  if (r.bytes !== undefined) return r.bytes;
  const body = r.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
  const lines = [`${r.method} ${r.path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close'];
  for (const [k, v] of r.headers ?? []) lines.push(`${k}: ${v}`);
  let payload = body;
  if (r.chunked !== undefined) {
    lines.push('Transfer-Encoding: chunked');
    const parts: Buffer[] = [];
    for (let i = 0; i < body.length; i += r.chunked) {
      const piece = body.subarray(i, i + r.chunked);
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    payload = Buffer.concat(parts);
  } else if (r.noLength !== true && (r.body !== undefined || r.method === 'POST' || r.method === 'PUT')) {
    lines.push(`Content-Length: ${body.length}`);
  }
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
}

export interface Case {
  readonly name: string;
  readonly req: Req;
  /** Status codes this case may answer (beyond "not 5xx"); undefined = any non-5xx. */
  readonly expect?: readonly number[];
  /** The server may close without answering (an incomplete request). */
  readonly mayHangUp?: boolean;
}

export interface Tokens {
  readonly admin: string;
  readonly mbp: string;
  readonly nodeb: string;
  readonly query: string;
}

type Route = { method: string; path: string; scope: 'none' | 'read' | 'member' | 'admin'; body?: () => unknown };

export const ROUTES: readonly Route[] = [
  { method: 'GET', path: '/v1/health', scope: 'none' },
  { method: 'GET', path: '/v1/lease', scope: 'read' },
  { method: 'GET', path: '/v1/primary', scope: 'read' },
  { method: 'GET', path: '/v1/events', scope: 'read' },
  { method: 'GET', path: '/metrics', scope: 'read' },
  { method: 'GET', path: '/v1/status', scope: 'read' },
  { method: 'POST', path: '/v1/lease/acquire', scope: 'member', body: () => ({ host: 'mbp', seenGeneration: 0 }) },
  { method: 'POST', path: '/v1/lease/renew', scope: 'member', body: () => ({ host: 'mbp', generation: 1 }) },
  { method: 'POST', path: '/v1/lease/release', scope: 'member', body: () => ({ host: 'mbp', generation: 1 }) },
  {
    method: 'POST',
    path: '/v1/heartbeat',
    scope: 'member',
    body: () => ({ host: 'mbp', generation: 1, seenGeneration: 1 }),
  },
  { method: 'POST', path: '/v1/check', scope: 'admin', body: () => ({}) },
  { method: 'POST', path: '/v1/lease/transfer', scope: 'admin', body: () => ({ to: 'node-b' }) },
  { method: 'PUT', path: '/v1/maintenance', scope: 'admin', body: () => ({ enabled: false }) },
];
const MUTATIONS = ROUTES.filter((r) => r.body !== undefined);

/** Host-name values no route may accept. */
export const HOSTILE_HOSTS: readonly unknown[] = [
  '',
  'MBP',
  'Mbp',
  ' mbp',
  'mbp ',
  'mbp\n',
  'mbp\r\nX-Injected: 1',
  'm\u0431p',
  'mbр' /* Cyrillic er */,
  'ｍｂｐ',
  'mbp\u200b',
  'mbp\u0000',
  '../etc/passwd',
  '..',
  '.',
  'mbp/../node-b',
  'a'.repeat(33),
  'a'.repeat(10_000),
  '-mbp',
  'mbp.local',
  'mbp_b',
  'constructor',
  'prototype',
  '__proto__',
  'toString',
  'hasOwnProperty',
  '😀',
  '%6d%62%70',
  1,
  0,
  true,
  null,
  ['mbp'],
  { host: 'mbp' },
];

/** Values no generation field may accept. */
export const HOSTILE_NUMBERS: readonly unknown[] = [
  -1,
  1.5,
  0.1,
  2 ** 53,
  1e308,
  -0.5,
  '1',
  '0x1',
  true,
  null,
  [1],
  { n: 1 },
  Number.MAX_SAFE_INTEGER + 1,
  -9007199254740992,
];

function json(v: unknown): string {
  return JSON.stringify(v);
}

function deep(n: number, open: string, close: string, inner = '1'): string {
  return open.repeat(n) + inner + close.repeat(n);
}

/** The named catalogue (≥ 300 cases). */
export function catalogue(t: Tokens): Case[] {
  const cases: Case[] = [];
  const auth = (tok: string): [string, string] => ['Authorization', `Bearer ${tok}`];
  const tokenFor = (r: Route): string => (r.scope === 'admin' ? t.admin : r.scope === 'member' ? t.mbp : t.query);
  const ct: [string, string] = ['Content-Type', 'application/json'];

  for (const r of MUTATIONS) {
    const good = json(r.body!());
    const base = (
      name: string,
      body: string | Buffer,
      extra: Partial<Req> = {},
      expect?: readonly number[],
      mayHangUp = false,
    ): void => {
      cases.push({
        name: `${r.method} ${r.path}: ${name}`,
        req: { method: r.method, path: r.path, headers: [auth(tokenFor(r)), ct], body, ...extra },
        expect,
        mayHangUp,
      });
    };
    base('malformed JSON', '{"host":', {}, [400]);
    base('truncated JSON', good.slice(0, Math.max(1, good.length - 3)), {}, [400]);
    // POST /v1/check takes no fields: an empty body is a body-less call, not an error.
    base('empty body', '', {}, r.path === '/v1/check' ? [200, 400, 415] : [400, 415]);
    base('a UTF-8 BOM before the JSON', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]));
    base('a NUL byte inside the JSON', good.replace('{', '{\u0000'), {}, [400]);
    base(
      'a NUL byte inside a string',
      good.replace('"mbp"', '"mb\\u0000p"').replace('"node-b"', '"node\\u0000-b"'),
      {},
      r.path === '/v1/check' || r.path === '/v1/maintenance' ? undefined : [400],
    );
    base('10^5-deep arrays', deep(100_000, '[', ']'), {}, [400, 413]);
    base('10^5-deep objects', deep(100_000, '{"a":', '}'), {}, [400, 413]);
    base('10^4-deep objects inside a valid key', `{"host":${deep(10_000, '{"a":', '}')}}`, {}, [400, 413]);
    base('a body of 64 KiB + 1', Buffer.alloc(64 * 1024 + 1, 0x20), {}, [400, 413]);
    // Answered 413 once the declared length exceeds the limit; the server then closes with most of
    // the 2 MiB still unread, and the kernel's reset can discard the 413 before this client reads
    // it (RFC 9112 §9.6, lingering close): a hang-up is allowed here, a 5xx or a stack still is not.
    base('a 2 MiB JSON string', json({ host: 'x'.repeat(2 * 1024 * 1024) }), {}, [400, 413], true);
    base('a valid body sent chunked', good, { chunked: 3 });
    base(
      'a 1 MiB body sent chunked',
      json({ host: 'mbp', pad: 'y'.repeat(1024 * 1024) }),
      { chunked: 16 * 1024 },
      [400, 413],
    );
    base(
      'Content-Length larger than the body',
      good,
      { noLength: true, headers: [auth(tokenFor(r)), ct, ['Content-Length', String(good.length + 50)]] },
      [400, 408],
      true,
    );
    base(
      'Content-Length smaller than the body',
      good,
      { noLength: true, headers: [auth(tokenFor(r)), ct, ['Content-Length', '3']] },
      [400],
    );
    base(
      'both Content-Length and chunked',
      good,
      { chunked: 4, headers: [auth(tokenFor(r)), ct, ['Content-Length', String(good.length)]] },
      [400],
    );
    base(
      'broken chunk sizes',
      Buffer.from(`zz\r\n${good}\r\n0\r\n\r\n`),
      { noLength: true, headers: [auth(tokenFor(r)), ct, ['Transfer-Encoding', 'chunked']] },
      [400],
      true,
    );
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      'application/jsonp',
      'json',
      '*/*',
    ]) {
      base(`Content-Type ${type}`, good, { headers: [auth(tokenFor(r)), ['Content-Type', type]] }, [415, 400]);
    }
    base('no Content-Type', good, { headers: [auth(tokenFor(r))] }, [415, 400]);
    base('JSON null', 'null', {}, [400]);
    base('a JSON array', '[]', {}, [400]);
    base('a JSON string', '"mbp"', {}, [400]);
    base('a JSON number', '1', {}, [400]);
    base('NaN', '{"host":NaN}', {}, [400]);
    base('a __proto__ key', good.replace('{', '{"__proto__":{"admin":true},'), {}, [400]);
    base('a constructor key', good.replace('{', '{"constructor":{"prototype":{"x":1}},'), {}, [400]);
    base('a prototype key', good.replace('{', '{"prototype":1,'), {}, [400]);
    base('an unknown field', good.replace('{', '{"extra":1,'), {}, [400]);
    base(
      'duplicate keys',
      good
        .replace('{', '{"host":"node-b",')
        .replace('{"host":"node-b","to"', '{"to":"mbp","to"')
        .replace('{"host":"node-b","enabled"', '{"enabled":true,"enabled"'),
    );
    if (good.includes('"')) base('single-quoted JSON', good.replace(/"/g, "'"), {}, [400]);
    base('trailing garbage', `${good}xyz`, {}, [400]);
    base('a trailing comma', good.replace(/}$/, ',}'), {}, [400]);
    base(
      'invalid UTF-8',
      Buffer.concat([Buffer.from('{"host":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]),
      {},
      [400],
    );
    base('JSON with comments', `/* x */${good}`, {}, [400]);
  }

  // Hostile host names in every field that holds one.
  const hostFields: { r: Route; make: (h: unknown) => unknown }[] = [
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/acquire')!, make: (h) => ({ host: h }) },
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/renew')!, make: (h) => ({ host: h, generation: 1 }) },
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/release')!, make: (h) => ({ host: 'mbp', handoverTo: h }) },
    {
      r: MUTATIONS.find((x) => x.path === '/v1/heartbeat')!,
      make: (h) => ({ host: 'mbp', view: { target: h, reachable: false, ping: false, health: false } }),
    },
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/transfer')!, make: (h) => ({ to: h }) },
  ];
  for (const { r, make } of hostFields) {
    for (const h of HOSTILE_HOSTS) {
      cases.push({
        name: `${r.path}: host ${json(h).slice(0, 40)}`,
        req: {
          method: r.method,
          path: r.path,
          headers: [auth(r.scope === 'admin' ? t.admin : t.mbp), ct],
          body: json(make(h)),
        },
        expect: [400, 403],
      });
    }
  }
  // Bad numbers in every integer field.
  const numFields: { r: Route; make: (n: unknown) => unknown }[] = [
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/renew')!, make: (n) => ({ host: 'mbp', generation: n }) },
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/acquire')!, make: (n) => ({ host: 'mbp', seenGeneration: n }) },
    { r: MUTATIONS.find((x) => x.path === '/v1/heartbeat')!, make: (n) => ({ host: 'mbp', seenGeneration: n }) },
    {
      r: MUTATIONS.find((x) => x.path === '/v1/heartbeat')!,
      make: (n) => ({ host: 'mbp', confirmation: { holder: 'node-b', generation: 1, ageSeconds: n } }),
    },
    { r: MUTATIONS.find((x) => x.path === '/v1/lease/release')!, make: (n) => ({ host: 'mbp', generation: n }) },
  ];
  for (const { r, make } of numFields) {
    for (const n of HOSTILE_NUMBERS) {
      // ageSeconds is a number, not an integer: a fraction is fine there.
      const fractionOk =
        JSON.stringify(make(0)).includes('ageSeconds') && typeof n === 'number' && n >= 0 && n <= 31_536_000;
      cases.push({
        name: `${r.path}: number ${json(n)} in ${Object.keys(make(0) as object).join('/')}`,
        req: {
          method: r.method,
          path: r.path,
          headers: [auth(t.mbp), ct],
          body: json(make(n)).replace('9007199254740992', '9007199254740993'),
        },
        expect: fractionOk ? undefined : [400],
      });
    }
  }
  cases.push({
    name: 'PUT /v1/maintenance: enabled as a string',
    req: { method: 'PUT', path: '/v1/maintenance', headers: [auth(t.admin), ct], body: '{"enabled":"true"}' },
    expect: [400],
  });
  cases.push({
    name: 'PUT /v1/maintenance: a 10 KiB reason',
    req: {
      method: 'PUT',
      path: '/v1/maintenance',
      headers: [auth(t.admin), ct],
      body: json({ enabled: false, reason: 'r'.repeat(10_240) }),
    },
  });
  cases.push({
    name: 'PUT /v1/maintenance: a reason with CR/LF',
    req: {
      method: 'PUT',
      path: '/v1/maintenance',
      headers: [auth(t.admin), ct],
      body: json({ enabled: false, reason: 'a\r\nb' }),
    },
  });

  // Authorization variants on every route that needs a token.
  for (const r of ROUTES.filter((x) => x.scope === 'member' || x.scope === 'admin')) {
    const body = json(r.body!());
    const good = tokenFor(r);
    const variants: [string, (readonly [string, string])[], readonly number[] | undefined][] = [
      ['no Authorization', [], [401]],
      ['an empty Bearer', [['Authorization', 'Bearer ']], [401, 400]],
      ['an unknown token', [['Authorization', `Bearer ${'0'.repeat(64)}`]], [401]],
      ['a token one character short', [['Authorization', `Bearer ${good.slice(1)}`]], [401]],
      ['a token with a trailing space', [['Authorization', `Bearer ${good} `]], undefined],
      ['a 10 KiB token', [['Authorization', `Bearer ${'a'.repeat(10_240)}`]], [401, 400, 431]],
      ['Basic auth', [['Authorization', `Basic ${Buffer.from(`x:${good}`).toString('base64')}`]], [401, 400]],
      ['the token without a scheme', [['Authorization', good]], [401, 400]],
      [
        'two Authorization headers',
        [
          ['Authorization', `Bearer ${good}`],
          ['Authorization', `Bearer ${good}`],
        ],
        [400],
      ],
      [
        'two Authorization headers, one bad',
        [
          ['Authorization', `Bearer ${'0'.repeat(64)}`],
          ['Authorization', `Bearer ${good}`],
        ],
        [400, 401],
      ],
      ['lowercase scheme "bearer"', [['authorization', `bearer ${good}`]], undefined],
      ['uppercase scheme "BEARER"', [['AUTHORIZATION', `BEARER ${good}`]], undefined],
      ['a token with CR inside', [['Authorization', `Bearer ${good.slice(0, 10)}\r${good.slice(10)}`]], [400, 401]],
      ['the query token', [['Authorization', `Bearer ${t.query}`]], [403]],
    ];
    for (const [name, hs, expect] of variants) {
      cases.push({
        name: `${r.method} ${r.path}: ${name}`,
        req: { method: r.method, path: r.path, headers: [...hs, ct], body },
        expect,
        mayHangUp: name.includes('CR inside'),
      });
    }
  }

  // Every scope × route.
  const scopes: [string, string | null][] = [
    ['no token', null],
    ['the query token', t.query],
    ['the member token of mbp', t.mbp],
    ['the member token of node-b', t.nodeb],
    ['the admin token', t.admin],
  ];
  for (const r of ROUTES) {
    for (const [sname, tok] of scopes) {
      const allowed =
        r.scope === 'none' || r.scope === 'read'
          ? true
          : r.scope === 'admin'
            ? tok === t.admin
            : tok === t.admin || tok === t.mbp; // the bodies act for mbp
      const expect = allowed ? undefined : tok === null ? [401] : [403];
      cases.push({
        name: `${r.method} ${r.path} with ${sname} is ${allowed ? 'served' : 'refused'}`,
        req: {
          method: r.method,
          path: r.path,
          headers: [...(tok !== null ? [auth(tok)] : []), ...(r.body !== undefined ? [ct] : [])],
          body: r.body !== undefined ? json(r.body()) : undefined,
        },
        expect,
      });
    }
  }

  // Wrong methods, hostile paths and queries, hostile headers.
  for (const r of ROUTES) {
    for (const m of ['DELETE', 'PATCH', r.method === 'GET' ? 'POST' : 'GET']) {
      cases.push({
        name: `${m} ${r.path} (wrong method)`,
        req: {
          method: m,
          path: r.path,
          headers: [auth(t.admin)],
          ...(m === 'GET' ? {} : { body: '{}', headers: [auth(t.admin), ct] }),
        },
        expect: [404, 405, 400, 415],
      });
    }
  }
  const paths = [
    '/v1/../v1/lease',
    '/v1/lease/../../etc/passwd',
    '/v1/lease%00',
    '/v1/lease%2e%2e',
    '//v1/lease',
    '/v1//lease',
    `/v1/lease?x=${'a'.repeat(8000)}`,
    `/${'a'.repeat(100_000)}`,
    '/v1/events?after=-1',
    '/v1/events?after=abc',
    '/v1/events?after=1.5',
    '/v1/events?after=1e400',
    '/v1/events?limit=0',
    '/v1/events?limit=100000',
    '/v1/events?limit=-5',
    '/v1/events?limit=1.5',
    '/v1/events?after=1&after=2',
    '/v1/events?limit=1&limit=1000',
    '/v1/events?after=%00',
    '/v1/events?__proto__=1',
    '/v1/events?constructor=1',
    '/v1/events?after=9007199254740993',
    '/v1/events?unknown=1',
    '/v1/LEASE',
    '/V1/lease',
    '/v1/lease/',
    '/v1/lease/acquire/extra',
    '/v1/events/stream/../../metrics',
    '/%ff%fe',
    '/v1/lease#frag',
  ];
  for (const p of paths) cases.push({ name: `GET ${p.slice(0, 60)}`, req: { method: 'GET', path: p } });
  const ev = { method: 'GET', path: '/v1/lease' };
  cases.push({
    name: 'a header line without a colon',
    req: {
      ...ev,
      headers: [
        ['X-Bad', 'x'],
        ['NoColonHere', ''],
      ].map(([k, v]) => (v === '' ? [k!, ''] : [k!, v!])) as [string, string][],
    },
    mayHangUp: true,
  });
  cases.push({
    name: 'a 64 KiB header',
    req: { ...ev, headers: [['X-Big', 'b'.repeat(64 * 1024)]] },
    expect: [431, 400],
    mayHangUp: true,
  });
  cases.push({
    name: 'a thousand headers',
    req: { ...ev, headers: Array.from({ length: 1000 }, (_, i) => [`X-H${i}`, 'v'] as const) },
    mayHangUp: true,
  });
  cases.push({
    name: 'a header with a NUL',
    req: { ...ev, headers: [['X-Nul', 'a\u0000b']] },
    expect: [400, 200],
    mayHangUp: true,
  });
  cases.push({
    name: 'an If-Match that is not a revision',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ct, ['If-Match', '"abc"']],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [400, 412],
  });
  cases.push({
    name: 'a stale If-Match',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ct, ['If-Match', '"0"']],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [412, 409, 400],
  });
  cases.push({
    name: 'two If-Match headers',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ct, ['If-Match', '"1"'], ['If-Match', '"2"']],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [400, 412],
  });
  cases.push({
    name: 'HTTP/1.0 without Host',
    req: { method: 'GET', path: '/', bytes: Buffer.from('GET /v1/lease HTTP/1.0\r\n\r\n') },
  });
  cases.push({
    name: 'a request line of garbage',
    req: { method: 'GET', path: '/', bytes: Buffer.from('\u0000\u0001\u0002 garbage\r\n\r\n') },
    mayHangUp: true,
  });
  cases.push({
    name: 'an unknown HTTP version',
    req: { method: 'GET', path: '/', bytes: Buffer.from('GET /v1/lease HTTP/9.9\r\nHost: x\r\n\r\n') },
    mayHangUp: true,
  });
  cases.push({
    name: 'a bare LF request',
    req: { method: 'GET', path: '/', bytes: Buffer.from('GET /v1/lease HTTP/1.1\nHost: x\n\n') },
    mayHangUp: true,
  });
  cases.push({
    name: 'CR/LF injected into the path',
    req: { method: 'GET', path: '/', bytes: Buffer.from('GET /v1/lease\r\nX-Injected: 1 HTTP/1.1\r\nHost: x\r\n\r\n') },
    mayHangUp: true,
  });
  cases.push({ name: 'an absolute-form request target', req: { method: 'GET', path: 'http://evil.example/v1/lease' } });
  cases.push({ name: 'OPTIONS *', req: { method: 'OPTIONS', path: '*' } });
  cases.push({
    name: 'an Expect: 100-continue mutation',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ct, ['Expect', '100-continue']],
      body: json({ host: 'mbp', generation: 1 }),
    },
  });
  cases.push({
    name: 'Content-Encoding gzip on a plain body',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ct, ['Content-Encoding', 'gzip']],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [400, 415, 200, 409],
  });
  cases.push({
    name: 'application/json with charset utf-16',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.mbp), ['Content-Type', 'application/json; charset=utf-16']],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [400, 415, 200, 409],
  });
  cases.push({
    name: 'a member acting for another host (renew)',
    req: {
      method: 'POST',
      path: '/v1/lease/renew',
      headers: [auth(t.nodeb), ct],
      body: json({ host: 'mbp', generation: 1 }),
    },
    expect: [403],
  });
  cases.push({
    name: 'a member acting for another host (heartbeat)',
    req: { method: 'POST', path: '/v1/heartbeat', headers: [auth(t.mbp), ct], body: json({ host: 'node-b' }) },
    expect: [403],
  });
  cases.push({
    name: 'a member acting for another host (release with handover)',
    req: {
      method: 'POST',
      path: '/v1/lease/release',
      headers: [auth(t.nodeb), ct],
      body: json({ host: 'mbp', handoverTo: 'node-b' }),
    },
    expect: [403],
  });
  const seen = new Map<string, number>();
  return cases.map((c) => {
    const n = (seen.get(c.name) ?? 0) + 1;
    seen.set(c.name, n);
    return n === 1 ? c : { ...c, name: `${c.name} (variant ${n})` };
  });
}

// ------------------------------------------------------------------ fuzzer

const POOL_STRINGS = [
  'mbp',
  'node-b',
  '',
  'MBP',
  'm\u0431p',
  '../x',
  'a'.repeat(40),
  '__proto__',
  'constructor',
  '\r\n',
  '\u0000',
  '😀',
  'true',
  '1',
  'null',
];
const POOL_VALUES: unknown[] = [
  0,
  1,
  -1,
  1.5,
  2 ** 53,
  1e308,
  true,
  false,
  null,
  [],
  {},
  [1, 2],
  { a: 1 },
  ...POOL_STRINGS,
];
const FIELDS = [
  'host',
  'generation',
  'seenGeneration',
  'to',
  'enabled',
  'reason',
  'handoverTo',
  'view',
  'confirmation',
  'heartbeatSeconds',
  '__proto__',
  'constructor',
  'x',
];
const TYPES = [
  'application/json',
  'application/json',
  'application/json',
  'text/plain',
  'application/json; charset=utf-8',
  '',
  'application/x-www-form-urlencoded',
  'APPLICATION/JSON',
];

export function fuzzCase(r: () => number, t: Tokens): Case {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const route = pick(ROUTES);
  const method = r() < 0.9 ? route.method : pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);
  const tok = pick([t.admin, t.admin, t.mbp, t.mbp, t.nodeb, t.query, null, 'f'.repeat(64)]);
  const headers: [string, string][] = [];
  if (tok !== null)
    headers.push([
      pick(['Authorization', 'authorization']),
      `${pick(['Bearer', 'bearer', 'BEARER', 'Basic', ''])} ${tok}`.trim(),
    ]);
  if (r() < 0.03 && tok !== null) headers.push(['Authorization', `Bearer ${tok}`]);
  let path = route.path;
  if (path === '/v1/events' && r() < 0.5)
    path += `?after=${pick(['0', '-1', 'x', '1.5', '99999999999999999999'])}&limit=${pick(['1', '1000', '0', '1001', 'abc'])}`;
  if (r() < 0.03) path = pick(['/v1/lease/x', '/v1/%00', '/../', `/v1/lease?${'q'.repeat(2000)}`]);
  let body: string | Buffer | undefined;
  if (method !== 'GET' || r() < 0.05) {
    const o: { [k: string]: unknown } = { ...((route.body?.() as object | undefined) ?? {}) };
    const mutations = Math.floor(r() * 4);
    for (let i = 0; i < mutations; i++) {
      const k = r() < 0.7 && Object.keys(o).length > 0 ? pick(Object.keys(o)) : pick(FIELDS);
      const x = r();
      if (x < 0.25) delete o[k];
      else if (x < 0.8) o[k] = pick(POOL_VALUES);
      else o[k] = { target: pick(POOL_STRINGS), reachable: pick([true, false, 'no']), ping: false, health: false };
    }
    let text = JSON.stringify(o);
    const y = r();
    if (y < 0.05) text = text.slice(0, Math.floor(r() * text.length));
    else if (y < 0.08) text = deep(1 + Math.floor(r() * 20_000), '[', ']');
    else if (y < 0.1) text = `\ufeff${text}`;
    else if (y < 0.12) text = text.replace('{', '{"host":"node-b",');
    else if (y < 0.13) text = 'x'.repeat(70_000);
    body = text;
  }
  if (body !== undefined) {
    const type = pick(TYPES);
    if (type !== '') headers.push(['Content-Type', type]);
  }
  const chunked = body !== undefined && r() < 0.1 ? 1 + Math.floor(r() * 64) : undefined;
  return { name: `fuzz ${method} ${path.slice(0, 60)}`, req: { method, path, headers, body, chunked } };
}

// ------------------------------------------------------------------ running

const STACK = /\n\s+at .+:\d+:\d+|node:internal|\.(?:ts|js|mjs):\d+:\d+|Error: .*\n\s+at /;

export interface HostileResult {
  catalogue: number;
  fuzzed: number;
  byStatus: Record<string, number>;
  hangUps: number;
  failures: string[];
  alive: boolean;
  minutes: number;
}

interface Server {
  proc: ChildProcess;
  port: number;
  dir: string;
  tokens: Tokens;
}

export async function startServer(): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'hqf-hostile-'));
  const config = join(dir, 'arbiter.json');
  // Default timings, and a daily check twelve hours from now (the arbiter wants checks every
  // day): no background write moves the revision or the event log under the comparison.
  const hour = (new Date().getUTCHours() + 12) % 24;
  writeFileSync(
    config,
    JSON.stringify({
      tailscaleBin: '',
      checkCron: `0 ${hour} * * *`,
      listen: { host: '127.0.0.1', port: 0 },
      dataDir: join(dir, 'var'),
      candidates: ['mbp', 'node-b'],
    }),
  );
  const issue = (m: string, scope: string): string =>
    execFileSync(process.execPath, [cli(), 'token', 'issue', m, '--scope', scope, '--config', config], {
      encoding: 'utf8',
      env: childEnv(),
    }).trim();
  const tokens: Tokens = {
    admin: issue('ops', 'admin'),
    mbp: issue('mbp', 'member'),
    nodeb: issue('node-b', 'member'),
    query: issue('dash', 'query'),
  };
  const proc = spawn(process.execPath, [cli(), 'serve', '--config', config], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv(),
  });
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += String(d)));
  const port = await new Promise<number>((done, fail) => {
    const timer = setTimeout(
      () => fail(new Error(`the arbiter did not listen within 60 s: ${stderr.slice(-400)}`)),
      60_000,
    );
    proc.once('exit', () => fail(new Error(`the arbiter exited: ${stderr.slice(-400)}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        const x = JSON.parse(line) as { msg?: string; port?: number };
        if (x.msg === 'hq-arbiter listening' && typeof x.port === 'number') {
          clearTimeout(timer);
          done(x.port);
        }
      } catch {
        /* not JSON */
      }
    });
  });
  return { proc, port, dir, tokens };
}

/** The lease revision and the id of the newest event (read incrementally from `known`). */
async function state(port: number, known = 0): Promise<{ revision: number; lastEvent: number } | null> {
  try {
    const l = await raw(port, build(port, { method: 'GET', path: '/v1/lease' }));
    const lease = JSON.parse(l.body) as { revision: number };
    let last = known;
    for (let page = 0; page < 10_000; page++) {
      const e = await raw(port, build(port, { method: 'GET', path: `/v1/events?after=${last}&limit=1000` }));
      const events = (JSON.parse(e.body) as { events: { id: number }[] }).events;
      if (events.length > 0) last = events[events.length - 1]!.id;
      if (events.length < 1000) break;
    }
    return { revision: lease.revision, lastEvent: last };
  } catch {
    return null;
  }
}

/** Runs cases one by one; each answer checked, each rejection compared before/after. */
export async function runCases(
  s: Server,
  cases: Iterable<Case>,
  res: HostileResult,
  counter: 'catalogue' | 'fuzzed',
): Promise<void> {
  let before = await state(s.port);
  for (const c of cases) {
    const a = await raw(s.port, build(s.port, c.req), 4000);
    res[counter]++;
    const key = a.status === null ? 'no answer' : String(a.status);
    res.byStatus[key] = (res.byStatus[key] ?? 0) + 1;
    const fail = (why: string): void => {
      if (res.failures.length < 200) res.failures.push(`${c.name}: ${why}`);
    };
    if (a.status === null) {
      res.hangUps++;
      if (c.mayHangUp !== true && counter === 'catalogue') fail('the server closed without an answer');
    } else {
      if (a.status >= 500) fail(`answered ${a.status}: ${a.body.slice(0, 200)}`);
      if (c.expect !== undefined && !c.expect.includes(a.status))
        fail(`answered ${a.status}, expected one of ${c.expect.join('/')}: ${a.body.slice(0, 160)}`);
    }
    if (STACK.test(a.body)) fail(`a stack trace in the body: ${a.body.slice(0, 200)}`);
    const after = await state(s.port, before?.lastEvent ?? 0);
    if (after === null) {
      fail('the state could not be read after it');
    } else if (before !== null && (a.status === null || (a.status >= 400 && a.status !== 409))) {
      if (after.revision !== before.revision)
        fail(`a rejected request (${key}) moved the revision ${before.revision} → ${after.revision}`);
      if (after.lastEvent !== before.lastEvent)
        fail(`a rejected request (${key}) added events (${before.lastEvent} → ${after.lastEvent})`);
    }
    before = after;
  }
}

export async function hostileRun(opts: {
  requests: number;
  seed: number;
  log?: (s: string) => void;
}): Promise<HostileResult> {
  const began = Date.now();
  const log = opts.log ?? (() => undefined);
  const res: HostileResult = {
    catalogue: 0,
    fuzzed: 0,
    byStatus: {},
    hangUps: 0,
    failures: [],
    alive: false,
    minutes: 0,
  };
  const s = await startServer();
  const onExit = (): void => {
    if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
  };
  process.once('exit', onExit);
  try {
    const cases = catalogue(s.tokens);
    await runCases(s, cases, res, 'catalogue');
    log(`hostile: catalogue of ${cases.length} cases, ${res.failures.length} failures`);
    const r = rng(opts.seed ^ 0x2545f491);
    const gen = function* (): Generator<Case> {
      for (let i = 0; i < opts.requests; i++) {
        if (i > 0 && i % 5000 === 0)
          log(
            `hostile: ${i} fuzzed requests, ${res.failures.length} failures, ${Math.round((Date.now() - began) / 1000)} s`,
          );
        yield fuzzCase(r, s.tokens);
      }
    };
    await runCases(s, gen(), res, 'fuzzed');
    const h = await raw(s.port, build(s.port, { method: 'GET', path: '/v1/health' }));
    res.alive = h.status === 200 && s.proc.exitCode === null;
    if (!res.alive)
      res.failures.push(`the server is not alive at the end (health ${h.status}, exit ${s.proc.exitCode})`);
  } finally {
    onExit();
    process.removeListener('exit', onExit);
    await new Promise((r) => setTimeout(r, 200));
    rmSync(s.dir, { recursive: true, force: true });
  }
  res.minutes = Math.round((Date.now() - began) / 600) / 100;
  log(
    `hostile: ${res.catalogue} catalogue cases + ${res.fuzzed} fuzzed requests, statuses ${JSON.stringify(res.byStatus)}, ${res.failures.length} failures, ${res.minutes} min`,
  );
  return res;
}
