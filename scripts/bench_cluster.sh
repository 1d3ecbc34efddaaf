#!/usr/bin/env bash
# Multigets across a cluster: a Quiver cluster through quiver-client, the same Quiver cluster
# through its router (`quiver router`), and a Redis Cluster of as many masters through
# quiver-client, for each cluster size, side by side in one run.
#
#   scripts/bench_cluster.sh [--quick] [--out FILE] [--bin PATH]
#
# For each N in NODES: starts a Quiver cluster of N nodes and its router (scripts/cluster.sh up:
# etcd, N `quiver serve --cluster` nodes and one `quiver router`, as that script starts them)
# and a Redis Cluster of N masters (redis-server --cluster-enabled yes --save "" --appendonly
# no, each on free loopback ports; slots given by `redis-cli --cluster create` when N >= 3, by
# CLUSTER ADDSLOTSRANGE and CLUSTER MEET when N < 3, which `--cluster create` refuses); loads
# the same KEYS keys (KEY_SIZE-byte keys, VALUE_SIZE-byte values) into each with `quiver bench
# cluster --load-only`; then runs `quiver bench cluster` (THREADS threads, one multiget of
# WIDTH uniform random keys outstanding each, WARMUP s of warm-up, DURATION s measured, every
# server's CPU from /proc) ROUNDS interleaved rounds of three systems:
#   quiver         each thread its own cluster client (one request per node a multiget touches)
#   quiver-router  the same cluster, each thread one plain connection to the router (one MGET
#                  per multiget, which the router splits into one sub-command per node)
#   redis          each thread its own cluster client (one request per slot: CROSSSLOT)
# then stops both clusters. Everything started is stopped by PID, also on failure or Ctrl-C.
#
# `quiver sim vector-width --keys WIDTH --servers <NODES> --replication 1` gives the expected
# width per server for random keys (the paper's Fig. 13), printed beside the measured mean keys
# per request (per back-end: the router's come from its INFO, router_backend_commands).
#
# Every JSON line (bench cluster records, tagged nodes= and round=, and the sim's) goes to the
# --out file [docs/bench/issue11_cluster.jsonl]; a table is printed on stdout: per N and system
# the keys/s of each round, keys per server-CPU-second, requests per multiget, measured width vs
# the simulation's, and Quiver / Redis per round. For quiver-router the server CPU is the nodes'
# (row `quiver-router`) and the nodes' plus the router's (the row below it, `+ router CPU`).
# Client, servers, router and etcd share the host's cores: keys per server-CPU-second is the
# figure that compares.
#
# --quick: 100K keys, 3 s runs, one round (a smoke test of a few minutes).
# --bin PATH: the quiver binary to run [default: cargo build --release -p quiver, in
# CARGO_TARGET_DIR or target/].
#
# Environment (defaults in brackets; --quick changes the first three):
#   KEYS [1000000; quick 100000]  DURATION seconds per run [10; quick 3]  ROUNDS [2; quick 1]
#   WIDTH [32]  THREADS [4]  WARMUP seconds [1]  NODES ["1 2 3"]  KEY_SIZE [16]
#   VALUE_SIZE [32]  KEEP=1 keeps the run directory with the clusters' data (default: data
#   removed as each cluster stops, logs at the end unless the run failed).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

# Bound on each wait: a server answering, a Redis Cluster agreeing on its slots.
WAIT_S=60

die() {
  echo "bench_cluster.sh: $*" >&2
  exit 1
}

QUICK=0
OUT_FILE=docs/bench/issue11_cluster.jsonl
BIN=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --out) OUT_FILE=${2:-}; shift 2 || die "--out needs a file" ;;
    --bin) BIN=${2:-}; shift 2 || die "--bin needs a path" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench_cluster.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[ -n "$OUT_FILE" ] || die "--out needs a file"
if ((QUICK)); then
  KEYS=${KEYS:-100000}
  DURATION=${DURATION:-3}
  ROUNDS=${ROUNDS:-1}
fi
KEYS=${KEYS:-1000000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WIDTH=${WIDTH:-32}
THREADS=${THREADS:-4}
WARMUP=${WARMUP:-1}
NODES=${NODES:-1 2 3}
KEY_SIZE=${KEY_SIZE:-16}
VALUE_SIZE=${VALUE_SIZE:-32}
KEEP=${KEEP:-0}
for n in $NODES; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "NODES: $n is not a positive number"
done

# ---- tools ----
apt_install_missing redis-server:redis-server redis-cli:redis-tools jq:jq python3:python3
if [ -z "$BIN" ]; then
  echo "building quiver (release)" >&2
  cargo build --release -q -p quiver
  target=${CARGO_TARGET_DIR:-target}
  [[ $target == /* ]] || target=$repo/$target
  BIN=$target/release/quiver
fi
[ -x "$BIN" ] || die "$BIN is not an executable"
Q=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

RUN=$(mktemp -d /tmp/quiver-bench-cluster.XXXXXX)
mkdir -p "$(dirname "$OUT_FILE")"
: >"$OUT_FILE"
QUIVER_DIRS=() # clusters started with scripts/cluster.sh (stopped with its `down`)
REDIS_PIDS=()  # redis-server processes started here

# alive PID: the process exists and is not a zombie.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

stop_redis() {
  local pid
  for pid in "${REDIS_PIDS[@]}"; do
    if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for pid in "${REDIS_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  REDIS_PIDS=()
}

# Stops the Quiver clusters; their data goes too (each node holds a 1 GiB disk reserve) unless
# KEEP=1, their logs stay until the run directory is removed.
stop_quiver() {
  local d
  for d in "${QUIVER_DIRS[@]}"; do
    scripts/cluster.sh down --dir "$d" >&2 || true
    ((KEEP)) || rm -rf "$d/etcd" "$d"/node-*/
  done
  QUIVER_DIRS=()
}

cleanup() {
  local rc=$?
  stop_quiver
  stop_redis
  if ((rc != 0)); then
    echo "bench_cluster.sh failed (exit $rc); the ends of the server logs:" >&2
    tail -n 5 "$RUN"/*.log "$RUN"/q*/node-*.log "$RUN"/q*/router.log >&2 2>/dev/null || true
  fi
  if ((KEEP || rc != 0)); then echo "kept $RUN" >&2; else rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_ports N: N distinct free loopback ports (bound together, so distinct).
free_ports() {
  python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# wait_for WHAT COMMAND...: runs COMMAND until it succeeds, at most WAIT_S seconds.
wait_for() {
  local what=$1 deadline=$((SECONDS + WAIT_S))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what: not within ${WAIT_S} s"
    sleep 0.1
  done
}

# redis_cluster_ok PORT N: the node on PORT knows N masters holding all 16384 slots, state ok.
redis_cluster_ok() {
  local info
  info=$(redis-cli -p "$1" cluster info | tr -d '\r') || return 1
  grep -qx cluster_state:ok <<<"$info" &&
    grep -qx cluster_slots_assigned:16384 <<<"$info" &&
    grep -qx "cluster_known_nodes:$2" <<<"$info" &&
    grep -qx "cluster_size:$2" <<<"$info"
}

# Per cluster size, what the bench needs: seeds and server pids, by system; the router's
# address and pid (quiver-router).
declare -A SEEDS SPIDS
ROUTER=
ROUTER_PID=

# start_redis N: a Redis Cluster of N masters, no persistence.
start_redis() {
  local n=$1 ports i d p bus
  read -r -a ports <<<"$(free_ports $((2 * n)))"
  local addrs=() pids=()
  for ((i = 0; i < n; i++)); do
    p=${ports[i]}
    bus=${ports[n + i]}
    d=$RUN/redis-$n-$((i + 1))
    mkdir -p "$d"
    redis-server --port "$p" --cluster-port "$bus" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file "$d/nodes.conf" --dir "$d" --save "" --appendonly no \
      --daemonize no >"$RUN/redis-$n-$((i + 1)).log" 2>&1 </dev/null &
    REDIS_PIDS+=($!)
    pids+=($!)
    addrs+=("127.0.0.1:$p")
  done
  for ((i = 0; i < n; i++)); do
    wait_for "redis-server on port ${ports[i]}" redis-cli -p "${ports[i]}" ping
  done
  if ((n >= 3)); then
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$RUN/redis-$n-create.log" 2>&1 ||
      die "redis-cli --cluster create failed: see $RUN/redis-$n-create.log"
  else
    # What --cluster create does, by hand: distinct config epochs, an even slot split, MEET.
    for ((i = 0; i < n; i++)); do
      redis-cli -p "${ports[i]}" cluster set-config-epoch $((i + 1)) >/dev/null
      redis-cli -p "${ports[i]}" cluster addslotsrange $((i * 16384 / n)) $(((i + 1) * 16384 / n - 1)) |
        grep -qx OK || die "CLUSTER ADDSLOTSRANGE refused on port ${ports[i]}"
    done
    for ((i = 1; i < n; i++)); do
      redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "${ports[i]}" "${ports[n + i]}" | grep -qx OK ||
        die "CLUSTER MEET refused"
    done
  fi
  for ((i = 0; i < n; i++)); do
    wait_for "Redis Cluster of $n (node on port ${ports[i]}) agreeing on its slots" \
      redis_cluster_ok "${ports[i]}" "$n"
  done
  SEEDS[redis]=$(IFS=,; echo "${addrs[*]}")
  SPIDS[redis]=$(IFS=,; echo "${pids[*]}")
}

# start_quiver N: a Quiver cluster of N nodes and its router through scripts/cluster.sh.
start_quiver() {
  local n=$1 d=$RUN/q$1 line
  QUIVER_DIRS+=("$d")
  line=$(scripts/cluster.sh up --nodes "$n" --dir "$d" --bin "$Q" 2>"$RUN/quiver-$n-up.log") ||
    die "scripts/cluster.sh up --nodes $n failed: see $RUN/quiver-$n-up.log"
  SEEDS[quiver]=$(jq -r '[.nodes[] | "127.0.0.1:\(.port)"] | join(",")' <<<"$line")
  SPIDS[quiver]=$(jq -r '[.nodes[].pid] | join(",")' <<<"$line")
  ROUTER=127.0.0.1:$(jq -r '.router' <<<"$line")
  ROUTER_PID=$(jq -r '.router_pid' <<<"$line")
  [[ $ROUTER_PID =~ ^[0-9]+$ ]] || die "scripts/cluster.sh up printed no router: $line"
}

# bench SYSTEM N ARGS...: `quiver bench cluster` against SYSTEM's cluster of N (quiver-router:
# the Quiver cluster, through its router, whose CPU is counted apart).
bench() {
  local sys=$1 n=$2 cluster=$1 via=()
  shift 2
  if [ "$sys" = quiver-router ]; then
    cluster=quiver
    via=(--router "$ROUTER" --router-pid "$ROUTER_PID")
  fi
  "$Q" bench cluster --seeds "${SEEDS[$cluster]}" --server-pids "${SPIDS[$cluster]}" \
    "${via[@]}" --label "$sys" --keys "$KEYS" --key-size "$KEY_SIZE" \
    --value-size "$VALUE_SIZE" --width "$WIDTH" --threads "$THREADS" --tag nodes="$n" "$@"
}

echo "quiver sim vector-width --keys $WIDTH --servers ${NODES// /,} --replication 1" >&2
"$Q" sim vector-width --keys "$WIDTH" --servers "${NODES// /,}" --replication 1 --json \
  >>"$OUT_FILE" 2>/dev/null

for n in $NODES; do
  echo "== $n node(s): starting a Quiver cluster and a Redis Cluster" >&2
  start_quiver "$n"
  start_redis "$n"
  # quiver-router reads the keys loaded into quiver (the same cluster).
  for sys in quiver redis; do
    echo "   loading $KEYS keys into $sys (${SEEDS[$sys]})" >&2
    bench "$sys" "$n" --load-only --json
  done
  for round in $(seq 1 "$ROUNDS"); do
    for sys in quiver quiver-router redis; do
      echo "   round $round/$ROUNDS, $n node(s): $sys" >&2
      bench "$sys" "$n" --warmup-s "$WARMUP" --duration-s "$DURATION" --tag round="$round" \
        --json >>"$OUT_FILE"
    done
  done
  stop_quiver
  stop_redis
done

echo
echo "keys=$KEYS key_size=$KEY_SIZE value_size=$VALUE_SIZE width=$WIDTH threads=$THREADS duration=${DURATION}s rounds=$ROUNDS $(nproc) cores $(date -u +%FT%TZ)"
jq -rs '
  def r0: . * 100 | round / 100;
  def k: if . >= 1e6 then "\(. / 1e4 | round / 100)M" elif . >= 1e3 then "\(. / 1e3 | round)K" else "\(round)" end;
  def rank: {"quiver": 0, "quiver-router": 1, "redis": 2}[.] // 3;
  def util: .servers | map(.cpu_util) | add // 0;
  (map(select(.sim == "vector-width")) | map({key: "\(.servers)", value: .width_of_mean_exact}) | from_entries) as $sim
  | map(select(.bench == "cluster"))
  | group_by([.nodes, .system])
  | sort_by([.[0].nodes, (.[0].system | rank)])
  | (["N", "system", "keys/s per round", "keys/srv-CPU-s per round", "srv CPU util", "req/mget", "keys/req", "sim width", "CROSSSLOT"] | @tsv),
    (.[] | ([.[0].nodes, .[0].system,
            (map(.keys_per_sec | k) | join(" ")),
            (map(.keys_per_server_cpu_s // 0 | k) | join(" ")),
            (map(util | r0 | tostring) | join(" ")),
            (map(.requests_per_multiget) | add / length | r0),
            (map(.mean_keys_per_request) | add / length | r0),
            ($sim["\(.[0].nodes)"] // null | if . == null then "-" else r0 end),
            (map(.cross_slot) | add)] | @tsv),
           # Through the router: the same runs, the server CPU of the nodes and the router.
           (select(.[0].router != null)
            | [.[0].nodes, "+ router CPU", "-",
               (map(.keys_per_server_cpu_s_with_router // 0 | k) | join(" ")),
               (map(util + (.router.cpu_util // 0) | r0 | tostring) | join(" ")),
               "-", "-", "-", "-"] | @tsv))
' "$OUT_FILE" | column -t -s $'\t'

echo
echo "quiver / redis and quiver-router / redis, per round: keys/s; keys per server-CPU-second"
echo "(quiver-router: of the nodes, then of the nodes and the router)"
jq -rs '
  def r0: . * 100 | round / 100;
  def ratio(a; b): if (b // 0) > 0 and a != null then (a / b | r0 | tostring) else "-" end;
  map(select(.bench == "cluster"))
  | group_by([.nodes, .tags.round])
  | map({n: .[0].nodes,
         q: (map(select(.system == "quiver")) | .[0]),
         qr: (map(select(.system == "quiver-router")) | .[0]),
         r: (map(select(.system == "redis")) | .[0])})
  | group_by(.n)
  | .[]
  | "  N=\(.[0].n) quiver:         keys/s \(map(ratio(.q.keys_per_sec; .r.keys_per_sec)) | join(" "))   per server-CPU-s \(map(ratio(.q.keys_per_server_cpu_s; .r.keys_per_server_cpu_s)) | join(" "))",
    "  N=\(.[0].n) quiver-router:  keys/s \(map(ratio(.qr.keys_per_sec; .r.keys_per_sec)) | join(" "))   per server-CPU-s \(map(ratio(.qr.keys_per_server_cpu_s; .r.keys_per_server_cpu_s)) | join(" ")); with the router \(map(ratio(.qr.keys_per_server_cpu_s_with_router; .r.keys_per_server_cpu_s)) | join(" "))"
' "$OUT_FILE"
echo
echo "records: $OUT_FILE"
