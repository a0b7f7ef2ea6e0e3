//! The relay's sender thread (`hushtrace-relay`): takes the queued messages in batches,
//! sends them on its connection ([`super::conn::Conn`]) and reports the fates of the packets.

use super::super::{Handed, RelayFailure};
use super::conn::Conn;
use super::link::{Link, Msg};
use hushtrace_ctf::metadata::TraceDesc;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The sender thread: sends the queued messages to the relay in batches, collects the relay's
/// answers after each batch, and closes the relay session at the end.
pub(super) fn send_loop(mut conn: Conn, link: &Link) {
    let mut desc: Option<Arc<TraceDesc>> = None;
    let mut desc_gen = 0;
    let mut sent_gen = 0;
    let mut wanted: HashSet<u64> = HashSet::new();
    let mut connections = conn.connections();
    let mut results = Vec::new();
    let mut spare = Vec::new();
    loop {
        let (batch, closing) = {
            let mut st = link.lock();
            st.free.append(&mut spare);
            st.free.truncate(64);
            st.results.append(&mut results);
            loop {
                if st.abandoned {
                    return;
                }
                if !st.queue.is_empty() || st.closing {
                    break;
                }
                link.busy.store(false, Ordering::Relaxed);
                st = link
                    .work
                    .wait_timeout(st, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            link.busy.store(true, Ordering::Relaxed);
            link.note_progress();
            if st.desc_gen != desc_gen {
                desc_gen = st.desc_gen;
                desc = st.desc.clone();
            }
            (std::mem::take(&mut st.queue), st.closing)
        };
        // New event classes (a new connection sends them all itself).
        if sent_gen != desc_gen {
            if let Some(d) = &desc {
                conn.metadata(d);
            }
            sent_gen = desc_gen;
        }
        let mut bytes_done = 0;
        for msg in batch {
            match msg {
                Msg::Packet {
                    instance,
                    bytes,
                    events,
                } => {
                    match &desc {
                        Some(d) => conn.packet(instance, &bytes, events, d),
                        None => conn.not_sent(Handed { instance, events }),
                    }
                    bytes_done += bytes.len();
                    spare.push(bytes);
                }
                Msg::Announce(i) => {
                    wanted.insert(i);
                    conn.announce(i);
                }
                Msg::Forget(i) => {
                    wanted.remove(&i);
                }
                Msg::Beacon(i, ts) => conn.beacon(i, ts),
            }
            link.note_progress();
            if conn.connected() {
                link.connected.store(true, Ordering::Relaxed);
            }
            // A new connection: its streams are announced again.
            if conn.connections() != connections && conn.connected() {
                connections = conn.connections();
                for &i in &wanted {
                    conn.announce(i);
                }
            }
        }
        conn.settle(|o| results.push(o));
        link.note_progress();
        {
            let mut st = link.lock();
            st.queued_bytes = st.queued_bytes.saturating_sub(bytes_done);
        }
        if closing && link.lock().queue.is_empty() {
            let r = conn.close();
            let mut st = link.lock();
            if !st.abandoned {
                st.results.append(&mut results);
                st.close_error = r.err().map(RelayFailure::Close);
                st.finished = true;
                link.finished.notify_all();
            }
            return;
        }
    }
}
