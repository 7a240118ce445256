/**
 * The agent's log lines, in the shape the arbiter writes (apps/arbiter/src/log.ts): one JSON
 * object per line with `level`, `time` (epoch milliseconds, pino's default), `pid`, `name`
 * (`hq-agent`), then the event's own keys — `category` and `event` exactly once, and
 * `host` exactly once (the host the event is about; this machine when the event names none).
 *
 * Why not pino's `base`/`child` bindings for `host` and `category`: bindings are written as they
 * are, before the line's object, so a line that names its own `category` (or `host`) would carry
 * the key twice — valid JSON text that `JSON.parse` silently collapses, and that jq, Loki and
 * journald's JSON export do not all read the same way. Defaults are filled in by the `log`
 * formatter instead, only when the line lacks the key.
 */
import pino, { type DestinationStream, type Logger } from 'pino';

type Fields = Readonly<Record<string, unknown>>;

/** A `formatters.log` that puts each default first when the line lacks it. */
function withDefaults(defaults: Fields): (o: Record<string, unknown>) => Record<string, unknown> {
  return (o) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(defaults)) if (!(k in o)) out[k] = v;
    return Object.assign(out, o);
  };
}

/** The daemon's root logger for host `host` (JSON on stdout unless `destination` says otherwise). */
export function agentLogger(host: string, destination?: DestinationStream): Logger {
  const opts = { name: 'hq-agent', base: { pid: process.pid }, formatters: { log: withDefaults({ host }) } };
  return destination === undefined ? pino(opts) : pino(opts, destination);
}

/**
 * One child logger per component: `component` as a binding, `category` (when given) and `host`
 * as defaults a line may override — never a second key.
 */
export function componentLogger(parent: Logger, host: string, component: string, category?: string): Logger {
  const defaults: Fields = category === undefined ? { host } : { category, host };
  const log = withDefaults(defaults);
  return parent.child({ component }, { formatters: { log: (o: object) => log(o as Record<string, unknown>) } });
}
