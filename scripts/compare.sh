#!/usr/bin/env bash
# Quiver side by side with Redis 7, in one run, on one server core.
#
#   scripts/compare.sh [--quick] [--json] [--no-engine]
#
# Starts Quiver (`quiver serve --threads 1`, durability os) and Debian's redis-server twice — no
# persistence, and `appendonly yes` + `appendfsync everysec` (the persistence-fair row) — each on
# a free loopback port and pinned to SERVER_CORE, with the load generator (`quiver bench net`) on
# CLIENT_CORE. For each value size (32 B: HERD; 512 B: FAWN) the three get the same keys, then the
# workloads run interleaved (round 1: workload 1 on quiver, redis, redis-aof; workload 2 ...):
#
#   get          GET,    8 connections x 32 pipelined          uniform
#   set          SET,    8 connections x 32 pipelined          uniform
#   mget32       MGET of 32 keys, 8 connections x 4 pipelined uniform
#   mset32       MSET of 32 pairs, 8 connections x 4 pipelined uniform
#   ycsb-b-zipf  95% GET / 5% SET, 8 x 32 pipelined,           Zipf 0.99
#   mixed-50-50  50% GET / 50% SET, 8 x 32 pipelined,          uniform
#   set-open     SET, open loop at OPEN_LOAD x Redis's set peak of the run, 8 connections
#   mset32-open  MSET of 32 pairs, the same at OPEN_LOAD x Redis's mset32 peak (write tails;
#                needs redis among SYSTEMS and set / mset32 run first)
#
# After every run the server is let settle (idle, at most SETTLE_MAX seconds) before the next
# one starts: a store's deferred compaction then runs in no other system's window, and its CPU is
# counted in the run's keys per server-CPU-second (`settle cpu s`).
#
# Prints a table of keys/s, p50 / p99 latency, server CPU seconds (in the window, and settling
# after it), keys per server-CPU-second (both counted) and RSS per key for each system (means
# over rounds), the ratios Quiver / Redis and Quiver / Redis AOF, and then (unless
# --no-engine) the engine-vs-RocksDB rows of scripts/bench_engine.sh. With --json, prints
# instead one JSON object per line: every `quiver bench net` record (fields system, workload,
# value_size, keys_per_sec, p50_us, p99_us, server_cpu_s, settle_cpu_s, keys_per_cpu_s_settled,
# rss_bytes_per_key, ...), then the engine rows as {"system": "quiver-engine" | "rocksdb" |
# "fio", "workload", ...}.
# --quick: fewer keys, shorter runs, one round (a spot check in under three minutes).
# HASHES=1: the keys are hashes instead (issue 36), one data set per entry of HASH_FIELDS
# ["10 100"] (every key a hash of that many fields of HASH_VALUE_SIZE [32] bytes), and the
# workloads (no open-loop runs):
#
#   hset10        HSET of 10 fields (10-field hashes),   8 connections x 4 pipelined
#   hgetall10     HGETALL (10-field hashes),             8 connections x 4 pipelined
#   hget-mix      90% HGET / 10% HSET of one field (10-field hashes), 8 x 32 pipelined
#   hmget10of100  HMGET of 10 of 100 fields (100-field hashes), 8 x 4 pipelined
#   ycsb-a, -b, -c  YCSB's core workloads A (50% read / 50% update), B (95/5), C (reads) as its
#                 Redis binding sends them — a read is HGETALL, an update HSET of one field —
#                 on 10-field hashes, Zipf 0.99, 50 connections, one request each (YCSB's
#                 binding itself cannot run: it indexes every key in a sorted set, ZADD)
#   ycsb-d        D: 95% HGETALL / 5% inserts (HSET of a new 10-field hash past the loaded
#                 ones), reads favouring the newest keys (Zipf over recency, YCSB's "latest")
#   ycsb-f        F: 50% HGETALL / 50% read-modify-write (HGETALL, then HSET of one field of
#                 the same hash once it answered), Zipf 0.99; keys/s counts requests
#
# keys/s is then fields read or written per second (`--width` of them per request).
#
# Environment (defaults in brackets; --quick changes the first three):
#   KEYS [1000000; quick 100000]  DURATION seconds per run [10; quick 2]  ROUNDS [2; quick 1]
#   WARMUP seconds [1; quick 0.5]  VALUE_SIZES ["32 512"]  KEY_SIZE [16]
#   SERVER_CORE [0]  CLIENT_CORE [1]  OUT [a results file under the run directory]
#   OPEN_LOAD [0.7]: the open-loop runs' load, as a fraction of Redis's closed-loop peak.
#   SETTLE_MAX seconds [300]: the longest wait for a server to go idle after a run.
#   KEEP=1 keeps the data directories and raw results (default: removed at the end).
#   ONLY ["": all]: the workloads to run, by name (e.g. ONLY="get set").
#   SYSTEMS ["quiver redis redis-aof"]: the servers compared (quiver first; ratios are quiver /
#   each other one). BASE=path/to/an/older/quiver adds the system quiver-base, that binary
#   (e.g. a build of the previous commit): `SYSTEMS="quiver quiver-base" BASE=... compare.sh`
#   compares two builds the same way. Durable to power loss: quiver-fsync (`--durability
#   fsync`) and redis-always (`appendonly yes`, `appendfsync always`), whose ratio is printed
#   apart: `SYSTEMS="quiver quiver-fsync redis-always" compare.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

QUICK=0
JSON=0
ENGINE=1
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --json) JSON=1 ;;
    --no-engine) ENGINE=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument $arg" >&2; usage >&2; exit 2 ;;
  esac
done
if ((QUICK)); then
  KEYS=${KEYS:-100000}
  DURATION=${DURATION:-2}
  ROUNDS=${ROUNDS:-1}
  WARMUP=${WARMUP:-0.5}
fi
KEYS=${KEYS:-1000000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-1}
VALUE_SIZES=${VALUE_SIZES:-32 512}
HASHES=${HASHES:-0}
HASH_FIELDS=${HASH_FIELDS:-10 100}
HASH_VALUE_SIZE=${HASH_VALUE_SIZE:-32}
# The data sets: value sizes, or with HASHES=1 fields per hash.
if ((HASHES)); then SETS=$HASH_FIELDS; else SETS=$VALUE_SIZES; fi
KEY_SIZE=${KEY_SIZE:-16}
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}
KEEP=${KEEP:-0}
OPEN_LOAD=${OPEN_LOAD:-0.7}
read -r -a SYS <<<"${SYSTEMS:-quiver redis redis-aof}"
[ "${SYS[0]}" = quiver ] || { echo "compare.sh: SYSTEMS must start with quiver" >&2; exit 2; }
for sys in "${SYS[@]}"; do
  case "$sys" in
    quiver | quiver-fsync | redis | redis-aof | redis-always) ;;
    quiver-base) [ -x "${BASE:-}" ] || { echo "compare.sh: quiver-base needs BASE=path/to/quiver" >&2; exit 2; } ;;
    *) echo "compare.sh: unknown system $sys" >&2; exit 2 ;;
  esac
done

# ---- tools ----
apt_install_missing redis-server:redis-server redis-cli:redis-tools jq:jq taskset:util-linux
echo "building quiver (release)" >&2
cargo build --release -q -p quiver
Q=$PWD/target/release/quiver

RUN=$(mktemp -d /tmp/quiver-compare.XXXXXX)
OUT=${OUT:-$RUN/results.jsonl}
: >"$OUT"
PIDS=()
cleanup() {
  local rc=$?
  stop_pids "${PIDS[@]}"
  end_run "$rc" "$RUN" "$RUN"/*.log
}
trap cleanup EXIT

# Waits until something on port $1 answers PING (any RESP reply).
wait_ready() {
  local i
  for i in $(seq 1 600); do
    if redis-cli -p "$1" ping >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "compare.sh: server on port $1 did not start" >&2
  return 1
}

declare -A PORT PID
start_servers() { # $1: value size (names the data directories)
  local v=$1 d sys bin
  for sys in "${SYS[@]}"; do
    d=$RUN/$sys-$v
    mkdir -p "$d"
    case "$sys" in
      quiver | quiver-base | quiver-fsync)
        bin=$Q
        [ "$sys" = quiver-base ] && bin=$BASE
        local durability=os
        [ "$sys" = quiver-fsync ] && durability=fsync
        taskset -c "$SERVER_CORE" "$bin" --dir "$d" serve --port 0 --threads 1 --durability "$durability" \
          >"$RUN/$sys-$v.out" 2>"$RUN/$sys-$v.log" &
        PID[$sys]=$!
        PIDS+=("${PID[$sys]}")
        PORT[$sys]=$(served_port "$RUN/$sys-$v.out")
        ;;
      *)
        PORT[$sys]=$(free_port)
        local persist=(--save '' --appendonly no)
        [ "$sys" = redis-aof ] && persist=(--save '' --appendonly yes --appendfsync everysec)
        [ "$sys" = redis-always ] && persist=(--save '' --appendonly yes --appendfsync always)
        taskset -c "$SERVER_CORE" redis-server --port "${PORT[$sys]}" --bind 127.0.0.1 \
          --dir "$d" "${persist[@]}" --daemonize no >"$RUN/$sys-$v.log" 2>&1 &
        PID[$sys]=$!
        PIDS+=("${PID[$sys]}")
        ;;
    esac
  done
  for sys in "${SYS[@]}"; do wait_ready "${PORT[$sys]}"; done
}

stop_servers() {
  for sys in "${SYS[@]}"; do kill "${PID[$sys]}" 2>/dev/null || true; done
  for sys in "${SYS[@]}"; do wait "${PID[$sys]}" 2>/dev/null || true; done
}

# name|data set ("" for any)|arguments of `quiver bench net`
if ((HASHES)); then
  WORKLOADS=(
    "hset10|10|--width 10 --get-ratio 0 --connections 8 --depth 4"
    "hgetall10|10|--hgetall --width 1 --get-ratio 1 --connections 8 --depth 4"
    "hget-mix|10|--width 1 --get-ratio 0.9 --connections 8 --depth 32"
    "hmget10of100|100|--width 10 --get-ratio 1 --connections 8 --depth 4"
    "ycsb-a|10|--hgetall --width 1 --get-ratio 0.5 --distribution zipf --connections 50 --depth 1"
    "ycsb-b|10|--hgetall --width 1 --get-ratio 0.95 --distribution zipf --connections 50 --depth 1"
    "ycsb-c|10|--hgetall --width 1 --get-ratio 1 --distribution zipf --connections 50 --depth 1"
    "ycsb-d|10|--hgetall --width 1 --get-ratio 0.95 --insert-ratio 0.05 --distribution latest --connections 50 --depth 1"
    "ycsb-f|10|--hgetall --width 1 --get-ratio 0.5 --read-modify-write --distribution zipf --connections 50 --depth 1"
  )
else
  WORKLOADS=(
    "get||--width 1 --get-ratio 1 --connections 8 --depth 32"
    "set||--width 1 --get-ratio 0 --connections 8 --depth 32"
    "mget32||--width 32 --get-ratio 1 --connections 8 --depth 4"
    "mset32||--width 32 --get-ratio 0 --connections 8 --depth 4"
    "ycsb-b-zipf||--width 1 --get-ratio 0.95 --distribution zipf --zipf-theta 0.99 --connections 8 --depth 32"
    "mixed-50-50||--width 1 --get-ratio 0.5 --connections 8 --depth 32"
  )
fi

bench() { # $1 system, $2 data set (value size, or fields per hash), then bench net arguments
  local sys=$1 v=$2 data
  shift 2
  data=(--value-size "$v")
  ((HASHES)) && data=(--value-size "$HASH_VALUE_SIZE" --hash-fields "$v")
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "${PORT[$sys]}" --server-pid "${PID[$sys]}" \
    --system "$sys" --keys "$KEYS" --key-size "$KEY_SIZE" "${data[@]}" "$@"
}

# measure: `bench` with the same arguments, then the server is let settle (lib.sh `settle`);
# its result goes to OUT with the settling's CPU (`settle_cpu_s`) and the keys per server
# CPU-second counting it (`keys_per_cpu_s_settled`): compaction a write run defers is charged
# to it (in full, the warmup's share too), and runs nothing in the next system's window.
measure() {
  local sys=$1 line settled
  line=$(bench "$@")
  settled=$(settle "${PID[$sys]}")
  jq -c --argjson s "$settled" '. + {settle_cpu_s: $s, keys_per_cpu_s_settled:
    (if (.server_cpu_s // 0) + $s > 0 then .keys_read_written / ((.server_cpu_s // 0) + $s) else 0 end)}' \
    <<<"$line" >>"$OUT"
}

for v in $SETS; do
  echo "== data set $v ($( ((HASHES)) && echo "fields per hash" || echo "value size")): starting ${SYS[*]} on core $SERVER_CORE" >&2
  start_servers "$v"
  for sys in "${SYS[@]}"; do
    echo "   loading $KEYS keys into $sys" >&2
    bench "$sys" "$v" --load-only >/dev/null
  done
  for sys in "${SYS[@]}"; do settle "${PID[$sys]}" >/dev/null; done
  for round in $(seq 1 "$ROUNDS"); do
    for w in "${WORKLOADS[@]}"; do
      IFS='|' read -r name set spec <<<"$w"
      [ -z "$set" ] || [ "$set" = "$v" ] || continue
      [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
      read -r -a args <<<"$spec"
      for sys in "${SYS[@]}"; do
        echo "   round $round/$ROUNDS value $v: $name on $sys" >&2
        measure "$sys" "$v" "${args[@]}" --workload "$name" --duration-s "$DURATION" \
          --warmup-s "$WARMUP" --tag figure=compare --tag round="$round"
      done
    done
  done
  # Write tails: SET and MSET-32 in an open loop at OPEN_LOAD of Redis's closed-loop peak in
  # this run (its mean over rounds, in operations/s), latency from each request's intended send
  # time — the same offered load for every system, so their p99s compare directly.
  for w in "set|1" "mset32|32"; do
    ((HASHES)) && break
    name=${w%%|*}
    width=${w#*|}
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
    peak=$(jq -s --arg w "$name" --argjson v "$v" '[.[] | select(.system == "redis" and .workload == $w
      and .value_size == $v) | .keys_per_sec] | if length > 0 then add / length else 0 end' "$OUT")
    rate=$(awk -v p="$peak" -v w="$width" -v l="$OPEN_LOAD" 'BEGIN { printf "%d", p * l / w }')
    ((rate > 0)) || continue
    for round in $(seq 1 "$ROUNDS"); do
      for sys in "${SYS[@]}"; do
        # Redis's peak without persistence is past what an fdatasync per write allows.
        [ "$sys" = quiver-fsync ] || [ "$sys" = redis-always ] && continue
        echo "   round $round/$ROUNDS value $v: $name-open on $sys at $rate ops/s" >&2
        measure "$sys" "$v" --width "$width" --get-ratio 0 --connections 8 --rate "$rate" \
          --workload "$name-open" --duration-s "$DURATION" --warmup-s "$WARMUP" \
          --tag figure=compare --tag round="$round" --tag rate="$rate"
      done
    done
  done
  stop_servers
done

ENGINE_OUT=$RUN/engine.txt
if ((ENGINE)); then
  echo "== engine vs RocksDB (scripts/bench_engine.sh$( ((QUICK)) && echo ' --quick'))" >&2
  quick=()
  ((QUICK)) && quick=(--quick)
  DURATION=$( ((QUICK)) && echo 2 || echo "$DURATION") CORE=$CLIENT_CORE \
    scripts/bench_engine.sh "${quick[@]}" >"$ENGINE_OUT"
fi

# The engine table's rows, as "label<TAB>keys/s".
engine_rows() {
  [ -s "$ENGINE_OUT" ] || return 0
  awk '/^(RocksDB|Quiver|fio) / && $NF ~ /^[0-9]+$/ { v = $NF; sub(/ +[0-9]+$/, ""); print $0 "\t" v }' "$ENGINE_OUT"
}

if ((JSON)); then
  cat "$OUT"
  engine_rows | jq -cR 'split("\t") | {system: (if (.[0] | test("^Quiver")) then "quiver-engine" elif (.[0] | test("^fio")) then "fio" else "rocksdb" end), workload: .[0], keys_per_sec: (.[1] | tonumber), value_size: null, p50_us: null, p99_us: null, server_cpu_s: null, rss_bytes_per_key: null}'
  exit 0
fi

echo
echo "keys=$KEYS key_size=$KEY_SIZE duration=${DURATION}s rounds=$ROUNDS server_core=$SERVER_CORE client_core=$CLIENT_CORE $(date -u +%FT%TZ)"
jq -rs '
  def mean(f): (map(f) | add) / length;
  group_by([.value_size, .workload, .system])
  | map({value_size: .[0].value_size, workload: .[0].workload, system: .[0].system,
         keys_per_sec: mean(.keys_per_sec), p50_us: mean(.p50_us), p99_us: mean(.p99_us),
         cpu: mean(.server_cpu_s // 0), settle: mean(.settle_cpu_s // 0),
         per_cpu: mean(.keys_per_cpu_s_settled // .keys_per_server_cpu_s // 0),
         rss: mean(.rss_bytes_per_key // 0), errors: (map(.errors) | add)})
  | (["value", "workload", "system", "keys/s", "p50 us", "p99 us", "srv cpu s", "settle cpu s", "keys/cpu-s", "RSS B/key", "errors"] | @tsv),
    (.[] | [.value_size, .workload, .system, (.keys_per_sec | floor), (.p50_us | floor), (.p99_us | floor),
            (.cpu * 100 | floor / 100), (.settle * 100 | floor / 100), (.per_cpu | floor), (.rss | floor), .errors] | @tsv)
' "$OUT" | column -t -s $'\t'

echo
echo "write tails, open loop at $OPEN_LOAD of Redis's peak: p99 of quiver / each other system, per round"
for other in "${SYS[@]:1}"; do
  [ "$other" = quiver-fsync ] || [ "$other" = redis-always ] && continue
  jq -rs --arg other "$other" '
    map(select(.workload | endswith("-open")))
    | group_by([.value_size, .workload, .tags.round])
    | map({key: "\(.[0].value_size) \(.[0].workload) at \(.[0].tags.rate) ops/s",
           q: (map(select(.system == "quiver")) | .[0]),
           o: (map(select(.system == $other)) | .[0])})
    | group_by(.key)
    | .[]
    | "  \(.[0].key):  /\($other) \(map((.q.p99_us / .o.p99_us * 100 | floor) / 100 | tostring) | join(" "))   (p99 us \(map("\(.q.p99_us | floor)/\(.o.p99_us | floor)") | join(" ")))"
  ' "$OUT"
done

# ratios A B: keys/s of system A over system B per workload and round, then per server CPU
# second (the CPU of settling after the run counted), and p99 of A over B.
ratios() {
  jq -rs --arg a "$1" --arg b "$2" '
    map(select(.workload | endswith("-open") | not))
    | group_by([.value_size, .workload, .tags.round])
    | map({key: "\(.[0].value_size) \(.[0].workload)",
           q: (map(select(.system == $a)) | .[0]),
           o: (map(select(.system == $b)) | .[0])})
    | map(select(.q != null and .o != null))
    | group_by(.key)
    | .[]
    | [.[0].key,
       (map((.q.keys_per_sec / .o.keys_per_sec * 100 | floor) / 100 | tostring) | join(" ")),
       (map((.q.keys_per_cpu_s_settled // .q.keys_per_server_cpu_s) as $q
         | (.o.keys_per_cpu_s_settled // .o.keys_per_server_cpu_s // 0) as $o
         | if $o > 0 then (($q / $o * 100 | floor) / 100 | tostring) else "-" end) | join(" ")),
       (map((.q.p99_us / .o.p99_us * 100 | floor) / 100 | tostring) | join(" "))]
    | "  \(.[0]):  \($a)/\($b) \(.[1])   per-cpu \(.[2])   p99 \(.[3])"
  ' "$OUT"
}

echo
echo "ratios quiver / each other system (keys/s, per round; then keys per server-CPU-second, the CPU of settling after the run counted; then p99)"
for other in "${SYS[@]:1}"; do
  [ "$other" = quiver-fsync ] || [ "$other" = redis-always ] || ratios quiver "$other"
done
if [[ " ${SYS[*]} " == *" quiver-fsync "* && " ${SYS[*]} " == *" redis-always "* ]]; then
  echo
  echo "durable to power loss: quiver-fsync / redis-always (fdatasync before each reply)"
  ratios quiver-fsync redis-always
fi

if [ -s "$ENGINE_OUT" ]; then
  echo
  echo "engine vs RocksDB (scripts/bench_engine.sh, in-process, one core)"
  sed -n '/^keys=/,$p' "$ENGINE_OUT"
fi
