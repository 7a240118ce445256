/**
 * The `hq doctor` command spec alone (flags, help, exit codes), importing nothing heavy, so
 * `hq --help` lists it without loading the checks.
 */
import { CONFIG_FLAG, JSON_FLAG, type CommandSpec } from './args.js';

export const DOCTOR_SPEC: CommandSpec = {
  name: 'doctor',
  summary:
    "Checks this host's side of hq and prints one line per check with ✔ or ✖ and the fix: the config and its timing rule, the state directory and file permissions, the token files, the arbiter (reachable, token accepted, clock offset, a reported generation it refused; with store etcd, etcd's database against its space quota), the peers, every host still on an older protocol version (\"mbp runs hq 0.1 (protocol 1); upgrade it\"), tailscale, the agent's socket, and the systemd unit or launchd plist.",
  flags: [
    CONFIG_FLAG,
    {
      name: 'max-offset',
      kind: 'number',
      value: 'S',
      help: "Fails the clock check when this host's clock and the arbiter's differ by more than S seconds. Default: 2.",
    },
    JSON_FLAG,
  ],
  exits: '0 every check passed (or was skipped), 1 a check failed, 2 usage error.',
};
