import { PROTOCOL_VERSION } from '@hq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';

export const metricsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { arbiter, metrics, config, version } = app.hq;
  app.get('/metrics', { config: { scope: 'read' } }, async (_req, reply) => {
    const versions = new Map([
      ...arbiter.notes.hostVersions(),
      [config.arbiter, { protocol: PROTOCOL_VERSION, release: version }],
    ]);
    metrics.refresh({
      state: await arbiter.read(),
      now: arbiter.now(),
      candidates: config.candidates,
      versions,
      peerPaths: arbiter.notes.peerPathsOf(),
    });
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
};
