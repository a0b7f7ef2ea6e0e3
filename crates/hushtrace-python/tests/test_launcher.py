"""`python -m hushtrace run`: the trace holds the program's frames, not the launcher's (runpy,
hushtrace's own, the imports that find a -m module); the program's main module is depth 1,
as cProfile counts it (under the `exec` that runs it)."""

import subprocess
import sys

from conftest import check_balanced, chrome, clean_env, cli, run_traced

PROGRAM = """
import json

def g():
    return 1

def f():
    return g() + g()

for _ in range(3):
    f()
print(json.dumps({"f": 3}))
"""


def main_thread_slices(events):
    """The slices of the program's (only) thread as (cat, name, depth), in begin order."""
    depth, out = 0, []
    for e in events:
        if e.get("ph") == "B":
            depth += 1
            out.append((e["cat"], e["name"], depth))
        elif e.get("ph") == "E":
            depth -= 1
    return out


def test_the_trace_begins_and_ends_with_the_main_module(tmp_path):
    trace, _ = run_traced(tmp_path, PROGRAM)
    events = chrome(trace, tmp_path)
    check_balanced(events)
    slices = main_thread_slices(events)
    # One outermost frame, the program's main module; no runpy or hushtrace frame anywhere.
    assert [s for s in slices if s[2] == 1] == [("__main__", "<module>", 1)], slices[:5]
    assert not [s for s in slices if s[0].split(".")[0] in ("runpy", "hushtrace")]
    assert [s for s in slices if s[1] == "f"] == [("__main__", "f", 2)] * 3
    spans = [e for e in events if e.get("ph") in ("B", "E")]
    assert (spans[0]["name"], spans[-1]["name"]) == ("<module>", "<module>")


def test_max_stack_depth_1_records_the_main_module_only(tmp_path):
    for extra in ([], ["--c-calls"]):
        trace, _ = run_traced(tmp_path, PROGRAM, run_args=["--max-stack-depth", "1", *extra])
        events = chrome(trace, tmp_path)
        check_balanced(events)
        assert main_thread_slices(events) == [("__main__", "<module>", 1)], extra
        trace.rename(tmp_path / f"trace{len(extra)}")


def test_depth_2_is_the_programs_first_function_level(tmp_path):
    trace, _ = run_traced(tmp_path, PROGRAM, run_args=["--max-stack-depth", "2"])
    slices = main_thread_slices(chrome(trace, tmp_path))
    assert ("__main__", "f", 2) in slices
    assert not [s for s in slices if s[1] == "g"]


def test_module_mode_starts_at_the_modules_frame(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def init_helper():\n    return 0\ninit_helper()\n")
    (pkg / "mod.py").write_text("def f():\n    return 3\nf()\n")
    out = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(out),
                        "--max-stack-depth", "1", "-m", "pkg.mod"], capture_output=True,
                       text=True, env=clean_env(), cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    # runpy imports the package to find the module: the launcher's doing, not recorded.
    assert main_thread_slices(chrome(out, tmp_path)) == [("__main__", "<module>", 1)]


def test_record_starts_at_the_main_module(tmp_path):
    # `hushtrace record` starts tracing from the package's .pth hook, while the interpreter
    # imports it and before site.py has finished: none of that is the program's.
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "trace"
    r = subprocess.run([cli(), "record", "-o", str(out), "--", sys.executable, str(script)],
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    events = chrome(out, tmp_path)
    check_balanced(events)
    slices = main_thread_slices(events)
    assert slices[0] == ("__main__", "<module>", 1), slices[:5]
    assert not [s for s in slices if s[0].split(".")[0] in ("site", "hushtrace")]
