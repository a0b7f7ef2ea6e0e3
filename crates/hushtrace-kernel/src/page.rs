//! One page (sub-buffer) of an ftrace per-CPU ring buffer, as `trace_pipe_raw` returns it.
//!
//! Layout (from `events/header_page`, see [`crate::format::PageHeader`]): a `u64` base
//! timestamp, a `commit` word holding the bytes of event data in its low bits and two flags
//! (`1 << 31`: events were lost before this page; `1 << 30`: their count is stored right after
//! the data), then the events. Each event starts with a `u32`: `type_len` in its low 5 bits,
//! `time_delta` (added to the running timestamp) in the high 27 bits.
//!
//! * `type_len` 1..=28: a record of `type_len * 4` bytes follows;
//! * `type_len` 0: the next `u32` is the record's length + 4, the record follows it;
//! * 29, padding: `time_delta` 0 means the rest of the page is empty; otherwise a discarded
//!   record whose length (+4) is in the next `u32`;
//! * 30, time extend: the next `u32` holds bits 27.. of a larger delta (8 bytes in all);
//! * 31, absolute time stamp: the same shape, the value replacing the running timestamp (its
//!   top 5 bits come from the page's base timestamp).
//!
//! This follows the kernel's `Documentation/trace/ring-buffer-design.rst`,
//! `kernel/trace/ring_buffer.c` and libtraceevent's `kbuffer-parse.c`.

use crate::format::PageHeader;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 27) - 1;
/// The bits absolute time stamps do not hold.
const TS_MSB: u64 = 0xf8 << 56;

/// Events lost before a page, as its header says (a page without loss has none: see
/// [`Page::missed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// Some, how many unknown.
    Unknown,
    /// This many.
    Count(u64),
}

/// A page that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageError(pub String);

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PageError {}

/// A parsed page: its base timestamp, lost-events flag, and its event bytes.
#[derive(Debug)]
pub struct Page<'a> {
    /// Base timestamp (trace-clock units).
    pub timestamp: u64,
    /// Events lost before this page (`None`: no loss).
    pub missed: Option<Missed>,
    data: &'a [u8],
}

impl<'a> Page<'a> {
    /// Reads the header of `page` with layout `h`.
    pub fn parse(page: &'a [u8], h: &PageHeader) -> Result<Page<'a>, PageError> {
        let rd = |off: usize, size: usize| -> Result<u64, PageError> {
            let b = page
                .get(off..off + size)
                .ok_or_else(|| PageError(format!("page of {} bytes: no header", page.len())))?;
            let mut v = [0u8; 8];
            v[..size].copy_from_slice(b);
            Ok(u64::from_le_bytes(v))
        };
        let timestamp = rd(h.timestamp.0, h.timestamp.1)?;
        let commit = rd(h.commit.0, h.commit.1)?;
        let len = (commit & COMMIT_MASK) as usize;
        let data = page.get(h.data..h.data + len).ok_or_else(|| {
            PageError(format!(
                "page commit says {len} bytes of data, the page has {}",
                page.len().saturating_sub(h.data)
            ))
        })?;
        let missed = if commit & MISSED_EVENTS == 0 {
            None
        } else if commit & MISSED_STORED != 0 {
            let at = h.data + len;
            Some(match page.get(at..at + h.commit.1) {
                Some(b) => {
                    let mut v = [0u8; 8];
                    v[..b.len()].copy_from_slice(b);
                    Missed::Count(u64::from_le_bytes(v))
                }
                None => Missed::Unknown,
            })
        } else {
            Some(Missed::Unknown)
        };
        Ok(Page {
            timestamp,
            missed,
            data,
        })
    }

    /// The records of the page, with their timestamps, in order. A malformed event ends the
    /// iteration with an error.
    pub fn records(&self) -> Records<'a> {
        Records {
            data: self.data,
            pos: 0,
            ts: self.timestamp,
            base: self.timestamp,
            done: false,
        }
    }
}

/// Iterator over a page's records: `(timestamp, record bytes)`.
#[derive(Debug)]
pub struct Records<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    base: u64,
    done: bool,
}

impl<'a> Records<'a> {
    fn u32_at(&self, at: usize) -> Result<u32, PageError> {
        self.data
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| PageError(format!("event at byte {} runs past the data", self.pos)))
    }

    fn step(&mut self) -> Result<Option<(u64, &'a [u8])>, PageError> {
        while self.pos < self.data.len() {
            let head = self.u32_at(self.pos)?;
            let type_len = head & 0x1f;
            let delta = u64::from(head >> 5);
            let at = self.pos;
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        self.pos = self.data.len();
                        return Ok(None);
                    }
                    let len = self.u32_at(at + 4)? as usize;
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = at + 4 + len.max(4);
                }
                TYPE_TIME_EXTEND => {
                    let hi = u64::from(self.u32_at(at + 4)?);
                    self.ts = self.ts.wrapping_add((hi << TS_SHIFT) | delta);
                    self.pos = at + 8;
                }
                TYPE_TIME_STAMP => {
                    let hi = u64::from(self.u32_at(at + 4)?);
                    let mut abs = (hi << TS_SHIFT) | delta;
                    if self.base & TS_MSB != 0 {
                        abs |= self.base & TS_MSB;
                        if abs < self.base {
                            abs = abs.wrapping_add(1 << 59);
                        }
                    }
                    self.ts = abs;
                    self.pos = at + 8;
                }
                0 => {
                    let len = (self.u32_at(at + 4)? as usize).saturating_sub(4);
                    let len = (len + 3) & !3;
                    let rec = self.data.get(at + 8..at + 8 + len).ok_or_else(|| {
                        PageError(format!(
                            "record at byte {at} of {len} bytes runs past the data"
                        ))
                    })?;
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = at + 8 + len;
                    return Ok(Some((self.ts, rec)));
                }
                n => {
                    let len = n as usize * 4;
                    let rec = self.data.get(at + 4..at + 4 + len).ok_or_else(|| {
                        PageError(format!(
                            "record at byte {at} of {len} bytes runs past the data"
                        ))
                    })?;
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = at + 4 + len;
                    return Ok(Some((self.ts, rec)));
                }
            }
        }
        Ok(None)
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<(u64, &'a [u8]), PageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Builds pages in the kernel's format, for tests.
#[doc(hidden)]
pub mod build {
    /// A page being built with the usual 64-bit layout (data at 16).
    #[derive(Debug)]
    pub struct PageBuilder {
        /// The bytes after the header.
        pub data: Vec<u8>,
        /// Base timestamp.
        pub ts: u64,
    }

    impl PageBuilder {
        /// An empty page at `ts`.
        pub fn new(ts: u64) -> Self {
            PageBuilder {
                data: Vec::new(),
                ts,
            }
        }

        /// Appends a record `delta` after the previous one (a time extend first if needed).
        pub fn record(&mut self, delta: u64, rec: &[u8]) -> &mut Self {
            let mut delta = delta;
            if delta >= 1 << 27 {
                self.word(30 | (((delta & ((1 << 27) - 1)) as u32) << 5));
                self.word((delta >> 27) as u32);
                delta = 0;
            }
            let padded = (rec.len() + 3) & !3;
            if padded <= 28 * 4 && !rec.is_empty() {
                self.word((padded / 4) as u32 | ((delta as u32) << 5));
            } else {
                self.word((delta as u32) << 5);
                self.word(padded as u32 + 4);
            }
            self.data.extend_from_slice(rec);
            self.data.resize(self.data.len() + padded - rec.len(), 0);
            self
        }

        /// Appends a discarded record: padding whose `u32` length (`len`, at least 4) counts
        /// the bytes after the header, itself included.
        pub fn discarded(&mut self, delta: u32, len: u32) -> &mut Self {
            self.word(29 | (delta << 5));
            self.word(len);
            self.data.resize(self.data.len() + len as usize - 4, 0xee);
            self
        }

        fn word(&mut self, w: u32) {
            self.data.extend_from_slice(&w.to_le_bytes());
        }

        /// The page: header, data, `missed` stored after the data when given, zero-filled to
        /// `size` bytes.
        pub fn finish(&self, missed: Option<Option<u64>>, size: usize) -> Vec<u8> {
            let mut commit = self.data.len() as u64;
            let mut p = Vec::with_capacity(size);
            p.extend_from_slice(&self.ts.to_le_bytes());
            match missed {
                Some(Some(_)) => commit |= (1 << 31) | (1 << 30),
                Some(None) => commit |= 1 << 31,
                None => {}
            }
            p.extend_from_slice(&commit.to_le_bytes());
            p.extend_from_slice(&self.data);
            if let Some(Some(n)) = missed {
                p.extend_from_slice(&n.to_le_bytes());
            }
            p.resize(size.max(p.len()), 0);
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::PageBuilder;
    use super::*;

    const H: PageHeader = PageHeader {
        timestamp: (0, 8),
        commit: (8, 8),
        data: 16,
    };

    #[test]
    fn records_deltas_extends_and_long_records() {
        let long = vec![7u8; 200];
        let mut b = PageBuilder::new(1_000);
        b.record(5, &[1, 2, 3, 4])
            .discarded(3, 12)
            .record(1 << 30, &[9; 8])
            .record(2, &long);
        let page = b.finish(None, 4096);
        let p = Page::parse(&page, &H).unwrap();
        assert_eq!(p.missed, None);
        let r: Vec<_> = p.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], (1_005, &[1u8, 2, 3, 4][..]));
        assert_eq!(r[1].0, 1_005 + 3 + (1 << 30));
        assert_eq!(r[2].0, r[1].0 + 2);
        assert_eq!(r[2].1, &long[..]);
    }

    #[test]
    fn missed_events_flags() {
        let mut b = PageBuilder::new(1);
        b.record(1, &[0; 4]);
        let p = b.finish(Some(Some(42)), 4096);
        assert_eq!(Page::parse(&p, &H).unwrap().missed, Some(Missed::Count(42)));
        let p = b.finish(Some(None), 4096);
        assert_eq!(Page::parse(&p, &H).unwrap().missed, Some(Missed::Unknown));
    }

    #[test]
    fn broken_pages_are_errors_not_panics() {
        // Commit larger than the page.
        let mut p = PageBuilder::new(1).finish(None, 64);
        p[8..16].copy_from_slice(&1000u64.to_le_bytes());
        assert!(Page::parse(&p, &H).is_err());
        assert!(Page::parse(&[0; 4], &H).is_err());
        // A record whose length runs past the data.
        let mut b = PageBuilder::new(1);
        b.record(1, &[0; 8]);
        let mut p = b.finish(None, 64);
        p[16..20].copy_from_slice(&(20u32).to_le_bytes()); // type_len 20 = 80 bytes
        let parsed = Page::parse(&p, &H).unwrap();
        let r: Vec<_> = parsed.records().collect();
        assert!(r.last().unwrap().is_err());
        // Random bytes never panic.
        let mut seed = 0x1234_5678u32;
        for _ in 0..2000 {
            let mut p = vec![0u8; 128];
            for x in p.iter_mut() {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *x = (seed >> 16) as u8;
            }
            p[8..16].copy_from_slice(&((seed % 120) as u64).to_le_bytes());
            if let Ok(pg) = Page::parse(&p, &H) {
                for _ in pg.records() {}
            }
        }
    }
}
