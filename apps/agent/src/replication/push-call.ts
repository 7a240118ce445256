/**
 * One request of a push to a standby (or of a survival copy to the arbiter), through the HTTP
 * client of @hq/runtime/http: the bearer token, the protocol header, one deadline for the whole
 * exchange (`Unreachable` after it; an answer after it is never acted on); and what a push
 * answers its caller.
 */
import type { Readable } from 'node:stream';
import { joinUrl, requestJson } from '@hq/runtime/http';

export interface PushOptions {
  /** The generation folder (outbox). */
  readonly dir: string;
  /** The standby agent's peer listener, e.g. `http://node-b.tailnet:8471`. */
  readonly baseUrl: string;
  readonly token: string;
  /** Per request. */
  readonly timeoutSeconds: number;
  /** Bytes per upload request (a batch of chunks, or a piece of a whole blob). */
  readonly chunkBytes: number;
}

export type PushResult =
  | {
      readonly ok: true;
      readonly tier: string;
      readonly generation: string;
      /** Bytes of the requests' bodies: manifest + sums + chunk lists + chunks (or whole blobs). */
      readonly sentBytes: number;
      /** Files the standby lacked (sent as chunk lists and the chunks it lacked, or whole). */
      readonly sentBlobs: number;
      readonly haveBlobs: number;
      /** Chunks sent (0 to a standby that takes whole blobs only). */
      readonly sentChunks: number;
    }
  | {
      readonly ok: false;
      /** `refused`: the standby said no (e.g. HQ_ERR_STALE_GENERATION); `unreachable`: no usable answer. */
      readonly kind: 'refused' | 'unreachable';
      readonly error: string | null;
      readonly message: string;
      readonly status: number | null;
      readonly sentBytes: number;
    };

export interface Answer {
  readonly status: number;
  readonly body: { [k: string]: unknown } | null;
}

export class Unreachable extends Error {}

/**
 * One request to a peer or the arbiter with the bearer token, answered within `timeoutSeconds`
 * whole (`Unreachable` otherwise); the body of the answer as an object when it is one.
 */
export async function call(
  opts: Pick<PushOptions, 'baseUrl' | 'token' | 'timeoutSeconds'>,
  method: 'POST' | 'PUT' | 'DELETE',
  path: string,
  body: string | Buffer | Readable | undefined,
  headers: Record<string, string>,
): Promise<Answer> {
  const r = await requestJson({
    method,
    url: joinUrl(opts.baseUrl, path),
    token: opts.token,
    headers,
    ...(body === undefined ? {} : { rawBody: body }),
    timeoutSeconds: opts.timeoutSeconds,
  });
  if (r.kind === 'unreachable') throw new Unreachable(r.problem);
  const v = r.body;
  const parsed = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as { [k: string]: unknown }) : null;
  return { status: r.status, body: parsed };
}

/** A push that failed on an answer: refused by the standby, or unreachable (a 5xx without a catalog code). */
export function refusal(a: Answer, sentBytes: number): PushResult {
  const error = typeof a.body?.['error'] === 'string' ? (a.body['error'] as string) : null;
  const message = typeof a.body?.['message'] === 'string' ? (a.body['message'] as string) : `HTTP ${a.status}`;
  return {
    ok: false,
    kind: a.status >= 500 && error === null ? 'unreachable' : 'refused',
    error,
    message,
    status: a.status,
    sentBytes,
  };
}
