#!/usr/bin/env bash
# Soak: a steady, rate-limited mixed load on one Quiver server with compaction running, for
# DURATION seconds, and the server's footprint sampled every SAMPLE_S seconds: does memory,
# the descriptor count and the disk stay flat, and the tail latency steady?
#
#   scripts/soak.sh                          # 30 minutes (+ a minute of setup and summary)
#   DURATION=180 LABEL=trial scripts/soak.sh  # a 3-minute trial
#
# Builds the release binary and starts `quiver serve --threads 1` on a fresh data directory
# under /tmp, pinned to SERVER_CORE, compaction on: the store's garbage-ratio trigger (0.5, the
# store's default: `quiver serve` has no setting for it) and `compaction-cpu-share` 0.25 (the
# default, written in its config file). Loads KEYS keys (`quiver bench net --load-only`), then
# runs `quiver bench net` pinned to CLIENT_CORE in the open loop at RATE operations/s over
# CONNECTIONS connections: GET_RATIO reads, DEL_RATIO deletes, EXPIRE_RATIO SETs with an expiry
# (EX or PX, a time to live uniform in TTL_MS milliseconds), the rest plain SETs; values of
# VALUE_MIN..VALUE_MAX bytes (uniform) over the fixed key space, so every write leaves the key's
# old value as garbage. After WARMUP_S seconds the measured window begins; every SAMPLE_S
# seconds `bench net --sample-every-s` writes a sample line (`"bench": "net-sample"`): the
# latency of those seconds, the server's VmRSS / RssAnon / RssFile and open descriptors
# (/proc/PID), its data directory's allocated bytes (st_blocks x 512 of every regular file,
# what `du --block-size=1` counts; segment files and the RESERVE file apart), its keys and log
# records (INFO keyspace, persistence), the live records' bytes estimated from the keys and the
# mean record size, and the bound live / (1 - trigger). Samples and the run's record go to
# OUT/soak_LABEL.jsonl, `quiver bench report` draws OUT/soak_LABEL.png and .svg.
#
# Then prints a summary over the window from FLAT_FROM_S on (docs/BENCHMARKS.md, "Soak"): the
# growth of RSS, descriptors and segment files from the span's first half to its second, the
# descriptors other than segment files, the segment files against their bound, p99 per interval;
# and a verdict per criterion: RSS growth at most RSS_GROWTH_MAX_PCT percent, the descriptors'
# peak growth at most FDS_GROWTH_MAX and the others' spread at most FDS_OTHER_SPREAD_MAX, the
# segment files at most DISK_OVER_BOUND_MAX times the bound in every sample.
#
# Environment (defaults in brackets):
#   DURATION seconds [1800]  SAMPLE_S [10]  WARMUP_S [10]  RATE ops/s [10000]  CONNECTIONS [8]
#   KEYS [200000]  KEY_SIZE [16]  VALUE_MIN [64]  VALUE_MAX [1024]  GET_RATIO [0.6]
#   DEL_RATIO [0.1]  EXPIRE_RATIO [0.1]  TTL_MS [1000-60000]  SERVER_CORE [0]  CLIENT_CORE [1]
#   LABEL [${DURATION}s]  OUT [docs/bench]  FLAT_FROM_S [300, or DURATION/3 when shorter]
#   RSS_GROWTH_MAX_PCT [5]  FDS_GROWTH_MAX [4]  FDS_OTHER_SPREAD_MAX [4]
#   DISK_OVER_BOUND_MAX [1.0]  KEEP=1 keeps the data
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

no_args_or_help "$@"
DURATION=${DURATION:-1800}
SAMPLE_S=${SAMPLE_S:-10}
WARMUP_S=${WARMUP_S:-10}
RATE=${RATE:-10000}
CONNECTIONS=${CONNECTIONS:-8}
KEYS=${KEYS:-200000}
KEY_SIZE=${KEY_SIZE:-16}
VALUE_MIN=${VALUE_MIN:-64}
VALUE_MAX=${VALUE_MAX:-1024}
GET_RATIO=${GET_RATIO:-0.6}
DEL_RATIO=${DEL_RATIO:-0.1}
EXPIRE_RATIO=${EXPIRE_RATIO:-0.1}
TTL_MS=${TTL_MS:-1000-60000}
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}
LABEL=${LABEL:-${DURATION}s}
OUT=${OUT:-docs/bench}
# Minute 5 of a long run; a third of a short one (a trial has no minute 5).
FLAT_FROM_S=${FLAT_FROM_S:-$((DURATION / 3 < 300 ? DURATION / 3 : 300))}
RSS_GROWTH_MAX_PCT=${RSS_GROWTH_MAX_PCT:-5}
FDS_GROWTH_MAX=${FDS_GROWTH_MAX:-4}
FDS_OTHER_SPREAD_MAX=${FDS_OTHER_SPREAD_MAX:-4}
DISK_OVER_BOUND_MAX=${DISK_OVER_BOUND_MAX:-1.0}
KEEP=${KEEP:-0}
# Written into the server's config file (the default, stated).
COMPACTION_CPU_SHARE=0.25

apt_install_missing jq:jq taskset:util-linux
echo "building quiver (release)" >&2
cargo build --release -q -p quiver
Q=$PWD/target/release/quiver
mkdir -p "$OUT"
RESULT=$OUT/soak_$LABEL.jsonl

RUN=$(mktemp -d /tmp/quiver-soak.XXXXXX)
PID=
cleanup() {
  local rc=$?
  stop_pids "$PID"
  end_run "$rc" "$RUN" "$RUN/server.log"
}
trap cleanup EXIT

printf 'compaction-cpu-share = %s\n' "$COMPACTION_CPU_SHARE" >"$RUN/quiver.toml"
taskset -c "$SERVER_CORE" "$Q" --dir "$RUN/data" serve --config "$RUN/quiver.toml" --port 0 \
  --threads 1 --durability os >"$RUN/server.out" 2>"$RUN/server.log" &
PID=$!
PORT=$(served_port "$RUN/server.out")

net() {
  taskset -c "$CLIENT_CORE" "$Q" bench net --port "$PORT" --server-pid "$PID" --system quiver \
    --keys "$KEYS" --key-size "$KEY_SIZE" --value-size "$VALUE_MIN" --value-size-max "$VALUE_MAX" \
    "$@"
}
echo "== loading $KEYS keys of $VALUE_MIN-$VALUE_MAX bytes" >&2
net --load-only >/dev/null
settle "$PID" >/dev/null

echo "== soak: $DURATION s at $RATE ops/s (get $GET_RATIO, del $DEL_RATIO, expiring set" \
  "$EXPIRE_RATIO, ttl $TTL_MS ms), sampled every $SAMPLE_S s into $RESULT" >&2
started=$(date -u +%FT%TZ)
net --rate "$RATE" --connections "$CONNECTIONS" --get-ratio "$GET_RATIO" \
  --del-ratio "$DEL_RATIO" --expire-ratio "$EXPIRE_RATIO" --ttl-ms "$TTL_MS" \
  --warmup-s "$WARMUP_S" --duration-s "$DURATION" --sample-every-s "$SAMPLE_S" \
  --server-dir "$RUN/data" --tag "run=$LABEL" >"$RESULT"
kill -0 "$PID" 2>/dev/null || { echo "soak.sh: the server died during the run" >&2; exit 1; }

"$Q" bench report --input "$RESULT" --out "$OUT" 2>"$RUN/report.log" ||
  { cat "$RUN/report.log" >&2; exit 1; }

# The summary, over the samples from FLAT_FROM_S on, split into halves at the span's middle.
# RSS and the segment files swing with every compaction pass (RssFile follows the segments
# mapped and retired), so single samples would measure where in its swing each fell: growth is
# the second half's mean minus the first half's (for descriptors, the second half's peak minus
# the first half's), each half holding several passes in a long run.
jq -rs --argjson from "$FLAT_FROM_S" --argjson rss_max "$RSS_GROWTH_MAX_PCT" \
  --argjson fds_max "$FDS_GROWTH_MAX" --argjson other_max "$FDS_OTHER_SPREAD_MAX" \
  --argjson over_max "$DISK_OVER_BOUND_MAX" '
  def mib: . / 1048576 * 10 | round / 10;
  def r1: . * 10 | round / 10;
  def r2: . * 100 | round / 100;
  def mean: if length == 0 then null else add / length end;
  def median: sort | if length == 0 then null else .[(length / 2 | floor)] end;
  def verdict(ok): if ok then "flat" else "NOT FLAT" end;
  (map(select(.bench == "net-sample"))) as $all
  | ($all | map(select(.t_s >= $from))) as $s
  | (map(select(.bench == "net")) | first) as $rec
  | ($s | first | .t_s) as $t0 | ($s | last | .t_s) as $t1
  | ($s | map(select(.t_s < ($t0 + $t1) / 2))) as $h1
  | ($s | map(select(.t_s >= ($t0 + $t1) / 2))) as $h2
  | def growth(f): ($h2 | map(f) | mean) - ($h1 | map(f) | mean);
    def range(f): "\($s | map(f) | min)-\($s | map(f) | max)";
    def range_mib(f): "\($s | map(f) | min | mib)-\($s | map(f) | max | mib)";
  (growth(.rss_bytes) / ($h1 | map(.rss_bytes) | mean) * 100 | r1) as $rss_pct
  | (($h2 | map(.fds) | max) - ($h1 | map(.fds) | max)) as $fds_growth
  | ($s | map(select(.segments != null) | .fds - .segments)) as $other
  | (($other | max) - ($other | min)) as $other_spread
  | ($fds_growth <= $fds_max and $other_spread <= $other_max) as $fds_ok
  | ($s | map(.disk_segment_bytes / .disk_bound_bytes)) as $ratios
  | ($ratios | max) as $over
  | ($all | map(.p99_us | select(. != null))) as $p99
  | [
    "window: \($all | length) samples over \($all | last | .t_s | round) s; summary over" +
      " \($t0 | round)-\($t1 | round) s in two halves (growth: second half - first half)",
    "RSS: \(range_mib(.rss_bytes)) MiB, mean \($s | map(.rss_bytes) | mean | mib) MiB, growth" +
      " \(growth(.rss_bytes) | mib) MiB (\($rss_pct)%); anon \(range_mib(.rss_anon_bytes)) MiB," +
      " growth \(growth(.rss_anon_bytes) | mib) MiB; file \(range_mib(.rss_file_bytes)) MiB" +
      "  [\(verdict($rss_pct <= $rss_max)): growth <= \($rss_max)%]",
    "fds: \(range(.fds)) (whole window \($all | map(.fds) | min)-\($all | map(.fds) | max))," +
      " peak growth \($fds_growth); segment files \(range(.segments)), other fds" +
      " \($other | min)-\($other | max)  [\(verdict($fds_ok)): peak growth <= \($fds_max)," +
      " other fds spread <= \($other_max)]",
    "disk: segment files \(range_mib(.disk_segment_bytes)) MiB, growth" +
      " \(growth(.disk_segment_bytes) | mib) MiB; all files but RESERVE at most" +
      " \($s | map(.disk_bytes - .disk_reserve_bytes) | max | mib) MiB; live (est.)" +
      " \(range_mib(.live_bytes_est)) MiB; segments / bound \($ratios | mean | r2) mean," +
      " \($over | r2) max  [\(verdict($over <= $over_max)): max <= \($over_max)]",
    "garbage ratio: \(range(.garbage_ratio)); keys \(range(.keys)) (expiring" +
      " \(range(.expiring_keys))); compaction copied" +
      " \(($s | last | .compaction_copied_records) - ($s | first | .compaction_copied_records))" +
      " records; longest maintenance stall \($s | last | .maintenance_stall_max_us) us",
    "p99 per interval: median \($p99 | median) us, range \($p99 | min)-\($p99 | max) us; whole" +
      " run p50 \($rec.p50_us) us, p99 \($rec.p99_us) us, p99.9 \($rec.p999_us) us, max" +
      " \($rec.max_us | round) us",
    "load: \($rec.ops_per_sec | round) ops/s of \($rec.rate_target) asked; \($rec.errors) errors," +
      " \($rec.misses) reads of absent keys; send lag p99 \($rec.send_lag_p99_us) us;" +
      " server \($rec.server_cpu_util * 100 | round)% of a core"
  ] | .[]' "$RESULT"
echo "started $started, keys=$KEYS values=$VALUE_MIN-${VALUE_MAX}B rate=$RATE" \
  "garbage trigger=$(jq -rs 'map(.garbage_ratio_trigger // empty) | first' "$RESULT")" \
  "compaction-cpu-share=$COMPACTION_CPU_SHARE; $RESULT, $OUT/soak_$LABEL.png"
