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

mod decode;

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
}
