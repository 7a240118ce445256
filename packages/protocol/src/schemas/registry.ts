/** The fleet registry and port leases. */
import Type from 'typebox';
import type * as P from '../registry.js';
import {
  LEASE_ID_SCHEMA_PATTERN,
  MIN_TTL_MS,
  PORT_LEASE_ID_HEADER,
  RESOURCE_ID_MAX_LENGTH,
  RESOURCE_ID_SCHEMA_PATTERN,
} from '../registry.js';
import { Host } from './common.js';

export const ResourceId = Type.String({ pattern: RESOURCE_ID_SCHEMA_PATTERN, maxLength: RESOURCE_ID_MAX_LENGTH });
export const Purpose = Type.String({ pattern: RESOURCE_ID_SCHEMA_PATTERN, maxLength: RESOURCE_ID_MAX_LENGTH });
export const LeaseId = Type.String({ pattern: LEASE_ID_SCHEMA_PATTERN });
const Millis = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
/** Asked TTL: at least a second; anything above 24 h is clamped, not refused. */
const TtlMs = Type.Integer({ minimum: MIN_TTL_MS, maximum: Number.MAX_SAFE_INTEGER });
const Kind = Type.Union([Type.Literal('machine'), Type.Literal('instance')]);

/** Attribute keys: identifiers; `constructor`/`prototype` refused, `__proto__` fails the pattern. */
const ATTR_KEY = '^(?!(?:constructor|prototype)$)[A-Za-z][A-Za-z0-9_]{0,31}$';
const Scalar = Type.Union([Type.String({ maxLength: 256 }), Type.Number(), Type.Boolean(), Type.Null()]);
const AttrValue = Type.Union([
  Scalar,
  Type.Array(Type.Union([Type.String({ maxLength: 64 }), Type.Number()]), { maxItems: 64 }),
]);
export const AttrsIn = Type.Record(Type.String({ pattern: ATTR_KEY }), AttrValue, {
  additionalProperties: false,
  maxProperties: 32,
});
const AttrsOut = Type.Unsafe<P.Resource['attrs']>(Type.Object({}, { additionalProperties: true }));

export const RegisterBody = Type.Object(
  {
    id: ResourceId,
    name: Type.String({ minLength: 1, maxLength: 128 }),
    kind: Kind,
    machine: Host,
    attrs: AttrsIn,
    observedAt: Millis,
    ttlMs: TtlMs,
  },
  { additionalProperties: false },
);

export const ResourceParams = Type.Object({ id: ResourceId }, { additionalProperties: false });
export const ResourceHeartbeatBody = Type.Object({ attrs: Type.Optional(AttrsIn) }, { additionalProperties: false });
export const ResourcesQuery = Type.Object(
  { kind: Type.Optional(Kind), machine: Type.Optional(Host) },
  { additionalProperties: false },
);

export const ResourceOut = Type.Object({
  id: Type.String(),
  name: Type.String(),
  kind: Kind,
  machine: Type.String(),
  owner: Type.String(),
  attrs: AttrsOut,
  observedAt: Type.Number(),
  ttlMs: Type.Integer(),
  registeredAt: Type.Number(),
  renewedAt: Type.Number(),
  expiresAt: Type.Number(),
});
export const ResourcesAnswer = Type.Object({ resources: Type.Array(ResourceOut), now: Type.Number() });
export const Deleted = Type.Object({ ok: Type.Literal(true), id: Type.String() });

export const PortLeaseBody = Type.Object(
  {
    machine: Host,
    purpose: Purpose,
    ttlMs: TtlMs,
    excluded: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: 64 })),
  },
  { additionalProperties: false },
);
/** Path parameters are strings (no coercion): 1–5 digits, range-checked in the handler. */
export const PortParams = Type.Object(
  { port: Type.String({ pattern: '^[0-9]{1,5}$' }) },
  { additionalProperties: false },
);
export const LeaseIdHeaders = Type.Object({ [PORT_LEASE_ID_HEADER]: LeaseId });

export const PortLeaseAnswer = Type.Object({
  port: Type.Integer(),
  leaseId: Type.String(),
  expiresAt: Type.Number(),
  ttlMs: Type.Integer(),
});
export const PortReleased = Type.Object({ ok: Type.Literal(true), port: Type.Integer() });
const Range = Type.Object({ from: Type.Integer(), to: Type.Integer() });
export const PortLeasesAnswer = Type.Object({
  leases: Type.Array(
    Type.Object({
      port: Type.Integer(),
      machine: Type.String(),
      purpose: Type.String(),
      createdAt: Type.Number(),
      renewedAt: Type.Number(),
      expiresAt: Type.Number(),
    }),
  ),
  bands: Type.Object({ reserved: Type.Array(Type.Integer()), test: Range, offline: Range }),
  now: Type.Number(),
});
