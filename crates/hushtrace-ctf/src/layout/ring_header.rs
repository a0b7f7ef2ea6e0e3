//! The fixed part of a ring file's header: written once by the process creating the ring, read by
//! crash recovery.

use super::*;

/// A ring file's magic (bytes 0..8 of the file; see [`crate::ringfile`]).
pub const RING_MAGIC: [u8; 8] = *b"HTRING01";

/// The ring file format version this crate writes and reads.
pub const RING_VERSION: u32 = 1;

/// Ring file header: offset of the 8-byte magic [`RING_MAGIC`].
pub const RING_OFF_MAGIC: usize = 0;

/// Ring file header: offset of the `u32` version ([`RING_VERSION`]).
pub const RING_OFF_VERSION: usize = 8;

/// Ring file header: offset of the `u32` mode (0 discard, 1 overwrite).
pub const RING_OFF_MODE: usize = 12;

/// Ring file header: offset of the `u64` slot (sub-buffer) size in bytes.
pub const RING_OFF_SUBBUF_SIZE: usize = 16;

/// Ring file header: offset of the `u64` number of slots.
pub const RING_OFF_NUM_SUBBUFS: usize = 24;

/// Ring file header: offset of the `u64` stream instance id.
pub const RING_OFF_INSTANCE: usize = 32;

/// Ring file header: offset of the `u32` pid of the process that wrote the ring.
pub const RING_OFF_PID: usize = 40;

/// Bytes of the fixed part of a ring file's header (what [`RingFileHeader`] encodes); the
/// words the producer and consumer update while the ring lives follow at 64 and up.
pub const RING_FIXED_LEN: usize = 44;

/// The fixed part of a ring file's header, written once by the process creating the ring and
/// read by crash recovery: the one codec of both (the ring file's own header, not a packet's).
/// Little-endian, at the `RING_OFF_*` offsets:
///
/// | offset | field |
/// |---|---|
/// | 0 | magic `HTRING01` |
/// | 8 | version (`u32`, [`RING_VERSION`]) |
/// | 12 | mode (`u32`: 0 discard, 1 overwrite; any other value reads as discard) |
/// | 16 | `subbuf_size` (`u64`) |
/// | 24 | `num_subbufs` (`u64`) |
/// | 32 | `instance` (`u64`) |
/// | 40 | `pid` (`u32`) |
///
/// ```
/// use hushtrace_ctf::layout::*;
/// let h = RingFileHeader { overwrite: true, subbuf_size: 4096, num_subbufs: 4, instance: 7, pid: 42 };
/// let b = h.encode();
/// assert_eq!(&b[..8], b"HTRING01");
/// assert_eq!(RingFileHeader::decode(&b), Ok(h));
/// assert_eq!(RingFileHeader::decode(&b[..20]), Err(RingFileHeaderError::Short { len: 20 }));
/// assert_eq!(RingFileHeader::decode(b"\x7fELF"), Err(RingFileHeaderError::BadMagic));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFileHeader {
    /// Overwrite mode (else discard).
    pub overwrite: bool,
    /// Bytes per slot.
    pub subbuf_size: u64,
    /// Slots.
    pub num_subbufs: u64,
    /// Stream instance id (the `stream_<instance>` file).
    pub instance: u64,
    /// The process that wrote the ring.
    pub pid: u32,
}

/// Why bytes are not a ring file header [`RingFileHeader::decode`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingFileHeaderError {
    /// Fewer than [`RING_FIXED_LEN`] bytes.
    Short {
        /// Bytes given.
        len: usize,
    },
    /// The bytes do not start with [`RING_MAGIC`].
    BadMagic,
    /// A ring file of another format version.
    Version(u32),
}

impl std::fmt::Display for RingFileHeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingFileHeaderError::Short { len } => write!(
                f,
                "not a hushtrace ring file ({len} bytes, shorter than its header)"
            ),
            RingFileHeaderError::BadMagic => f.write_str("not a hushtrace ring file (bad magic)"),
            RingFileHeaderError::Version(v) => write!(f, "unsupported ring file version {v}"),
        }
    }
}

impl std::error::Error for RingFileHeaderError {}

impl RingFileHeader {
    /// Decodes the fixed header at the start of `b` (a ring file's first bytes). The magic and
    /// the version are checked; the geometry is the caller's to judge.
    pub fn decode(b: &[u8]) -> Result<RingFileHeader, RingFileHeaderError> {
        let short = RingFileHeaderError::Short { len: b.len() };
        let Some(b) = b.get(..RING_FIXED_LEN) else {
            // A short input that is not even a prefix of the magic is foreign rather than cut.
            let n = b.len().min(RING_MAGIC.len());
            return Err(if b[..n] == RING_MAGIC[..n] {
                short
            } else {
                RingFileHeaderError::BadMagic
            });
        };
        if b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8] != RING_MAGIC {
            return Err(RingFileHeaderError::BadMagic);
        }
        let version = read_u32(b, RING_OFF_VERSION).ok_or(short)?;
        if version != RING_VERSION {
            return Err(RingFileHeaderError::Version(version));
        }
        Ok(RingFileHeader {
            overwrite: read_u32(b, RING_OFF_MODE).ok_or(short)? == 1,
            subbuf_size: read_u64(b, RING_OFF_SUBBUF_SIZE).ok_or(short)?,
            num_subbufs: read_u64(b, RING_OFF_NUM_SUBBUFS).ok_or(short)?,
            instance: read_u64(b, RING_OFF_INSTANCE).ok_or(short)?,
            pid: read_u32(b, RING_OFF_PID).ok_or(short)?,
        })
    }

    /// The encoded fixed header: magic, version and every field at its offset. A writer whose
    /// header page is shared memory stores it with one unaligned write of the array.
    pub fn encode(&self) -> [u8; RING_FIXED_LEN] {
        let mut b = [0u8; RING_FIXED_LEN];
        b[RING_OFF_MAGIC..RING_OFF_MAGIC + 8].copy_from_slice(&RING_MAGIC);
        let u32s = [
            (RING_OFF_VERSION, RING_VERSION),
            (RING_OFF_MODE, u32::from(self.overwrite)),
            (RING_OFF_PID, self.pid),
        ];
        for (off, v) in u32s {
            b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        let u64s = [
            (RING_OFF_SUBBUF_SIZE, self.subbuf_size),
            (RING_OFF_NUM_SUBBUFS, self.num_subbufs),
            (RING_OFF_INSTANCE, self.instance),
        ];
        for (off, v) in u64s {
            b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}
