//! The per-thread sequences: created at a thread's first event (descriptor, defaults, clock),
//! and the names each one has interned.

use super::*;

impl<W: Write> Writer<W> {
    /// The sequence of thread (`pid`, `tid`), created (descriptor, defaults, clock) at `t_ns`.
    pub(super) fn sequence(&mut self, ev: &MergedEvent<'_>) -> io::Result<usize> {
        let p = ev.event.packet;
        if let Some(&s) = self.threads.get(&(p.vpid, p.vtid)) {
            if self.sequences[s].thread_name != p.procname {
                // The thread was renamed: its track's descriptor again, with the new name.
                self.sequences[s].thread_name = p.procname.clone();
                let (track, parent) = (self.sequences[s].track, self.processes[&p.vpid]);
                self.thread_descriptor(track, parent, p.vpid, p.vtid, &p.procname)?;
            }
            return Ok(s);
        }
        let pname = if ev.desc.vpid == p.vpid {
            ev.desc.procname.as_str()
        } else {
            ""
        };
        let parent = self.process_uuid(p.vpid, pname)?;
        let uuid = self.uuid();
        self.thread_descriptor(uuid, parent, p.vpid, p.vtid, &p.procname)?;
        let id = DESCRIPTOR_SEQUENCE + 1 + self.sequences.len() as u32;
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(id),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(CLOCK_SEQUENCE),
                track_event_defaults: Some(TrackEventDefaults {
                    track_uuid: Some(uuid),
                }),
            }),
            ..Default::default()
        })?;
        let t = abs_ns(ev.time_ns);
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(id),
            timestamp: Some(t),
            timestamp_clock_id: Some(CLOCK_REALTIME),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(CLOCK_SEQUENCE),
                        timestamp: Some(0),
                        is_incremental: Some(true),
                    },
                    Clock {
                        clock_id: Some(CLOCK_REALTIME),
                        timestamp: Some(t),
                        is_incremental: None,
                    },
                ],
                primary_trace_clock: None,
            }),
            ..Default::default()
        })?;
        self.sequences.push(Sequence {
            id,
            pid: p.vpid,
            track: uuid,
            thread_name: p.procname.clone(),
            clock_ns: t as i128,
            names_sent: Vec::new(),
            cats_sent: Vec::new(),
            fields_sent: Vec::new(),
            values_sent: Vec::new(),
            classes_sent: Vec::new(),
        });
        let s = self.sequences.len() - 1;
        self.threads.insert((p.vpid, p.vtid), s);
        Ok(s)
    }

    /// Interned data for the names `info` needs that sequence `s` has not seen yet.
    pub(super) fn intern(
        &mut self,
        s: usize,
        info: &ClassInfo,
        with_name: bool,
    ) -> Option<InternedData> {
        fn mark(sent: &mut Vec<bool>, iid: u64) -> bool {
            let i = (iid - 1) as usize;
            if sent.len() <= i {
                sent.resize(i + 1, false);
            }
            !std::mem::replace(&mut sent[i], true)
        }
        let seq = &mut self.sequences[s];
        if self.value_refs.is_empty() && seq.classes_sent.get(info.index) == Some(&true) {
            return None;
        }
        if seq.classes_sent.len() <= info.index {
            seq.classes_sent.resize(info.index + 1, false);
        }
        seq.classes_sent[info.index] = true;
        let mut d = InternedData::default();
        if with_name {
            if mark(&mut seq.names_sent, info.name_iid) {
                d.event_names.push(InternedString {
                    iid: Some(info.name_iid),
                    name: Some(self.names.name(info.name_iid).to_string()),
                });
            }
            if mark(&mut seq.cats_sent, info.cat_iid) {
                d.event_categories.push(InternedString {
                    iid: Some(info.cat_iid),
                    name: Some(self.cats.name(info.cat_iid).to_string()),
                });
            }
        }
        for &f in &info.field_iids {
            if mark(&mut seq.fields_sent, f) {
                d.debug_annotation_names.push(InternedString {
                    iid: Some(f),
                    name: Some(self.fields.name(f).to_string()),
                });
            }
        }
        for &v in &self.value_refs {
            if mark(&mut seq.values_sent, v) {
                d.debug_annotation_string_values.push(InternedBytes {
                    iid: Some(v),
                    str: Some(self.values.name(v).as_bytes().to_vec()),
                });
            }
        }
        let empty = d.event_names.is_empty()
            && d.event_categories.is_empty()
            && d.debug_annotation_names.is_empty()
            && d.debug_annotation_string_values.is_empty();
        (!empty).then_some(d)
    }
}
