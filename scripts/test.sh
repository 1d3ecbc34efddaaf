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
# Every suite runs even when one before it failed (one failure never hides another); the
# script exits non-zero at the end if any did.
status=0
# Unit, integration and doc tests of every crate; --no-fail-fast: every test binary runs.
cargo test --workspace --no-fail-fast -- --test-threads 2 2>&1 | tee "$log" || status=1
# The linearizability checker's own tests (tools/lincheck: hand-written histories).
go=$(go_binary)
(cd tools/lincheck && "$go" vet ./... && "$go" test -v ./...) 2>&1 | tee -a "$log" || status=1

# One closing line for the whole run (cargo prints one per test binary, go test one per test).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     /^--- PASS:/ { p++ } /^--- FAIL:/ { f++ }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
if [ "$status" -ne 0 ]; then
    echo "FAILED: see the failures above (cargo lists them per test binary)" >&2
fi
exit "$status"
