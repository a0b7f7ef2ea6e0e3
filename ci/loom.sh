#!/usr/bin/env bash
# Model-checks the ring with loom (tests/loom.rs): the packet hand-over, and the real ring code
# (src/ring.rs and src/ring/ on loom's atomics and heap memory) through its life cycle: reservation and packet
# switches against a draining consumer, the overwrite-mode finish, a session stop's detach and
# quiescence, thread exit with recycling and re-attachment, the flush's read of the open packet
# and the snapshot of a live ring (both through the ring header page's words).
# LOOM_MAX_PREEMPTIONS=<n> bounds every model (default: exhaustive, except the three-thread
# one, bounded at 3, and the flush and snapshot ones, at 2). About 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg hushtrace_loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p hushtrace --test loom -- --nocapture
