import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Health } from '@hq/protocol/schemas';

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/health', { config: { scope: 'none' }, schema: { response: { 200: Health } } }, async () => ({
    status: 'ok' as const,
    role: 'arbiter' as const,
    host: app.hq.config.arbiter,
    version: app.hq.version,
  }));
};
