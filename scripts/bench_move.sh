#!/usr/bin/env bash
# The time and the client-side latency of moving 1/3 of the keys of a 3-node cluster to another
# node while it serves (docs/BENCHMARKS.md, issue 11).
#
#   scripts/bench_move.sh [--keys N] [--bin PATH] [--dir D]
#
# Starts etcd and 3 nodes (scripts/cluster.sh), loads N keys (default 1000000: 16-byte keys,
# 32-byte values) through redis-py's RedisCluster, then:
#   1. a baseline: redis-benchmark --cluster (SET then GET, 8 connections) with no move;
#   2. the same benchmark while `quiver cluster move-slots` moves node-1's slots (1/3 of the
#      keys) to node-2;
#   3. the slots back to node-1 with no other load.
# Prints the benchmarks' CSV (rps, avg, min, p50, p95, p99, max) and the movers' lines (the
# time of each move). redis-benchmark's keys are its own (it tags them per node in cluster
# mode), written beside the loaded ones.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
keys=1000000
bin="$repo/target/release/quiver"
dir=$(mktemp -d /tmp/quiver-bench-move.XXXXXX)
while (($#)); do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--keys N] [--bin PATH] [--dir D]" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || cargo build --release -p quiver --manifest-path "$repo/Cargo.toml"
json=$("$repo/scripts/cluster.sh" up --nodes 3 --dir "$dir" --bin "$bin")
trap '"$repo/scripts/cluster.sh" down --dir "$dir" >/dev/null' EXIT
etcd=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["etcd"])' "$json")
port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["nodes"][0]["port"])' "$json")
echo "cluster: $json"

load_cluster_keys "$port" "$keys"
"$bin" cluster status --etcd "$etcd"

bench() {
  redis-benchmark --cluster -h 127.0.0.1 -p "$port" -t set,get -n "$1" -c 8 -r "$keys" -d 32 --csv 2>/dev/null | grep -v '^"test"' || true
}
echo "## baseline (no move): test, rps, avg, min, p50, p95, p99, max (ms)"
bench 400000
# redis-benchmark learns the masters at its start and fails on a MOVED to a node it does not
# know: so the loaded move goes to a node that serves slots already (node-1 to node-2), and
# the quiet one brings the slots back.
echo "## during the move of node-1's slots to node-2"
bench 400000 >"$dir/during.csv" &
b=$!
sleep 1
"$bin" cluster move-slots --etcd "$etcd" --slots 0-5460 --to node-2 --timeout-s 600
wait "$b"
grep -v '^"test"' "$dir/during.csv" | grep '^"' || echo "(redis-benchmark failed: $dir/during.csv)"
"$bin" cluster status --etcd "$etcd"
echo "## the slots back to node-1, no other load"
"$bin" cluster move-slots --etcd "$etcd" --slots 0-5460 --to node-1 --timeout-s 600
"$bin" cluster status --etcd "$etcd"
grep -h "range thawed" "$dir"/node-*.log | sed 's/^.*cluster: range thawed/range thawed/' || true
