#!/usr/bin/env bash
# The README's run command: builds Quiver and does real work on the embedded default data dir
# (./quiver-data): bulk-loads 1M keys through vector writes (first run only), reads a few back,
# writes and reads one more, verifies the store and prints its figures.
# (Once the server lands this starts `quiver serve` instead.)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p quiver
q=./target/release/quiver
dir=${QUIVER_DIR:-./quiver-data}
count=${QUIVER_KEYS:-1000000}

if [ ! -f "$dir/QUIVER" ]; then
  "$q" --dir "$dir" load --count "$count" --key-size 16 --value-size 32
fi
for i in 0 42 $((count - 1)); do
  key=$(printf '%016d' "$i")
  printf '%s -> ' "$key"
  "$q" --dir "$dir" get "$key"
done
"$q" --dir "$dir" set hello "world at $(date -u +%FT%TZ)"
"$q" --dir "$dir" get hello
"$q" --dir "$dir" check
"$q" --dir "$dir" stats
