# Helpers shared by the benchmark scripts (bench_engine.sh, compare.sh, paper.sh): sourced, not run.

# Prints the calling script's header comment (its usage).
usage() { sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

# Runs a command as root: directly when we are root, else through sudo.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# apt_install_missing COMMAND:PACKAGE ... installs each PACKAGE whose COMMAND is not on the PATH
# (apt-get update only if the first install attempt fails).
apt_install_missing() {
  local need=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
  done
  ((${#need[@]})) || return 0
  echo "installing ${need[*]}" >&2
  as_root apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 ||
    { as_root apt-get update -qq && as_root apt-get install -y -qq "${need[@]}" >/dev/null; }
}
