#!/usr/bin/env bash
# Cost of `record --kernel sched` on a context-switch-heavy program: two threads passing a
# byte back and forth through two pipes (`kernel_workload pingpong N`, each round trip in a
# span), run untraced, under `hushtrace record`, and under `hushtrace record --kernel`,
# interleaved. Needs root (tracefs). Prints one line per run; docs/BENCHMARKS.md §10 has the
# figures and how they were summarised (medians and minima per configuration).
#
#   bash crates/hushtrace-kernel/bench/pingpong.sh [ROUNDS] [N]     # default 15 50000
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
rounds="${1:-15}"
n="${2:-50000}"
cargo build --release -q -p hushtrace-cli -p hushtrace-testbins --bin hushtrace --bin kernel_workload \
    --manifest-path "$root/Cargo.toml"
h="$root/target/release/hushtrace"
w="$root/target/release/kernel_workload"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq 1 "$rounds"); do
    echo "plain  ns/round $("$w" pingpong "$n" | cut -d= -f2)"
    rm -rf "$tmp/u"
    r=$(/usr/bin/time -f "%U %S" -o "$tmp/time" "$h" record -o "$tmp/u" -- "$w" pingpong "$n" 2>/dev/null \
        | grep ns_per | cut -d= -f2)
    echo "record ns/round $r cpu_s $(cat "$tmp/time")"
    rm -rf "$tmp/k"
    r=$(/usr/bin/time -f "%U %S" -o "$tmp/time" "$h" record --kernel -o "$tmp/k" -- "$w" pingpong "$n" \
        2>"$tmp/err" | grep ns_per | cut -d= -f2)
    echo "kernel ns/round $r cpu_s $(cat "$tmp/time") $(grep -o '[0-9]* events on [0-9]* CPU stream(s)\(, [0-9]* LOST\)\?' "$tmp/err")"
done
