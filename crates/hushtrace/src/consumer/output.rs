//! A packet the ring handed over (drained or finished), on its way to every output: as it is,
//! or renumbered and cut after the flush of idle threads
//! (`hushtrace_ctf::partial::rest_of_packet`, shared with crash recovery). The body is never
//! copied here: a renumbered packet is a new header plus the ring's bytes.

use super::sink::{Fate, Handed, Packet};
use super::Consumer;
use crate::ring::{Buffer, ConsumerKey};
use hushtrace_ctf::layout::{
    read_u64, OFF_EVENTS_DISCARDED, OFF_PACKET_SEQ_NUM, PACKET_HEADER_LEN,
};
use hushtrace_ctf::partial::rest_of_packet;

impl Consumer {
    /// Writes one packet of `b` that the ring handed over ([`super::flush::StreamOut`]).
    pub(super) fn write_packet(&mut self, b: &Buffer, bytes: &[u8], events: u64) {
        let st = self.out.entry(b.instance).or_default();
        let seq = read_u64(bytes, OFF_PACKET_SEQ_NUM).unwrap_or(0);
        st.discarded = read_u64(bytes, OFF_EVENTS_DISCARDED).unwrap_or(0);
        if st.renumber.unchanged(seq) || bytes.len() < PACKET_HEADER_LEN {
            let (header, body) = bytes.split_at(bytes.len().min(PACKET_HEADER_LEN));
            return self.deliver(&Packet {
                instance: b.instance,
                header,
                body,
                events,
            });
        }
        let rest = rest_of_packet(bytes, &st.renumber);
        let mut events = events;
        if rest.cut {
            events = events.saturating_sub(st.shipped_events);
            st.renumber.shipped = None;
            st.shipped_events = 0;
            ConsumerKey::new(&self.right, b).set_flush_state(st.renumber.extra, None);
        }
        self.deliver(&Packet {
            instance: b.instance,
            header: &rest.header,
            body: &bytes[rest.body],
            events,
        });
    }

    /// Hands one packet to every output and counts its events by the outputs whose record
    /// counts ([`super::sink::Sink::counts`]): written, or lost with the error noted. Pending
    /// fates (the relay's) are counted when they are reported (`settle_sinks`).
    pub(super) fn deliver(&mut self, p: &Packet<'_>) {
        // A callsite may have published its types after this pass began: a live output must
        // know an event's class before the packet that holds it.
        if self.metadata_stale() && self.sinks.iter().any(|s| s.metadata_first()) {
            if let Err(e) = self.write_metadata() {
                self.note_error(e);
            }
        }
        self.late.wrote(p.instance, p.header);
        let handed = Handed {
            instance: p.instance,
            events: p.events,
        };
        for s in &mut self.sinks {
            let fate = s.packet(p);
            if !s.counts() {
                continue;
            }
            match fate {
                Fate::Delivered => self.tally.count(&self.shared, handed.fate(true)),
                Fate::Failed(e) => {
                    self.shared.note_error(e);
                    self.tally.count(&self.shared, handed.fate(false));
                }
                Fate::Pending | Fate::Skipped => {}
            }
        }
    }

    /// Collects the fates the outputs reported (never waits); counts them for the outputs
    /// whose record counts.
    pub(super) fn settle_sinks(&mut self) {
        for s in &mut self.sinks {
            let counts = s.counts();
            s.settle(&mut |o| {
                if counts {
                    self.tally.count(&self.shared, o);
                }
            });
        }
    }
}
