# shellcheck shell=bash
# Helpers shared by the scripts (test_deps.sh, run.sh, cluster.sh and the benchmark scripts):
# sourced, not run. The one home of package installation.

# Prints the calling script's header comment (its usage).
usage() { sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

# Runs a command as root: directly when we are root, else through sudo.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# apt_install PACKAGE... installs the packages, quietly: the installer's output is printed only
# when it fails. A failed install is tried once more after `apt-get update` (a fresh machine has
# no package lists yet). Returns non-zero when the packages could not be installed.
apt_install() {
  local out status=0
  echo "installing ${*}" >&2
  out=$(as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" 2>&1) ||
    out=$({ as_root apt-get update -qq &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } 2>&1) ||
    status=$?
  if ((status)); then printf '%s\n' "$out" >&2; fi
  return "$status"
}

# apt_install_missing COMMAND:PACKAGE ... installs each PACKAGE one of whose COMMANDs is not on
# the PATH (each package once), and nothing when every command is there.
apt_install_missing() {
  local need=() pair pkg
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null && continue
    pkg=${pair#*:}
    [[ " ${need[*]} " == *" $pkg "* ]] || need+=("$pkg")
  done
  ((${#need[@]})) || return 0
  apt_install "${need[@]}"
}

# Prints the path of a Go toolchain's `go`: the one on the PATH, else /usr/local/go/bin/go (where
# Go's own archive installs, often not on a non-login shell's PATH); fails when there is none.
go_binary() {
  if command -v go; then return 0; fi
  if [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go; else return 1; fi
}

# CPU seconds process $1 has used so far (user + system), from /proc.
cpu_seconds() {
  # Past the command name in parentheses, utime and stime are fields 12 and 13.
  sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f\n", ($12 + $13) / hz }'
}

# settle PID waits until the process is idle — under 2% of a core over half a second, at most
# SETTLE_MAX seconds [300] — and prints the CPU seconds it used meanwhile. After a write run, a
# store's compaction may go on for a while: waiting keeps it out of the next run's window (all
# servers share one core), and its CPU is charged to the run that left the garbage.
settle() {
  local pid=$1 start before after
  start=$(cpu_seconds "$pid")
  for _ in $(seq 1 $((2 * ${SETTLE_MAX:-300}))); do
    before=$(cpu_seconds "$pid")
    sleep 0.5
    after=$(cpu_seconds "$pid")
    awk -v a="$before" -v b="$after" 'BEGIN { exit !(b - a <= 0.01) }' && break
  done
  awk -v a="$start" -v b="$(cpu_seconds "$pid")" 'BEGIN { printf "%.2f\n", b - a }'
}

# free_ports N: N distinct loopback ports nothing listens on now, on one line (the one home of
# free ports: bash alone, no python). Candidates are drawn without repetition (so distinct)
# from below the kernel's ephemeral range: a port in it may be taken by any outgoing
# connection (a node's to etcd, say) between this check and the server's bind.
free_ports() {
  local p found=() low=10000 high=32767
  if read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && ((ephemeral > low + 1000)); then
    high=$((ephemeral - 1))
  fi
  for p in $(shuf -i "$low-$high" -n $(($1 + 100))); do
    (: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    found+=("$p")
    if ((${#found[@]} == $1)); then
      echo "${found[*]}"
      return 0
    fi
  done
  echo "free_ports: not $1 free ports found" >&2
  return 1
}

# A loopback port nothing listens on.
free_port() { free_ports 1; }

# stop_pids PID...: the cleanup of the processes a script started: SIGTERM to each, then waits
# for each. Empty arguments (a server not started yet) are skipped; never fails.
stop_pids() {
  local pid
  for pid in "$@"; do if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; done
  for pid in "$@"; do if [ -n "$pid" ]; then wait "$pid" 2>/dev/null || true; fi; done
}

# end_run RC DIR [LOG...]: the end of a script's EXIT trap. When RC (the script's exit status)
# is not 0, says the script failed and prints the last lines of each LOG that exists; then
# removes DIR, unless KEEP is 1 (then it says where DIR is kept).
end_run() {
  local rc=$1 dir=$2
  shift 2
  if ((rc != 0)); then
    echo "$(basename "$0") failed (exit $rc); the ends of the logs:" >&2
    if (($#)); then tail -n 5 "$@" >&2 2>/dev/null || true; fi
  fi
  if ((${KEEP:-0})); then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}

# wait_listening PORT: waits until something accepts connections on loopback port PORT (at
# most 60 s; needs no client program).
wait_listening() {
  local i
  for i in $(seq 1 600); do
    if (: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2
  return 1
}

# served_port FILE: the port of a `quiver serve --port 0` (or `quiver router`) whose stdout
# goes to FILE, once it printed its listening line (at most 60 s).
served_port() {
  local i port
  for i in $(seq 1 600); do
    port=$(grep -o '[0-9]*$' "$1" 2>/dev/null || true)
    if [ -n "$port" ]; then echo "$port"; return 0; fi
    sleep 0.1
  done
  echo "no listening line in $1" >&2
  return 1
}

# Figures of a benchmark whose rounds alternate systems: each goes to $RESULTS as
# "round<TAB>name<TAB>value". `put NAME VALUE` records one (the caller's $round); `mean NAME`
# is its mean over the rounds (0 if none); `ratios A B [C]` prints each round's A / B — over
# the larger of B and C when C is given — then "(mean m)".
put() { printf '%s\t%s\t%s\n' "$round" "$1" "$2" >>"$RESULTS"; }
mean() { awk -F'\t' -v n="$1" '$2 == n { s += $3; c++ } END { if (c) printf "%.0f", s / c; else print 0 }' "$RESULTS"; }
ratios() {
  awk -F'\t' -v a="$1" -v b="$2" -v c="${3:-}" '
    $2 == a { A[$1] = $3 } $2 == b { B[$1] = $3 } c != "" && $2 == c { C[$1] = $3 }
    END {
      for (r = 1; r in A; r++) {
        d = B[r]; if (c != "" && C[r] > d) d = C[r]
        if (d > 0) { x = A[r] / d; printf "%.2f ", x; s += x; k++ }
      }
      if (k) printf "(mean %.2f)", s / k
    }' "$RESULTS"
}

# no_args_or_help "$@": the arguments of a script that takes none but -h / --help (prints its
# usage and exits); anything else is refused with its usage.
no_args_or_help() {
  case "${1:-}" in
    "") ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$(basename "$0"): unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
}

# quick_or_help "$@": the arguments of a script that takes only --quick (sets QUICK to 0 or 1)
# and -h / --help (prints its usage and exits); anything else is refused with its usage.
quick_or_help() {
  QUICK=0
  local arg
  for arg in "$@"; do
    case "$arg" in
      --quick) QUICK=1 ;;
      -h | --help) usage; exit 0 ;;
      *) echo "$(basename "$0"): unknown argument $arg" >&2; usage >&2; exit 2 ;;
    esac
  done
}

# load_cluster_keys PORT N: writes N keys `key:%012d` of 32-byte values into the cluster one of
# whose nodes listens on PORT, through redis-py's RedisCluster (the cluster benchmarks' data).
load_cluster_keys() {
  python3 - "$1" "$2" <<'PY'
import sys, time
from redis.cluster import RedisCluster
port, n = int(sys.argv[1]), int(sys.argv[2])
rc = RedisCluster(host="127.0.0.1", port=port)
t = time.time()
step = 10000
for i in range(0, n, step):
    rc.mset_nonatomic({b"key:%012d" % j: b"v" * 32 for j in range(i, min(n, i + step))})
print(f"loaded {n} keys in {time.time() - t:.1f} s")
PY
}
