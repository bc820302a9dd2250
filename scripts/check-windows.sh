#!/usr/bin/env bash
# Builds headroom.exe (scripts/build-windows.sh) and runs it under wine on
# this Linux machine: --version, link, cpu (every kernel checked for a
# correct answer, then timed briefly), sys, compare and report --html over
# stored documents (link, compare and report must print what the Linux
# binary prints), disk on directories of the prefix's C: drive, then net and ping from headroom.exe to the Linux binary's
# `serve` on 127.0.0.1, and the other way: the Linux binary's net, ping and
# disk --remote against headroom.exe's `serve`; `serve --token-file` and
# `--credentials` refusing a file others may read and taking a private one; headroom.exe's soak (its disk
# on C:, net and the server's disk) and fleet against Linux `serve`s on
# 127.0.0.1, disk on a raw volume (\\.\D: over a loop device, as root),
# 127.0.0.1, the soak's database reported on both platforms; headroom.exe's iSCSI client
# against tgtd and its SMB client against smbd, both on 127.0.0.1 (as root). Each check prints PASS or FAIL and its finding; the
# script exits 1 if any failed, 2 if the build or its tools are missing.
# Wine proves the code paths, not Windows' speed (docs/platform.md, "Windows").
#   bash scripts/check-windows.sh
#   bash scripts/check-windows.sh soak fleet   only the checks named (all by default)
#   HEADROOM_LINUX_BIN=PATH bash scripts/check-windows.sh   the Linux binary it is compared with and talks to
#   CARGO_TARGET_DIR_WINDOWS=DIR   where the checked exe is built (default target/windows-check)
# The wine prefix lives under target/ (WINEPREFIX_HEADROOM to move it) and is
# kept between runs; it is made again when the ProcessPrng shim changes.
# Needs scripts/install-windows-deps.sh (as root), jq, sqlite3, and the Linux binary
# (CI builds it first with scripts/build-static.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
only=("$@")

wine=/usr/lib/wine/wine64
wineserver=/usr/lib/wine/wineserver
for tool in "$wine" "$wineserver" x86_64-w64-mingw32-gcc; do
  command -v "$tool" >/dev/null || { echo "check-windows: $tool is missing; run scripts/install-windows-deps.sh as root" >&2; exit 2; }
done
for tool in jq sqlite3; do
  command -v "$tool" >/dev/null || { echo "check-windows: $tool is missing; run scripts/install-deps.sh as root" >&2; exit 2; }
done
linux="${HEADROOM_LINUX_BIN:-$(bash scripts/build-static.sh --print-path)}"
[ -x "$linux" ] || { echo "check-windows: the Linux binary $linux is missing; run scripts/build-static.sh (or set HEADROOM_LINUX_BIN)" >&2; exit 2; }
# Absolute: the checks run in a directory of their own.
linux="$(realpath "$linux")"

# The checks prove code paths, not speed: the exe they run is built at
# opt-level 1 with 256 codegen units in a directory of its own (cold on this
# 2-core machine: 6 min against 15 min for the release build, measured under
# load), not the release build scripts/build-windows.sh makes by default.
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}"
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-256}"
export CARGO_TARGET_DIR_WINDOWS="${CARGO_TARGET_DIR_WINDOWS:-target/windows-check}"
start=$SECONDS
exe="$(bash scripts/build-windows.sh | tail -1)"
case "$exe" in /*) ;; *) exe="$root/$exe" ;; esac
echo "check-windows: built $exe in $((SECONDS - start)) s"

# A prefix of our own: wine never touches the user's ~/.wine. Rust's std
# imports ProcessPrng from bcryptprimitives.dll, which wine 8 lacks; the shim
# (scripts/windows/bcryptprimitives.c) goes into the prefix's system32.
prefix_start=$SECONDS
export WINEPREFIX
WINEPREFIX="$(realpath -m "${WINEPREFIX_HEADROOM:-target/wine-prefix}")"
export WINEDEBUG=-all
# No Mono or Gecko: wineboot would offer to download them.
export WINEDLLOVERRIDES="mscoree,mshtml="
shim_id="$(sha256sum scripts/windows/bcryptprimitives.c | cut -c1-16)"
if [ "$(cat "$WINEPREFIX/.headroom-shim" 2>/dev/null)" != "$shim_id" ]; then
  rm -rf "$WINEPREFIX"
  mkdir -p "$WINEPREFIX"
  "$wine" wineboot -i >/dev/null 2>&1
  "$wineserver" -w
  x86_64-w64-mingw32-gcc -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    scripts/windows/bcryptprimitives.c -ladvapi32
  echo "$shim_id" >"$WINEPREFIX/.headroom-shim"
  echo "check-windows: made the wine prefix $WINEPREFIX in $((SECONDS - prefix_start)) s"
fi

work="$(mktemp -d /tmp/headroom-windows.XXXXXX)"
# The prefix's wineserver is ours: stop it with the checks.
trap '"$wineserver" -k 2>/dev/null || true; rm -rf "$work"' EXIT
fixtures="$root/crates/analysis/tests/fixtures"
cp "$fixtures/compare-before.json" "$fixtures/compare-after.json" "$work/"
cd "$work"

win() { "$wine" "$exe" "$@"; }

# until_listening LOG [TRIES]: waits, 0.2 s a try (100 tries unless told),
# until the `serve` writing LOG says it listens; fails if it never does.
until_listening() {
  for _ in $(seq "${2:-100}"); do
    grep -q "listening on" "$1" && return 0
    sleep 0.2
  done
  return 1
}
failed=()
checks_start=$SECONDS
# check NAME FUNCTION: runs FUNCTION with its output in NAME.log; PASS with
# its last line (the finding), or FAIL with all of it.
check() {
  local name="$1" t0=$SECONDS
  shift
  [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $name "* ]] || return 0
  # Run as a job, not as an `if` condition: there bash would ignore set -e
  # inside the function and only its last command would count.
  "$@" >"$work/$name.log" 2>&1 &
  if wait $!; then
    echo "check-windows: PASS $name ($((SECONDS - t0)) s): $(tail -1 "$work/$name.log")"
  else
    echo "check-windows: FAIL $name ($((SECONDS - t0)) s):"
    sed 's/^/    /' "$work/$name.log"
    failed+=("$name")
  fi
}

version() {
  local want got
  want="$("$linux" --version)"
  got="$(win --version | tr -d '\r')"
  [ "$got" = "$want" ] || { echo "headroom.exe says '$got', the Linux binary '$want'"; return 1; }
  echo "$got"
}

# Pure arithmetic: both platforms must print the same figures.
link() {
  win --json link 10gbe --mtu 9000 >link-win.json
  "$linux" --json link 10gbe --mtu 9000 >link-linux.json
  diff <(jq -S 'del(.started_at, .host)' link-win.json) <(jq -S 'del(.started_at, .host)' link-linux.json)
  echo "10gbe at MTU 9000: TCP goodput $(jq -r '.ceilings.tcp.goodput_bits_per_sec' link-win.json) b/s, the document identical to Linux's"
}

cpu() {
  # cpu exits 2 when a kernel gives a wrong answer; every kernel is checked before it is timed.
  win --json cpu --time 20ms --threads 1 >cpu.json
  jq -e '(.probes | length) >= 20 and all(.probes[]; .summary.bytes_per_sec > 0)' cpu.json >/dev/null
  echo "$(jq '[.probes[].spec.kernel] | unique | length' cpu.json) kernels verified and timed"
}

# disk_links SYS_JSON (issue 31, called by `sys`): no disk may carry a PCIe
# link or a bus ceiling under wine, which has no PCI device with a link
# (wine 8 registers no disk interface, and its CM_Get_Parent finds no
# parent): one there would be made up. Shows only that `sys` still runs and
# records the link as absent; the walk needs a real Windows.
disk_links() {
  jq -e 'all(.block_devices[]; .pci_link == null and .ceiling_bytes_per_sec == null and .bus == null)' "$1" >/dev/null ||
    { echo "a disk link under wine, which has no PCI devices: $(jq -c '[.block_devices[] | {name, transport, pci_link, bus, ceiling_bytes_per_sec}]' "$1")"; return 1; }
  echo "no disk link recorded (wine has no PCI devices)"
}

# Windows' view of this machine, through wine, against Linux's: the same
# CPUs, memory (wine counts whole pages) and adapters with their MTUs.
sys() {
  win --json sys >sys.json
  "$linux" --json sys >sys-linux.json
  jq -e --slurpfile l sys-linux.json '.cpu.logical_cpus == $l[0].cpu.logical_cpus and
         (.memory_bytes - $l[0].memory_bytes | fabs) < $l[0].memory_bytes / 100 and
         any(.nics[]; .kind == "loopback" and (.addresses | index("127.0.0.1/8")))' sys.json >/dev/null
  diff <(jq -r '.nics[] | "\(.name) MTU \(.mtu)"' sys.json | sort) <(jq -r '.nics[] | "\(.name) MTU \(.mtu)"' sys-linux.json | sort)
  # Volumes: the prefix's C: drive (wine says NTFS) with the device behind it.
  jq -e 'any(.filesystems[]; .mountpoint == "C:\\" and .fstype != "" and .device != "")' sys.json >/dev/null ||
    { echo "no C:\ volume: $(jq -c '.filesystems' sys.json)"; return 1; }
  # Wine answers the storage queries for its drives (a SCSI disk of the host's size).
  jq -e 'any(.block_devices[]; (.name | startswith("PhysicalDrive")) and .size_bytes > 0 and .transport != null)' sys.json >/dev/null ||
    { echo "no physical drive: $(jq -c '.block_devices' sys.json)"; return 1; }
  links="$(disk_links sys.json)" || { echo "$links"; return 1; }
  echo "$(jq -r '.cpu.logical_cpus' sys.json) CPUs ($(jq -r '.cpu.model' sys.json)), $(jq -r '.memory_bytes / 1073741824 | . * 100 | round / 100' sys.json) GiB, adapters $(jq -r '[.nics[] | "\(.name) (\(.kind), MTU \(.mtu))"] | join(", ")' sys.json), $(jq -r '.os // "no OS name"' sys.json) $(jq -r '.kernel // ""' sys.json): as Linux sees it; volumes $(jq -r '[.filesystems[] | "\(.mountpoint) \(.fstype) \(.device)"] | join(", ")' sys.json); disks $(jq -r '[.block_devices[] | "\(.name) \(.transport) \(.size_bytes / 1e9 | round) GB"] | join(", ")' sys.json); $links"
}

# Presenters read documents only: both platforms must print the same bytes.
compare() {
  win compare compare-before.json compare-after.json >compare-win.txt
  "$linux" compare compare-before.json compare-after.json >compare-linux.txt
  diff compare-win.txt compare-linux.txt
  echo "$(head -1 compare-win.txt), the table identical to Linux's"
}

report() {
  win report compare-before.json compare-after.json --html report-win.html >report.txt
  "$linux" report compare-before.json compare-after.json --html report-linux.html >/dev/null
  cmp report-win.html report-linux.html
  echo "$(tail -1 report.txt), identical to Linux's"
}

# disk on local paths of the prefix's C: drive: a test file created with
# CREATE_NEW, laid out, tested unbuffered (the quick preset with the iocp
# engine; one test with psync) and removed. A drive-letter path, one with
# spaces and a \\?\ one; a run stopped by Ctrl-C; then a path that does
# not exist (exit 2, one line).
# Wine maps unbuffered I/O to ordinary Linux I/O: the figures are not Windows'.
disk_run() {
  local name="$1" dir="$2" host="$3"
  shift 3
  rm -rf "$host"
  mkdir -p "$host"
  win --json disk "$dir" --time 1s --ramp 0s --quiet "$@" >"$name.json"
  [ -z "$(ls -A "$host")" ] || { echo "$dir: left behind: $(ls "$host")"; return 1; }
  jq -e '(.probes | length) > 0 and all(.probes[]; .summary.bytes_per_sec > 0 and .summary.ops > 0)' "$name.json" >/dev/null ||
    { echo "$dir: no figures"; jq -c '.probes[] | [.id, .summary.bytes_per_sec]' "$name.json"; return 1; }
}

# refused NAME PATH WORDS [WORDS...]: `disk PATH` (a write test) exits 2 with
# one line holding every WORDS.
refused() {
  local name="$1" path="$2" rc=0 words
  shift 2
  win disk "$path" --rw write --size 16M --time 1s --ramp 0s --quiet >"disk-$name.out" 2>"disk-$name.err" || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <"disk-$name.err")" -eq 1 ] ||
    { echo "$path: exit $rc, not 2 in one line:"; cat "disk-$name.err"; return 1; }
  for words in "$@"; do
    grep -qF -- "$words" "disk-$name.err" || { echo "$path: the line does not say '$words':"; cat "disk-$name.err"; return 1; }
  done
}

disk() {
  local c="$WINEPREFIX/drive_c"
  disk_run disk-quick 'C:\headroom-check\disk' "$c/headroom-check/disk" --preset quick --size 64M
  jq -e 'all(.probes[]; .spec.engine == "iocp" and .spec.direct == true and .spec.direct_flag == "file_flag_no_buffering"
         and (.spec.fio_equivalent | contains("--ioengine=windowsaio")))' disk-quick.json >/dev/null ||
    { echo "quick: not iocp, FILE_FLAG_NO_BUFFERING and windowsaio throughout"; jq -c '.probes[].spec | [.engine, .direct, .direct_flag, .fio_equivalent]' disk-quick.json; return 1; }
  # The CPU over each test, from the per-processor and process times
  # (NtQuerySystemInformation, GetProcessTimes): every core, this process busy.
  jq -e --argjson n "$(nproc)" 'all(.probes[]; .details.cpu_load_local as $l | $l.cores == $n
         and ($l.per_core | length) == $n and all($l.per_core[]; .busy_percent >= 0 and .busy_percent <= 100)
         and $l.process_percent > 0)' disk-quick.json >/dev/null ||
    { echo "quick: no CPU load of $(nproc) cores and this process"; jq -c '.probes[].details.cpu_load_local' disk-quick.json; return 1; }
  # The table names the flag the file was opened with.
  win disk 'C:\headroom-check\disk' --rw read --size 16M --time 1s --ramp 0s --quiet >disk-table.txt
  head -1 disk-table.txt | tr -d '\r' | grep -q ', iocp, FILE_FLAG_NO_BUFFERING)$' || { echo "table heading: $(head -1 disk-table.txt)"; return 1; }
  [ -z "$(ls -A "$c/headroom-check/disk")" ] || { echo "table run: left behind: $(ls "$c/headroom-check/disk")"; return 1; }
  disk_run disk-space 'C:\headroom check\with space' "$c/headroom check/with space" --rw randwrite --size 16M --engine psync
  jq -e 'all(.probes[]; .spec.engine == "psync")' disk-space.json >/dev/null || { echo "psync not recorded"; return 1; }
  disk_run disk-long '\\?\C:\headroom-check\long' "$c/headroom-check/long" --rw randread --size 16M --qd 4 --jobs 2
  # Two jobs: each engine opens its own file object for its own port.
  jq -e 'all(.probes[]; .spec.engine == "iocp" and .spec.jobs == 2)' disk-long.json >/dev/null
  # Ctrl-C (SIGINT, which wine delivers as the console's Ctrl-C event) once
  # the test file exists: exit 130, the file removed.
  local cc="$c/headroom-check/ctrl-c" pid rc=0
  rm -rf "$cc"
  mkdir -p "$cc"
  # A background job of a script starts with SIGINT ignored: restore it.
  env --default-signal=INT "$wine" "$exe" disk 'C:\headroom-check\ctrl-c' --rw randread --time 30s --ramp 0s \
    --size 16M --quiet >disk-cc.out 2>disk-cc.err &
  pid=$!
  for _ in $(seq 100); do
    [ -n "$(ls -A "$cc")" ] && break
    sleep 0.1
  done
  [ -n "$(ls -A "$cc")" ] || { echo "Ctrl-C: no test file appeared in 10 s"; kill "$pid"; return 1; }
  sleep 1
  kill -INT "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || { echo "Ctrl-C: exit $rc, not 130"; cat disk-cc.err; return 1; }
  [ -z "$(ls -A "$cc")" ] || { echo "Ctrl-C: left behind: $(ls "$cc")"; return 1; }
  rc=0
  win disk 'C:\headroom-check\missing' --preset quick >disk-bad.out 2>disk-bad.err || rc=$?
  [ "$rc" -eq 2 ] || { echo "a missing path: exit $rc, not 2"; cat disk-bad.err; return 1; }
  [ "$(wc -l <disk-bad.err)" -eq 1 ] || { echo "a missing path: not one line:"; cat disk-bad.err; return 1; }
  grep -q "does not exist" disk-bad.err
  # A share that cannot be reached: one line naming the share, exit 2,
  # before any test file could be made.
  refused unc '\\headroom-no-such-server\bench\dir' "cannot be reached" '\\headroom-no-such-server\bench'
  # A write to a raw drive or volume without --destructive: refused before it is opened.
  local raw
  for raw in '\\.\PhysicalDrive0' '\\.\C:' '\\?\C:'; do
    refused raw "$raw" "and the tests write, which destroys its contents" "--destructive"
  done
  echo "iocp quick on C:\\headroom-check\\disk: $(jq -r '[.probes[] | "\(.id) \(.summary.bytes_per_sec / 1e6 | round) MB/s"] | join(", ")' disk-quick.json); CPU load of $(nproc) cores read ($(jq -r '.probes[0].details.cpu_load_local.process_percent | round' disk-quick.json)% of a core for headroom.exe in the first test); psync randwrite with spaces, iocp randread Q4T2 on \\\\?\\: done, no test file left, also on Ctrl-C (exit 130); missing path, unreachable UNC share: exit 2, one line each; writes to \\\\.\\PhysicalDrive0, \\\\.\\C: and \\\\?\\C: without --destructive: the same"
}

# Raw drives and volumes (issue 31): the prefix's dosdevices map `d::` (the
# device behind D:) to a loop device over a 32 MiB file in /dev/shm (no `d:`
# directory). \\.\D: is read unbuffered as a block device; wine answers
# none of Windows' size queries for it (IOCTL_DISK_GET_LENGTH_INFO,
# IOCTL_DISK_GET_DRIVE_GEOMETRY_EX, FILE_END), so the read takes --size.
# A write, even with --destructive --force, is refused in one line: wine's
# GetVolumeInformationW names NTFS for every drive, this zeroed one too,
# and headroom never writes over a filesystem. The zero rule a drive's write
# would meet runs on an existing file instead: a zeroed one is written with
# --destructive, then refused without --force.
raw_dev() {
  local dd="$WINEPREFIX/dosdevices" rc=0 zeros="$WINEPREFIX/drive_c/headroom-check/raw/zeros.img"
  [ ! -e "$dd/d::" ] && [ ! -e "$dd/d:" ] || { echo "the prefix already has a D: drive"; return 1; }
  # Global: the EXIT trap runs after the function's locals are gone.
  raw_img="$(mktemp /dev/shm/headroom-raw.XXXXXX)"
  truncate -s 32M "$raw_img"
  raw_loop="$(losetup --find --show "$raw_img")"
  trap 'losetup -d "$raw_loop" 2>/dev/null; rm -f "$raw_img" "$WINEPREFIX/dosdevices/d::"' EXIT
  ln -s "$raw_loop" "$dd/d::"
  win disk '\\.\D:' --rw read --bs 64k --size 16M --time 1s --ramp 0s --quiet >raw-read.txt
  head -1 raw-read.txt | tr -d '\r' | grep -qF '(block device, 16.00 MiB tested, iocp, FILE_FLAG_NO_BUFFERING)' ||
    { echo "read heading: $(head -1 raw-read.txt)"; cat raw-read.txt; return 1; }
  win disk '\\.\D:' --rw write --size 16M --time 1s --ramp 0s --quiet --destructive --force >raw-w.out 2>raw-w.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <raw-w.err)" -eq 1 ] && grep -q "filesystem (GetVolumeInformationW)" raw-w.err ||
    { echo "a write to \\\\.\\D:: exit $rc, not 2 in one line naming its filesystem:"; cat raw-w.err; return 1; }
  cmp -s -n 32M "$raw_loop" /dev/zero || { echo "the loop device is no longer all zeros"; return 1; }
  rm -rf "$(dirname "$zeros")"
  mkdir -p "$(dirname "$zeros")"
  truncate -s 16M "$zeros"
  win --json disk 'C:\headroom-check\raw\zeros.img' --rw write --bs 64k --time 1s --ramp 0s --quiet --destructive >raw-zeros.json
  jq -e '(.probes | length) == 1 and .probes[0].summary.ops > 0' raw-zeros.json >/dev/null ||
    { echo "no write figures on the zeroed file"; jq -c '.probes[] | [.spec.rw, .summary.ops]' raw-zeros.json; return 1; }
  ! cmp -s -n 16M "$zeros" /dev/zero || { echo "the write left the file all zeros"; return 1; }
  rc=0
  win disk 'C:\headroom-check\raw\zeros.img' --rw write --time 1s --ramp 0s --quiet --destructive >raw-data.out 2>raw-data.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <raw-data.err)" -eq 1 ] && grep -q -- "--force" raw-data.err ||
    { echo "a write over data: exit $rc, not 2 in one line naming --force:"; cat raw-data.err; return 1; }
  rm -rf "$(dirname "$zeros")"
  echo "\\\\.\\D: -> $raw_loop read unbuffered as a block device ($(awk 'NR == 3 {print $4}' raw-read.txt) MB/s); a write with --destructive --force refused: $(tr -d '\r' <raw-w.err); a zeroed existing file written with --destructive ($(jq -r '.probes[0].summary.bytes_per_sec / 1e6 | round' raw-zeros.json) MB/s), then: $(tr -d '\r' <raw-data.err)"
}

# The far end is the Linux binary on loopback: Winsock under wine speaks to it
# through the host's sockets, as a Windows desktop speaks to a Linux NAS.
net() {
  local port token=check-windows-$$
  port=$((20000 + RANDOM % 20000))
  HEADROOM_TOKEN=$token "$linux" serve --bind 127.0.0.1 --port "$port" >serve.log 2>&1 &
  serve_pid=$!
  # This check runs in its own process: a failure below ends it, and the server with it.
  trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
  until_listening serve.log 50 || true
  # Winsock's FIXMEs on: wine names an ioctl it does not implement.
  HEADROOM_TOKEN=$token WINEDEBUG=fixme+winsock win --json net "127.0.0.1:$port" --protocol headroom --time 1s \
    --tests rtt,up1,down1 >net.json 2>net.err
  HEADROOM_TOKEN=$token win --json ping "127.0.0.1:$port" --count 5 --interval 20ms >ping-tcp.json
  HEADROOM_TOKEN=$token win --json ping 127.0.0.1 --port "$port" --count 5 --interval 20ms >ping-udp.json
  kill "$serve_pid"
  wait "$serve_pid" 2>/dev/null || true
  jq -e '(.probes | length) == 3 and all(.probes[]; .spec.protocol == "headroom")
         and all(.probes[] | select(.id != "rr-idle"); .summary.bytes_per_sec > 0)' net.json >/dev/null
  # Where headroom.exe sends (up) it asks WSAIoctl(SIO_TCP_INFO). Wine 8 does
  # not implement it (WSAEOPNOTSUPP; its FIXME names the code): the TCP state
  # is then absent, never zeros. A wine that answers must give a smoothed RTT.
  # Where Linux sends (down), Linux's TCP_INFO is recorded.
  local sio="no SIO_TCP_INFO asked"
  if grep -q "unimplemented ioctl _WSAIORW(IOC_VENDOR, 39)" net.err; then
    sio="SIO_TCP_INFO asked, wine: unimplemented, tcp_info absent"
    jq -e '.probes[] | select(.id == "tcp-up-1") | .details.tcp_info == null' net.json >/dev/null
  else
    jq -e '.probes[] | select(.id == "tcp-up-1") | .details.tcp_info.srtt_us > 0' net.json >/dev/null ||
      { echo "$sio by headroom.exe, or no TCP state from it"; return 1; }
    sio="SIO_TCP_INFO srtt $(jq -r '.probes[] | select(.id == "tcp-up-1") | .details.tcp_info.srtt_us' net.json) us"
  fi
  jq -e '.probes[] | select(.id == "tcp-down-1") | .details.tcp_info.srtt_us > 0' net.json >/dev/null
  grep -q "test=tcp .*status=ok" serve.log
  grep -q "test=tcp_reverse .*status=ok" serve.log
  jq -e '.probes[0].summary.latency_ns.p50 > 0' ping-tcp.json ping-udp.json >/dev/null
  echo "headroom.exe net -> Linux serve on 127.0.0.1:$port: $(jq -r '.probes[] | "\(.id) \(if .summary.bytes_per_sec > 0 then "\(.summary.bytes_per_sec * 8 / 1e9 | . * 100 | round / 100) Gb/s" else "\(.summary.latency_ns.p50 / 1000 | round) us p50" end)"' net.json | paste -sd ' ' -); ping TCP $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' ping-tcp.json) us, UDP echo $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' ping-udp.json) us p50; $sio"
}

# Issue 31, the source of a connection and of a UDP answer: headroom.exe's
# ping (TCP) --interface lo to a Linux serve, the adapter's index set with
# IP_UNICAST_IF in network byte order (seen with strace when it is there: wine
# passes it to Linux's IP_UNICAST_IF); a name no adapter has: one line, exit 2.
# Then headroom.exe's serve on 0.0.0.0 answers the Linux ping's UDP echo to
# 127.0.0.2: WSARecvMsg's IP_PKTINFO names 127.0.0.2 (strace), but wine 8
# drops WSASendMsg's control data, so under wine the answer leaves from
# 127.0.0.1 and the client's connected socket drops it (a real Windows needed).
source_of() {
  local port far token=check-windows-source-$$ rc=0 trace=() pktinfo="no strace: IP_PKTINFO not looked at"
  export HEADROOM_TOKEN=$token
  port=$(start_linux_serve source-serve.log)
  far=$port
  trap 'kill "$(cat source-serve.log.pid)" 2>/dev/null || true' EXIT
  command -v strace >/dev/null && trace=(strace -f -qq --seccomp-bpf -e trace=setsockopt,recvmsg -o source.strace)
  "${trace[@]}" "$wine" "$exe" --json ping "127.0.0.1:$port" --count 2 --interval 20ms --interface lo >source-ping.json
  jq -e '.probes[0].summary.latency_ns.p50 > 0 and .probes[0].spec.source == "via lo"' source-ping.json >/dev/null ||
    { echo "ping --interface lo: $(jq -c '.probes[0] | [.spec, .summary.latency_ns]' source-ping.json)"; return 1; }
  if [ ${#trace[@]} -gt 0 ]; then
    grep -q "IP_UNICAST_IF, \[$(( $(cat /sys/class/net/lo/ifindex) << 24 ))\]" source.strace ||
      { echo "no IP_UNICAST_IF with lo's index in network byte order:"; grep UNICAST source.strace; return 1; }
  fi
  win ping "127.0.0.1:$port" --count 1 --interface headroom-no-such-nic >source-bad.out 2>source-bad.err || rc=$?
  kill "$(cat source-serve.log.pid)"
  [ "$rc" -eq 2 ] && [ "$(wc -l <source-bad.err)" -eq 1 ] && grep -q "no such interface" source-bad.err ||
    { echo "an unknown interface: exit $rc, not 2 in one line:"; cat source-bad.err; return 1; }
  if [ ${#trace[@]} -gt 0 ]; then
    port=$((20000 + RANDOM % 20000))
    env --default-signal=INT "${trace[@]}" "$wine" "$exe" serve --bind 0.0.0.0 --port "$port" >source-win.log 2>source-win.err &
    serve_pid=$!
    trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
    until_listening source-win.err || true
    "$linux" --json ping 127.0.0.1 --port "$port" --count 2 --interval 20ms >source-udp.json
    "$linux" --json ping 127.0.0.2 --port "$port" --count 1 --timeout 200ms >/dev/null 2>&1 || true
    # strace -o blocks SIGINT for itself: the Ctrl-C goes to headroom.exe, its child.
    kill -INT "$(pgrep -P "$serve_pid")"
    wait "$serve_pid" || true
    jq -e '.probes[0].summary.latency_ns.p50 > 0' source-udp.json >/dev/null ||
      { echo "UDP echo from headroom.exe's serve on 0.0.0.0: no answer"; return 1; }
    grep -q 'cmsg_type=IP_PKTINFO, cmsg_data={.*ipi_addr=inet_addr("127.0.0.2")' source.strace ||
      { echo "WSARecvMsg: no IP_PKTINFO naming 127.0.0.2"; grep PKTINFO source.strace | head -3; return 1; }
    pktinfo="serve on 0.0.0.0: UDP echo answered, IP_PKTINFO read 127.0.0.2 for a datagram sent there (wine 8 drops WSASendMsg's source: the answer from it needs a real Windows)"
  fi
  echo "headroom.exe ping --interface lo -> Linux serve 127.0.0.1:$far: $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' source-ping.json) us p50$([ ${#trace[@]} -gt 0 ] && echo ", IP_UNICAST_IF set to lo's index in network byte order"); an unknown interface: exit 2, $(tr -d '\r' <source-bad.err); $pktinfo"
}

# headroom.exe as the far end: `serve` under wine on 127.0.0.1 (with a token
# and --allow-path on a directory of C:), the Linux binary's net (rr, up,
# down), ping (TCP handshakes, UDP echo) and disk --remote against it; then
# Ctrl-C stops it (exit 130): the port is free, the directory empty.
serve() {
  local port token=check-windows-serve-$$ dir="$WINEPREFIX/drive_c/headroom-check/serve" rc=0
  port=$((20000 + RANDOM % 20000))
  rm -rf "$dir"
  mkdir -p "$dir"
  HEADROOM_TOKEN=$token env --default-signal=INT "$wine" "$exe" serve --port "$port" \
    --allow-path 'C:\headroom-check\serve' >serve-win.log 2>serve-win.err &
  serve_pid=$!
  trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
  until_listening serve-win.err || true
  grep -q "listening on 127.0.0.1:$port" serve-win.err || { echo "serve did not start:"; cat serve-win.err; return 1; }
  export HEADROOM_TOKEN=$token
  "$linux" --json net "127.0.0.1:$port" --protocol headroom --time 1s --tests rtt,up1,down1 >net-to-win.json
  "$linux" --json ping "127.0.0.1:$port" --count 5 --interval 20ms >ping-tcp-to-win.json
  "$linux" --json ping 127.0.0.1 --port "$port" --count 5 --interval 20ms >ping-udp-to-win.json
  "$linux" --json disk 'C:\headroom-check\serve' --remote "127.0.0.1:$port" --rw randread --size 16M \
    --time 1s --ramp 0s --quiet >disk-to-win.json
  kill -INT "$serve_pid"
  wait "$serve_pid" || rc=$?
  [ "$rc" -eq 130 ] || { echo "serve: exit $rc on Ctrl-C, not 130"; cat serve-win.err; return 1; }
  ! ss -Htuln "sport = :$port" | grep -q . || { echo "serve: port $port still bound after its exit"; return 1; }
  [ -z "$(ls -A "$dir")" ] || { echo "serve: left behind in its --allow-path: $(ls "$dir")"; return 1; }
  jq -e '(.probes | length) == 3 and all(.probes[] | select(.id != "rr-idle"); .summary.bytes_per_sec > 0)' net-to-win.json >/dev/null
  # Where Linux sends (up), Linux's TCP state is recorded; where headroom.exe
  # sends (down), none (wine 8 does not implement SIO_TCP_INFO, as net
  # shows): absent, never zeros.
  jq -e '(.probes[] | select(.id == "tcp-up-1") | .details.tcp_info.srtt_us > 0)
         and (.probes[] | select(.id == "tcp-down-1") | .details.tcp_info == null)' net-to-win.json >/dev/null
  grep -q "test=tcp .*status=ok" serve-win.log
  grep -q "test=tcp_reverse .*status=ok" serve-win.log
  jq -e '.probes[0].summary.latency_ns.p50 > 0' ping-tcp-to-win.json ping-udp-to-win.json >/dev/null
  # The server ran the probe: its engine, its unbuffered flag, its path.
  jq -e '(.probes | length) == 1 and (.probes[0] | .summary.ops > 0 and .spec.engine == "iocp"
         and .spec.direct and .spec.direct_flag == "file_flag_no_buffering")' disk-to-win.json >/dev/null ||
    { echo "disk --remote: not an unbuffered iocp run with figures"; jq -c '.probes[] | [.spec, .summary.ops]' disk-to-win.json; return 1; }
  echo "Linux net -> headroom.exe serve on 127.0.0.1:$port: $(jq -r '.probes[] | "\(.id) \(if .summary.bytes_per_sec > 0 then "\(.summary.bytes_per_sec * 8 / 1e9 | . * 100 | round / 100) Gb/s" else "\(.summary.latency_ns.p50 / 1000 | round) us p50" end)"' net-to-win.json | paste -sd ' ' -); ping TCP $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' ping-tcp-to-win.json) us, UDP echo $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' ping-udp-to-win.json) us p50; disk --remote C:\\headroom-check\\serve $(jq -r '.probes[0] | "\(.spec.rw) \(.spec.block_size / 1024)K Q\(.spec.queue_depth): \(.summary.iops | round) IOPS"' disk-to-win.json) (iocp, FILE_FLAG_NO_BUFFERING); stopped by Ctrl-C (exit 130), port free, nothing left"
}

# Secret files (issue 31): who may read `serve --token-file` and
# `--credentials FILE` comes from the file's owner and DACL
# (GetNamedSecurityInfoW). Wine 8 keeps no descriptor for a file written
# from Linux and builds one from its mode bits (LocalSystem, the owner for
# the user bits, Everyone for the others bits; group bits are left out): a
# token file of mode 604 is refused naming Everyone, the same file at 600 is
# taken and a Linux client holding that token is served (`net`, one
# holding another is refused); a credentials file at 604 is refused the same way.
secret() {
  local dir="$WINEPREFIX/drive_c/headroom-check/secret" port rc=0 token
  token="check-windows-secret-$$-$RANDOM"
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '%s\n' "$token" >"$dir/token"
  printf 'HEADROOM_SMB_PASSWORD=%s\n' "$token" >"$dir/creds"
  chmod 604 "$dir/token" "$dir/creds"
  port=$((20000 + RANDOM % 20000))
  win serve --port "$port" --token-file 'C:\headroom-check\secret\token' >secret-open.out 2>secret-open.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <secret-open.err)" -eq 1 ] && grep -q "Everyone may read it; run \`icacls" secret-open.err ||
    { echo "a token file of mode 604: exit $rc, not 2 in one line naming Everyone and icacls:"; cat secret-open.err; return 1; }
  rc=0
  win disk 'smb://127.0.0.1:1/share' --credentials 'C:\headroom-check\secret\creds' >secret-creds.out 2>secret-creds.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <secret-creds.err)" -eq 1 ] && grep -q -- "--credentials .*Everyone may read it" secret-creds.err ||
    { echo "a credentials file of mode 604: exit $rc, not 2 in one line naming Everyone:"; cat secret-creds.err; return 1; }
  chmod 600 "$dir/token"
  env --default-signal=INT "$wine" "$exe" serve --port "$port" --token-file 'C:\headroom-check\secret\token' \
    >secret-serve.log 2>secret-serve.err &
  secret_pid=$!
  trap 'kill "$secret_pid" 2>/dev/null || true' EXIT
  until_listening secret-serve.err || { echo "serve --token-file at mode 600 did not start:"; cat secret-serve.err; return 1; }
  # net, not ping: a TCP ping is a handshake, which asks for no token.
  HEADROOM_TOKEN=$token "$linux" --json net "127.0.0.1:$port" --time 1s --tests rtt >secret-net.json
  rc=0
  HEADROOM_TOKEN=wrong-$token "$linux" net "127.0.0.1:$port" --time 1s --tests rtt >secret-wrong.out 2>secret-wrong.err || rc=$?
  kill -INT "$secret_pid"
  wait "$secret_pid" || true
  [ "$rc" -eq 2 ] && grep -q "wrong token" secret-wrong.err || { echo "a client with another token: exit $rc, not 2 naming a wrong token:"; cat secret-wrong.err; return 1; }
  jq -e '.probes[0].summary.latency_ns.p50 > 0' secret-net.json >/dev/null
  echo "token file at mode 604 (wine's DACL: Everyone allowed): $(tr -d '\r' <secret-open.err); credentials file the same: refused, exit 2; at mode 600: taken, a Linux client with the token served (net rr $(jq -r '.probes[0].summary.latency_ns.p50 / 1000 | round' secret-net.json) us p50), another token refused: $(tr -d '\r' <secret-wrong.err | tail -1)"
}

# start_linux_serve LOG ARGS...: the Linux binary's `serve` on a free
# loopback port with this check's token (HEADROOM_TOKEN); prints the port
# once it listens. The caller stops it (its pid is in LOG.pid).
start_linux_serve() {
  local log="$1" port
  shift
  port=$((20000 + RANDOM % 20000))
  "$linux" serve --bind 127.0.0.1 --port "$port" "$@" >"$log" 2>&1 &
  echo $! >"$log.pid"
  until_listening "$log" 50 || { echo "serve did not start: $(cat "$log")" >&2; return 1; }
  echo "$port"
}

# soak from headroom.exe: its own disk probes in a directory of C:, the
# Linux server's disk probes in a directory it allows, and net to it, in
# 1 s turns for 10 s (a turn takes longer than its second: one cycle of
# seven, perhaps the start of a second). The database headroom.exe wrote must be a soak
# (every probe with samples, its test file recorded as removed, the
# directory empty) that the Linux binary reads too: `report` of it prints
# the same findings on both, and `report --html` the same page.
soak() {
  local port far="$PWD/soak-far" here="$WINEPREFIX/drive_c/headroom-check/soak" db probes
  export HEADROOM_TOKEN=check-windows-soak-$$
  rm -rf "$here" "$far"
  mkdir -p "$here" "$far"
  port=$(start_linux_serve soak-serve.log --allow-path "$far")
  trap 'kill "$(cat soak-serve.log.pid)" 2>/dev/null || true' EXIT
  db="$here/soak.sqlite"
  win soak --duration 10s --probe-time 1s --server "127.0.0.1:$port" --path 'C:\headroom-check\soak' \
    --remote-path "$far" --size 16M --db 'C:\headroom-check\soak\soak.sqlite' >soak.out
  # A killed session's test file whose writer no longer runs (a pid no
  # process has) is removed on --resume (before, any pid kept it there).
  printf x >"$here/headroom-disk-99996.tmp"
  sqlite3 "$db" "insert into test_files (session, path, pid) values
    ((select max(id) from sessions), 'C:\\headroom-check\\soak\\headroom-disk-99996.tmp', 99996)"
  win soak --resume --duration 13s --db 'C:\headroom-check\soak\soak.sqlite' >soak-resume.out 2>&1
  [ ! -e "$here/headroom-disk-99996.tmp" ] ||
    { echo "a dead writer's test file was kept on --resume:"; cat soak-resume.out; return 1; }
  kill "$(cat soak-serve.log.pid)"
  [ -z "$(ls -A "$far")" ] || { echo "the server's test file left: $(ls "$far")"; return 1; }
  [ "$(ls -A "$here")" = soak.sqlite ] || { echo "left beside the database: $(ls "$here")"; return 1; }
  cp "$db" soak.sqlite
  # Every probe of the cycle stored samples with figures.
  probes=$(sqlite3 soak.sqlite "select group_concat(probe) from (select probe from samples where bytes_per_sec > 0 group by probe order by probe)")
  [ "$probes" = "iops,net,read,remote-iops,remote-read,remote-write,write" ] ||
    { echo "probes with samples: '$probes'"; sqlite3 soak.sqlite "select probe, count(*) from samples group by probe"; cat soak.out; return 1; }
  # The test file headroom.exe created is recorded, with its Windows path, as removed.
  sqlite3 soak.sqlite "select path, removed_unix is not null from test_files" | grep -q '^C:\\headroom-check\\soak\\headroom-disk-[0-9]*\.tmp|1$' ||
    { echo "test_files: $(sqlite3 soak.sqlite 'select * from test_files')"; return 1; }
  win report 'C:\headroom-check\soak\soak.sqlite' | tr -d '\r' >soak-report-win.txt
  "$linux" report soak.sqlite >soak-report-linux.txt
  diff soak-report-win.txt soak-report-linux.txt
  win report 'C:\headroom-check\soak\soak.sqlite' --html 'C:\headroom-check\soak\report.html' >/dev/null
  "$linux" report soak.sqlite --html soak-report-linux.html >/dev/null
  cmp "$here/report.html" soak-report-linux.html
  echo "headroom.exe soak on C:\\headroom-check\\soak and Linux serve 127.0.0.1:$port: $(sqlite3 soak.sqlite "select count(*) from cycles") turns, $(sqlite3 soak.sqlite "select count(*) from samples") samples ($(sqlite3 soak.sqlite "select group_concat(probe || ' ' || cast(round(v / 1e6) as int) || ' MB/s', ', ') from (select probe, avg(bytes_per_sec) v from samples group by probe)")); test files removed on both ends, a dead writer's removed on --resume; report and report --html identical to Linux's"
}

# fleet from headroom.exe: two Linux agents on loopback run one disk test
# together in a directory they allow; a third host that does not listen is
# named in one line and the others summed (exit 2, as on Linux: the sums lack its share).
fleet() {
  local p1 p2 dead dir="$PWD/fleet" rc=0
  export HEADROOM_TOKEN=check-windows-fleet-$$
  mkdir -p "$dir"
  p1=$(start_linux_serve fleet-1.log --allow-path "$dir")
  p2=$(start_linux_serve fleet-2.log --allow-path "$dir")
  trap 'kill "$(cat fleet-1.log.pid)" "$(cat fleet-2.log.pid)" 2>/dev/null || true' EXIT
  dead=$((p1 + 1))
  while ss -Htln "sport = :$dead" | grep -q . || [ "$dead" = "$p2" ]; do dead=$((dead + 1)); done
  win --json fleet --hosts "127.0.0.1:$p1,127.0.0.1:$p2,127.0.0.1:$dead" disk "$dir" --rw randread --size 16M \
    --time 1s --ramp 0s >fleet.json 2>fleet.err || rc=$?
  kill "$(cat fleet-1.log.pid)" "$(cat fleet-2.log.pid)"
  [ "$rc" -eq 2 ] || { echo "a host down: exit $rc, not 2"; cat fleet.err; return 1; }
  grep -q "cannot connect to 127.0.0.1:$dead: connection refused" fleet.err ||
    { echo "the host down is not named:"; cat fleet.err; return 1; }
  [ -z "$(ls -A "$dir")" ] || { echo "left behind: $(ls "$dir")"; return 1; }
  # Both agents measured; the sum is theirs; the clocks were compared: one
  # clock here, so each offset within half its exchange's round trip (NTP's bound).
  jq -e --arg a "127.0.0.1:$p1" --arg b "127.0.0.1:$p2" '
    ([.fleet.hosts[] | select(.status == "ok") | .name] | sort) == ([$a, $b] | sort)
    and (.probes | length == 2 and all(.[]; .summary.ops > 0))
    and .fleet.sums[0].probe.summary.ops == ([.probes[].summary.ops] | add)
    and all(.fleet.hosts[] | select(.status == "ok"); (.clock_offset_s | fabs) <= .clock_rtt_s / 2 + 0.0001)' fleet.json >/dev/null ||
    { echo "not two agents summed:"; jq -c '.fleet.hosts[] | del(.inventory)' fleet.json; jq -c '[.probes[] | [.id, .summary.ops]], [.fleet.sums[].probe.summary.ops]' fleet.json; return 1; }
  echo "headroom.exe fleet -> Linux agents 127.0.0.1:$p1 and :$p2: randread 4K $(jq -r '[.probes[] | "\(.id) \(.summary.iops | round) IOPS"] | join(", ")' fleet.json), sum $(jq -r '.fleet.sums[0].probe.summary.iops | round' fleet.json) IOPS; clock offsets $(jq -r '[.fleet.hosts[] | select(.status == "ok") | "\(.clock_offset_s * 1e6 | round) us"] | join(", ")' fleet.json); 127.0.0.1:$dead down: named in one line, exit 2"
}

# headroom.exe's own iSCSI client (Winsock, WSAPoll) against tgt's tgtd on
# 127.0.0.1 (as root, no namespace; a control port and a backing file of its
# own): reads through the protocol at Q1 and Q8 with figures, a write to
# the zeroed LUN, then a write over what it wrote refused in one line. tgtd
# ignores SIGTERM with a session open: it is killed, its socket files removed.
iscsi() {
  local port iqn=iqn.2026-11.dev.headroom.check:windows rc=0 url
  port=$((20000 + RANDOM % 20000))
  # Global: the EXIT trap runs after the function's locals are gone.
  control=$((1000 + $$ % 1900 * 16))
  truncate -s 64M lun.img
  tgtd -f --iscsi "portal=127.0.0.1:$port" -C "$control" </dev/null >tgtd.log 2>&1 &
  tgtd_pid=$!
  trap 'kill -9 "$tgtd_pid" 2>/dev/null; wait "$tgtd_pid" 2>/dev/null || true; rm -f /var/run/tgtd/socket."$control"{,.lock}' EXIT
  tgt() { tgtadm -C "$control" --lld iscsi "$@"; }
  for _ in $(seq 100); do
    tgt --op show --mode target >/dev/null 2>&1 && break
    sleep 0.1
  done
  tgt --op new --mode target --tid 1 -T "$iqn"
  tgt --op new --mode logicalunit --tid 1 --lun 1 -b "$PWD/lun.img"
  tgt --op bind --mode target --tid 1 -I ALL
  url="iscsi://127.0.0.1:$port/$iqn/1"
  win --json disk "$url" --rw randread --time 1s --ramp 0s --quiet >iscsi-q1.json
  win --json disk "$url" --rw randread --qd 8 --time 1s --ramp 0s --quiet >iscsi-q8.json
  jq -e '(.probes | length) == 1 and (.probes[0] | .summary.ops > 0 and .spec.engine == "iscsi"
         and .spec.protocol.name == "iscsi")' iscsi-q1.json iscsi-q8.json >/dev/null ||
    { echo "no iSCSI figures"; jq -c '.probes[] | [.spec, .summary.ops]' iscsi-q1.json iscsi-q8.json; return 1; }
  # The LUN is all zeros: the signature check lets a write through. It
  # writes from offset 0, so a second write finds data there and is refused
  # in one line (headroom.exe cannot tell a filesystem from test data).
  win --json disk "$url" --rw write --bs 1M --size 16M --time 1s --ramp 0s --quiet --destructive >iscsi-w.json
  jq -e '(.probes | length) == 1 and .probes[0].summary.ops > 0 and .probes[0].spec.rw == "write"' iscsi-w.json >/dev/null ||
    { echo "no iSCSI write figures"; jq -c '.probes[] | [.spec.rw, .summary.ops]' iscsi-w.json; return 1; }
  win disk "$url" --rw randwrite --time 1s --ramp 0s --quiet --destructive >iscsi-w.out 2>iscsi-w.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <iscsi-w.err)" -eq 1 ] && grep -q -- "--force" iscsi-w.err ||
    { echo "a write over data: exit $rc, not 2 in one line naming --force:"; cat iscsi-w.err; return 1; }
  echo "headroom.exe iscsi:// -> tgtd on 127.0.0.1:$port: randread 4K Q1 $(jq -r '.probes[0].summary.iops | round' iscsi-q1.json) IOPS, Q8 $(jq -r '.probes[0].summary.iops | round' iscsi-q8.json) IOPS (CmdSN window $(jq -r '.probes[0].spec.protocol.granted.cmdsn_window' iscsi-q8.json)); write 1M Q1 (gathered Data-Out bursts) on the zeroed LUN $(jq -r '.probes[0].summary.bytes_per_sec / 1e6 | round' iscsi-w.json) MB/s; a write over it then refused: $(tr -d '\r' <iscsi-w.err)"
}

# headroom.exe's own SMB client (Winsock, WSAPoll, NTLMv2, signing) against
# Samba's smbd on 127.0.0.1 (as root, no namespace: a private smbd with its
# own smb.conf, port, passdb and directories under the work dir, as the lab
# NAS runs it): the quick preset on the share with figures and its test file
# removed, then a wrong password refused in one line (exit 2). smbd and the
# children it forked per connection are stopped (its process group), the
# port left free.
smb() {
  local port base="$PWD/smb" url pw=check-windows-pw rc=0
  port=$((20000 + RANDOM % 20000))
  mkdir -p "$base"/{share,private,lock,state,cache,pid,ncalrpc}
  cat >"$base/smb.conf" <<EOF
[global]
  netbios name = HRCHECK
  workgroup = HRCHECK
  server role = standalone server
  security = user
  passdb backend = tdbsam:$base/private/passdb.tdb
  private dir = $base/private
  lock directory = $base/lock
  state directory = $base/state
  cache directory = $base/cache
  pid directory = $base/pid
  ncalrpc dir = $base/ncalrpc
  log file = $base/log.smbd
  max log size = 0
  smb ports = $port
  interfaces = 127.0.0.1/32
  bind interfaces only = yes
  disable netbios = yes
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  rpc start on demand helpers = no
  kernel oplocks = no
[bench]
  path = $base/share
  read only = no
  force user = root
EOF
  # The password twice on stdin (-t), into the private passdb.
  printf '%s\n%s\n' "$pw" "$pw" | pdbedit -s "$base/smb.conf" -a -t -u root >/dev/null
  # In a session of its own (setsid execs smbd: same pid, its own process
  # group): smbd signals its whole process group when it ends, which would
  # otherwise be this script's.
  setsid smbd --foreground --no-process-group -s "$base/smb.conf" </dev/null >smbd.out 2>&1 &
  # Global: the EXIT trap runs after the function's locals are gone.
  smbd_pid=$!
  # smbd forks a child per connection and helpers, all in its group: stop the group.
  trap 'kill -- -"$smbd_pid" 2>/dev/null || true; wait "$smbd_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    ss -Htln "sport = :$port" | grep -q . && break
    sleep 0.1
  done
  ss -Htln "sport = :$port" | grep -q . || { echo "smbd did not listen on 127.0.0.1:$port:"; cat smbd.out "$base/log.smbd"; return 1; }
  url="smb://root@127.0.0.1:$port/bench"
  HEADROOM_SMB_PASSWORD=$pw win --json disk "$url" --preset quick --size 32M --time 1s --ramp 0s --quiet >smb-quick.json
  # Each direction must move bytes. Not every probe: wine on a loaded 2-core
  # machine can stall one 1 s probe whole (the quick preset's own
  # no_io_completed warning then says so).
  jq -e '(.probes | length) == 6 and all(.probes[]; .spec.engine == "smb" and .spec.protocol.name == "smb")
         and ([.probes[] | select(.spec.rw | test("read")) | .summary.ops] | add > 0)
         and ([.probes[] | select(.spec.rw | test("write")) | .summary.ops] | add > 0)' smb-quick.json >/dev/null ||
    { echo "no SMB figures"; jq -c '.probes[] | [.id, .spec.engine, .summary.ops]' smb-quick.json; return 1; }
  [ -z "$(ls -A "$base/share")" ] || { echo "left behind on the share: $(ls "$base/share")"; return 1; }
  HEADROOM_SMB_PASSWORD=wrong-$pw win disk "$url" --preset quick --quiet >smb-bad.out 2>smb-bad.err || rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l <smb-bad.err)" -eq 1 ] && grep -q STATUS_LOGON_FAILURE smb-bad.err ||
    { echo "a wrong password: exit $rc, not 2 in one line naming STATUS_LOGON_FAILURE:"; cat smb-bad.err; return 1; }
  kill -- -"$smbd_pid"
  wait "$smbd_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    pgrep -g "$smbd_pid" >/dev/null || break
    sleep 0.1
  done
  ! pgrep -g "$smbd_pid" >/dev/null || { echo "smbd's processes still run: $(pgrep -g "$smbd_pid" | paste -sd ' ' -)"; return 1; }
  ! ss -Htln "sport = :$port" | grep -q . || { echo "port $port still bound after smbd stopped"; return 1; }
  echo "headroom.exe smb:// -> smbd on 127.0.0.1:$port ($(jq -r '.probes[0].spec.protocol.version' smb-quick.json), signing $(jq -r '.probes[0].spec.protocol.granted.signing' smb-quick.json)): $(jq -r '[.probes[] | "\(.id) \(if .spec.block_size >= 1048576 then "\(.summary.bytes_per_sec / 1e6 | round) MB/s" else "\(.summary.iops | round) IOPS" end)"] | join(", ")' smb-quick.json); no test file left; a wrong password: exit 2, $(tr -d '\r' <smb-bad.err)"
}

check version version
check link link
check cpu cpu
check sys sys
check compare compare
check report report
check disk disk
check net net
check serve serve
check secret secret
check source source_of
check soak soak
check fleet fleet
if [ "$(id -u)" -eq 0 ] && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null; then
  check raw raw_dev
else
  echo "check-windows: SKIPPED raw: needs root, losetup and mkfs.ext4"
fi
if [ "$(id -u)" -eq 0 ] && command -v tgtd >/dev/null && command -v tgtadm >/dev/null; then
  check iscsi iscsi
else
  echo "check-windows: SKIPPED iscsi: needs root and tgt's tgtd and tgtadm (scripts/install-deps.sh)"
fi
if [ "$(id -u)" -eq 0 ] && command -v smbd >/dev/null && command -v pdbedit >/dev/null; then
  check smb smb
else
  echo "check-windows: SKIPPED smb: needs root and Samba's smbd and pdbedit (scripts/install-deps.sh)"
fi

echo "check-windows: checks took $((SECONDS - checks_start)) s under wine (build and prefix before: $((checks_start - start)) s)"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "check-windows: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "check-windows: all checks passed"
