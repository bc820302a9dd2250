#!/usr/bin/env bash
# Installs what the aarch64 build and its emulated checks need
# (scripts/build-static.sh --target aarch64, scripts/check-aarch64.sh):
# the arm64 foreign architecture in dpkg, Debian's rustc-web/cargo-web with
# their arm64 standard library (rustup's toolchain would have to download
# one), the aarch64 cross gcc and its glibc (static libc.a included),
# libblkid-dev:arm64 (libblkid.a and blkid.pc for the static link), and
# qemu-user-static to run the result.
# Kept apart from scripts/install-deps.sh: several hundred MB and a second dpkg
# architecture that only the cross build needs; CI runs both.
# Idempotent: adds the architecture and installs only what is missing;
# `apt-get update` at most once.
set -euo pipefail

packages=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
          libc6-dev-arm64-cross binutils-aarch64-linux-gnu libblkid-dev:arm64 qemu-user-static)

need_arch=0
dpkg --print-foreign-architectures | grep -qx arm64 || need_arch=1
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "$need_arch" -eq 0 ] && [ "${#missing[@]}" -eq 0 ]; then
  echo "install-aarch64-deps: all aarch64 build dependencies present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-aarch64-deps: missing$([ "$need_arch" -eq 1 ] && echo " the arm64 dpkg architecture") ${missing[*]}; run as root to build and check the aarch64 binary" >&2
  exit 0
fi

if [ "$need_arch" -eq 1 ]; then
  echo "install-aarch64-deps: adding the arm64 architecture to dpkg"
  dpkg --add-architecture arm64
fi
echo "install-aarch64-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
