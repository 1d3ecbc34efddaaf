#!/usr/bin/env bash
# One hash of about a million fields (docs/BENCHMARKS.md, issue 36): HGET and HSET of one
# random field, Quiver against Redis, per server core.
#
#   scripts/bench_large_hash.sh [--rounds R] [--bin PATH]
#
# Each system in turn (Quiver `serve --threads 1`, durability os; Debian's redis-server with
# no persistence) runs on core 0; redis-benchmark on core 1 fills the hash `big` with
# 3,000,000 HSETs of `f<random below 1,000,000>` to a 16-byte value (about 950,000 fields:
# a large hash in Quiver, a hashtable in Redis), then each round runs 1,000,000 HGETs and
# 1,000,000 HSETs of random fields (8 connections x 32 pipelined). Prints requests/s per
# round, the ratios Quiver / Redis per round, the server's RSS and Quiver's data directory.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
rounds=2
bin="$repo/target/release/quiver"
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d /tmp/quiver-bench-large-hash.XXXXXX)
RESULTS=$dir/results.tsv
server=""
trap 'rc=$?; stop_pids "$server"; end_run $rc "$dir" "$dir"/*.log' EXIT
value=vvvvvvvvvvvvvvvv

rps() { grep -oE '[0-9.]+ requests per second' | head -1 | cut -d' ' -f1; }
bench() { # PORT N COMMAND...
  local port=$1 n=$2
  shift 2
  taskset -c 1 redis-benchmark -p "$port" -n "$n" -r 1000000 -P 32 -c 8 -q "$@" | rps
}

# measure NAME PORT: fills the hash, then the rounds.
measure() {
  local name=$1 port=$2
  wait_listening "$port"
  taskset -c 1 redis-benchmark -p "$port" -n 3000000 -r 1000000 -P 64 -c 4 -q \
    HSET big f__rand_int__ "$value" >/dev/null
  echo "$name: HLEN big = $(redis-cli -p "$port" HLEN big)"
  local hget hset
  for round in $(seq 1 "$rounds"); do
    hget=$(bench "$port" 1000000 HGET big f__rand_int__)
    hset=$(bench "$port" 1000000 HSET big f__rand_int__ "$value")
    put "$name.hget" "$hget"
    put "$name.hset" "$hset"
    echo "$name round $round: HGET $hget/s, HSET $hset/s"
  done
  echo "$name RSS: $(ps -o rss= -p "$server") KiB"
}

port=$(free_port)
taskset -c 0 "$bin" serve --dir "$dir/quiver" --port "$port" --threads 1 >"$dir/quiver.log" 2>&1 &
server=$!
measure quiver "$port"
echo "quiver data directory: $(du -sh "$dir/quiver" | cut -f1)"
stop_pids "$server"

port=$(free_port)
taskset -c 0 redis-server --port "$port" --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
server=$!
measure redis "$port"
redis-cli -p "$port" INFO memory | grep -E '^used_memory:'
stop_pids "$server"
server=""

echo "HGET quiver / redis: $(ratios quiver.hget redis.hget)"
echo "HSET quiver / redis: $(ratios quiver.hset redis.hset)"
