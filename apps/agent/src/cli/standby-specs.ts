/**
 * The `hq standby …` command specs alone (flags, help, exit codes), importing nothing heavy, so
 * the `hq` command table can list them without loading the replication code:
 *
 *   { spec: STANDBY_SPECS.snapshot, load: async () => (await import('./standby.js')).standbySnapshot }
 */
import { CONFIG_FLAG, JSON_FLAG, type CommandSpec } from './args.js';

const STANDBY_FLAG = {
  name: 'standby',
  kind: 'string' as const,
  value: 'DIR',
  help: 'The standby folder that holds the received generations. Default: replication.standbyDir of the config.',
};

export const STANDBY_SPECS = Object.freeze({
  snapshot: {
    name: 'standby snapshot',
    summary:
      'Builds one generation of a tier from the replication plan (there is no built-in plan: a block without replication.plan is refused, exit 2; SQLite through the online backup API, other files byte for byte, config.json without host-local keys, unchanged files reused), then pushes it to every standby agent, sending only the blobs it lacks. Run it under "hq fence run --role cron" so only the holder snapshots.',
    flags: [
      CONFIG_FLAG,
      { name: 'tier', kind: 'string', value: 'core|big|obs', help: 'The tier to snapshot. Required.', required: true },
      {
        name: 'dry-run',
        kind: 'boolean',
        help: 'Prints the plan (files, sizes, survival items, skipped paths) and writes nothing. Default: off.',
      },
      {
        name: 'no-push',
        kind: 'boolean',
        help: 'Builds the generation in the outbox without pushing it. Default: off, push to every standby.',
      },
      {
        name: 'survival',
        kind: 'boolean',
        help: 'Also sends the survival subset (plan items marked survival, never a secret) to the arbiter with the member token and, when replication.survival.s3 names a bucket, to that bucket (server-side encrypted, the oldest copies beyond its keep deleted). Default: off.',
      },
      JSON_FLAG,
    ],
    exits: '0 built and pushed, 1 refused or failed, 2 usage or config error, 3 a standby unreachable.',
  },
  verify: {
    name: 'standby verify',
    summary:
      "Checks the standby copy without promoting: each tier's latest generation lies inside its tier folder, its manifest matches the folder and the tier, SHA256SUMS is well formed and equals the manifest, no symlinks, no escapes, every checksum matches.",
    flags: [
      CONFIG_FLAG,
      STANDBY_FLAG,
      {
        name: 'tier',
        kind: 'string',
        value: 'T[,T]',
        help: 'The tiers to check (core, big, obs). Default: every tier that has a latest generation.',
      },
      {
        name: 's3',
        kind: 'boolean',
        help: "Checks the survival copies in the bucket of replication.survival.s3 instead of the standby folder: each tier's newest published copy is read back, its manifest, SHA256SUMS and every file's checksum compared (credentials from the AWS environment or profile). Default: off.",
      },
      JSON_FLAG,
    ],
    exits: '0 every tier verified, 1 a tier failed, 2 usage or config error.',
  },
  promote: {
    name: 'standby promote',
    summary:
      "Verifies each tier's latest generation, then copies them (modes and times kept) into the new state directory DIR, turns off the pollers listed in replication.pollersOff (key paths of config.json; none by default, and the summary then says pollers-off=none), injects this host's hq block and keeps config.json.pre-promote when config.json changed. DIR is removed again on any failure.",
    flags: [
      CONFIG_FLAG,
      STANDBY_FLAG,
      {
        name: 'to',
        kind: 'string',
        value: 'DIR',
        help: 'The new state directory; it must not exist and must lie outside the standby and hq-config folders. Required.',
        required: true,
      },
      { name: 'tiers', kind: 'string', value: 'T[,T]', help: 'The tiers to promote. Default: core,big.' },
      {
        name: 'hq-config',
        kind: 'string',
        value: 'F',
        help: "A JSON file (or a folder with config.json) whose hq block, naming hq.hostName, replaces the copy's. Default: none, no hq block injected.",
      },
      { name: 'dry-run', kind: 'boolean', help: 'Verifies and prints the plan; creates nothing. Default: off.' },
      JSON_FLAG,
    ],
    exits: '0 promoted (or planned), 1 refused, 2 usage or config error.',
  },
  role: {
    name: 'standby role',
    summary:
      'Prints how this host runs its replication job: direct (no lease yet, this host is the default source), fenced (a lease exists: run the copy under hq fence run) or skip, with the reason.',
    flags: [
      CONFIG_FLAG,
      {
        name: 'default-source',
        kind: 'string',
        value: 'H[,ALIAS]',
        help: 'The host that copies before the first lease, with its aliases. Required.',
        required: true,
      },
      JSON_FLAG,
    ],
    exits: '0 with the answer on stdout, 2 usage or config error.',
  },
} satisfies Record<string, CommandSpec>);
