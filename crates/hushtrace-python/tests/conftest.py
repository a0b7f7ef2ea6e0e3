"""Helpers of the hushtrace Python tests: run a program traced, read the trace back through
the real readers (the hushtrace CLI's Chrome and Perfetto converters, babeltrace2)."""

import collections
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def cli():
    """The hushtrace CLI binary (HUSHTRACE_CLI, else target/debug/hushtrace of this repo)."""
    p = os.environ.get("HUSHTRACE_CLI") or str(ROOT / "target" / "debug" / "hushtrace")
    if not os.path.exists(p):
        pytest.fail(f"no hushtrace CLI at {p}: run 'cargo build -p hushtrace-cli' first")
    return p


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUSHTRACE_")}
    env.update(extra)
    return env


# The sleep system calls' numbers (`time.sleep` makes one of them: clock_nanosleep or
# nanosleep, pselect6 on 3.10), by machine.
_SLEEP_CALLS = {"x86_64": {"35", "230", "270"}, "aarch64": {"101", "115", "72"}}


def wait_sleeping(pid, tid=None, timeout=60):
    """Waits until thread `tid` (default: the main thread) of process `pid` is inside a sleep
    system call, read from /proc/PID/task/TID/syscall. A test that must signal a thread only
    once it sits in `time.sleep` (and cannot run a Python signal handler before it gets there)
    calls this between reading the program's "ready" line and sending the signal."""
    import platform
    import time

    numbers = _SLEEP_CALLS.get(platform.machine())
    if numbers is None:
        pytest.fail(f"wait_sleeping: no sleep system call numbers for {platform.machine()}")
    path = f"/proc/{pid}/task/{tid or pid}/syscall"
    end = time.monotonic() + timeout
    last = ""
    while time.monotonic() < end:
        with open(path) as f:
            last = f.read().split(" ", 1)[0].strip()
        if last in numbers:
            return
        time.sleep(0.005)
    pytest.fail(f"thread {tid or pid} of process {pid} not in a sleep call after {timeout} s "
                f"(last: {last!r})")


def write_script(tmp_path, text, name="prog.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def run_traced(tmp_path, text, args=(), run_args=(), check=True, timeout=600):
    """Runs `text` as a script under `python -m hushtrace run`; returns (trace dir, stdout)."""
    script = write_script(tmp_path, text)
    out = tmp_path / "trace"
    r = subprocess.run(
        [sys.executable, "-m", "hushtrace", "run", "-o", str(out), *run_args, str(script), *args],
        capture_output=True, text=True, env=clean_env(), timeout=timeout, cwd=tmp_path,
    )
    if check and r.returncode != 0:
        pytest.fail(f"traced program failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return out, r.stdout


def last_json(stdout):
    """The last line of the program's stdout, as JSON (what the program counted itself)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1])


def chrome(trace_dir, tmp_path):
    """Converts with `hushtrace convert --to chrome`; returns the list of trace events."""
    out = tmp_path / "trace.json"
    r = subprocess.run([cli(), "convert", "--to", "chrome", "-o", str(out), str(trace_dir)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())["traceEvents"]


def check_balanced(events):
    """Every thread's B/E events nest and close; every async b has its e. Returns the closed
    thread slices as (pid, tid, cat, name, begin ts, end ts)."""
    stacks = collections.defaultdict(list)
    slices = []
    asyncs = {}
    for e in events:
        ph = e.get("ph")
        key = (e.get("pid"), e.get("tid"))
        if ph == "B":
            stacks[key].append(e)
        elif ph == "E":
            assert stacks[key], f"end without begin on {key}: {e}"
            b = stacks[key].pop()
            slices.append((key[0], key[1], b["cat"], b["name"], b["ts"], e["ts"]))
        elif ph == "b":
            k = (e["pid"], e["cat"], e["name"], json.dumps(e["id2"]))
            assert k not in asyncs, f"async begin twice: {e}"
            asyncs[k] = e
        elif ph == "e":
            k = (e["pid"], e["cat"], e["name"], json.dumps(e["id2"]))
            assert k in asyncs, f"async end without begin: {e}"
            del asyncs[k]
    open_ = {k: [b["name"] for b in v] for k, v in stacks.items() if v}
    assert not open_, f"slices left open: {open_}"
    assert not asyncs, f"async slices left open: {list(asyncs)}"
    return slices


def calls(events, name, cat=None):
    """Counter of (pid, tid) over the begins of function `name` (qualname)."""
    c = collections.Counter()
    for e in events:
        if e.get("ph") == "B" and e["name"] == name and (cat is None or e["cat"] == cat):
            c[(e["pid"], e["tid"])] += 1
    return c


def babeltrace_clean(trace_dir):
    """babeltrace2 reads the trace with exit 0 and nothing on stderr; returns its line count."""
    bt = shutil.which("babeltrace2")
    if bt is None:
        pytest.skip("babeltrace2 not installed (apt-get install babeltrace2)")
    r = subprocess.run([bt, str(trace_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", f"babeltrace2 warned: {r.stderr[:2000]}"
    return len(r.stdout.splitlines())


def perfetto_python():
    """The python of the venv holding Perfetto's generated protos (ci/perfetto-venv.sh)."""
    p = os.environ.get("HUSHTRACE_PERFETTO_PYTHON")
    if p:
        return p
    r = subprocess.run(["bash", str(ROOT / "ci" / "perfetto-venv.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no Perfetto protos venv: {r.stderr[-500:]}")
    return r.stdout.strip().splitlines()[-1]
