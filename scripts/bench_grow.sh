#!/usr/bin/env bash
# Growing a replicated cluster while it serves (docs/BENCHMARKS.md, issue 35): the time of
# `add-node` + `rebalance` from 3 to 4 nodes with chains of 3, and the clients' latency
# meanwhile.
#
#   scripts/bench_grow.sh [--keys N] [--bin PATH] [--dir D]
#
# Starts etcd, 3 nodes in chains of 3, a spare node, the manager and the router
# (scripts/cluster.sh up --spare 1), loads N keys (default 1000000: 16-byte keys, 32-byte
# values) through redis-py's RedisCluster, then runs redis-benchmark (8 connections, SET and
# GET as separate runs, `-n` requests over the N keys) through the router:
#   1. before: SET, then GET, on 3 nodes;
#   2. during: SET while `add-node node-4` and `rebalance` move a quarter of the heads and of
#      the copies to node-4, member by member;
#   3. after: SET, then GET, on 4 nodes;
# then `remove-node node-4` with no other load (its chains get replacements first).
# Each run prints one CSV line: phase, test, rps, avg, p50, p99, max (ms), the CPU seconds
# the nodes used during it (all of them, the spare included) and the requests per node-CPU
# second. The router is the client's way in: it follows the topology, so the benchmark never
# sees a node it does not know. Also the times the CLI reports, and the topology after each
# step.
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

pids=$(python3 -c 'import json,sys; print(" ".join(str(n["pid"]) for n in json.loads(sys.argv[1])["nodes"]))' "$json")
nodes_cpu() {
  local pid total=0
  for pid in $pids; do total=$(awk -v a="$total" -v b="$(cpu_seconds "$pid")" 'BEGIN { print a + b }'); done
  echo "$total"
}
# bench PHASE TEST N: one redis-benchmark run of N requests; its CSV line with the nodes' CPU.
bench() {
  local before line
  before=$(nodes_cpu)
  line=$(redis-benchmark -h 127.0.0.1 -p "$router" -t "$2" -n "$3" -c 8 -r "$keys" -d 32 --csv 2>/dev/null | grep '^"' | grep -v '^"test"') ||
    line="(redis-benchmark failed)"
  python3 - "$1" "$line" "$before" "$(nodes_cpu)" "$3" <<'PY'
import sys
phase, line, before, after, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
f = [x.strip('"') for x in line.split(",")]
cpu = after - before
# redis-benchmark --csv: test, rps, avg, min, p50, p95, p99, max
print(f"{phase},{f[0]},{f[1]},{f[2]},{f[4]},{f[6]},{f[7]},{cpu:.2f},{n / cpu:.0f}")
PY
}
echo "## phase, test, rps, avg, p50, p99, max (ms), nodes' CPU s, requests per node-CPU-s"
bench before SET 200000
bench before GET 200000
bench during SET 200000 >"$dir/during.csv" &
b=$!
sleep 1
start=$(date +%s.%N)
"$bin" cluster add-node --etcd "$etcd" --node node-4 >/dev/null
"$bin" cluster rebalance --etcd "$etcd" --timeout-s 600 >"$dir/rebalance.out"
echo "add-node + rebalance: $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)") s ($(head -n 1 "$dir/rebalance.out"))"
wait "$b"
cat "$dir/during.csv"
bench after SET 200000
bench after GET 200000
"$bin" cluster status --etcd "$etcd"
echo "## remove-node node-4, no other load"
"$bin" cluster remove-node --etcd "$etcd" --node node-4 --timeout-s 600 | head -n 1
"$bin" cluster status --etcd "$etcd"
