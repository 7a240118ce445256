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
import { ERRORS, PROTOCOL_HEADER, PROTOCOL_VERSION, fieldsAfter, servesVersion, spokenVersion, versionRefusal } from '@hq/protocol';

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

export interface VersionHooks {
  /** Refuses a version this side does not serve; stamps the answer with the one it was spoken to. */
  readonly onRequest: (req: HookRequest, reply: HookReply) => Promise<unknown>;
  /** Strict within a version: a field of a later version in a request of an earlier one is a 400. */
  readonly preValidation: (req: HookRequest, reply: HookReply) => Promise<unknown>;
}

/** The version of a request this side serves, or null (the hook refused it). */
function served(headers: IncomingHttpHeaders): number | null {
  const said = spokenVersion(headers[PROTOCOL_HEADER]);
  return said.ok && servesVersion(said.version) ? said.version : null;
}

/** `side` names the daemon and its host for the refusal ("hq-arbiter on cloud-vm"). */
export function versionHooks(side: () => string): VersionHooks {
  return {
    onRequest: async (req, reply) => {
      const version = served(req.headers);
      if (version === null) {
        reply.header(PROTOCOL_HEADER, String(PROTOCOL_VERSION));
        return reply.code(ERRORS.PROTOCOL_VERSION.status).send({ error: ERRORS.PROTOCOL_VERSION.code, message: versionRefusal(spokenVersion(req.headers[PROTOCOL_HEADER]), side()) });
      }
      reply.header(PROTOCOL_HEADER, String(version));
      return undefined;
    },
    preValidation: async (req, reply) => {
      const version = served(req.headers) ?? PROTOCOL_VERSION;
      const body = req.body;
      if (version === PROTOCOL_VERSION || typeof body !== 'object' || body === null) return undefined;
      const later = fieldsAfter(version, `${req.method} ${req.routeOptions.url ?? ''}`).find((f) => Object.hasOwn(body, f));
      if (later === undefined) return undefined;
      return reply.code(ERRORS.BAD_REQUEST.status).send({
        error: ERRORS.BAD_REQUEST.code,
        message: `body/${later} is a field of hq protocol ${PROTOCOL_VERSION}; a protocol ${version} request may not carry it (send ${PROTOCOL_HEADER}: ${PROTOCOL_VERSION})`,
      });
    },
  };
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** The header's text for each version served, made once (the fence path sets it on every answer). */
const VERSION_TEXT: readonly string[] = Array.from({ length: PROTOCOL_VERSION + 1 }, (_, v) => String(v));

/**
 * A fast path's server factory (a node:http server answering some requests before Fastify)
 * with the version added: a request of a version this side serves reaches the fast path with
 * the answer's header already set; any other goes to Fastify, whose hook refuses it. The fast
 * path's own code is unchanged.
 */
export function versionedFactory<O>(factory: (handler: Handler, opts: O) => Server): (handler: Handler, opts: O) => Server {
  return (handler, opts) => {
    const server = factory(handler, opts);
    const fast = server.listeners('request') as Handler[];
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const version = served(req.headers);
      if (version === null) return handler(req, res);
      res.setHeader(PROTOCOL_HEADER, VERSION_TEXT[version] as string);
      for (const listener of fast) listener.call(server, req, res);
      return undefined;
    });
    return server;
  };
}
