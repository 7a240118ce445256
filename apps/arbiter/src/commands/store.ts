/**
 * The commands that copy a store's state: `hq-arbiter backup` (a file), `migrate` (SQLite into an
 * etcd prefix) and `import elanous` (the old system's record as the generation floor).
 */
import { flagBool, flagString, usage } from '@hq/runtime/cli';
import { etcdStoreOf } from '../config.js';
import { config, noWords, withStore, type Invocation } from './context.js';

export async function backupCommand({ p, words, io }: Invocation): Promise<number> {
  noWords('backup', words);
  const to = flagString(p, 'to');
  if (to === undefined) throw usage('backup needs --to FILE');
  const cfg = await config(p);
  await withStore(cfg, (store) => store.backup(to));
  io.out(`backup written to ${to}\n`);
  return 0;
}

export async function migrateCommand({ p, words, io, clock }: Invocation): Promise<number> {
  noWords('migrate', words);
  const from = flagString(p, 'from');
  const to = flagString(p, 'to');
  if (from === undefined || !from.startsWith('sqlite:') || from.length === 'sqlite:'.length)
    throw usage("migrate needs --from sqlite:PATH (the SQLite arbiter's dataDir or its hq.db)");
  if (to === undefined || !to.startsWith('etcd:') || to.length === 'etcd:'.length)
    throw usage("migrate needs --to etcd:URL[,URL…] (the etcd members' client URLs)");
  const target = etcdStoreOf(to.slice('etcd:'.length).split(','), flagString(p, 'prefix'));
  if ('key' in target) throw usage(`${target.key === 'store.prefix' ? '--prefix' : '--to'}: ${target.message}`);
  const { EtcdClient } = await import('../store/etcd/client.js');
  const { databaseFileOf, migrateSqliteToEtcd } = await import('../store/etcd/migrate.js');
  try {
    databaseFileOf(from.slice('sqlite:'.length));
  } catch (err) {
    throw usage((err as Error).message);
  }
  const client = new EtcdClient({
    endpoints: target.endpoints,
    dialTimeoutMs: target.dialTimeoutMs,
    requestTimeoutMs: target.requestTimeoutMs,
  });
  try {
    const r = await migrateSqliteToEtcd({ path: from.slice('sqlite:'.length) }, client, target.prefix, clock.now());
    if (flagBool(p, 'json')) io.out(`${JSON.stringify(r)}\n`);
    else {
      io.out(
        `migrated ${r.from} to etcd ${target.endpoints.join(',')} ${r.prefix}: holder ${r.holder ?? 'none'}, generation ${r.generation}, floor ${r.floor}; ` +
          `${r.tokens} token(s), ${r.events} event(s), ${r.resources} resource(s), ${r.portLeases} port lease(s); ${r.keys} keys\n`,
      );
      io.err(
        "hq-arbiter: now stop the SQLite arbiter before any etcd arbiter starts, then point the agents' arbiterUrls at the etcd arbiters\n",
      );
    }
    return 0;
  } catch (err) {
    const { PrefixNotEmptyError } = await import('../store/etcd/lease.js');
    if (!(err instanceof PrefixNotEmptyError)) throw err;
    io.err(`hq-arbiter: migrate: ${err.message}; nothing was written\n`);
    return 1;
  } finally {
    await client.close();
  }
}

export async function importElanousCommand({ p, words, io, clock }: Invocation): Promise<number> {
  if (words.length > 0) throw usage(`import elanous takes no further arguments (got "${words[0]}")`);
  const file = flagString(p, 'lease');
  if (file === undefined)
    throw usage('import elanous needs --lease FILE (the old lease record, ~/.elanous-hq/lease.json)');
  const json = flagBool(p, 'json');
  const cfg = await config(p);
  const mod = await import('../import-elanous.js');
  const old = await mod.readOldLease(file, cfg.ttlSeconds);
  if (!old.ok) {
    if (json) io.out(`${JSON.stringify({ ok: false, problem: old.problem })}\n`);
    io.err(`hq-arbiter: import elanous: ${old.problem}; nothing changed\n`);
    return 1;
  }
  const now = clock.now() / 1000;
  const dryRun = flagBool(p, 'dry-run');
  const blank = dryRun ? mod.notCreatedYet(cfg) : null;
  const r =
    blank !== null
      ? mod.dryImport(blank, cfg, old.value, now)
      : await withStore(cfg, (store) => mod.importElanous(store, cfg, old.value, now, dryRun));
  if (json) io.out(`${JSON.stringify({ ...r.answer, dryRun, old: r.old })}\n`);
  if (!r.answer.ok) {
    io.err(`hq-arbiter: import elanous: ${mod.describeImport(r)}\n`);
    return 1;
  }
  if (!json) io.out(`${mod.describeImport(r)}\n`);
  if (!dryRun)
    io.err(
      "hq-arbiter: import elanous: retire the elanous arbiter-check line of this host's crontab now if it is still there: elanous must not promote any more\n",
    );
  return 0;
}
