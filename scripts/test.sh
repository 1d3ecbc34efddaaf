#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run runs exactly this).
# It installs whatever the tests need, so it works on a fresh Debian machine with Rust.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

scripts/test_deps.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Unit, integration and doc tests of every crate.
cargo test --workspace -- --test-threads 2 2>&1 | tee "$log"
# The linearizability checker's own tests (tools/lincheck: hand-written histories).
go=$(go_binary)
(cd tools/lincheck && "$go" vet ./... && "$go" test -v ./...) 2>&1 | tee -a "$log"

# One closing line for the whole run (cargo prints one per test binary, go test one per test).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^--- PASS:/ { p++ } /^--- FAIL:/ { f++ }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
