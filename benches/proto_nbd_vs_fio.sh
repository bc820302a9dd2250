#!/usr/bin/env bash
# headroom's NBD client vs fio's nbd engine (libnbd, Debian's fio 3.33) on the
# lab NAS: nbdkit's memory plugin in one network namespace, both clients in
# another, joined by an unshaped veth. Interleaved (fio, headroom, fio,
# headroom, ...) ROUNDS times each, at equal queue depth; prints medians,
# spread (max-min as % of the median) and the ratio headroom/fio for:
#   1M sequential read QD8: MB/s (goal >= 1.0)
#   4K random read QD32: IOPS (goal >= 1.0)
#   CPU seconds per GB moved of both (user+sys of all threads, /usr/bin/time;
#   the ramp's CPU counts too, the same for both)
# The export is filled with random data first (fio, sequential 1M writes),
# so no read is answered from never-written (all-zero) memory.
#
# Usage (root): benches/proto_nbd_vs_fio.sh [ROUNDS] [SECONDS]   (HEADROOM_BIN=path: use that binary)
# PIN=1 (the default): nbdkit on CPU 0, both clients on CPU 1 (taskset).
# nbdkit's memory plugin is itself CPU-bound at 4K QD32, and on 2 cores its
# threads spill onto the client's core: unpinned, the figure is how the
# scheduler shares the cores (15-20% spread per tool; headroom's worker was
# preempted by nbdkit ~7000 times a second in one run, fio's ~140 in another,
# with identical system calls per I/O). PIN=0 lets the scheduler place them.
# Needs nbdkit, fio and jq. Namespaces, veth and nbdkit are removed at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
. benches/lib.sh
rounds=${1:-5}
secs=${2:-3}
ramp=1
size=1g
[ "$(id -u)" = 0 ] || { echo "proto_nbd_vs_fio: needs root (network namespaces)" >&2; exit 1; }
for p in nbdkit fio jq; do
  command -v "$p" >/dev/null || { echo "proto_nbd_vs_fio: $p is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done

# HEADROOM_BIN: a headroom binary to use instead of building one.
hr=${HEADROOM_BIN:-}
if [ -z "$hr" ]; then
  cargo build --release -q --bin headroom
  hr=${CARGO_TARGET_DIR:-target}/release/headroom
fi
# The lab's machine lock (headroom_lab::hold_machine): no measuring test runs beside the bench.
exec 9>"${TMPDIR:-/tmp}/headroom-lab-machine.lock"
flock 9
tmp=$(mktemp -d)
nas=hrnbd$$a
client=hrnbd$$b
nbdkit_pid=""
cleanup() {
  [ -n "$nbdkit_pid" ] && kill "$nbdkit_pid" 2>/dev/null || true
  ip netns del "$nas" 2>/dev/null || true
  ip netns del "$client" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$nas"
ip netns add "$client"
ip link add "nbd$$a" netns "$nas" type veth peer name "nbd$$b" netns "$client"
ip -n "$nas" addr add 198.19.77.1/24 dev "nbd$$a"
ip -n "$client" addr add 198.19.77.2/24 dev "nbd$$b"
for ns in "$nas" "$client"; do ip -n "$ns" link set lo up; done
ip -n "$nas" link set "nbd$$a" up
ip -n "$client" link set "nbd$$b" up
pin_server=() pin_client=()
if [ "${PIN:-1}" = 1 ]; then pin_server=(taskset -c 0) pin_client=(taskset -c 1); fi
ip netns exec "$nas" "${pin_server[@]}" nbdkit --foreground --ip-addr 198.19.77.1 --port 10809 memory "$size" 2>"$tmp/nbdkit.log" &
nbdkit_pid=$!
url=nbd://198.19.77.1:10809/
for _ in $(seq 50); do
  ip netns exec "$client" bash -c 'exec 3<>/dev/tcp/198.19.77.1/10809' 2>/dev/null && break
  sleep 0.1
done
echo "proto_nbd_vs_fio: filling $url with random data"
ip netns exec "$client" fio --name=fill --ioengine=nbd --uri="$url" --rw=write --bs=1M --iodepth=8 --size="$size" \
  --refill_buffers --output-format=terse >/dev/null

# cpu_of CMD...: runs CMD in the client namespace, stdout to $tmp/out,
# user+sys CPU seconds of all its threads to $tmp/cpu.
cpu_of() {
  /usr/bin/time -f "%U %S" -o "$tmp/time" ip netns exec "$client" "${pin_client[@]}" "$@" >"$tmp/out" 2>"$tmp/err" \
    || { cat "$tmp/err" >&2; exit 1; }
  awk '{print $1 + $2}' "$tmp/time" >"$tmp/cpu"
}

# run_fio RW BS QD -> "MB/s IOPS cpu_s_per_GB"
run_fio() {
  cpu_of fio --name=bench --ioengine=nbd --uri="$url" --rw="$1" --bs="$2" --iodepth="$3" --numjobs=1 \
    --size="$size" --norandommap --randrepeat=0 --time_based --runtime="$secs" --ramp_time="$ramp" \
    --output-format=json --output="$tmp/fio.json"
  # (--output: fio's nbd engine prints "connected to NBD server" on stdout.)
  jq -r --argjson cpu "$(cat "$tmp/cpu")" \
    '.jobs[0].read | "\(.bw_bytes / 1e6) \(.iops) \($cpu / (.io_bytes / 1e9))"' "$tmp/fio.json"
}

# run_hr RW BS QD -> "MB/s IOPS cpu_s_per_GB"
run_hr() {
  cpu_of "$hr" disk "$url" --rw "$1" --bs "$2" --qd "$3" --size "$size" --time "${secs}s" --ramp "${ramp}s" --json
  jq -r --argjson cpu "$(cat "$tmp/cpu")" \
    '.probes[0] | "\(.summary.bytes_per_sec / 1e6) \(.summary.iops) \($cpu / (.summary.ops * .spec.block_size / 1e9))"' \
    "$tmp/out"
}

report() { # NAME COLUMN UNIT GOAL [ROW: the figure's name in all.sh's table; default NAME]
  read -r fm fs <<<"$(stats "$tmp/fio" "$2")"
  read -r hm hs <<<"$(stats "$tmp/hr" "$2")"
  printf "%-30s fio %10.5g %-8s (spread %5.1f%%)  headroom %10.5g (spread %5.1f%%)  ratio %s  goal %s\n" \
    "$1" "$fm" "$3" "$fs" "$hm" "$hs" "$(ratio "$hm" "$fm")" "$4"
  bench_row "NBD (nbdkit memory)" "${5:-$1}" "$3" "$hm" "$hs" "fio nbd engine" "$fm" "$fs" "$4"
}

bench() { # RW BS QD
  : >"$tmp/fio"; : >"$tmp/hr"
  for _ in $(seq "$rounds"); do
    run_fio "$@" >>"$tmp/fio"
    run_hr "$@" >>"$tmp/hr"
  done
}

echo "proto_nbd_vs_fio: $rounds rounds of ${secs}s (+${ramp}s ramp) each, interleaved fio/headroom, nbdkit memory over a veth, PIN=${PIN:-1}"
bench read 1M 8
report "1M seq read QD8" 1 "MB/s" ">= 1.0"
report "  CPU s per GB" 3 "s/GB" "<= 1.0" "1M seq read QD8: CPU s per GB"
bench randread 4k 32
report "4K randread QD32" 2 "IOPS" ">= 1.0"
report "  CPU s per GB" 3 "s/GB" "<= 1.0" "4K randread QD32: CPU s per GB"
exit 0
