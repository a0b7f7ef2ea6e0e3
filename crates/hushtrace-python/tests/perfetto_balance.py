"""Decodes a Perfetto trace with Perfetto's own protos and checks that on every track the
slice begins and ends balance. Prints {"begins": N, "names": {...}} as JSON; exits 1 otherwise.

    python perfetto_balance.py TRACE.perfetto-trace
"""

import collections
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
names = {}  # (sequence, iid) -> name
defaults = {}  # sequence -> default track uuid
depth = collections.Counter()
begins = 0
counts = collections.Counter()
for p in trace.packet:
    seq = p.trusted_packet_sequence_id
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        names = {k: v for k, v in names.items() if k[0] != seq}
    if p.HasField("interned_data"):
        for n in p.interned_data.event_names:
            names[(seq, n.iid)] = n.name
    if p.HasField("trace_packet_defaults"):
        defaults[seq] = p.trace_packet_defaults.track_event_defaults.track_uuid
    if not p.HasField("track_event"):
        continue
    te = p.track_event
    track = te.track_uuid if te.HasField("track_uuid") else defaults.get(seq)
    if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        depth[track] += 1
        begins += 1
        name = te.name if te.HasField("name") else names.get((seq, te.name_iid), "?")
        counts[name] += 1
    elif te.type == pb.TrackEvent.TYPE_SLICE_END:
        if depth[track] == 0:
            print(f"slice end without begin on track {track}", file=sys.stderr)
            sys.exit(1)
        depth[track] -= 1
open_ = {t: d for t, d in depth.items() if d}
if open_:
    print(f"slices left open: {open_}", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"begins": begins, "names": counts}))
