#!/usr/bin/env bash
# Long stress runs, outside the CI suite (issue 9): thousands of forks while parent threads
# start and exit, and the project's fork tests, all while other processes keep both CPUs busy.
#
#   bash ci/stress.sh [FORKS]        # default 5000 forks; prints what passed
#
# Release build; takes several minutes. Exit status 0 only if every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
FORKS="${1:-5000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/stress}"

cargo build --release -p hushtrace --tests --quiet
cargo build --release -p hushtrace-testbins --bins --quiet

# Load both CPUs for the whole run.
LOADERS=()
for _ in $(seq "$(nproc)"); do
    (while :; do :; done) &
    LOADERS+=($!)
done
trap 'kill "${LOADERS[@]}" 2>/dev/null || true' EXIT

fail=0
echo "== $FORKS forks under thread churn, both CPUs loaded"
if HUSHTRACE_STRESS_FORKS="$FORKS" cargo nextest run --release -p hushtrace --test faults \
        forks_under_thread_churn_never_hang --no-capture 2>&1 | grep -E "forks under|PASS|FAIL"; then :; else fail=1; fi

echo "== fork tests x10, both CPUs loaded"
for i in $(seq 10); do
    if ! cargo nextest run --release -p hushtrace --test fork 2>&1 | grep -E "Summary"; then fail=1; fi
done

echo "== fault suite x3, both CPUs loaded"
for i in $(seq 3); do
    if ! cargo nextest run --release -p hushtrace --test faults 2>&1 | grep -E "Summary"; then fail=1; fi
done
exit $fail
