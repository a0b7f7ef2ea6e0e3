"""Filters by file (`--include-files`, `--exclude-files`, `--ignore-frozen`, and `start()`'s
keyword arguments): the trace holds exactly the calls cProfile counts for the functions of
the files let through, and none of the others."""

import collections
import fnmatch
import json
import pstats
import subprocess
import sys

import pytest

from conftest import check_balanced, chrome, clean_env, last_json, write_script
from test_asyncio import SITECUSTOMIZE, definitions

PROGRAM = """
import json
import importlib._bootstrap as frozen_module   # frozen on every CPython
import lib_a, lib_b

def local(i):
    return i + 1

def main():
    total = 0
    for i in range(200):
        total += lib_a.work(i) + lib_b.work(i) + local(i)
    for i in range(50):
        frozen_module._resolve_name("m", "pkg.sub", 1)   # a frozen module's function
    return total

print(json.dumps({"total": main(),
                  "frozen": frozen_module._resolve_name.__code__.co_filename}))
"""

LIB_A = """
def helper(i):
    return i

def work(i):
    return helper(i) * 2
"""

LIB_B = """
def work(i):
    return i - 1
"""


def run_both(tmp_path, run_args):
    """The program untraced under cProfile and traced with `run_args`: (calls per (file,
    line) by cProfile, calls per (file, line) in the trace)."""
    script = write_script(tmp_path, PROGRAM)
    site = tmp_path / "site"
    site.mkdir()
    # The two files' modules are imported at start-up in both runs, as test_asyncio's
    # SITECUSTOMIZE imports the launchers' modules: so neither run imports them (the import
    # machinery finds a file beside the script differently under each launcher).
    write_script(site, LIB_A, "lib_a.py")
    write_script(site, LIB_B, "lib_b.py")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE + "import lib_a, lib_b\n")
    env = clean_env(PYTHONPATH=str(site))
    prof = tmp_path / "prof.out"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), str(script)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    untraced = last_json(r.stdout)
    assert untraced["frozen"] == "<frozen importlib._bootstrap>", untraced
    trace = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(trace), *run_args,
                        str(script)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == untraced
    profiled = collections.Counter()
    for (file, line, _name), (_cc, ncalls, _tt, _ct, _callers) in \
            pstats.Stats(str(prof)).stats.items():
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
    return profiled, traced


def kept(profiled, keep, main):
    """cProfile's counts of the files let through, and of the main module's body (`main`:
    its (file, line); always traced: the frame the launcher waits for)."""
    return collections.Counter({k: n for k, n in profiled.items() if keep(k[0]) or k == main})


def frozen(file):
    return file.startswith("<frozen ")


CASES = {
    "include-files": (["--include-files", "*/lib_?.py"],
                      lambda f: fnmatch.fnmatchcase(f, "*/lib_?.py")),
    "include-and-exclude-files": (["--include-files", "*/lib_*", "--include-files",
                                   "*/prog.py", "--exclude-files", "*/lib_b.py"],
                                  lambda f: f.endswith(("/lib_a.py", "/prog.py"))),
    "exclude-files": (["--exclude-files", "*/lib_a.py"], lambda f: not f.endswith("/lib_a.py")),
    "ignore-frozen": (["--ignore-frozen"], lambda f: not frozen(f)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_file_filters_keep_exactly_cprofiles_calls_of_the_files_let_through(tmp_path, case):
    run_args, keep = CASES[case]
    profiled, traced = run_both(tmp_path, run_args)
    main = (str(tmp_path / "prog.py"), 1)
    assert profiled[main] == 1
    expected = kept(profiled, keep, main)
    diff = {k: (expected[k], traced[k]) for k in set(expected) | set(traced)
            if expected[k] != traced[k]}
    assert not diff, f"(file, line): (cProfile, trace) differ: {sorted(diff.items())}"
    # The program's three files and the frozen modules were all called: each case dropped
    # some and (but the last) kept some.
    files = {f for f, _ in profiled}
    assert any(f.endswith("/lib_a.py") for f in files)
    assert any(f.endswith("/lib_b.py") for f in files)
    assert "<frozen importlib._bootstrap>" in files
    assert 1 < sum(expected.values()) < sum(profiled.values())


def test_a_relative_file_name_is_matched_in_its_absolute_form(tmp_path):
    # `run prog.py` compiles the script as "prog.py": "*/prog.py" matches its absolute path.
    write_script(tmp_path, PROGRAM)
    write_script(tmp_path, LIB_A, "lib_a.py")
    write_script(tmp_path, LIB_B, "lib_b.py")
    trace = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(trace),
                        "--include-files", "*/prog.py", "prog.py"],
                       capture_output=True, text=True, env=clean_env(), timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = chrome(trace, tmp_path)
    names = collections.Counter(e["name"] for e in events if e.get("ph") == "B")
    assert names == {"<module>": 1, "main": 1, "local": 200}, names


def test_without_filters_frozen_calls_are_traced(tmp_path):
    profiled, traced = run_both(tmp_path, [])
    assert traced == profiled
    assert sum(n for (f, _), n in traced.items() if f == "<frozen importlib._bootstrap>") >= 50


API = """
import hushtrace, json, sys, os
import lib_b

def here():
    return 1

hushtrace.start(sys.argv[1], functions=True, include_files=sys.argv[2],
                ignore_frozen=True)
for _ in range(3):
    here(); lib_b.work(1); os.path.join("a", "b")
hushtrace.stop()
"""


def test_start_keyword_arguments(tmp_path):
    write_script(tmp_path, LIB_B, "lib_b.py")
    prog = write_script(tmp_path, API, "api.py")
    trace = tmp_path / "trace"
    # One str is one glob; relative to the working directory it matches the absolute path.
    r = subprocess.run([sys.executable, str(prog), str(trace), "*/api.py"],
                       capture_output=True, text=True, env=clean_env(), timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = chrome(trace, tmp_path)
    names = collections.Counter(e["name"] for e in events if e.get("ph") == "B")
    assert names == {"here": 3}, names


@pytest.mark.parametrize("kwargs, error, message", [
    ({"include_files": 3}, TypeError, "include_files must be a glob"),
    ({"exclude_files": [b"x"]}, TypeError, "exclude_files: each glob must be a str"),
    ({"include_files": [""]}, ValueError, "include_files: '' is not a glob"),
    ({"exclude_files": "a,b"}, ValueError, "exclude_files: 'a,b' is not a glob"),
    ({"ignore_frozen": "yes"}, TypeError, "ignore_frozen must be True or False"),
])
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, kwargs, error, message):
    import hushtrace

    with pytest.raises(error, match=message):
        hushtrace.start(str(tmp_path / "t"), functions=True, **kwargs)
    assert not hushtrace.is_running()
    with pytest.raises(error, match=message):
        hushtrace.trace_functions(**kwargs)


def test_cli_options_in_help_and_checked(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "--help"],
                       capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for opt, default in [("--include-files", "(repeatable; default: every file)"),
                         ("--exclude-files", "(repeatable; default: none)"),
                         ("--ignore-frozen", "default: traced)")]:
        assert opt in text and default in text, (opt, text)
    script = write_script(tmp_path, "print(1)\n")
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(tmp_path / "t"),
                        "--exclude-files", "a,b", str(script)],
                       capture_output=True, text=True, env=clean_env())
    assert r.returncode == 2 and "'a,b' is not a glob" in r.stderr, r.stderr


CHILD = """
import json, subprocess, sys
r = subprocess.run([sys.executable, "child.py"])
print(json.dumps({"child": r.returncode}))
"""

CHILD_SCRIPT = """
import lib_b

def here():
    return lib_b.work(1)

for _ in range(4):
    here()
"""


def test_a_traced_child_process_applies_the_file_filters(tmp_path):
    write_script(tmp_path, LIB_B, "lib_b.py")
    write_script(tmp_path, CHILD_SCRIPT, "child.py")
    trace = tmp_path / "trace"
    script = write_script(tmp_path, CHILD)
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(trace),
                        "--exclude-files", "*/lib_b.py", "--ignore-frozen", str(script)],
                       capture_output=True, text=True, env=clean_env(), timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"child": 0}
    events = chrome(trace, tmp_path)
    check_balanced(events)
    begins = [e for e in events if e.get("ph") == "B"]
    pids = {e["pid"] for e in begins}
    assert len(pids) == 2
    names = collections.Counter(e["name"] for e in begins)
    assert names["here"] == 4 and names["work"] == 0, names
    assert not [e for e in begins if e["cat"].startswith("importlib")], names
