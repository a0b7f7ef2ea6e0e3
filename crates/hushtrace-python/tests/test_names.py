"""Thread and process names: Python thread names (also a thread renaming itself after it
started) and the program's name reach the trace, and Chrome JSON, Perfetto and `report` show
them (before, every thread and process was `python3`)."""

import json
import subprocess
import sys

from conftest import chrome, cli, perfetto_python, run_traced

NAMED = """
import hushtrace, threading, sys
def work(tag):
    for i in range(3):
        hushtrace.event("app", "tick", tag=tag)
def renamer():
    threading.current_thread().name = "renamed-late"
    work("renamed")
ts = [threading.Thread(target=work, args=(f"w{i}",), name=f"worker-{i}") for i in range(3)]
ts.append(threading.Thread(target=renamer))
ts.append(threading.Thread(target=work, args=("long",), name="abcdefghijklmné-x"))
for t in ts: t.start()
for t in ts: t.join()
work("main")
"""


def thread_names(events):
    tags = {}
    for e in events:
        if e.get("name") == "tick":
            tags[(e["pid"], e["tid"])] = e["args"]["tag"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    return {tags[k]: names[k] for k in tags}, {e["pid"]: e["args"]["name"] for e in events
                                               if e.get("ph") == "M" and
                                               e["name"] == "process_name"}


def test_thread_and_process_names_in_chrome_and_report(tmp_path):
    trace, _ = run_traced(tmp_path, NAMED)
    events = chrome(trace, tmp_path)
    by_tag, procs = thread_names(events)
    assert by_tag == {
        "w0": "worker-0", "w1": "worker-1", "w2": "worker-2", "renamed": "renamed-late",
        "main": "MainThread",
        # Cut to the 15 bytes a thread name has, on a character boundary ("é" is 2 bytes).
        "long": "abcdefghijklmn",
    }, by_tag
    assert list(procs.values()) == ["prog.py"], procs

    r = subprocess.run([cli(), "report", "--format", "json", str(trace)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [p["name"] for p in rep["processes"]] == ["prog.py"]
    names = sorted(t["name"] for p in rep["processes"] for t in p["threads"])
    assert {"worker-0", "worker-1", "worker-2", "renamed-late", "MainThread"} <= set(names), \
        names

    r = subprocess.run([cli(), "report", str(trace)], capture_output=True, text=True)
    assert r.returncode == 0 and "worker-1" in r.stdout and "prog.py" in r.stdout, r.stdout


PERFETTO_NAMES = """
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
threads, procs = set(), set()
for p in t.packet:
    d = p.track_descriptor
    if d.HasField("thread"):
        threads.add(d.thread.thread_name)
    if d.HasField("process"):
        procs.add(d.process.process_name)
print(sorted(threads)); print(sorted(procs))
"""


def test_names_in_perfetto(tmp_path):
    trace, _ = run_traced(tmp_path, NAMED)
    out = tmp_path / "trace.pftrace"
    r = subprocess.run([cli(), "convert", "--to", "perfetto", "-o", str(out), str(trace)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check = tmp_path / "check.py"
    check.write_text(PERFETTO_NAMES)
    r = subprocess.run([perfetto_python(), str(check), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    threads, procs = (eval(line) for line in r.stdout.splitlines()[-2:])
    assert {"worker-0", "worker-2", "renamed-late", "MainThread"} <= set(threads), threads
    assert procs == ["prog.py"], procs


def test_inline_start_names_the_process_after_the_script(tmp_path):
    prog = tmp_path / "myapp.py"
    prog.write_text("import hushtrace, sys\nhushtrace.start(sys.argv[1])\n"
                    "hushtrace.event('a', 'b')\nhushtrace.stop()\n")
    from conftest import clean_env
    r = subprocess.run([sys.executable, str(prog), str(tmp_path / "t")], capture_output=True,
                       text=True, env=clean_env())
    assert r.returncode == 0, r.stderr
    _, procs = thread_names(chrome(tmp_path / "t", tmp_path))
    assert list(procs.values()) == ["myapp.py"], procs
