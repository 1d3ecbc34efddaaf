#!/usr/bin/env bash
# The vector-interface paper's figures, reproduced on this machine, and their plots.
#
#   scripts/paper.sh [--quick]
#
# One store of KEYS keys (16 B keys, 32 B values, page-cache resident) is loaded once; Quiver is
# then restarted on it with each setting, pinned to SERVER_CORE with one worker thread, and
# `quiver bench net` drives it from CLIENT_CORE:
#
# - Direct pattern (Fig. 9-11, 12): for G in WIDTHS the server runs with max-vector-width R = G
#   and clients send MGETs of G keys (GET when G = 1). A closed loop (8 connections x 8
#   pipelined) gives the peak (Fig. 12); an open-loop rate sweep at fractions of that peak gives
#   median latency vs throughput (Fig. 9-11).
# - Intermediate queue (Fig. 10-12): for R in WIDTHS the server coalesces single GETs of all
#   connections (coalesce = adaptive, max-vector-width R); clients send single GETs from 32
#   connections, one outstanding each. Peak and sweep as above.
# - Fig. 3: raw page-cache reads (fio, 64 B random reads through mmap), keys/s of the engine in
#   process (`quiver bench local`, mmap, widths 1 and 32) and the networked G = 1 and G = 32 peaks.
# - Fig. 13: `quiver sim vector-width` (Monte Carlo, exact minimum set cover).
# All records go to OUT (JSON lines, tagged figure / pattern / G / R), and `quiver bench report`
# draws the plots into PLOTS.
#
# Environment (defaults in brackets; --quick changes the first three):
#   KEYS [1000000; quick 200000]  DURATION seconds per run [5; quick 1]  WIDTHS ["1 2 4 8 16 32";
#   quick "1 8 32"]  FRACTIONS of the peak for the sweeps ["0.1 0.3 0.5 0.7 0.8 0.9 0.95"]
#   SERVER_CORE [0]  CLIENT_CORE [1]  OUT [docs/bench/paper.jsonl]  PLOTS [docs/bench]
#   DIR [a new directory under /tmp; removed at the end unless KEEP=1]
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

quick_or_help "$@"
if ((QUICK)); then
  KEYS=${KEYS:-200000}
  DURATION=${DURATION:-1}
  WIDTHS=${WIDTHS:-1 8 32}
fi
KEYS=${KEYS:-1000000}
DURATION=${DURATION:-5}
WIDTHS=${WIDTHS:-1 2 4 8 16 32}
FRACTIONS=${FRACTIONS:-0.1 0.3 0.5 0.7 0.8 0.9 0.95}
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}
OUT=${OUT:-docs/bench/paper.jsonl}
PLOTS=${PLOTS:-docs/bench}
KEEP=${KEEP:-0}

apt_install_missing jq:jq taskset:util-linux fio:fio
echo "building quiver (release)" >&2
cargo build --release -q -p quiver
Q=$PWD/target/release/quiver

DIR=${DIR:-$(mktemp -d /tmp/quiver-paper.XXXXXX)}
mkdir -p "$DIR" "$(dirname "$OUT")" "$PLOTS"
: >"$OUT"
SERVER=
cleanup() {
  local rc=$?
  stop_pids "$SERVER"
  end_run "$rc" "$DIR" "$DIR/server.log"
}
trap cleanup EXIT

PORT=
start() { # quiver serve flags
  : >"$DIR/server.out"
  taskset -c "$SERVER_CORE" "$Q" --dir "$DIR/store" serve --port 0 --threads 1 "$@" \
    >"$DIR/server.out" 2>>"$DIR/server.log" &
  SERVER=$!
  PORT=$(served_port "$DIR/server.out")
}
stop() { kill "$SERVER" && wait "$SERVER" || true; SERVER=; }

net() { # bench net arguments
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "$PORT" --server-pid "$SERVER" --system quiver \
    --keys "$KEYS" --json --warmup-s 0.5 --duration-s "$DURATION" "$@"
}

echo "== loading $KEYS keys" >&2
start
net --load-only >/dev/null
stop

# peak_and_sweep PATTERN G R CONNECTIONS DEPTH -- measures the closed-loop peak (Fig. 12) and
# an open-loop sweep at FRACTIONS of it (Fig. 9-11).
peak_and_sweep() {
  local pattern=$1 g=$2 r=$3 c=$4 d=$5
  local tags=(--tag pattern="$pattern" --tag G="$g" --tag R="$r")
  local peak
  peak=$(net --width "$g" --connections "$c" --depth "$d" --tag figure=fig12 "${tags[@]}" |
    tee -a "$OUT" | jq -r '.ops_per_sec')
  local rates=()
  for f in $FRACTIONS; do rates+=("$(jq -n "$peak * $f | floor")"); done
  echo "   $pattern G=$g R=$r: peak $(jq -n "$peak * $g | floor") keys/s; sweep ${rates[*]} ops/s" >&2
  net --width "$g" --connections "$c" --rate-sweep "$(
    IFS=,
    echo "${rates[*]}"
  )" --tag figure=fig9 "${tags[@]}" >>"$OUT"
}

echo "== direct pattern: G = R" >&2
for g in $WIDTHS; do
  start --max-vector-width "$g" --coalesce off
  peak_and_sweep direct "$g" "$g" 8 8
  if [ "$g" = 1 ] || [ "$g" = 32 ]; then
    net --width "$g" --connections 8 --depth 8 --tag figure=fig3 --tag bar="networked G=$g" >>"$OUT"
  fi
  stop
done

echo "== intermediate queue: G = 1, coalesced up to R" >&2
for r in $WIDTHS; do
  start --max-vector-width "$r" --coalesce adaptive
  peak_and_sweep queue 1 "$r" 32 1
  stop
done

echo "== engine in process (Fig. 3)" >&2
taskset -c "$CLIENT_CORE" "$Q" --dir "$DIR/local" bench local --keys "$KEYS" --width 1,32 \
  --backend mmap --duration-s "$DURATION" 2>/dev/null |
  jq -c '. + {tags: {figure: "fig3", bar: "engine multi_get w\(.width) (in process)"}}' >>"$OUT"

echo "== raw page-cache reads (Fig. 3): fio, 64 B random reads through mmap, one per I/O" >&2
taskset -c "$CLIENT_CORE" fio --name=raw --filename="$DIR/fio-raw" --size=76M --ioengine=mmap \
  --rw=randread --bs=64 --time_based --runtime="$DURATION" --output-format=json 2>/dev/null |
  jq -c '{bench: "fio", keys_per_sec: .jobs[0].read.iops,
          tags: {figure: "fig3", bar: "raw reads (fio mmap, 64 B)"}}' >>"$OUT"

echo "== Fig. 13: simulated vector width" >&2
"$Q" sim vector-width --json >>"$OUT"

echo "== plots into $PLOTS" >&2
"$Q" bench report --input "$OUT" --out "$PLOTS"
echo "records: $OUT" >&2
