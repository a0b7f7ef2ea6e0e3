"""The inline API: start/stop, event, span, @trace, counter, enable/disable, snapshot."""

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import babeltrace_clean, check_balanced, chrome, clean_env

PROG = """
import asyncio, hushtrace, json, os, sys, threading
out = sys.argv[1]
path = hushtrace.start(out)
assert path.endswith(str(os.getpid())), path
hushtrace.event("app", "login", user="ada", attempt=2, ok=True, load=0.5)
with hushtrace.span("app", "load", n=3):
    hushtrace.event("app", "inner")
@hushtrace.trace
def work(x):
    return x * 2
@hushtrace.trace(cat="io", name="fetch")
async def fetch():
    await asyncio.sleep(0)
    return 1
for i in range(5):
    work(i)
asyncio.run(fetch())
hushtrace.counter("app", "queue", 17)
hushtrace.counter("app", "load", 0.25)
assert hushtrace.disable("app:login") >= 1
assert hushtrace.event("app", "login", user="bob", attempt=1, ok=False, load=0.1) is False
hushtrace.enable("app:*")
try:
    hushtrace.event("app", "bad", x=[1])
except TypeError as e:
    print("typeerror", e, file=sys.stderr)
else:
    raise SystemExit("no TypeError for a list field")
try:
    hushtrace.start(out)
except RuntimeError as e:
    print("running", e, file=sys.stderr)
else:
    raise SystemExit("second start did not fail")
stats = hushtrace.stop()
print(json.dumps(stats))
"""


def run(tmp_path, text, *args):
    p = tmp_path / "p.py"
    p.write_text(textwrap.dedent(text))
    r = subprocess.run([sys.executable, str(p), *args], capture_output=True, text=True,
                       env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_inline_api(tmp_path):
    import json
    out = tmp_path / "trace"
    r = run(tmp_path, PROG, str(out))
    assert "typeerror" in r.stderr and "list" in r.stderr
    assert "already running" in r.stderr
    stats = json.loads(r.stdout.splitlines()[-1])
    assert stats["events_discarded"] == 0 and stats["events_written"] >= 16
    events = chrome(out, tmp_path)
    check_balanced(events)
    logins = [e for e in events if e.get("name") == "login"]
    assert len(logins) == 1
    assert logins[0]["args"] == {"user": "ada", "attempt": 2, "ok": True, "load": 0.5}
    assert [e["ph"] for e in events if e.get("name") == "load" and e.get("cat") == "app"] == \
        ["B", "E"]
    assert sum(1 for e in events if e.get("ph") == "B" and e["name"] == "work") == 5
    assert sum(1 for e in events if e.get("ph") == "B" and e["name"] == "fetch") == 1
    counters = [e for e in events if e.get("ph") == "C"]
    assert len(counters) == 2
    babeltrace_clean(out)


def test_snapshot_in_overwrite_mode(tmp_path):
    out = tmp_path / "trace"
    r = run(tmp_path, """
    import hushtrace, sys
    hushtrace.start(sys.argv[1], mode="overwrite")
    for i in range(1000):
        hushtrace.event("app", "tick", i=i)
    print(hushtrace.snapshot())
    hushtrace.stop()
    """, str(out))
    snap = r.stdout.strip().splitlines()[-1]
    assert os.path.isdir(snap) and snap.startswith(str(out))


def test_bad_arguments_are_clear_errors(tmp_path):
    r = run(tmp_path, """
    import hushtrace, sys
    for bad in [lambda: hushtrace.start(sys.argv[1], mode="fast"),
                lambda: hushtrace.counter("a", "b", "x")]:
        try:
            bad()
        except (ValueError, TypeError) as e:
            print(type(e).__name__, e)
        else:
            raise SystemExit("accepted")
    print(hushtrace.stop())
    """, str(tmp_path / "t"))
    assert "mode must be" in r.stdout and "int or a float" in r.stdout
    assert r.stdout.strip().endswith("None")


def test_consumer_sched_and_cpus_place_the_consumer_thread(tmp_path):
    r = run(tmp_path, """
    import hushtrace, os, sys
    try:
        hushtrace.start(sys.argv[1], consumer_sched="fifo:0")
    except ValueError as e:
        print("refused:", e)
    else:
        raise SystemExit("fifo:0 accepted")
    # A nice value at least the process's own: raising it needs no privilege.
    base = os.getpriority(os.PRIO_PROCESS, 0)
    want = max(base, 6)
    hushtrace.start(sys.argv[1], consumer_sched=f"nice:{want}", consumer_cpus=[0])
    for i in range(5000):
        hushtrace.event("app", "tick", i=i)
    tid = None
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/comm") as f:
            if f.read().strip() == "hushtrace-consu":
                tid = t
    assert tid, "no consumer thread"
    # The thread has its name before it applies its settings: look again for up to 5 s.
    import time
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/self/task/{tid}/stat") as f:
            nice = int(f.read().rsplit(")", 1)[1].split()[19 - 3])
        with open(f"/proc/self/task/{tid}/status") as f:
            cpus = [l.split(":")[1].strip() for l in f if l.startswith("Cpus_allowed_list")][0]
        if (nice, cpus) == (want, "0") or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    print("nice ok" if nice == want else f"nice {nice} != {want}",
          "cpus", cpus, "main", "ok" if os.getpriority(os.PRIO_PROCESS, 0) == base else "changed")
    print(hushtrace.stop()["events_written"])
    """, str(tmp_path / "t"))
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("refused:") and "1 to 99" in lines[0], r.stdout
    assert lines[1] == "nice ok cpus 0 main ok", r.stdout
    assert lines[2] == "5000", r.stdout


def test_disabled_event_cost_is_measured(tmp_path):
    # Not a timing assertion (machines are noisy): the measurement runs and prints.
    r = run(tmp_path, """
    import hushtrace, sys, timeit
    hushtrace.start(sys.argv[1])
    hushtrace.disable("off:*")
    hushtrace.event("off", "e", i=1)
    n = 200000
    t = timeit.timeit(lambda: hushtrace.event("off", "e", i=1), number=n) / n
    base = timeit.timeit(lambda: None, number=n) / n
    print(f"disabled event: {(t - base) * 1e9:.0f} ns over a Python call")
    hushtrace.stop()
    """, str(tmp_path / "t"))
    assert "disabled event" in r.stdout
