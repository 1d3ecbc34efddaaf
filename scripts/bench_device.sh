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
# Environment (defaults in brackets):
#   KEYS [4000000]  VALUE_SIZE [512]  KEY_SIZE [16]  MEMORY_MB [512]  DURATION seconds [8]
#   ROUNDS [2]  IN_FLIGHT ["1 2 4 8"]  SERVER_CORE [0]  CLIENT_CORE [1]  KEEP=1 keeps the data
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

case "${1:-}" in
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) echo "bench_device.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
esac
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
    --keys "$KEYS" --key-size "$KEY_SIZE" --value-size "$VALUE_SIZE" "$@"
}
echo "== loading $KEYS keys of $VALUE_SIZE bytes (memory limit $MEMORY_MB MiB)" >&2
net --load-only >/dev/null
settle "$PID" >/dev/null
# The records' bytes (24-byte header, key, value): what reads land in. `du` would count the
# segments' preallocated, never-read tails too, and fio on a larger region is slower here.
DATA_MB=$(((KEYS * (24 + KEY_SIZE + VALUE_SIZE) >> 20) + 1))
echo "   $DATA_MB MiB of records ($(du -sm "$RUN/data" | cut -f1) MiB allocated)" >&2

FIO=(taskset -c "$SERVER_CORE" fio --name=randread --filename="$RUN/fio.dat" --size="${DATA_MB}M"
  --ioengine=io_uring --direct=1 --rw=randread --bs=4k --runtime="$DURATION" --time_based
  --output-format=json)
"${FIO[@]}" --runtime=1 --iodepth=1 >/dev/null 2>&1 # lays the file out

for ((round = 1; round <= ROUNDS; round++)); do
  for n in $IN_FLIGHT; do
    echo "== round $round/$ROUNDS: $n MGET-32 in flight, then fio at depth $((32 * n))" >&2
    line=$(net --width 32 --get-ratio 1 --connections "$n" --depth 1 --workload mget32 \
      --duration-s "$DURATION" --warmup-s 1)
    put "q$n" "$(jq -r .keys_per_sec <<<"$line")"
    put "qcpu$n" "$(jq -r .keys_per_server_cpu_s <<<"$line")"
    put "bad" "$(jq -r '.errors + .misses + .disconnects' <<<"$line")"
    put "fio$n" "$("${FIO[@]}" --iodepth=$((32 * n)) | jq -r '.jobs[0].read.iops')"
  done
done

echo
echo "keys=$KEYS value_size=$VALUE_SIZE data=${DATA_MB}MiB memory_limit=${MEMORY_MB}MiB duration=${DURATION}s rounds=$ROUNDS $(date -u +%FT%TZ)"
printf '%-10s %-14s %14s %12s %16s\n' "in flight" "device depth" "quiver keys/s" "fio IOPS" "keys/server-cpu-s"
for n in $IN_FLIGHT; do
  printf '%-10s %-14s %14s %12s %16s   quiver / fio per round: %s\n' "$n" "$((32 * n))" \
    "$(mean "q$n")" "$(mean "fio$n")" "$(mean "qcpu$n")" "$(ratios "q$n" "fio$n")"
done
echo "cgroup peak memory $(($(as_root cat "$CG/$PEAK_FILE") >> 20)) MiB (limit $MEMORY_MB MiB, data $DATA_MB MiB)"
bad=$(awk -F'\t' '$2 == "bad" { s += $3 } END { print s + 0 }' "$RESULTS")
if [ "$bad" != 0 ]; then
  echo "ERROR: $bad errors, missing values or lost connections" >&2
  exit 1
fi
