import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Health } from '../schemas/generated.js';

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/v1/health', { config: { scope: 'none' }, schema: { response: { 200: Health } } }, async () => {
    const base = {
      status: 'ok' as const,
      role: 'arbiter' as const,
      host: app.hq.config.arbiter,
      version: app.hq.version,
    };
    const l = app.hq.leadership ?? null;
    // Store etcd: who decides and the members' health (SQLite: the answer is unchanged).
    return l === null ? base : { ...base, store: 'etcd' as const, arbiters: l.status() };
  });
};
