"""The inline API: start/stop, event, span, @trace, counter, enable/disable, snapshot."""

import asyncio
import json
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
    # The consumer names itself once running (a raw pthread that may not have run yet), and
    # has its name before it applies its settings: look again for up to 5 s for each.
    import time
    deadline = time.monotonic() + 5
    tid = None
    while tid is None and time.monotonic() < deadline:
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().strip() == "hushtrace-consu":
                    tid = t
        time.sleep(0.002)
    assert tid, "no consumer thread"
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


# ---- bounded inline API (names made at run time) ----

def test_run_time_names_keep_memory_flat(tmp_path):
    # Before: the extension kept every category/name string object it saw (keyed by address):
    # +417 MiB per million events with names made at run time.
    r = run(tmp_path, """
    import hushtrace, json, sys
    from hushtrace import _hushtrace as _h
    def rss():  # anonymous memory: the heap (the rings are shared memory, touched over time)
        with open("/proc/self/status") as f:
            return [int(l.split()[1]) * 1024 for l in f if l.startswith("RssAnon")][0]
    hushtrace.start(sys.argv[1])
    def events(n):
        for i in range(n):
            hushtrace.event("db", "q" + str(i % 4), n=i)
    def counters(n):
        for i in range(n):
            hushtrace.counter("db", "c" + str(i % 3), i)
    def spans(n):
        for i in range(n):
            with hushtrace.span("db", "s" + str(i % 5)):
                pass
    growth = {}
    for f, n in [(events, 1_000_000), (counters, 300_000), (spans, 300_000)]:
        f(n // 10)  # warm up
        before = rss()
        f(n)
        growth[f.__name__] = rss() - before
    stats = hushtrace.stop()
    print(json.dumps({"growth": growth, "inline": _h._inline_stats(),
                      "written": stats["events_written"]}))
    """, str(tmp_path / "t"))
    out = json.loads(r.stdout.splitlines()[-1])
    print(out)
    assert all(g < 4 << 20 for g in out["growth"].values()), out
    # 4 event names, 3 counters, 5 spans (begin + end): 17 callsites, nothing past the limit.
    assert out["inline"]["callsites"] == 4 + 3 + 5 * 2, out
    assert out["inline"]["discarded"] == 0
    assert out["written"] > 1_600_000


def test_names_past_the_limit_are_counted_as_discarded_with_one_warning(tmp_path):
    r = run(tmp_path, """
    import hushtrace, json, sys
    from hushtrace import _hushtrace as _h
    hushtrace.start(sys.argv[1])
    limit = _h._inline_stats()["limit"]
    results = [hushtrace.event("many", "e" + str(i)) for i in range(limit + 100)]
    again = hushtrace.event("many", "e5")     # registered before the limit: still recorded
    stats = hushtrace.stop()
    print(json.dumps({"limit": limit, "written": results.count(True), "again": again,
                      "inline": _h._inline_stats(), "discarded": stats["events_discarded"]}))
    """, str(tmp_path / "t"))
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["limit"] == 16384
    assert out["written"] == out["limit"] and out["again"] is True, out
    assert out["inline"] == {"callsites": out["limit"], "limit": out["limit"], "discarded": 100}
    assert out["discarded"] == 100, out
    assert r.stderr.count("warning") == 1 and "many:e16384" in r.stderr, r.stderr


def test_events_from_del_of_str_subclasses(tmp_path):
    # str subclasses with a __del__ that records an event, as a field value and as the
    # category (kept out of event()'s cache, which holds exact str objects only): every event
    # is recorded. (The tables are never borrowed across a call into Python, so such a
    # __del__ cannot run while they are; GilCell's checked borrow would refuse it if it did.)
    r = run(tmp_path, """
    import hushtrace, sys
    hushtrace.start(sys.argv[1])
    class Boom(str):
        def __del__(self):
            hushtrace.event("del", "inner", x=1)
    for i in range(1000):
        hushtrace.event("outer", "e", s=Boom("v" + str(i)))
        hushtrace.event(Boom("cat" + str(i % 3)), "n")
    print(hushtrace.stop()["events_written"])
    """, str(tmp_path / "t"))
    assert int(r.stdout.split()[-1]) >= 2000


# ---- bad input: clear errors, nothing started ----

BAD_START = """
import hushtrace, json, math, os, pathlib, sys
out = sys.argv[1]
os.chdir(os.path.dirname(out))
open("afile", "w").close()
results = {}
def attempt(label, f):
    try:
        f()
    except (TypeError, ValueError) as e:
        results[label] = [type(e).__name__, str(e), hushtrace.is_running()]
    except BaseException as e:
        results[label] = ["OTHER " + type(e).__name__, str(e), hushtrace.is_running()]
    else:
        results[label] = ["accepted", "", hushtrace.is_running()]
        hushtrace.stop()
attempt("bytes", lambda: hushtrace.start(b"/srv/trace"))
attempt("none", lambda: hushtrace.start(None))
attempt("empty", lambda: hushtrace.start(""))
attempt("file", lambda: hushtrace.start("afile"))
attempt("int", lambda: hushtrace.start(3))
attempt("mode", lambda: hushtrace.start(out, mode=1))
attempt("depth", lambda: hushtrace.start(out, functions=True, max_stack_depth=-1))
attempt("depth0", lambda: hushtrace.start(out, functions=True, max_stack_depth=0))
attempt("depthstr", lambda: hushtrace.start(out, functions=True, max_stack_depth="3"))
attempt("subbuf", lambda: hushtrace.start(out, subbuf_size=-1))
attempt("cpus", lambda: hushtrace.start(out, consumer_cpus=[-1]))
attempt("globs", lambda: hushtrace.start(out, include=[b"x"]))
attempt("functions", lambda: hushtrace.start(out, functions="yes"))
attempt("pathlike", lambda: hushtrace.start(pathlib.Path(out)))   # accepted
hushtrace.start(out)
for label, f in [
    ("inf", lambda: hushtrace.snapshot(timeout=float("inf"))),
    ("nan", lambda: hushtrace.snapshot(timeout=float("nan"))),
    ("neg", lambda: hushtrace.snapshot(timeout=-1)),
    ("huge", lambda: hushtrace.snapshot(timeout=1e300)),
    ("strtimeout", lambda: hushtrace.snapshot(timeout="1")),
    ("event_bytes", lambda: hushtrace.event(b"a", "b")),
    ("event_one", lambda: hushtrace.event("a")),
    ("event_name", lambda: hushtrace.event("a", None)),
    ("event_empty", lambda: hushtrace.event("", "x")),
    ("event_field", lambda: hushtrace.event("a", "b", x=None)),
    ("span_cat", lambda: hushtrace.span(1, "x")),
    ("span_field", lambda: hushtrace.span("a", "x", f=[1])),
    ("counter_name", lambda: hushtrace.counter("a", 2, 1)),
    ("counter_bool", lambda: hushtrace.counter("a", "b", True)),
]:
    attempt(label, f)
hushtrace.stop()
dirs = sorted(p for p in os.listdir(".") if os.path.isdir(p))
print(json.dumps({"results": results, "dirs": dirs}))
"""


def test_bad_start_arguments_raise_before_anything_starts(tmp_path):
    import json
    r = run(tmp_path, BAD_START, str(tmp_path / "t"))
    out = json.loads(r.stdout.splitlines()[-1])
    res = out["results"]
    want = {
        "bytes": "TypeError", "none": "TypeError", "empty": "ValueError", "file": "ValueError",
        "int": "TypeError", "mode": "TypeError", "depth": "ValueError", "depth0": "ValueError",
        "depthstr": "TypeError", "subbuf": "ValueError", "cpus": "ValueError",
        "globs": "TypeError", "functions": "TypeError", "pathlike": "accepted",
        "inf": "ValueError", "nan": "ValueError", "neg": "ValueError", "huge": "ValueError",
        "strtimeout": "TypeError", "event_bytes": "TypeError", "event_one": "TypeError",
        "event_name": "TypeError", "event_empty": "ValueError", "event_field": "TypeError",
        "span_cat": "TypeError", "span_field": "TypeError", "counter_name": "TypeError",
        "counter_bool": "TypeError",
    }
    assert {k: v[0] for k, v in res.items()} == want, res
    # Nothing was left running by a refused start, and no directory was made from a bad path
    # (`./b'/srv/trace'/`, `./None/`).
    for k in ("bytes", "none", "empty", "file", "int", "mode", "depth", "depth0", "subbuf",
              "cpus", "globs", "functions"):
        assert res[k][2] is False, (k, res[k])
    assert out["dirs"] == ["t"], out["dirs"]
    assert "bytes" in res["bytes"][1] and "max_stack_depth" in res["depth"][1]
    assert "timeout" in res["inf"][1] and "finite" in res["inf"][1]
    assert "category" in res["event_bytes"][1] and "bytes" in res["event_bytes"][1]
    assert "PanicException" not in r.stderr and "panicked" not in r.stderr


def test_one_string_is_one_glob(tmp_path):
    # include="__main__" was three... no, eight one-letter globs, and nothing was traced.
    r = run(tmp_path, """
    import hushtrace, sys
    def traced_here():
        return 1
    hushtrace.start(sys.argv[1], functions=True, include="__main__")
    for i in range(3):
        traced_here()
    hushtrace.stop()
    """, str(tmp_path / "t"))
    events = chrome(tmp_path / "t", tmp_path)
    assert sum(1 for e in events if e.get("ph") == "B" and e["name"] == "traced_here") == 3


def test_a_span_object_entered_twice_nests(tmp_path):
    run(tmp_path, """
    import hushtrace, sys, threading
    hushtrace.start(sys.argv[1])
    s = hushtrace.span("app", "outer", depth=1)
    with s:
        with s:
            hushtrace.event("app", "inside")
    def rec(n):
        with s:
            if n:
                rec(n - 1)
    rec(3)
    t = threading.Thread(target=rec, args=(2,)); t.start(); t.join()
    hushtrace.stop()
    """, str(tmp_path / "t"))
    events = chrome(tmp_path / "t", tmp_path)
    slices = check_balanced(events)
    outer = [s for s in slices if s[3] == "outer"]
    assert len(outer) == 2 + 4 + 3, outer


def test_long_strings_are_cut_on_a_character_boundary(tmp_path):
    run(tmp_path, """
    import hushtrace, sys
    hushtrace.start(sys.argv[1])
    hushtrace.event("app", "long", s="é" * 200, t="a" + "€" * 100)
    hushtrace.stop()
    """, str(tmp_path / "t"))
    events = chrome(tmp_path / "t", tmp_path)
    args = [e for e in events if e.get("name") == "long"][0]["args"]
    assert args["s"] == "é" * 127, args["s"]   # 254 bytes: the 128th "é" would end at 256
    assert args["t"] == "a" + "€" * 84, args["t"]  # 1 + 252 bytes
    babeltrace_clean(tmp_path / "t")
