#!/bin/sh
# hq-standby.sh TIER — one replication run of TIER (core | big | obs), the same body on every
# candidate host. `hq standby role` decides how it runs (the seeds' standby-role):
#   direct → no lease yet and this host is the default source: snapshot and push now;
#   fenced → a lease exists, or the arbiter cannot be read: snapshot under `hq fence run --role
#            cron`, so only the holder copies (during an outage its fence says quorum-standby);
#   skip   → nothing (not the default source before the first lease, or a seen generation
#            without a lease).
# Environment: HQ_CONFIG (the agent config, with its replication block) and
# HQ_REP_DEFAULT_SOURCE (the pre-lease source and its aliases, e.g. "mbp,macbookprom5"); set
# HQ_REP_SURVIVAL=1 to also send the survival subset to the arbiter (--survival).
set -eu
tier="${1:?usage: hq-standby.sh core|big|obs}"
source_hosts="${HQ_REP_DEFAULT_SOURCE:?set HQ_REP_DEFAULT_SOURCE to the pre-lease source host}"
role="$(hq standby role --default-source "$source_hosts")"
case "$role" in
  direct) exec hq standby snapshot --tier "$tier" ${HQ_REP_SURVIVAL:+--survival} ;;
  fenced) exec hq fence run --role cron -- hq standby snapshot --tier "$tier" ${HQ_REP_SURVIVAL:+--survival} ;;
  skip)   echo "hq-standby $tier: skip ($(hq standby role --default-source "$source_hosts" --json))"; exit 0 ;;
  *)      echo "hq-standby $tier: unexpected role '$role'" >&2; exit 2 ;;
esac
