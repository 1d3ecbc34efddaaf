#!/usr/bin/env bash
# A local Quiver cluster: one etcd, N `quiver serve --cluster` nodes and one `quiver router` on
# free loopback ports, each in the background in its own session (they outlive this script),
# every file under one directory.
#
#   scripts/cluster.sh up --nodes N [--replicas R] [--spare K] --dir D [--bin PATH] [--node-config FILE]
#   scripts/cluster.sh down --dir D
#
# up: builds quiver (cargo build --release -p quiver, installing protoc when missing) unless
# --bin names a binary; installs etcd when missing; starts etcd (data in D/etcd) and the nodes
# node-1 .. node-N (data in D/node-I); waits until each node has registered in etcd; runs
# `quiver cluster create --replicas R` (chains of R nodes, 1 to 3, R <= N; R defaults to 1; a
# refused R makes up fail with quiver's message); waits until every node's
# CLUSTER INFO says cluster_state:ok; starts the manager (`quiver manager --name manager-1`: it
# repairs the chains when a node dies, stalls or restarts; its argv[0] is D/quiver-manager, so
# that its command line names D); starts the router (`quiver router --etcd URL --port P
# --config D/router.toml`: the front-end plain Redis clients use, no data directory), waits
# until it answers PING and its INFO shows a topology (router_epoch above 0); prints one JSON
# line on stdout:
#   {"etcd": "http://127.0.0.1:P", "etcd_pid": PID,
#    "nodes": [{"id": "node-1", "port": P, "pid": PID}, ...], "manager_pid": PID,
#    "router": P, "router_pid": PID}
# D/cluster.json holds the same (`manager_pid`, `router` and `router_pid` null until they
# start),
# rewritten as each process starts, so that `down` also stops what an interrupted `up` left.
# Logs: D/etcd.log, D/node-I.log, D/manager.log and D/router.log (stderr), D/node-I.out,
# D/manager.out and D/router.out (stdout). When up fails midway it stops what it started (the logs stay). D must not hold a
# cluster already. Each node (and the router) is started on the port it is recorded with
# (--port P, not 0): restarted by hand with the same command line (ps shows it), it keeps the
# address the topology (or the router's clients) know it by. --node-config FILE: a `quiver serve`
# settings file for every node (copied to D/node.toml, each node's --config), e.g.
# `disk-reserve = "32mb"` for many nodes on one small disk (each holds a 1 GiB reserve by
# default). --spare K: K more nodes, node-N+1 .. node-N+K, started and registered but left out
# of the topology, for `quiver cluster add-node` (growing the cluster).
#
# down: stops the processes recorded in D/cluster.json by PID, the manager first (else it would
# take the stopping nodes out of their chains), the router, then the nodes, etcd last: SIGTERM, a bounded wait (a node checkpoints its store), then SIGKILL. A PID
# that is no longer one of ours (its command line does not name D) is left alone. Data and
# logs stay in D.
#
# Needs python3 (etcd's health, CLUSTER INFO, the router's INFO) and, to build,
# cargo.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"

# Bound on each wait of up: etcd healthy, a node listening, registered, the cluster ok, the
# router routing.
WAIT_S=60
# Bound on the wait for a process to exit after SIGTERM (then SIGKILL), and after SIGKILL.
STOP_WAIT_S=30

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

# The network chores bash cannot do well alone: etcd's /health, a node's CLUSTER INFO or the router's PING and INFO (one RESP request and its
# reply, printed), the PIDs of a state file.
PY=$(
  cat <<'EOF'
import json, socket, sys, urllib.request

cmd, arg = sys.argv[1], sys.argv[2]
if cmd == "etcd-health":
    try:
        with urllib.request.urlopen(arg + "/health", timeout=2) as r:
            sys.exit(0 if json.load(r).get("health") == "true" else 1)
    except (OSError, ValueError):
        sys.exit(1)
elif cmd == "command":
    # command PORT ARG...: a bulk reply's text, a simple reply's, or exit 1 with the reply.
    args = [a.encode() for a in sys.argv[3:]]
    req = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    try:
        with socket.create_connection(("127.0.0.1", int(arg)), timeout=2) as s:
            s.sendall(req)
            f = s.makefile("rb")
            head = f.readline()
            if head.startswith(b"+"):
                print(head[1:].decode(errors="replace").strip())
            elif head.startswith(b"$") and int(head[1:]) >= 0:
                print(f.read(int(head[1:]) + 2).decode(errors="replace").replace("\r", ""))
            else:
                sys.exit("reply: " + head.decode(errors="replace").strip())
    except (OSError, ValueError) as e:
        sys.exit(str(e))
elif cmd == "pids":
    with open(arg) as f:
        state = json.load(f)
    if state.get("manager_pid"):
        print("manager", state["manager_pid"])
    if state.get("router_pid"):
        print("router", state["router_pid"])
    for n in state.get("nodes", []):
        print("node", n["pid"])
    if state.get("etcd_pid"):
        print("etcd", state["etcd_pid"])
EOF
)
py() { python3 -c "$PY" "$@"; }

# alive PID: the process exists and is not a zombie (one that exited but was not reaped yet).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# ours PID: the process's command line names the cluster's directory (a recycled PID does not).
ours() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$dir/"* ]]
}

# stop WHAT PID...: SIGTERM to each of ours still running, at most STOP_WAIT_S seconds for them
# to exit, then SIGKILL (and as long again for that).
stop() {
  local what=$1 pid live=()
  shift
  for pid in "$@"; do
    if alive "$pid" && ours "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      live+=("$pid")
    fi
  done
  local deadline=$((SECONDS + STOP_WAIT_S))
  for pid in "${live[@]}"; do
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
  done
  for pid in "${live[@]}"; do
    alive "$pid" || continue
    echo "cluster.sh: $what $pid did not exit within ${STOP_WAIT_S} s of SIGTERM: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
  deadline=$((SECONDS + STOP_WAIT_S))
  for pid in "${live[@]}"; do
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
    ! alive "$pid" || die "$what $pid is still running after SIGKILL"
  done
}

# Stops everything D/cluster.json records: the manager (it would repair the chains of the
# nodes being stopped), the router (its clients' requests need the nodes), the nodes, then etcd (the watches outlive etcd without harm; the other order would only make
# them log reconnection attempts).
stop_recorded() {
  local state=$dir/cluster.json kind pid managers=() routers=() nodes=() etcd=()
  [ -f "$state" ] || return 0
  while read -r kind pid; do
    case $kind in
      manager) managers+=("$pid") ;;
      router) routers+=("$pid") ;;
      node) nodes+=("$pid") ;;
      *) etcd+=("$pid") ;;
    esac
  done < <(py pids "$state")
  stop manager "${managers[@]}"
  stop router "${routers[@]}"
  stop node "${nodes[@]}"
  stop etcd "${etcd[@]}"
  echo "cluster.sh: stopped ${#managers[@]} manager, ${#routers[@]} router, ${#nodes[@]} node(s)" \
    "and ${#etcd[@]} etcd;" \
    "data and logs in $dir" >&2
}

# ---- up's state: what it started, written to D/cluster.json after each start.
etcd_url=
etcd_pid=
up_ok=0
node_pids=()
node_ports=()
router_port=
router_pid=
manager_pid=

state_json() {
  local i nodes=() joined
  for i in "${!node_pids[@]}"; do
    nodes+=("{\"id\": \"node-$((i + 1))\", \"port\": ${node_ports[i]:-null}, \"pid\": ${node_pids[i]}}")
  done
  printf -v joined '%s, ' "${nodes[@]}"
  local router=null
  [ -z "$router_pid" ] || router=$router_port
  printf '{"etcd": "%s", "etcd_pid": %s, "nodes": [%s], "manager_pid": %s, "router": %s, "router_pid": %s}\n' \
    "$etcd_url" "${etcd_pid:-null}" "${joined%, }" "${manager_pid:-null}" "$router" "${router_pid:-null}"
}

write_state() {
  state_json >"$dir/cluster.json.tmp"
  mv "$dir/cluster.json.tmp" "$dir/cluster.json"
}

# wait_until WHAT LOG PID COMMAND...: runs COMMAND until it succeeds, at most WAIT_S seconds;
# fails naming WHAT, with the tail of LOG, when the time is up or process PID has exited.
wait_until() {
  local what=$1 log=$2 pid=$3
  shift 3
  local deadline=$((SECONDS + WAIT_S))
  until "$@"; do
    local why=
    alive "$pid" || why="its process (pid $pid) exited"
    [ -n "$why" ] || ((SECONDS < deadline)) || why="not within ${WAIT_S} s"
    if [ -n "$why" ]; then
      echo "cluster.sh: $what: $why; the end of $log:" >&2
      tail -n 20 "$log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}

# up's EXIT trap: when up did not finish, stop what it started.
on_up_exit() {
  ((up_ok)) && return
  echo "cluster.sh: up failed: stopping what it started (logs in $dir)" >&2
  stop_recorded
}

etcd_healthy() { py etcd-health "$etcd_url"; }

# listening I: node I printed `quiver listening on 127.0.0.1:PORT` with its port.
listening() {
  local line
  line=$(head -n 1 "$dir/node-$(($1 + 1)).out" 2>/dev/null) || return 1
  [ "$line" = "quiver listening on 127.0.0.1:${node_ports[$1]}" ]
}

# info_has I LINE: node I's CLUSTER INFO has LINE.
info_has() {
  local text
  text=$(py command "${node_ports[$1]}" CLUSTER INFO 2>/dev/null) || return 1
  grep -qx -- "$2" <<<"$text"
}

# router_listening: the router printed `quiver router listening on 127.0.0.1:PORT` with its port.
router_listening() {
  local line
  line=$(head -n 1 "$dir/router.out" 2>/dev/null) || return 1
  [ "$line" = "quiver router listening on 127.0.0.1:$router_port" ]
}

# manager_running: the manager printed `quiver manager manager-1 running`.
manager_running() {
  [ "$(head -n 1 "$dir/manager.out" 2>/dev/null)" = "quiver manager manager-1 running" ]
}

# router_routing: the router answers PING, and its INFO names a topology (router_epoch > 0).
router_routing() {
  local text epoch
  [ "$(py command "$router_port" PING 2>/dev/null)" = PONG ] || return 1
  text=$(py command "$router_port" INFO router 2>/dev/null) || return 1
  epoch=$(sed -n 's/^router_epoch:\([0-9]*\)$/\1/p' <<<"$text")
  [ -n "$epoch" ] && ((epoch > 0))
}

up() {
  [ -n "$dir" ] || die "up needs --dir D"
  [[ $node_count =~ ^[1-9][0-9]*$ ]] || die "up needs --nodes N (a positive number)"
  [[ $replicas =~ ^[1-9][0-9]*$ ]] || die "--replicas R: a positive number"
  [[ $spare =~ ^[0-9]+$ ]] || die "--spare K: a number"
  if [ -e "$dir/cluster.json" ] || [ -e "$dir/etcd" ]; then
    die "$dir holds a cluster already: \`scripts/cluster.sh down --dir $dir\`, then remove it or pick another --dir"
  fi
  if [ -z "$bin" ]; then
    apt_install_missing protoc:protobuf-compiler make:make
    (cd "$repo" && cargo build --release -p quiver >&2)
    local target=${CARGO_TARGET_DIR:-target}
    [[ $target == /* ]] || target=$repo/$target
    bin=$target/release/quiver
  fi
  [ -x "$bin" ] || die "$bin is not an executable"
  local config_args=()
  if [ -n "$node_config" ]; then
    cp "$node_config" "$dir/node.toml" || die "--node-config $node_config: cannot be copied"
    config_args=(--config "$dir/node.toml")
  fi
  apt_install_missing etcd:etcd-server

  # From here on, a failure (or Ctrl-C) stops what was started.
  trap on_up_exit EXIT
  trap 'exit 130' INT TERM

  # Every port chosen now, the nodes' too: a node keeps its address when restarted by hand
  # with the command line its log directory names (the topology records nodes by address).
  local ports client_port peer_port
  ports=$(free_ports $((node_count + spare + 3)))
  read -r client_port peer_port router_port ports <<<"$ports"
  read -r -a node_ports <<<"$ports"
  etcd_url=http://127.0.0.1:$client_port
  local peer_url=http://127.0.0.1:$peer_port
  setsid etcd --name quiver --data-dir "$dir/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
    --initial-cluster "quiver=$peer_url" >"$dir/etcd.log" 2>&1 </dev/null &
  etcd_pid=$!
  write_state
  wait_until "etcd at $etcd_url" "$dir/etcd.log" "$etcd_pid" etcd_healthy

  local i id ids=() started=$((node_count + spare))
  for ((i = 0; i < started; i++)); do
    id=node-$((i + 1))
    ((i >= node_count)) || ids+=("$id")
    mkdir -p "$dir/$id"
    setsid "$bin" --dir "$dir/$id" serve --port "${node_ports[i]}" --cluster --etcd "$etcd_url" \
      --node-id "$id" "${config_args[@]}" \
      >"$dir/$id.out" 2>"$dir/$id.log" </dev/null &
    node_pids+=($!)
    write_state
  done
  for ((i = 0; i < started; i++)); do
    wait_until "node-$((i + 1)) listening" "$dir/node-$((i + 1)).log" "${node_pids[i]}" listening "$i"
  done
  for ((i = 0; i < started; i++)); do
    wait_until "node-$((i + 1)) registered in etcd" "$dir/node-$((i + 1)).log" "${node_pids[i]}" \
      info_has "$i" quiver_etcd_connected:1
  done

  local list
  list=$(
    IFS=,
    echo "${ids[*]}"
  )
  # The topology it prints goes to stderr: stdout is the JSON line's.
  "$bin" cluster create --etcd "$etcd_url" --replicas "$replicas" --nodes "$list" >&2 ||
    die "quiver cluster create --replicas $replicas --nodes $list failed (its message is above)"
  for ((i = 0; i < node_count; i++)); do
    wait_until "node-$((i + 1)) serving the topology (cluster_state:ok)" \
      "$dir/node-$((i + 1)).log" "${node_pids[i]}" info_has "$i" cluster_state:ok
  done

  # The manager: argv[0] names D (what `ours` recognises).
  setsid bash -c 'exec -a "$0" "$@"' "$dir/quiver-manager" "$bin" manager --etcd "$etcd_url" \
    --name manager-1 >"$dir/manager.out" 2>"$dir/manager.log" </dev/null &
  manager_pid=$!
  write_state
  wait_until "the manager running" "$dir/manager.log" "$manager_pid" manager_running

  # The router: its settings file puts D on its command line (what `ours` recognises).
  echo "# quiver router's settings (scripts/cluster.sh): the defaults" >"$dir/router.toml"
  setsid "$bin" router --etcd "$etcd_url" --port "$router_port" --config "$dir/router.toml" \
    >"$dir/router.out" 2>"$dir/router.log" </dev/null &
  router_pid=$!
  write_state
  wait_until "the router listening" "$dir/router.log" "$router_pid" router_listening
  wait_until "the router routing by the topology (router_epoch > 0)" "$dir/router.log" \
    "$router_pid" router_routing
  up_ok=1
  state_json
}

cmd=${1:-}
[ $# -eq 0 ] || shift
node_count=
replicas=1
spare=0
node_config=
dir=
bin=
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) node_count=${2:-}; shift 2 || die "--nodes needs a value" ;;
    --replicas) replicas=${2:-}; shift 2 || die "--replicas needs a value" ;;
    --spare) spare=${2:-}; shift 2 || die "--spare needs a value" ;;
    --dir) dir=${2:-}; shift 2 || die "--dir needs a value" ;;
    --bin) bin=${2:-}; shift 2 || die "--bin needs a value" ;;
    --node-config) node_config=${2:-}; shift 2 || die "--node-config needs a value" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "cluster.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
# Absolute paths: the processes outlive this script, and `ours` matches D in command lines.
if [ -n "$dir" ]; then
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
fi
if [ -n "$bin" ]; then
  [ -e "$bin" ] || die "--bin $bin: no such file"
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
fi

case $cmd in
  up) up ;;
  down)
    [ -n "$dir" ] || die "down needs --dir D"
    [ -f "$dir/cluster.json" ] || die "$dir/cluster.json: no cluster recorded there"
    stop_recorded
    ;;
  -h | --help) usage ;;
  *) echo "cluster.sh: up or down?" >&2; usage >&2; exit 2 ;;
esac
