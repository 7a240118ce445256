/**
 * The watch stream: events from a revision on, in batches, until aborted or broken. Apart from the
 * one-shot calls because a stream's life (open, lines, cancel, compaction) is its own story.
 */
import type { WatchBatch, WatchOptions } from './client-types.js';
import { classifyAnswer, EtcdError } from './errors.js';
import type { GatewayTransport } from './transport.js';
import { b64, big, kvOf, prefixEnd, type WireWatch } from './wire.js';

/** What `EtcdClient.watch` yields and throws (there). */
export async function* watchStream(
  transport: GatewayTransport,
  key: string,
  options: WatchOptions,
): AsyncGenerator<WatchBatch, void, undefined> {
  const create: Record<string, unknown> = { key: b64(key), start_revision: String(options.startRevision) };
  if (options.prefix === true) create['range_end'] = prefixEnd(key);
  if (options.prevKv === true) create['prev_kv'] = true;
  const stream = await transport.openStream('/v3/watch', { create_request: create }, options.signal);
  if (stream === null) return;
  try {
    for await (const line of stream.lines) {
      const msg = JSON.parse(line) as { result?: WireWatch; error?: { grpc_code?: number; message?: string } };
      if (msg.error !== undefined)
        throw classifyAnswer(
          msg.error.grpc_code ?? 14,
          msg.error.message ?? 'watch failed',
          false,
          `${stream.endpoint}/v3/watch`,
        ).error;
      const r = msg.result ?? {};
      if (r.canceled === true) {
        const compact = big(r.compact_revision);
        if (compact > 0n)
          throw new EtcdError(
            'compacted',
            `etcd ${stream.endpoint}/v3/watch: revision ${options.startRevision} is compacted (compact revision ${compact}): re-read, then watch from the read's revision`,
            { compactRevision: compact },
          );
        throw new EtcdError(
          'unavailable',
          `etcd ${stream.endpoint}/v3/watch: canceled: ${r.cancel_reason ?? 'no reason given'}`,
        );
      }
      if (r.events === undefined || r.events.length === 0) continue; // created, or a progress notification
      yield {
        revision: big(r.header?.revision),
        events: r.events.map((e) => ({
          type: e.type === 'DELETE' ? 'delete' : 'put',
          kv: kvOf(e.kv ?? {}),
          prevKv: e.prev_kv === undefined ? undefined : kvOf(e.prev_kv),
        })),
      };
    }
  } catch (err) {
    if (options.signal?.aborted === true) return;
    if (err instanceof EtcdError) throw err;
    throw new EtcdError(
      'unavailable',
      `etcd ${stream.endpoint}/v3/watch: the stream broke (${(err as { code?: string }).code ?? String(err)})`,
      { cause: err },
    );
  } finally {
    stream.close();
  }
  if (options.signal?.aborted === true) return;
  throw new EtcdError('unavailable', `etcd ${stream.endpoint}/v3/watch: the member closed the stream`);
}
