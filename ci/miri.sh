#!/usr/bin/env bash
# Runs the unit tests of the unsafe code under Miri (nightly): the ring (mmap'ed packets,
# unaligned header stores, the hand-over), the spin lock, the signal-safe local counters, the
# platform layer and the clock of crates/hushtrace, the field encoding of hushtrace-core and
# the uninitialised capture scratch of the tracing bridge (hushtrace-tracing) and the C
# interface's field values read through raw pointers (hushtrace-capi).
#
# Under `cfg(miri)` the platform layer swaps in std-only fallbacks (platform/fallback.rs,
# platform/generic.rs and platform/local_atomic.rs): rings come from the global allocator (zeroed, page-aligned), no
# madvise/mlock/membarrier, relaxed atomics instead of the non-locked inline asm, an atomic
# counter instead of rdtsc. Miri runs with its default isolation and strict provenance.
# Its own target dir, so it never blocks other builds. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/miri}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "== installing miri"
    rustup component add --toolchain nightly miri rust-src
fi
cargo +nightly miri setup

echo "== miri: hushtrace ring, lock, local, platform, clock unit tests"
cargo +nightly miri test -p hushtrace --lib -- ring:: lock:: local:: platform:: clock::
echo "== miri: hushtrace-core field encoding tests"
cargo +nightly miri test -p hushtrace-core --lib -- field::
echo "== miri: hushtrace-tracing capture (uninitialised scratch)"
cargo +nightly miri test -p hushtrace-tracing --lib -- capture::
echo "== miri: hushtrace-capi C field values read through raw pointers"
cargo +nightly miri test -p hushtrace-capi --lib -- value::
