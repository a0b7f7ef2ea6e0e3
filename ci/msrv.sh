#!/usr/bin/env bash
# Proves the declared minimum supported Rust version: checks every crate and target of the
# workspace with exactly that toolchain. The version is read from `rust-version` in the root
# Cargo.toml, so the declaration and the check cannot drift apart; with rust-version = "1.95"
# this runs `cargo +1.95.0 check --workspace --all-targets`.
set -euo pipefail
cd "$(dirname "$0")/.."
msrv=$(sed -n 's/^rust-version = "\([0-9][0-9.]*\)"$/\1/p' Cargo.toml)
if [ -z "$msrv" ]; then
    echo "ci/msrv.sh: no rust-version in Cargo.toml" >&2
    exit 1
fi
case "$msrv" in
    *.*.*) toolchain=$msrv ;;
    *) toolchain=$msrv.0 ;;
esac
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    rustup toolchain install --profile minimal "$toolchain"
fi
cargo "+$toolchain" check --workspace --all-targets
