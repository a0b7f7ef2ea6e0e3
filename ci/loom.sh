#!/usr/bin/env bash
# Model-checks the ring with loom (tests/loom.rs): the packet hand-over, and the real ring code
# (src/ring.rs on loom's atomics and heap memory) through its life cycle: reservation and packet
# switches against a draining consumer, the overwrite-mode finish, a session stop's detach and
# quiescence, thread exit with recycling and re-attachment. LOOM_MAX_PREEMPTIONS=<n> bounds
# every model (default: exhaustive, except the three-thread one, bounded at 3).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg hushtrace_loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p hushtrace --test loom -- --nocapture
