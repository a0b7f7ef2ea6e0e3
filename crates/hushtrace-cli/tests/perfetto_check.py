"""Checks a `hushtrace convert --to perfetto` trace against the Chrome JSON of the same trace.

    python perfetto_check.py TRACE.perfetto-trace TRACE.json

The protobuf is decoded with Perfetto's own generated modules (the `perfetto` PyPI package),
never with hushtrace's encoder: interning, sequence flags, packet defaults and the incremental
sequence clock are resolved the way Perfetto defines them. Both traces are reduced to the same
model (processes, threads, slices per thread with names, categories, args and absolute
timestamps in ns, instants, counter tracks with their samples) and compared. The JSON's
timestamps are parsed as decimals and added to the origin its `otherData` states, so
nanoseconds are compared exactly.

Prints a JSON summary on success; exits 1 naming the first difference otherwise.
"""

import json
import math
import sys
from collections import defaultdict
from decimal import Decimal

from perfetto_sequence import REALTIME, SEQ_NEEDS_INCREMENTAL_STATE, Sequence, pb, read_trace


def fail(msg):
    print("perfetto_check: " + msg, file=sys.stderr)
    sys.exit(1)


def annotation_value(a, seq):
    kind = a.WhichOneof("value")
    if kind is None:
        fail("debug annotation without a value: %s" % a)
    if kind == "string_value_iid":
        return seq.values[a.string_value_iid].decode()
    v = getattr(a, kind)
    if kind == "double_value" and not math.isfinite(v):
        # The JSON writes non-finite numbers as strings, like Rust's Display.
        return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def model(processes, threads, slices, stacks, instants, counters):
    """The model both traces are reduced to; slices still open (in `stacks`) end at None."""
    for key, st in stacks.items():
        for s in st:
            slices[key].append(tuple(s[:4]) + (tuple(sorted(s[4].items())),))
    return dict(
        processes=processes,
        threads=threads,
        slices=dict(slices),
        instants=dict(instants),
        counters=dict(counters),
    )


def read_perfetto(path):
    trace = read_trace(path)
    tracks = {}
    seqs = defaultdict(Sequence)
    primary = None
    processes, threads = {}, {}
    slices = defaultdict(list)  # (pid, tid) -> [(name, cat, begin, end, args)]
    stacks = defaultdict(list)
    instants = defaultdict(list)  # (pid, tid) -> [(name, cat, ts, args)]
    counters = defaultdict(list)  # (pid, track name) -> [(ts, value)]
    last_ts = {}
    for p in trace.packet:
        seq = seqs[p.trusted_packet_sequence_id]
        seq.update(p)
        data = p.WhichOneof("data")
        if data == "clock_snapshot":
            named = seq.clock_snapshot(p.clock_snapshot, fail)
            if named is not None:
                primary = named
            continue
        if data == "track_descriptor":
            t = p.track_descriptor
            tracks[t.uuid] = t
            if t.HasField("process"):
                processes[t.process.pid] = t.process.process_name
            if t.HasField("thread"):
                threads[(t.thread.pid, t.thread.tid)] = t.thread.thread_name
                if t.parent_uuid not in tracks or not tracks[t.parent_uuid].HasField("process"):
                    fail("thread track %d not parented to a process track" % t.uuid)
            continue
        if data is None and not p.HasField("timestamp"):
            continue  # state only: flags, defaults, interned data
        if data != "track_event":
            fail("unexpected packet: %s" % p)
        ev = p.track_event
        if not seq.valid:
            fail("track event before its sequence's incremental state was cleared")
        if p.HasField("interned_data") and not (p.sequence_flags & SEQ_NEEDS_INCREMENTAL_STATE):
            fail("interned data without SEQ_NEEDS_INCREMENTAL_STATE")
        ts = seq.timestamp(p, fail)
        track = tracks[seq.track_uuid(ev)]
        if ev.type == pb.TrackEvent.TYPE_COUNTER:
            parent = tracks[track.parent_uuid]
            if not track.HasField("counter"):
                fail("counter on a track that is not a counter track")
            v = ev.counter_value if ev.HasField("counter_value") else ev.double_counter_value
            counters[(parent.process.pid, track.name)].append((ts, v))
            continue
        if not track.HasField("thread"):
            fail("slice or instant on a track without a thread: %s" % track)
        key = (track.thread.pid, track.thread.tid)
        if ts < last_ts.get(key, 0):
            fail("time goes backwards on thread %s" % (key,))
        last_ts[key] = ts
        args = {seq.fields[a.name_iid]: annotation_value(a, seq) for a in ev.debug_annotations}
        name = seq.names[ev.name_iid] if ev.HasField("name_iid") else None
        cats = [seq.cats[c] for c in ev.category_iids]
        cat = cats[0] if cats else None
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stacks[key].append([name, cat, ts, None, args])
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stacks[key]:
                fail("slice end without begin on %s" % (key,))
            s = stacks[key].pop()
            s[3] = ts
            s[4].update(args)
            slices[key].append(tuple(s[:4]) + (tuple(sorted(s[4].items())),))
        elif ev.type == pb.TrackEvent.TYPE_INSTANT:
            instants[key].append((name, cat, ts, tuple(sorted(args.items()))))
        else:
            fail("unexpected track event type %d" % ev.type)
    if primary != REALTIME:
        fail("the trace clock is not REALTIME: %r" % primary)
    return model(processes, threads, slices, stacks, instants, counters)


def read_chrome(path):
    with open(path, "rb") as f:
        doc = json.load(f, parse_float=Decimal)
    # `ts` counts from the origin stated in otherData (nanoseconds since the epoch).
    origin = int(doc.get("otherData", {}).get("ts_origin_unix_ns", "0"))
    processes, threads = {}, {}
    slices = defaultdict(list)
    stacks = defaultdict(list)
    instants = defaultdict(list)
    counters = defaultdict(list)

    def norm(v):
        return float(v) if isinstance(v, Decimal) else v

    def args_of(e):
        return {k: norm(v) for k, v in e.get("args", {}).items()}

    for e in doc["traceEvents"]:
        ph, key = e["ph"], (e["pid"], e["tid"])
        if ph == "M":
            if e["name"] == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            else:
                threads[key] = e["args"]["name"]
            continue
        ts = origin + int(Decimal(e["ts"]) * 1000)
        if ph == "B":
            stacks[key].append([e["name"], e["cat"], ts, None, args_of(e)])
        elif ph == "E":
            s = stacks[key].pop()
            s[3] = ts
            s[4].update(args_of(e))
            slices[key].append(tuple(s[:4]) + (tuple(sorted(s[4].items())),))
        elif ph == "i":
            instants[key].append((e["name"], e["cat"], ts, tuple(sorted(args_of(e).items()))))
        elif ph == "C":
            for k, v in e["args"].items():
                counters[(e["pid"], e["name"])].append((ts, norm(v)))
        else:
            fail("unexpected ph %r in the JSON" % ph)
    # Processes named only by their threads' metadata (no process_name event) have "" names.
    return model(processes, threads, slices, stacks, instants, counters)


def main():
    pf, chrome = read_perfetto(sys.argv[1]), read_chrome(sys.argv[2])
    for what in ("processes", "threads", "slices", "instants", "counters"):
        a, b = pf[what], chrome[what]
        if a != b:
            keys = sorted(set(a) | set(b), key=repr)
            for k in keys:
                if a.get(k) != b.get(k):
                    av, bv = a.get(k), b.get(k)
                    if isinstance(av, list) and isinstance(bv, list):
                        for i, (x, y) in enumerate(zip(av, bv)):
                            if x != y:
                                fail("%s of %r differ at %d: perfetto %r, chrome %r" % (what, k, i, x, y))
                        fail("%s of %r: perfetto has %d, chrome %d" % (what, k, len(av), len(bv)))
                    fail("%s of %r: perfetto %r, chrome %r" % (what, k, av, bv))
    summary = {
        "processes": {str(k): v for k, v in sorted(pf["processes"].items())},
        "threads": {"%d/%d" % k: v for k, v in sorted(pf["threads"].items())},
        "slices": {"%d/%d" % k: len(v) for k, v in sorted(pf["slices"].items())},
        "instants": {"%d/%d" % k: len(v) for k, v in sorted(pf["instants"].items())},
        "counters": {"%d/%s" % k: len(v) for k, v in sorted(pf["counters"].items())},
        "first_slice": {
            "%d/%d" % k: list(v[0][:4]) for k, v in sorted(pf["slices"].items()) if v
        },
    }
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
