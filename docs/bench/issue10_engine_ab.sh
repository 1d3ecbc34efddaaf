#!/usr/bin/env bash
# Engine multi_get, same run: this build (new), this build with every key expiring in a day
# (expiring), and 2917609 before issue 10 (old); 1M keys, 16 B keys, 32 B values, mmap,
# uniform, widths 1 and 32, 5 s each, 3 interleaved rounds, one core (taskset -c 1).
set -euo pipefail
NEW=/work/main/target/release/quiver; OLD=/work/target-base/release/quiver
for round in 1 2 3; do
  for v in new expiring old; do
    bin=$NEW; dir=/tmp/ab-new; extra=""
    [ $v = old ] && { bin=$OLD; dir=/tmp/ab-old; }
    [ $v = expiring ] && { dir=/tmp/ab-exp; extra="--expire-s 86400"; }
    reuse=""; [ -e "$dir/bench-params.json" ] && reuse="--reuse"
    taskset -c 1 $bin bench local --dir $dir --keys 1000000 --key-size 16 --value-size 32 --backend mmap --width 1,32 --distribution uniform --duration-s 5 $reuse $extra 2>/dev/null | sed "s/^/$round $v /"
  done
done
