#!/bin/sh
# Benchmark, one run: the same event (two 32-bit ints), written to disk, recorded by
#   1. the hushtrace C tracepoint HT_EVENT (libhushtrace.so, and libhushtrace.a),
#   2. LTTng-UST 2.13's lttng_ust_tracepoint (a session with one channel and the event enabled),
#   3. the Rust hushtrace::event! macro.
# Prints the ns per event (min and median over rounds) and the ratios as a Markdown table.
#
# Needs: apt-get install -y lttng-tools liblttng-ust-dev babeltrace2; root or the tracing group.
# Usage: sh crates/hushtrace-c/bench/run.sh [events_per_round] [rounds] [repetitions]
# (defaults 200000 21 3: a round fits in the default ring, so no tracer discards)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
n=${1:-200000}
rounds=${2:-21}
repeats=${3:-3}
target=${CARGO_TARGET_DIR:-$root/target}
work=$(mktemp -d /tmp/hushtrace-c-bench.XXXXXX)
chmod 700 "$work"
session=htbench-$$

cleanup() {
    lttng destroy "$session" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && cargo build --release --quiet -p hushtrace-c --lib --example bench_rust_event)
lib=$target/release
CC=${CC:-cc}
$CC -std=c99 -O2 -I"$root/crates/hushtrace-c/include" "$here/bench.c" -o "$work/bench_ht" \
    -L"$lib" -lhushtrace -Wl,-rpath,"$lib"
$CC -std=c99 -O2 -I"$root/crates/hushtrace-c/include" "$here/bench.c" -o "$work/bench_ht_static" \
    "$lib/libhushtrace.a" -lgcc_s -lutil -lrt -lpthread -lm -ldl
$CC -std=c99 -O2 -DWITH_LTTNG -I"$here" -I"$root/crates/hushtrace-c/include" \
    "$here/bench.c" "$here/htbench_tp.c" -o "$work/bench_lttng" \
    -L"$lib" -lhushtrace -Wl,-rpath,"$lib" -llttng-ust -ldl

# LTTng: a session daemon, a session writing to disk, one channel, the event enabled.
if ! pgrep -x lttng-sessiond >/dev/null 2>&1; then
    lttng-sessiond --daemonize --no-kernel
    sleep 1
fi
lttng create "$session" --output="$work/lttng" >/dev/null
lttng enable-channel -u ch --subbuf-size=512K --num-subbuf=8 >/dev/null
lttng enable-event -u -c ch 'htbench:ints' >/dev/null
lttng start >/dev/null

# Interleaved: each tracer's process runs once per repetition, one after the other, so all
# see the same machine state; each tracer's best repetition (lowest median) is reported.
: > "$work/results"
i=0
while [ "$i" -lt "$repeats" ]; do
    for d in c cs rust; do rm -rf "$work/$d"; mkdir -m 700 "$work/$d"; done
    "$work/bench_ht" ht "$work/c" "$n" "$rounds" | sed 's/^ht/c/' >> "$work/results"
    "$work/bench_ht_static" ht "$work/cs" "$n" "$rounds" | sed 's/^ht/cs/' >> "$work/results"
    "$work/bench_lttng" lttng - "$n" "$rounds" >> "$work/results"
    "$target/release/examples/bench_rust_event" "$work/rust" "$n" "$rounds" >> "$work/results"
    i=$((i + 1))
done
best() { grep "^$1 " "$work/results" | sort -k3 -g | head -n 1; }
c=$(best c); cs=$(best cs); l=$(best lttng); r=$(best rust)
lttng stop >/dev/null
lttng_discarded=$(babeltrace2 "$work/lttng" 2>&1 >/dev/null | grep -o 'discarded [0-9]* events\|[0-9]* discarded events' | grep -o '[0-9]*' | paste -sd+ - | bc 2>/dev/null || true)
lttng_events=$(babeltrace2 "$work/lttng" 2>/dev/null | wc -l)
lttng destroy "$session" >/dev/null

cat "$work/results"
echo "lttng: $lttng_events events read back, ${lttng_discarded:-0} discarded"
echo
awk -v c="$c" -v cs="$cs" -v l="$l" -v r="$r" -v n="$n" -v rounds="$rounds" -v rep="$repeats" 'BEGIN {
    split(c, C, " "); split(cs, S, " "); split(l, L, " "); split(r, R, " ");
    printf "%d events x %d rounds per process, best of %d interleaved processes per tracer, one thread, written to disk\n\n", n, rounds, rep;
    print "| tracepoint (ns/event) | min | median | LTTng-UST / this (median) | this / Rust `event!` (median) |";
    print "|---|---:|---:|---:|---:|";
    printf "| C `HT_EVENT`, libhushtrace.so | %.2f | %.2f | **%.2f** | **%.2f** |\n", C[2], C[3], L[3]/C[3], C[3]/R[3];
    printf "| C `HT_EVENT`, libhushtrace.a | %.2f | %.2f | %.2f | %.2f |\n", S[2], S[3], L[3]/S[3], S[3]/R[3];
    printf "| LTTng-UST 2.13 `lttng_ust_tracepoint` | %.2f | %.2f | 1.00 | %.2f |\n", L[2], L[3], L[3]/R[3];
    printf "| Rust `event!` | %.2f | %.2f | %.2f | 1.00 |\n", R[2], R[3], L[3]/R[3];
}'
