#!/usr/bin/env bash
# Compaction paced or not, side by side: two Quiver servers of the same build, one with the
# default `compaction-cpu-share` (0.25) and one unpaced (1), both pinned to SERVER_CORE, the
# load generator on CLIENT_CORE, each loaded with KEYS keys. Per round and server: SET and
# MSET-32 closed loop (8 connections x 32 / x 4 pipelined), then open loop at SET_RATE and
# MSET_RATE operations/s; after the load and after each run the server's garbage ratio and
# longest maintenance stall (INFO persistence). After each run the server is let settle (lib.sh
# `settle`): the CPU its deferred compaction takes is printed and counted in a keys per CPU
# second of its own, and runs in neither server's next window (both share SERVER_CORE).
#
#   scripts/bench_pacing.sh
#
# Environment: KEYS [1000000]  VALUE_SIZE [32]  SET_RATE [250000]  MSET_RATE [10000]
#   DURATION seconds per run [5]  ROUNDS [2]  SERVER_CORE [0]  CLIENT_CORE [1]
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

no_args_or_help "$@"
KEYS=${KEYS:-1000000}
VALUE_SIZE=${VALUE_SIZE:-32}
SET_RATE=${SET_RATE:-250000}
MSET_RATE=${MSET_RATE:-10000}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-2}
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}

cargo build --release -q -p quiver
Q=target/release/quiver
RUN=$(mktemp -d /tmp/quiver-pacing.XXXXXX)
declare -A PORT PID
cleanup() {
  local rc=$?
  stop_pids "${PID[@]}"
  end_run "$rc" "$RUN"
}
trap cleanup EXIT

for s in paced unpaced; do
  mkdir -p "$RUN/$s"
  share=0.25
  [ "$s" = unpaced ] && share=1
  printf 'compaction-cpu-share = %s\n' "$share" >"$RUN/$s/quiver.toml"
  taskset -c "$SERVER_CORE" "$Q" --dir "$RUN/$s/data" serve --config "$RUN/$s/quiver.toml" \
    --port 0 --threads 1 --durability os >"$RUN/$s/out" 2>"$RUN/$s/log" &
  PID[$s]=$!
  PORT[$s]=$(served_port "$RUN/$s/out")
done

bench() { # $1 server, then bench net arguments
  local s=$1
  shift
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "${PORT[$s]}" --server-pid "${PID[$s]}" \
    --system "$s" --keys "$KEYS" --key-size 16 --value-size "$VALUE_SIZE" "$@" 2>&1 |
    { grep -E ' closed:| open:' || true; } | sed 's/^quiver bench: //'
}
maintenance() { # $1 server
  redis-cli -p "${PORT[$1]}" info persistence | tr -d '\r' |
    grep -E '^(garbage_ratio|maintenance_stall_max_us|maintenance_stall_max_by):' | tr '\n' ' '
  echo
}

for s in paced unpaced; do
  bench "$s" --load-only >/dev/null
  echo "$s after the load of $KEYS keys: $(maintenance "$s")"
  settle "${PID[$s]}" >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS, $KEYS keys of $VALUE_SIZE B"
  for run in "--width 1 --connections 8 --depth 32" "--width 1 --connections 8 --rate $SET_RATE" \
    "--width 32 --connections 8 --depth 4" "--width 32 --connections 8 --rate $MSET_RATE"; do
    read -r -a args <<<"$run"
    for s in paced unpaced; do
      line=$(bench "$s" "${args[@]}" --get-ratio 0 --duration-s "$DURATION" --warmup-s 1)
      echo "$line"
      echo "  $(maintenance "$s")"
      # The compaction the run left behind, charged to it (and kept out of the next run).
      settled=$(settle "${PID[$s]}")
      echo "  settling after the run: $settled CPU s; $(awk -v l="$line" -v x="$settled" 'BEGIN {
        if (match(l, /server [0-9.]+ CPU s \([0-9]+ keys per CPU s/)) {
          split(substr(l, RSTART, RLENGTH), f, " "); keys = f[2] * substr(f[5], 2)
          printf "%d keys per CPU s counting it", keys / (f[2] + x) } }')"
    done
  done
done
