#!/usr/bin/env bash
# The whole test suite: installs what the tests need (idempotent), then runs
# every test of every crate in release mode (the measuring tests need an
# optimised build to be faster than what they measure).
#
# Passing tests' output is shown (their figures, and the reason of every
# test or case that skipped), and a summary of the skips ends the run, so a
# skip is never silent. Every test binary runs even after a failure
# (--no-fail-fast), so one run shows every failure, and the failures are
# printed once more at the end. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Arithmetic overflow panics in the tested build, as in a debug one: a
# wrapped subtraction otherwise passes unseen in release (a chart colour's
# did, session 26). The shipped release profile keeps Rust's default.
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS="${CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS:-true}"
bash scripts/install-deps.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
harness=(-- --show-output)
for arg in "$@"; do
  if [ "$arg" = "--" ]; then harness=(--show-output); fi
done
status=0
cargo test --workspace --release --all-targets --no-fail-fast "$@" "${harness[@]}" 2>&1 | tee "$log" || status=$?
echo "== skipped tests and cases, with their reasons:"
grep -h "SKIPPED" "$log" | sort | uniq -c || echo "   none"
if [ "$status" -ne 0 ]; then
  # Again at the end, where a truncated CI log still shows them: each failing
  # test's output and panic (cargo prints them amid every passing test's output).
  echo "== failures (exit $status), each failing test's output again:"
  awk '/^failures:$/ {on = 1} on {print} /^test result:/ {on = 0}' "$log"
fi
exit "$status"
