#!/usr/bin/env bash
# headroom disk vs stock fio on the same file, interleaved (fio, headroom, fio,
# headroom, ...) ROUNDS times each; prints medians, spread (max-min as % of
# the median) and the ratio headroom/fio for:
#   4K randread QD32 O_DIRECT: IOPS (goal >= 1.0) and CPU seconds per I/O,
#     all threads of each process (goal <= 0.8)
#   4K randread QD1: mean latency (goal <= 1.02)
#   1M sequential read and write QD8: MB/s (goal 0.97-1.03)
# fio runs with the options headroom records as its fio equivalent (io_uring,
# registerfiles, force_async above 128 KiB, norandommap, same ramp and
# runtime). Registered buffers follow headroom's default, --fixedbufs auto
# (registered up to 128 KiB blocks): fio gets --fixedbufs=1 on the 4K rows,
# and the 4K rows add stock fio on ordinary buffers (its default) as a third
# series. FIXEDBUFS=1 runs both with registered buffers at every size,
# FIXEDBUFS=0 both on ordinary buffers.
# headroom's 1M buffers are on transparent huge pages, one segment each, so
# its 1M I/Os reach the device whole; fio's malloc'd buffers are ~250 separate
# pages each and split into two requests at virtio-blk's 254 segments as often
# as not. FIO_IOMEM=mmaphuge gives fio hugetlb buffers too (equal request
# sizes; reserve pages first: echo 8 >/proc/sys/vm/nr_hugepages as root).
# As root with perf, the 1M rows also give the share of each tool's bios the
# block layer split (block:block_split per block:block_bio_queue, counted
# per process), which the mean request size can hide.
#
# Usage: benches/disk_vs_fio.sh [DIR|ram] [ROUNDS] [SECONDS]   (DIR defaults to target/)
#   ram: a loop device over a 1 GiB file in /dev/shm (root), a device with
#        memory speed and no host cache in between, where the figures show the
#        tools rather than the disk's noise; the CPU is then the bottleneck.
# Needs fio and jq. The file (1 GiB of random data) and the loop device are
# removed at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/lib.sh
. benches/lib.sh
dir=${1:-target}
rounds=${2:-7}
secs=${3:-3}
ramp=1
fixedbufs=${FIXEDBUFS:-auto}
command -v fio >/dev/null || { echo "disk_vs_fio: fio is not installed (scripts/install-deps.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "disk_vs_fio: jq is not installed" >&2; exit 1; }

cargo build --release -q --bin headroom
hr=target/release/headroom
tmp=$(mktemp -d)
loopdev=""
if [ "$dir" = ram ]; then
  [ "$(id -u)" = 0 ] || { echo "disk_vs_fio: 'ram' needs root (losetup)" >&2; exit 1; }
  backing="/dev/shm/headroom-bench-$$.dat"
else
  backing="$dir/headroom-bench-$$.dat"
fi
trap 'if [ -n "$loopdev" ]; then losetup -d "$loopdev"; fi; rm -f "$backing"; rm -rf "$tmp"' EXIT
echo "disk_vs_fio: laying out 1 GiB of random data in $backing"
head -c 1G /dev/urandom >"$backing"
sync "$backing"
if [ "$dir" = ram ]; then
  loopdev=$(losetup -f --show "$backing")
  file=$loopdev
  echo "disk_vs_fio: testing $loopdev (loop device over tmpfs)"
else
  file=$backing
fi

# The block device under the file, for the request sizes it saw (diskstats);
# empty when it is not a plain block device (tmpfs, NFS, ...).
if [ -n "$loopdev" ]; then dev=$(basename "$loopdev"); else dev=$(basename "$(findmnt -no SOURCE -T "$dir" 2>/dev/null || true)"); fi
grep -qw "$dev" /proc/diskstats 2>/dev/null || dev=""
if [ "$dir" = ram ]; then where="RAM loop device"; else where="$dir${dev:+ on $dev}"; fi

# diskstat: "requests sectors" completed so far (reads and writes) on $dev.
diskstat() {
  if [ -n "$dev" ]; then awk -v d="$dev" '$3 == d { print $4 + $8, $6 + $10 }' /proc/diskstats; else echo "0 0"; fi
}

# Whether the bios a process queues and the block layer splits can be
# counted (perf's block tracepoints: root and perf). The mean request size
# alone can hide splits: a split bio's tail is often merged into the next
# sequential request, so split and whole I/Os give the same mean.
counts_splits=0
if [ "$(id -u)" = 0 ] && command -v perf >/dev/null && perf stat -e block:block_split true >/dev/null 2>&1; then
  counts_splits=1
fi

# cpu_of CMD...: runs CMD, stdout to $tmp/out, user+sys CPU seconds of all its threads to $tmp/cpu.
# Also writes the mean device request size in KiB to $tmp/req: how the block
# layer split the I/Os, which moves large-block figures on virtual disks; and
# with COUNT_SPLITS=1 (the 1M rows only: a tracepoint counted per 4K I/O
# would enter their CPU per I/O) the share of the process's bios split, in %,
# to $tmp/split ("nan" when not counted).
cpu_of() {
  local before after count=()
  [ "${COUNT_SPLITS:-0}" = 1 ] && [ "$counts_splits" = 1 ] &&
    count=(perf stat -x, -o "$tmp/perf" -e block:block_bio_queue,block:block_split --)
  : >"$tmp/perf"
  before=$(diskstat)
  /usr/bin/time -f "%U %S" -o "$tmp/time" "${count[@]}" "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  after=$(diskstat)
  awk '{print $1 + $2}' "$tmp/time" >"$tmp/cpu"
  echo "$before $after" | awk '{ r = $3 - $1; print (r > 0 ? ($4 - $2) / 2 / r : 0) }' >"$tmp/req"
  awk -F, '$3 == "block:block_bio_queue" { q = $1 } $3 == "block:block_split" { s = $1 }
    END { print (q > 0 ? 100 * s / q : "nan") }' "$tmp/perf" >"$tmp/split"
}

# run_fio RW BS QD -> "mbps iops lat_mean_ns cpu_per_io request_kib split_pct"
# FIO_DATA overrides --refill_buffers (fresh data per write, as headroom does).
run_fio() {
  local rw=$1 bs=$2 qd=$3 dirn=read async=()
  case $rw in *write) dirn=write ;; esac
  case $bs in 1M) async=(--force_async=1) ;; esac
  local fb=${FIO_FIXEDBUFS:-$fixedbufs}
  [ "$fb" = auto ] && case $bs in 1M) fb=0 ;; *) fb=1 ;; esac
  cpu_of fio --name=bench --filename="$file" --rw="$rw" --bs="$bs" --iodepth="$qd" --numjobs=1 \
    --ioengine=io_uring --fixedbufs="$fb" --registerfiles=1 "${async[@]}" --iomem="${FIO_IOMEM:-malloc}" --direct=1 --size=1g --norandommap \
    --randrepeat=0 "${FIO_DATA:---refill_buffers}" --time_based --runtime="$secs" --ramp_time="$ramp" --output-format=json
  jq -r --arg d "$dirn" --argjson cpu "$(cat "$tmp/cpu")" --argjson req "$(cat "$tmp/req")" --arg split "$(cat "$tmp/split")" \
    '.jobs[0][$d] | "\(.bw_bytes / 1e6) \(.iops) \(.lat_ns.mean) \($cpu / .total_ios) \($req) \($split)"' "$tmp/out"
}

# run_hr RW BS QD -> "mbps iops lat_mean_ns cpu_per_io request_kib split_pct"
run_hr() {
  local rw=$1 bs=$2 qd=$3 extra=()
  case $rw in *write) extra=(--destructive --force) ;; esac
  case $fixedbufs in 1) extra+=(--fixedbufs=on) ;; 0) extra+=(--fixedbufs=off) ;; esac
  cpu_of "$hr" disk "$file" --rw "$rw" --bs "$bs" --qd "$qd" --time "${secs}s" --ramp "${ramp}s" \
    --engine io_uring --direct on "${extra[@]}" --json
  jq -r --argjson cpu "$(cat "$tmp/cpu")" --argjson req "$(cat "$tmp/req")" --arg split "$(cat "$tmp/split")" \
    '.probes[0].summary | "\(.bytes_per_sec / 1e6) \(.iops) \(.latency_ns.mean) \($cpu / .ops) \($req) \($split)"' "$tmp/out"
}

report() { # NAME COLUMN UNIT GOAL [FIO_SERIES]
  local name=$1 col=$2 unit=$3 goal=$4 series=${5:-fio}
  read -r fm fs <<<"$(stats "$tmp/$series" "$col")"
  read -r hm hs <<<"$(stats "$tmp/hr" "$col")"
  printf "%-34s fio %12.6g %-6s (spread %5.1f%%)  headroom %12.6g (spread %5.1f%%)  ratio %s  goal %s\n" \
    "$name" "$fm" "$unit" "$fs" "$hm" "$hs" "$(ratio "$hm" "$fm")" "$goal"
  local peer=fio
  [ "$series" = fio_static ] && peer="fio, same buffers"
  [ "$series" = fio_stock ] && peer="fio, ordinary buffers"
  bench_row "disk ($where)" "$(echo "$name" | sed 's/^ *//')" "$unit" "$hm" "$hs" "$peer" "$fm" "$fs" "$goal"
}

# bench LABEL RW BS QD: fio and headroom interleaved. For writes a third
# series, fio writing the same buffers over and over (no --refill_buffers),
# shows what the device takes when no tool generates data: where fio's own
# data generation is the bottleneck (fast devices), headroom is compared to
# that too.
bench() {
  : >"$tmp/fio"; : >"$tmp/hr"; : >"$tmp/fio_static"; : >"$tmp/fio_stock"
  for _ in $(seq "$rounds"); do
    run_fio "$2" "$3" "$4" >>"$tmp/fio"
    run_hr "$2" "$3" "$4" >>"$tmp/hr"
    case $2 in *write) FIO_DATA=--refill_buffers=0 run_fio "$2" "$3" "$4" >>"$tmp/fio_static" ;; esac
    if [ "$fixedbufs" = auto ] && [ "$3" != 1M ]; then FIO_FIXEDBUFS=0 run_fio "$2" "$3" "$4" >>"$tmp/fio_stock"; fi
  done
}

echo "disk_vs_fio: $rounds rounds of ${secs}s (+${ramp}s ramp) each, interleaved fio/headroom"
bench "4K randread QD32" randread 4k 32
report "4K randread QD32 IOPS" 2 "IOPS" ">= 1.05"
report "4K randread QD32 CPU s per I/O" 4 "s" "<= 0.6"
if [ "$fixedbufs" = auto ]; then
  report "  IOPS vs stock fio" 2 "IOPS" "-" fio_stock
  report "  CPU s per I/O vs stock fio" 4 "s" "-" fio_stock
fi
bench "4K randread QD1" randread 4k 1
report "4K randread QD1 mean latency" 3 "ns" "<= 1.02"
[ "$fixedbufs" = auto ] && report "  mean latency vs stock fio" 3 "ns" "-" fio_stock
export COUNT_SPLITS=1
bench "1M read QD8" read 1M 8
report "1M seq read QD8" 1 "MB/s" "0.97-1.03"
[ -n "$dev" ] && report "  mean $dev request (1M read)" 5 "KiB" "-"
[ "$counts_splits" = 1 ] && report "  bios split (1M read)" 6 "%" "-"
bench "1M write QD8" write 1M 8
report "1M seq write QD8" 1 "MB/s" "0.97-1.03"
report "  vs fio without --refill_buffers" 1 "MB/s" "-" fio_static
[ -n "$dev" ] && report "  mean $dev request (1M write)" 5 "KiB" "-"
[ "$counts_splits" = 1 ] && report "  bios split (1M write)" 6 "%" "-"
exit 0
