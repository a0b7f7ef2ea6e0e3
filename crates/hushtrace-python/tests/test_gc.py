"""Garbage collections as slices (`--gc`, `start(gc=True)`): each collection is a `py:gc`
span on the thread that ran it, whose generation and counts are what `gc.callbacks` told the
program itself; nothing is installed when the option is off."""

import collections
import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import babeltrace_clean, check_balanced, chrome, clean_env, last_json, run_traced

# The program's own gc callback reports every collection as gc.callbacks describes it; the
# callback is a traced Python function, called inside the collection's slice (at "start"),
# which is how the test finds in the trace the collections the program saw.
PROGRAM = """
import gc, json, sys, threading

seen = []
installed_before = len(gc.callbacks)

def seen_by_program(phase, info):
    if phase == "stop":
        seen.append([threading.get_native_id(), info["generation"], info["collected"],
                     info["uncollectable"]])

class Node:
    def __init__(self):
        self.other = None

def make_cycles(n):
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a

def in_thread():
    make_cycles(300)
    gc.collect(1)

gc.collect()
gc.callbacks.append(seen_by_program)
gc.disable()                # only the explicit collections, first
for gen in (0, 1, 2):
    make_cycles(100 * (gen + 1))
    gc.collect(gen)
t = threading.Thread(target=in_thread, name="collector")
t.start()
t.join()
gc.enable()
make_cycles(50000)          # automatic collections
gc.callbacks.remove(seen_by_program)
print(json.dumps({"seen": seen, "installed_before": installed_before,
                  "main": threading.get_native_id(),
                  "thread": t.native_id}))
"""


def gc_slices(events):
    """The `py:gc` slices as dicts (tid, begin and end event, whether the program's callback
    ran inside it), in trace order."""
    out = []
    open_ = {}
    inside = collections.defaultdict(list)  # tid -> names of calls begun in an open gc slice
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        if e.get("cat") == "py" and e.get("name") == "gc":
            if e["ph"] == "B":
                assert key not in open_, f"gc slice inside a gc slice: {e}"
                open_[key] = e
                inside[key] = []
            elif e["ph"] == "E":
                b = open_.pop(key)
                out.append({"tid": key[1], "begin": b, "end": e,
                            "calls": inside.pop(key)})
        elif e.get("ph") == "B" and key in open_:
            inside[key].append(e["name"])
    assert not open_, f"gc slices left open: {open_}"
    return out


def test_each_collection_is_a_slice_with_what_gc_callbacks_reported(tmp_path):
    trace, stdout = run_traced(tmp_path, PROGRAM, run_args=["--gc"])
    prog = last_json(stdout)
    assert prog["installed_before"] == 1  # hushtrace's callback, nothing else
    events = chrome(trace, tmp_path)
    check_balanced(events)
    slices = gc_slices(events)
    for s in slices:
        assert s["begin"]["args"]["generation"] == s["end"]["args"]["generation"]
        assert s["begin"]["ts"] <= s["end"]["ts"]
    observed = [[s["tid"], s["end"]["args"]["generation"], s["end"]["args"]["collected"],
                 s["end"]["args"]["uncollectable"]]
                for s in slices if "seen_by_program" in s["calls"]]
    # Exactly the collections the program saw, in order, each on its thread, with its counts.
    assert observed == prog["seen"]
    gens = [g for _tid, g, _c, _u in prog["seen"]]
    # The three explicit collections, the thread's, and automatic ones (generation 0 mostly).
    assert gens[:3] == [0, 1, 2], gens
    assert prog["seen"][3][:2] == [prog["thread"], 1]
    assert sum(1 for t, *_ in prog["seen"] if t == prog["main"]) >= 4  # explicit + automatic
    assert len(prog["seen"]) >= 5
    # Each explicit collection freed (at least) the two objects of each cycle made before it.
    for (_tid, gen, collected, _u), n in zip(prog["seen"][:3], (100, 200, 300)):
        assert collected >= 2 * n, (gen, collected)
    # babeltrace2 reads the same slices.
    bt_ends = babeltrace_gc_ends(trace)
    all_ends = [[s["tid"], s["end"]["args"]["generation"], s["end"]["args"]["collected"],
                 s["end"]["args"]["uncollectable"]] for s in slices]
    assert bt_ends == all_ends


def babeltrace_gc_ends(trace):
    """babeltrace2's reading of the `py:gc` ends: [tid, generation, collected, uncollectable]
    in time order."""
    babeltrace_clean(trace)
    bt = shutil.which("babeltrace2")
    r = subprocess.run([bt, str(trace)], capture_output=True, text=True)
    pat = re.compile(r'vtid = (\d+).*\bgeneration = (\d+), collected = (\d+), '
                     r'uncollectable = (\d+)')
    out = []
    for line in r.stdout.splitlines():
        if " py:gc" in line:
            m = pat.search(line)
            if m:
                out.append([int(x) for x in m.groups()])
    return out


def test_off_installs_nothing_and_records_no_collection(tmp_path):
    trace, stdout = run_traced(tmp_path, PROGRAM)
    prog = last_json(stdout)
    assert prog["installed_before"] == 0
    assert len(prog["seen"]) >= 5  # the program's collections ran
    events = chrome(trace, tmp_path)
    assert not [e for e in events if e.get("cat") == "py" and e.get("name") == "gc"]


API = """
import gc, json, sys, hushtrace
hushtrace.start(sys.argv[1], gc=True)
installed = len(gc.callbacks)
gc.collect(2)
hushtrace.stop()
print(json.dumps({"installed": installed, "after_stop": len(gc.callbacks)}))
"""


def test_start_gc_true_records_collections_and_stop_removes_the_callback(tmp_path):
    prog = tmp_path / "api.py"
    prog.write_text(API)
    trace = tmp_path / "trace"
    r = subprocess.run([sys.executable, str(prog), str(trace)], capture_output=True,
                       text=True, env=clean_env(), timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"installed": 1, "after_stop": 0}
    slices = gc_slices(chrome(trace, tmp_path))
    assert [s["end"]["args"]["generation"] for s in slices] == [2]


def test_gc_argument_is_checked(tmp_path):
    import hushtrace

    with pytest.raises(TypeError, match="gc must be True or False"):
        hushtrace.start(str(tmp_path / "t"), gc="yes")
    assert not hushtrace.is_running()


def test_gc_option_in_help():
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "--help"],
                       capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0
    assert "--gc" in r.stdout and "(default: off)" in r.stdout


CHILD = """
import gc, json, os, subprocess, sys
code = "import gc; gc.collect(2); gc.collect(1)"
r = subprocess.run([sys.executable, "-c", code])
print(json.dumps({"child": r.returncode, "pid": os.getpid()}))
"""


def test_a_traced_child_process_records_its_collections_too(tmp_path):
    trace, stdout = run_traced(tmp_path, CHILD, run_args=["--gc"])
    out = last_json(stdout)
    assert out["child"] == 0
    events = chrome(trace, tmp_path)
    check_balanced(events)
    assert len({e["pid"] for e in events if e.get("ph") == "B"}) == 2
    parent = {out["pid"]}
    by_pid = collections.defaultdict(list)
    for s in gc_slices(events):
        by_pid[s["begin"]["pid"]].append(s["end"]["args"]["generation"])
    children = {pid: gens for pid, gens in by_pid.items() if pid not in parent}
    assert len(children) == 1, by_pid
    gens = next(iter(children.values()))
    assert gens[-2:] == [2, 1], gens
