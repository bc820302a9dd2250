#!/usr/bin/env bash
# Builds headroom's .deb with cargo-deb (what goes in: [package.metadata.deb]
# in Cargo.toml): the release binary, the man pages (one per subcommand:
# `man headroom-disk`) and shell completions it generates itself, the
# headroom-serve systemd unit and the docs. Prints the .deb's path.
#   bash scripts/build-deb.sh              builds the release binary first
#   bash scripts/build-deb.sh --no-build   packages the binary already in
#                                          ${CARGO_TARGET_DIR:-target}/release
# Needs cargo-deb and dpkg-dev (scripts/install-deps.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
if [ "${1:-}" != "--no-build" ]; then
  cargo build --release --bin headroom >&2
fi
bin="$target_dir/release/headroom"
[ -x "$bin" ] || { echo "build-deb: $bin is missing; run without --no-build" >&2; exit 2; }
# The asset paths in Cargo.toml name target/release/deb/; cargo-deb maps
# target/release/ to the real target directory.
gen="$target_dir/release/deb"
mkdir -p "$gen"
# Regenerated from scratch: a page of a removed subcommand must not ship.
rm -rf "$gen/man"
mkdir -p "$gen/man"
"$bin" manpage --dir "$gen/man"
gzip -9n "$gen/man"/*.1
"$bin" completions bash > "$gen/headroom.bash"
"$bin" completions zsh > "$gen/_headroom"
"$bin" completions fish > "$gen/headroom.fish"
# Stripped (the release profile keeps line tables for backtraces: 90 MB);
# cargo-deb prints the .deb's path last.
cargo deb --no-build --strip --output "$gen" | tail -1
