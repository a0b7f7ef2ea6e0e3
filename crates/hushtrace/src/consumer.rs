//! The in-process consumer: a thread that wakes on the read timer (or when a thread that allows
//! system calls hands over a packet), writes full packets to one stream file per buffer, drains
//! and recycles the buffers of exited threads, keeps the TSDL metadata current and, when the
//! session stops, flushes everything.

mod ctl;

use crate::clock;
use crate::config::Error;
use crate::control::{self, Request};
use crate::platform::{self, SignalBlock};
use crate::relay_sink::RelaySink;
use crate::ring::{BufState, Buffer, ConsumerKey, Mode};
use crate::state::{self, ConsumerThread, Shared};
use crate::tracedir::{Dir, TraceFiles};
use hushtrace_core::all_callsites;
use hushtrace_ctf::layout::{
    read_u64, METADATA_FILE, OFF_CONTENT_SIZE, OFF_EVENTS_DISCARDED, OFF_PACKET_SEQ_NUM,
    OFF_PACKET_SIZE, OFF_TIMESTAMP_BEGIN, OFF_TIMESTAMP_END, PACKET_HEADER_LEN, STREAM_PREFIX,
};
use hushtrace_ctf::metadata::{to_tsdl, EventClass, TraceDesc};
use hushtrace_ctf::stats::ProcessStats;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Name of the consumer thread.
pub(crate) const CONSUMER_THREAD_NAME: &str = "hushtrace-consumer";

/// The longest wait between two passes while control clients are being served.
const CONTROL_POLL: Duration = Duration::from_millis(20);

/// Buffers of exited threads kept for reuse; beyond this they are freed.
const POOL_MAX: usize = 64;

#[derive(Debug)]
pub(crate) struct Consumer {
    shared: Arc<Shared>,
    files: TraceFiles,
    types_gen: Option<u64>,
    /// The control socket (`hushtrace ctl`), if one could be bound.
    control: Option<control::Server>,
    /// Events written per stream instance (for `status`).
    written_by_stream: std::collections::HashMap<u64, u64>,
    /// Snapshots taken by this process.
    snapshots: u64,
    /// The relay daemon this process's trace also goes to, if the session has one.
    relay: Option<RelaySink>,
    /// The metadata as of `types_gen` (the relay's metadata and the flush's event sizes).
    desc: TraceDesc,
    /// Per stream: what the flush of open packets changed in the packets written.
    out: std::collections::HashMap<u64, StreamOut>,
    /// When the flush last looked at the open packets.
    last_flush: Instant,
    /// Reused packet copy.
    scratch: Vec<u8>,
    /// The right to call the rings' consumer methods (`ring::ConsumerKey`).
    key: ConsumerKey,
}

/// The flush of idle threads, per stream (buffer instance).
///
/// The flush ships the complete events of an open packet as a packet of their own, and when
/// the producer later finalizes that packet, ships only its remaining events, under the same
/// header with its begin time moved to the last shipped event. Every packet written after a
/// flushed one therefore has its `packet_seq_num` raised by the number of packets the flush
/// added (`extra`), so each stream's sequence numbers still rise by one per packet (readers
/// count gaps as lost packets), and nothing is written twice. Timestamps stay ordered: events
/// are placed in a packet in timestamp order, and a flushed packet ends at its last event's
/// timestamp, where the next part begins.
#[derive(Debug, Default)]
struct StreamOut {
    /// Packets the flush added so far (added to the ring's sequence numbers).
    extra: u64,
    /// The open packet flushed in part: its ring sequence number, how far (bytes from the
    /// packet start) and how many events were shipped, and the last shipped event's time.
    partial: Option<Partial>,
    /// `events_discarded` of the last packet written.
    discarded: u64,
    /// `done` seen by the last flush pass (for idle detection: live beacons).
    last_done: Option<(u64, usize)>,
}

#[derive(Clone, Copy, Debug)]
struct Partial {
    seq: u64,
    off: usize,
    events: u64,
    last_ts: u64,
}

impl Consumer {
    /// Creates this process's trace directory (`<root>/<pid>`, or `<pid>.<n>` if an earlier
    /// process with the same pid — e.g. before an `exec` — or an earlier session of this process
    /// already has it), relative to the session root's descriptor, and writes the metadata.
    pub(crate) fn create(shared: Arc<Shared>) -> Result<Consumer, Error> {
        let pid = shared.pid.load(Ordering::Relaxed);
        let dir = {
            let mut inner = shared.inner.lock();
            let inner = &mut *inner;
            let root_path = inner.root.path().to_path_buf();
            let mut next = state::next_suffix();
            let dir = inner
                .root
                .create_subdir(&pid.to_string(), &mut next)
                .map_err(|source| Error::Io {
                    path: root_path.join(pid.to_string()),
                    source,
                })?;
            state::set_next_suffix(next);
            inner.trace_dir = dir.path().to_path_buf();
            dir
        };
        let mut dir = dir;
        // Rings in files that outlive the process (`hushtrace recover`): see `ringdir.rs`.
        let rings = crate::ringdir::setup(&mut dir, pid);
        shared.inner.lock().rings = rings;
        let control = control::Server::bind(pid).ok();
        let root = shared.inner.lock().root.path().to_path_buf();
        let dir_name = dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| pid.to_string());
        let relay = RelaySink::new(&shared.cfg, &root, &dir_name);
        let mut c = Consumer {
            shared,
            files: TraceFiles::new(dir),
            types_gen: None,
            control,
            written_by_stream: std::collections::HashMap::new(),
            snapshots: 0,
            relay,
            desc: TraceDesc {
                uuid: [0; 16],
                clock_uuid: [0; 16],
                clock: clock::calibrate().clone(),
                vpid: 0,
                procname: String::new(),
                hostname: String::new(),
                events: Vec::new(),
            },
            out: std::collections::HashMap::new(),
            last_flush: Instant::now(),
            scratch: Vec::new(),
            // SAFETY: a session has one consumer at a time (`ensure_running` starts it once;
            // a stop without a consumer thread creates its own for the final pass), and it
            // finishes and recycles only quiescent buffers (`cycle`).
            key: unsafe { ConsumerKey::new() },
        };
        c.write_metadata()?;
        Ok(c)
    }

    /// Session start: connects to the relay (if the session has one); the error says why it
    /// cannot be used. A fork child's consumer connects on its first pass instead, and retries
    /// with backoff.
    pub(crate) fn connect_relay(&mut self) -> Result<(), Error> {
        match self.relay.as_mut() {
            Some(r) => r.connect_now(&self.desc),
            None => Ok(()),
        }
    }

    fn write_metadata(&mut self) -> Result<(), Error> {
        let gen = hushtrace_core::types_generation();
        self.desc = self.trace_desc();
        if let Some(r) = self.relay.as_mut() {
            r.metadata(&self.desc);
        }
        let text = to_tsdl(&self.desc);
        self.files
            .dir
            .replace_file(METADATA_FILE, text.as_bytes())
            .map_err(|source| Error::Io {
                path: self.files.dir.path().join(METADATA_FILE),
                source,
            })?;
        self.types_gen = Some(gen);
        Ok(())
    }

    /// The description of this process's trace, listing every callsite.
    fn trace_desc(&self) -> TraceDesc {
        let events = all_callsites()
            .enumerate()
            .map(|(i, cs)| EventClass {
                id: i as u16,
                name: cs.full_name(),
                kind: cs.kind,
                fields: cs.types().map(|t| {
                    cs.field_names
                        .iter()
                        .map(|n| n.to_string())
                        .zip(t)
                        .collect()
                }),
            })
            .collect();
        let desc = TraceDesc {
            uuid: self.shared.inner.lock().uuid,
            clock_uuid: self.shared.clock_uuid,
            clock: crate::clock::calibrate().clone(),
            vpid: self.shared.pid.load(Ordering::Relaxed),
            procname: platform::process_name(),
            hostname: platform::hostname(),
            events,
        };
        desc
    }

    /// Takes the snapshots requested by `hushtrace::snapshot()` since the last pass (one
    /// snapshot answers every pending request).
    fn take_requested_snapshots(&mut self) {
        let (taken, requested) = state::pending_snapshots();
        if requested <= taken {
            return;
        }
        let r = self.snapshot_numbered(requested, None);
        let mut inner = self.shared.inner.lock();
        if inner.snapshot_results.len() >= 64 {
            drop(inner.snapshot_results.remove(0));
        }
        inner.snapshot_results.push((requested, r));
        drop(inner);
        state::snapshots_taken(requested);
    }

    /// A snapshot for `hushtrace ctl PID snapshot [DIR]`.
    fn snapshot(&mut self, dir: Option<std::path::PathBuf>) -> Result<std::path::PathBuf, String> {
        self.snapshots += 1;
        let n = 1_000_000 + self.snapshots; // apart from the numbers of snapshot() requests
        self.snapshot_numbered(n, dir)
    }

    /// Writes the newest contents of every attached ring as a complete CTF trace in
    /// `<dir>/<pid>/` (`dir` defaults to `<session dir>/snapshots/<n>`), without stopping
    /// tracing. Returns that directory.
    fn snapshot_numbered(
        &mut self,
        n: u64,
        dir: Option<std::path::PathBuf>,
    ) -> Result<std::path::PathBuf, String> {
        if self.shared.cfg.mode != Mode::Overwrite {
            return Err(crate::config::Error::NeedsOverwriteMode.to_string());
        }
        let pid = self.shared.pid.load(Ordering::Relaxed).to_string();
        let err = |what: &std::path::Path, e: std::io::Error| format!("{}: {e}", what.display());
        let mut parent = match dir {
            Some(d) => Dir::open_root(&d).map_err(|e| err(&d, e))?,
            None => {
                let mut inner = self.shared.inner.lock();
                let snaps = inner
                    .root
                    .open_or_create_subdir("snapshots")
                    .map_err(|e| err(&inner.root.path().join("snapshots"), e))?;
                drop(inner);
                let mut snaps = snaps;
                snaps
                    .open_or_create_subdir(&n.to_string())
                    .map_err(|e| err(&snaps.path().join(n.to_string()), e))?
            }
        };
        let mut next = 0;
        let out = parent
            .create_subdir(&pid, &mut next)
            .map_err(|e| err(&parent.path().join(&pid), e))?;
        let path = out.path().to_path_buf();
        let mut files = TraceFiles::new(out);
        let desc = self.trace_desc();
        // Readers do not take a snapshot (no statistics file) for a crashed process's trace.
        let _ = files
            .dir
            .replace_file(hushtrace_ctf::reader::SNAPSHOT_MARKER, b"snapshot\n");
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        let live = |b: &&Arc<Buffer>| b.state.load(Ordering::Acquire) == BufState::Attached;
        // Every thread's complete events up to now, idle or not: its newest committed packets
        // and the complete part of its open packet (`ring/snapshot.rs`).
        let mut failed = None;
        for b in bufs.iter().filter(live) {
            let name = format!("{STREAM_PREFIX}{}", b.instance);
            b.copy_newest(&self.key, &desc, |bytes, _events| {
                if let Err(e) = files.append(b.instance, &name, bytes) {
                    failed.get_or_insert_with(|| err(&path.join(&name), e));
                }
            });
        }
        files.close_all();
        // The metadata last: a callsite whose types were published while the rings were
        // copied may have events in the copied packets, and `desc` (taken before) lacks it.
        files
            .dir
            .replace_file(METADATA_FILE, to_tsdl(&self.trace_desc()).as_bytes())
            .map_err(|e| err(&path.join(METADATA_FILE), e))?;
        match failed {
            Some(e) => Err(e),
            None => Ok(path),
        }
    }

    fn note_error(&self, e: impl std::fmt::Display) {
        self.shared.note_error(e);
    }

    /// Writes one packet of `b` that the ring handed over (drained or finished): as it is, or
    /// renumbered and, if the flush shipped its first events already, only the rest
    /// ([`StreamOut`]).
    fn write_packet(&mut self, b: &Buffer, bytes: &[u8], events: u64) {
        let st = self.out.entry(b.instance).or_default();
        let seq = read_u64(bytes, OFF_PACKET_SEQ_NUM).unwrap_or(0);
        let discarded = read_u64(bytes, OFF_EVENTS_DISCARDED).unwrap_or(0);
        let partial = st.partial.filter(|p| p.seq == seq);
        if partial.is_none() && st.extra == 0 {
            st.discarded = discarded;
            return self.deliver(b.instance, bytes, events);
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let mut events = events;
        match partial {
            Some(p) => {
                out.extend_from_slice(&bytes[..PACKET_HEADER_LEN]);
                out.extend_from_slice(bytes.get(p.off..).unwrap_or(&[]));
                put(&mut out, OFF_TIMESTAMP_BEGIN, p.last_ts);
                let end = read_u64(bytes, OFF_TIMESTAMP_END)
                    .unwrap_or(0)
                    .max(p.last_ts);
                put(&mut out, OFF_TIMESTAMP_END, end);
                let bits = out.len() as u64 * 8;
                put(&mut out, OFF_CONTENT_SIZE, bits);
                put(&mut out, OFF_PACKET_SIZE, bits);
                events = events.saturating_sub(p.events);
                st.partial = None;
                b.set_flush_state(&self.key, st.extra, None);
            }
            None => out.extend_from_slice(bytes),
        }
        put(&mut out, OFF_PACKET_SEQ_NUM, seq + st.extra);
        st.discarded = discarded;
        self.deliver(b.instance, &out, events);
        self.scratch = out;
    }

    /// The flush of idle threads (discard mode): ships the complete events of each live
    /// buffer's open packet that were not shipped yet as a packet of their own, and sends live
    /// beacons for streams with nothing new. See [`StreamOut`].
    fn flush_open_packets(&mut self, bufs: &[Arc<Buffer>]) {
        let every = self.shared.cfg.flush_interval;
        let wanted = self.relay.is_some() || self.shared.cfg.flush_explicit;
        if !wanted || every.is_zero() || self.shared.cfg.mode != Mode::Discard {
            return;
        }
        // Twice per interval: an event waits at most about one interval.
        if self.last_flush.elapsed() < every / 2 {
            return;
        }
        self.last_flush = Instant::now();
        // Read before any `done`: no event completed after this time is in a flushed packet.
        let now = clock::cycles_or_fallback();
        let mut idle = Vec::new();
        for b in bufs {
            if b.state.load(Ordering::Acquire) != BufState::Attached {
                idle.push(b.instance);
                continue;
            }
            let Some(open) = b.open_packet(&self.key) else {
                idle.push(b.instance);
                continue;
            };
            let st = self.out.entry(b.instance).or_default();
            if st.partial.is_some_and(|p| p.seq != open.seq) {
                continue; // the earlier packet's rest is not written yet
            }
            let done = (open.seq, PACKET_HEADER_LEN + open.events.len());
            let moved = st.last_done != Some(done);
            st.last_done = Some(done);
            let prev = st.partial.filter(|p| p.seq == open.seq);
            let from = prev.map_or(PACKET_HEADER_LEN, |p| p.off);
            let body = open.events.get(from - PACKET_HEADER_LEN..).unwrap_or(&[]);
            // The stream's clock where `body` starts: the packet's begin time, or the last
            // event shipped of it (compact headers are relative to it).
            let begin = prev.map_or_else(
                || read_u64(&open.header, OFF_TIMESTAMP_BEGIN).unwrap_or(0),
                |p| p.last_ts,
            );
            let w = self.desc.walk_events(body, begin);
            let (len, n, last_ts) = (w.len, w.events, w.clock);
            if n == 0 {
                if !moved {
                    idle.push(b.instance);
                }
                continue;
            }
            let mut out = std::mem::take(&mut self.scratch);
            out.clear();
            out.extend_from_slice(&open.header);
            out.extend_from_slice(&body[..len]);
            put(&mut out, OFF_TIMESTAMP_BEGIN, begin);
            put(&mut out, OFF_TIMESTAMP_END, last_ts.max(begin));
            let bits = out.len() as u64 * 8;
            put(&mut out, OFF_CONTENT_SIZE, bits);
            put(&mut out, OFF_PACKET_SIZE, bits);
            put(&mut out, OFF_PACKET_SEQ_NUM, open.seq + st.extra);
            put(&mut out, OFF_EVENTS_DISCARDED, st.discarded);
            st.extra += 1;
            st.partial = Some(Partial {
                seq: open.seq,
                off: from + len,
                events: prev.map_or(0, |p| p.events) + n,
                last_ts: last_ts.max(begin),
            });
            b.set_flush_state(
                &self.key,
                st.extra,
                Some((open.seq, (from + len) as u64, last_ts.max(begin))),
            );
            self.deliver(b.instance, &out, n);
            self.scratch = out;
        }
        if let Some(r) = self.relay.as_mut() {
            for instance in r.instances() {
                if idle.contains(&instance) {
                    r.beacon(instance, now);
                }
            }
        }
    }

    /// Writes one packet to its stream file (created on first use) and hands a copy to the
    /// relay's sender (which never waits). A failed write is recorded as the session's I/O
    /// error and the packet's events counted lost (the stream is cut back to its last complete
    /// packet). The relay's copy counts its own losses ([`RelaySink`]); in relay-only mode,
    /// where there is no local copy, the events count as written once the relay has them and
    /// as lost when it could not get them.
    fn deliver(&mut self, instance: u64, bytes: &[u8], events: u64) {
        let relay_only = self.relay.is_some() && self.shared.cfg.relay_only;
        let name = format!("{STREAM_PREFIX}{instance}");
        let local = relay_only
            || match self.files.append(instance, &name, bytes) {
                Ok(()) => true,
                Err(e) => {
                    self.note_error(format!(
                        "{}: {e}",
                        self.files.dir.path().join(&name).display()
                    ));
                    false
                }
            };
        // A callsite may have published its types after this pass began: the relay must know
        // an event's class before the packet that holds it.
        if self.relay.is_some() && self.types_gen != Some(hushtrace_core::types_generation()) {
            if let Err(e) = self.write_metadata() {
                self.note_error(e);
            }
        }
        if !relay_only {
            self.count(instance, events, local);
        }
        if let Some(r) = self.relay.as_mut() {
            // Relay-only: counted when the relay answers (`settle_relay`).
            r.packet(instance, bytes, events);
        }
    }

    /// Counts a packet's events as written (`delivered`) or lost.
    fn count(&mut self, instance: u64, events: u64, delivered: bool) {
        if delivered {
            *self.written_by_stream.entry(instance).or_default() += events;
            self.shared.written.fetch_add(events, Ordering::Relaxed);
        } else {
            self.shared.lost.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// Collects the fates the relay's sender reported (never waits for it); in relay-only
    /// mode, counts their events.
    fn settle_relay(&mut self) {
        let Some(mut r) = self.relay.take() else {
            return;
        };
        let relay_only = self.shared.cfg.relay_only;
        r.settle(|instance, events, delivered| {
            if relay_only {
                self.count(instance, events, delivered)
            }
        });
        r.watch();
        self.relay = Some(r);
    }

    /// One pass over all buffers. `last` = the session is stopping and every buffer is
    /// quiescent.
    fn cycle(&mut self, last: bool) {
        if !last {
            self.serve_control();
            self.take_requested_snapshots();
        }
        if self.types_gen != Some(hushtrace_core::types_generation()) {
            if let Err(e) = self.write_metadata() {
                self.note_error(e);
            }
        }
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        if !last {
            if let Some(r) = self.relay.as_mut() {
                for b in bufs
                    .iter()
                    .filter(|b| b.state.load(Ordering::Acquire) == BufState::Attached)
                {
                    r.announce(b.instance);
                }
            }
        }
        let key = self.key;
        for b in &bufs {
            match b.state.load(Ordering::Acquire) {
                BufState::Attached if last => b.finish(&key, |p, n| self.write_packet(b, p, n)),
                BufState::Attached if self.shared.cfg.mode == Mode::Discard => {
                    b.drain(&key, |p, n| self.write_packet(b, p, n));
                }
                BufState::Exited => {
                    b.finish(&key, |p, n| self.write_packet(b, p, n));
                    b.recycle(&key);
                    state::exited_buffer_done();
                }
                // Only once the stop has quiesced the producers (it sets `stop` after that).
                BufState::Detached if last => b.finish(&key, |p, n| self.write_packet(b, p, n)),
                _ => {}
            }
        }
        if !last {
            self.flush_open_packets(&bufs);
        }
        self.settle_relay();
        // Free abandoned buffers and pooled buffers beyond the pool size; their loss counts
        // move to the session (abandoned ones belong to the parent process: not counted).
        let mut retired = Vec::new();
        let mut inner = self.shared.inner.lock();
        let mut pooled = 0;
        inner.buffers.retain(|b| {
            let keep = match b.state.load(Ordering::Acquire) {
                BufState::Abandoned => false,
                BufState::Pooled => {
                    pooled += 1;
                    pooled <= POOL_MAX
                }
                _ => true,
            };
            if !keep {
                retired.push(b.clone());
            }
            keep
        });
        drop(inner);
        for b in retired {
            if b.state.load(Ordering::Acquire) == BufState::Pooled {
                self.shared.lost.fetch_add(b.lost(), Ordering::Relaxed);
                self.files.forget(b.instance);
                self.out.remove(&b.instance);
                if let Some(r) = self.relay.as_mut() {
                    r.forget(b.instance);
                }
                self.remove_ring(&b);
            }
            // Unmapped here, outside the lock.
            drop(b);
        }
    }

    /// Marks a drained buffer's ring file clean and removes it.
    fn remove_ring(&self, b: &Buffer) {
        b.mark_clean(&self.key);
        if let Some(r) = self.shared.inner.lock().rings.as_mut() {
            r.remove_file(&format!(
                "{}{}",
                hushtrace_ctf::ringfile::RING_PREFIX,
                b.instance
            ));
        }
    }

    /// After the final pass of a clean stop: every ring was drained; remove the ring files,
    /// their directory and the trace directory's pointer to it.
    fn remove_rings(&mut self) {
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        for b in bufs.iter().filter(|b| {
            !matches!(
                b.state.load(Ordering::Acquire),
                BufState::Leaked | BufState::Abandoned
            )
        }) {
            self.remove_ring(b);
        }
        let leaked = bufs
            .iter()
            .any(|b| b.state.load(Ordering::Acquire) == BufState::Leaked);
        if !leaked {
            if let Some(r) = self.shared.inner.lock().rings.take() {
                crate::ringdir::remove(r);
            }
            self.files
                .dir
                .remove_file(hushtrace_ctf::ringfile::RINGS_FILE);
        }
    }

    /// Answers pending control requests (`hushtrace ctl`).
    fn serve_control(&mut self) {
        let Some(mut server) = self.control.take() else {
            return;
        };
        server.serve(|req| match req {
            Ok(r) => self.answer(r),
            Err(e) => control::error_answer(&e),
        });
        self.control = Some(server);
    }

    fn answer(&mut self, req: Request) -> String {
        let pid = self.shared.pid.load(Ordering::Relaxed);
        match req {
            Request::Ping => format!("{{\"ok\":true,\"pid\":{pid},\"state\":\"running\"}}"),
            Request::Status => self.status_json(),
            Request::List => ctl::list_json(pid, "running"),
            Request::Start => control::error_answer("the session is running"),
            Request::Enable(g) => ctl::enable(&g, true),
            Request::Disable(g) => ctl::enable(&g, false),
            Request::Snapshot(dir) => match self.snapshot(dir) {
                Ok(path) => {
                    let mut s = String::from("{\"ok\":true,\"path\":");
                    control::json_str(&mut s, &path.display().to_string());
                    s.push('}');
                    s
                }
                Err(e) => control::error_answer(&e),
            },
            Request::Stop => match state::stop_hook() {
                Some(stop) => {
                    ctl::stop_requested(pid);
                    let s = self.shared.clone();
                    // On a thread of its own: the stop waits for this consumer to finish.
                    match platform::spawn_raw(Box::new(move || stop(&s))) {
                        Ok(_detached) => format!("{{\"ok\":true,\"pid\":{pid},\"stopping\":true}}"),
                        Err(e) => control::error_answer(&format!("cannot start the stop: {e}")),
                    }
                }
                None => control::error_answer("no session to stop"),
            },
        }
    }

    fn status_json(&self) -> String {
        let cfg = &self.shared.cfg;
        let mut s = format!(
            "{{\"ok\":true,\"pid\":{},\"session\":true,\"state\":\"running\",\"mode\":\"{}\",\"subbuf_size\":{},\
             \"num_subbufs\":{},\"read_timer_ms\":{},\"written\":{},\"discarded\":{},\"trace_dir\":",
            self.shared.pid.load(Ordering::Relaxed),
            cfg.mode,
            cfg.subbuf_size,
            cfg.num_subbufs,
            cfg.read_timer.as_millis(),
            self.shared.written.load(Ordering::Relaxed),
            self.shared.total_lost(),
        );
        control::json_str(&mut s, &self.files.dir.path().display().to_string());
        s.push_str(",\"threads\":[");
        let bufs: Vec<Arc<Buffer>> = self.shared.inner.lock().buffers.clone();
        let mut first = true;
        let mut omitted = 0u64;
        for b in bufs.iter().filter(|b| {
            matches!(
                b.state.load(Ordering::Acquire),
                BufState::Attached | BufState::Exited | BufState::Detached
            )
        }) {
            // The answer stays under the control server's size limit.
            if s.len() > control::MAX_ANSWER - 4096 {
                omitted += 1;
                continue;
            }
            let id = b.ident();
            if !first {
                s.push(',');
            }
            first = false;
            let name = String::from_utf8_lossy(
                &id.procname[..id.procname.iter().position(|&c| c == 0).unwrap_or(16)],
            )
            .into_owned();
            s.push_str(&format!(
                "{{\"stream\":{},\"vtid\":{},\"name\":",
                b.instance, id.vtid
            ));
            control::json_str(&mut s, &name);
            s.push_str(&format!(
                ",\"written\":{},\"discarded\":{}}}",
                self.written_by_stream
                    .get(&b.instance)
                    .copied()
                    .unwrap_or(0),
                b.lost()
            ));
        }
        s.push_str(&format!("],\"threads_omitted\":{omitted}}}"));
        s
    }

    /// Writes `<root>/<trace dir name>.stats.json` atomically (never a partial or empty file).
    fn write_stats(&mut self) {
        let name = self
            .files
            .dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let body = ProcessStats {
            pid: self.shared.pid.load(Ordering::Relaxed) as u64,
            written: self.shared.written.load(Ordering::Relaxed),
            discarded: self.shared.total_lost(),
        }
        .to_json();
        let file = hushtrace_ctf::stats::file_name(&name);
        let mut inner = self.shared.inner.lock();
        let r = inner.root.replace_file(&file, body.as_bytes());
        let path = inner.root.path().join(&file);
        drop(inner);
        if let Err(e) = r {
            self.note_error(format!("{}: {e}", path.display()));
        }
    }

    /// The consumer loop; returns after the final flush once the session's stop flag is set.
    pub(crate) fn run(mut self) {
        let timer = self.shared.cfg.read_timer;
        loop {
            let token = state::wakeup_token();
            let stopping = self.shared.stop.load(Ordering::Acquire);
            self.cycle(stopping);
            if stopping {
                break;
            }
            // Clients being served are moved on soon, whatever the read timer.
            let wait = match &self.control {
                Some(c) if c.busy() => timer.min(CONTROL_POLL),
                _ => timer,
            };
            state::wait_for_wakeup(token, wait);
        }
        if let Err(e) = self.write_metadata() {
            self.note_error(e);
        }
        self.files.close_all();
        if let Some(r) = self.relay.take() {
            let url = r.url();
            let relay_only = self.shared.cfg.relay_only;
            // Lost so far, and what the close reports.
            let (mut packets, mut events) = (r.lost_packets, r.lost_events);
            let closed = r.close(|instance, n, delivered| {
                if !delivered {
                    packets += 1;
                    events += n;
                }
                if relay_only {
                    self.count(instance, n, delivered);
                }
            });
            match closed {
                // Relay-only: the relay's copy is the trace.
                Err(e) if relay_only => self.note_error(format!("relay {url}: {e}")),
                Err(e) => eprintln!("hushtrace: relay {url}: {e} (the local trace is complete)"),
                Ok(()) => {}
            }
            if packets > 0 {
                eprintln!(
                    "hushtrace: {packets} packets ({events} events) could not be streamed to the \
                     relay at {url} ({})",
                    if relay_only {
                        "counted as discarded"
                    } else {
                        "the relay's copy lacks them; the local trace has them"
                    }
                );
            }
        }
        self.remove_rings();
        self.write_stats();
        if let Some(server) = self.control.take() {
            let stopped = ctl::Stopped {
                cfg: self.shared.cfg.clone(),
                trace_dir: self.files.dir.path().display().to_string(),
                written: self.shared.written.load(Ordering::Relaxed),
                discarded: self.shared.total_lost(),
            };
            ctl::park(server, self.shared.pid.load(Ordering::Relaxed), stopped);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Life cycle of the consumer thread

/// Starts the consumer thread of this process: a raw `pthread_create` (see
/// `platform::spawn_raw`), so a fork child can start it even when another thread of the parent
/// held a lock of the standard library's thread machinery at the moment of the fork. The thread
/// blocks every asynchronous signal (an application handler, which may trace, never runs on
/// it) and uses no std thread API.
pub(crate) fn spawn(c: Consumer) -> Result<ConsumerThread, Error> {
    let thread = platform::spawn_raw(Box::new(move || {
        platform::block_signals_forever();
        platform::set_thread_name(CONSUMER_THREAD_NAME);
        c.run();
    }))
    .map_err(|source| Error::Io {
        path: "hushtrace consumer thread".into(),
        source,
    })?;
    state::set_consumer_alive();
    Ok(ConsumerThread {
        pid: platform::getpid(),
        thread,
    })
}

/// Wakes the consumer after a packet hand-over (threads that allow system calls only). In the
/// child of a fork, where the consumer did not survive, starts a new one first.
pub(crate) fn wake() {
    if !state::consumer_alive() {
        ensure_running();
        return;
    }
    state::unpark_consumer();
}

/// Starts the consumer if this process has a session but no consumer (the child of a fork).
#[cold]
pub(crate) fn ensure_running() {
    if state::consumer_alive() {
        return;
    }
    let Some(s) = state::current_session() else {
        return;
    };
    if s.consumer_failed.load(Ordering::Relaxed) {
        return;
    }
    let _sig = SignalBlock::new();
    let mut slot = s.consumer.lock();
    if state::consumer_alive() {
        return;
    }
    match Consumer::create(s.clone()).and_then(spawn) {
        Ok(t) => *slot = Some(t),
        Err(e) => {
            s.note_error(e);
            s.consumer_failed.store(true, Ordering::Relaxed);
        }
    }
}

/// Above this many undrained buffers of exited threads, registering a new thread waits briefly
/// for the consumer, which bounds memory and open files when threads come and go faster than
/// the consumer runs.
const EXITED_HIGH_WATER: usize = 64;

/// Called before a new thread registers (system calls allowed): if the consumer is behind on
/// exited threads, wake it and wait up to 200 ms for it to catch up.
pub(crate) fn throttle_registration() {
    if !state::active() || state::exited_pending() <= EXITED_HIGH_WATER {
        return;
    }
    wake();
    let deadline = Instant::now() + Duration::from_millis(200);
    while state::exited_pending() > EXITED_HIGH_WATER / 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Stores `v` little-endian at `off` of a packet copy.
fn put(p: &mut [u8], off: usize, v: u64) {
    p[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
