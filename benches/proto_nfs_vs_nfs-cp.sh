#!/usr/bin/env bash
# headroom's NFS client vs libnfs's nfs-cp on the lab NAS (nfs-ganesha in a
# network namespace, headroom and nfs-cp in the client namespace), interleaved
# (nfs-cp, headroom, nfs-cp, headroom, ...) ROUNDS times each; prints medians,
# spread (max-min as % of the median), the ratio headroom/nfs-cp, and the CPU
# seconds per GB moved of both (user+sys of all threads):
#   read:  nfs-cp nfs://.../file /dev/shm/f vs  headroom --rw read  --bs 1M --qd 1
#   write: nfs-cp /dev/shm/file nfs://...   vs  headroom --rw write --bs 1M --qd 1
# nfs-cp copies with libnfs's synchronous nfs_pread/nfs_pwrite of 1 MiB, one at
# a time: queue depth 1 (one READ or WRITE RPC in flight with rsize/wsize of
# 1 MiB), so headroom runs at QD1 too. Neither commits during the copy
# (nfs-cp's close sends no COMMIT; headroom's write test flushes after the
# measured window). Debian's fio has no nfs engine, so fio is not compared.
#
# headroom's CPU figure includes laying out its own test file through NFS
# (SIZE of fresh random data) and the warm-up: its bytes moved count those too.
#
# Usage: sudo benches/proto_nfs_vs_nfs-cp.sh [ROUNDS] [SECONDS] [SIZE_MIB]
# Needs root (namespaces), ganesha.nfsd, rpcbind, nfs-cp and jq.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
. benches/lib.sh
rounds=${1:-5}
secs=${2:-3}
size_mib=${3:-512}
for p in ganesha.nfsd rpcbind nfs-cp jq; do
  command -v "$p" >/dev/null || { echo "proto_nfs_vs_nfs-cp: $p is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "proto_nfs_vs_nfs-cp: needs root (network namespaces)" >&2; exit 1; }

# HEADROOM_BIN and LAB_NAS name prebuilt binaries (headroom, and the lab NAS
# program of crates/lab).
hr=${HEADROOM_BIN:-}
lab_nas=${LAB_NAS:-}
if [ -z "$hr" ] || [ -z "$lab_nas" ]; then
  cargo build --release -q --bin headroom
  cargo build --release -q -p headroom-lab --bin lab-nas
  hr=${hr:-"${CARGO_TARGET_DIR:-$(pwd)/target}/release/headroom"}
  lab_nas=${lab_nas:-"${CARGO_TARGET_DIR:-$(pwd)/target}/release/lab-nas"}
fi

tmp=$(mktemp -d)
stop="$tmp/stop"
src="/dev/shm/headroom-nfs-bench-$$.dat"
# nfs-cp refuses /dev/null as its destination: reads land in tmpfs instead.
sink="/dev/shm/headroom-nfs-bench-$$.out"
nas_pid=""
cleanup() {
  touch "$stop"
  if [ -n "$nas_pid" ]; then wait "$nas_pid" 2>/dev/null || true; fi
  rm -f "$src" "$sink"
  rm -rf "$tmp"
}
trap cleanup EXIT

# The lab NAS (crates/lab/src/bin/lab-nas.rs); it removes everything when $stop appears.
"$lab_nas" --seconds 3600 --stop-file "$stop" </dev/null >"$tmp/nas" 2>&1 &
nas_pid=$!
for _ in $(seq 100); do grep -q READY=1 "$tmp/nas" && break; sleep 0.3; done
grep -q READY=1 "$tmp/nas" || { cat "$tmp/nas" >&2; exit 1; }
url=$(sed -n 's/^NFS_URL=//p' "$tmp/nas")
ns=$(sed -n 's/^CLIENT_NS=//p' "$tmp/nas")
dir=$(sed -n 's/^SHARE_DIR=//p' "$tmp/nas")
echo "proto_nfs_vs_nfs-cp: NAS at $url (client namespace $ns), $size_mib MiB, $rounds rounds"

head -c "${size_mib}M" /dev/urandom >"$src"
bytes=$((size_mib * 1048576))
# The file nfs-cp reads: written once through the server, kept for all rounds.
ip netns exec "$ns" nfs-cp "$src" "$url/nfscp-src.dat" >/dev/null

# timed CMD... -> "$tmp/wall $tmp/cpu": wall seconds, user+sys CPU seconds.
timed() {
  # A failure ends the whole bench (this runs in a subshell: kill the script).
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; kill $$; exit 1; }
  awk '{print $1, $2 + $3}' "$tmp/time"
}

# run_cp read|write -> "mbps cpu_s_per_gb"
run_cp() {
  local wall cpu
  if [ "$1" = read ]; then
    read -r wall cpu <<<"$(timed ip netns exec "$ns" nfs-cp "$url/nfscp-src.dat" "$sink")"
    rm -f "$sink"
  else
    read -r wall cpu <<<"$(timed ip netns exec "$ns" nfs-cp "$src" "$url/nfscp-dst.dat")"
    rm -f "$dir/nfscp-dst.dat"
  fi
  awk -v b="$bytes" -v w="$wall" -v c="$cpu" 'BEGIN { print b / w / 1e6, c / (b / 1e9) }'
}

# run_hr read|write -> "mbps cpu_s_per_gb"
run_hr() {
  local wall cpu
  read -r wall cpu <<<"$(timed ip netns exec "$ns" "$hr" disk "$url" --rw "$1" --bs 1M --qd 1 \
    --size "${size_mib}M" --time "${secs}s" --ramp 1s --json --quiet)"
  # Bytes moved: the layout, the warm-up (at the measured rate) and the measured window.
  jq -r --argjson cpu "$cpu" --argjson size "$bytes" --argjson secs "$secs" \
    '.probes[0].summary | (.bytes_per_sec * ($secs + 1) + $size) as $moved |
     "\(.bytes_per_sec / 1e6) \($cpu / ($moved / 1e9))"' "$tmp/out"
}

# Hold the lab's machine lock (crates/lab: hold_machine) while measuring.
exec 9>"${TMPDIR:-/tmp}/headroom-lab-machine.lock"
flock 9

for dirn in read write; do
  : >"$tmp/cp"; : >"$tmp/hr"
  for _ in $(seq "$rounds"); do
    run_cp "$dirn" >>"$tmp/cp"
    run_hr "$dirn" >>"$tmp/hr"
  done
  read -r cm cs <<<"$(stats "$tmp/cp" 1)"
  read -r hm hs <<<"$(stats "$tmp/hr" 1)"
  read -r cc _ <<<"$(stats "$tmp/cp" 2)"
  read -r hc _ <<<"$(stats "$tmp/hr" 2)"
  printf "1M %-5s QD1  nfs-cp %8.1f MB/s (spread %5.1f%%)  headroom %8.1f MB/s (spread %5.1f%%)  ratio %s  goal >= 1.0\n" \
    "$dirn" "$cm" "$cs" "$hm" "$hs" "$(ratio "$hm" "$cm")"
  printf "          CPU s/GB  nfs-cp %8.3f  headroom %8.3f  ratio %s\n" "$cc" "$hc" "$(ratio "$hc" "$cc")"
  bench_row_from "NFS (ganesha)" "1M $dirn QD1" "MB/s" "nfs-cp" ">= 1.0" "$tmp/hr" "$tmp/cp" 1
  bench_row_from "NFS (ganesha)" "1M $dirn QD1: CPU s per GB" "s/GB" "nfs-cp" "<= 1.0" "$tmp/hr" "$tmp/cp" 2
done
