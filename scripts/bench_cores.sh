#!/usr/bin/env bash
# Many cores: Quiver with T server threads side by side with redis-server (one thread, and
# io-threads) and valkey-server (io-threads), the same load from N `quiver bench net`
# processes, each pinned to a core of its own apart from the server's.
#
#   scripts/bench_cores.sh [--quick]
#
# Every server runs on cores 0..T-1 (`taskset`): Quiver as `quiver serve --threads T`, Redis
# and Valkey with `--io-threads T` (T = 1: Redis's one thread). The clients run on the cores
# after the widest server's (where they do not fit there, after each server's own cores: T = 1
# and 2 on a 2-core machine). Each server gets KEYS keys of 16 B with 32 B values, then every
# workload runs once on it (WARMUP seconds unmeasured, DURATION measured):
#
#   get          GET, C connections x 32 pipelined per client
#   set          SET, the same
#   mget32       MGET of 32 keys, C x 4 pipelined
#   mset32       MSET of 32 pairs, C x 4 pipelined
#   mixed-50-50  GET / SET half and half, C x 32 pipelined
#   mixed32-50-50  MGET-32 / MSET-32 half and half, C x 4 pipelined (readers beside batches;
#                not in the default list)
#   readers-writers  even clients MGET-32 (C x 4), odd clients SET (C x 32): readers of every
#                partition beside its writers, each side's figures on a line of their own (not
#                in the default list)
#   readers-batches  even clients MGET-32, odd clients MSET-32 (C x 4 each): readers beside
#                batches of several partitions, each side on a line of its own (not in the
#                default list)
#   get-unpipelined  GET, U connections per client, one request outstanding each (a web tier)
#   set-unpipelined  SET, the same
#
# Prints one line per (system, T, workload): keys/s over all clients, server cores busy (its
# CPU seconds over the measured window / DURATION), keys per server-CPU-second, and the worst
# client's p99; for Quiver, cores busy per kind of thread over the whole run, warm-up included
# (serving threads, syncers, the maintenance thread, the shared runtime's workers), the
# serving threads' delay figures, the longest hold of a partition by maintenance so far (INFO
# persistence: how long, by what), and the run's partition lock figures (INFO stats: writers'
# locks, waits and their µs, µs held and of that upgrades' waits and exclusive; readers' waits
# and their µs) on a line of their own; before a Quiver server's first run, its load of the
# keys (time; serving runs over 5 ms and over 25 ms, the longest; wakes over 5 ms, the latest;
# waits for a core over 5 ms, the longest: every index grows from empty meanwhile).
# The JSON records of every client go to OUT.
# --quick: fewer keys, shorter runs (a spot check).
#
# Environment (defaults in brackets):
#   THREADS ["1 2 4 8", those below half the machine's cores]: Quiver's server threads.
#   CONFIGS [""]: more Quiver runs, T:setting=value:..., e.g. "8:partitions=16" (settings go to
#     a config file; durability=none|os|fsync is a flag).
#   CLIENTS [the cores left, at most 8]: load-generator processes (given, they may wrap past
#     the last core onto the server's: a spot check on a small machine). CONNECTIONS [8] per
#     client.
#   UNPIPELINED [50]: connections per client of the unpipelined workloads (U above).
#   KEYS [2000000; quick 200000]  DURATION seconds [5; quick 2]  WARMUP seconds [1; quick 0.5]
#   WORKLOADS ["get set mget32 mset32 mixed-50-50 get-unpipelined set-unpipelined"]
#   DURABILITY [os]: Quiver's durability.
#   QUIVER [target/release/quiver, built here]; BASE=path/to/an/older/quiver: the same THREADS
#     runs of that binary too, as quiver-base (a before/after grid in one run).
#   REDIS [redis-server on the PATH; "none" skips]  REDIS_IO ["8"; "" none]: its io-threads runs.
#   VALKEY [unset: skipped]: a valkey-server binary. VALKEY_IO ["8"].
#   OUT [bench_cores.jsonl in a new directory under /tmp]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

quick_or_help "$@"
if ((QUICK)); then
  KEYS=${KEYS:-200000}
  DURATION=${DURATION:-2}
  WARMUP=${WARMUP:-0.5}
fi
CORES=$(nproc)
KEYS=${KEYS:-2000000}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
DURABILITY=${DURABILITY:-os}
CONNECTIONS=${CONNECTIONS:-8}
UNPIPELINED=${UNPIPELINED:-50}
WORKLOADS=${WORKLOADS:-get set mget32 mset32 mixed-50-50 get-unpipelined set-unpipelined}
if [ -z "${THREADS:-}" ]; then
  THREADS=""
  for t in 1 2 4 8 16 32; do ((t <= CORES / 2 || t == 1)) && THREADS="$THREADS $t"; done
fi
REDIS=${REDIS:-$(command -v redis-server || echo none)}
REDIS_IO=${REDIS_IO-8}
VALKEY_IO=${VALKEY_IO-8}

# The widest server decides where the clients go.
WIDEST=1
OTHERS=""
[ "$REDIS" != none ] && OTHERS="$REDIS_IO"
[ -n "${VALKEY:-}" ] && OTHERS="$OTHERS $VALKEY_IO"
for t in $THREADS $OTHERS; do ((t > WIDEST)) && WIDEST=$t; done
for c in ${CONFIGS:-}; do t=${c%%:*}; ((t > WIDEST)) && WIDEST=$t; done
if ((WIDEST >= CORES)) && [ -z "${CLIENTS:-}" ]; then
  echo "bench_cores.sh: servers up to $WIDEST threads leave no core of $CORES for clients" >&2
  exit 2
fi
CLIENTS=${CLIENTS:-$((CORES - WIDEST < 8 ? CORES - WIDEST : 8))}

# client_core T I: the core of load generator I beside a server of T threads (on cores
# 0..T-1): past the widest server's cores, the same for every T; where the clients do not fit
# there (T = 1 2 on two cores), past this server's own cores, so that a server which leaves a
# core free does not share its core with a client.
client_core() {
  if ((WIDEST + CLIENTS <= CORES)); then
    echo $(((WIDEST + $2) % CORES))
  else
    echo $((($1 + $2) % CORES))
  fi
}
if ((WIDEST + CLIENTS <= CORES)); then
  PLACES="clients on cores $WIDEST..$((WIDEST + CLIENTS - 1))"
else
  PLACES="clients on the cores after each server's"
fi

if [ -z "${QUIVER:-}" ]; then
  cargo build --release -q -p quiver
  QUIVER=$PWD/target/release/quiver
fi
RUN=$(mktemp -d /tmp/quiver-cores.XXXXXX)
OUT=${OUT:-$RUN/bench_cores.jsonl}
: >"$OUT"
SERVER_PID=""
cleanup() {
  stop_pids "$SERVER_PID"
  rm -rf "$RUN/data"
}
trap cleanup EXIT

# workload name -> `quiver bench net` arguments
declare -A LOAD=(
  [get]="--width 1 --get-ratio 1 --connections $CONNECTIONS --depth 32"
  [set]="--width 1 --get-ratio 0 --connections $CONNECTIONS --depth 32"
  [mget32]="--width 32 --get-ratio 1 --connections $CONNECTIONS --depth 4"
  [mset32]="--width 32 --get-ratio 0 --connections $CONNECTIONS --depth 4"
  [mixed-50-50]="--width 1 --get-ratio 0.5 --connections $CONNECTIONS --depth 32"
  [mixed32-50-50]="--width 32 --get-ratio 0.5 --connections $CONNECTIONS --depth 4"
  # Loads split by "|": client i runs part i modulo their number.
  [readers-writers]="--width 32 --get-ratio 1 --connections $CONNECTIONS --depth 4|--width 1 --get-ratio 0 --connections $CONNECTIONS --depth 32"
  [readers-batches]="--width 32 --get-ratio 1 --connections $CONNECTIONS --depth 4|--width 32 --get-ratio 0 --connections $CONNECTIONS --depth 4"
  [get-unpipelined]="--width 1 --get-ratio 1 --connections $UNPIPELINED --depth 1"
  [set-unpipelined]="--width 1 --get-ratio 0 --connections $UNPIPELINED --depth 1"
)

# start SYSTEM T BINARY [SETTINGS]: starts a server on cores 0..T-1; sets SERVER_PID, PORT.
start() {
  local sys=$1 t=$2 bin=$3 settings=${4:-} d=$RUN/data cores="0-$(($2 - 1))"
  rm -rf "$d"
  mkdir -p "$d"
  case "$sys" in
    quiver*)
      local dur=$DURABILITY extra=() kv
      : >"$RUN/q.toml"
      for kv in ${settings//:/ }; do
        case "$kv" in
          durability=*) dur=${kv#durability=} ;;
          *) echo "${kv%%=*} = ${kv#*=}" >>"$RUN/q.toml" ;;
        esac
      done
      [ -s "$RUN/q.toml" ] && extra=(--config "$RUN/q.toml")
      taskset -c "$cores" "$bin" --dir "$d/store" serve --port 0 --threads "$t" \
        --durability "$dur" "${extra[@]}" >"$RUN/server.out" 2>"$RUN/server.log" &
      SERVER_PID=$!
      PORT=$(served_port "$RUN/server.out")
      ;;
    *)
      PORT=$(free_port)
      local io=()
      ((t > 1)) && io=(--io-threads "$t")
      [[ $sys == redis* ]] && ((t > 1)) && io+=(--io-threads-do-reads yes)
      taskset -c "$cores" "$bin" --port "$PORT" --bind 127.0.0.1 --dir "$d" --save '' \
        --appendonly no --protected-mode no "${io[@]}" >"$RUN/server.log" 2>&1 &
      SERVER_PID=$!
      wait_listening "$PORT"
      ;;
  esac
}

stop() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# locks: Quiver's partition lock counters now (INFO stats), space-separated name=value pairs.
locks() {
  { "$QUIVER" info stats --port "$PORT" 2>/dev/null || true; } | { grep '^partition_' || true; } |
    tr -d '\r' | tr : = | xargs
}

# stalls: the serving threads' delay counters now (INFO stats: runs over 5 ms, over 25 ms, the
# longest in µs since the server started; the same of the wake meters, and of the waits for a
# core between two wakes), space-separated: nine numbers.
stalls() {
  { "$QUIVER" info stats --port "$PORT" 2>/dev/null || true; } | { grep '^serving_' || true; } |
    cut -d: -f2 | tr -d '\r' | xargs
}

# held: the longest hold of a partition by maintenance since the server started (INFO
# persistence: µs, and what held it), space-separated.
held() {
  { "$QUIVER" info persistence --port "$PORT" 2>/dev/null || true; } |
    { grep -E '^maintenance_stall_max_(us|by):' || true; } | cut -d: -f2 | tr -d '\r' | xargs
}

# thread_ticks PID: CPU clock ticks so far of each of the process's threads, summed by thread
# name without its number (quiver-serve-0, quiver-serve-1 -> quiver-serve), "name ticks" lines.
thread_ticks() {
  cat /proc/"$1"/task/*/stat 2>/dev/null |
    awk '{ name = $2; gsub(/[()]/, "", name); sub(/-[0-9]+$/, "", name);
           sub(/^[^)]*\) /, ""); t[name] += $12 + $13 } END { for (n in t) print n, t[n] }'
}

# cores_by_thread BEFORE AFTER SECONDS: cores busy per thread name between two thread_ticks.
cores_by_thread() {
  local hz
  hz=$(getconf CLK_TCK)
  awk -v hz="$hz" -v s="$3" 'NR == FNR { b[$1] = $2; next }
    { d = ($2 - b[$1]) / hz / s; if (d >= 0.005) out = out sprintf(" %s %.2f,", $1, d) }
    END { sub(/,$/, "", out); print "#   cores by thread:" out }' <(echo "$1") <(echo "$2")
}

# field NAME LINE: a number of a JSON record.
field() { grep -o "\"$1\":[-0-9.e+]*" <<<"$2" | head -1 | cut -d: -f2; }

# run SYSTEM T WORKLOAD: CLIENTS load generators at once; one summary line.
run() {
  local sys=$1 t=$2 wl=$3 i pids=() f kps=0 p99=0 cpu="" before="" stalled=""
  [[ $sys == quiver* ]] && before=$(locks) && stalled=$(stalls)
  local ticks started loads sides=()
  IFS='|' read -ra loads <<<"${LOAD[$wl]}"
  ticks=$(thread_ticks "$SERVER_PID")
  started=$(date +%s.%N)
  for ((i = 0; i < CLIENTS; i++)); do
    # shellcheck disable=SC2086
    taskset -c "$(client_core "$t" "$i")" "$QUIVER" bench net --port "$PORT" --keys "$KEYS" \
      --key-size 16 --value-size 32 --warmup-s "$WARMUP" --duration-s "$DURATION" \
      --seed "$((1000 + i))" --json --system "$sys" --workload "$wl" --tag "threads=$t" \
      --server-pid "$SERVER_PID" ${loads[$((i % ${#loads[@]}))]} >"$RUN/client-$i.json" 2>"$RUN/client-$i.err" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      echo "bench_cores.sh: client $i of $sys T=$t $wl failed:" >&2
      tail -n 3 "$RUN/client-$i.err" >&2
    fi
  done
  local by_thread
  by_thread=$(cores_by_thread "$ticks" "$(thread_ticks "$SERVER_PID")" \
    "$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')")
  for ((i = 0; i < CLIENTS; i++)); do
    f=$(grep '^{' "$RUN/client-$i.json" | tail -1) || continue
    echo "$f" >>"$OUT"
    kps=$(awk -v a="$kps" -v b="$(field keys_per_sec "$f")" 'BEGIN { print a + b }')
    p99=$(awk -v a="$p99" -v b="$(field p99_us "$f")" 'BEGIN { print (b > a ? b : a) }')
    [ -z "$cpu" ] && cpu=$(field server_cpu_s "$f")
    sides[i % ${#loads[@]}]+="$(field keys_per_sec "$f") $(field p99_us "$f") "
  done
  awk -v s="$sys" -v t="$t" -v w="$wl" -v k="$kps" -v c="${cpu:-0}" -v d="$DURATION" -v p="$p99" \
    'BEGIN { busy = c / d; printf "%-13s %3d  %-12s %10.3f %7.2f %12.3f %9.2f\n",
             s, t, w, k / 1e6, busy, (busy > 0 ? k / busy / 1e6 : 0), p / 1000 }'
  if ((${#loads[@]} > 1)); then
    for i in "${!sides[@]}"; do
      awk -v n="$i" -v c="${#loads[@]}" -v l="${loads[$i]}" -v f="${sides[$i]}" 'BEGIN { m = split(f, x, " ")
        for (j = 1; j <= m; j += 2) { k += x[j]; if (x[j + 1] > p) p = x[j + 1] }
        printf "#   clients %d mod %d (%s): %.3f Mkeys/s, p99 %.2f ms\n", n, c, l, k / 1e6, p / 1000 }'
    done
  fi
  [[ $sys == quiver* ]] && echo "$by_thread"
  if [ "$(wc -w <<<"$stalled")" = 9 ]; then
    echo "$stalled" "$(stalls)" | awk '{ printf "#   runs over 5 ms %d, over 25 ms %d (longest so far %.1f ms); wakes over 5 ms %d, over 25 ms %d (latest so far %.1f ms); off the core over 5 ms %d (longest so far %.1f ms)\n",
      $10 - $1, $11 - $2, $12 / 1000, $13 - $4, $14 - $5, $15 / 1000, $16 - $7, $18 / 1000 }'
  fi
  if [[ $sys == quiver* ]]; then
    held | awk 'NF == 2 { printf "#   maintenance held a partition %.1f ms at most so far (%s)\n", $1 / 1000, $2 }'
  fi
  if [ -n "$before" ]; then
    lock_line "$before" "$(locks)"
  fi
}

# lock_line BEFORE AFTER: the run's lock figures, from two `locks` readings (by name: an older
# binary has no exclusive figure).
lock_line() {
  awk -v a="$1" -v b="$2" 'function read(s, into,   n, i, f, kv) {
      n = split(s, f, " "); for (i = 1; i <= n; i++) { split(f[i], kv, "="); into[kv[1]] = kv[2] } }
    BEGIN { read(a, A); read(b, B); for (k in B) D[substr(k, 11)] = B[k] - A[k]
      if (!("write_locks" in D)) exit
      printf "#   locks: writes %d, waited %d (%.0f us), held %.0f us", D["write_locks"],
        D["write_lock_waits"], D["write_lock_wait_us"], D["write_lock_hold_us"]
      if ("write_lock_exclusive_us" in D) printf " (upgrades waited %.0f us, exclusive %.0f us)",
        D["write_lock_upgrade_wait_us"], D["write_lock_exclusive_us"]
      printf "; reads waited %d (%.0f us)\n", D["read_lock_waits"], D["read_lock_wait_us"] }'
}

# grid SYSTEM T BINARY [SETTINGS]: a server, its keys, every workload.
grid() {
  local sys=$1 t=$2 wl
  start "$@"
  local t0
  t0=$(date +%s%N)
  "$QUIVER" bench net --port "$PORT" --keys "$KEYS" --key-size 16 --value-size 32 \
    --load-only --json >/dev/null 2>>"$RUN/load.log"
  if [[ $sys == quiver* ]]; then
    # The load grows every index from empty: how long the serving threads were held meanwhile.
    stalls | awk -v ms="$(( ($(date +%s%N) - t0) / 1000000 ))" 'NF == 9 {
      printf "#   load: %.2f s; runs over 5 ms %d, over 25 ms %d (longest %.1f ms); wakes over 5 ms %d (latest %.1f ms); off the core over 5 ms %d (longest %.1f ms)\n",
        ms / 1000, $1, $2, $3 / 1000, $4, $6 / 1000, $7, $9 / 1000 }'
  fi
  for wl in $WORKLOADS; do run "$sys" "$t" "$wl"; done
  stop
}

# An unmeasured first grid: on a fresh virtual machine the first runs pay for memory the
# guest touches for the first time (seen on the 16-core machine: whichever system ran first
# lost a quarter of its single-thread figures), so nothing measured goes first.
( WORKLOADS="set get" DURATION=2 WARMUP=0.5 grid quiver-warm-up 1 "$QUIVER" >/dev/null )

echo "# $(date -u +%FT%TZ) $(uname -m), $CORES cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs));" \
  "$CLIENTS $PLACES; $KEYS keys; ${DURATION}s runs; quiver durability $DURABILITY"
printf "%-13s %3s  %-12s %10s %7s %12s %9s\n" system T workload "Mkeys/s" "busy" "Mkeys/cpu-s" "p99 ms"
for t in $THREADS; do
  grid quiver "$t" "$QUIVER"
  [ -n "${BASE:-}" ] && grid quiver-base "$t" "$BASE"
done
for c in ${CONFIGS:-}; do grid "quiver:${c#*:}" "${c%%:*}" "$QUIVER" "${c#*:}"; done
if [ "$REDIS" != none ]; then
  grid redis 1 "$REDIS"
  for t in $REDIS_IO; do grid redis-io "$t" "$REDIS"; done
fi
if [ -n "${VALKEY:-}" ]; then
  for t in $VALKEY_IO; do grid valkey-io "$t" "$VALKEY"; done
fi
echo "records: $OUT" >&2
