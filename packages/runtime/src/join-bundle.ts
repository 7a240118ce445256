/**
 * The join bundle: what `hq-arbiter join HOST` prints and `hq join BUNDLE` redeems. It is one
 * shell word, `hq1.` + base64url(JSON), and carries no secret of the fleet's, only a one-time
 * secret the arbiter keeps as a hash:
 *
 *   {"u": arbiter URL, "h": host, "s": 64 hex one-time secret, "p": "sha256:…" arbiter identity, "e": expiry (epoch s)}
 *
 * The joining host sends the secret with a fresh nonce to `POST {u}/v1/join`; the arbiter answers
 * once, with the host's config and tokens, signed (Ed25519) over the nonce and the payload by its
 * identity key. The host accepts the answer only when the key's sha256 is the pin `p`, so an
 * address that is not the arbiter that printed the bundle cannot hand it a false fleet.
 */
import { createHash, createPublicKey, verify } from 'node:crypto';
import { isHost } from '@hq/protocol';

export const JOIN_BUNDLE_PREFIX = 'hq1.';
export const JOIN_PATH = '/v1/join';

export interface JoinBundle {
  readonly arbiterUrl: string;
  readonly host: string;
  readonly secret: string;
  readonly pin: string;
  readonly expiresAt: number;
}

/** What the arbiter signs and the host writes from: its agent config's keys and its two tokens. */
export interface JoinPayload {
  readonly host: string;
  readonly arbiter: string;
  readonly arbiterUrl: string;
  /** The other candidates' peer listeners, `{host: origin}`. */
  readonly peers: Readonly<Record<string, string>>;
  /** Every candidate's health URL, as the arbiter probes it. */
  readonly healthUrls: Readonly<Record<string, string>>;
  /** This host's peer listener, as the others reach it (its address). */
  readonly address: string;
  readonly tailnetDomain: string | null;
  /** `""` when the fleet does not use tailscale ping; null: the agent's default. */
  readonly tailscaleBin: string | null;
  /** null in a dry run: nothing was issued. */
  readonly memberToken: string | null;
  readonly peerToken: string | null;
}

/** The answer of `POST /v1/join`: the payload as signed text, the identity key, the signature. */
export interface JoinAnswer {
  readonly payload: string;
  /** The arbiter's Ed25519 public key, SPKI DER, base64. */
  readonly publicKey: string;
  /** Ed25519 over `signedText(nonce, payload)`, base64. */
  readonly signature: string;
}

const HEX64 = /^[0-9a-f]{64}$/;
const PIN = /^sha256:[0-9a-f]{64}$/;

export function encodeBundle(b: JoinBundle): string {
  const json = JSON.stringify({ u: b.arbiterUrl, h: b.host, s: b.secret, p: b.pin, e: b.expiresAt });
  return JOIN_BUNDLE_PREFIX + Buffer.from(json, 'utf8').toString('base64url');
}

/** The bundle, or one line saying why the text is not one (a truncated paste, a typo). */
export function decodeBundle(text: string): { ok: true; bundle: JoinBundle } | { ok: false; problem: string } {
  const bad = (why: string) => ({
    ok: false as const,
    problem: `not a join bundle (${why}): copy the whole word after "hq join" that hq-arbiter join printed`,
  });
  const t = text.trim();
  if (!t.startsWith(JOIN_BUNDLE_PREFIX)) return bad(`it does not start with ${JOIN_BUNDLE_PREFIX}`);
  const body = t.slice(JOIN_BUNDLE_PREFIX.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) return bad('it has characters base64url does not use');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return bad('it is cut short or altered');
  }
  const o = v as { u?: unknown; h?: unknown; s?: unknown; p?: unknown; e?: unknown };
  if (typeof o !== 'object' || o === null) return bad('it is cut short or altered');
  if (typeof o.u !== 'string' || !/^https?:\/\/[^/]+$/.test(o.u)) return bad('no arbiter URL');
  if (typeof o.h !== 'string' || !isHost(o.h)) return bad('no host');
  if (typeof o.s !== 'string' || !HEX64.test(o.s)) return bad('no secret');
  if (typeof o.p !== 'string' || !PIN.test(o.p)) return bad('no identity pin');
  if (typeof o.e !== 'number' || !Number.isFinite(o.e)) return bad('no expiry');
  return { ok: true, bundle: { arbiterUrl: o.u, host: o.h, secret: o.s, pin: o.p, expiresAt: o.e } };
}

/** What the signature covers: the host's nonce binds the answer to this one request. */
export function signedText(nonce: string, payload: string): Buffer {
  return Buffer.from(`hq-join-v1\n${nonce}\n${payload}`, 'utf8');
}

/** The pin of a public key (SPKI DER): `sha256:` + hex. */
export function identityPin(spkiDer: Uint8Array): string {
  return `sha256:${createHash('sha256').update(spkiDer).digest('hex')}`;
}

/**
 * Checks an answer against the bundle's pin and the nonce sent; returns the payload, or one line
 * saying why the answer cannot be trusted (nothing of it may be written then).
 */
export function verifyJoinAnswer(
  answer: unknown,
  pin: string,
  nonce: string,
): { ok: true; payload: JoinPayload } | { ok: false; problem: string } {
  const a = answer as Partial<JoinAnswer> | null;
  if (
    typeof a !== 'object' ||
    a === null ||
    typeof a.payload !== 'string' ||
    typeof a.publicKey !== 'string' ||
    typeof a.signature !== 'string'
  ) {
    return { ok: false, problem: 'the answer is not a join answer' };
  }
  const der = Buffer.from(a.publicKey, 'base64');
  if (identityPin(der) !== pin)
    return {
      ok: false,
      problem: `the address answered with identity ${identityPin(der)}, not the ${pin} this bundle was printed by: it is not that arbiter`,
    };
  let good = false;
  try {
    good = verify(
      null,
      signedText(nonce, a.payload),
      createPublicKey({ key: der, format: 'der', type: 'spki' }),
      Buffer.from(a.signature, 'base64'),
    );
  } catch {
    good = false;
  }
  if (!good) return { ok: false, problem: "the answer's signature does not verify with the arbiter's identity key" };
  let p: JoinPayload;
  try {
    p = JSON.parse(a.payload) as JoinPayload;
  } catch {
    return { ok: false, problem: 'the signed payload is not JSON' };
  }
  return { ok: true, payload: p };
}
