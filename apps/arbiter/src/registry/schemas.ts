/**
 * The `portBands` key of the arbiter's config file (the registry's request and answer schemas
 * are the protocol's, `@hq/protocol/schemas`). This module imports nothing from the arbiter
 * (config.ts imports `PortBandsConfig` from here, so an import back would be a cycle).
 */
import Type, { type Static } from 'typebox';

const RangeIn = Type.Object(
  { from: Type.Integer({ minimum: 1, maximum: 65535 }), to: Type.Integer({ minimum: 1, maximum: 65535 }) },
  { additionalProperties: false },
);
export const PortBandsConfig = Type.Object(
  {
    reserved: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: 1024 })),
    test: Type.Optional(RangeIn),
    offline: Type.Optional(RangeIn),
  },
  { additionalProperties: false },
);
export type PortBandsConfigT = Static<typeof PortBandsConfig>;
