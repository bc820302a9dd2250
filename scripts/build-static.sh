#!/usr/bin/env bash
# Builds a statically linked headroom for a far end without a Rust toolchain
# (a NAS, a hypervisor): glibc, libblkid and SQLite linked in, no shared
# library needed at run time. Prints the binary's path; checks it is static.
#   bash scripts/build-static.sh            -> target/static/x86_64-unknown-linux-gnu/release/headroom
#   bash scripts/build-static.sh --print-path   the path only, building nothing
#     (packaging/docker/Dockerfile copies it; tests/deploy.rs checks they agree)
# Needs what scripts/install-deps.sh installs (libblkid-dev ships libblkid.a).
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/static}"
bin="$CARGO_TARGET_DIR/$target/release/headroom"
if [ "${1:-}" = "--print-path" ]; then
  echo "$bin"
  exit 0
fi
# Without the NFS and NBD clients: libnbd.a needs GnuTLS and libxml2 linked in too.
# libblkid.a linked in (static-blkid): a static glibc binary cannot load libblkid.so.1.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target "$target" --bin headroom \
  --no-default-features --features static-blkid
strip "$bin"
if ldd "$bin" 2>&1 | grep -q "=>"; then
  echo "build-static: $bin still needs shared libraries:" >&2
  ldd "$bin" >&2
  exit 1
fi
echo "$bin"
