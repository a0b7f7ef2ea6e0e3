"""A traced Python program killed with SIGKILL while it runs: `hushtrace recover` gives back
every call it made before the kill, under its function's name.

The criterion does not depend on timing: the program prints how many calls it made after
making them, so every call counted on a line the test read before sending SIGKILL was already
in the process's file-backed rings (or written out by its consumer). The rings are large
enough for the whole run, so nothing can have been discarded for lack of room.

The consumer is kept asleep (a 60 s read timer, and less than one packet of events, so no
packet hand-over wakes it): it does not rewrite the metadata after function tracing registered
`py:call` and `py:function`, nor after the program's inline events `prog:reached_<n>`
(registered as the program reaches them), as for a program killed soon after it started or
soon after it first reached an inline tracepoint. Recovery must then describe those events
from the ring directory's types mirror. (That is
with `python -m hushtrace run`, which takes the read timer from the environment;
`hushtrace.start` has the default 10 ms one, so its consumer may or may not have rewritten the
metadata before the kill: both must work.)
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import cli, clean_env, write_script

# Calls of `work` (each calls `leaf`), printed every STEP calls; then the program waits to be
# killed. The test kills it once it has read a count of at least KILL_AFTER.
LIMIT = 20_000
STEP = 500
KILL_AFTER = 5_000
# 1 MiB packets: LIMIT calls (4 events a call, about 8 bytes an event) fit in the first one,
# so nothing is discarded, and no packet hand-over wakes the consumer.
SUBBUF_SIZE = 1 << 20
NUM_SUBBUFS = 4
READ_TIMER_MS = 60_000

BODY = f"""
import hushtrace, signal, sys

def leaf(i):
    return i * 2

def work(i):
    return leaf(i) + 1

n = 0
while n < {LIMIT}:
    for _ in range({STEP}):
        work(n)
        n += 1
    # A callsite registered now, long after the consumer last wrote the metadata.
    hushtrace.event("prog", "reached_%d" % n, n=n)
    print(n, flush=True)
signal.pause()
"""

# `hushtrace.start` in the program itself, with function tracing.
STARTED = f"""
import hushtrace, sys
hushtrace.start(sys.argv[1], functions=True, subbuf_size={SUBBUF_SIZE}, num_subbufs={NUM_SUBBUFS})
""" + BODY


def launch(tmp_path, how, out):
    """Starts the traced program (`python -m hushtrace run`, or `hushtrace.start` in it)."""
    if how == "run":
        script = write_script(tmp_path, BODY)
        argv = [sys.executable, "-m", "hushtrace", "run", "-o", str(out), str(script)]
    else:
        script = write_script(tmp_path, STARTED)
        argv = [sys.executable, str(script), str(out)]
    env = clean_env(HUSHTRACE_SUBBUF_SIZE=str(SUBBUF_SIZE), HUSHTRACE_NUM_SUBBUFS=str(NUM_SUBBUFS),
                    HUSHTRACE_READ_TIMER_MS=str(READ_TIMER_MS))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)


def kill_after(p, count):
    """Reads the program's counts until one is at least `count`, then SIGKILLs it and waits
    until it is dead, without reaping it (it is a zombie then: `os.WNOWAIT`). Returns the
    last count read."""
    last = 0
    while last < count:
        line = p.stdout.readline()
        if not line:
            p.kill()
            p.wait()
            pytest.fail(f"the program ended early ({p.returncode}): {p.stderr.read()}")
        last = int(line)
    p.send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    return last


@pytest.mark.parametrize("how", ["run", "start"])
@pytest.mark.parametrize("reaped", [False, True], ids=["zombie", "reaped"])
def test_calls_made_before_sigkill_are_recovered_with_their_names(tmp_path, how, reaped):
    out = tmp_path / "trace"
    p = launch(tmp_path, how, out)
    try:
        made = kill_after(p, KILL_AFTER)
        if reaped:
            assert p.wait() == -signal.SIGKILL
        # Killed, maybe not reaped yet by its parent (this test): its rings are final all the
        # same, and `recover` turns them into streams.
        r = subprocess.run([cli(), "recover", str(out)], capture_output=True, text=True)
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"process {p.pid}: recovered" in r.stdout, r.stdout
    assert "left alone" not in r.stdout, r.stdout
    assert " 0 ring(s)" not in r.stdout, r.stdout
    # The rings are gone (recovered), the trace is complete.
    assert not (out / str(p.pid) / ".rings").exists(), sorted(os.listdir(out / str(p.pid)))

    rep = subprocess.run([cli(), "report", "--format", "json", str(out)],
                         capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    rep = json.loads(rep.stdout)
    [proc] = rep["processes"]
    assert (proc["pid"], proc["origin"], proc["complete"]) == (p.pid, "recovered", True), proc
    assert proc["discarded"] <= 1, proc  # at most the event the kill tore
    spans = {s["name"]: s["count"] for s in rep["spans"]}
    # Every call made before the count the test read is there, named: the py:function records
    # of `work` and `leaf` were recovered too (without them the spans have no such names).
    for name in ("__main__:work", "__main__:leaf"):
        assert made <= spans.get(name, 0) <= LIMIT, (name, made, spans)
    assert rep["unmatched_ends"] == 0, rep
    instants = {i["name"] for i in rep["instants"]}
    for k in range(STEP, made + 1, STEP):
        assert f"prog:reached_{k}" in instants, (k, made, sorted(instants))

    # babeltrace2 reads the recovered trace, definitions included, without a warning but the
    # one about the event the kill tore (counted as discarded), if it tore one.
    if shutil.which("babeltrace2") is None:
        pytest.fail("babeltrace2 not installed (apt-get install babeltrace2)")
    bt = subprocess.run(["babeltrace2", str(out)], capture_output=True, text=True)
    assert bt.returncode == 0, bt.stderr
    warnings = [ln for ln in bt.stderr.splitlines() if ln.strip()]
    torn = [ln for ln in warnings if "may have discarded events" in ln]
    assert warnings == torn and len(torn) <= proc["discarded"], bt.stderr[:2000]
    defined = {ln.split("qualname = ")[1].split(",")[0].strip('"')
               for ln in bt.stdout.splitlines() if " py:function: " in ln}
    assert {"work", "leaf"} <= defined, defined
