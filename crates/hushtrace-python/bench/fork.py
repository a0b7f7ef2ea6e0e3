"""The cost of os.fork() for a traced Python process with 1 M events buffered vs none: the
child's reset is O(threads), so both take the same time (the Rust fork bench's measurement,
benches/fork.rs, from Python).

    python bench/fork.py [--forks 50]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import hushtrace


def fork_times(n):
    """Median time from os.fork() to the child's first recorded event, as the child sees it
    (the child writes its monotonic time to a pipe)."""
    out = []
    for _ in range(n):
        r, w = os.pipe()
        t0 = time.monotonic_ns()
        pid = os.fork()
        if pid == 0:
            hushtrace.event("child", "first")
            os.write(w, str(time.monotonic_ns()).encode())
            os._exit(0)
        os.close(w)
        t1 = int(os.read(r, 64))
        os.close(r)
        os.waitpid(pid, 0)
        out.append(t1 - t0)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forks", type=int, default=50)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ht-fork-")
    hushtrace.start(d, subbuf_size=8 << 20, num_subbufs=4)
    fork_times(5)  # warm-up: first forks fault in the interpreter's pages
    empty = fork_times(args.forks)
    for i in range(1_000_000):
        hushtrace.event("app", "e", i=i)
    full = fork_times(args.forks)
    stats = hushtrace.stop()
    print(f"fork to first child event, median of {args.forks}: "
          f"empty ring {empty / 1e3:.0f} µs, 1 M events buffered {full / 1e3:.0f} µs "
          f"(ratio {full / empty:.2f}); discarded {stats['events_discarded']}")


if __name__ == "__main__":
    sys.exit(main())
