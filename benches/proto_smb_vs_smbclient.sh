#!/usr/bin/env bash
# headroom's SMB client vs Samba's smbclient against the same smbd, in a
# lab NAS namespace pair of its own (NAS in A, clients in B), interleaved
# (smbclient, headroom, smbclient, ...) ROUNDS times each; prints medians,
# spread, the ratio headroom/smbclient in MB/s, and CPU seconds per GB of
# both clients (user+sys of the whole process, all threads):
#   1M sequential read:  smbclient `get FILE /dev/null` vs headroom --rw read
#   1M sequential write: smbclient `put FILE` vs headroom --rw write
# Both speak SMB 3.0.2 unsigned (headroom does not sign; 3.1.1 would make
# smbclient sign). smbclient pipelines its get/put itself (libsmb's cli_pull/cli_push keep
# several 1 MiB-or-larger requests in flight, bounded by its credits); headroom
# runs at QD (default 8), the figure to compare at equal depth is printed
# with smbclient's observed request count in flight where it can be seen.
# headroom's CPU includes laying out its test file (SIZE written once per run),
# counted in its bytes; smbclient reads a file laid out beforehand.
#
# Usage: benches/proto_smb_vs_smbclient.sh [ROUNDS] [SECONDS] [RATE]
#   RATE: tbf rate on the veth (e.g. 1gbit); empty: unshaped (CPU-bound).
# Env: QD (8), SIZE_MB (512). Needs root, smbd, pdbedit, smbclient, jq.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
. benches/lib.sh
rounds=${1:-5}
secs=${2:-4}
rate=${3:-}
qd=${QD:-8}
size_mb=${SIZE_MB:-512}
[ "$(id -u)" = 0 ] || { echo "proto_smb_vs_smbclient: needs root (namespaces)" >&2; exit 1; }
for p in smbd pdbedit smbclient jq; do
  command -v $p >/dev/null || { echo "proto_smb_vs_smbclient: $p is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done

if [ -z "${HEADROOM_BIN:-}" ]; then cargo build --release -q --bin headroom; fi
hr=${HEADROOM_BIN:-${CARGO_TARGET_DIR:-target}/release/headroom}
tmp=$(mktemp -d /tmp/headroom-smb-bench-XXXXXX)
a="hrsmb$$a" b="hrsmb$$b" va="hs$$a" vb="hs$$b"
smbd_pid=""
cleanup() {
  [ -n "$smbd_pid" ] && kill -9 "$smbd_pid" 2>/dev/null || true
  for ns in $a $b; do
    for p in $(ip netns pids $ns 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del $ns 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add $a
ip netns add $b
ip link add $va netns $a type veth peer name $vb netns $b
ip -n $a addr add 198.18.251.1/24 dev $va
ip -n $b addr add 198.18.251.2/24 dev $vb
for x in "$a $va" "$b $vb"; do
  set -- $x
  ip -n $1 link set lo up
  ip -n $1 link set $2 up
  if [ -n "$rate" ]; then ip netns exec $1 tc qdisc replace dev $2 root tbf rate $rate burst 512k latency 20ms; fi
done

mkdir -p "$tmp"/{private,lock,state,cache,pid,ncalrpc,share}
cat >"$tmp/smb.conf" <<EOF
[global]
  server role = standalone server
  map to guest = Bad User
  passdb backend = tdbsam:$tmp/private/passdb.tdb
  private dir = $tmp/private
  lock directory = $tmp/lock
  state directory = $tmp/state
  cache directory = $tmp/cache
  pid directory = $tmp/pid
  ncalrpc dir = $tmp/ncalrpc
  log file = $tmp/log.smbd
  smb ports = 445
  interfaces = 198.18.251.1/32
  bind interfaces only = yes
  server min protocol = SMB2_10
  disable netbios = yes
  load printers = no
  rpc start on demand helpers = no
[bench]
  path = $tmp/share
  read only = no
  force user = root
EOF
printf 'benchpw\nbenchpw\n' | pdbedit -s "$tmp/smb.conf" -a -t -u root >/dev/null
ip netns exec $a smbd --foreground --no-process-group -s "$tmp/smb.conf" </dev/null >/dev/null 2>&1 &
smbd_pid=$!
disown "$smbd_pid"  # no "Killed" line from the shell at the end
for _ in $(seq 50); do ip netns exec $b bash -c 'exec 3<>/dev/tcp/198.18.251.1/445' 2>/dev/null && break; sleep 0.1; done

head -c ${size_mb}M /dev/urandom >"$tmp/share/peer.dat"
cp "$tmp/share/peer.dat" "$tmp/local.dat"
export HEADROOM_SMB_PASSWORD=benchpw
size=$((size_mb * 1048576))

# cpu_of CMD...: runs CMD in B; wall seconds and user+sys CPU seconds to $tmp/t.
cpu_of() {
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" ip netns exec $b "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  awk '{print $1, $2 + $3}' "$tmp/time" >"$tmp/t"
}

# peer DIR -> "MB/s cpu_s_per_GB"
peer() {
  local cmd
  if [ "$1" = read ]; then cmd="get peer.dat /dev/null"; else cmd="put $tmp/local.dat put.dat"; fi
  cpu_of smbclient //198.18.251.1/bench -U root%benchpw -m SMB3_02 --option='client signing=off' -c "$cmd"
  read -r wall cpu <"$tmp/t"
  awk -v s=$size -v w=$wall -v c=$cpu 'BEGIN { printf "%.1f %.2f\n", s / w / 1e6, c / (s / 1e9) }'
}

# ours DIR -> "MB/s cpu_s_per_GB"
ours() {
  cpu_of "$hr" disk smb://root@198.18.251.1/bench --rw "$1" --bs 1M --qd "$qd" --size ${size_mb}M \
    --time ${secs}s --ramp 1s --json --quiet
  read -r wall cpu <"$tmp/t"
  jq -r '.probes[0].summary.bytes_per_sec' "$tmp/out" |
    awk -v s=$size -v c=$cpu -v t=$((secs + 1)) '{ moved = s + $1 * t; printf "%.1f %.2f\n", $1 / 1e6, c / (moved / 1e9) }'
}

echo "proto_smb_vs_smbclient: ${rounds} rounds, ${size_mb} MiB, headroom QD$qd, link ${rate:-unshaped}"
printf "%-10s %12s %8s %12s %8s %7s %14s %14s\n" test smbclient spread headroom spread ratio "smbclient s/GB" "headroom s/GB"
for dir in read write; do
  : >"$tmp/p" ; : >"$tmp/h"
  for _ in $(seq "$rounds"); do
    peer $dir >>"$tmp/p"
    ours $dir >>"$tmp/h"
    rm -f "$tmp/share/put.dat"
  done
  pm=$(median_of "$tmp/p" 1); hm=$(median_of "$tmp/h" 1)
  pc=$(median_of "$tmp/p" 2); hc=$(median_of "$tmp/h" 2)
  printf "%-10s %12s %8s %12s %8s %7s %14s %14s\n" "1M $dir" "$pm MB/s" "$(spread_of "$tmp/p" 1)%" \
    "$hm MB/s" "$(spread_of "$tmp/h" 1)%" "$(ratio "$hm" "$pm")" "$pc" "$hc"
  bench_row_from "SMB (smbd${rate:+, $rate})" "1M $dir QD$qd" "MB/s" "smbclient" ">= 1.0" "$tmp/h" "$tmp/p" 1
  bench_row_from "SMB (smbd${rate:+, $rate})" "1M $dir QD$qd: CPU s per GB" "s/GB" "smbclient" "<= 1.0" "$tmp/h" "$tmp/p" 2
done
