#!/usr/bin/env bash
# What later steps of .ci/run fetch from the network, fetched while the first steps compile.
# On a fresh machine the downloads took about five minutes of the suite when each step fetched
# its own (docs/CI.md); .ci/run starts both parts in the background and waits for each before
# the first step that needs it. Each part only installs what is missing, so on a machine that
# has everything it returns at once. The steps keep their own install-if-missing code: run
# alone, they still work.
#
#   bash ci/prefetch.sh rustup   # the MSRV toolchain, nightly's miri and rust-src, the cross targets
#   bash ci/prefetch.sh apt      # the aarch64 cross compiler and libc, qemu-user, python3-venv;
#                                # then the Perfetto protos and DuckDB venvs (ci/perfetto-venv.sh,
#                                # ci/sql-venv.sh), once cargo has made target/
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
rustup)
    msrv=$(sed -n 's/^rust-version = "\([0-9][0-9.]*\)"$/\1/p' Cargo.toml)
    case "$msrv" in *.*.*) toolchain=$msrv ;; *) toolchain=$msrv.0 ;; esac
    if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
        rustup toolchain install --profile minimal "$toolchain"
    fi
    installed="$(rustup component list --toolchain nightly --installed)"
    for c in miri rust-src; do
        grep -q "^$c" <<<"$installed" || rustup component add --toolchain nightly "$c"
    done
    targets="$(rustup target list --installed)"
    for t in x86_64-apple-darwin aarch64-unknown-linux-gnu; do
        grep -qx "$t" <<<"$targets" || rustup target add "$t"
    done
    ;;
apt)
    missing=()
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
    command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
    python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
            { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }
    fi
    # The venv goes under target/, which cargo must create first (its CACHEDIR.TAG tells the
    # test helpers where the build is): wait for .ci/run's clippy to make it, else leave the
    # venv to the step that needs it.
    for _ in $(seq 600); do
        [ -f target/CACHEDIR.TAG ] && break
        sleep 1
    done
    if [ -f target/CACHEDIR.TAG ]; then
        bash ci/perfetto-venv.sh >/dev/null
        bash ci/sql-venv.sh >/dev/null
    fi
    ;;
*)
    echo "usage: ci/prefetch.sh rustup|apt" >&2
    exit 2
    ;;
esac
