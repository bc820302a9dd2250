#!/usr/bin/env bash
# Builds headroom.exe for Windows x86-64 on this Linux machine: one executable
# that needs only DLLs every Windows has (kernel32, ws2_32, ...; checked below).
#   bash scripts/build-windows.sh              -> target/windows/x86_64-pc-windows-gnu/release/headroom.exe
#   bash scripts/build-windows.sh --print-path    the path only, building nothing
#   CARGO_TARGET_DIR_WINDOWS=DIR                  builds there instead of target/windows
# How: Debian's rustc-web has no prebuilt standard library for
# x86_64-pc-windows-gnu, so it is built from rust-web-src (-Zbuild-std, which
# needs RUSTC_BOOTSTRAP on a stable compiler); mingw-w64's gcc links. Without
# the NFS and NBD clients (C libraries, feature c-protocol-clients) and
# libblkid (Linux only); what the Windows build can and cannot do yet:
# docs/platform.md, "Windows".
# Needs what scripts/install-windows-deps.sh installs (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_WINDOWS:-target/windows}"
exe="$CARGO_TARGET_DIR/$target/release/headroom.exe"
if [ "${1:-}" = --print-path ]; then
  echo "$exe"
  exit 0
fi
[ $# -eq 0 ] || { echo "build-windows: unknown argument $1; use --print-path or nothing" >&2; exit 2; }
for tool in /usr/bin/cargo /usr/bin/rustc x86_64-w64-mingw32-gcc; do
  command -v "$tool" >/dev/null || { echo "build-windows: $tool is missing; run scripts/install-windows-deps.sh as root" >&2; exit 2; }
done
[ -f /usr/lib/rustlib/src/rust/library/Cargo.lock ] ||
  { echo "build-windows: the standard library's source is missing; run scripts/install-windows-deps.sh as root" >&2; exit 2; }

# Debian's cargo runs whichever rustc is first on PATH (rustup's): name its own.
# --locked: this cargo must never rewrite the Cargo.lock the rustup toolchain uses.
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc
export AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
export CARGO_PROFILE_RELEASE_DEBUG=0
# crt-static: libgcc and winpthreads linked in, so no mingw DLL is needed beside the .exe.
RUSTFLAGS="-C target-feature=+crt-static" RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
  /usr/bin/cargo build --locked --release -Zbuild-std=std,panic_abort --target "$target" \
  --bin headroom --no-default-features
x86_64-w64-mingw32-strip "$exe"
# Every DLL it imports must be one that Windows itself ships.
unexpected=$(x86_64-w64-mingw32-objdump -p "$exe" | sed -n 's/^\tDLL Name: //p' |
  grep -viE '^(kernel32|ntdll|ws2_32|advapi32|userenv|bcrypt|bcryptprimitives|iphlpapi|mpr|secur32|shell32|ole32|oleaut32|user32|setupapi|cfgmgr32|api-ms-win-.*|msvcrt|ucrtbase)\.dll$' || true)
if [ -n "$unexpected" ]; then
  echo "build-windows: $exe needs DLLs Windows does not ship: $unexpected" >&2
  exit 1
fi
echo "$exe"
