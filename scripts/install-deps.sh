#!/usr/bin/env bash
# Installs what headroom's build, tests and benchmarks need: libblkid's headers and
# libclang (the libblkid-rs bindings are generated at build time), the real peers
# (fio, iperf3, iperf2, sockperf, nbdkit), the lab tools (iproute2, util-linux,
# e2fsprogs, xfsprogs, btrfs-progs, cryptsetup) and headless Chromium for the HTML
# report test.
# Idempotent: installs only what is missing; runs `apt-get update` at most once.
set -euo pipefail

packages=(fio iperf3 iperf sockperf nbdkit iproute2 util-linux fdisk e2fsprogs xfsprogs
          btrfs-progs kmod procps chromium sqlite3 hyperfine python3 openssl zstd
          jq time libblkid-dev libclang-dev pkg-config cryptsetup-bin)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all test dependencies present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (or install them) to enable every test" >&2
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# iperf3's postinst asks whether to start a daemon; answer no.
echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
