#!/usr/bin/env bash
# Every bench, one after the other, into one markdown table: the machine (CPU
# model, cores, memory, kernel), the versions of headroom and of each peer,
# then per compared figure headroom's median and spread, the peer's, the
# ratio headroom/peer and its goal (docs/performance.md). A bench whose
# spread exceeds 10% (headroom's or the peer's, on any row) runs once more and
# its second run is kept, marked "rerun"; still above 10%, the row says so.
# Rows in CPU seconds per GB also give the cores each tool needs to fill 10,
# 25 and 100 GbE (line rate in bytes x s/GB): the per-core arithmetic.
#
# The benches (each says in its own header what it compares and how):
#   net_vs_iperf.sh            TCP 1 and 4 streams, CPU per GB, RR latency vs iperf3, iperf2, sockperf
#   disk_vs_fio.sh target      the disk under target/, vs fio
#   disk_vs_fio.sh ram         a loop device in RAM, vs fio (root)
#   cpu_vs_peers.py            cpu kernels vs openssl speed and zstd -b
#   proto_iscsi_vs_iscsi-perf  iSCSI vs libiscsi's iscsi-perf (root)
#   proto_nbd_vs_fio           NBD vs fio's nbd engine (root)
#   proto_nfs_vs_nfs-cp        NFS vs libnfs's nfs-cp (root)
#   proto_smb_vs_smbclient     SMB vs smbclient (root)
# A bench that cannot run here (not root, a tool missing) is listed with the
# reason, never left out silently.
#
# Usage: benches/all.sh [ROUNDS=5] [SECONDS=3]
#   ONLY="net disk-ram"  runs only those (names: net disk disk-ram cpu iscsi nbd nfs smb)
#   OUT=FILE             where the table goes (default target/bench-all.md); it is printed too
# The machine should be otherwise idle; the whole set takes 25-45 minutes at
# 5 rounds of 3 s (44 on the 2-vCPU AMD EPYC VM in session 28, every bench
# rerun once for its spread).
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
secs=${2:-3}
out=${OUT:-target/bench-all.md}
only=${ONLY:-net disk disk-ram cpu iscsi nbd nfs smb}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

cargo build --release -q --bin headroom || { echo "all.sh: the release build failed" >&2; exit 1; }
hr="$PWD/target/release/headroom"
export HEADROOM="$hr" HEADROOM_BIN="$hr"

# bench NAME -> the command line of that bench
command_of() {
  case $1 in
    net) echo "bash benches/net_vs_iperf.sh $rounds $secs" ;;
    disk) echo "bash benches/disk_vs_fio.sh target $rounds $secs" ;;
    disk-ram) echo "bash benches/disk_vs_fio.sh ram $rounds $secs" ;;
    cpu) echo "python3 benches/cpu_vs_peers.py $rounds" ;;
    iscsi) echo "bash benches/proto_iscsi_vs_iscsi-perf.sh $rounds $secs" ;;
    nbd) echo "bash benches/proto_nbd_vs_fio.sh $rounds $secs" ;;
    nfs) echo "bash benches/proto_nfs_vs_nfs-cp.sh $rounds $secs" ;;
    smb) echo "bash benches/proto_smb_vs_smbclient.sh $rounds $secs" ;;
    *) return 1 ;;
  esac
}

# why_not NAME -> empty when the bench can run here, else the reason
why_not() {
  local tools=() root=0
  case $1 in
    net) tools=(iperf3 iperf sockperf python3 jq) ;;
    disk) tools=(fio jq) ;;
    disk-ram) tools=(fio jq losetup) root=1 ;;
    cpu) tools=(python3 openssl zstd) ;;
    iscsi) tools=(tgtd tgtadm iscsi-perf jq) root=1 ;;
    nbd) tools=(nbdkit fio jq) root=1 ;;
    nfs) tools=(ganesha.nfsd rpcbind nfs-cp jq) root=1 ;;
    smb) tools=(smbd pdbedit smbclient jq) root=1 ;;
  esac
  if [ "$root" = 1 ] && [ "$(id -u)" != 0 ]; then echo "needs root (namespaces, loop devices)"; return; fi
  for t in "${tools[@]}"; do
    command -v "$t" >/dev/null || { echo "\`$t\` is not installed (scripts/install-deps.sh)"; return; }
  done
}

# over_spread LOG -> true when any row's spread (headroom's or the peer's) exceeds 10%
over_spread() {
  grep '^BENCHROW|' "$1" | awk -F'|' '$6 > 10 || $9 > 10 { found = 1 } END { exit !found }'
}

# goal_met RATIO GOAL -> yes, no or - (">= X", "<= X", "A .. B", "A-B")
goal_met() {
  awk -v r="$1" -v g="$2" 'BEGIN {
    if (g ~ /^>= */) { sub(/^>= */, "", g); print (r >= g + 0 ? "yes" : "no"); exit }
    if (g ~ /^<= */) { sub(/^<= */, "", g); print (r <= g + 0 ? "yes" : "no"); exit }
    n = split(g, b, / *(\.\.|-) */)
    if (n == 2 && b[1] != "" && b[2] != "") { print (r >= b[1] + 0 && r <= b[2] + 0 ? "yes" : "no"); exit }
    print "-" }'
}

# cores UNIT MEDIAN -> for s/GB rows: cores to fill 10/25/100 GbE at their line rate in bytes
cores() {
  [ "$1" = s/GB ] || { echo "-"; return; }
  awk -v c="$2" 'BEGIN { printf "%.2f / %.2f / %.2f", 1.25 * c, 3.125 * c, 12.5 * c }'
}

rows_of() { # LOG NOTE -> markdown rows
  grep '^BENCHROW|' "$1" | while IFS='|' read -r _ bench metric unit hm hs peer pm ps ratio goal; do
    local flag="$2"
    if awk -v a="$hs" -v b="$ps" 'BEGIN { exit !(a > 10 || b > 10) }'; then flag="${flag:+$flag, }spread > 10%"; fi
    printf '| %s | %s | %s %s | %s%% | %s | %s %s | %s%% | %s | %s | %s | %s | %s |\n' \
      "$bench" "$metric" "$hm" "$unit" "$hs" "$peer" "$pm" "$unit" "$ps" "$ratio" "$goal" \
      "$(goal_met "$ratio" "$goal")" "$(cores "$unit" "$hm") vs $(cores "$unit" "$pm")" "${flag:--}"
  done
}

version_of() { # TOOL ARGS... -> its first version line, or "not installed"
  command -v "$1" >/dev/null || { echo "not installed"; return; }
  "$@" 2>&1 | grep -m1 -iE '[0-9]+\.[0-9]+' | cut -c1-80
}

table=$logs/rows.md
skipped=$logs/skipped
: >"$table"; : >"$skipped"
for name in $only; do
  cmd=$(command_of "$name") || { echo "all.sh: no bench named '$name' (net disk disk-ram cpu iscsi nbd nfs smb)" >&2; exit 2; }
  reason=$(why_not "$name")
  if [ -n "$reason" ]; then
    echo "all.sh: SKIPPED $name: $reason" >&2
    echo "- $name: skipped, $reason" >>"$skipped"
    continue
  fi
  echo "all.sh: $name: $cmd" >&2
  log=$logs/$name.log
  $cmd >"$log" 2>"$logs/$name.err"
  status=$?
  note=""
  if [ "$status" -eq 0 ] && over_spread "$log"; then
    echo "all.sh: $name: a spread above 10%, running it once more" >&2
    $cmd >"$log" 2>"$logs/$name.err"
    status=$?
    note="rerun"
  fi
  if [ "$status" -ne 0 ] || ! grep -q '^BENCHROW|' "$log"; then
    echo "all.sh: $name failed (exit $status):" >&2
    tail -5 "$logs/$name.err" >&2
    echo "- $name: failed (exit $status): $(tail -1 "$logs/$name.err")" >>"$skipped"
    continue
  fi
  grep -v '^BENCHROW|' "$log" >&2
  rows_of "$log" "$note" >>"$table"
done

mkdir -p "$(dirname "$out")"
{
  echo "# headroom benches, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)"
  echo "- headroom: $("$hr" --version 2>&1 | head -1)"
  echo "- peers: iperf3 $(version_of iperf3 --version); iperf2 $(version_of iperf -v); sockperf $(version_of sockperf --version);"
  echo "  fio $(version_of fio --version); openssl $(version_of openssl version); zstd $(version_of zstd --version);"
  echo "  iscsi-perf (libiscsi-bin $(dpkg-query -W -f '${Version}' libiscsi-bin 2>/dev/null || echo '?')); nfs-cp (libnfs-utils $(dpkg-query -W -f '${Version}' libnfs-utils 2>/dev/null || echo '?')); smbclient $(version_of smbclient --version); nbdkit $(version_of nbdkit --version)"
  echo "- $rounds interleaved rounds of ${secs} s per figure (cpu: $rounds rounds); medians; spread = (max - min) / median"
  echo
  echo "| bench | figure | headroom | spread | peer | peer's | spread | ratio | goal | met | cores for 10/25/100 GbE, headroom vs peer | note |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  cat "$table"
  if [ -s "$skipped" ]; then
    echo
    echo "Not in the table:"
    cat "$skipped"
  fi
} >"$out"
cat "$out"
echo "all.sh: the table is in $out" >&2
