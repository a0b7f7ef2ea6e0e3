"""Cost of `--exceptions` (issue 32.2): ns per traced Python call with and without it, on a
raise-free workload and on one where every other call raises (caught one level up).

    python bench/exceptions.py [--runs 5]
    python bench/exceptions.py --inprocess 20   # best of 20 runs in one process per mode

Run with the python of a venv that has this package. Same method as `percall.py`: each
workload runs at two sizes, interleaved, `--runs` times; the cost per call is the median over
runs of (CPU time at the large size - at the small size) / (calls added), minus the same for
the untraced program (CPU time: user + system of the child and all its threads).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from percall import FIB, added_per_call, fib_calls

# Two Python calls per iteration, the inner one unwound by a ValueError caught by the outer.
RAISES = """
import sys
def inner(i):
    raise ValueError("bad item")
def outer(i):
    try:
        inner(i)
    except ValueError:
        pass
for i in range(int(sys.argv[1])):
    outer(i)
"""

WORKLOADS = {
    "raise-free (fib)": (FIB, 20, 25, fib_calls),
    "raise-heavy (1 raise per 2 calls)": (RAISES, 20000, 200000, lambda n: 2 * n),
}


INPROC = r"""
import sys, time
mode, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = open(sys.argv[4]).read().replace("int(sys.argv[1])", "N")
code = compile(src, "prog.py", "exec")
if mode != "untraced":
    import hushtrace
    hushtrace.start(sys.argv[5], functions=True, exceptions=(mode == "--exceptions"))
best = float("inf")
for _ in range(reps):
    t = time.process_time_ns()
    exec(code, {"N": n, "__name__": "prog"})
    best = min(best, time.process_time_ns() - t)
if mode != "untraced":
    hushtrace.stop()
print(best)
"""


def inprocess(src, n, calls, reps, tmp):
    """ns per call, in one process per mode: the best of `reps` runs of the workload (CPU time
    of the process, the consumer thread included), minus untraced's best."""
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write(src)
    best = {}
    for mode in ("untraced", "--no-exceptions", "--exceptions"):
        out = os.path.join(tmp, "ht")
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([sys.executable, "-c", INPROC, mode, str(n), str(reps), prog, out],
                           capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items()
                                if not k.startswith("HUSHTRACE_")})
        if r.returncode != 0:
            sys.exit(r.stderr[-2000:])
        best[mode] = int(r.stdout.split()[-1]) / calls
    return {m: best[m] - best["untraced"] for m in ("--no-exceptions", "--exceptions")}


def commands(prog, size, tmp):
    py = sys.executable
    out = os.path.join(tmp, "ht")
    return {
        "untraced": [py, prog, str(size)],
        "--no-exceptions": [py, "-m", "hushtrace", "run", "--no-exceptions", "-o", out, prog,
                            str(size)],
        "--exceptions": [py, "-m", "hushtrace", "run", "--exceptions", "-o", out, prog,
                         str(size)],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--inprocess", type=int, metavar="REPS",
                    help="instead: one process per mode, the best of REPS runs of the large "
                         "size (robust on a loaded machine)")
    args = ap.parse_args()
    if args.inprocess:
        print(f"CPython {sys.version.split()[0]}: ns per call added, in-process, best of "
              f"{args.inprocess}")
        print("| workload | --no-exceptions | --exceptions |")
        print("|---|---|---|")
        for name, (src, _, large, ncalls) in WORKLOADS.items():
            with tempfile.TemporaryDirectory() as tmp:
                c = inprocess(src, large, ncalls(large), args.inprocess, tmp)
            print(f"| {name} ({ncalls(large)} calls) | {c['--no-exceptions']:.0f} | "
                  f"{c['--exceptions']:.0f} |", flush=True)
        return
    print(f"CPython {sys.version.split()[0]}: ns per call added (median of {args.runs} runs)")
    print("| workload | --no-exceptions | --exceptions |")
    print("|---|---|---|")
    for name, workload in WORKLOADS.items():
        calls, cost = added_per_call(name, workload, commands, args.runs)
        print(f"| {name} ({calls} calls) | {cost['--no-exceptions']:.0f} | "
              f"{cost['--exceptions']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
