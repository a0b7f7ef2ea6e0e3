"""Deadlines of Python spans (issue 31 point 1): ``span(..., deadline=seconds)``,
``@trace(deadline=...)`` and the session's rules (``HUSHTRACE_ON_LATE``) on inline spans make
a span that ends past its deadline a late span: a capture ``<dir>/late/<n>/`` and a line in
``<dir>/late/index.json`` naming it ``cat:name``; a punctual span makes none. A bad deadline is
a ``TypeError`` or ``ValueError`` before anything is recorded. No timing assertion: late spans
sleep 50 ms past a 1 ms deadline, the punctual one has an hour."""

import json
import subprocess
import sys
import textwrap

from conftest import clean_env

LATE = """
import asyncio, json, os, sys, time
import hushtrace

out = sys.argv[1]
with hushtrace.span("py", "ruled", i=1):          # the rule's 1 ms
    time.sleep(0.05)
time.sleep(0.02)
with hushtrace.span("py", "declared", deadline=0.001):
    with hushtrace.span("py", "punctual", deadline=3600):
        pass
    time.sleep(0.05)
time.sleep(0.02)

@hushtrace.trace(cat="py", name="decorated", deadline=0.001)
def slow():
    time.sleep(0.05)
    return 7

assert slow() == 7
time.sleep(0.02)

@hushtrace.trace(cat="py", name="awaited", deadline=1e-3)
async def slow_async():
    await asyncio.sleep(0.05)

asyncio.run(slow_async())

index = os.path.join(out, "late", "index.json")
n = 0
for _ in range(6000):                     # at most a minute, for the consumer's next tick
    if os.path.exists(index):
        with open(index) as f:
            n = sum(1 for _ in f)
    if n >= 4:
        break
    time.sleep(0.01)
print(json.dumps({"index_lines": n}))
"""

BAD = """
import hushtrace
for bad, exc in [(0, ValueError), (-1, ValueError), (float("nan"), ValueError),
                 (float("inf"), ValueError), (1e300, ValueError), ("1ms", TypeError),
                 (True, TypeError), ([1], TypeError)]:
    for make in (lambda: hushtrace.span("py", "bad", deadline=bad),
                 lambda: hushtrace.trace(deadline=bad),
                 lambda: hushtrace.trace(lambda: None, deadline=bad)):
        try:
            make()
        except exc as e:
            assert "deadline" in str(e), e
        else:
            raise SystemExit(f"no {exc.__name__} for deadline={bad!r}")
with hushtrace.span("py", "fine", deadline=2, n=1):
    pass
print("ok")
"""


def run(tmp_path, text, args, env):
    p = tmp_path / "p.py"
    p.write_text(textwrap.dedent(text))
    r = subprocess.run([sys.executable, str(p), *args], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_late_python_spans_are_captured(tmp_path):
    out = tmp_path / "trace"
    env = clean_env(HUSHTRACE_OUTPUT=str(out), HUSHTRACE_PY_FUNCTIONS="0",
                    HUSHTRACE_ON_LATE="py:ruled>1ms", HUSHTRACE_LATE_INTERVAL="1ms")
    stdout = run(tmp_path, LATE, [str(out)], env)
    assert json.loads(stdout.splitlines()[-1]) == {"index_lines": 4}, stdout
    lines = [json.loads(ln) for ln in (out / "late" / "index.json").read_text().splitlines()]
    assert sorted(ln["span"] for ln in lines) == [
        "py:awaited", "py:declared", "py:decorated", "py:ruled"], lines
    for ln in lines:
        assert ln["deadline_ns"] == 1_000_000, ln
        assert ln["duration_ns"] > 1_000_000, ln
        assert (out / "late" / str(ln["n"])).is_dir(), ln
    assert (out / "late" / "1").is_dir()


def test_bad_deadlines_are_clear_errors(tmp_path):
    assert run(tmp_path, BAD, [], clean_env()).strip() == "ok"
