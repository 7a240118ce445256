/**
 * The one refusal style of every hq HTTP route (the arbiter's and both agent listeners): a
 * route, hook or plugin *throws* an `HttpError` made from a catalog entry of `@hq/protocol`
 * (`ERRORS`, `REPLICATION_ERRORS`, `STREAM_ERRORS`); the app's one error handler answers it with
 * the entry's status. The body is `{error, message}`, or — for a refusal that carries more (the
 * lease's 409 with the record, a replication refusal's detail, a run claim's reason) — the body
 * the refusal was made with, field for field as the contract shows it.
 */
import { ERRORS, type CatalogEntry } from '@hq/protocol';

/** A refusal's own body, when `{error, message}` is not all it says. */
export type RefusalBody = { readonly [k: string]: unknown };

export class HttpError extends Error {
  readonly statusCode: number;
  readonly code: string;
  /** The whole answer, when the refusal carries more than `{error, message}`; else null. */
  readonly body: RefusalBody | null;
  constructor(entry: CatalogEntry, message: string = entry.message, body: RefusalBody | null = null) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = entry.status;
    this.code = entry.code;
    this.body = body;
  }
}

/** The answer's body: the one the refusal carries, else `{error, message}` with `message` as `shape` writes it. */
export function refusalBody(err: HttpError, shape: (message: string) => string = (m) => m): RefusalBody {
  return err.body ?? { error: err.code, message: shape(err.message) };
}

/**
 * The router's own refusals (Fastify's `frameworkErrors`: a path parameter over 100 characters,
 * a malformed percent escape) in the one style: 400 `HQ_ERR_BAD_REQUEST` with a line saying
 * what to fix, never Fastify's `{statusCode, code, error}`.
 */
export function routerRefusal(code: string | undefined): HttpError {
  const why =
    code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? 'a path parameter is longer than 100 characters'
      : code === 'FST_ERR_BAD_URL'
        ? 'the path has a malformed percent escape'
        : ERRORS.BAD_REQUEST.message;
  return new HttpError(ERRORS.BAD_REQUEST, why);
}

/** One line of at most 300 characters: what an answer's `message` may be. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}

/** Fastify's own refusals of a body, by code: hq's catalog entry (and its message) for each. */
const FASTIFY_CODES: ReadonlyMap<string, CatalogEntry> = new Map([
  ['FST_ERR_CTP_INVALID_MEDIA_TYPE', ERRORS.UNSUPPORTED_MEDIA],
  ['FST_ERR_CTP_BODY_TOO_LARGE', ERRORS.TOO_LARGE],
  ['FST_ERR_CTP_INVALID_CONTENT_LENGTH', ERRORS.BAD_REQUEST],
  ['FST_ERR_CTP_EMPTY_JSON_BODY', ERRORS.BAD_REQUEST],
  ['FST_ERR_CTP_INVALID_JSON_BODY', ERRORS.BAD_REQUEST],
]);

/** The members of an error reaching a Fastify error handler that `refusalOf` reads (no Fastify import here). */
export interface RouteError {
  readonly message: string;
  readonly code?: string | undefined;
  readonly statusCode?: number | undefined;
  readonly validation?: unknown;
  readonly validationContext?: string | undefined;
}

/**
 * The status and body of every app's error handler, after the app's own errors (the arbiter's
 * store): a refusal answers its catalog entry; a schema failure, a body Fastify refused or
 * another 4xx answers 400, 404, 413 or 415 with hq's code and one line; anything else is null —
 * the caller logs it and answers 500, showing no detail.
 */
export function refusalOf(err: RouteError): { readonly status: number; readonly body: RefusalBody } | null {
  if (err instanceof HttpError) return { status: err.statusCode, body: refusalBody(err, oneLine) };
  if (err.validation !== undefined) {
    const where = err.validationContext ?? 'request';
    return {
      status: 400,
      body: {
        error: ERRORS.BAD_REQUEST.code,
        message: oneLine(err.message.startsWith(where) ? err.message : `${where} ${err.message}`),
      },
    };
  }
  const mapped = err.code === undefined ? undefined : FASTIFY_CODES.get(err.code);
  if (mapped !== undefined) return { status: mapped.status, body: { error: mapped.code, message: mapped.message } };
  const status = typeof err.statusCode === 'number' ? err.statusCode : 500;
  if (status < 400 || status >= 500) return null;
  const entry =
    status === 404
      ? ERRORS.NOT_FOUND
      : status === 413
        ? ERRORS.TOO_LARGE
        : status === 415
          ? ERRORS.UNSUPPORTED_MEDIA
          : ERRORS.BAD_REQUEST;
  return { status: entry.status, body: { error: entry.code, message: oneLine(err.message || entry.message) } };
}

/** The 500 every app answers for what it did not expect. */
export const INTERNAL_BODY: RefusalBody = { error: ERRORS.INTERNAL.code, message: ERRORS.INTERNAL.message };

/** The members of a Fastify reply `answerRouterError` uses (no Fastify import here). */
interface CodeReply {
  code(status: number): { send(body: unknown): unknown };
}

/** The members of a Fastify reply `RouteMethods.answerUnknown` uses. */
interface NotFoundReply extends CodeReply {
  code(status: number): {
    header(name: string, value: string): { send(body: unknown): unknown };
    send(body: unknown): unknown;
  };
}

/** Fastify's `frameworkErrors`: answers the router's refusal in the one style. */
export function answerRouterError(err: { readonly code?: string | undefined }, reply: unknown): void {
  const refusal = routerRefusal(err.code);
  void (reply as CodeReply).code(refusal.statusCode).send(refusalBody(refusal));
}

/**
 * The methods of each route URL (`/v1/runs/:id`), matched against a request path the way the
 * router matches it (a `:param` is one non-empty segment): a known path asked with another
 * method is a 405 with `Allow`, not a 404. Fill it from an `onRoute` hook.
 */
export class RouteMethods {
  private readonly routes: Array<{ readonly re: RegExp; readonly methods: Set<string> }> = [];

  add(url: string, method: string | readonly string[]): void {
    const source = `^${url
      .split('/')
      .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/')}$`;
    let entry = this.routes.find((r) => r.re.source === source);
    if (entry === undefined) {
      entry = { re: new RegExp(source), methods: new Set() };
      this.routes.push(entry);
    }
    for (const m of typeof method === 'string' ? [method] : method) entry.methods.add(m);
  }

  /** The methods `path` answers, sorted; none when no route has that path. */
  allowed(path: string): string[] {
    const out = new Set<string>();
    for (const r of this.routes) if (r.re.test(path)) for (const m of r.methods) out.add(m);
    return [...out].sort();
  }

  /**
   * Fastify's not-found handler of every hq app: a known path asked with another method is a 405
   * with `Allow`, any other a 404 naming what was asked.
   */
  answerUnknown(req: { readonly method: string; readonly url: string }, reply: NotFoundReply): void {
    const path = req.url.split('?')[0] ?? '';
    const wrong = this.refusal(req.method, path);
    if (wrong !== null) void reply.code(405).header('allow', wrong.allow).send(wrong.body);
    else void reply.code(404).send({ error: ERRORS.NOT_FOUND.code, message: `no route ${req.method} ${path}` });
  }

  /** The 405 of `method` on `path`, or null when no route has that path (a 404). */
  refusal(
    method: string,
    path: string,
  ): { readonly allow: string; readonly body: { readonly error: string; readonly message: string } } | null {
    const allow = this.allowed(path);
    if (allow.length === 0) return null;
    return {
      allow: allow.join(', '),
      body: {
        error: ERRORS.METHOD_NOT_ALLOWED.code,
        message: `${method} is not a method of ${path}; it answers ${allow.join(', ')}`,
      },
    };
  }
}
