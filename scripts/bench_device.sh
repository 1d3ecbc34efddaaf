#!/usr/bin/env bash
# Networked reads of device-resident data: the server's page cache held far below its data.
#
#   scripts/bench_device.sh
#
# Starts `quiver serve --backend io_uring --threads 1` (O_DIRECT reads) pinned to SERVER_CORE
# inside a memory cgroup of MEMORY_MB (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`
# where only v1 is mounted; needs root), loads KEYS keys of VALUE_SIZE bytes (default 4M x 512 B:
# about 3 GiB on disk, six times the limit), and runs MGET of 32 keys from `quiver bench net` on
# CLIENT_CORE with 1, 2, 4 and 8 MGETs in flight (connections of depth 1): the device sees up to
# 32 x that many reads at once. Beside each, fio 4 KiB random O_DIRECT reads through io_uring at
# the same depth on a file the size of the records, pinned to the same core (the figure a
# program that does nothing but read reaches). Rounds alternate server and fio.
#
# Prints, per depth, keys/s and keys per server-CPU-second (means over rounds), fio's IOPS, and
# the ratio Quiver keys/s / fio IOPS of each round; then the cgroup's peak memory and page cache.
#
# HASH_FIELDS=F: the keys are hashes of F fields of VALUE_SIZE bytes (issue 36), loaded by one
# HSET each, and the reads are HMGETs of all F fields of one hash (one record read each, so
# the device sees one read per HMGET in flight, and fio runs at that depth); keys/s counts
# fields. Then, for the RAM per field, the same hashes (KEYS / 10 of them) are loaded into
# Debian's redis-server without persistence and its `used_memory` divided by their fields.
#
# Environment (defaults in brackets):
#   KEYS [4000000]  VALUE_SIZE [512]  KEY_SIZE [16]  MEMORY_MB [512]  DURATION seconds [8]
#   ROUNDS [2]  IN_FLIGHT ["1 2 4 8"]  SERVER_CORE [0]  CLIENT_CORE [1]  KEEP=1 keeps the data
#   HASH_FIELDS [none]
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

no_args_or_help "$@"
KEYS=${KEYS:-4000000}
VALUE_SIZE=${VALUE_SIZE:-512}
KEY_SIZE=${KEY_SIZE:-16}
MEMORY_MB=${MEMORY_MB:-512}
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-2}
IN_FLIGHT=${IN_FLIGHT:-1 2 4 8}
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}
KEEP=${KEEP:-0}
HASH_FIELDS=${HASH_FIELDS:-}
# What one operation reads and names: MGET of 32 keys (32 records), or HMGET of a whole hash
# (one record of F fields).
if [ -n "$HASH_FIELDS" ]; then
  SHAPE=(--hash-fields "$HASH_FIELDS" --width "$HASH_FIELDS")
  WORKLOAD=hmget$HASH_FIELDS
  READS_PER_OP=1
  # A packed hash: a count, then per field a length byte, the name (f0000) and the value.
  RECORD_BYTES=$((24 + KEY_SIZE + 2 + HASH_FIELDS * (2 + 5 + VALUE_SIZE)))
else
  SHAPE=(--width 32)
  WORKLOAD=mget32
  READS_PER_OP=32
  RECORD_BYTES=$((24 + KEY_SIZE + VALUE_SIZE))
fi

apt_install_missing fio:fio jq:jq taskset:util-linux
echo "building quiver (release)" >&2
cargo build --release -q -p quiver
Q=$PWD/target/release/quiver

RUN=$(mktemp -d /tmp/quiver-device.XXXXXX)
RESULTS=$RUN/results.tsv
: >"$RESULTS"

# The memory cgroup: v2 where the unified hierarchy has the memory controller, else v1's.
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/quiver-device-$$
  as_root mkdir "$CG"
  echo $((MEMORY_MB << 20)) | as_root tee "$CG/memory.max" >/dev/null
  PEAK_FILE=memory.peak
elif [ -d /sys/fs/cgroup/memory ]; then
  CG=/sys/fs/cgroup/memory/quiver-device-$$
  as_root mkdir "$CG"
  echo $((MEMORY_MB << 20)) | as_root tee "$CG/memory.limit_in_bytes" >/dev/null
  PEAK_FILE=memory.max_usage_in_bytes
else
  echo "bench_device.sh: no memory cgroup controller (neither v2 nor v1) on this system" >&2
  exit 1
fi

PID=
cleanup() {
  local rc=$?
  stop_pids "$PID"
  as_root rmdir "$CG" 2>/dev/null || true
  end_run "$rc" "$RUN" "$RUN/server.log"
}
trap cleanup EXIT

# The server joins the cgroup before it starts (the subshell moves itself, then execs).
(
  me=$BASHPID # this subshell, not the pipeline's own below
  echo "$me" | as_root tee "$CG/cgroup.procs" >/dev/null
  exec taskset -c "$SERVER_CORE" "$Q" --dir "$RUN/data" serve --port 0 --threads 1 \
    --durability os --backend io_uring
) >"$RUN/server.out" 2>"$RUN/server.log" &
PID=$!
PORT=$(served_port "$RUN/server.out")

net() {
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "$PORT" --server-pid "$PID" --system quiver \
    --keys "$KEYS" --key-size "$KEY_SIZE" --value-size "$VALUE_SIZE" "${SHAPE[@]:0:2}" "$@"
}
echo "== loading $KEYS keys of $VALUE_SIZE bytes (memory limit $MEMORY_MB MiB)" >&2
net --load-only >/dev/null
settle "$PID" >/dev/null
# The records' bytes (24-byte header, key, value): what reads land in. `du` would count the
# segments' preallocated, never-read tails too, and fio on a larger region is slower here.
DATA_MB=$(((KEYS * RECORD_BYTES >> 20) + 1))
echo "   $DATA_MB MiB of records ($(du -sm "$RUN/data" | cut -f1) MiB allocated)" >&2

FIO=(taskset -c "$SERVER_CORE" fio --name=randread --filename="$RUN/fio.dat" --size="${DATA_MB}M"
  --ioengine=io_uring --direct=1 --rw=randread --bs=4k --runtime="$DURATION" --time_based
  --output-format=json)
"${FIO[@]}" --runtime=1 --iodepth=1 >/dev/null 2>&1 # lays the file out

for ((round = 1; round <= ROUNDS; round++)); do
  for n in $IN_FLIGHT; do
    echo "== round $round/$ROUNDS: $n $WORKLOAD in flight, then fio at depth $((READS_PER_OP * n))" >&2
    line=$(net "${SHAPE[@]:2}" --get-ratio 1 --connections "$n" --depth 1 --workload "$WORKLOAD" \
      --duration-s "$DURATION" --warmup-s 1)
    put "q$n" "$(jq -r .keys_per_sec <<<"$line")"
    put "qcpu$n" "$(jq -r .keys_per_server_cpu_s <<<"$line")"
    put "bad" "$(jq -r '.errors + .misses + .disconnects' <<<"$line")"
    put "fio$n" "$("${FIO[@]}" --iodepth=$((READS_PER_OP * n)) | jq -r '.jobs[0].read.iops')"
  done
done

echo
echo "keys=$KEYS value_size=$VALUE_SIZE hash_fields=${HASH_FIELDS:-none} data=${DATA_MB}MiB memory_limit=${MEMORY_MB}MiB duration=${DURATION}s rounds=$ROUNDS $(date -u +%FT%TZ)"
printf '%-10s %-14s %14s %12s %16s\n' "in flight" "device depth" "quiver keys/s" "fio IOPS" "keys/server-cpu-s"
for n in $IN_FLIGHT; do
  printf '%-10s %-14s %14s %12s %16s   quiver / fio per round: %s\n' "$n" "$((READS_PER_OP * n))" \
    "$(mean "q$n")" "$(mean "fio$n")" "$(mean "qcpu$n")" "$(ratios "q$n" "fio$n")"
done
echo "cgroup peak memory $(($(as_root cat "$CG/$PEAK_FILE") >> 20)) MiB (limit $MEMORY_MB MiB, data $DATA_MB MiB)"
if [ -n "$HASH_FIELDS" ]; then
  # Redis's RAM per field for the same hashes (a tenth of them: Redis keeps all in RAM).
  stop_pids "$PID"
  PID=
  RPORT=$(free_port)
  taskset -c "$SERVER_CORE" redis-server --port "$RPORT" --save '' --appendonly no \
    --dir "$RUN" >"$RUN/redis.log" 2>&1 &
  PID=$!
  wait_listening "$RPORT"
  base=$(redis-cli -p "$RPORT" INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "$RPORT" --system redis --keys $((KEYS / 10)) \
    --key-size "$KEY_SIZE" --value-size "$VALUE_SIZE" --hash-fields "$HASH_FIELDS" --load-only >/dev/null
  used=$(redis-cli -p "$RPORT" INFO memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
  fields=$((KEYS / 10 * HASH_FIELDS))
  echo "redis used_memory for $((KEYS / 10)) hashes of $HASH_FIELDS fields: $(((used - base) >> 20)) MiB," \
    "$(((used - base) / fields)) bytes per field; all $KEYS hashes would need" \
    "$(((used - base) * 10 >> 20)) MiB (Quiver's cgroup: $MEMORY_MB MiB)"
fi
bad=$(awk -F'\t' '$2 == "bad" { s += $3 } END { print s + 0 }' "$RESULTS")
if [ "$bad" != 0 ]; then
  echo "ERROR: $bad errors, missing values or lost connections" >&2
  exit 1
fi
