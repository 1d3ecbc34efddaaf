#!/usr/bin/env bash
# Growing a replicated cluster while it serves (docs/BENCHMARKS.md, issue 35): the time of
# `add-node` + `rebalance` from 3 to 4 nodes with chains of 3, and the clients' latency
# meanwhile.
#
#   scripts/bench_grow.sh [--keys N] [--bin PATH] [--dir D]
#
# Starts etcd, 3 nodes in chains of 3, a spare node, the manager and the router
# (scripts/cluster.sh up --spare 1), loads N keys (default 1000000: 16-byte keys, 32-byte
# values) through redis-py's RedisCluster, then:
#   1. a baseline: redis-benchmark (SET then GET, 8 connections) through the router;
#   2. the same benchmark while `add-node node-4` and `rebalance` move a quarter of the heads
#      and of the copies to node-4, member by member;
#   3. `remove-node node-4` with no other load (its chains get replacements first).
# Prints the benchmarks' CSV (rps, avg, min, p50, p95, p99, max), the times the CLI reports,
# and the topology after each step. The router is the client's way in: it follows the
# topology, so the benchmark never sees a node it does not know.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
keys=1000000
bin="$repo/target/release/quiver"
dir=$(mktemp -d /tmp/quiver-bench-grow.XXXXXX)
while (($#)); do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--keys N] [--bin PATH] [--dir D]" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || cargo build --release -p quiver --manifest-path "$repo/Cargo.toml"
json=$("$repo/scripts/cluster.sh" up --nodes 3 --replicas 3 --spare 1 --dir "$dir" --bin "$bin")
trap '"$repo/scripts/cluster.sh" down --dir "$dir" >/dev/null' EXIT
etcd=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["etcd"])' "$json")
port=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["nodes"][0]["port"])' "$json")
router=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["router"])' "$json")
echo "cluster: $json"

load_cluster_keys "$port" "$keys"
"$bin" cluster status --etcd "$etcd"

bench() {
  redis-benchmark -h 127.0.0.1 -p "$router" -t set,get -n "$1" -c 8 -r "$keys" -d 32 --csv 2>/dev/null | grep -v '^"test"' || true
}
echo "## baseline (no change), through the router: test, rps, avg, min, p50, p95, p99, max (ms)"
bench 200000
echo "## during add-node node-4 + rebalance"
bench 200000 >"$dir/during.csv" &
b=$!
sleep 1
start=$(date +%s.%N)
"$bin" cluster add-node --etcd "$etcd" --node node-4 >/dev/null
"$bin" cluster rebalance --etcd "$etcd" --timeout-s 600
echo "add-node + rebalance: $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)") s"
wait "$b"
grep '^"' "$dir/during.csv" || echo "(redis-benchmark failed: $dir/during.csv)"
"$bin" cluster status --etcd "$etcd"
echo "## remove-node node-4, no other load"
"$bin" cluster remove-node --etcd "$etcd" --node node-4 --timeout-s 600 | head -n 1
"$bin" cluster status --etcd "$etcd"
