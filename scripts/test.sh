#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run runs exactly this).
# It installs whatever the tests need, so it works on a fresh Debian machine with Rust.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v mount >/dev/null || need_apt+=(mount)
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq "${need_apt[@]}"
  fi
fi

cargo test --workspace --all-targets -- --test-threads 2
cargo test --workspace --doc
