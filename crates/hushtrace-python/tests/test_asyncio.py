"""asyncio under function tracing: the trace holds the program's calls, exactly as cProfile
counts them untraced (tracing adds none, in asyncio or elsewhere), and every task is an async
slice (`py:task`) that ends when its coroutine finishes."""

import asyncio
import collections
import pstats
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import check_balanced, chrome, clean_env, last_json, run_traced, write_script

PROGRAM = """
import asyncio, json

COUNT = {"produced": 0, "consumed": 0}

async def leaf(i):
    await asyncio.sleep(0)
    return i

async def worker(i):
    return await leaf(i) + 1

async def producer(q, n):
    for i in range(n):
        await q.put(i)
        COUNT["produced"] += 1
    await q.put(None)

async def consumer(q):
    while (item := await q.get()) is not None:
        COUNT["consumed"] += 1

async def sleeper():
    await asyncio.sleep(3600)

async def fails():
    await asyncio.sleep(0)
    raise ValueError("fails")

async def main():
    never_ran = asyncio.create_task(sleeper())
    never_ran.cancel()          # cancelled before it ever ran
    started = asyncio.create_task(sleeper())
    await asyncio.sleep(0)
    started.cancel()            # cancelled while suspended
    results = await asyncio.gather(*(worker(i) for i in range(10000)))
    q = asyncio.Queue(maxsize=8)
    await asyncio.gather(producer(q, 500), consumer(q))
    failing = asyncio.create_task(fails())
    try:
        await failing
    except ValueError:
        pass
    for t in (never_ran, started):
        try:
            await t
        except asyncio.CancelledError:
            pass
    return sum(results)

total = asyncio.run(main())
print(json.dumps(dict(COUNT, total=total)))
"""

# Both runs start with the same modules imported (those either launcher imports, and those the
# program does), so that neither run imports a module the other had already: module bodies and
# import-time calls are then the same in both.
SITECUSTOMIZE = """
import argparse, asyncio, cProfile, json, optparse, profile, pstats, runpy, signal, threading
import hushtrace, hushtrace._functions, hushtrace._process
"""

def run_both(tmp_path):
    """Runs PROGRAM untraced under cProfile and traced under `python -m hushtrace run`:
    (pstats stats, trace dir, traced stdout)."""
    script = write_script(tmp_path, PROGRAM)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = clean_env(PYTHONPATH=str(site))
    prof = tmp_path / "prof.out"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), str(script)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    untraced = last_json(r.stdout)
    trace = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(trace), str(script)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == untraced
    return pstats.Stats(str(prof)).stats, trace


def definitions(trace_dir):
    """babeltrace2's reading of the py:function events: {pid: {id: (file, line, qualname)}}."""
    bt = shutil.which("babeltrace2")
    assert bt, "babeltrace2 not installed (apt-get install babeltrace2)"
    r = subprocess.run([bt, str(trace_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    defs = collections.defaultdict(dict)
    pat = re.compile(r'vpid = (\d+),.*\bf = (\d+), module = "[^"]*", qualname = "([^"]*)", '
                     r'file = "([^"]*)", line = (\d+)')
    for line in r.stdout.splitlines():
        if " py:function:" in line:
            m = pat.search(line)
            defs[int(m.group(1))][int(m.group(2))] = (m.group(4), int(m.group(5)), m.group(3))
    return defs


def test_calls_equal_cprofiles_of_the_untraced_program(tmp_path):
    stats, trace = run_both(tmp_path)
    profiled = collections.Counter()
    for (file, line, _name), (_cc, ncalls, _tt, _ct, _callers) in stats.items():
        if file != "~":  # builtins: not traced without --c-calls
            profiled[(file, line)] += ncalls
    defs = definitions(trace)
    events = chrome(trace, tmp_path)
    check_balanced(events)
    traced = collections.Counter()
    for e in events:
        if e.get("ph") == "B":
            file, line, _ = defs[e["pid"]][e["args"]["f"]]
            traced[(file, line)] += 1
    diff = {k: (profiled[k], traced[k]) for k in set(profiled) | set(traced)
            if profiled[k] != traced[k]}
    assert not diff, f"(file, line): (cProfile, trace) differ: {sorted(diff.items())}"
    # The comparison covers asyncio's machinery, which ran for each of the 10,000 tasks:
    # tracing added no call to it (no done callback, nothing scheduled on the loop).
    asyncio_dir = str(Path(asyncio.__file__).parent)
    handle_run = [(f, ln) for (f, ln, n) in stats if f.startswith(asyncio_dir) and n in
                  ("_run", "Handle._run")]
    assert handle_run and all(profiled[k] > 10000 for k in handle_run), handle_run


# Below 3.12 --c-calls follows calls with the profile hook instead of the frame evaluation
# function: tasks are followed from either; and with asyncio itself not traced (--include).
@pytest.mark.parametrize("run_args", [[], ["--c-calls"], ["--include", "__main__"]],
                         ids=["calls", "c-calls", "include"])
def test_every_task_is_one_async_slice_ending_with_its_coroutine(tmp_path, run_args):
    trace = run_traced_only(tmp_path, run_args)
    events = chrome(trace, tmp_path)
    slices = check_balanced(events)  # every async begin has its end
    begins = collections.Counter(e["name"] for e in events if e.get("ph") == "b")
    ends = collections.Counter(e["name"] for e in events if e.get("ph") == "e")
    assert begins == ends
    assert begins["worker"] == 10000
    assert begins["sleeper"] == 2  # one cancelled before it ever ran: it ends too
    assert begins["fails"] == 1 and begins["producer"] == 1 and begins["consumer"] == 1
    assert begins["main"] == 1
    # A task ends as its coroutine's outermost frame returns or unwinds for the last time
    # (not later, from a done callback the loop runs): right after that frame's end.
    timeline = [e for e in events if e.get("ph") in ("B", "E", "b", "e")]
    for prev, e in zip(timeline, timeline[1:]):
        if e["ph"] == "e":
            assert (prev["ph"], prev["name"]) == ("E", e["name"]), (prev, e)
    # A task's slice spans its coroutine's frames.
    ts = {(e["ph"], e["name"]): e["ts"] for e in events
          if e.get("ph") in ("b", "e") and e["name"] in ("fails", "main")}
    for name in ("fails", "main"):
        frames = [s for s in slices if s[3] == name]
        assert frames, name
        assert ts[("b", name)] <= min(s[4] for s in frames)
        assert max(s[5] for s in frames) <= ts[("e", name)]


def run_traced_only(tmp_path, run_args):
    script = write_script(tmp_path, PROGRAM)
    trace = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(trace), *run_args,
                        str(script)],
                       capture_output=True, text=True, env=clean_env(), timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"produced": 500, "consumed": 500, "total": 50005000}
    return trace


EAGER = """
import asyncio

async def quick(i):
    return i

async def slow(i):
    await asyncio.sleep(0)
    return i

async def main():
    asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
    done = [asyncio.create_task(quick(i)) for i in range(3)]     # finish inside create_task
    waiting = [asyncio.create_task(slow(i)) for i in range(3)]   # start inside it, then wait
    return sum(await asyncio.gather(*done, *waiting))

print(asyncio.run(main()))
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks are new in Python 3.12")
def test_eager_tasks_are_slices_too(tmp_path):
    trace, out = run_traced(tmp_path, EAGER)
    assert out.split() == ["6"]
    events = chrome(trace, tmp_path)
    check_balanced(events)
    begins = collections.Counter(e["name"] for e in events if e.get("ph") == "b")
    ends = collections.Counter(e["name"] for e in events if e.get("ph") == "e")
    assert begins == ends
    assert (begins["quick"], begins["slow"]) == (3, 3), begins
