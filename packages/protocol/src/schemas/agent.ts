/** The agent's listeners (SPEC §5): the bodies its routes validate and the answers they declare. */
import Type from 'typebox';
import { CONFIRM_REASONS, REPORTED_DATA_LIMITS, REPORTED_EVENTS, REPORTED_KEY_PATTERN, type ReportedCategory } from '../agent.js';
import { CadenceSeconds, GrantedGeneration, Host, Literals } from './common.js';

/** `GET /v1/fence?role=R`: the role is checked against the configured ones by the route. */
export const FenceQuery = Type.Object({ role: Type.String() }, { additionalProperties: false });

/** `POST /v1/events`: flat scalar data under camelCase keys. */
export const ReportedData = Type.Record(
  Type.String({ pattern: REPORTED_KEY_PATTERN }),
  Type.Union([Type.String({ maxLength: REPORTED_DATA_LIMITS.maxString }), Type.Number(), Type.Boolean(), Type.Null()]),
  { maxProperties: REPORTED_DATA_LIMITS.maxFields },
);
const reported = <C extends ReportedCategory>(category: C) =>
  Type.Object({ category: Type.Literal(category), event: Literals(REPORTED_EVENTS[category]), data: Type.Optional(ReportedData) }, { additionalProperties: false });
export const ReportedEventBody = Type.Union([reported('hq.standby'), reported('control')]);

export const OkAnswer = Type.Object({ ok: Type.Literal(true) });

export const ConfirmBody = Type.Object(
  {
    host: Host,
    generation: GrantedGeneration,
    ttlSeconds: Type.Optional(CadenceSeconds),
    safetyMarginSeconds: Type.Optional(Type.Number({ minimum: 0, maximum: 31_536_000 })),
  },
  { additionalProperties: false },
);
export const ConfirmAnswer = Type.Object({ confirmed: Type.Boolean(), generation: Type.Integer(), reason: Literals(CONFIRM_REASONS) });
