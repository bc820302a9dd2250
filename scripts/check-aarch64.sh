#!/usr/bin/env bash
# Builds the static aarch64 binary (scripts/build-static.sh --target aarch64)
# and runs it under qemu-user on this x86-64 machine: --version, link (its
# figures must equal the x86-64 binary's), sys, cpu (every kernel is checked
# for a correct answer before it is timed; prints which code path each took),
# a disk quick preset on a temporary directory (prints the engine that ran),
# and serve answering a net test from the x86-64 binary over loopback.
# Prints each check and its result; exits 1 if any failed, 2 if the build or
# its tools are missing. What this proves and what it cannot (speed, real ARM
# hardware, io_uring): README.md, "Platforms".
#   bash scripts/check-aarch64.sh            the x86-64 client is the static build's
#   HEADROOM_X86_BIN=PATH bash scripts/check-aarch64.sh
#   CARGO_TARGET_DIR_AARCH64=DIR  where the check's build goes (target/aarch64-check)
# Needs scripts/install-aarch64-deps.sh (as root), jq, and the x86-64 binary
# (CI builds it first with scripts/build-static.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

qemu=qemu-aarch64-static
command -v "$qemu" >/dev/null || { echo "check-aarch64: $qemu is missing; run scripts/install-aarch64-deps.sh as root" >&2; exit 2; }
command -v jq >/dev/null || { echo "check-aarch64: jq is missing; run scripts/install-deps.sh as root" >&2; exit 2; }
x86="${HEADROOM_X86_BIN:-$(bash scripts/build-static.sh --print-path)}"
[ -x "$x86" ] || { echo "check-aarch64: the x86-64 client $x86 is missing; run scripts/build-static.sh (or set HEADROOM_X86_BIN)" >&2; exit 2; }

# The checks prove code paths, not speed (qemu is no ARM machine): the binary
# they run is built at opt-level 1 with 256 codegen units in a directory of its
# own, as scripts/check-windows.sh does, so CI's cold cross build costs about
# half the release build's time; `scripts/build-static.sh --target aarch64`
# alone still makes the optimised binary a NAS gets, in target/static.
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-256}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_AARCH64:-target/aarch64-check}"
start=$SECONDS
bin="$(bash scripts/build-static.sh --target aarch64 | tail -1)"
echo "check-aarch64: built $bin in $((SECONDS - start)) s"
readelf -hW "$bin" | grep -q "Machine: *AArch64" || { echo "check-aarch64: $bin is not an AArch64 binary" >&2; exit 2; }

work="$(mktemp -d /tmp/headroom-aarch64.XXXXXX)"
trap 'rm -rf "$work"' EXIT

arm() { "$qemu" "$bin" "$@"; }
failed=()
checks_start=$SECONDS
# check NAME FUNCTION: runs FUNCTION with its output in $work/NAME.log: its
# last line (the finding) follows "ok", the lines before it are printed
# indented; all of it when it fails.
check() {
  local name="$1" t0=$SECONDS
  shift
  # Run as a job, not as an `if` condition: there bash would ignore set -e
  # inside the function and only its last command would count.
  "$@" >"$work/$name.log" 2>&1 &
  if wait $!; then
    echo "check-aarch64: $name ... ok ($((SECONDS - t0)) s): $(tail -1 "$work/$name.log")"
    head -n -1 "$work/$name.log" | sed 's/^/    /'
  else
    echo "check-aarch64: $name ... FAILED ($((SECONDS - t0)) s):"
    sed 's/^/    /' "$work/$name.log"
    failed+=("$name")
  fi
}

version() {
  local want got
  want="$("$x86" --version)"
  got="$(arm --version)"
  [ "$got" = "$want" ] || { echo "aarch64 says '$got', x86-64 says '$want'"; return 1; }
  echo "$got"
}

# Pure arithmetic: both architectures must print the same figures.
link() {
  arm --json link 10gbe --mtu 9000 >"$work/link-arm.json"
  "$x86" --json link 10gbe --mtu 9000 >"$work/link-x86.json"
  jq -S 'del(.started_at, .host)' "$work/link-arm.json" >"$work/a"
  jq -S 'del(.started_at, .host)' "$work/link-x86.json" >"$work/b"
  diff "$work/a" "$work/b"
  echo "10gbe at MTU 9000: TCP goodput $(jq -r '.ceilings.tcp.goodput_bits_per_sec' "$work/link-arm.json") b/s, the document identical to x86-64's"
}

sys() {
  arm --json sys >"$work/sys.json"
  jq -e '.cpu.logical_cpus > 0 and .memory_bytes > 0 and (.nics | length) > 0 and (.block_devices | length) > 0' "$work/sys.json" >/dev/null
  echo "$(jq -r '.cpu.logical_cpus' "$work/sys.json") CPUs, $(jq -r '.nics | length' "$work/sys.json") NICs, $(jq -r '.block_devices | length' "$work/sys.json") disks (qemu-user shows the host kernel's /proc and /sys)"
}

cpu() {
  arm --json cpu --time 100ms --threads 1 >"$work/cpu.json"
  # One figure per kernel, each above zero (cpu exits 2 if a kernel gave a wrong answer).
  jq -e '(.probes | length) >= 20 and all(.probes[]; .summary.bytes_per_sec > 0)' "$work/cpu.json" >/dev/null
  jq -r '.probes[] | "  \(.spec.kernel): \(.details.implementation)"' "$work/cpu.json" | sort -u
  arm cpu --time 10ms --threads 1 --kernels crc32c --no-color --quiet | sed -n '2p' | sed 's/^ */  features: /'
  echo "$(jq '[.probes[].spec.kernel] | unique | length' "$work/cpu.json") kernels verified, $(jq '.probes | length' "$work/cpu.json") figures timed"
}

disk() {
  mkdir "$work/disk"
  arm --json disk "$work/disk" --preset quick --size 32M --time 1s --ramp 0s >"$work/disk.json"
  jq -e '(.probes | length) == 6 and all(.probes[]; .summary.bytes_per_sec > 0)' "$work/disk.json" >/dev/null
  [ -z "$(ls -A "$work/disk")" ] || { echo "test file left behind: $(ls "$work/disk")"; return 1; }
  echo "quick preset, 6 tests, engine $(jq -r '[.probes[].spec.engine] | unique | join(",")' "$work/disk.json")"
}

net() {
  local port token=check-aarch64-$$
  port=$((20000 + RANDOM % 20000))
  HEADROOM_TOKEN=$token "$qemu" "$bin" serve --port "$port" >"$work/serve.log" 2>&1 &
  serve_pid=$!
  # This check runs in its own process: a failure below ends it, and the server with it.
  trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 50); do
    grep -q "listening on" "$work/serve.log" && break
    sleep 0.2
  done
  HEADROOM_TOKEN=$token "$x86" --json net "127.0.0.1:$port" --protocol headroom --time 1s --tests rtt,up1,down1 >"$work/net.json"
  kill "$serve_pid"
  wait "$serve_pid" 2>/dev/null || true
  jq -e '(.probes | length) == 3 and all(.probes[]; .spec.protocol == "headroom")
         and all(.probes[] | select(.id != "rr-idle"); .summary.bytes_per_sec > 0)' "$work/net.json" >/dev/null
  # The aarch64 server logged both transfers it served.
  grep -q "test=tcp .*status=ok" "$work/serve.log"
  grep -q "test=tcp_reverse .*status=ok" "$work/serve.log"
  echo "x86-64 net -> aarch64 serve on 127.0.0.1:$port: $(jq -r '.probes[] | "\(.id) \(if .summary.bytes_per_sec > 0 then "\(.summary.bytes_per_sec * 8 / 1e9 | . * 100 | round / 100) Gb/s" else "\(.summary.latency_ns.p50 / 1000 | round) us p50" end)"' "$work/net.json" | paste -sd ' ' -)"
}

check version version
check link link
check sys sys
check cpu cpu
check disk disk
check net net

echo "check-aarch64: checks took $((SECONDS - checks_start)) s under qemu"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "check-aarch64: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "check-aarch64: all checks passed"
