#!/usr/bin/env bash
# Builds a statically linked headroom for a far end without a Rust toolchain
# (a NAS, a hypervisor, a Raspberry Pi): glibc, libblkid and SQLite linked in,
# no shared library needed at run time. Prints the binary's path; checks it is static.
#   bash scripts/build-static.sh            -> target/static/x86_64-unknown-linux-gnu/release/headroom
#   bash scripts/build-static.sh --target aarch64
#                                           -> target/static/aarch64-unknown-linux-gnu/release/headroom
#   bash scripts/build-static.sh [--target aarch64] --print-path   the path only, building nothing
#     (packaging/docker/Dockerfile copies it; tests/deploy.rs checks they agree)
# Needs what scripts/install-deps.sh installs (libblkid-dev ships libblkid.a);
# --target aarch64 also what scripts/install-aarch64-deps.sh installs: Debian's
# rustc-web (its arm64 standard library; rustup's toolchain is not asked to
# download one), the aarch64 cross gcc and libblkid-dev:arm64.
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(rustc -vV | sed -n 's/^host: //p')"
print_path=0
while [ $# -gt 0 ]; do
  case "$1" in
    --print-path) print_path=1 ;;
    --target)
      case "${2:-}" in
        aarch64 | aarch64-unknown-linux-gnu) target=aarch64-unknown-linux-gnu ;;
        *) echo "build-static: --target ${2:-(missing)}: only aarch64 is known besides the host; e.g. --target aarch64" >&2; exit 2 ;;
      esac
      shift
      ;;
    *) echo "build-static: unknown argument $1; use --target aarch64 and/or --print-path" >&2; exit 2 ;;
  esac
  shift
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/static}"
bin="$CARGO_TARGET_DIR/$target/release/headroom"
if [ "$print_path" -eq 1 ]; then
  echo "$bin"
  exit 0
fi

cargo=(cargo)
locked=()
strip=strip
if [ "$target" = aarch64-unknown-linux-gnu ] && [ "$(uname -m)" != aarch64 ]; then
  for tool in /usr/bin/cargo /usr/bin/rustc aarch64-linux-gnu-gcc; do
    command -v "$tool" >/dev/null || {
      echo "build-static: $tool is missing; run scripts/install-aarch64-deps.sh as root" >&2
      exit 2
    }
  done
  # Debian's cargo runs whichever rustc is first on PATH (rustup's, without an
  # aarch64 standard library): name its own. --locked: this cargo must never
  # rewrite the Cargo.lock the rustup toolchain uses.
  cargo=(env RUSTC=/usr/bin/rustc /usr/bin/cargo)
  locked=(--locked)
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
  export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
  export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
  # libblkid's (and any other C library's) .pc files of the arm64 multiarch
  # packages, not the host's; bindgen gets --target from cargo and finds the
  # cross gcc's headers itself.
  export PKG_CONFIG_ALLOW_CROSS=1
  export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
  strip=aarch64-linux-gnu-strip
fi

# Stripped below anyway: no line tables to compile and link.
export CARGO_PROFILE_RELEASE_DEBUG=0
# Without the NFS and NBD clients: libnbd.a needs GnuTLS and libxml2 linked in too.
# libblkid.a linked in (static-blkid): a static glibc binary cannot load
# libblkid.so.1. It is left to the final link, which finds it in the target's
# multiarch directory.
rustflags="-C target-feature=+crt-static"
if [ "$target" = aarch64-unknown-linux-gnu ]; then
  rustflags="$rustflags -L native=/usr/lib/aarch64-linux-gnu"
fi
RUSTFLAGS="$rustflags" "${cargo[@]}" build "${locked[@]}" --release --target "$target" --bin headroom \
  --no-default-features --features static-blkid
"$strip" "$bin"
# readelf works for either architecture (ldd only for the host's): a static
# binary has no program interpreter and needs no shared library.
if readelf -lW "$bin" | grep -q "Requesting program interpreter" || readelf -dW "$bin" | grep -q "(NEEDED)"; then
  echo "build-static: $bin still needs shared libraries:" >&2
  readelf -dW "$bin" | grep "(NEEDED)" >&2 || true
  exit 1
fi
echo "$bin"
