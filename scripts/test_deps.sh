#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (scripts/test.sh runs it), and
# nothing that is already there: the tools are checked first, so a second
# run does nothing. Quiet when nothing is missing; on failure the installer's output is printed.
#
#   scripts/test_deps.sh
#
# - protoc (Debian package protobuf-compiler): the build itself needs it (the etcd-client
#   crate compiles etcd's protos).
# - make: the build of jemalloc, the servers' allocator (the tikv-jemalloc-sys crate), runs it.
# - mount (util-linux): the engine's full-disk test mounts a small tmpfs.
# - redis-server, redis-cli and redis-benchmark (Debian packages redis-server, redis-tools): the reference server
#   the golden replies come from, and the redis-cli whose output the compat tests compare; the
#   client's cluster tests run three redis-server processes as a Redis Cluster (redis-cli --cluster).
# - etcd and etcdctl (Debian packages etcd-server, etcd-client): the cluster tests
#   (crates/quiver/tests/cluster) run a real etcd.
# - iptables: the cluster's partition test cuts two nodes apart with rules on loopback.
# - openssl: the TLS tests make a client certificate as an operator would (`openssl x509 -req`).
# - the Python `redis` package (redis-py) for redis_py_check.py and redis_py_cluster.py: pip
#   first; if pip refuses (PEP 668 "externally managed environment") or is missing, pip with
#   --break-system-packages, then Debian's python3-redis.
# - Go (Debian package golang-go; bookworm's 1.19 is enough, tools/lincheck/go.mod says why)
#   unless a `go` is on the PATH or in /usr/local/go/bin, and with it the linearizability
#   checker tools/lincheck (porcupine, from the Go module proxy; go.sum pins it), built into
#   target/lincheck/lincheck when missing or older than its sources. The cluster tests'
#   `lincheck` and the history checks run it.
# - redis_exporter (oliver006/redis_exporter, the Prometheus exporter Redis operators run),
#   installed with Go into target/tools/redis_exporter when missing: the operator tests scrape
#   a node with it.
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

# ---- protoc, make, mount, redis-server, redis-cli, redis-benchmark, etcd, etcdctl, iptables, openssl
apt_install_missing protoc:protobuf-compiler make:make mount:mount redis-server:redis-server \
  redis-cli:redis-tools redis-benchmark:redis-tools etcd:etcd-server etcdctl:etcd-client \
  iptables:iptables openssl:openssl ||
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

# ---- Go, and the linearizability checker built with it
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! go_bin=$(go_binary); then
  apt_install_missing go:golang-go || fail "apt-get install golang-go failed (its output is above)"
  go_bin=$(go_binary) || fail "golang-go is installed but go is not on the PATH"
fi
lincheck=$root/target/lincheck/lincheck
# Stale when missing or older than any of its sources (go.mod and go.sum included).
if [[ ! -x $lincheck ]] ||
  [[ -n $(find "$root/tools/lincheck" -type f \( -name '*.go' -o -name 'go.*' \) -newer "$lincheck" -print -quit) ]]; then
  # -buildvcs=false: the binary needs no version control stamp (and a work tree of another
  # owner would make Go refuse to read it).
  (cd "$root/tools/lincheck" && "$go_bin" build -buildvcs=false -o "$lincheck" .) >>"$log" 2>&1 ||
    fail "could not build tools/lincheck with $go_bin ($("$go_bin" version 2>&1))"
fi

# ---- redis_exporter, with the same Go
exporter=$root/target/tools/redis_exporter
if [[ ! -x $exporter ]]; then
  GOBIN=$root/target/tools "$go_bin" install github.com/oliver006/redis_exporter@v1.97.0 \
    >>"$log" 2>&1 || fail "could not install redis_exporter with $go_bin ($("$go_bin" version 2>&1))"
fi
