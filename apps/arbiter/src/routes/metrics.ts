import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';

export const metricsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { arbiter, metrics, config } = app.hq;
  app.get('/metrics', { config: { scope: 'read' } }, async (_req, reply) => {
    metrics.refresh({ state: await arbiter.read(), now: arbiter.now(), candidates: config.candidates });
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
};
