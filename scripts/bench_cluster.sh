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
# Replication (issue 12): REPLICAS="1 2 3" starts, per N, one Quiver cluster per chain length R
# <= N (`scripts/cluster.sh up --replicas R`, each with its router), all up at once so that the
# rounds interleave them; with R > 1 the cluster clients read multigets from replicas too
# (`--read-from-replicas`: the fewest nodes), and the router plans its MGETs the same way.
# OPS="mget mset" measures multisets too (`--op mset`: WIDTH random keys each, every member
# of a key's chain applies it). The Redis Cluster (no replicas) is the baseline of every R.
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
#   VALUE_SIZE [32]  REPLICAS ["1"]  OPS ["mget"]  KEEP=1 keeps the run directory with the clusters' data (default: data
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
REPLICAS=${REPLICAS:-1}
OPS=${OPS:-mget}
for n in $NODES; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "NODES: $n is not a positive number"
done
for r in $REPLICAS; do
  [[ $r =~ ^[1-3]$ ]] || die "REPLICAS: $r is not 1, 2 or 3"
done
for op in $OPS; do
  [[ $op =~ ^(mget|mset)$ ]] || die "OPS: $op is not mget or mset"
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
  # A failed run is kept, to be looked into.
  ((rc == 0)) || KEEP=1
  end_run "$rc" "$RUN" "$RUN"/*.log "$RUN"/q*/node-*.log "$RUN"/q*/router.log
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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

# Per cluster size, what the bench needs, by cluster (`redis`, `quiver-R` for chains of R):
# seeds and server pids, the router's address and pid.
declare -A SEEDS SPIDS ROUTER ROUTER_PID

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

# start_quiver N R: a Quiver cluster of N nodes, chains of R, and its router through
# scripts/cluster.sh (cluster `quiver-R`).
start_quiver() {
  local n=$1 r=$2 d=$RUN/q$1r$2 line
  QUIVER_DIRS+=("$d")
  line=$(scripts/cluster.sh up --nodes "$n" --replicas "$r" --dir "$d" --bin "$Q" \
    2>"$RUN/quiver-$n-r$r-up.log") ||
    die "scripts/cluster.sh up --nodes $n --replicas $r failed: see $RUN/quiver-$n-r$r-up.log"
  SEEDS[quiver-$r]=$(jq -r '[.nodes[] | "127.0.0.1:\(.port)"] | join(",")' <<<"$line")
  SPIDS[quiver-$r]=$(jq -r '[.nodes[].pid] | join(",")' <<<"$line")
  ROUTER[quiver-$r]=127.0.0.1:$(jq -r '.router' <<<"$line")
  ROUTER_PID[quiver-$r]=$(jq -r '.router_pid' <<<"$line")
  [[ ${ROUTER_PID[quiver-$r]} =~ ^[0-9]+$ ]] || die "scripts/cluster.sh up printed no router: $line"
}

# bench SYSTEM N R OP ARGS...: `quiver bench cluster` doing OP against SYSTEM's cluster of N
# (quiver and quiver-router: the one with chains of R; quiver-router through its router, whose
# CPU is counted apart; with R > 1 quiver's clients read from replicas).
bench() {
  local sys=$1 n=$2 r=$3 op=$4 cluster=redis via=()
  shift 4
  case $sys in
    quiver) cluster=quiver-$r ;;
    quiver-router)
      cluster=quiver-$r
      via=(--router "${ROUTER[$cluster]}" --router-pid "${ROUTER_PID[$cluster]}")
      ;;
  esac
  if [ "$sys" = quiver ] && ((r > 1)); then via=(--read-from-replicas); fi
  "$Q" bench cluster --seeds "${SEEDS[$cluster]}" --server-pids "${SPIDS[$cluster]}" \
    "${via[@]}" --label "$sys" --keys "$KEYS" --key-size "$KEY_SIZE" \
    --value-size "$VALUE_SIZE" --width "$WIDTH" --threads "$THREADS" --op "$op" \
    --tag nodes="$n" --tag replicas="$r" --tag op="$op" "$@"
}

echo "quiver sim vector-width --keys $WIDTH --servers ${NODES// /,} --replication ${REPLICAS// /,}" >&2
"$Q" sim vector-width --keys "$WIDTH" --servers "${NODES// /,}" --replication "${REPLICAS// /,}" \
  --json >>"$OUT_FILE" 2>/dev/null

for n in $NODES; do
  rs=()
  for r in $REPLICAS; do ((r <= n)) && rs+=("$r"); done
  echo "== $n node(s): starting Quiver clusters (chains of ${rs[*]}) and a Redis Cluster" >&2
  for r in "${rs[@]}"; do start_quiver "$n" "$r"; done
  start_redis "$n"
  # quiver-router reads the keys loaded into quiver (the same cluster).
  for r in "${rs[@]}"; do
    echo "   loading $KEYS keys into quiver, chains of $r (${SEEDS[quiver-$r]})" >&2
    bench quiver "$n" "$r" mset --load-only --json
  done
  echo "   loading $KEYS keys into redis (${SEEDS[redis]})" >&2
  bench redis "$n" 1 mset --load-only --json
  for round in $(seq 1 "$ROUNDS"); do
    for op in $OPS; do
      for r in "${rs[@]}"; do
        for sys in quiver quiver-router; do
          echo "   round $round/$ROUNDS, $n node(s), chains of $r, $op: $sys" >&2
          bench "$sys" "$n" "$r" "$op" --warmup-s "$WARMUP" --duration-s "$DURATION" \
            --tag round="$round" --json >>"$OUT_FILE"
        done
      done
      echo "   round $round/$ROUNDS, $n node(s), $op: redis" >&2
      bench redis "$n" 1 "$op" --warmup-s "$WARMUP" --duration-s "$DURATION" \
        --tag round="$round" --json >>"$OUT_FILE"
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
  def reps: if .system == "redis" then "-" else (.tags.replicas // "1") end;
  (map(select(.sim == "vector-width")) | map({key: "\(.servers)-\(.replication)", value: .width_of_mean_exact}) | from_entries) as $sim
  | map(select(.bench == "cluster"))
  | group_by([.nodes, (.op // "mget"), reps, .system])
  | sort_by([.[0].nodes, (.[0].op // "mget"), (.[0] | reps), (.[0].system | rank)])
  | (["N", "R", "op", "system", "keys/s per round", "keys/srv-CPU-s per round", "srv CPU util", "req/op", "keys/req", "sim width", "CROSSSLOT"] | @tsv),
    (.[] | ([.[0].nodes, (.[0] | reps), (.[0].op // "mget"), .[0].system,
            (map(.keys_per_sec | k) | join(" ")),
            (map(.keys_per_server_cpu_s // 0 | k) | join(" ")),
            (map(util | r0 | tostring) | join(" ")),
            (map(.requests_per_multiget) | add / length | r0),
            (map(.mean_keys_per_request) | add / length | r0),
            (if (.[0].op // "mget") == "mget" then ($sim["\(.[0].nodes)-\(if .[0].system == "redis" then "1" else (.[0].tags.replicas // "1") end)"] // null) else null end
             | if . == null then "-" else r0 end),
            (map(.cross_slot) | add)] | @tsv),
           # Through the router: the same runs, the server CPU of the nodes and the router.
           (select(.[0].router != null)
            | [.[0].nodes, (.[0] | reps), (.[0].op // "mget"), "+ router CPU", "-",
               (map(.keys_per_server_cpu_s_with_router // 0 | k) | join(" ")),
               (map(util + (.router.cpu_util // 0) | r0 | tostring) | join(" ")),
               "-", "-", "-", "-"] | @tsv))
' "$OUT_FILE" | column -t -s $'\t'

echo
echo "per round, against redis (same N and op): keys/s; keys per server-CPU-second"
echo "(quiver-router: of the nodes, then of the nodes and the router); and against chains of 1"
jq -rs '
  def r0: . * 100 | round / 100;
  def ratio(a; b): if (b // 0) > 0 and a != null then (a / b | r0 | tostring) else "-" end;
  map(select(.bench == "cluster"))
  | map(. + {op: (.op // "mget"), reps: (.tags.replicas // "1")})
  | group_by([.nodes, .op, .tags.round])
  | map(. as $g
      | ($g | map(select(.system == "redis")) | .[0]) as $r
      | $g | map(select(.system != "redis"))
      | map({n: .nodes, op: .op, reps: .reps, sys: .system, round: .tags.round, rec: .,
             r: $r,
             one: ($g | map(select(.system == "quiver" and .reps == "1")) | .[0])}))
  | flatten
  | group_by([.n, .op, .reps, .sys])
  | .[]
  | "  N=\(.[0].n) \(.[0].op) R=\(.[0].reps) \(.[0].sys):  keys/s \(map(ratio(.rec.keys_per_sec; .r.keys_per_sec)) | join(" "))   per server-CPU-s \(map(ratio(.rec.keys_per_server_cpu_s; .r.keys_per_server_cpu_s)) | join(" "))\(if .[0].sys == "quiver-router" then "; with the router \(map(ratio(.rec.keys_per_server_cpu_s_with_router; .r.keys_per_server_cpu_s)) | join(" "))" else "" end)   vs quiver R=1 per server-CPU-s \(map(ratio(.rec.keys_per_server_cpu_s; .one.keys_per_server_cpu_s)) | join(" "))"
' "$OUT_FILE"
echo
echo "records: $OUT_FILE"
