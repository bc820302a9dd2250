#!/usr/bin/env bash
# A two-host network on one machine, by hand: namespaces A and B joined by a veth
# pair, addressed in 198.18.0.0/15 (RFC 2544, benchmarking only), shaped with tbf.
#
#   scripts/lab.sh up [RATE] [MTU]   create it (RATE like 1gbit, 2500mbit, 10gbit; default 1gbit)
#   scripts/lab.sh demo [RATE]       create, run headroom serve in A and headroom net + iperf3
#                                    from B, print the tbf ceiling, tear down
#   scripts/lab.sh down              remove everything this script created
#   scripts/lab.sh nas [RATE]        a lab NAS: NFS (nfs-ganesha), SMB (Samba), NBD (nbdkit) and
#                                    iSCSI (tgt) served from a namespace, headroom serve beside
#                                    them; prints the commands to try from the client namespace;
#                                    Ctrl-C (or Enter) removes it all. RATE shapes the link (tbf).
#
# tbf counts frames from the MAC header on, so TCP goodput through `tbf rate R`
# is R x (MTU-52)/(MTU+14): 956.4 Mb/s at 1gbit/MTU 1500 (docs/reference/lab.md). Needs root.
set -euo pipefail
NS_A=hrlab-a NS_B=hrlab-b DEV_A=hrlab0 DEV_B=hrlab1 ADDR_A=198.18.200.1 ADDR_B=198.18.200.2
HEADROOM=${HEADROOM:-$(dirname "$0")/../target/release/headroom}

down() {
  ip netns pids "$NS_A" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$NS_B" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
}

to_bits() { # 1gbit -> 1000000000
  local r=${1,,}
  case "$r" in
    *gbit) echo $(( ${r%gbit} * 1000000000 ));;
    *mbit) echo $(( ${r%mbit} * 1000000 ));;
    *kbit) echo $(( ${r%kbit} * 1000 ));;
    *) echo "$r";;
  esac
}

up() {
  local rate=${1:-1gbit} mtu=${2:-1500}
  [ "$(id -u)" -eq 0 ] || { echo "lab.sh: needs root (network namespaces)" >&2; exit 2; }
  down
  ip netns add "$NS_A"; ip netns add "$NS_B"
  ip link add "$DEV_A" netns "$NS_A" type veth peer name "$DEV_B" netns "$NS_B"
  ip -n "$NS_A" addr add "$ADDR_A/24" dev "$DEV_A"; ip -n "$NS_B" addr add "$ADDR_B/24" dev "$DEV_B"
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$DEV_A" mtu "$mtu" up; ip -n "$NS_B" link set "$DEV_B" mtu "$mtu" up
  local bits burst
  bits=$(to_bits "$rate"); burst=$(( bits / 8 / 250 )); [ "$burst" -ge 262144 ] || burst=262144
  ip netns exec "$NS_A" tc qdisc replace dev "$DEV_A" root tbf rate "$rate" burst "$burst" latency 20ms
  ip netns exec "$NS_B" tc qdisc replace dev "$DEV_B" root tbf rate "$rate" burst "$burst" latency 20ms
  echo "lab up: $NS_A ($ADDR_A) <-> $NS_B ($ADDR_B), tbf $rate, MTU $mtu"
  echo "TCP ceiling through tbf: $(awk -v b="$bits" -v m="$mtu" 'BEGIN{printf "%.1f Mb/s", b*(m-52)/(m+14)/1e6}')"
  echo "try: ip netns exec $NS_A $HEADROOM serve --bind $ADDR_A --no-auth --iperf3 &"
  echo "     ip netns exec $NS_B $HEADROOM net $ADDR_A --time 2s"
}

demo() {
  trap down EXIT
  up "${1:-1gbit}" "${2:-1500}"
  ip netns exec "$NS_A" "$HEADROOM" serve --bind "$ADDR_A" --no-auth --iperf3 >/dev/null 2>&1 &
  ip netns exec "$NS_A" iperf3 -s -B "$ADDR_A" -p 5202 >/dev/null 2>&1 &
  sleep 0.5
  ip netns exec "$NS_B" "$HEADROOM" net "$ADDR_A" --time 2s --tests rtt,up1,down1,up
  ip netns exec "$NS_B" iperf3 -c "$ADDR_A" -p 5202 -t 2 | tail -4
}

nas() {
  [ "$(id -u)" -eq 0 ] || { echo "lab.sh: needs root (network namespaces)" >&2; exit 2; }
  local rate=${1:-} facts
  local lab_nas=${LAB_NAS:-$(dirname "$0")/../target/release/lab-nas}
  [ -x "$lab_nas" ] || { echo "lab.sh: build it first: cargo build --release -p headroom-lab --bin lab-nas" >&2; exit 2; }
  facts=$(mktemp)
  # lab-nas runs until its stdin closes: this script's terminal, or the FIFO's writer below.
  coproc NAS { "$lab_nas" ${rate:+--rate "$(to_bits "$rate")"}; }
  while IFS= read -r line <&"${NAS[0]}"; do
    echo "$line" >>"$facts"
    [ "$line" = "READY=1" ] && break
  done
  # shellcheck disable=SC1090
  . "$facts"; rm -f "$facts"
  [ -n "${CLIENT_NS:-}" ] || { echo "lab.sh: the lab NAS did not start" >&2; exit 1; }
  ip netns exec "$NAS_NS" "$HEADROOM" serve --bind "$NAS_ADDR" --no-auth --allow-path "$SHARE_DIR" >/dev/null 2>&1 &
  # Globals, not locals: the EXIT trap runs after nas() has returned, with `set -u`.
  LAB_SERVE=$! LAB_NAS_PID=$NAS_PID LAB_NAS_IN=${NAS[1]}
  echo "lab NAS up at $NAS_ADDR${rate:+, shaped like a $rate Ethernet link}; run headroom as the client with:"
  echo "  ip netns exec $CLIENT_NS $HEADROOM disk $NFS_URL"
  echo "  HEADROOM_SMB_PASSWORD=$SMB_PASSWORD ip netns exec $CLIENT_NS $HEADROOM disk $SMB_URL"
  echo "  ip netns exec $CLIENT_NS $HEADROOM disk $NBD_URL --rw read"
  echo "  ip netns exec $CLIENT_NS $HEADROOM disk $ISCSI_URL --rw read"
  echo "  ip netns exec $CLIENT_NS $HEADROOM run --server $NAS_ADDR --remote-path $SHARE_DIR --share $NFS_URL${rate:+ --link $rate}"
  echo "press Enter or Ctrl-C to take it down"
  trap 'kill "$LAB_SERVE" 2>/dev/null; exec {LAB_NAS_IN}>&-; wait "$LAB_NAS_PID" 2>/dev/null || true' EXIT
  read -r _ || true
}

case "${1:-}" in
  up) shift; up "$@";;
  nas) shift; nas "$@";;
  down) down; echo "lab down";;
  demo) shift; demo "$@";;
  *) sed -n '2,16p' "$0"; exit 2;;
esac
