//! Reading one stream file, packet by packet.

use super::{Error, Value, Warning};
use crate::file;
use crate::layout::*;
use crate::metadata::{EventClass, TraceDesc};
use hushtrace_core::FieldType;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Packets larger than this are rejected as corrupt: it is the runtime's largest sub-buffer.
/// Memory does not depend on it (see [`WINDOW_BYTES`]).
pub const MAX_PACKET_BYTES: u64 = 1 << 30;

/// A [`StreamReader`] holds this much of its current packet at a time (less for smaller
/// packets), whatever size the packet header claims.
pub const WINDOW_BYTES: usize = 64 << 10;

/// Events larger than this are rejected as corrupt: the window grows up to this size to hold
/// one event whole, so it bounds a stream reader's memory. hushtrace events are at most a few
/// KiB (strings are capped at 255 bytes).
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// The header and context of one packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketContext {
    /// Byte offset of the packet in its stream file.
    pub offset: u64,
    /// Stream instance id (one per stream file).
    pub stream_instance_id: u64,
    /// Time of the first event, in clock cycles.
    pub timestamp_begin: u64,
    /// Time of the last event, in clock cycles.
    pub timestamp_end: u64,
    /// Size of header and events, in bits.
    pub content_size: u64,
    /// Size of the packet in the file, in bits.
    pub packet_size: u64,
    /// Per-stream packet sequence number, from 0; a gap means whole packets were lost.
    pub seq_num: u64,
    /// Packets missing right before this one in its stream, from the sequence numbers: a gap
    /// after the previous packet, or for the first packet its `seq_num` (packets before it
    /// were overwritten in overwrite mode, or lost to a failed write).
    pub lost_before: u64,
    /// Events discarded in this stream so far (cumulative).
    pub events_discarded: u64,
    /// Process id.
    pub vpid: u32,
    /// Thread id.
    pub vtid: u32,
    /// Thread name.
    pub procname: String,
    /// `pthread_t` of the thread.
    pub pthread_id: u64,
}

/// One decoded event, borrowing from its [`StreamReader`].
#[derive(Clone, Copy, Debug)]
pub struct EventRef<'a> {
    /// Its event class (name, kind, field names and types).
    pub class: &'a EventClass,
    /// Timestamp in clock cycles.
    pub timestamp: u64,
    /// The packet it is in (process and thread identity).
    pub packet: &'a PacketContext,
    /// Byte offset of the event in the stream file.
    pub offset: u64,
    /// The reader's window on the packet bytes.
    buf: &'a [u8],
    /// Start offsets in `buf` of each field (for strings: first byte; the NUL follows).
    field_offsets: &'a [usize],
}

impl<'a> EventRef<'a> {
    /// The fields, in declaration order, as `(name, value)`.
    pub fn fields(&self) -> Fields<'a> {
        Fields { ev: *self, i: 0 }
    }

    /// The value of field number `i`.
    pub fn field(&self, i: usize) -> Option<Value<'a>> {
        let (_, ty) = self.class.fields.as_ref()?.get(i)?;
        let off = *self.field_offsets.get(i)?;
        let b = self.buf;
        Some(match ty {
            FieldType::U8 => Value::U8(*b.get(off)?),
            FieldType::U16 => Value::U16(read_u16(b, off)?),
            FieldType::U32 => Value::U32(read_u32(b, off)?),
            FieldType::U64 => Value::U64(read_u64(b, off)?),
            FieldType::I8 => Value::I8(*b.get(off)? as i8),
            FieldType::I16 => Value::I16(read_u16(b, off)? as i16),
            FieldType::I32 => Value::I32(read_u32(b, off)? as i32),
            FieldType::I64 => Value::I64(read_u64(b, off)? as i64),
            FieldType::F64 => Value::F64(f64::from_bits(read_u64(b, off)?)),
            FieldType::Bool => Value::Bool(*b.get(off)? != 0),
            FieldType::Str => {
                let rest = b.get(off..)?;
                let len = rest.iter().position(|&c| c == 0)?;
                // Validated when the event was read; this cannot fail.
                Value::Str(std::str::from_utf8(&rest[..len]).ok()?)
            }
        })
    }
}

/// Iterator over the fields of an [`EventRef`].
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    ev: EventRef<'a>,
    i: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a str, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let name = self.ev.class.fields.as_ref()?.get(self.i)?.0.as_str();
        let v = self.ev.field(self.i)?;
        self.i += 1;
        Some((name, v))
    }
}

/// The event currently decoded by a [`StreamReader`].
#[derive(Clone, Copy, Debug)]
struct Current {
    class: usize,
    timestamp: u64,
    pos: usize,
}

/// Why decoding an event stopped.
enum Stop {
    /// The event runs past the end of the available bytes.
    PastEnd(usize, &'static str),
    /// The bytes are not a valid event.
    Bad(usize, String),
}

/// A cursor over the events of one stream file.
///
/// Call [`StreamReader::advance`] to move to the next event, then [`StreamReader::current`] to
/// look at it. Memory is one window on the current packet, reused: [`WINDOW_BYTES`], growing
/// to at most [`MAX_EVENT_BYTES`] for an event that does not fit, whatever the packet headers
/// claim. The file is opened only if it is a regular file (no symbolic link is followed, no
/// FIFO waited on).
///
/// ```no_run
/// use hushtrace_ctf::reader::{read_metadata, StreamReader};
/// use std::sync::Arc;
/// let desc = Arc::new(read_metadata("/tmp/t/1/metadata".as_ref())?);
/// let mut s = StreamReader::open(desc, "/tmp/t/1/stream_0".as_ref())?;
/// while s.advance()? {
///     let ev = s.current().unwrap();
///     println!("{} {} {:?}", ev.timestamp, ev.class.name, ev.fields().collect::<Vec<_>>());
/// }
/// # Ok::<(), hushtrace_ctf::reader::Error>(())
/// ```
#[derive(Debug)]
pub struct StreamReader {
    path: PathBuf,
    desc: Arc<TraceDesc>,
    /// Index into `desc.events` by event id.
    class_by_id: Vec<Option<usize>>,
    /// The open file, or `None` while released ([`StreamReader::release_file`]): reopened by
    /// name on the next read, and checked to be the same file (device and inode).
    file: Option<File>,
    file_id: (u64, u64),
    file_len: u64,
    /// File offset of the next packet.
    next_packet: u64,
    /// A window on the current packet's content: packet bytes `win .. win + buf.len()`.
    buf: Vec<u8>,
    /// Offset in the packet of `buf[0]`.
    win: u64,
    /// Size the window may fill up to (grows for an event larger than [`WINDOW_BYTES`]).
    window: usize,
    /// Offset in the packet of the end of the content that can be read: the content size, or
    /// the end of the file for a truncated last packet.
    content_end: u64,
    truncated: bool,
    packet: PacketContext,
    in_packet: bool,
    /// Offset in `buf` of the next event.
    pos: usize,
    current: Option<Current>,
    field_offsets: Vec<usize>,
    last_seq: Option<u64>,
    /// The stream's clock while decoding the current packet: its `timestamp_begin`, then the
    /// timestamp of each event decoded (compact headers hold only its low bits).
    clock: u64,
    last_discarded: u64,
    last_timestamp: u64,
    lost_packets: u64,
    packets: u64,
    events: u64,
    done: bool,
    warnings: Vec<Warning>,
}

impl StreamReader {
    /// Opens the stream file `path` of the trace described by `desc`.
    pub fn open(desc: Arc<TraceDesc>, path: &Path) -> Result<Self, Error> {
        let file = file::open_regular(path)?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        let file_len = meta.len();
        let file_id = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        let max_id = desc
            .events
            .iter()
            .map(|e| e.id as usize + 1)
            .max()
            .unwrap_or(0);
        let mut class_by_id = vec![None; max_id];
        for (i, e) in desc.events.iter().enumerate() {
            class_by_id[e.id as usize] = Some(i);
        }
        Ok(StreamReader {
            path: path.to_path_buf(),
            desc,
            class_by_id,
            file: Some(file),
            file_id,
            file_len,
            next_packet: 0,
            buf: Vec::new(),
            win: 0,
            window: WINDOW_BYTES,
            content_end: 0,
            truncated: false,
            packet: PacketContext::default(),
            in_packet: false,
            pos: 0,
            current: None,
            field_offsets: Vec::new(),
            last_seq: None,
            clock: 0,
            last_discarded: 0,
            last_timestamp: 0,
            lost_packets: 0,
            packets: 0,
            events: 0,
            done: false,
            warnings: Vec::new(),
        })
    }

    /// The stream file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trace metadata.
    pub fn desc(&self) -> &Arc<TraceDesc> {
        &self.desc
    }

    /// Closes the stream file's descriptor; the next read reopens it by name (never through a
    /// link, checked to be the same file) and goes on where it was. A reader of many streams
    /// ([`super::Merged`]) keeps a bounded number of them open this way.
    pub fn release_file(&mut self) {
        self.file = None;
    }

    /// Whether the stream file is open (see [`StreamReader::release_file`]).
    pub fn has_open_file(&self) -> bool {
        self.file.is_some()
    }

    /// The open file, reopened if it was released.
    fn file(&mut self) -> Result<&File, Error> {
        if self.file.is_none() {
            let f = file::open_regular(&self.path)?;
            let meta = f.metadata().map_err(|e| Error::io(&self.path, e))?;
            let id = {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino())
            };
            if id != self.file_id {
                return Err(Error::io(
                    &self.path,
                    io::Error::other("replaced by another file while it was being read"),
                ));
            }
            self.file = Some(f);
        }
        self.file
            .as_ref()
            .ok_or_else(|| Error::io(&self.path, io::Error::other("not open")))
    }

    /// Size of the stream file in bytes.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Bytes of the file consumed so far (whole packets), for progress reporting.
    pub fn bytes_read(&self) -> u64 {
        self.next_packet.min(self.file_len)
    }

    /// The context of the current packet (meaningful once a packet has been read).
    pub fn packet(&self) -> &PacketContext {
        &self.packet
    }

    /// Packets read so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Events read so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Whole packets known lost so far, from the packet sequence numbers: packets before the
    /// first one (a stream starts at `packet_seq_num` 0) and gaps between packets. Overwrite
    /// mode loses the oldest packets; a failed write loses one.
    pub fn lost_packets(&self) -> u64 {
        self.lost_packets
    }

    /// Events discarded in this stream so far, as the packets say.
    pub fn events_discarded(&self) -> u64 {
        self.last_discarded
    }

    /// Bytes of packet data this reader holds in memory (its window's capacity): at most
    /// [`MAX_EVENT_BYTES`], whatever the file says.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Warnings so far.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Removes and returns the warnings so far.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    /// The event the cursor is on, after [`StreamReader::advance`] returned `true`.
    pub fn current(&self) -> Option<EventRef<'_>> {
        let c = self.current?;
        Some(EventRef {
            class: &self.desc.events[c.class],
            timestamp: c.timestamp,
            packet: &self.packet,
            offset: self.packet.offset + self.win + c.pos as u64,
            buf: &self.buf,
            field_offsets: &self.field_offsets,
        })
    }

    /// Timestamp (cycles) of the current event.
    pub fn current_timestamp(&self) -> Option<u64> {
        self.current.map(|c| c.timestamp)
    }

    /// Moves to the next event; `Ok(false)` at the end of the stream.
    pub fn advance(&mut self) -> Result<bool, Error> {
        self.current = None;
        loop {
            if self.done {
                return Ok(false);
            }
            if !self.in_packet && !self.next_packet()? {
                self.done = true;
                return Ok(false);
            }
            if self.win + self.pos as u64 >= self.content_end {
                self.in_packet = false;
                if self.truncated {
                    self.done = true;
                }
                continue;
            }
            match self.decode_event() {
                Ok(c) => {
                    if c.timestamp < self.last_timestamp {
                        let m = format!(
                            "timestamp goes backwards ({} < {} cycles); merged output may be out of order",
                            c.timestamp, self.last_timestamp
                        );
                        self.warn(self.packet.offset + c.pos as u64, m);
                    }
                    self.last_timestamp = c.timestamp;
                    self.current = Some(c);
                    self.events += 1;
                    return Ok(true);
                }
                Err(Stop::PastEnd(at, what)) => {
                    if self.more_in_packet() {
                        if self.refill()? {
                            continue;
                        }
                        return Err(self.corrupt(
                            self.pos,
                            format!("event larger than the reader's {MAX_EVENT_BYTES}-byte limit"),
                        ));
                    }
                    if self.truncated {
                        // Already warned about when the packet was read.
                        self.in_packet = false;
                        self.done = true;
                        return Ok(false);
                    }
                    return Err(
                        self.corrupt(at, format!("{what} runs past the packet content end"))
                    );
                }
                Err(Stop::Bad(at, what)) => return Err(self.corrupt(at, what)),
            }
        }
    }

    fn warn(&mut self, offset: u64, message: String) {
        // One stream with a systematic problem should not flood the caller.
        if self.warnings.len() < 100 {
            self.warnings
                .push(Warning::new(&self.path, offset, message));
        }
    }

    /// An error at index `at_in_buf` of the window.
    fn corrupt(&self, at_in_buf: usize, what: String) -> Error {
        let at = self.packet.offset + self.win + at_in_buf as u64;
        Error::corrupt(&self.path, at, what)
    }

    /// Whether content of the current packet remains beyond the window.
    fn more_in_packet(&self) -> bool {
        self.win + (self.buf.len() as u64) < self.content_end
    }

    /// Drops the consumed bytes of the window and reads more of the packet behind the rest,
    /// growing the window (up to [`MAX_EVENT_BYTES`]) if the event at `pos` fills it.
    /// `Ok(false)` if that event is larger than the limit. Call only when
    /// [`Self::more_in_packet`].
    fn refill(&mut self) -> Result<bool, Error> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.win += self.pos as u64;
            self.pos = 0;
        }
        if self.buf.len() >= self.window {
            if self.window >= MAX_EVENT_BYTES {
                return Ok(false);
            }
            self.window = (self.window * 2).min(MAX_EVENT_BYTES);
        }
        let have = self.buf.len();
        let want = (self.window as u64).min(self.content_end - self.win) as usize;
        self.buf.resize(want, 0);
        let off = self.packet.offset + self.win + have as u64;
        self.read_at(off, have)?;
        Ok(true)
    }

    /// Reads the next packet into `buf`; `Ok(false)` at end of file.
    fn next_packet(&mut self) -> Result<bool, Error> {
        let off = self.next_packet;
        if off >= self.file_len {
            return Ok(false);
        }
        let remaining = self.file_len - off;
        let io_err = |e: io::Error, path: &Path| Error::io(path, e);
        if remaining < PACKET_HEADER_LEN as u64 {
            self.warn(
                off,
                format!("truncated packet header: {remaining} trailing bytes ignored"),
            );
            self.next_packet = self.file_len;
            return Ok(false);
        }
        let mut header = [0u8; PACKET_HEADER_LEN];
        {
            use std::os::unix::fs::FileExt;
            self.file()?
                .read_exact_at(&mut header, off)
                .map_err(|e| io_err(e, &self.path))?;
        }
        let bad = |rel: usize, what: String| Error::corrupt(&self.path, off + rel as u64, what);
        let magic = PacketHeader::magic(&header).unwrap_or(0);
        if magic != MAGIC {
            return Err(bad(
                OFF_MAGIC,
                format!("bad packet magic {magic:#010x} (expected {MAGIC:#010x})"),
            ));
        }
        let h = PacketHeader::from_bytes(&header);
        if h.uuid != self.desc.uuid {
            return Err(bad(
                OFF_UUID,
                "packet uuid differs from the metadata's trace uuid".into(),
            ));
        }
        let stream_id = PacketHeader::stream_id(&header).unwrap_or(0);
        if stream_id != 0 {
            return Err(bad(
                OFF_STREAM_ID,
                format!("unknown stream class id {stream_id}"),
            ));
        }
        let (content_size, packet_size) = (h.content_size, h.packet_size);
        if content_size % 8 != 0 || packet_size % 8 != 0 {
            return Err(bad(
                OFF_CONTENT_SIZE,
                "packet size not a whole number of bytes".into(),
            ));
        }
        if content_size < PACKET_HEADER_LEN as u64 * 8 {
            return Err(bad(
                OFF_CONTENT_SIZE,
                format!("content_size {content_size} bits is smaller than the packet header"),
            ));
        }
        if content_size > packet_size {
            return Err(bad(
                OFF_CONTENT_SIZE,
                format!("content_size {content_size} > packet_size {packet_size}"),
            ));
        }
        if packet_size / 8 > MAX_PACKET_BYTES {
            return Err(bad(
                OFF_PACKET_SIZE,
                format!(
                    "packet_size {} bytes exceeds the {MAX_PACKET_BYTES}-byte limit",
                    packet_size / 8
                ),
            ));
        }
        let (ts_begin, ts_end) = (h.timestamp_begin, h.timestamp_end);
        if ts_end < ts_begin {
            return Err(bad(
                OFF_TIMESTAMP_END,
                format!("timestamp_end {ts_end} < timestamp_begin {ts_begin}"),
            ));
        }
        let packet = PacketContext {
            offset: off,
            stream_instance_id: h.stream_instance_id,
            timestamp_begin: ts_begin,
            timestamp_end: ts_end,
            content_size,
            packet_size,
            seq_num: h.seq,
            lost_before: 0,
            events_discarded: h.events_discarded,
            vpid: h.vpid,
            vtid: h.vtid,
            procname: h.procname_lossy(),
            pthread_id: h.pthread_id,
        };

        // Sequence and discard accounting. A stream's first packet has sequence number 0; in
        // overwrite mode the oldest packets are gone and the stream starts later.
        let mut packet = packet;
        match self.last_seq {
            None => packet.lost_before = packet.seq_num,
            Some(prev) if packet.seq_num <= prev => {
                let m = format!("packet_seq_num {} does not follow {prev}", packet.seq_num);
                self.warn(off + OFF_PACKET_SEQ_NUM as u64, m);
            }
            Some(prev) => packet.lost_before = packet.seq_num - prev - 1,
        }
        self.lost_packets = self.lost_packets.saturating_add(packet.lost_before);
        self.last_seq = Some(packet.seq_num);
        if packet.events_discarded < self.last_discarded {
            let m = format!(
                "events_discarded went down from {} to {}",
                self.last_discarded, packet.events_discarded
            );
            self.warn(off + OFF_EVENTS_DISCARDED as u64, m);
        }
        self.last_discarded = packet.events_discarded;

        // Content: the whole packet, or what is left of a truncated last packet. Only a window
        // of it is read now (see `refill`), so a header claiming a huge packet in a sparse
        // file costs no memory.
        let content = content_size / 8;
        let avail = content.min(remaining);
        self.truncated = avail < content;
        if self.truncated {
            self.next_packet = self.file_len;
            let m = format!(
                "truncated last packet: {avail} of {content} bytes in the file; reading its whole events only"
            );
            self.warn(off, m);
        } else {
            // packet_size may exceed the file for the last packet only by its padding.
            self.next_packet = off.saturating_add(packet_size / 8);
        }
        self.packet = packet;
        self.clock = ts_begin;
        self.content_end = avail;
        self.win = PACKET_HEADER_LEN as u64;
        self.pos = 0;
        self.window = WINDOW_BYTES;
        self.buf.clear();
        if self.buf.capacity() > WINDOW_BYTES {
            self.buf.shrink_to(WINDOW_BYTES);
        }
        if self.more_in_packet() {
            self.refill()?;
        }
        self.in_packet = true;
        self.packets += 1;
        Ok(true)
    }

    /// Reads `buf[start..]` from file offset `off`.
    fn read_at(&mut self, off: u64, start: usize) -> Result<(), Error> {
        use std::os::unix::fs::FileExt;
        self.file()?;
        match &self.file {
            Some(f) => f
                .read_exact_at(&mut self.buf[start..], off)
                .map_err(|e| Error::io(&self.path, e)),
            None => Err(Error::io(&self.path, io::Error::other("not open"))),
        }
    }

    /// Decodes the event at `self.pos`, recording field offsets.
    fn decode_event(&mut self) -> Result<Current, Stop> {
        let start = self.pos;
        let end = self.buf.len();
        // Whether the window reaches the end of the readable content: only then is an event
        // that runs past `end` really cut off.
        let at_content_end = !self.more_in_packet();
        let b = &self.buf[..end];
        let Some(EventHeader {
            id,
            ts: timestamp,
            len: header_len,
            ..
        }) = parse_event_header(&b[start..], self.clock)
        else {
            return Err(Stop::PastEnd(start, "event header"));
        };
        let class = match self.class_by_id.get(id as usize).copied().flatten() {
            Some(c) => c,
            None => return Err(Stop::Bad(start, format!("unknown event id {id}"))),
        };
        let ec = &self.desc.events[class];
        let Some(fields) = ec.fields.as_ref() else {
            return Err(Stop::Bad(
                start,
                format!(
                    "event {:?} (id {id}) has no field types in the metadata",
                    ec.name
                ),
            ));
        };
        self.field_offsets.clear();
        let mut p = start + header_len;
        for (name, ty) in fields {
            self.field_offsets.push(p);
            match ty.fixed_size() {
                Some(n) => {
                    if p + n > end {
                        return Err(Stop::PastEnd(p, "field"));
                    }
                    p += n;
                }
                None => {
                    let rest = &b[p..];
                    let Some(len) = rest.iter().position(|&c| c == 0) else {
                        return Err(if self.truncated || !at_content_end {
                            Stop::PastEnd(p, "string")
                        } else {
                            Stop::Bad(p, format!("string field `{name}` without NUL terminator"))
                        });
                    };
                    if let Err(e) = std::str::from_utf8(&rest[..len]) {
                        return Err(Stop::Bad(
                            p + e.valid_up_to(),
                            format!("string field `{name}` is not valid UTF-8"),
                        ));
                    }
                    p += len + 1;
                }
            }
        }
        self.pos = p;
        self.clock = timestamp;
        Ok(Current {
            class,
            timestamp,
            pos: start,
        })
    }
}
