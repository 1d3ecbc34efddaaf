#!/usr/bin/env bash
# Runs on the lent many-core machine, from the repo's root, over the kit scripts/device_kit.sh
# packed here: scripts/bench_cores.sh with the kit's servers, its output and JSON records into
# $OUT (the folder the device tool sends back), with the machine described first.
#
#   KIT=.kit scripts/device_grid.sh
#
# Every system the kit holds runs: quiver, and quiver-base, redis-server (one thread and
# io-threads) and valkey-server (io-threads) when it holds them. A call's command may run 10
# minutes at most: the defaults below should take 6-8 for quiver, quiver-base and redis at
# THREADS "1 4 8" (an estimate from the runs' lengths, ~6 s each with loads; not yet timed
# there); set WORKLOADS or THREADS to split a longer grid into calls.
#
# Environment (defaults in brackets; the rest as bench_cores.sh):
#   KIT [.kit]  OUT [a new folder under /tmp]  THREADS ["1 4 8"]  KEYS [1000000]
#   DURATION [3]  WARMUP [1]
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.kit}
OUT=${OUT:-$(mktemp -d /tmp/quiver-grid.XXXXXX)}
[ -x "$KIT/bin/quiver" ] || { echo "device_grid.sh: no $KIT/bin/quiver (run scripts/device_kit.sh)" >&2; exit 2; }
bin() { [ -x "$KIT/bin/$1" ] && echo "$PWD/$KIT/bin/$1"; }

{
  date -u +%FT%TZ
  uname -a
  nproc
  grep -m1 'model name' /proc/cpuinfo || true
  free -g | head -2
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

QUIVER=$(bin quiver)
BASE=$(bin quiver-base || true)
REDIS=$(bin redis-server || echo none)
VALKEY=$(bin valkey-server || true)
export QUIVER REDIS
[ -n "$BASE" ] && export BASE
[ -n "$VALKEY" ] && export VALKEY
THREADS=${THREADS:-1 4 8} KEYS=${KEYS:-1000000} DURATION=${DURATION:-3} WARMUP=${WARMUP:-1} \
  OUT="$OUT/grid.jsonl" scripts/bench_cores.sh 2>&1 | tee "$OUT/grid.txt"
