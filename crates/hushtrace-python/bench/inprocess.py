"""In-process cost per traced call: CPU time of fib(22) untraced, under hushtrace (function
tracing on; also with its callsites disabled: the hooks alone) and under VizTracer's
collector (its own API, without the final JSON dump). Best of 7 each.

    python bench/inprocess.py
"""

import sys
import tempfile
import time

import hushtrace
from viztracer import VizTracer


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


CALLS = 57313  # calls of fib(22)


def best():
    out = []
    for _ in range(7):
        t = time.process_time()
        fib(22)
        out.append(time.process_time() - t)
    return min(out)


def main():
    base = best()
    hushtrace.start(tempfile.mkdtemp(prefix="ht-inproc-"), functions=True)
    ht = best()
    hushtrace.disable("py:*")
    hooks = best()
    hushtrace.enable("py:*")
    hushtrace.stop()
    v = VizTracer(tracer_entries=5_000_000, verbose=0)
    v.start()
    vz = best()
    v.stop()
    per = lambda t: (t - base) / CALLS * 1e9  # noqa: E731
    print(f"CPython {sys.version.split()[0]}: untraced {base / CALLS * 1e9:.0f} ns/call; "
          f"hushtrace +{per(ht):.0f} ns/call (hooks alone +{per(hooks):.0f}); "
          f"VizTracer +{per(vz):.0f} ns/call; ratio {per(ht) / per(vz):.2f}")


if __name__ == "__main__":
    main()
