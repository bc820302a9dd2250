#!/usr/bin/env bash
# The whole test suite: installs what the tests need (idempotent), then runs
# every test of every crate in release mode (the measuring tests need an
# optimised build to be faster than what they measure).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo test --workspace --release --all-targets "$@"
