"""A program behaves the same traced as untraced: deep recursion, other profilers, tracers and
coverage tools started before or after hushtrace, exceptions and every way of exiting."""

import json
import re
import signal
import subprocess
import sys

import pytest

from conftest import calls, check_balanced, chrome, clean_env, cli, write_script

MONITORING = sys.version_info >= (3, 12)


def run(cmd, tmp_path, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env or clean_env(),
                          cwd=tmp_path, timeout=600)


def without_hushtrace_lines(text):
    """Output with the tracer's own summary (`hushtrace: N events written ...`; `record`'s
    `trace: DIR` and per-process lines) taken out."""
    text = re.sub(r"trace: \S+\n", "", text)
    text = re.sub(r" *process \d+ \([^)]*\): [^\n]*events written[^\n]*\n", "", text)
    return re.sub(r"hushtrace: [^\n]*(\n|$)", "", text)


# ---- deep recursion ----

RECURSION = """
import sys
sys.setrecursionlimit(70000)

def down(n):
    return 0 if n == 0 else 1 + down(n - 1)

print(down(60000))
"""


def test_deep_recursion_runs_traced_as_untraced(tmp_path):
    script = write_script(tmp_path, RECURSION)
    plain = run([sys.executable, str(script)], tmp_path)
    traced = run([sys.executable, "-m", "hushtrace", "run", "-o", str(tmp_path / "trace"),
                  str(script)], tmp_path)
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout), (
        plain.returncode, traced.returncode, traced.stderr[-2000:])
    if plain.returncode == 0:
        assert plain.stdout.strip() == "60000"
        events = chrome(tmp_path / "trace", tmp_path)
        check_balanced(events)
        assert sum(calls(events, "down").values()) == 60001


# ---- other tools beside hushtrace ----

# Runs `work()` under one other tool, with hushtrace started before the tool ("before"),
# after it ("after"), or not at all; prints what the tool saw (JSON) and what hushtrace should have recorded.
TOOLS = r"""
import collections, json, os, sys, warnings
warnings.simplefilter("always")
tool, order, out = sys.argv[1], sys.argv[2], sys.argv[3]

def leaf(i):
    return i * 2

def work():
    t = 0
    for i in range(500):
        t += leaf(i)
    return t

seen = collections.Counter()

def counting(frame, event, arg):
    if frame.f_code.co_name in ("leaf", "work"):
        seen[frame.f_code.co_name + ":" + event] += 1
    return counting if tool == "settrace" else None

def make():
    if tool in ("cProfile", "profile"):
        import cProfile, profile
        global p
        p = (cProfile if tool == "cProfile" else profile).Profile()
        def result():
            p.create_stats()
            return {f"{k[2]}": v[1] for k, v in p.stats.items() if k[2] in ("leaf", "work")}
        # profile.Profile is set from this frame (see below): the frame that sets it must
        # not return while it is active.
        return p.enable if tool == "cProfile" else None, \
            p.disable if tool == "cProfile" else None, result
    if tool.startswith("coverage"):
        import coverage
        cov = coverage.Coverage(data_file=None, branch=True)
        def result():
            data = cov.get_data()
            return {"lines": sorted(data.lines(__file__)), "arcs": sorted(data.arcs(__file__))}
        return cov.start, cov.stop, result
    if tool == "setprofile":
        def on():
            sys.setprofile(counting)
            assert sys.getprofile() is counting, sys.getprofile()
        def off():
            sys.setprofile(None)
            assert sys.getprofile() is None, sys.getprofile()
        return on, off, lambda: dict(seen)
    if tool == "settrace":
        return (lambda: sys.settrace(counting)), (lambda: sys.settrace(None)), \
            (lambda: dict(seen))
    if tool.startswith("monitoring"):
        mon = sys.monitoring
        tid = None
        def on():
            nonlocal tid
            # A tool of its own takes the first free id of 3-5, as hushtrace does.
            tid = mon.PROFILER_ID if tool == "monitoring-profiler" else \
                next(t for t in (3, 4, 5) if mon.get_tool(t) is None)
            mon.use_tool_id(tid, "other")
            mon.register_callback(tid, mon.events.PY_START, lambda code, off:
                                  seen.update([code.co_name]))
            mon.set_events(tid, mon.events.PY_START)
        def off():
            mon.set_events(tid, 0)
            mon.free_tool_id(tid)
        return on, off, lambda: {k: seen[k] for k in ("leaf", "work")}
    raise SystemExit(f"unknown tool {tool}")

start, stop, result = make()
if order != "none":
    import hushtrace
if order == "before":
    hushtrace.start(out, functions=True)
if start is None:
    sys.setprofile(p.dispatcher)
else:
    start()
if order == "after":
    hushtrace.start(out, functions=True)
work()
if order == "after":
    hushtrace.stop()
if stop is None:
    sys.setprofile(None)
else:
    stop()
if order == "before":
    hushtrace.stop()
print(json.dumps(result(), sort_keys=True))
"""

TOOL_NAMES = ["cProfile", "profile", "coverage", "setprofile", "settrace"]
if MONITORING:
    TOOL_NAMES += ["coverage-sysmon", "monitoring-profiler", "monitoring-free"]


def run_tool(tmp_path, tool, order):
    script = write_script(tmp_path, TOOLS, name="tools.py")
    env = clean_env()
    if tool == "coverage-sysmon":
        env["COVERAGE_CORE"] = "sysmon"
    return run([sys.executable, str(script), tool, order, str(tmp_path / f"trace-{order}")],
               tmp_path, env)


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_other_tools_keep_working(tmp_path, tool, order):
    if tool == "coverage":
        pytest.importorskip("coverage")  # installed by ci/python.sh
    untraced = run_tool(tmp_path, tool, "none")
    assert untraced.returncode == 0, untraced.stderr
    traced = run_tool(tmp_path, tool, order)
    assert traced.returncode == 0, traced.stderr
    # The other tool saw exactly what it sees without hushtrace.
    assert json.loads(traced.stdout) == json.loads(untraced.stdout)
    # hushtrace saw every call too (below 3.12 a profiler found in the slot, or set later,
    # is chained behind the hook).
    events = chrome(tmp_path / f"trace-{order}", tmp_path)
    check_balanced(events)
    n = sum(calls(events, "leaf", cat="__main__").values())
    assert n == 500, (n, traced.stderr)
    assert "took over" not in traced.stderr


TAKEOVER = r"""
import cProfile, json, sys
def leaf(i):
    return i
def tracer(frame, event, arg):
    return None
if sys.argv[1] != "none":
    import hushtrace
    hushtrace.start(sys.argv[1], functions=True)
sys.settrace(tracer)  # the trace slot is taken: hushtrace cannot take the profile slot back
p = cProfile.Profile()
p.enable()
for i in range(100):
    leaf(i)
p.disable()
sys.settrace(None)
if sys.argv[1] != "none":
    hushtrace.stop()
p.create_stats()
print(json.dumps({k[2]: v[1] for k, v in p.stats.items() if k[2] == "leaf"}))
"""


def test_cprofile_taking_the_thread_over_is_warned_about(tmp_path):
    if MONITORING:
        pytest.skip("one profile slot per thread below 3.12 only")
    script = write_script(tmp_path, TAKEOVER, name="takeover.py")
    untraced = run([sys.executable, str(script), "none"], tmp_path)
    traced = run([sys.executable, str(script), str(tmp_path / "t")], tmp_path)
    assert untraced.returncode == traced.returncode == 0, traced.stderr
    assert json.loads(traced.stdout) == json.loads(untraced.stdout) == {"leaf": 100}
    assert "another profiler took over the profile hook of 1 thread" in traced.stderr, \
        traced.stderr


THREAD_PROFILE = r"""
import collections, json, sys, threading
seen = collections.Counter()

def counting(frame, event, arg):
    seen[frame.f_code.co_name + ":" + event] += 1

def leaf(i):
    return i

def work():
    for i in range(500):
        leaf(i)

threading.setprofile(counting)
if sys.argv[1] != "none":
    import hushtrace
    hushtrace.start(sys.argv[1], functions=True)
t = threading.Thread(target=work)
t.start(); t.join()
if sys.argv[1] != "none":
    hushtrace.stop()
assert threading._profile_hook is counting, threading._profile_hook  # getprofile(): 3.10+
print(json.dumps({k: v for k, v in seen.items() if k.split(":")[0] in ("leaf", "work", "run")},
                 sort_keys=True))
"""


def test_threading_setprofile_before_hushtrace_keeps_working_in_new_threads(tmp_path):
    script = write_script(tmp_path, THREAD_PROFILE, name="threads.py")
    untraced = run([sys.executable, str(script), "none"], tmp_path)
    assert untraced.returncode == 0, untraced.stderr
    traced = run([sys.executable, str(script), str(tmp_path / "t")], tmp_path)
    assert traced.returncode == 0, traced.stderr
    assert json.loads(traced.stdout) == json.loads(untraced.stdout)
    events = chrome(tmp_path / "t", tmp_path)
    check_balanced(events)
    assert sum(calls(events, "leaf").values()) == 500


def test_cprofile_after_hushtrace_on_monitoring_gets_the_profiler_id(tmp_path):
    if not MONITORING:
        pytest.skip("sys.monitoring tool ids exist on 3.12+ only")
    text = """
    import cProfile, hushtrace, sys
    hushtrace.start(sys.argv[1], functions=True)
    assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None
    cProfile.run("sum(range(10))")
    hushtrace.stop()
    """
    script = write_script(tmp_path, text)
    r = run([sys.executable, str(script), str(tmp_path / "t")], tmp_path)
    assert r.returncode == 0, r.stderr


# ---- exceptions and exits ----

EXITS = {
    "exception": "def f():\n    raise ValueError('boom')\nprint('before')\nf()\n",
    "keyboard-interrupt": "print('before')\nraise KeyboardInterrupt\n",
    "sigint": "import os, signal\nprint('before', flush=True)\n"
              "os.kill(os.getpid(), signal.SIGINT)\nprint('not reached')\n",
    "sys-exit": "import sys\nprint('before')\nsys.exit(7)\n",
    "sys-exit-message": "import sys\nsys.exit('bad things')\n",
    "os-exit": "import os, sys\nprint('before', flush=True)\nsys.stdout.write('lost')\n"
               "os._exit(5)\n",
    "exception-in-thread": "import threading\ndef f():\n    raise OSError('in thread')\n"
                           "t = threading.Thread(target=f); t.start(); t.join()\n"
                           "print('after')\n",
}


@pytest.mark.parametrize("case", sorted(EXITS))
def test_exits_and_exceptions_pass_through_unchanged(tmp_path, case):
    script = write_script(tmp_path, EXITS[case])
    plain = run([sys.executable, str(script)], tmp_path)
    if case in ("keyboard-interrupt", "sigint"):
        assert plain.returncode == -signal.SIGINT
    # `hushtrace record`: the program itself runs unchanged under its .pth start-up.
    rec = run([cli(), "record", "-o", str(tmp_path / "rec"), "--", sys.executable,
               str(script)], tmp_path)
    assert rec.returncode in (plain.returncode, 128 - plain.returncode), rec.stderr
    assert without_hushtrace_lines(rec.stdout) == without_hushtrace_lines(plain.stdout)
    assert without_hushtrace_lines(rec.stderr) == without_hushtrace_lines(plain.stderr)
    # `python -m hushtrace run`: same exit status and output (the last line of a traceback:
    # the launcher's frames above the program's are the package's business).
    ran = run([sys.executable, "-m", "hushtrace", "run", "-o", str(tmp_path / "run"),
               str(script)], tmp_path)
    assert ran.returncode == plain.returncode, ran.stderr
    assert ran.stdout == plain.stdout
    last = without_hushtrace_lines(plain.stderr).strip().splitlines()[-1:]
    assert without_hushtrace_lines(ran.stderr).strip().splitlines()[-1:] == last
