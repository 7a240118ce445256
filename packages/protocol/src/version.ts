/**
 * Which version of this protocol a request or an answer speaks (docs/PROTOCOL.md "Versions"), so
 * a fleet upgraded one host at a time keeps working: every request and answer between the
 * arbiter, the agents and `hq` carries the `hq-protocol` header; each side serves its own
 * version and the previous one, answers in the version it was spoken to, and refuses any other
 * with one 4xx (`HQ_ERR_PROTOCOL_VERSION`) naming both versions and what to upgrade.
 *
 * Invariants:
 *  - a message without the header speaks version 1 (hq 0.1.x sent none);
 *  - within a version the bodies stay strict: a field of a later version in a request of an
 *    earlier one is refused like any unknown field;
 *  - a field added in a later version is optional, with a documented meaning when absent, so a
 *    request of the previous version is always a valid request of this one.
 * Plain constants and pure functions: the fence path and the CLI load this subpath alone.
 */

/** The version this release speaks. */
export const PROTOCOL_VERSION = 2;

/** The oldest version this release still serves (the previous one: hq 0.1.x). */
export const PROTOCOL_PREVIOUS = 1;

/** The header, on every request and answer (lower case, as node:http reports it). */
export const PROTOCOL_HEADER = 'hq-protocol';

/** What a message without the header speaks: hq 0.1.x sent none. */
export const PROTOCOL_UNSTATED = 1;

/** The release line of a host that speaks version 1 and so never says its release. */
export const PROTOCOL_1_RELEASE = '0.1';

/**
 * A field a request gained after version 1, per route (`METHOD /path`). A client speaking to a
 * side of an earlier version leaves it out; a side refuses it in a request of an earlier version.
 */
export interface RequestField {
  /** The first version whose requests may carry it. */
  readonly since: number;
  readonly route: string;
  readonly field: string;
  /** What its absence means (docs/PROTOCOL.md "Versions" says the same). */
  readonly absent: string;
}

export const REQUEST_FIELDS: readonly RequestField[] = Object.freeze([
  Object.freeze({
    since: 2,
    route: 'POST /v1/heartbeat',
    field: 'version',
    absent: `the agent runs hq ${PROTOCOL_1_RELEASE}.x (protocol 1)`,
  }),
  Object.freeze({
    since: 2,
    route: 'POST /v1/heartbeat',
    field: 'peerPaths',
    absent:
      'the agent does not report its peer paths: the arbiter shows none for it (hq doctor on the agent still does)',
  }),
  Object.freeze({
    since: 2,
    route: 'POST /v1/lease/release',
    field: 'ran',
    absent:
      'the old holder does not say it ran its generation: a handover right after an arbiter restart waits out the start wait',
  }),
  Object.freeze({
    since: 2,
    route: 'POST /v1/lease/stepped-down',
    field: 'ran',
    absent: 'the old holder does not say it ran its generation: its acknowledgement does not end the start wait',
  }),
]);

/** The fields of `route` that a request of `version` may not carry (they came later). */
export function fieldsAfter(version: number, route: string): readonly string[] {
  return REQUEST_FIELDS.filter((f) => f.route === route && f.since > version).map((f) => f.field);
}

export type SpokenVersion =
  | { readonly ok: true; readonly version: number }
  | { readonly ok: false; readonly given: string };

/**
 * The version a message speaks, from its header: absent → 1; one decimal integer → that
 * integer; anything else (a list, a word, a sign) → not a version at all.
 */
const UNSTATED: SpokenVersion = Object.freeze({ ok: true, version: PROTOCOL_UNSTATED });
const CURRENT: SpokenVersion = Object.freeze({ ok: true, version: PROTOCOL_VERSION });
const CURRENT_TEXT = String(PROTOCOL_VERSION);

export function spokenVersion(header: string | readonly string[] | undefined): SpokenVersion {
  // The two answers of nearly every request, without a parse or an allocation (the fence path).
  if (header === undefined) return UNSTATED;
  if (header === CURRENT_TEXT) return CURRENT;
  if (typeof header !== 'string') return { ok: false, given: header.join(', ') };
  const v = header.trim();
  if (!/^[0-9]{1,6}$/.test(v)) return { ok: false, given: header };
  return { ok: true, version: Number(v) };
}

/** True when this release serves `version` (its own or the previous one). */
export function servesVersion(version: number): boolean {
  return version >= PROTOCOL_PREVIOUS && version <= PROTOCOL_VERSION;
}

/**
 * The one line of a refusal: both versions and what to upgrade. `side` names the refusing
 * daemon and its host ("hq-arbiter on cloud-vm").
 */
export function versionRefusal(given: SpokenVersion, side: string): string {
  const serves = `${side} speaks hq protocol ${PROTOCOL_PREVIOUS} to ${PROTOCOL_VERSION}`;
  if (!given.ok)
    return `${PROTOCOL_HEADER}: "${given.given.slice(0, 40)}" is not a protocol version (one integer); ${serves}`;
  if (given.version > PROTOCOL_VERSION)
    return `the request speaks hq protocol ${given.version}, newer than ${serves}: upgrade ${side}`;
  return `the request speaks hq protocol ${given.version}, older than ${serves}: upgrade the sender's hq`;
}

/** "hq 0.1 (protocol 1)": a host as the operator reads it; `release` null for a host that never said. */
export function hostVersionText(protocol: number, release: string | null): string {
  return `hq ${release ?? (protocol === 1 ? PROTOCOL_1_RELEASE : '?')} (protocol ${protocol})`;
}

/** The note for a host behind this release ("mbp runs hq 0.1 (protocol 1); upgrade it"), or null. */
export function upgradeNote(host: string, protocol: number, release: string | null): string | null {
  return protocol < PROTOCOL_VERSION ? `${host} runs ${hostVersionText(protocol, release)}; upgrade it` : null;
}
