#!/usr/bin/env bash
# headroom's own iSCSI initiator vs libiscsi's iscsi-perf against the same
# LUN, interleaved (iscsi-perf, headroom, ...) ROUNDS times each, at equal
# queue depth; prints medians, spread and the ratio headroom/iscsi-perf, and
# CPU seconds per GB of each client (user + system of the whole process):
#   4K random reads, QD32 (iscsi-perf -r -m 32 -b 8)
#   1M sequential reads, QD8 (iscsi-perf -m 8 -b 2048)
#   the same with headroom offering 1 MiB receive segments (--iscsi)
# The lab: two network namespaces joined by a veth pair (optionally shaped
# with tbf at RATE, e.g. 1gbit), tgtd in one serving a LUN on a file of
# random data in /dev/shm (--bsoflags direct), the clients in the other.
#
# Usage (root): benches/proto_iscsi_vs_iscsi-perf.sh [ROUNDS] [SECONDS] [RATE]
# (ONLY_1M=1: the 1M reads only.)
# Needs tgt, libiscsi-bin (iscsi-perf), iproute2 and jq. Everything it makes
# (namespaces, tgtd, the LUN file) is removed at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
. benches/lib.sh
rounds=${1:-5}
secs=${2:-5}
rate=${3:-}
[ "$(id -u)" = 0 ] || { echo "proto_iscsi_vs_iscsi-perf: needs root (namespaces)" >&2; exit 1; }
for p in tgtd tgtadm iscsi-perf jq ip; do
  command -v $p >/dev/null || { echo "proto_iscsi_vs_iscsi-perf: $p is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
# HEADROOM=path uses that binary instead of building one.
if [ -z "${HEADROOM:-}" ]; then cargo build --release -q --bin headroom; fi
hr=${HEADROOM:-${CARGO_TARGET_DIR:-target}/release/headroom}

tag=hri$$
nas=${tag}a cli=${tag}b
ctl=$((1000 + $$ % 30000))
lun=/dev/shm/headroom-bench-iscsi-$$.img
tmp=$(mktemp -d)
cleanup() {
  ip netns pids "$nas" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$nas" 2>/dev/null || true
  ip netns del "$cli" 2>/dev/null || true
  rm -f "$lun" "/var/run/tgtd/socket.$ctl" "/var/run/tgtd/socket.$ctl.lock"
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$nas"
ip netns add "$cli"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$nas"
ip link set "${tag}y" netns "$cli"
ip -n "$nas" addr add 198.19.250.1/24 dev "${tag}x"
ip -n "$cli" addr add 198.19.250.2/24 dev "${tag}y"
for ns in "$nas" "$cli"; do ip -n "$ns" link set lo up; done
ip -n "$nas" link set "${tag}x" up
ip -n "$cli" link set "${tag}y" up
if [ -n "$rate" ]; then
  ip netns exec "$nas" tc qdisc add dev "${tag}x" root tbf rate "$rate" burst 256kb latency 50ms
  ip netns exec "$cli" tc qdisc add dev "${tag}y" root tbf rate "$rate" burst 256kb latency 50ms
fi
head -c 1G /dev/urandom >"$lun"
ip netns exec "$nas" tgtd -f --iscsi portal=198.19.250.1:3260 -C "$ctl" >/dev/null 2>&1 &
adm() { ip netns exec "$nas" tgtadm -C "$ctl" --lld iscsi "$@"; }
for _ in $(seq 50); do adm --op show --mode target >/dev/null 2>&1 && break; sleep 0.1; done
iqn=iqn.2026-11.dev.headroom.bench:lun
adm --op new --mode target --tid 1 -T "$iqn"
adm --op new --mode logicalunit --tid 1 --lun 1 -b "$lun" --bsoflags direct
adm --op bind --mode target --tid 1 -I ALL
url="iscsi://198.19.250.1/$iqn/1"
echo "proto_iscsi_vs_iscsi-perf: $url (1 GiB in /dev/shm), ${rate:-unshaped}, $rounds rounds of ${secs}s"

# run_perf BYTES_PER_IO ARGS...: "MB/s IOPS CPU-seconds" of one iscsi-perf run:
# its last average IOPS (it prints MB/s rounded to whole MiB, so MB/s is
# computed here from IOPS x bytes per I/O); CPU from /usr/bin/time.
run_perf() {
  local bytes=$1; shift
  local out iops cpu
  out=$(ip netns exec "$cli" timeout -s INT "$secs" /usr/bin/time -f "CPU %U %S" iscsi-perf "$@" "$url" 2>&1 || true)
  [ -z "${DEBUG:-}" ] || echo "$out" >&2
  iops=$(echo "$out" | grep -oE 'iops average [0-9]+' | tail -1 | awk '{print $3}')
  cpu=$(echo "$out" | awk '/^CPU/ {print $2 + $3}')
  awk -v i="${iops:-0}" -v b="$bytes" -v c="${cpu:-0}" 'BEGIN { print i * b / 1e6, i, c }'
}
run_hr() {
  local out cpu
  out=$(ip netns exec "$cli" /usr/bin/time -f "CPU %U %S" -o "$tmp/time" "$hr" disk "$url" "$@" --time "${secs}s" --ramp 0s --json --quiet) \
    || { echo "proto_iscsi_vs_iscsi-perf: headroom failed" >&2; exit 1; }
  cpu=$(awk '/^CPU/ {print $2 + $3}' "$tmp/time")
  echo "$out" | jq -r --arg cpu "$cpu" '.probes[0].summary | "\(.bytes_per_sec / 1e6) \(.iops) \($cpu)"'
}

bench() {
  local name=$1; shift
  local bytes=$1; shift
  local perf_args=$1; shift
  : >"$tmp/p"; : >"$tmp/h"
  for _ in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    run_perf "$bytes" $perf_args >>"$tmp/p"
    run_hr "$@" >>"$tmp/h"
  done
  local pm hm pi hi pc hc
  # CPU seconds per GB moved, per round, as a third column: the process's
  # CPU over the whole run / bytes (MB/s x seconds).
  awk -v s="$secs" '{ print $1, $2, ($1 > 0 ? $3 / ($1 * s / 1000) : 0) }' "$tmp/p" >"$tmp/p3"
  awk -v s="$secs" '{ print $1, $2, ($1 > 0 ? $3 / ($1 * s / 1000) : 0) }' "$tmp/h" >"$tmp/h3"
  pm=$(median_of "$tmp/p3" 1); hm=$(median_of "$tmp/h3" 1)
  pi=$(median_of "$tmp/p3" 2); hi=$(median_of "$tmp/h3" 2)
  pc=$(median_of "$tmp/p3" 3); hc=$(median_of "$tmp/h3" 3)
  printf '%-22s iscsi-perf %8.1f MB/s %8.0f IOPS %6.2f CPU s/GB | headroom %8.1f MB/s %8.0f IOPS %6.2f CPU s/GB | ratio %s\n' \
    "$name" "$pm" "$pi" "$pc" "$hm" "$hi" "$hc" "$(ratio "$hm" "$pm")"
  bench_row_from "iSCSI (tgt)" "$name" "MB/s" "iscsi-perf" ">= 1.0" "$tmp/h3" "$tmp/p3" 1
  bench_row_from "iSCSI (tgt)" "$name: CPU s per GB" "s/GB" "iscsi-perf" "<= 1.0" "$tmp/h3" "$tmp/p3" 3
}

[ -n "${ONLY_1M:-}" ] || bench "4K randread QD32" 4096 "-r -m 32 -b 8" --rw randread --bs 4k --qd 32
bench "1M read QD8" 1048576 "-m 8 -b 2048" --rw read --bs 1M --qd 8
# headroom offering 1 MiB receive segments (recorded in the result's
# granted keys) against iscsi-perf at libiscsi's 256 KiB: one Data-In PDU
# per read instead of four, so a quarter of the waits.
bench "1M read QD8, 1 MiB segments" 1048576 "-m 8 -b 2048" --rw read --bs 1M --qd 8 \
  --iscsi MaxRecvDataSegmentLength=1048576
