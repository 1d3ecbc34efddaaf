#!/usr/bin/env bash
# Quiver's engine side by side with RocksDB (Debian's db_bench) and fio, in one run on one core.
#
#   scripts/bench_engine.sh [--quick]
#
# 1. Page-cache resident data: db_bench readrandom and multireadrandom (batch 32, 1 GiB block
#    cache, 10-bit bloom filters) against `quiver bench local --backend mmap --width 1,32`.
# 2. Device resident data: db_bench with O_DIRECT reads (and a 1 MiB block cache, so reads
#    reach the device) against `quiver bench local --backend io_uring --width 1,32`, and fio
#    4 KiB random O_DIRECT reads through io_uring at queue depth 1 and 32, plus depth 32 in
#    batches (submit 32, wait for all 32: what one multiget of width 32 does); then several
#    vectors of 32 in flight on the one core (`--threads 2` and `4`, a ring each) beside fio
#    at the same depth (64, 128).
# Every process is pinned to one core (taskset -c $CORE). Prints a table (means over rounds)
# and the ratios Quiver/RocksDB and Quiver/fio of each round; the raw outputs stay in
# $DIR/logs until the end (KEEP=1 keeps them) and their tails are printed on failure.
#
# Environment (defaults in brackets; --quick changes the first three):
#   KEYS [1000000; quick 200000]  DURATION seconds per run [10; quick 3]
#   ROUNDS [2; quick 1]: the engines' runs alternate, ROUNDS times; ratios are per round
#   KEY_SIZE [16]  VALUE_SIZE [32]  CORE [1]
#   DIR [a new directory under /tmp]
#   FIO_SIZE [the disk space of Quiver's loaded data, within 64M..4G]: fio's file; the same footprint
#     as the store, since this virtual disk is faster on a small region than on a large one.
#   KEEP=1 keeps the data directories (default: removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

quick_or_help "$@"
if ((QUICK)); then
  KEYS=${KEYS:-200000}
  DURATION=${DURATION:-3}
  ROUNDS=${ROUNDS:-1}
fi
ROUNDS=${ROUNDS:-2}
KEYS=${KEYS:-1000000}
DURATION=${DURATION:-10}
KEY_SIZE=${KEY_SIZE:-16}
VALUE_SIZE=${VALUE_SIZE:-32}
CORE=${CORE:-1}
KEEP=${KEEP:-0}

# ---- tools ----
apt_install_missing db_bench:rocksdb-tools fio:fio jq:jq taskset:util-linux
# Debian's rocksdb-tools installs /usr/bin/db_bench (dpkg -L rocksdb-tools).
DB_BENCH=$(command -v db_bench)

echo "building quiver (release)" >&2
cargo build --release -q -p quiver
QUIVER="${CARGO_TARGET_DIR:-target}/release/quiver"

# ---- data directories, removed at the end ----
if [ -n "${DIR:-}" ]; then
  mkdir -p "$DIR"
  MADE_DIR=0
else
  DIR=$(mktemp -d /tmp/quiver-bench-engine.XXXXXX)
  MADE_DIR=1
fi
RDB="$DIR/rocksdb"
QDB="$DIR/quiver"
FIO_FILE="$DIR/fio.dat"
LOGS="$DIR/logs"
mkdir -p "$LOGS"
cleanup() {
  local rc=$?
  if ((rc != 0)); then
    echo "bench_engine.sh failed (exit $rc); last lines of the logs:" >&2
    tail -n 5 "$LOGS"/* >&2 2>/dev/null || true
  fi
  if ((KEEP)); then
    echo "data kept in $DIR" >&2
  else
    rm -rf "$RDB" "$QDB" "$FIO_FILE" "$LOGS"
    if ((MADE_DIR)); then rmdir "$DIR" 2>/dev/null || true; fi
  fi
}
trap cleanup EXIT
rm -rf "$RDB" "$QDB" "$FIO_FILE"

pin() { taskset -c "$CORE" "$@"; }

DB_COMMON=(--db="$RDB" --num="$KEYS" --key_size="$KEY_SIZE" --value_size="$VALUE_SIZE"
  --compression_type=none --threads=1)
DB_READ=("${DB_COMMON[@]}" --use_existing_db=1 --bloom_bits=10 --batch_size=32 --duration="$DURATION")

# ops/sec of the last "<name> :" line of a db_bench log. For multireadrandom db_bench counts
# one op per key, not per batch (FinishedOps(..., entries_per_batch_) in MultiReadRandom; the
# "(found of read)" figure on the same line counts keys and equals the operations), so ops/sec
# is keys/s in every case.
db_ops() { awk -v b="$2" '$1 == b && $2 == ":" { for (i = 1; i < NF; i++) if ($(i + 1) == "ops/sec") v = $i } END { print v }' "$1"; }
# keys_per_sec of the quiver bench local line with the given backend and width.
q_kps() { jq -r --arg b "$2" --argjson w "$3" 'select(.backend == $b and .width == $w) | .keys_per_sec' "$1"; }
fio_iops() { jq -r '.jobs[0].read.iops' "$1"; }
misses() { jq -r '.misses + .wrong_values' "$1" | awk '{ s += $1 } END { print s + 0 }'; }

echo "== load: $KEYS keys of $KEY_SIZE + $VALUE_SIZE bytes in $DIR" >&2
pin "$DB_BENCH" "${DB_COMMON[@]}" --benchmarks=fillseq,flush,compact >"$LOGS/rocksdb-fill.log" 2>&1
# The load, plus a first short read run (discarded) so the grid below can --reuse it.
pin "$QUIVER" bench local --dir "$QDB" --keys "$KEYS" --key-size "$KEY_SIZE" \
  --value-size "$VALUE_SIZE" --width 32 --backend mmap --duration-s 1 >"$LOGS/quiver-load.json" 2>"$LOGS/quiver-load.err"

# Every figure goes to $RESULTS as "round<TAB>name<TAB>value" (lib.sh `put`, `mean`, `ratios`).
RESULTS="$LOGS/results.tsv"
: >"$RESULTS"

if [ -z "${FIO_SIZE:-}" ]; then
  FIO_SIZE=$(du -sm "$QDB" | awk '{ m = $1 < 64 ? 64 : ($1 > 4096 ? 4096 : $1); print m "M" }')
fi
FIO=(fio --name=randread --filename="$FIO_FILE" --size="$FIO_SIZE" --ioengine=io_uring
  --direct=1 --rw=randread --bs=4k --runtime="$DURATION" --time_based --output-format=json)
# Lay the fio file out before the first timed run.
pin "${FIO[@]}" --runtime=1 --iodepth=1 >/dev/null 2>&1
QBASE=(bench local --dir "$QDB" --reuse --keys "$KEYS" --key-size "$KEY_SIZE"
  --value-size "$VALUE_SIZE" --duration-s "$DURATION")
QLOCAL=("${QBASE[@]}" --width 1,32)

# Runs alternate between the engines, ROUNDS times: this machine's CPU and disk drift over
# minutes, and only figures measured side by side compare.
for ((round = 1; round <= ROUNDS; round++)); do
  echo "== round $round/$ROUNDS: page-cache resident: RocksDB (1 GiB block cache, bloom 10) vs quiver mmap" >&2
  l="$LOGS/r$round"
  # The first readrandom of each invocation warms the block cache and is not reported.
  pin "$DB_BENCH" "${DB_READ[@]}" --cache_size=1073741824 \
    --benchmarks=readrandom,readrandom,multireadrandom >"$l-rocksdb-cached.log" 2>&1
  put rocksdb_readrandom "$(db_ops "$l-rocksdb-cached.log" readrandom)"
  put rocksdb_multiread "$(db_ops "$l-rocksdb-cached.log" multireadrandom)"
  pin "$QUIVER" "${QLOCAL[@]}" --backend mmap >"$l-quiver-mmap.json" 2>"$l-quiver-mmap.err"
  put quiver_mmap_1 "$(q_kps "$l-quiver-mmap.json" mmap 1)"
  put quiver_mmap_32 "$(q_kps "$l-quiver-mmap.json" mmap 32)"
  put quiver_bad "$(misses "$l-quiver-mmap.json")"
  pin "$DB_BENCH" "${DB_READ[@]}" --cache_size=1073741824 --multiread_batched=1 \
    --benchmarks=readrandom,multireadrandom >"$l-rocksdb-cached-batched.log" 2>&1
  put rocksdb_multiread_batched "$(db_ops "$l-rocksdb-cached-batched.log" multireadrandom)"

  echo "== round $round/$ROUNDS: device resident: fio ($FIO_SIZE file) vs quiver io_uring" >&2
  pin "${FIO[@]}" --iodepth=1 >"$l-fio-qd1.json" 2>&1
  put fio_qd1 "$(fio_iops "$l-fio-qd1.json")"
  pin "$QUIVER" "${QLOCAL[@]}" --backend io_uring >"$l-quiver-uring.json" 2>"$l-quiver-uring.err"
  put quiver_uring_1 "$(q_kps "$l-quiver-uring.json" io_uring 1)"
  put quiver_uring_32 "$(q_kps "$l-quiver-uring.json" io_uring 32)"
  put quiver_bad "$(misses "$l-quiver-uring.json")"
  pin "${FIO[@]}" --iodepth=32 >"$l-fio-qd32.json" 2>&1
  put fio_qd32 "$(fio_iops "$l-fio-qd32.json")"
  pin "${FIO[@]}" --iodepth=32 --iodepth_batch_submit=32 --iodepth_batch_complete_min=32 \
    >"$l-fio-qd32-batch.json" 2>&1
  put fio_qd32_batch "$(fio_iops "$l-fio-qd32-batch.json")"
  # Several vectors in flight on the one core: reader threads, each with its own ring and
  # one vector of 32 in flight (what the server's workers do under block_in_place), so the
  # device sees up to 32 x threads reads; fio at the same depth beside them.
  for t in 2 4; do
    pin "$QUIVER" "${QBASE[@]}" --backend io_uring --width 32 --threads "$t" \
      >"$l-quiver-uring-t$t.json" 2>"$l-quiver-uring-t$t.err"
    put "quiver_uring_32_t$t" "$(q_kps "$l-quiver-uring-t$t.json" io_uring 32)"
    put quiver_bad "$(misses "$l-quiver-uring-t$t.json")"
    pin "${FIO[@]}" --iodepth=$((32 * t)) >"$l-fio-qd$((32 * t)).json" 2>&1
    put "fio_qd$((32 * t))" "$(fio_iops "$l-fio-qd$((32 * t)).json")"
  done
done

echo "== RocksDB with O_DIRECT reads (1 MiB block cache)" >&2
round=1
pin "$DB_BENCH" "${DB_READ[@]}" --use_direct_reads=1 --cache_size=1048576 \
  --benchmarks=readrandom,multireadrandom >"$LOGS/rocksdb-direct.log" 2>&1
put rocksdb_direct_readrandom "$(db_ops "$LOGS/rocksdb-direct.log" readrandom)"
put rocksdb_direct_multiread "$(db_ops "$LOGS/rocksdb-direct.log" multireadrandom)"
pin "$DB_BENCH" "${DB_READ[@]}" --use_direct_reads=1 --cache_size=1048576 --multiread_batched=1 \
  --benchmarks=multireadrandom >"$LOGS/rocksdb-direct-batched.log" 2>&1
put rocksdb_direct_multiread_batched "$(db_ops "$LOGS/rocksdb-direct-batched.log" multireadrandom)"

# ---- summary ----
row() { printf '%-50s %14s\n' "$1" "$(mean "$2")"; }

echo
echo "keys=$KEYS key_size=$KEY_SIZE value_size=$VALUE_SIZE duration=${DURATION}s rounds=$ROUNDS core=$CORE fio_size=$FIO_SIZE $(date -u +%FT%TZ)"
printf '%-50s %14s\n' "page-cache resident (mean of rounds)" "keys/s"
row "RocksDB readrandom" rocksdb_readrandom
row "RocksDB multireadrandom (batch 32)" rocksdb_multiread
row "RocksDB multireadrandom (batch 32, batched API)" rocksdb_multiread_batched
row "Quiver mmap width 1" quiver_mmap_1
row "Quiver mmap width 32" quiver_mmap_32
printf '%-50s %14s\n' "device resident, O_DIRECT (mean of rounds)" "keys/s | IOPS"
row "fio randread 4 KiB io_uring qd 1" fio_qd1
row "fio randread 4 KiB io_uring qd 32" fio_qd32
row "fio randread 4 KiB io_uring qd 32, batches of 32" fio_qd32_batch
row "Quiver io_uring width 1" quiver_uring_1
row "Quiver io_uring width 32" quiver_uring_32
row "fio randread 4 KiB io_uring qd 64" fio_qd64
row "Quiver io_uring width 32, 2 threads (2 in flight)" quiver_uring_32_t2
row "fio randread 4 KiB io_uring qd 128" fio_qd128
row "Quiver io_uring width 32, 4 threads (4 in flight)" quiver_uring_32_t4
row "RocksDB readrandom direct" rocksdb_direct_readrandom
row "RocksDB multireadrandom direct (batch 32)" rocksdb_direct_multiread
row "RocksDB multireadrandom direct (batched API)" rocksdb_direct_multiread_batched
echo
echo "ratios, per round"
echo "  Quiver mmap w32 / RocksDB best multireadrandom: $(ratios quiver_mmap_32 rocksdb_multiread rocksdb_multiread_batched)  target >= 10"
echo "  Quiver mmap w1  / RocksDB readrandom:           $(ratios quiver_mmap_1 rocksdb_readrandom)"
echo "  Quiver mmap w32 / Quiver mmap w1:               $(ratios quiver_mmap_32 quiver_mmap_1)"
echo "  Quiver io_uring w1  / fio qd 1:                 $(ratios quiver_uring_1 fio_qd1)  target >= 0.9"
echo "  Quiver io_uring w32 / fio qd 32:                $(ratios quiver_uring_32 fio_qd32)  target >= 0.9"
echo "  Quiver io_uring w32 / fio qd 32 in batches:     $(ratios quiver_uring_32 fio_qd32_batch)"
echo "  Quiver io_uring w32 2 in flight / fio qd 32:    $(ratios quiver_uring_32_t2 fio_qd32)  (/ qd 64: $(ratios quiver_uring_32_t2 fio_qd64))"
echo "  Quiver io_uring w32 4 in flight / fio qd 32:    $(ratios quiver_uring_32_t4 fio_qd32)  (/ qd 128: $(ratios quiver_uring_32_t4 fio_qd128))"
bad=$(awk -F'\t' '$2 == "quiver_bad" { s += $3 } END { print s + 0 }' "$RESULTS")
if [ "$bad" != 0 ]; then
  echo "ERROR: quiver read $bad missing or wrong values" >&2
  exit 1
fi
