"""Reading a Perfetto trace the way Perfetto defines it, shared by `perfetto_check.py` and
`perfetto_async_check.py`: per packet sequence, the incremental state (cleared by
SEQ_INCREMENTAL_STATE_CLEARED), the packet defaults, the interned names, categories, debug
annotation names and string values, and the incremental sequence clocks tied to REALTIME by a
clock snapshot. Decoded with Perfetto's own generated modules (the `perfetto` PyPI package).
"""

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

SEQ_INCREMENTAL_STATE_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
SEQ_NEEDS_INCREMENTAL_STATE = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
REALTIME = pb.BUILTIN_CLOCK_REALTIME


def read_trace(path):
    """The `Trace` message in the file at `path`."""
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    return trace


class Sequence:
    """The incremental state of one packet sequence (`trusted_packet_sequence_id`)."""

    def __init__(self):
        # Whether the state was cleared once: events before that cannot be resolved.
        self.valid = False
        self.names = {}
        self.cats = {}
        self.fields = {}
        self.values = {}
        self.default_clock = None
        self.default_track = None
        # Incremental clock id -> [current value, realtime at value 0 reference].
        self.clocks = {}

    def update(self, p):
        """Takes what packet `p` states for the sequence: a clear, defaults, interned data."""
        if p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED:
            self.__init__()
            self.valid = True
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            self.default_clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
            self.default_track = (
                d.track_event_defaults.track_uuid if d.HasField("track_event_defaults") else None
            )
        if p.HasField("interned_data"):
            i = p.interned_data
            for e in i.event_names:
                self.names[e.iid] = e.name
            for e in i.event_categories:
                self.cats[e.iid] = e.name
            for e in i.debug_annotation_names:
                self.fields[e.iid] = e.name
            for e in i.debug_annotation_string_values:
                self.values[e.iid] = e.str

    def clock_snapshot(self, cs, fail):
        """Takes the sequence clocks (ids >= 64) of snapshot `cs`, which must be incremental and
        tied to REALTIME (else `fail(message)`); returns the snapshot's primary trace clock, or
        None when it names none."""
        real = [c.timestamp for c in cs.clocks if c.clock_id == REALTIME]
        for c in cs.clocks:
            if c.clock_id >= 64:
                if not c.is_incremental or not real:
                    fail("sequence clock %d not incremental or not tied to REALTIME" % c.clock_id)
                self.clocks[c.clock_id] = [c.timestamp, real[0] - c.timestamp]
        return cs.primary_trace_clock if cs.HasField("primary_trace_clock") else None

    def timestamp(self, p, fail):
        """Packet `p`'s time in REALTIME ns (advancing its incremental clock); `fail(message)`
        for a clock the sequence does not know."""
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else self.default_clock
        if clock == REALTIME:
            return p.timestamp
        if clock in self.clocks:
            c = self.clocks[clock]
            c[0] += p.timestamp
            return c[0] + c[1]
        fail("event timestamp in unknown clock %r" % clock)

    def track_uuid(self, ev):
        """The track of track event `ev` (its own, or the sequence's default)."""
        return ev.track_uuid if ev.HasField("track_uuid") else self.default_track
