"""Whole-program function tracing: `python -m hushtrace run`, read back through the CLI's
converters and babeltrace2."""

import collections
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (ROOT, babeltrace_clean, calls, check_balanced, chrome, clean_env, cli,
                      last_json, perfetto_python, run_traced, write_script)

COUNTED = """
import collections, json, os, sys, threading
COUNT = collections.Counter()

def fib(n):
    COUNT["fib"] += 1
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def hanoi(n, a, b, c):
    COUNT["hanoi"] += 1
    if n:
        hanoi(n - 1, a, c, b)
        hanoi(n - 1, c, b, a)

class Shape:
    def area(self):
        COUNT["Shape.area"] += 1
        return 1

def deep(n):
    COUNT["deep"] += 1
    if n == 0:
        raise ValueError("bottom")
    deep(n - 1)

def main():
    fib(15)
    hanoi(8, "a", "b", "c")
    [Shape().area() for _ in range(100)]
    for _ in range(10):
        try:
            deep(5)
        except ValueError:
            pass
    t = threading.Thread(target=fib, args=(10,))
    t.start(); t.join()
    print(json.dumps(COUNT))

main()
"""


def test_calls_per_function_equal_the_programs_own_count(tmp_path):
    trace, out = run_traced(tmp_path, COUNTED)
    counted = last_json(out)
    events = chrome(trace, tmp_path)
    check_balanced(events)
    for name in ("fib", "hanoi", "Shape.area", "deep"):
        # Before 3.11 code objects have no qualified name: methods are named co_name.
        shown = name if sys.version_info >= (3, 11) else name.split(".")[-1]
        got = sum(calls(events, shown, cat="__main__").values())
        assert got == counted[name], (name, got, counted[name])
    # fib ran on two threads: the main thread and the one started later.
    assert len(calls(events, "fib")) == 2


def test_exceptions_unwinding_close_their_spans(tmp_path):
    trace, out = run_traced(tmp_path, COUNTED)
    events = chrome(trace, tmp_path)
    slices = check_balanced(events)
    deep = [s for s in slices if s[3] == "deep"]
    assert len(deep) == last_json(out)["deep"] == 60
    # The innermost frames end before their callers: each unwinding frame is its own slice.
    assert all(s[4] <= s[5] for s in deep)


def test_babeltrace_reads_without_warning(tmp_path):
    trace, _ = run_traced(tmp_path, COUNTED)
    assert babeltrace_clean(trace) > 1000


def test_perfetto_output_is_balanced_and_named(tmp_path):
    trace, out = run_traced(tmp_path, COUNTED)
    counted = last_json(out)
    pf = tmp_path / "trace.perfetto-trace"
    r = subprocess.run([cli(), "convert", "--to", "perfetto", "-o", str(pf), str(trace)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    py = perfetto_python()
    r = subprocess.run([py, str(Path(__file__).parent / "perfetto_balance.py"), str(pf)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = json.loads(r.stdout)["names"]
    assert names["fib"] == counted["fib"]
    assert names["hanoi"] == counted["hanoi"]
    # Perfetto's model of the trace equals the Chrome JSON's (the CLI's own cross-check).
    js = tmp_path / "trace.json"
    chrome(trace, tmp_path)
    check = ROOT / "crates" / "hushtrace-cli" / "tests" / "perfetto_check.py"
    r = subprocess.run([py, str(check), str(pf), str(js)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_report_and_flamegraph_name_functions(tmp_path):
    trace, _ = run_traced(tmp_path, COUNTED)
    r = subprocess.run([cli(), "report", str(trace)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "__main__:fib" in r.stdout and "py:call" not in r.stdout
    assert "py:function" not in r.stdout, r.stdout  # definitions are not events
    svg = tmp_path / "flame.svg"
    r = subprocess.run([cli(), "flamegraph", "-o", str(svg), str(trace)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "__main__:hanoi" in svg.read_text()


GENERATORS = """
import json
RESUMES = 0

def numbers(n):
    for i in range(n):
        yield i

def consume():
    global RESUMES
    g = numbers(5)
    for x in g:
        RESUMES += 1
        spin()
    RESUMES += 1  # the resume that ends the generator

def spin():
    return sum(range(1000))

consume()
print(json.dumps({"resumes": RESUMES}))
"""


def test_a_suspended_generator_is_not_one_long_slice(tmp_path):
    trace, out = run_traced(tmp_path, GENERATORS)
    events = chrome(trace, tmp_path)
    slices = check_balanced(events)
    gen = [s for s in slices if s[3] == "numbers"]
    assert len(gen) == last_json(out)["resumes"] == 6
    spins = [s for s in slices if s[3] == "spin"]
    # spin() runs while the generator is suspended: no generator slice covers it.
    for s in spins:
        assert not any(g[4] <= s[4] and s[5] <= g[5] for g in gen)


ASYNC = """
import asyncio, json

async def leaf(i):
    await asyncio.sleep(0.01)
    return i

async def worker(i):
    return await leaf(i) + await leaf(i)

async def main():
    return await asyncio.gather(*(worker(i) for i in range(4)))

asyncio.run(main())
print(json.dumps({"tasks": 4}))
"""


def test_coroutines_and_asyncio_tasks(tmp_path):
    trace, _ = run_traced(tmp_path, ASYNC)
    events = chrome(trace, tmp_path)
    slices = check_balanced(events)
    tasks = [e for e in events if e.get("ph") == "b" and e["name"] == "worker"]
    assert len(tasks) == 4, tasks
    ends = [e for e in events if e.get("ph") == "e" and e["name"] == "worker"]
    assert len(ends) == 4
    # Each leaf awaits a sleep: it is two slices (start..await, resume..return), none of
    # which spans the 10 ms sleep.
    leaf = [s for s in slices if s[3] == "leaf"]
    assert len(leaf) == 16, len(leaf)
    assert all(s[5] - s[4] < 5000 for s in leaf), leaf  # µs


def test_threads_started_before_tracing_are_traced(tmp_path):
    text = """
    import hushtrace, json, sys, threading
    go, done = threading.Event(), threading.Event()
    seen = {}
    def work():
        return 1
    def body():
        go.wait()
        for _ in range(50):
            work()
        seen["tid"] = threading.get_native_id()
        done.set()
    t = threading.Thread(target=body); t.start()
    hushtrace.start(sys.argv[1], functions=True)
    go.set(); done.wait(); t.join()
    hushtrace.stop()
    print(json.dumps(seen))
    """
    script = write_script(tmp_path, text)
    out = tmp_path / "trace"
    r = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    events = chrome(out, tmp_path)
    check_balanced(events)
    c = calls(events, "work")
    assert list(c.values()) == [50], c
    assert list(c)[0][1] == last_json(r.stdout)["tid"]


def test_hooks_read_co_extra_directly(tmp_path):
    # The hooks find a code object's function by reading its co_extra field, at an offset
    # probed when function tracing is prepared; the API call is only the fallback for an
    # interpreter where the probe fails, and a supported CPython is not one.
    text = """
    import hushtrace, json, sys
    from hushtrace import _hushtrace
    before = _hushtrace._code_extra_direct()
    hushtrace.start(sys.argv[1], functions=True)
    def f():
        return 1
    f()
    hushtrace.stop()
    print(json.dumps({"before": before, "after": _hushtrace._code_extra_direct()}))
    """
    script = write_script(tmp_path, text)
    out = tmp_path / "trace"
    r = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"before": False, "after": True}
    assert sum(calls(chrome(out, tmp_path), "f").values()) == 1


def test_include_exclude_and_max_depth(tmp_path):
    trace, out = run_traced(tmp_path, COUNTED, run_args=["--exclude", "*.hanoi"])
    events = chrome(trace, tmp_path)
    assert not calls(events, "hanoi") and calls(events, "fib")
    trace2 = tmp_path / "t2"
    trace.rename(trace2)
    trace, out = run_traced(tmp_path, COUNTED, run_args=["--include", "__main__"])
    events = chrome(trace, tmp_path)
    check_balanced(events)
    assert {e["cat"] for e in events if e.get("ph") == "B"} == {"__main__"}
    (tmp_path / "t3").mkdir()
    trace.rename(tmp_path / "t3" / "x")
    trace, out = run_traced(tmp_path, COUNTED, run_args=["--include", "__main__",
                                                          "--max-stack-depth", "3"])
    events = chrome(trace, tmp_path)
    slices = check_balanced(events)
    depth = collections.Counter()
    maxd = 0
    for e in events:
        if e.get("ph") == "B":
            depth[e["tid"]] += 1
            maxd = max(maxd, depth[e["tid"]])
        elif e.get("ph") == "E":
            depth[e["tid"]] -= 1
    assert maxd == 3 and slices


def test_c_calls(tmp_path):
    text = """
    def f():
        return len([1, 2, 3]) + sum(range(3))
    for _ in range(7):
        f()
    """
    trace, _ = run_traced(tmp_path, text, run_args=["--c-calls"])
    events = chrome(trace, tmp_path)
    check_balanced(events)
    assert sum(calls(events, "len").values()) >= 7
    assert sum(calls(events, "f").values()) == 7


def test_module_mode_and_exit_code(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("import sys\ndef f():\n    return 3\nf()\nsys.exit(f())\n")
    out = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(out), "-m",
                        "pkg.mod"], capture_output=True, text=True, env=clean_env(),
                       cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    events = chrome(out, tmp_path)
    assert sum(calls(events, "f", cat="__main__").values()) == 2


def test_record_traces_an_unchanged_program(tmp_path):
    script = write_script(tmp_path, COUNTED)
    out = tmp_path / "trace"
    r = subprocess.run([cli(), "record", "-o", str(out), "--", sys.executable, str(script)],
                       capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0, r.stderr
    counted = last_json(r.stdout)
    events = chrome(out, tmp_path)
    check_balanced(events)
    assert sum(calls(events, "fib", cat="__main__").values()) == counted["fib"]


def test_bad_usage_is_a_clear_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(tmp_path / "t"),
                        str(tmp_path / "missing.py")], capture_output=True, text=True,
                       env=clean_env())
    assert r.returncode == 2 and "no such script" in r.stderr


FLIGHT = """
import hushtrace, json, os, sys

def f():
    return 1

def g(i):
    return i

out, mode = sys.argv[1], sys.argv[2]
# 64 KB rings: the dump (a few dozen functions: the stdlib's too, e.g. the warning that
# 3.12+ prints at fork) fits; the 50,000 calls (16 bytes each) wrap them about 12 times.
rings = {"subbuf_size": 16384, "num_subbufs": 4} if mode == "overwrite" else {}
hushtrace.start(out, mode=mode, functions=True, **rings)
f()  # defined here, long before the end: the ring overwrites it many times over
for i in range(50000):
    g(i)
pid = os.fork()
if pid == 0:
    # The child describes functions again in its own trace, lazily, then overwrites them.
    for i in range(50000):
        g(i)
    f()
    os._exit(0)  # the package's wrapper stops the session (its final rings)
os.waitpid(pid, 0)
f()
snap = hushtrace.snapshot() if mode == "overwrite" else None
stats = hushtrace.stop()
print(json.dumps({"snapshot": snap, "trace_dir": stats["trace_dir"], "child": pid}))
"""


def py_events(trace_dir):
    """babeltrace2's reading of one process trace: ({id: [qualname of each py:function]},
    {id: number of py:call begins and ends})."""
    bt = shutil.which("babeltrace2")
    if bt is None:
        pytest.skip("babeltrace2 not installed (apt-get install babeltrace2)")
    r = subprocess.run([bt, str(trace_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    defs, used = collections.defaultdict(list), collections.Counter()
    for line in r.stdout.splitlines():
        m = re.search(r"\bf = (\d+)", line)
        if " py:function:" in line:
            defs[int(m.group(1))].append(re.search(r'qualname = "([^"]*)"', line).group(1))
        elif " py:call" in line and m:
            used[int(m.group(1))] += 1
    return defs, used


def run_flight(tmp_path, mode):
    """Runs FLIGHT in `mode`: (the session directory, the JSON it printed)."""
    out = tmp_path / "trace"
    script = write_script(tmp_path, FLIGHT)
    r = subprocess.run([sys.executable, str(script), str(out), mode], capture_output=True,
                       text=True, env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return out, last_json(r.stdout)


def test_overwrite_mode_snapshot_and_final_trace_define_every_function(tmp_path):
    # A flight recorder overwrites the py:function events recorded long ago; snapshot() and
    # stop() (here also the child's os._exit) record them all again first, so every py:call
    # id left in the snapshot and in the final traces has its definition in that trace.
    out, res = run_flight(tmp_path, "overwrite")
    traces = {"snapshot": res["snapshot"], "final": res["trace_dir"],
              "child": str(out / str(res["child"]))}
    for what, d in traces.items():
        defs, used = py_events(d)
        assert 0 < sum(used.values()) < 50000, f"{what}: the ring did not wrap: {used}"
        undefined = sorted(set(used) - set(defs))
        assert not undefined, f"{what} ({d}): py:call ids without a py:function: {undefined}"
        names = {q for qs in defs.values() for q in qs}
        assert {"f", "g"} <= names, (what, names)
    # The CLI names the calls recorded before their (dumped) definition too: it reads every
    # definition first.
    for d in (res["snapshot"], str(out)):
        r = subprocess.run([cli(), "report", d], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "__main__:g" in r.stdout and "py:call" not in r.stdout, (d, r.stdout)
        assert "py:function" not in r.stdout, (d, r.stdout)


def test_discard_mode_defines_each_function_once(tmp_path):
    out, res = run_flight(tmp_path, "discard")
    for d in (res["trace_dir"], str(out / str(res["child"]))):
        defs, used = py_events(d)
        by_name = {qs[0]: len(qs) for qs in defs.values()}
        assert by_name.get("f") == 1 and by_name.get("g") == 1, (d, dict(defs))
        assert all(len(qs) == 1 for qs in defs.values()), dict(defs)
