#!/usr/bin/env bash
# Drive a server with Redis's own redis-cli and compare its output with redis_cli_expected.txt.
#
#   redis_cli_check.sh --port N [--host 127.0.0.1]
#
# 1. redis_cli_session.txt is fed to `redis-cli` on stdin, one command per line. With stdin and
#    stdout not terminals, redis-cli prints raw replies, one per line (nil as an empty line,
#    integers as digits, errors as their text followed by an empty line).
# 2. `redis-cli --scan --pattern 'k*'`, sorted (SCAN order is unspecified).
# 3. `redis-cli -x SET from_stdin < file`: the file's bytes, final newline included, become the
#    value; then STRLEN and GET read it back.
# Each part is introduced by a `== ...` line and ends with redis-cli's exit status. The whole
# output is diffed with redis_cli_expected.txt; exit 1 on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

host=127.0.0.1
port=
while (($#)); do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --host) host=$2; shift 2 ;;
    *) echo "usage: $0 --port N [--host H]" >&2; exit 2 ;;
  esac
done
[ -n "$port" ] || { echo "usage: $0 --port N [--host H]" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cli=(redis-cli -h "$host" -p "$port")

# Runs redis-cli with the given arguments (stdin as given by the caller) and records its exit
# status as part of the output, so a redis-cli that gives up on a bad reply shows in the diff.
run() {
  local status=0
  "${cli[@]}" "$@" || status=$?
  echo "(exit $status)"
}

{
  echo "== session: redis-cli < redis_cli_session.txt"
  run < "$here/redis_cli_session.txt"

  echo "== redis-cli --scan --pattern 'k*' | sort"
  "${cli[@]}" --scan --pattern 'k*' | LC_ALL=C sort

  echo "== redis-cli -x SET from_stdin < file"
  printf 'line one\nline two\twith a tab\n' >"$tmp/value"
  run -x SET from_stdin <"$tmp/value"
  run STRLEN from_stdin </dev/null
  run GET from_stdin </dev/null
  run DBSIZE </dev/null
} >"$tmp/actual" 2>&1

if ! diff -u --label expected "$here/redis_cli_expected.txt" --label actual "$tmp/actual"; then
  echo "redis-cli: output differs from redis_cli_expected.txt" >&2
  exit 1
fi
echo "redis-cli: session matches redis_cli_expected.txt"
