"""Exceptions on the slices they unwind (`python -m hushtrace run --exceptions`, on by
default): a `py:exception` instant (`f`, `type`, `message`) just before the `py:call` end of
every frame an exception unwinds, read back with the CLI's Chrome converter and babeltrace2;
`hushtrace report --exceptions` counts them by type and function, caught or not. The program
behaves as untraced, and function call counts still equal cProfile's.

Below Python 3.12 the profile hook does not see the exception (CPython holds it aside while
the hook runs): the events are there, on the same frames, with an empty type and message.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import check_balanced, chrome, clean_env, cli, run_traced, write_script
from test_exact import compare

TYPED = sys.version_info >= (3, 12)

PROGRAM = r'''
import sys, threading


class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("str() of this exception raises")


class Mine(Exception):
    pass


def leaf(kind):
    if kind == "value":
        raise ValueError("bad value \u00e9")
    if kind == "key":
        raise KeyError("k")
    if kind == "badstr":
        raise BadStr(42)
    if kind == "long":
        raise ValueError("\u00e9" * 1000)
    if kind == "mine":
        raise Mine("in a thread")
    return kind


def one_up():
    try:
        leaf("value")
    except ValueError as e:
        return "caught one up: " + str(e)


def mid2():
    leaf("key")


def mid1():
    mid2()


def three_up():
    try:
        mid1()
    except KeyError as e:
        return "caught three up: " + repr(e)


def bad_str():
    try:
        leaf("badstr")
    except BadStr as e:
        return "bad str: " + repr(e.args)


def long_message():
    try:
        leaf("long")
    except ValueError as e:
        return "long: %d" % len(str(e))


def in_thread():
    leaf("mine")


def main():
    n = int(sys.argv[1])
    for _ in range(n):
        out = [one_up(), three_up(), bad_str(), long_message(), leaf("none")]
    print("\n".join(out))
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode != "nothread":  # cProfile below 3.12 profiles the main thread only
        t = threading.Thread(target=in_thread, name="worker")
        t.start()
        t.join()
    sys.stdout.flush()
    if mode == "uncaught":
        leaf("value")  # uncaught: the program ends with a traceback, exit 1


main()
'''


def exceptions_of(events):
    """The py:exception instants, each with the function id of the innermost open slice on
    its thread (file order: the converter writes each thread's events in order)."""
    stacks = collections.defaultdict(list)
    out = []
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        ph = e.get("ph")
        if ph == "B":
            stacks[key].append(e.get("args", {}).get("f"))
        elif ph == "E":
            stacks[key].pop()
        elif ph in ("i", "I") and e.get("cat") == "py" and e.get("name") == "exception":
            inner = stacks[key][-1] if stacks[key] else None
            out.append((e["args"], inner, key))
    return out


def names_by_id(events):
    """Function id -> qualname, from the begins (the converter names them module:qualname)."""
    names = {}
    for e in events:
        if e.get("ph") == "B" and "f" in e.get("args", {}):
            names[e["args"]["f"]] = e["name"]
    return names


def report(trace_dir):
    r = subprocess.run([cli(), "report", "--exceptions", "--format", "json", str(trace_dir)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return {(row["type"], row["function"].split(":")[-1]): row
            for row in json.loads(r.stdout)["rows"]}


def test_unwound_frames_carry_their_exception(tmp_path):
    script = write_script(tmp_path, PROGRAM, name="untraced.py")
    plain = subprocess.run([sys.executable, str(script), "2", "uncaught"], capture_output=True,
                           text=True, env=clean_env(), cwd=tmp_path, timeout=600)
    out, stdout = run_traced(tmp_path, PROGRAM, args=["2", "uncaught"], check=False)
    # Behaviour unchanged: same output, same exit code (the uncaught ValueError: 1); the
    # thread's exception and the final one are reported on stderr as untraced.
    assert plain.returncode == 1
    assert stdout.splitlines()[:5] == plain.stdout.splitlines()[:5]
    assert "caught one up: bad value \u00e9" in stdout and "long: 1000" in stdout
    events = chrome(out, tmp_path)
    check_balanced(events)
    names = names_by_id(events)
    excs = exceptions_of(events)
    seen = collections.Counter()
    for args, inner, _ in excs:
        # Each event is inside the slice of the frame it unwound.
        assert inner == args["f"], (args, inner)
        fn = names[args["f"]].split(":")[-1]
        seen[(args["type"], fn, args["message"])] += 1
    T = (lambda t: t) if TYPED else (lambda t: "")
    M = (lambda m: m) if TYPED else (lambda m: "")
    long_msg = "\u00e9" * 127  # 255 bytes at most, cut on a character boundary: 254
    wanted = [
        ((T("ValueError"), "leaf", M("bad value \u00e9")), 2 + 1),
        ((T("KeyError"), "leaf", M("k")), 2),
        ((T("KeyError"), "mid2", M("k")), 2),
        ((T("KeyError"), "mid1", M("k")), 2),
        # args[0] is not a str: the type only (str() is never called: it would raise).
        ((T("__main__.BadStr"), "leaf", ""), 2),
        ((T("ValueError"), "leaf", M(long_msg)), 2),
        ((T("__main__.Mine"), "leaf", M("in a thread")), 1),
        ((T("__main__.Mine"), "in_thread", M("in a thread")), 1),
        ((T("ValueError"), "main", M("bad value \u00e9")), 1),
        ((T("ValueError"), "<module>", M("bad value \u00e9")), 1),
    ]
    # (Below 3.12 the rows fold together: type and message are empty.)
    want = collections.Counter()
    for k, v in wanted:
        want[k] += v
    for k, v in want.items():
        assert seen[k] == v, (k, seen[k], v, seen)
    # babeltrace2 reads the same events.
    bt = shutil.which("babeltrace2")
    if bt is None:
        pytest.fail("babeltrace2 not installed (apt-get install babeltrace2)")
    r = subprocess.run([bt, str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    bt_types = collections.Counter(
        m.group(1) for m in re.finditer(r' py:exception: .*?type = "([^"]*)"', r.stdout))
    assert bt_types == collections.Counter(args["type"] for args, _, _ in excs)
    if TYPED:
        assert bt_types["__main__.BadStr"] == 2

    rows = report(out)
    t = T
    # Caught one level up, three levels up (every frame of the chain), by the test's handlers.
    assert rows[(t("KeyError"), "mid1")]["caught"] == 2
    assert rows[(t("KeyError"), "leaf")]["caught"] == 2 if TYPED else True
    assert rows[(t("__main__.BadStr"), "leaf")]["caught"] == 2 if TYPED else True
    # Uncaught: the final raise unwinds the outermost recorded frame of the main thread.
    assert rows[(t("ValueError"), "<module>")]["uncaught"] == 1
    assert rows[(t("ValueError"), "main")]["uncaught"] == 1
    if TYPED:
        assert rows[("ValueError", "leaf")]["caught"] == 4
        assert rows[("ValueError", "leaf")]["uncaught"] == 1
        # The thread's exception leaves its target; threading's bootstrap (traced) hands it
        # to threading.excepthook: caught there, not by the program.
        mine = rows[("__main__.Mine", "in_thread")]
        assert (mine["count"], mine["caught"], mine["uncaught"]) == (1, 1, 0)
    text = subprocess.run([cli(), "report", "--exceptions", str(out)], capture_output=True,
                          text=True)
    assert text.returncode == 0 and "mid1" in text.stdout, text.stderr


def test_no_exceptions_records_none(tmp_path):
    out, stdout = run_traced(tmp_path, PROGRAM, args=["1"], run_args=["--no-exceptions"])
    events = chrome(out, tmp_path)
    check_balanced(events)
    assert exceptions_of(events) == []
    assert "caught three up" in stdout
    assert report(out) == {}


def test_start_option_is_checked_and_works(tmp_path):
    prog = write_script(tmp_path, r'''
        import sys, hushtrace
        try:
            hushtrace.start(sys.argv[1], functions=True, exceptions="yes")
        except TypeError as e:
            print("refused:", e)
        hushtrace.start(sys.argv[1], functions=True, exceptions=False)
        def f():
            raise ValueError("x")
        try:
            f()
        except ValueError:
            pass
        hushtrace.stop()
    ''', name="api.py")
    d = tmp_path / "api"
    r = subprocess.run([sys.executable, str(prog), str(d)], capture_output=True, text=True,
                       env=clean_env(), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "refused:" in r.stdout and "exceptions" in r.stdout
    assert exceptions_of(chrome(d, tmp_path)) == []


def test_call_counts_equal_cprofile_with_exceptions(tmp_path):
    compare(tmp_path, PROGRAM, ["50", "nothread"], lambda f: os.path.basename(f) == "prog.py")
