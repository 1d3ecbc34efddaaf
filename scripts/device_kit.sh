#!/usr/bin/env bash
# Packs what a many-cores run needs on a machine that has nothing installed (the 16-core machine
# a session may be lent through the device tool: no network, no Rust, no Redis), into KIT, a
# folder of the repo that .gitignore leaves out, for the device call to carry:
#
#   scripts/device_kit.sh
#
# The programs: `quiver` (this checkout's release build), `quiver-base` (BASE: the build to
# compare with), `redis-server` (REDIS) and `valkey-server` (VALKEY; build it from a fetched
# valkey-io/valkey tag 8.0.1 with `make`). Each is a stripped copy in KIT/real, run through a
# wrapper script in KIT/bin that points LD_LIBRARY_PATH at KIT/lib, where the
# shared libraries it names that are not glibc's (liblzf, libjemalloc, libatomic, ...) are
# copied: only the kit's programs see them, not the tools of the machine. Then prints the call
# to make: carry [KIT], command `scripts/device_grid.sh` (which runs scripts/bench_cores.sh
# there and leaves its results in $OUT). The tree the call sends, KIT included, must stay under
# 64 MiB: the sizes are printed.
#
# Environment (defaults in brackets):
#   KIT [.kit]  BASE [none]  REDIS [redis-server on the PATH; "none" leaves it out]
#   VALKEY [none]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

no_args_or_help "$@"
KIT=${KIT:-.kit}
REDIS=${REDIS:-$(command -v redis-server || echo none)}
case "$KIT" in
  /* | ../* | */../*) echo "device_kit.sh: KIT must be a folder inside the repo" >&2; exit 2 ;;
esac
git check-ignore -q "$KIT" || { echo "device_kit.sh: $KIT is not ignored by git" >&2; exit 2; }

rm -rf "$KIT"
mkdir -p "$KIT/bin" "$KIT/real" "$KIT/lib"
cargo build --release -q -p quiver
# take NAME PATH: a stripped copy of the program at PATH and its wrapper (KIT/bin/NAME), and
# the libraries it needs that a bare machine may lack (all ldd resolves but glibc's own).
take() {
  local name=$1 path=$2 lib
  [ -x "$path" ] || { echo "device_kit.sh: $path is not an executable" >&2; exit 2; }
  cp "$path" "$KIT/real/$name"
  strip "$KIT/real/$name"
  printf '#!/bin/sh\nhere=$(dirname "$0")\nLD_LIBRARY_PATH="$here/../lib" exec "$here/../real/%s" "$@"\n' \
    "$name" >"$KIT/bin/$name"
  chmod +x "$KIT/bin/$name"
  for lib in $(ldd "$path" | awk '$3 ~ /^\// {print $3}'); do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux*) ;;
      *) cp -L "$lib" "$KIT/lib/" ;;
    esac
  done
}
take quiver target/release/quiver
[ -n "${BASE:-}" ] && take quiver-base "$BASE"
[ "$REDIS" != none ] && take redis-server "$REDIS"
[ -n "${VALKEY:-}" ] && take valkey-server "$VALKEY"

du -sh "$KIT"/real/* "$KIT"/lib/* 2>/dev/null | sed 's/^/  /'
echo "kit: $(du -sh "$KIT" | cut -f1) in $KIT. The device call:"
echo "  carry [\"$KIT\"], command \"KIT=$KIT scripts/device_grid.sh\", timeout_s 540"
