"""asyncio task names: each task's slice (`py:task`) carries `Task.get_name()` as its `name`
field, read without a call the program would see."""

import collections
import json
import re
import shutil
import subprocess
import sys

from conftest import babeltrace_clean, check_balanced, chrome, last_json, run_traced

PROGRAM = """
import asyncio, json

async def step(req):
    await asyncio.sleep(0)
    return req

async def handle(req):
    return await step(req)

async def main():
    a = asyncio.create_task(handle(1), name="request-1")
    b = asyncio.create_task(handle(2), name="request-2")
    c = asyncio.create_task(handle(3))
    await asyncio.gather(a, b, c)
    grouped = []
    if hasattr(asyncio, "TaskGroup"):  # 3.11+: names the task after the loop made it
        async with asyncio.TaskGroup() as tg:
            grouped.append(tg.create_task(handle(4), name="request-4"))
    me = asyncio.current_task().get_name()
    return [a.get_name(), b.get_name(), c.get_name(), me], [t.get_name() for t in grouped]

names, grouped = asyncio.run(main())
print(json.dumps({"names": names, "grouped": grouped}))
"""


def test_each_task_slice_carries_its_tasks_name(tmp_path):
    trace, stdout = run_traced(tmp_path, PROGRAM)
    out = last_json(stdout)
    a, b, c, main = out["names"]
    grouped = out["grouped"]
    assert grouped == (["request-4"] if sys.version_info >= (3, 11) else [])
    assert (a, b) == ("request-1", "request-2")
    assert c.startswith("Task-") and main.startswith("Task-")
    events = chrome(trace, tmp_path)
    check_balanced(events)
    names = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "b":
            names[e["name"]].append(e["args"]["name"])
    assert sorted(names["handle"]) == sorted([a, b, c, *grouped])
    assert names["main"] == [main]
    # Each named task's slice holds its coroutine's frames: the chain handle -> step runs
    # inside the slice of its task.
    spans = {}
    for e in events:
        if e.get("ph") in ("b", "e") and e["name"] == "handle":
            spans.setdefault(json.dumps(e["id2"]), {})[e["ph"]] = e
    by_name = {s["b"]["args"]["name"]: (s["b"]["ts"], s["e"]["ts"]) for s in spans.values()}
    assert set(by_name) == {a, b, c, *grouped}
    steps = [e["ts"] for e in events if e.get("ph") == "B" and e["name"] == "step"]
    for name in (a, b, *grouped):
        begin, end = by_name[name]
        assert any(begin <= ts <= end for ts in steps), name
    # babeltrace2 reads the names too.
    babeltrace_clean(trace)
    r = subprocess.run([shutil.which("babeltrace2"), str(trace)], capture_output=True,
                       text=True)
    found = re.findall(r' py:task: .*\bname = "([^"]*)"', r.stdout)
    every = [n for ns in names.values() for n in ns]  # asyncio.run's own tasks too
    assert sorted(found) == sorted(every)
    assert {a, b, c, main} <= set(found)
