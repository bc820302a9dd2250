#!/usr/bin/env bash
# Makes the far-end verdict fixtures (crates/analysis/tests/fixtures/far-*.json)
# from real runs of `headroom run --server ... --remote-path ...` on this
# machine, each with one hop of the path made the narrow one (docs/reference/lab.md):
#
#   far-disk-bound  the server's allowed directory on an ext4 loop device
#                   held to 40 MB/s by a blkio throttle; loopback network
#   far-link-bound  the server in its own network namespace behind a veth
#                   shaped by tbf like a 1 GbE link (rate 1e9 x 1514/1538),
#                   run with --link 1gbe; the server's disk is this VM's disk
#   far-cpu-bound   the server process in a cgroup held to 3% of one core;
#                   loopback network
#
# The server runs under `unshare --uts` with the hostname "nas", so the
# documents name it as a NAS would be named. Everything made here carries
# this script's pid and is removed on exit, also on failure. Needs root.
#
#   scripts/far-fixtures.sh [OUTDIR [CASE...]]   (default: crates/analysis/tests/fixtures;
#                                                cases: disk link cpu, default all)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HEADROOM=${HEADROOM:-$ROOT/target/release/headroom}
OUT=${1:-$ROOT/crates/analysis/tests/fixtures}
CASES=${*:2}
CASES=${CASES:-disk link cpu}
want() { [[ " $CASES " == *" $1 "* ]]; }
TAG=hrfv$$
PORT=$(( 20000 + $$ % 10000 ))
IMG=/tmp/$TAG.img MNT=/tmp/$TAG-mnt DIR=/tmp/$TAG-dir
BLKIO=/sys/fs/cgroup/blkio/$TAG CPU=/sys/fs/cgroup/cpu/$TAG
NS=$TAG-s DEV_S=${TAG}s DEV_C=${TAG}c ADDR_S=198.18.201.1 ADDR_C=198.18.201.2
LOOP="" SERVE=""

[ "$(id -u)" -eq 0 ] || { echo "far-fixtures.sh: needs root (loop devices, cgroups, namespaces)" >&2; exit 2; }

cleanup() {
  [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null || true
  ip link del "$DEV_C" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  mountpoint -q "$MNT" && umount "$MNT" || true
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
  rm -rf "$IMG" "$MNT" "$DIR"
  for cg in "$BLKIO" "$CPU"; do [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

# The machine lock every measuring test takes (crates/lab: hold_machine).
exec 9>/tmp/headroom-lab-machine.lock
flock 9

# Starts `headroom serve` as host "nas" (in namespace $1 when given) and
# waits for its port.
serve() {
  local ns=$1 bind=$2 allow=$3
  local cmd=(unshare --uts sh -c "hostname nas; exec $HEADROOM serve --bind $bind --port $PORT --no-auth --allow-path $allow --quiet")
  if [ -n "$ns" ]; then ip netns exec "$ns" "${cmd[@]}" >/dev/null 2>&1 & else "${cmd[@]}" >/dev/null 2>&1 & fi
  SERVE=$!
  for _ in $(seq 50); do
    if [ -n "$ns" ]; then ip netns exec "$ns" ss -ltn | grep -q ":$PORT " && return; else ss -ltn | grep -q ":$PORT " && return; fi
    sleep 0.1
  done
  echo "far-fixtures.sh: headroom serve did not start" >&2; exit 2
}

stop_serve() { kill "$SERVE"; wait "$SERVE" 2>/dev/null || true; SERVE=""; }

run() { # label server remote-path [extra args]
  local label=$1 server=$2 path=$3; shift 3
  "$HEADROOM" run --server "$server" --remote-path "$path" --label "$label" --json --quiet "$@" >"$OUT/$label.json"
  echo "$label: $(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["verdict"]; print(v["explanation"])' "$OUT/$label.json")"
}

# 1. The server's disk: ext4 on a loop device, 40 MB/s each way.
if want disk; then
truncate -s 3G "$IMG"
LOOP=$(losetup -f --show "$IMG")
mkfs.ext4 -q "$IMG"
mkdir -p "$MNT" && mount "$LOOP" "$MNT"
mkdir -p "$BLKIO"
majmin=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
echo "$majmin 40000000" >"$BLKIO/blkio.throttle.read_bps_device"
echo "$majmin 40000000" >"$BLKIO/blkio.throttle.write_bps_device"
serve "" 127.0.0.1 "$MNT"
echo "$SERVE" >"$BLKIO/cgroup.procs"
run far-disk-bound "127.0.0.1:$PORT" "$MNT"
stop_serve
fi

# 2. The link: the server in a namespace behind a veth shaped like 1 GbE.
mkdir -p "$DIR"
if want link; then
ip netns add "$NS"
ip link add "$DEV_C" type veth peer name "$DEV_S" netns "$NS"
ip addr add "$ADDR_C/24" dev "$DEV_C" && ip link set "$DEV_C" up
ip -n "$NS" addr add "$ADDR_S/24" dev "$DEV_S" && ip -n "$NS" link set "$DEV_S" up && ip -n "$NS" link set lo up
rate=984390kbit # 1e9 x 1514/1538: tbf counts no preamble or gap (docs/reference/lab.md)
tc qdisc replace dev "$DEV_C" root tbf rate $rate burst 500000 latency 20ms
ip netns exec "$NS" tc qdisc replace dev "$DEV_S" root tbf rate $rate burst 500000 latency 20ms
serve "$NS" "$ADDR_S" "$DIR"
run far-link-bound "$ADDR_S:$PORT" "$DIR" --link 1gbe
stop_serve
ip link del "$DEV_C"; ip netns del "$NS"
fi

# 3. The server's CPU: its process held to 3% of one core (at 10%, sequential
# 1 MiB reads need less than the quota and the disk decides them).
if want cpu; then
mkdir -p "$CPU"
echo 100000 >"$CPU/cpu.cfs_period_us"
echo 3000 >"$CPU/cpu.cfs_quota_us"
serve "" 127.0.0.1 "$DIR"
echo "$SERVE" >"$CPU/cgroup.procs"
run far-cpu-bound "127.0.0.1:$PORT" "$DIR"
stop_serve
fi
