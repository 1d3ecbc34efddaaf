#!/usr/bin/env bash
# The README's run command: builds Quiver and starts `quiver serve` on the default data dir
# (./quiver-data) and port (7379; QUIVER_PORT overrides it). Once the server answers, does real
# work through it with the quiver CLI: bulk-loads 1M keys as pipelined MSET vectors (first run
# only), reads a few back, writes and reads one more, prints the keyspace. Then keeps serving
# until Ctrl-C: SIGINT / SIGTERM are passed on to the server, which checkpoints the store and
# exits cleanly (exit status 0). The build needs protoc (Debian package protobuf-compiler) and
# make (jemalloc, the allocator, is built from its C sources): they are installed first when
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
apt_install_missing protoc:protobuf-compiler make:make
cargo build --release -p quiver
q=./target/release/quiver
dir=${QUIVER_DIR:-./quiver-data}
port=${QUIVER_PORT:-7379}
count=${QUIVER_KEYS:-1000000}
conn=(--port "$port")
serve_args=(--port "$port")
# The CLI sends QUIVER_PASSWORD when it is set: make the server ask for the same one.
if [ -n "${QUIVER_PASSWORD:-}" ]; then
  serve_args+=(--requirepass "$QUIVER_PASSWORD")
fi

# Anything already listening would answer the commands below in our server's place.
if (: <>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "run.sh: port $port is busy (another quiver serve?); stop it or set QUIVER_PORT" >&2
  exit 1
fi

"$q" --dir "$dir" serve "${serve_args[@]}" &
server=$!
# Ctrl-C / kill: pass the signal on; the server shuts down gracefully and `wait` below returns.
trap 'kill -INT "$server" 2>/dev/null || true' INT TERM
# A failing demo command ends the script: stop the server rather than orphan it.
trap 'kill -INT "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT

# Ready when INFO answers from this server's process (opening a large store takes a while).
deadline=$((SECONDS + 300))
until "$q" info server "${conn[@]}" --timeout-s 1 2>/dev/null | grep -qx "process_id:$server"; do
  if ! kill -0 "$server" 2>/dev/null; then
    status=0
    wait "$server" || status=$?
    echo "run.sh: quiver serve exited (status $status) before it was ready" >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "run.sh: quiver serve did not answer on port $port within 300 s" >&2
    exit 1
  fi
  sleep 0.2
done

# A new store (or a first run that was interrupted) gets the bulk load; loading again only
# rewrites the same keys with the same values.
keys=$("$q" info keyspace "${conn[@]}" | sed -n 's/^db0:keys=\([0-9]*\),.*/\1/p')
if [ "${keys:-0}" -lt "$count" ]; then
  "$q" load --count "$count" --key-size 16 --value-size 32 "${conn[@]}"
fi
for i in 0 42 $((count - 1)); do
  key=$(printf '%016d' "$i")
  printf '%s -> ' "$key"
  "$q" get "$key" "${conn[@]}"
done
"$q" set hello "world at $(date -u +%FT%TZ)" "${conn[@]}"
"$q" get hello "${conn[@]}"
"$q" info keyspace "${conn[@]}"
echo "run.sh: serving $dir on 127.0.0.1:$port until Ctrl-C (try: $q get hello --port $port)"

# Serve until the server exits. A trapped signal interrupts `wait` early, so wait again until
# the process is gone; the last `wait` gives the server's own exit status.
while kill -0 "$server" 2>/dev/null; do
  wait "$server" || true
done
trap - EXIT
wait "$server"
