"""Decodes the async slices of a `hushtrace convert --to perfetto` trace with Perfetto's own
generated modules (the `perfetto` PyPI package) and checks how they are laid out.

    python perfetto_async_check.py TRACE.perfetto-trace [--slices]

Interning, sequence flags, packet defaults and the incremental sequence clock are resolved the
way Perfetto defines them. Async slices are the begin/end track events on tracks that belong to
a process but to no thread; a `TYPE_SLICE_END` ends the innermost open slice of its track, as in
Perfetto's trace processor. Checked: every end has an open slice on its track; a slice that
nests under another on its track names it as its parent (its `parent` debug annotation is the
enclosing slice's `id`); slices on one track are properly nested in time.

Prints a JSON summary: per process the names of its async tracks, the number of async slices,
of nested ones, of slices still open at the end, and with `--slices` every slice as
[track name, name, category, begin ns, end ns, id, parent, depth].
"""

import json
import sys
from collections import defaultdict

from perfetto_sequence import Sequence, pb, read_trace


def fail(msg):
    print("perfetto_async_check: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    path = sys.argv[1]
    want_slices = "--slices" in sys.argv[2:]
    trace = read_trace(path)
    tracks = {}
    seqs = defaultdict(Sequence)
    stacks = defaultdict(list)  # track uuid -> open slices
    slices = []
    nested = 0
    lanes = defaultdict(list)  # pid -> async track names
    for p in trace.packet:
        seq = seqs[p.trusted_packet_sequence_id]
        seq.update(p)
        data = p.WhichOneof("data")
        if data == "clock_snapshot":
            seq.clock_snapshot(p.clock_snapshot, fail)
            continue
        if data == "track_descriptor":
            t = p.track_descriptor
            if t.uuid in tracks:
                fail("track %d described twice" % t.uuid)
            tracks[t.uuid] = t
            is_async = not t.HasField("thread") and not t.HasField("process") and not t.HasField(
                "counter"
            )
            if is_async:
                parent = tracks.get(t.parent_uuid)
                if parent is None or not parent.HasField("process"):
                    fail("async track %d is not parented to a process track" % t.uuid)
                if not t.name:
                    fail("async track %d has no name" % t.uuid)
                lanes[parent.process.pid].append(t.name)
            continue
        if data != "track_event":
            continue
        ts = seq.timestamp(p, fail)
        ev = p.track_event
        uuid = seq.track_uuid(ev)
        track = tracks[uuid]
        if track.HasField("thread") or track.HasField("counter"):
            continue
        if ev.type not in (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END):
            fail("unexpected event type %d on async track %s" % (ev.type, track.name))
        args = {}
        for a in ev.debug_annotations:
            if a.HasField("uint_value"):
                args[seq.fields[a.name_iid]] = a.uint_value
        st = stacks[uuid]
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            name = seq.names[ev.name_iid]
            cat = seq.cats[ev.category_iids[0]] if ev.category_iids else None
            sid, parent = args.get("id"), args.get("parent")
            if st and sid is not None and st[-1]["id"] is not None:
                if parent != st[-1]["id"]:
                    fail(
                        "%s (id %s) nests under %s (id %s), not under its parent %s"
                        % (name, sid, st[-1]["name"], st[-1]["id"], parent)
                    )
            if st:
                nested += 1
            if st and ts < st[-1]["begin"]:
                fail("slice begins before the slice it nests under on %s" % track.name)
            st.append(
                dict(name=name, cat=cat, begin=ts, id=sid, parent=parent, depth=len(st))
            )
        else:
            if not st:
                fail("slice end without an open slice on track %s" % track.name)
            s = st.pop()
            if ts < s["begin"]:
                fail("slice %s ends before it begins" % s["name"])
            slices.append(
                [track.name, s["name"], s["cat"], s["begin"], ts, s["id"], s["parent"], s["depth"]]
            )
    unclosed = sum(len(v) for v in stacks.values())
    out = dict(
        lanes={str(k): v for k, v in sorted(lanes.items())},
        async_tracks=sum(len(v) for v in lanes.values()),
        async_slices=len(slices),
        nested=nested,
        unclosed=unclosed,
    )
    if want_slices:
        out["slices"] = sorted(slices, key=lambda s: (s[3], s[7]))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
