#!/bin/sh
# Benchmark, one run: the same event (two 32-bit ints), written to disk, recorded by
#   1. the hushtrace C tracepoint HT_EVENT, built as users build it: installed with install.sh
#      into a temporary prefix and compiled with `pkg-config --cflags --libs hushtrace`
#      (libhushtrace.so), and with libhushtrace.a and `pkg-config --static --libs`,
#   2. LTTng-UST 2.13's lttng_ust_tracepoint (a session with one channel and the event enabled),
#   3. the Rust hushtrace::event! macro.
# Prints the ns per event (fastest and median round) and the ratios of both as a Markdown table,
# with the load average before and after (the ratios are only meaningful within one run).
# The libraries and the Rust example are built with the release profile (cargo build --release,
# into $CARGO_TARGET_DIR when set): the same settings for the C and the Rust side.
#
# Needs: apt-get install -y lttng-tools liblttng-ust-dev babeltrace2 pkg-config; root or the
# tracing group.
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

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
(cd "$root" && cargo build --release --quiet -p hushtrace-c --lib --example bench_rust_event)
lib=$target/release
CC=${CC:-cc}
# The documented way: install, then pkg-config.
sh "$here/../install.sh" --prefix "$work/prefix" --lib-dir "$lib" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cflags=$(pkg-config --cflags hushtrace)
libs=$(pkg-config --libs hushtrace)
static_libs=$(pkg-config --static --libs hushtrace | sed 's/-lhushtrace//')
# shellcheck disable=SC2086 # word splitting of the pkg-config output is intended
$CC -std=c99 -O2 "$here/bench.c" -o "$work/bench_ht" $cflags $libs \
    -Wl,-rpath,"$work/prefix/lib"
# shellcheck disable=SC2086
$CC -std=c99 -O2 "$here/bench.c" -o "$work/bench_ht_static" $cflags \
    "$work/prefix/lib/libhushtrace.a" $static_libs
# shellcheck disable=SC2086
$CC -std=c99 -O2 -DWITH_LTTNG -I"$here" "$here/bench.c" "$here/htbench_tp.c" \
    -o "$work/bench_lttng" $cflags $libs -Wl,-rpath,"$work/prefix/lib" -llttng-ust -ldl

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

load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cat "$work/results"
echo "lttng: $lttng_events events read back, ${lttng_discarded:-0} discarded"
echo "load average: $load_before before, $load_after after ($(nproc) CPUs)"
echo
awk -v c="$c" -v cs="$cs" -v l="$l" -v r="$r" -v n="$n" -v rounds="$rounds" -v rep="$repeats" 'BEGIN {
    split(c, C, " "); split(cs, S, " "); split(l, L, " "); split(r, R, " ");
    printf "%d events x %d rounds per process, best of %d interleaved processes per tracer (lowest median), one thread, written to disk\n\n", n, rounds, rep;
    print "| tracepoint (ns/event) | fastest round | median round | LTTng-UST / this (fastest, median) | this / Rust `event!` (fastest, median) |";
    print "|---|---:|---:|---:|---:|";
    row("C `HT_EVENT`, `libhushtrace.so` (pkg-config)", C);
    row("C `HT_EVENT`, `libhushtrace.a`", S);
    row("LTTng-UST 2.13 `lttng_ust_tracepoint`", L);
    row("Rust `event!`", R);
}
function row(name, X) {
    printf "| %s | %.2f | %.2f | %.2f, %.2f | %.2f, %.2f |\n", name, X[2], X[3], L[2]/X[2], L[3]/X[3], X[2]/R[2], X[3]/R[3];
}'
