/**
 * Every table of `{dataDir}/hq.db`, as one numbered list: the lease record, observers, events
 * and tokens (the lease store) and the registry's resources and port leases. `meta.schema_version`
 * says how many have run; `openDatabase` runs the rest in one immediate transaction and refuses
 * a database whose version is higher than this list is long (made by a newer hq-arbiter).
 * Append, never edit: a database in the field was made by some prefix of this list.
 */
export interface Migration {
  /** 1-based; `meta.schema_version` is the version of the last migration that ran. */
  readonly version: number;
  /** Why the schema changed. */
  readonly why: string;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    why: 'the lease record (one row), the observers, the event log and the token hashes',
    sql: `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
  CREATE TABLE lease (
    name TEXT PRIMARY KEY CHECK (name = 'hq'),
    holder TEXT,
    generation INTEGER NOT NULL CHECK (generation >= 0),
    revision INTEGER NOT NULL CHECK (revision >= 0),
    acquired_at REAL,
    renewed_at REAL,
    ttl_seconds REAL NOT NULL,
    expires_at REAL,
    released INTEGER NOT NULL,
    not_before REAL,
    floor_pending INTEGER NOT NULL,
    dual_unreachable_streak INTEGER NOT NULL,
    last_check_at REAL,
    promoted_from TEXT,
    maintenance INTEGER NOT NULL,
    maintenance_reason TEXT,
    floor INTEGER NOT NULL CHECK (floor >= 0)
  ) STRICT;
  CREATE TABLE observers (
    observer TEXT PRIMARY KEY,
    view_target TEXT, view_reachable INTEGER, view_ping INTEGER, view_health INTEGER, view_at REAL,
    conf_holder TEXT, conf_generation INTEGER, conf_at REAL,
    last_heartbeat_at REAL,
    heartbeat_seconds REAL
  ) STRICT;
  CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    category TEXT NOT NULL,
    event TEXT NOT NULL,
    host TEXT,
    data TEXT NOT NULL
  ) STRICT;
  CREATE TABLE tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    machine TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('admin', 'member', 'query')),
    sha256 TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    revoked REAL
  ) STRICT;
  CREATE INDEX tokens_machine ON tokens (machine);
  `,
  },
  {
    version: 2,
    why: "each setting has one owner (S6): the record carries the arbiter's margin beside its TTL, and each observer's reported cadence is kept for the cross-side checks",
    sql: `
  ALTER TABLE lease ADD COLUMN safety_margin_seconds REAL NOT NULL DEFAULT 0;
  ALTER TABLE observers ADD COLUMN refresh_seconds REAL;
  ALTER TABLE observers ADD COLUMN request_timeout_seconds REAL;
  `,
  },
  {
    version: 3,
    // IF NOT EXISTS here only: before this migration the registry created its own tables on
    // every open of its connection, so a database at version 2 may hold them already (made by a
    // daemon) or not (made by `hq-arbiter token` or `check`). Either way it ends with both.
    why: 'the registry joins the numbered list: resources and port leases',
    sql: `
  CREATE TABLE IF NOT EXISTS resources (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('machine', 'instance')),
    machine TEXT NOT NULL,
    owner TEXT NOT NULL,
    attrs TEXT NOT NULL,
    observed_at INTEGER NOT NULL,
    ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0),
    registered_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX IF NOT EXISTS resources_kind_machine ON resources (kind, machine);
  CREATE TABLE IF NOT EXISTS port_leases (
    port INTEGER PRIMARY KEY CHECK (port BETWEEN 1 AND 65535),
    lease_id TEXT NOT NULL UNIQUE,
    machine TEXT NOT NULL,
    purpose TEXT NOT NULL,
    ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0),
    created_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) STRICT;
  `,
  },
  {
    version: 4,
    why: 'the holder a grant displaced, as JSON: its step-down acknowledgement may end the lock-delay',
    sql: `
  ALTER TABLE lease ADD COLUMN displaced TEXT;
  `,
  },
];
