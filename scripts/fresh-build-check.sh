#!/usr/bin/env bash
# Proves the README's main command works on a fresh Debian 12 with only the
# Rust toolchain and a C compiler (issue 28): a debootstrap minbase root plus
# gcc and libc6-dev, no -dev package, no libclang, no libnfs13 or libnbd0.
# In it: `cargo run --release --locked --offline -- run` (the README's
# command), a write over an image file (libblkid, loaded at run time, checks
# it), an nbd:// target, refused in one line naming libnbd0, and the same
# write with libblkid hidden, refused in one line naming libblkid1.
#
# The toolchain (~/.rustup, ~/.cargo) and this checkout are bind-mounted in,
# read-only except cargo's registry (no download: --offline). The root is
# made once and kept in target/fresh-root (about 250 MB, ~2 min with a
# mirror), with its own target directory, so a later run rebuilds only what
# changed. Mounts live in a private mount namespace and vanish with it.
# What can fail on a fresh machine is which crates, build scripts and system
# libraries the build needs, not how hard the compiler optimises: like
# check-aarch64.sh it builds the same release profile at opt-level 1, 256
# codegen units and no debug info (about half the build time: CI has 60
# minutes). Set CARGO_PROFILE_RELEASE_OPT_LEVEL=3 to build it as shipped.
#   bash scripts/fresh-build-check.sh        (root; skips without root or debootstrap)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap >/dev/null || ! command -v unshare >/dev/null; then
  echo "SKIPPED fresh-build-check: needs root, debootstrap and unshare (scripts/install-deps.sh)" >&2
  exit 0
fi
src="$(pwd)"
root="$src/target/fresh-root"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
start=$(date +%s)
if [ ! -e "$root/.headroom-root-ready" ]; then
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=gcc,libc6-dev bookworm "$root" "$mirror" >"$src/target/fresh-root.log" 2>&1 ||
    { tail -20 "$src/target/fresh-root.log" >&2; exit 1; }
  touch "$root/.headroom-root-ready"
fi
# What the check is about: none of these may be in the root.
for p in libblkid-dev libnfs-dev libnbd-dev libclang-dev libclang1-14 pkg-config libnfs13 libnbd0; do
  if chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "fresh-build-check: $p is installed in $root; remove the root to start again" >&2
    exit 1
  fi
done
home="${CARGO_HOME:-$HOME/.cargo}"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
mkdir -p "$root/src" "$root/cargo" "$root/rustup" "$root/build"
# in_root "MOUNTS" "SCRIPT": SCRIPT run by sh in the root, after MOUNTS (shell
# commands, $root set) in the private mount namespace.
in_root() {
  unshare --mount --fork sh -euc '
    root=$1 src=$2 home=$3 rustup_home=$4
    mount --bind "$src" "$root/src" && mount -o remount,bind,ro "$root/src"
    mount --bind "$home" "$root/cargo"
    mount --bind "$rustup_home" "$root/rustup" && mount -o remount,bind,ro "$root/rustup"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    eval "$5"
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/cargo/bin:/usr/bin:/bin \
      CARGO_HOME=/cargo RUSTUP_HOME=/rustup CARGO_TARGET_DIR=/build NO_COLOR=1 \
      CARGO_PROFILE_RELEASE_OPT_LEVEL="$7" CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$8" CARGO_PROFILE_RELEASE_DEBUG=0 \
      /bin/sh -euc "$6"
  ' sh "$root" "$src" "$home" "$rustup_home" "$1" "$2" \
    "${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}" "${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-256}"
}

in_root "" '
  cd /src
  cargo run --release --locked --offline --quiet -- --version
  echo "fresh-build-check: built in a root without -dev packages"
  mkdir -p /tmp/run && cd /tmp/run
  /build/release/headroom run --quiet
  # An existing file is written only after libblkid found no signature in it.
  head -c 16777216 /dev/zero > /tmp/img
  /build/release/headroom disk /tmp/img --rw write --time 300ms --ramp 0s --destructive --quiet >/dev/null
  # No libnbd0 here: one line naming the package, exit 2.
  code=0
  /build/release/headroom disk nbd://127.0.0.1/x --rw read --time 300ms 2>/tmp/err || code=$?
  cat /tmp/err
  [ $code -eq 2 ] && [ $(wc -l < /tmp/err) -eq 1 ] && grep -q libnbd0 /tmp/err
'
# libblkid hidden: the same write is refused, in one line naming libblkid1.
in_root 'mount --bind /dev/null "$root/usr/lib/x86_64-linux-gnu/libblkid.so.1"' '
  code=0
  /build/release/headroom disk /tmp/img --rw write --time 300ms --ramp 0s --destructive 2>/tmp/err || code=$?
  cat /tmp/err
  [ $code -eq 2 ] && [ $(wc -l < /tmp/err) -eq 1 ] && grep -q libblkid1 /tmp/err
'
echo "fresh-build-check: passed in $(( $(date +%s) - start )) s"
