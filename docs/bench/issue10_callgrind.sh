#!/usr/bin/env bash
# Instructions per key of the engine's multi_get, build against build, counted by callgrind
# (deterministic, unlike the wall clock of this host): `quiver bench local` on 1M keys of 16 B
# with 32 B values, mmap, uniform, width 32, for DURATION seconds under valgrind; the inclusive
# instructions of the multi_get calls made by the bench's reader loop, divided by their number
# and by the width.
#
#   docs/bench/issue10_callgrind.sh NAME=/path/to/quiver [NAME=/path/to/quiver ...]
set -euo pipefail
DURATION=${DURATION:-5}
WIDTH=32
for arg in "$@"; do
  name=${arg%%=*}; bin=${arg#*=}
  dir=/tmp/quiver-callgrind/$name
  common=(bench local --dir "$dir" --keys 1000000 --key-size 16 --value-size 32 --backend mmap
          --width "$WIDTH" --distribution uniform)
  reuse=(); [ -e "$dir/bench-params.json" ] && reuse=(--reuse)
  "$bin" "${common[@]}" --duration-s 1 "${reuse[@]}" >/dev/null 2>&1   # the load, natively
  out=$dir.callgrind
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "${common[@]}" \
    --duration-s "$DURATION" --reuse >/dev/null 2>&1
  # The caller line "N (p%) < ...reader... (C x)" above the multi_get entry point.
  callgrind_annotate --inclusive=yes --tree=caller "$out" 2>/dev/null \
    | grep -B4 -E '\*  .*(keyspace::Db|store::Store)::multi_get \[' \
    | grep -E '(local::reader|__rust_begin_short_backtrace) \([0-9,]+x\)' \
    | sed -E 's/^ *([0-9,]+) .*\(([0-9,]+)x\).*/\1 \2/; s/,//g' \
    | awk -v n="$name" -v w="$WIDTH" '{ printf "%s: %d multigets, %.0f instructions per multiget, %.1f per key\n", n, $2, $1 / $2, $1 / $2 / w }'
done
