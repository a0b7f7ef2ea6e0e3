#!/usr/bin/env bash
# Portable builds: the library crates type-check for macOS (where sessions report an
# unsupported platform), hushtrace builds for aarch64 Linux, and the unit tests of the
# architecture code (cycle counter, clock calibration, signal-safe local atomics, the rest of
# the platform layer) run under qemu-aarch64. Installs what is missing: the Debian cross
# linker and qemu-user, the rustup targets. Own target dir, so it never blocks other builds.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/cross}"

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
missing=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
installed="$(rustup target list --installed)"
for t in x86_64-apple-darwin aarch64-unknown-linux-gnu; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

echo "== cargo check --target x86_64-apple-darwin (core, ctf, hushtrace, cli)"
cargo check --target x86_64-apple-darwin -p hushtrace-core -p hushtrace-ctf -p hushtrace -p hushtrace-cli
# The unit tests compile there too (their Linux-only parts are cfg'd out).
cargo check --target x86_64-apple-darwin -p hushtrace --lib --profile test

echo "== aarch64-unknown-linux-gnu: build, then clock/local/platform unit tests under qemu"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
cargo build --target aarch64-unknown-linux-gnu -p hushtrace-core -p hushtrace-ctf -p hushtrace
cargo test --target aarch64-unknown-linux-gnu -p hushtrace --lib -- clock:: local:: platform::
