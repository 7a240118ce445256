/** The agent's listeners: the bodies its routes validate and the answers they declare. */
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

export const SteppedDownAnswer = Type.Object({ ok: Type.Literal(true), steppedDown: Type.Integer(), childrenGone: Type.Boolean(), ran: Type.Boolean() });

/** A pid the agent may signal: never 1 (init; a process group of 1 would be kill(-1), every process). */
const Pid = Type.Integer({ minimum: 2, maximum: 4_194_304 });
export const RunClaimBody = Type.Object(
  { role: Type.String({ minLength: 1, maxLength: 64 }), generation: GrantedGeneration, graceSeconds: Type.Number({ minimum: 0, maximum: 3600 }), supervisorPid: Pid },
  { additionalProperties: false },
);
export const RunStartedBody = Type.Object({ pgid: Pid }, { additionalProperties: false });
export const RunParams = Type.Object({ id: Type.String({ pattern: '^[0-9]{1,12}$' }) }, { additionalProperties: false });
export const RunClaimed = Type.Object({ ok: Type.Literal(true), id: Type.String() });
/** The fence's reason, or `generation-changed` (the fence says run, for another generation). */
export const RunRefused = Type.Object({ ok: Type.Literal(false), reason: Type.String() });
