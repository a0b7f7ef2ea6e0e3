//! Late-span captures (issue 31): at each tick the consumer reads every ring's late-span
//! words (`ring/late.rs`); each new late span is counted and, within the session's bounds
//! (`late_max` captures, `late_interval` apart), captured in `<root>/late/<n>/<pid>/` as a
//! trace of its own, with one line appended to `<root>/late/index.json`.
//!
//! * Overwrite mode: the snapshot path (`snapshot.rs`), right away: every thread's newest
//!   events, which hold the late span and as much of the time before it as the rings keep.
//! * Discard mode: the packets of every stream file that overlap
//!   `[start - late_window, end]`, copied from the session's own streams with the metadata,
//!   once the late thread's stream holds the late span (its open packet is flushed for it).
//!
//! Captures run on the consumer thread and only read rings and files: traced threads never
//! wait, and the memory used is a few words per capture waiting for its packets.

use super::flush::Flushed;
use super::Consumer;
use crate::ring::{BufState, Buffer, ConsumerKey, LateSpan, Mode};
use hushtrace_ctf::layout::{PacketHeader, METADATA_FILE, PACKET_HEADER_LEN, STREAM_PREFIX};
use hushtrace_ctf::metadata::to_tsdl;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Ticks a discard-mode capture waits for its late span's packet before it copies what the
/// streams hold.
const MAX_WAIT_TICKS: u32 = 100;

/// The late-span counters and the captures in progress.
#[derive(Debug, Default)]
pub(super) struct LateState {
    /// Per buffer instance: the late spans seen so far.
    seen: HashMap<u64, u64>,
    /// Per buffer instance: the newest `timestamp_end` written to its stream (discard mode).
    written_to: HashMap<u64, u64>,
    /// Discard-mode captures waiting for their packets.
    pending: Vec<Pending>,
    /// The counters.
    pub counts: LateCounts,
    /// Captures begun (their numbers).
    taken: u64,
    /// When the last capture began.
    last: Option<Instant>,
}

/// The late-span counters of `stats.json` and `ctl PID status` (`late_spans`,
/// `late_captured`, `late_not_captured`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LateCounts {
    /// Late spans seen.
    pub spans: u64,
    /// Late spans captured.
    pub captured: u64,
    /// Late spans not captured (past `late_max` or `late_interval`, overwritten before the
    /// consumer read them, or a capture that failed).
    pub not_captured: u64,
}

impl LateCounts {
    /// `"late_spans":S,"late_captured":C,"late_not_captured":N` (no braces).
    pub(super) fn json_fields(&self) -> String {
        format!(
            "\"late_spans\":{},\"late_captured\":{},\"late_not_captured\":{}",
            self.spans, self.captured, self.not_captured
        )
    }
}

/// A late span chosen for a capture.
#[derive(Clone, Copy, Debug)]
struct Pending {
    n: u64,
    span: LateSpan,
    instance: u64,
    tid: u32,
    waited: u32,
}

impl LateState {
    /// Notes that stream `instance` now holds everything up to `ts_end`.
    pub(super) fn wrote(&mut self, instance: u64, header: &[u8]) {
        if let Some(h) = PacketHeader::decode(header) {
            let e = self.written_to.entry(instance).or_default();
            *e = (*e).max(h.timestamp_end);
        }
    }

    /// Forgets a freed buffer.
    pub(super) fn forget(&mut self, instance: u64) {
        self.seen.remove(&instance);
        self.written_to.remove(&instance);
    }
}

impl Consumer {
    /// Reads the late spans every live ring noted since the last tick, counts them and
    /// captures those the bounds allow (overwrite mode: now; discard mode: queued for
    /// [`Consumer::finish_late_captures`]). Before the pass writes out exited threads.
    pub(super) fn check_late(&mut self, bufs: &[Arc<Buffer>]) {
        let mut found = Vec::new();
        for b in bufs.iter().filter(|b| {
            matches!(
                b.state.load(Ordering::Acquire),
                BufState::Attached | BufState::Exited | BufState::Detached
            )
        }) {
            let seen = self.late.seen.get(&b.instance).copied().unwrap_or(0);
            let (now, missed) = ConsumerKey::new(&self.right, b)
                .late_since(seen, |span| found.push((b.instance, b.ident().vtid, span)));
            if now != seen {
                self.late.seen.insert(b.instance, now);
            }
            self.late.counts.spans += missed;
            self.late.counts.not_captured += missed;
        }
        let cfg = &self.shared.cfg.late;
        let (max, interval) = (cfg.max, cfg.interval);
        for (instance, tid, span) in found {
            self.late.counts.spans += 1;
            let due = self.late.last.is_none_or(|t| t.elapsed() >= interval);
            if self.late.taken >= max || !due {
                self.late.counts.not_captured += 1;
                continue;
            }
            self.late.taken += 1;
            self.late.last = Some(Instant::now());
            let p = Pending {
                n: self.late.taken,
                span,
                instance,
                tid,
                waited: 0,
            };
            if self.shared.cfg.mode == Mode::Overwrite {
                let r = self
                    .late_dir(p.n)
                    .and_then(|d| self.snapshot_numbered(p.n, Some(d)).map(|_| ()));
                self.late_done(&p, r);
            } else {
                self.late.pending.push(p);
            }
        }
    }

    /// Discard mode: writes the queued captures whose late span reached its stream file
    /// (flushing the late thread's open packet for it), after the pass wrote the packets.
    /// In the last pass (`last`) every stream is complete: nothing waits.
    pub(super) fn finish_late_captures(&mut self, bufs: &[Arc<Buffer>], last: bool) {
        if self.late.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.late.pending);
        for mut p in pending {
            if !self.late_written(&p) {
                if let Some(b) = bufs.iter().find(|b| b.instance == p.instance) {
                    let _: Flushed = self.flush_one(b);
                }
            }
            if !last && !self.late_written(&p) && p.waited < MAX_WAIT_TICKS {
                p.waited += 1;
                self.late.pending.push(p);
                continue;
            }
            let r = self.copy_range(&p);
            self.late_done(&p, r);
        }
    }

    /// Whether the late span's stream file holds its end (and the `hushtrace:late` event
    /// after it), or the thread's buffer was written out completely.
    fn late_written(&self, p: &Pending) -> bool {
        self.late
            .written_to
            .get(&p.instance)
            .is_some_and(|&t| t > p.span.end)
    }

    /// `<root>/late/<n>`, created.
    fn late_dir(&mut self, n: u64) -> Result<PathBuf, String> {
        let mut inner = self.shared.inner.lock();
        let root = inner.root.path().join("late");
        let mut late = inner
            .root
            .open_or_create_subdir("late")
            .map_err(|e| format!("{}: {e}", root.display()))?;
        drop(inner);
        let d = late
            .open_or_create_subdir(&n.to_string())
            .map_err(|e| format!("{}: {e}", late.path().join(n.to_string()).display()))?;
        Ok(d.path().to_path_buf())
    }

    /// Discard mode: copies the packets of every stream that overlap `[start - window, end]`
    /// and the metadata into `<root>/late/<n>/<pid>/`.
    fn copy_range(&mut self, p: &Pending) -> Result<(), String> {
        if self.shared.cfg.relay_only {
            return Err("relay-only session: no local streams to copy".into());
        }
        let window = crate::late::ns_to_ticks(
            u64::try_from(self.shared.cfg.late.window.as_nanos()).unwrap_or(u64::MAX),
        )
        .unwrap_or(0);
        let (from, to) = (p.span.start.saturating_sub(window), p.span.end);
        let parent = self.late_dir(p.n)?;
        let pid = self.shared.pid.load(Ordering::Relaxed).to_string();
        let out = parent.join(&pid);
        let err = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
        std::fs::create_dir_all(&out).map_err(|e| err(&out, e))?;
        let src = self.dir.path().to_path_buf();
        let names = self.dir.entries().map_err(|e| err(&src, e))?;
        for (name, is_dir) in names {
            if is_dir || !name.starts_with(STREAM_PREFIX) {
                continue;
            }
            copy_packets(&src.join(&name), &out.join(&name), from, to)
                .map_err(|e| err(&src.join(&name), e))?;
        }
        // Like a snapshot's: readers take the capture for a complete trace of its interval,
        // not for a crashed process's (it has no statistics file).
        let marker = out.join(hushtrace_ctf::reader::SNAPSHOT_MARKER);
        std::fs::write(&marker, b"snapshot\n").map_err(|e| err(&marker, e))?;
        let meta = out.join(METADATA_FILE);
        std::fs::write(&meta, to_tsdl(&self.trace_desc())).map_err(|e| err(&meta, e))
    }

    /// Counts a capture's result and appends its line to `<root>/late/index.json`.
    fn late_done(&mut self, p: &Pending, r: Result<(), String>) {
        let r = r.and_then(|()| self.append_index(p));
        match r {
            Ok(()) => self.late.counts.captured += 1,
            Err(e) => {
                self.late.counts.not_captured += 1;
                eprintln!("hushtrace: late-span capture {} not written: {e}", p.n);
            }
        }
    }

    fn append_index(&mut self, p: &Pending) -> Result<(), String> {
        let clock = crate::clock::calibrate();
        let span = hushtrace_core::all_callsites()
            .nth(usize::from(p.span.callsite))
            .map_or_else(|| format!("#{}", p.span.callsite), |cs| cs.full_name());
        let mut line = String::from("{\"n\":");
        line.push_str(&p.n.to_string());
        line.push_str(",\"span\":");
        json_str(&mut line, &span);
        line.push_str(&format!(
            ",\"pid\":{},\"tid\":{},\"start_ns\":{},\"duration_ns\":{},\"deadline_ns\":{},\
             \"dir\":\"late/{}\"}}\n",
            self.shared.pid.load(Ordering::Relaxed),
            p.tid,
            clock.to_epoch_ns(p.span.start),
            crate::late::ticks_to_ns(p.span.end.saturating_sub(p.span.start)),
            crate::late::deadline_ns(p.span.callsite),
            p.n
        ));
        let path = self.shared.inner.lock().root.path().join("late/index.json");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // One write of the whole line: processes sharing the directory append whole lines.
        f.write_all(line.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Appends to `dst` the packets of the stream file `src` whose time overlaps `[from, to]`.
fn copy_packets(src: &Path, dst: &Path, from: u64, to: u64) -> std::io::Result<()> {
    let mut f = std::fs::File::open(src)?;
    let len = f.metadata()?.len();
    let mut out: Option<std::fs::File> = None;
    let mut off = 0u64;
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    let mut packet = Vec::new();
    while off + PACKET_HEADER_LEN as u64 <= len {
        f.seek(SeekFrom::Start(off))?;
        f.read_exact(&mut hdr)?;
        let Some(h) = PacketHeader::decode(&hdr) else {
            break;
        };
        let size = h.packet_size / 8;
        if size < PACKET_HEADER_LEN as u64 || off + size > len {
            break; // a packet being written, or not a packet: stop at the last complete one
        }
        if h.timestamp_end >= from && h.timestamp_begin <= to {
            packet.resize(size as usize, 0);
            f.seek(SeekFrom::Start(off))?;
            f.read_exact(&mut packet)?;
            let o = match &mut out {
                Some(o) => o,
                None => out.insert(std::fs::File::create(dst)?),
            };
            o.write_all(&packet)?;
        }
        off += size;
    }
    Ok(())
}

/// `s` as a JSON string.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}
