#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/fuzz_targets/ in turn.
#
#   scripts/fuzz.sh [RUNS|SECONDSs] [TARGET...]
#
# RUNS: executions per target (default 10000000); "5s" instead runs each
# target for 5 seconds (what CI does, so a target that no longer builds or
# crashes at once fails CI). TARGETs default to every file in
# fuzz/fuzz_targets/. Seeds come from fuzz/seeds/TARGET (committed); what the
# fuzzer learns goes to fuzz/corpus/TARGET, finds to fuzz/artifacts/TARGET,
# libFuzzer's output to fuzz/logs/TARGET.log (all ignored by git). Ends with one line per target: executions and
# whether it found anything; exits 1 when one did, 2 when it cannot run.
#
# FUZZ_SANITIZER=none (default: address) builds without AddressSanitizer, a
# few times faster; the targets' own code is safe Rust, so AddressSanitizer
# only adds checks on the C code they reach (SQLite). Long runs use it.
# FUZZ_DEV=1 builds the targets unoptimised (cargo fuzz --dev): a cold build
# in well under half the time of the default optimised one (one codegen unit),
# with overflow checks still on; the runs are slower, so only CI's few-second
# smoke uses it.
set -euo pipefail
cd "$(dirname "$0")/.."

budget="${1:-10000000}"
shift || true
case "$budget" in
  *s) limit=(-max_total_time="${budget%s}") ;;
  *[!0-9]* | '') echo "scripts/fuzz.sh: '$budget' is neither a number of runs nor seconds (examples: 10000000, 5s)" >&2; exit 2 ;;
  *) limit=(-runs="$budget") ;;
esac

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "scripts/fuzz.sh: the nightly Rust toolchain is missing (cargo-fuzz needs it); install it with: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "scripts/fuzz.sh: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi

profile=()
[ "${FUZZ_DEV:-0}" = 1 ] && profile=(--dev)
summary=()
status=0
for t in "${targets[@]}"; do
  [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "scripts/fuzz.sh: no target '$t' in fuzz/fuzz_targets/" >&2; exit 2; }
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" fuzz/logs
  dirs=("fuzz/corpus/$t")
  [ -d "fuzz/seeds/$t" ] && dirs+=("fuzz/seeds/$t")
  log="fuzz/logs/$t.log"
  echo "== $t (${limit[*]})" >&2
  if cargo +nightly fuzz run "${profile[@]}" --sanitizer "${FUZZ_SANITIZER:-address}" "$t" "${dirs[@]}" -- "${limit[@]}" -print_final_stats=1 >"$log" 2>&1; then
    result="no crash"
  else
    result="FOUND (see $log and fuzz/artifacts/$t/)"
    status=1
    tail -n 30 "$log" >&2
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  summary+=("$(printf '%-24s %12s runs %8s/s  %s' "$t" "${runs:-?}" "${speed:-?}" "$result")")
done
printf '%s\n' "${summary[@]}"
exit "$status"
