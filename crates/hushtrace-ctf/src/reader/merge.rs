//! K-way merge of many streams by wall-clock time.

use super::{Error, EventRef, StreamReader, Warning};
use crate::metadata::{ClockDesc, TraceDesc};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Converts cycles to epoch nanoseconds exactly like [`ClockDesc::to_epoch_ns`], with 64-bit
/// arithmetic on the common path (the i128 division is several times slower).
#[derive(Clone, Debug)]
struct Clock {
    desc: ClockDesc,
    base_ns: i128,
    fast: bool,
}

impl Clock {
    fn new(desc: &ClockDesc) -> Self {
        Clock {
            desc: desc.clone(),
            base_ns: desc.offset_s as i128 * 1_000_000_000,
            // r * 1e9 < freq * 1e9 must fit in u64.
            fast: desc.freq > 0 && desc.freq <= u64::MAX / 1_000_000_000,
        }
    }

    #[inline]
    fn to_ns(&self, cycles: u64) -> i128 {
        if self.fast {
            if let Some(total) = self.desc.offset.checked_add(cycles) {
                let f = self.desc.freq;
                let (q, r) = (total / f, total % f);
                return self.base_ns + q as i128 * 1_000_000_000 + (r * 1_000_000_000 / f) as i128;
            }
        }
        self.desc.to_epoch_ns(cycles)
    }
}

/// One event of a [`Merged`] sequence.
#[derive(Clone, Copy, Debug)]
pub struct MergedEvent<'a> {
    /// Index of its process trace (in [`super::Session::traces`] order).
    pub trace: usize,
    /// Index of its stream in [`Merged::streams`].
    pub stream: usize,
    /// The process trace's metadata.
    pub desc: &'a TraceDesc,
    /// Time in nanoseconds since the Unix epoch.
    pub time_ns: i128,
    /// The event.
    pub event: EventRef<'a>,
}

/// Stream files a [`Merged`] keeps open at once: a trace of thousands of threads is read under
/// the default limit of 1,024 descriptors. The least recently read stream is closed when
/// another must be opened, and reopened (by name, checked to be the same file) where it was.
pub const MAX_OPEN_STREAMS: usize = 256;

/// All events of many streams in time order (ties broken by stream order, so the output is
/// deterministic); events of one stream keep their order.
///
/// Memory: one window per stream (see [`StreamReader`]). Descriptors: at most
/// [`MAX_OPEN_STREAMS`] stream files are open at once.
#[derive(Debug)]
pub struct Merged {
    descs: Vec<Arc<TraceDesc>>,
    clocks: Vec<Clock>,
    streams: Vec<(usize, StreamReader)>,
    /// Streams whose file is open.
    open: Vec<usize>,
    /// Per stream, the time of its last read (for the LRU).
    last_use: Vec<u64>,
    tick: u64,
    heap: BinaryHeap<Reverse<(i128, usize)>>,
    /// Stream whose current event was returned last; advanced on the next call.
    last: Option<usize>,
    started: bool,
}

impl Merged {
    /// Merges `streams`, each tagged with the index of its trace in `descs`.
    pub fn new(
        descs: Vec<Arc<TraceDesc>>,
        mut streams: Vec<(usize, StreamReader)>,
    ) -> Result<Self, Error> {
        let clocks = descs.iter().map(|d| Clock::new(&d.clock)).collect();
        let mut open = Vec::new();
        for (i, (_, s)) in streams.iter_mut().enumerate() {
            if s.has_open_file() {
                if open.len() < MAX_OPEN_STREAMS {
                    open.push(i);
                } else {
                    s.release_file();
                }
            }
        }
        Ok(Merged {
            open,
            last_use: vec![0; streams.len()],
            tick: 0,
            descs,
            clocks,
            heap: BinaryHeap::with_capacity(streams.len()),
            streams,
            last: None,
            started: false,
        })
    }

    /// The streams being merged, with the index of their trace.
    pub fn streams(&self) -> &[(usize, StreamReader)] {
        &self.streams
    }

    /// Total size of the stream files, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.streams.iter().map(|(_, s)| s.file_len()).sum()
    }

    /// Bytes of stream files consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.streams.iter().map(|(_, s)| s.bytes_read()).sum()
    }

    /// Removes and returns the warnings of all streams so far.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        self.streams
            .iter_mut()
            .flat_map(|(_, s)| s.take_warnings())
            .collect()
    }

    /// Advances stream `i`, keeping at most [`MAX_OPEN_STREAMS`] files open: a stream that
    /// had to open its file closes the least recently read other one.
    fn advance(&mut self, i: usize) -> Result<bool, Error> {
        self.tick += 1;
        let was_open = self.streams[i].1.has_open_file();
        let r = self.streams[i].1.advance();
        self.last_use[i] = self.tick;
        if !was_open && self.streams[i].1.has_open_file() {
            if self.open.len() >= MAX_OPEN_STREAMS {
                if let Some(k) = (0..self.open.len()).min_by_key(|&k| self.last_use[self.open[k]]) {
                    let lru = self.open.swap_remove(k);
                    self.streams[lru].1.release_file();
                }
            }
            self.open.push(i);
        }
        let more = r?;
        if !more && self.streams[i].1.has_open_file() {
            // Exhausted: its descriptor is no longer needed.
            self.streams[i].1.release_file();
            self.open.retain(|&o| o != i);
        }
        Ok(more)
    }

    fn push(&mut self, i: usize) -> Result<(), Error> {
        if self.advance(i)? {
            let (t, s) = &self.streams[i];
            let ts = s.current_timestamp().unwrap_or(0);
            self.heap.push(Reverse((self.clocks[*t].to_ns(ts), i)));
        }
        Ok(())
    }

    /// The next event in time order; `Ok(None)` when all streams are exhausted.
    // A lending iterator: the event borrows the stream's packet buffer, so this cannot be
    // `Iterator::next`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<MergedEvent<'_>>, Error> {
        if !self.started {
            self.started = true;
            for i in 0..self.streams.len() {
                self.push(i)?;
            }
        } else if let Some(i) = self.last.take() {
            // The stream returned last is still the heap's top: replace its key in place (one
            // sift-down) instead of a pop and a push.
            if self.advance(i)? {
                let (t, s) = &self.streams[i];
                let key = self.clocks[*t].to_ns(s.current_timestamp().unwrap_or(0));
                if let Some(mut top) = self.heap.peek_mut() {
                    *top = Reverse((key, i));
                }
            } else {
                self.heap.pop();
            }
        }
        let Some(&Reverse((time_ns, i))) = self.heap.peek() else {
            return Ok(None);
        };
        self.last = Some(i);
        let (trace, s) = &self.streams[i];
        let Some(event) = s.current() else {
            return Ok(None);
        };
        Ok(Some(MergedEvent {
            trace: *trace,
            stream: i,
            desc: &self.descs[*trace],
            time_ns,
            event,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_open_streams_are_open_and_a_replaced_file_is_an_error() {
        use crate::synth::{SynthEvent, SynthTrace};
        let dir = tempfile::tempdir().unwrap();
        let mut t = SynthTrace::new(5, "wide");
        let tick = t.instant("w:tick", &[]);
        let threads = MAX_OPEN_STREAMS as u32 + 50;
        for k in 0..threads {
            let th = t.thread(100 + k, "w");
            for j in 0..4u64 {
                th.event(SynthEvent::new(tick, 1000 * j + u64::from(k)));
            }
        }
        t.write_session(dir.path()).unwrap();
        let session = super::super::Session::open(dir.path()).unwrap();
        let mut m = session.merged().unwrap();
        let (mut n, mut most) = (0, 0);
        while m.next().unwrap().is_some() {
            n += 1;
            let open = m.streams().iter().filter(|s| s.1.has_open_file()).count();
            most = most.max(open);
        }
        assert_eq!(n, threads as usize * 4);
        assert!(most <= MAX_OPEN_STREAMS, "{most} open");
        assert!(most >= MAX_OPEN_STREAMS - 1, "{most} open");
        // A stream file replaced while its reader had released it: an error, not other data.
        let mut readers = session.traces[0].stream_readers().unwrap();
        let p = readers[0].path().to_path_buf();
        std::fs::rename(&p, dir.path().join("old")).unwrap();
        std::fs::copy(dir.path().join("old"), &p).unwrap();
        let e = readers[0].advance().unwrap_err().to_string();
        assert!(e.contains("replaced"), "{e}");
    }

    #[test]
    fn fast_clock_matches_reference() {
        let descs = [
            ClockDesc {
                freq: 1_000_000_000,
                offset_s: 1_700_000_000,
                offset: 123,
                source: "x".into(),
            },
            ClockDesc {
                freq: 2_899_999_999,
                offset_s: -5,
                offset: 2_899_999_998,
                source: "x".into(),
            },
            ClockDesc {
                freq: 3,
                offset_s: 0,
                offset: 2,
                source: "x".into(),
            },
            ClockDesc {
                freq: u64::MAX,
                offset_s: 0,
                offset: u64::MAX - 1,
                source: "x".into(),
            },
        ];
        for d in &descs {
            let c = Clock::new(d);
            for cycles in [0, 1, 2, 999_999_999, 1 << 40, u64::MAX - 3, u64::MAX] {
                assert_eq!(c.to_ns(cycles), d.to_epoch_ns(cycles), "{d:?} {cycles}");
            }
        }
    }
}
