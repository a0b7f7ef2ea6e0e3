//! Writing one event: its track event's fields encoded, the timestamp made incremental.

use super::*;

impl<W: Write> Writer<W> {
    /// Writes one event of sequence `s`; returns whether it was written (an async end whose
    /// begin is not in the trace is not).
    pub(super) fn event(
        &mut self,
        s: usize,
        ev: &MergedEvent<'_>,
        info: &Rc<ClassInfo>,
    ) -> io::Result<bool> {
        use prost::encoding::{double, int32, int64, message, uint64};
        use track_event_tag as tag;
        let mut te = std::mem::take(&mut self.te_buf);
        te.clear();
        let mut with_name = true;
        let thread_slice = matches!(info.kind, Kind::SpanBegin | Kind::SpanEnd);
        let mut moved = Vec::new();
        match info.kind {
            _ if thread_slice || info.kind == Kind::Instant => {
                with_name = info.kind != Kind::SpanEnd;
                te.extend_from_slice(&info.head);
            }
            Kind::AsyncBegin | Kind::AsyncEnd => {
                let pid = self.sequences[s].pid;
                let id = crate::spans::async_id(ev).unwrap_or(0);
                let uuid = if info.kind == Kind::AsyncBegin {
                    int32::encode(tag::TYPE, &TYPE_SLICE_BEGIN, &mut te);
                    let parent = crate::spans::async_parent(ev);
                    self.async_begin(pid, id, parent, info)?
                } else {
                    with_name = false;
                    int32::encode(tag::TYPE, &TYPE_SLICE_END, &mut te);
                    match self.async_end(s, pid, id, info.name_iid, ev.time_ns)? {
                        Some((uuid, above)) => {
                            moved = above;
                            uuid
                        }
                        None => {
                            self.te_buf = te;
                            return Ok(false);
                        }
                    }
                };
                uint64::encode(tag::TRACK_UUID, &uuid, &mut te);
            }
            Kind::SpanBegin | Kind::SpanEnd | Kind::Instant => {}
            Kind::Counter => {
                with_name = false;
                let pid = self.sequences[s].pid;
                let uuid = self.counter_track(pid, info.name_iid)?;
                int32::encode(tag::TYPE, &TYPE_COUNTER, &mut te);
                uint64::encode(tag::TRACK_UUID, &uuid, &mut te);
                let Some((int, dbl)) = ev.event.field(0).and_then(counter_value) else {
                    // A counter without a numeric value has nothing to plot.
                    self.te_buf = te;
                    return Ok(true);
                };
                if let Some(v) = int {
                    int64::encode(tag::COUNTER_VALUE, &v, &mut te);
                }
                if let Some(v) = dbl {
                    double::encode(tag::DOUBLE_COUNTER_VALUE, &v, &mut te);
                }
            }
        }
        if with_name && !thread_slice && info.kind != Kind::Instant {
            uint64::encode(tag::NAME_IID, &info.name_iid, &mut te);
            uint64::encode(tag::CATEGORY_IIDS, &info.cat_iid, &mut te);
        }
        self.value_refs.clear();
        if info.kind != Kind::Counter {
            for ((_, v), &iid) in ev.event.fields().zip(&info.field_iids) {
                let mut a = DebugAnnotation {
                    name_iid: Some(iid),
                    ..Default::default()
                };
                match v {
                    Value::F64(x) => a.double_value = Some(x),
                    Value::Bool(x) => a.bool_value = Some(x),
                    Value::Str(x) => {
                        let intern = x.len() >= MIN_INTERNED_LEN
                            && (self.values.names.len() < MAX_INTERNED_VALUES
                                || self.values.ids.contains_key(x));
                        if intern {
                            let iid = self.values.iid(x);
                            self.value_refs.push(iid);
                            a.string_value_iid = Some(iid);
                        } else {
                            a.string_value = Some(x.to_string());
                        }
                    }
                    // The integers, of every width: exactly one of the two is set.
                    _ => {
                        a.uint_value = v.as_u64();
                        a.int_value = v.as_i64();
                    }
                }
                message::encode(tag::DEBUG_ANNOTATIONS, &a, &mut te);
            }
        }
        let interned = if info.kind == Kind::Counter {
            None
        } else {
            self.intern(s, info, with_name)
        };
        self.emit(s, ev.time_ns, te, interned)?;
        if !moved.is_empty() {
            let pid = self.sequences[s].pid;
            self.continue_moved(s, pid, &moved, ev.time_ns)?;
        }
        Ok(true)
    }

    /// Writes a track event (its encoded fields `te`) of sequence `s` at `t_ns`.
    pub(super) fn emit(
        &mut self,
        s: usize,
        t_ns: i128,
        te: Vec<u8>,
        interned: Option<InternedData>,
    ) -> io::Result<()> {
        let seq = &mut self.sequences[s];
        let delta = t_ns - seq.clock_ns;
        let (timestamp, clock) = match u64::try_from(delta) {
            Ok(d) => {
                seq.clock_ns = t_ns;
                (d, None)
            }
            // Earlier than the thread's previous event: absolute, the sequence clock unchanged.
            Err(_) => (abs_ns(t_ns), Some(CLOCK_REALTIME)),
        };
        let mut p = EventPacket {
            timestamp: Some(timestamp),
            timestamp_clock_id: clock,
            trusted_packet_sequence_id: Some(seq.id),
            sequence_flags: interned.is_some().then_some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: interned,
            track_event: Some(te),
        };
        self.buf.clear();
        // `Trace.packet`, field 1, length-delimited.
        self.buf.push(0x0a);
        let r = p
            .encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)
            .and_then(|()| self.out.write_all(&self.buf));
        self.te_buf = p.track_event.take().unwrap_or_default();
        r
    }
}
