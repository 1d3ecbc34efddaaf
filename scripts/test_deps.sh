#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (scripts/test.sh runs it), and
# nothing that is already there: the tools are checked first, so a second
# run does nothing. Quiet on success; on failure the installer's output is printed.
#
#   scripts/test_deps.sh
#
# - mount (util-linux): the engine's full-disk test mounts a small tmpfs.
# - redis-server, redis-cli and redis-benchmark (Debian packages redis-server, redis-tools): the reference server
#   the golden replies come from, and the redis-cli whose output the compat tests compare; the
#   client's cluster tests run three redis-server processes as a Redis Cluster (redis-cli --cluster).
# - the Python `redis` package (redis-py) for redis_py_check.py: pip first; if pip refuses
#   (PEP 668 "externally managed environment") or is missing, pip with --break-system-packages,
#   then Debian's python3-redis.
set -euo pipefail

log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
  echo "test_deps.sh: $*" >&2
  cat "$log" >&2
  exit 1
}

# apt needs root: use sudo when we are not root.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  if ((!apt_updated)); then
    as_root apt-get update -qq >>"$log" 2>&1 || fail "apt-get update failed"
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$log" 2>&1
}

# ---- mount, redis-server, redis-cli, redis-benchmark
need_apt=()
command -v mount >/dev/null || need_apt+=(mount)
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null || need_apt+=(redis-tools)
if ((${#need_apt[@]})); then
  apt_install "${need_apt[@]}" || fail "apt-get install ${need_apt[*]} failed"
fi

# ---- redis-py
if ! python3 -c 'import redis' >/dev/null 2>&1; then
  python3 -m pip install --quiet redis >>"$log" 2>&1 ||
    python3 -m pip install --quiet --break-system-packages redis >>"$log" 2>&1 ||
    apt_install python3-redis ||
    fail "could not install the python redis package"
  # Debian's python3-redis serves /usr/bin/python3 only: make sure *this* python3 sees it.
  python3 -c 'import redis' >>"$log" 2>&1 || fail "python3 still cannot import redis"
fi
