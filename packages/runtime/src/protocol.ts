/**
 * The server side of the protocol version (docs/PROTOCOL.md "Versions"), written once for both
 * daemons: the Fastify hooks every listener registers (`versionHooks`) and the wrapper of a
 * node:http fast path in front of Fastify (`versionedFactory`), so every answer carries the
 * version it was spoken to and a request of a version this side does not serve gets one 400
 * `HQ_ERR_PROTOCOL_VERSION` naming both versions and what to upgrade. Routes need nothing: a
 * route added later is covered by the hooks. (No Fastify import: the shapes below are the few
 * members the hooks use.)
 */
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from 'node:http';
import {
  ERRORS,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  fieldsAfter,
  servesVersion,
  spokenVersion,
  versionRefusal,
} from '@hq/protocol';

interface HookRequest {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly body?: unknown;
  readonly routeOptions: { readonly url?: string | undefined };
}

interface HookReply {
  header(name: string, value: string): unknown;
  code(status: number): { send(body: unknown): unknown };
}

/**
 * Fastify's callback-style hooks: `done()` goes on, a refusal sends its answer and does not
 * call it. Synchronous, so that a request passes them without a promise or a turn of the
 * microtask queue each (they run on every request).
 */
export interface VersionHooks {
  /** Refuses a version this side does not serve; stamps the answer with the one it was spoken to. */
  readonly onRequest: (req: HookRequest, reply: HookReply, done: () => void) => void;
  /** Strict within a version: a field of a later version in a request of an earlier one is a 400. */
  readonly preValidation: (req: HookRequest, reply: HookReply, done: () => void) => void;
}

/** The header's text for each version served, made once (the fence path sets it on every answer). */
const VERSION_TEXT: readonly string[] = Array.from({ length: PROTOCOL_VERSION + 1 }, (_, v) => String(v));

/** The version of a request this side serves, or null (the hook refused it). */
function served(headers: IncomingHttpHeaders): number | null {
  const said = spokenVersion(headers[PROTOCOL_HEADER]);
  return said.ok && servesVersion(said.version) ? said.version : null;
}

/** `side` names the daemon and its host for the refusal ("hq-arbiter on cloud-vm"). */
export function versionHooks(side: () => string): VersionHooks {
  return {
    onRequest: (req, reply, done) => {
      const version = served(req.headers);
      if (version === null) {
        reply.header(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
        reply.code(ERRORS.PROTOCOL_VERSION.status).send({
          error: ERRORS.PROTOCOL_VERSION.code,
          message: versionRefusal(spokenVersion(req.headers[PROTOCOL_HEADER]), side()),
        });
        return;
      }
      reply.header(PROTOCOL_HEADER, VERSION_TEXT[version] ?? String(version));
      done();
    },
    preValidation: (req, reply, done) => {
      const version = served(req.headers) ?? PROTOCOL_VERSION;
      const body = req.body;
      if (version === PROTOCOL_VERSION || typeof body !== 'object' || body === null) return done();
      const later = fieldsAfter(version, `${req.method} ${req.routeOptions.url ?? ''}`).find((f) =>
        Object.hasOwn(body, f),
      );
      if (later === undefined) return done();
      reply.code(ERRORS.BAD_REQUEST.status).send({
        error: ERRORS.BAD_REQUEST.code,
        message: `body/${later} is a field of hq protocol ${PROTOCOL_VERSION}; a protocol ${version} request may not carry it (send ${PROTOCOL_HEADER}: ${PROTOCOL_VERSION})`,
      });
    },
  };
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Marks a fast path that sends the version header itself, in its one `writeHead` (Node's fast
 * case: no header object kept per answer): `versionedFactory` hands it the header's text as a
 * third argument instead of setting the header first.
 */
export const SENDS_VERSION: unique symbol = Symbol('hq.sendsVersion');

/** A fast path's request listener that sends the version header itself (`SENDS_VERSION`). */
export interface VersionSender {
  (req: IncomingMessage, res: ServerResponse, version?: string): void;
  readonly [SENDS_VERSION]: true;
}

/** Marks `listener` as one that sends the version header itself. */
export function sendsVersion(
  listener: (req: IncomingMessage, res: ServerResponse, version?: string) => void,
): VersionSender {
  return Object.assign(listener, { [SENDS_VERSION]: true as const });
}

const isSender = (l: Handler | VersionSender): l is VersionSender =>
  (l as Partial<VersionSender>)[SENDS_VERSION] === true;

/**
 * A fast path's server factory (a node:http server answering some requests before Fastify)
 * with the version added: a request of a version this side serves reaches the fast path with
 * the answer's header already set (or, for a listener marked `SENDS_VERSION`, its text as the
 * third argument); any other goes to Fastify, whose hook refuses it.
 */
export function versionedFactory<O>(
  factory: (handler: Handler, opts: O) => Server,
): (handler: Handler, opts: O) => Server {
  return (handler, opts) => {
    const server = factory(handler, opts);
    const fast = server.listeners('request') as (Handler | VersionSender)[];
    server.removeAllListeners('request');
    const only = fast.length === 1 ? fast[0] : undefined;
    if (only !== undefined && isSender(only)) {
      server.on('request', (req: IncomingMessage, res: ServerResponse) => {
        const version = served(req.headers);
        if (version === null) return handler(req, res);
        return only.call(server, req, res, VERSION_TEXT[version] as string);
      });
      return server;
    }
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const version = served(req.headers);
      if (version === null) return handler(req, res);
      const text = VERSION_TEXT[version] as string;
      res.setHeader(PROTOCOL_HEADER, text); // a sender's writeHead sets it again: the same text
      for (const listener of fast) (listener as VersionSender).call(server, req, res, text);
      return undefined;
    });
    return server;
  };
}
