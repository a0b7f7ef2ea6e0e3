"""Cost per traced Python call: hushtrace beside cProfile and VizTracer, same Python, one run.

    python bench/percall.py [--runs 5]

Run with the python of a venv that has this package and `viztracer` installed. Each workload
runs at two sizes under each tool (untraced, `python -m hushtrace run`, `python -m cProfile`,
`python -m viztracer`), interleaved, `--runs` times; the cost per call is the median over runs
of (CPU time at the large size - CPU time at the small size) / (calls added), minus the same
for the untraced program. Start-up, import and the output written at exit for the smaller
size cancel out; what remains is the per-call cost (for VizTracer and cProfile the share of
their final write that grows with the calls is included, as hushtrace's consumer thread is).
CPU time is user + system of the child and all its threads.
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

FIB = """
import sys
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
fib(int(sys.argv[1]))
"""


def fib_calls(n):
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1  # fib(n) makes 2 * F(n + 1) - 1 calls


# Three Python calls per iteration, through 3.11's specialised paths: obj[i] (__getitem__),
# a property, a method.
MIXED = """
import sys
class O:
    def __getitem__(self, i):
        return i
    @property
    def p(self):
        return 1
    def m(self, x):
        return x
o = O()
for i in range(int(sys.argv[1])):
    o[i]; o.p; o.m(i)
"""

WORKLOADS = {"fib": (FIB, 20, 25, fib_calls), "mixed": (MIXED, 20000, 200000, lambda n: 3 * n)}


def cpu(cmd, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith("HUSHTRACE_")})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{cmd} failed: {r.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(prog, size, tmp):
    py = sys.executable
    return {
        "untraced": [py, prog, str(size)],
        "hushtrace": [py, "-m", "hushtrace", "run", "-o", os.path.join(tmp, "ht"), prog,
                      str(size)],
        "cProfile": [py, "-m", "cProfile", "-o", os.path.join(tmp, "cp.prof"), prog,
                     str(size)],
        "viztracer": [py, "-m", "viztracer", "--quiet", "--tracer_entries", "5000000", "-o",
                      os.path.join(tmp, "vz.json"), prog, str(size)],
    }


def added_per_call(name, workload, commands, runs):
    """Runs `workload` (source, small and large size, calls at a size) under every command of
    `commands(prog, size, tmp)` at both sizes, `runs` times; returns the calls between the two
    sizes and each tool's CPU ns per call added over "untraced" (medians), so start-up cancels
    out."""
    src, small, large, ncalls = workload
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, f"{name}.py")
        with open(prog, "w") as f:
            f.write(src)
        calls = ncalls(large) - ncalls(small)
        per = {tool: [] for tool in commands(prog, 0, tmp)}
        for _ in range(runs):
            for tool in per:
                t = []
                for size in (small, large):
                    shutil.rmtree(os.path.join(tmp, "ht"), ignore_errors=True)
                    t.append(cpu(commands(prog, size, tmp)[tool], tmp))
                per[tool].append((t[1] - t[0]) / calls * 1e9)
        base = statistics.median(per.pop("untraced"))
        return calls, {tool: statistics.median(v) - base for tool, v in per.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    import viztracer  # noqa: F401  (fail early when it is missing)

    print(f"CPython {sys.version.split()[0]}: ns per call added by each tool "
          f"(median of {args.runs} runs)")
    print("| workload | hushtrace | cProfile | VizTracer |")
    print("|---|---|---|---|")
    for name, workload in WORKLOADS.items():
        calls, cost = added_per_call(name, workload, commands, args.runs)
        print(f"| {name} ({calls} calls) | {cost['hushtrace']:.0f} | "
              f"{cost['cProfile']:.0f} | {cost['viztracer']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
