"""Checks the kernel part of a `hushtrace convert --to perfetto` trace with Perfetto's own
generated protobuf modules (the `perfetto` PyPI package).

    python kernel_perfetto_check.py TRACE.perfetto-trace SWITCHES TID

SWITCHES: the number of sched_switch events the kernel trace holds; TID: a thread that must
appear in them. Prints a JSON summary; exits 1 naming the problem otherwise.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def fail(msg):
    print("kernel_perfetto_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    path, switches, tid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    boot_is_realtime = False
    per_cpu = {}
    kinds = {}
    seen_tid = False
    last_ts = {}
    for p in trace.packet:
        if p.HasField("clock_snapshot"):
            clocks = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks}
            if pb.BUILTIN_CLOCK_BOOTTIME in clocks:
                boot_is_realtime = (
                    clocks[pb.BUILTIN_CLOCK_BOOTTIME] == clocks.get(pb.BUILTIN_CLOCK_REALTIME)
                )
        if not p.HasField("ftrace_events"):
            continue
        b = p.ftrace_events
        if not b.HasField("cpu"):
            fail("a bundle without its cpu")
        if not boot_is_realtime:
            fail("ftrace bundles before a clock snapshot tying BOOTTIME to REALTIME")
        for e in b.event:
            kind = e.WhichOneof("event")
            if kind is None:
                fail("an ftrace event without a payload")
            if e.timestamp < last_ts.get(b.cpu, 0):
                fail("cpu %d: timestamps go back" % b.cpu)
            last_ts[b.cpu] = e.timestamp
            kinds[kind] = kinds.get(kind, 0) + 1
            per_cpu[b.cpu] = per_cpu.get(b.cpu, 0) + 1
            if kind == "sched_switch":
                s = e.sched_switch
                if e.pid != s.prev_pid:
                    fail("sched_switch pid %d != prev_pid %d" % (e.pid, s.prev_pid))
                if tid in (s.prev_pid, s.next_pid):
                    seen_tid = True
    if kinds.get("sched_switch", 0) != switches:
        fail("%d sched_switch events, expected %d" % (kinds.get("sched_switch", 0), switches))
    if not seen_tid:
        fail("thread %d never switched" % tid)
    print(json.dumps({"cpus": per_cpu, "events": kinds}))


main()
