"""A short program timed from inside: fib(24) right after the tool starts, in a fresh process.

    python bench/firstcalls.py [--runs 5]            # CPU time, medians over interleaved runs
    python bench/firstcalls.py --callgrind           # instruction counts (valgrind), one run

Run with the python of a venv that has this package and `viztracer` installed. Each run starts
one fresh interpreter per tool (untraced; `hushtrace.start(dir, functions=True)` as
`python -m hushtrace run` does; `cProfile.Profile().enable()`; `VizTracer().start()`, its
collector, never dumped) and times, inside the script, `fib(24)` three times (150,049 calls
each): the first right after the start, the third in the steady state (the second still
writes into ring pages hushtrace has not touched before). The cost of a tool is its time
minus the untraced time of the same step; besides the process's CPU time it prints the
calling thread's, the system time and the minor page faults of each step.

`--callgrind` runs each tool's child under `valgrind --tool=callgrind` three times (start
only; start + one fib(24); start + two fib(24)) and reports instruction counts of the whole
process, all threads (load-independent): first = (one - start only), steady = (two - one).
With `--keep DIR` the callgrind outputs stay in DIR for `callgrind_annotate`. `--tools
untraced,hushtrace` runs only those tools (untraced is always run; the ratios need the others).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

N = 24
CALLS = 150049  # fib(24) makes 2 * F(25) - 1 calls
TOOLS = ("untraced", "hushtrace", "cProfile", "viztracer")


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def start_tool(tool, tmp):
    if tool == "hushtrace":
        import hushtrace

        hushtrace.start(os.path.join(tmp, "ht"), functions=True)
    elif tool == "cProfile":
        import cProfile

        cProfile.Profile().enable()
    elif tool == "viztracer":
        from viztracer import VizTracer

        VizTracer(tracer_entries=5_000_000, verbose=0).start()


def child(tool, reps, tmp):
    # Import first, so that only the start and the calls follow.
    if tool == "hushtrace":
        import hushtrace  # noqa: F401
    elif tool == "viztracer":
        import viztracer  # noqa: F401
    start_tool(tool, tmp)
    out = []
    for _ in range(reps):
        r0, p0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.thread_time()
        fib(N)
        t1, p1, r1 = time.thread_time(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
        out += [p1 - p0, t1 - t0, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt]
    print(" ".join(f"{x:.9f}" for x in out), flush=True)
    os._exit(0)  # no exit-time dump: only the collector is measured


def run_child(tool, reps, tmp, prefix=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUSHTRACE_")}
    r = subprocess.run([*prefix, sys.executable, __file__, "--child", tool, "--reps",
                        str(reps), "--tmp", tmp], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{tool} failed: {r.stderr[-2000:]}")
    return [float(x) for x in r.stdout.split()]


def cpu_mode(runs, tools):
    # Per run and tool: (process CPU, calling thread CPU, process system time, minor faults)
    # of the first fib(24), then of the second and the third. "again" is the third: the
    # second still writes into ring pages never touched before (a 4 MB ring holds 262,144
    # calls at 16 bytes each), the third does not.
    times = {t: [] for t in tools}
    for _ in range(runs):
        for tool in tools:
            with tempfile.TemporaryDirectory() as tmp:
                times[tool].append(run_child(tool, 3, tmp))
    cols = {t: [statistics.median(col) for col in zip(*v)] for t, v in times.items()}
    med = {t: (c[0], c[8]) for t, c in cols.items()}
    base = med.pop("untraced")
    print(f"CPython {sys.version.split()[0]}: fib({N}) ({CALLS} calls) timed inside the "
          f"script, CPU time (process_time), median of {runs} runs")
    print(f"untraced: first {base[0] * 1e3:.2f} ms, third {base[1] * 1e3:.2f} ms")
    print("| tool | first fib(24): + ms | + ns/call | third: + ms | + ns/call |")
    print("|---|---:|---:|---:|---:|")
    add = {}
    for tool, (a, b) in med.items():
        add[tool] = (a - base[0], b - base[1])
        print(f"| {tool} | {add[tool][0] * 1e3:.2f} | {add[tool][0] / CALLS * 1e9:.0f} | "
              f"{add[tool][1] * 1e3:.2f} | {add[tool][1] / CALLS * 1e9:.0f} |")
    for other in ("viztracer", "cProfile"):
        if "hushtrace" in add and other in add:
            print(f"hushtrace / {other}: first {add['hushtrace'][0] / add[other][0]:.2f}, "
                  f"third {add['hushtrace'][1] / add[other][1]:.2f}")
    print("Where the time goes (medians; ms, faults): calling thread CPU / system time of the "
          "process / minor page faults, first -> second -> third fib(24) (system time has the kernel's tick granularity)")
    for tool, c in cols.items():
        print(f"  {tool}: thread {c[1] * 1e3:.2f} -> {c[5] * 1e3:.2f} -> {c[9] * 1e3:.2f}; "
              f"system {c[2] * 1e3:.2f} -> {c[6] * 1e3:.2f} -> {c[10] * 1e3:.2f}; "
              f"faults {c[3]:.0f} -> {c[7]:.0f} -> {c[11]:.0f}")


def callgrind_mode(keep, tools):
    if shutil.which("valgrind") is None:
        sys.exit("--callgrind needs valgrind on PATH")
    outdir = keep or tempfile.mkdtemp(prefix="firstcalls-cg-")
    os.makedirs(outdir, exist_ok=True)
    ir = {}
    for tool in tools:
        ir[tool] = []
        for reps in (0, 1, 2):
            out = os.path.join(outdir, f"{tool}.{reps}.out")
            with tempfile.TemporaryDirectory() as tmp:
                run_child(tool, reps, tmp, ["valgrind", "--tool=callgrind", "-q",
                                            f"--callgrind-out-file={out}"])
            with open(out) as f:
                total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
            ir[tool].append(total)
    print(f"CPython {sys.version.split()[0]}: fib({N}) ({CALLS} calls), instructions "
          f"(callgrind, whole process, all threads); outputs in {outdir}")
    base = ir.pop("untraced")
    b_first, b_steady = base[1] - base[0], base[2] - base[1]
    print(f"untraced: first {b_first / CALLS:.0f} Ir/call, again {b_steady / CALLS:.0f} Ir/call")
    print("| tool | start (M Ir over untraced) | first fib(24): + Ir/call | again: + Ir/call |")
    print("|---|---:|---:|---:|")
    add = {}
    for tool, (s, one, two) in ir.items():
        add[tool] = ((one - s - b_first) / CALLS, (two - one - b_steady) / CALLS)
        print(f"| {tool} | {(s - base[0]) / 1e6:.1f} | {add[tool][0]:.0f} | {add[tool][1]:.0f} |")
    for other in ("viztracer", "cProfile"):
        if "hushtrace" in add and other in add:
            print(f"hushtrace / {other}: first {add['hushtrace'][0] / add[other][0]:.2f}, "
                  f"again {add['hushtrace'][1] / add[other][1]:.2f}")
    if not keep:
        shutil.rmtree(outdir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--keep", help="with --callgrind: keep the callgrind outputs in this dir")
    ap.add_argument("--tools", default=",".join(TOOLS),
                    help="comma-separated tools to run (untraced is always run)")
    ap.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.reps, args.tmp)
    tools = ["untraced"] + [t for t in TOOLS[1:] if t in args.tools.split(",")]
    bad = set(args.tools.split(",")) - set(TOOLS)
    if bad:
        sys.exit(f"unknown tools: {', '.join(sorted(bad))} (known: {', '.join(TOOLS)})")
    if "viztracer" in tools:
        import viztracer  # noqa: F401  (fail early when it is missing)

    if args.callgrind:
        callgrind_mode(args.keep, tools)
    else:
        cpu_mode(args.runs, tools)


if __name__ == "__main__":
    main()
