"""hushtrace vs VizTracer on the same machine, same Python, same run.

    python bench/run.py [--runs 5] [--out results.json]

Run with the python of a venv that has both `hushtrace` (this package) and `viztracer`
installed (`pip install viztracer`). For each program (recursive fib, tower of Hanoi, and a
generated "realistic" program: json, re, dataclasses, 3000 distinct functions), runs untraced,
under `python -m hushtrace run`, and under `viztracer` (its own command line, with a ring big
enough to keep every call), interleaved, `--runs` times; reports the median wall time each
tracer adds per traced call and the bytes each writes per call, and their ratios.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

FIB = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
fib(27)
"""

HANOI = """
def hanoi(n, a, b, c):
    if n:
        hanoi(n - 1, a, c, b)
        hanoi(n - 1, c, b, a)
hanoi(19, "a", "b", "c")
"""


def realistic(n_funcs=3000):
    lines = [
        "import dataclasses, json, re",
        "WORD = re.compile(r'[a-z]+_(\\d+)')",
        "@dataclasses.dataclass",
        "class Rec:",
        "    name: str",
        "    n: int",
        "    tags: list",
    ]
    for i in range(n_funcs):
        lines += [
            f"def f{i}(x):",
            f"    r = Rec('item_{i}', x, ['a', 'b'])",
            "    s = json.dumps(dataclasses.asdict(r))",
            "    m = WORD.match(json.loads(s)['name'])",
            f"    return int(m.group(1)) + {'f%d(x - 1)' % (i - 1) if i % 10 else '0'} if x > 0 else 0",
        ]
    lines += [
        f"FUNCS = [f{i} for i in range({n_funcs})]",
        "total = 0",
        "for rnd in range(2):",
        "    for f in FUNCS:",
        "        total += f(3)",
    ]
    return "\n".join(lines) + "\n"


def du(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    return total


CLOCK = "cpu"


def timed(cmd, env):
    """CPU time (user + system, all threads: the tracers' writer threads and final writes
    included) of the command, or its wall time with --clock wall. CPU time is the default:
    it stays meaningful on a machine shared with other work."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}")
    return ru.ru_utime + ru.ru_stime if CLOCK == "cpu" else wall


def calls_in(trace_dir):
    """Calls recorded by hushtrace: begins of py:call, from the stats files (events written)
    minus definitions, halved (one begin and one end per call); computed exactly with the
    CLI's report when available."""
    cli = os.environ.get("HUSHTRACE_CLI")
    if cli:
        r = subprocess.run([cli, "report", trace_dir], capture_output=True, text=True)
        defs = 0
        for line in r.stdout.splitlines():
            if line.startswith("py:function"):
                defs = int(line.split()[1])
        written = sum(json.load(open(os.path.join(trace_dir, f)))["written"]
                      for f in os.listdir(trace_dir) if f.endswith(".stats.json"))
        return (written - defs) // 2
    written = sum(json.load(open(os.path.join(trace_dir, f)))["written"]
                  for f in os.listdir(trace_dir) if f.endswith(".stats.json"))
    return written // 2


def one_round(name, prog, work, env):
    """Untraced, hushtrace and VizTracer times of `prog`, and the two traces' sizes."""
    base = timed([sys.executable, prog], env)
    d = os.path.join(work, f"{name}-ht")
    shutil.rmtree(d, ignore_errors=True)
    ht = timed([sys.executable, "-m", "hushtrace", "run", "-o", d, prog], env)
    ht_bytes, calls = du(d), calls_in(d)
    discarded = sum(json.load(open(os.path.join(d, f)))["discarded"]
                    for f in os.listdir(d) if f.endswith(".stats.json"))
    if discarded:
        print(f"warning: hushtrace discarded {discarded} events on {name}", file=sys.stderr)
    out = os.path.join(work, f"{name}-vz.json")
    vz = timed([sys.executable, "-m", "viztracer", "--quiet", "--tracer_entries", "5000000",
                "-o", out, prog], env)
    return base, ht, vz, ht_bytes, os.path.getsize(out), calls


def bench(name, src, runs, work):
    """Per-call figures net of each tracer's fixed cost (start-up, session set-up, final
    write of an empty trace): the same three runs of an empty program are subtracted."""
    prog = os.path.join(work, f"{name}.py")
    with open(prog, "w") as f:
        f.write(src)
    empty = os.path.join(work, "empty.py")
    with open(empty, "w") as f:
        f.write("pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUSHTRACE_")}
    base, ht, vz = [], [], []
    for r in range(runs):
        eb, eh, ev, ehb, evb, ec = one_round("empty", empty, work, env)
        b, h, v, hb, vb, calls = one_round(name, prog, work, env)
        base.append(b - eb)
        ht.append(h - eh)
        vz.append(v - ev)
        ht_bytes, vz_bytes, calls = hb - ehb, vb - evb, calls - ec
    b, h, v = statistics.median(base), statistics.median(ht), statistics.median(vz)
    res = {
        "program": name,
        "python": "%d.%d" % sys.version_info[:2],
        "calls": calls,
        "untraced_s": b,
        "hushtrace_s": h,
        "viztracer_s": v,
        "hushtrace_ns_per_call": (h - b) / calls * 1e9,
        "viztracer_ns_per_call": (v - b) / calls * 1e9,
        "hushtrace_bytes_per_call": ht_bytes / calls,
        "viztracer_bytes_per_call": vz_bytes / calls,
    }
    res["time_ratio"] = res["hushtrace_ns_per_call"] / res["viztracer_ns_per_call"]
    res["bytes_ratio"] = res["hushtrace_bytes_per_call"] / res["viztracer_bytes_per_call"]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args()
    global CLOCK
    CLOCK = args.clock
    import viztracer  # noqa: F401  (fail early when it is missing)
    work = tempfile.mkdtemp(prefix="ht-bench-")
    os.chmod(work, 0o700)
    results = [bench(n, s, args.runs, work)
               for n, s in (("fib", FIB), ("hanoi", HANOI), ("realistic", realistic()))]
    shutil.rmtree(work, ignore_errors=True)
    print(f"clock: {CLOCK}")
    print("| program | Python | calls | hushtrace ns/call | VizTracer ns/call | time ratio | "
          "hushtrace B/call | VizTracer B/call | bytes ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['program']} | {r['python']} | {r['calls']} | "
              f"{r['hushtrace_ns_per_call']:.0f} | {r['viztracer_ns_per_call']:.0f} | "
              f"{r['time_ratio']:.2f} | {r['hushtrace_bytes_per_call']:.1f} | "
              f"{r['viztracer_bytes_per_call']:.1f} | {r['bytes_ratio']:.3f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
