#!/usr/bin/env bash
# Installs what the Windows x86-64 build and its checks under wine need
# (scripts/build-windows.sh): Debian's rustc-web/cargo-web and rust-web-src
# (the standard library's source: Debian ships no prebuilt std for
# x86_64-pc-windows-gnu, so it is built with -Zbuild-std), the mingw-w64 cross
# gcc that links, and wine64 that runs the result.
# Kept apart from scripts/install-deps.sh: several hundred MB that only the
# cross build needs; CI runs both.
# Idempotent: installs only what is missing; `apt-get update` at most once.
set -euo pipefail

packages=(rustc-web cargo-web rust-web-src gcc-mingw-w64-x86-64 wine64)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-windows-deps: all Windows build dependencies present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-windows-deps: missing ${missing[*]}; run as root to build and check headroom.exe" >&2
  exit 0
fi
echo "install-windows-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
