#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (scripts/test.sh runs it), and
# nothing that is already there: the tools are checked first, so a second
# run does nothing. Quiet when nothing is missing; on failure the installer's output is printed.
#
#   scripts/test_deps.sh
#
# - protoc (Debian package protobuf-compiler): the build itself needs it (the etcd-client
#   crate compiles etcd's protos).
# - mount (util-linux): the engine's full-disk test mounts a small tmpfs.
# - redis-server, redis-cli and redis-benchmark (Debian packages redis-server, redis-tools): the reference server
#   the golden replies come from, and the redis-cli whose output the compat tests compare; the
#   client's cluster tests run three redis-server processes as a Redis Cluster (redis-cli --cluster).
# - etcd and etcdctl (Debian packages etcd-server, etcd-client): the cluster tests
#   (crates/quiver/tests/cluster) run a real etcd.
# - the Python `redis` package (redis-py) for redis_py_check.py and redis_py_cluster.py: pip
#   first; if pip refuses (PEP 668 "externally managed environment") or is missing, pip with
#   --break-system-packages, then Debian's python3-redis.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
  echo "test_deps.sh: $*" >&2
  cat "$log" >&2
  exit 1
}

# ---- protoc, mount, redis-server, redis-cli, redis-benchmark, etcd, etcdctl
apt_install_missing protoc:protobuf-compiler mount:mount redis-server:redis-server \
  redis-cli:redis-tools redis-benchmark:redis-tools etcd:etcd-server etcdctl:etcd-client ||
  fail "apt-get install failed (its output is above)"

# ---- redis-py
if ! python3 -c 'import redis' >/dev/null 2>&1; then
  python3 -m pip install --quiet redis >>"$log" 2>&1 ||
    python3 -m pip install --quiet --break-system-packages redis >>"$log" 2>&1 ||
    apt_install python3-redis ||
    fail "could not install the python redis package"
  # Debian's python3-redis serves /usr/bin/python3 only: make sure *this* python3 sees it.
  python3 -c 'import redis' >>"$log" 2>&1 || fail "python3 still cannot import redis"
fi
