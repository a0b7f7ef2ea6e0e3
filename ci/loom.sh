#!/usr/bin/env bash
# Model-checks the ring's packet hand-over with loom (tests/loom.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg hushtrace_loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p hushtrace --test loom -- --nocapture
