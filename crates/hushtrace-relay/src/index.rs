//! The index entry of a packet, read from the packet's own header and context.

use hushtrace_ctf::layout;
use std::fmt;

/// What the relay records about one packet (its `index/<stream>.idx` entry, which live viewers
/// read to find packets). All values come from the packet's header and context.
///
/// ```
/// # use hushtrace_relay::PacketIndex;
/// // a packet too short to hold hushtrace's 112-byte header is refused
/// assert!(PacketIndex::from_packet(&[0u8; 16]).is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketIndex {
    /// Packet size, in bits.
    pub packet_size_bits: u64,
    /// Content size, in bits.
    pub content_size_bits: u64,
    /// Clock value of the packet's first event.
    pub timestamp_begin: u64,
    /// Clock value of the packet's last event.
    pub timestamp_end: u64,
    /// Events discarded in this stream so far (cumulative).
    pub events_discarded: u64,
    /// CTF stream class id.
    pub stream_id: u64,
    /// CTF stream instance id.
    pub stream_instance_id: u64,
    /// Per-stream packet sequence number.
    pub packet_seq_num: u64,
}

/// Why bytes are not one hushtrace packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketError(String);

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PacketError {}

impl PacketIndex {
    /// Reads the index values of one complete packet: `packet` must be exactly the packet's
    /// bytes (`packet_size / 8` of them), starting with the CTF magic.
    pub fn from_packet(packet: &[u8]) -> Result<PacketIndex, PacketError> {
        let ix = PacketIndex::from_header(packet)?;
        if ix.packet_size_bits / 8 != packet.len() as u64 {
            return Err(PacketError(format!(
                "packet header says {} bytes, {} given",
                ix.packet_size_bits / 8,
                packet.len()
            )));
        }
        Ok(ix)
    }

    /// Reads the index values from the start of a packet (at least its
    /// [`layout::PACKET_HEADER_LEN`] header bytes); checks the magic number and the sizes.
    pub fn from_header(header: &[u8]) -> Result<PacketIndex, PacketError> {
        if header.len() < layout::PACKET_HEADER_LEN {
            return Err(PacketError(format!(
                "{} bytes cannot hold a {}-byte packet header",
                header.len(),
                layout::PACKET_HEADER_LEN
            )));
        }
        let magic = layout::PacketHeader::magic(header).unwrap_or_default();
        if magic != layout::MAGIC {
            return Err(PacketError(format!(
                "bad packet magic {magic:#010x} (expected {:#010x})",
                layout::MAGIC
            )));
        }
        let h = layout::PacketHeader::decode(header).unwrap_or_default();
        let ix = PacketIndex {
            packet_size_bits: h.packet_size,
            content_size_bits: h.content_size,
            timestamp_begin: h.timestamp_begin,
            timestamp_end: h.timestamp_end,
            events_discarded: h.events_discarded,
            stream_id: u64::from(layout::PacketHeader::stream_id(header).unwrap_or_default()),
            stream_instance_id: h.stream_instance_id,
            packet_seq_num: h.seq,
        };
        let min_bits = (layout::PACKET_HEADER_LEN as u64) * 8;
        if !ix.packet_size_bits.is_multiple_of(8)
            || ix.packet_size_bits < min_bits
            || ix.packet_size_bits > u64::from(u32::MAX) * 8
            || ix.content_size_bits > ix.packet_size_bits
            || ix.content_size_bits < min_bits
        {
            return Err(PacketError(format!(
                "implausible sizes: packet {} bits, content {} bits",
                ix.packet_size_bits, ix.content_size_bits
            )));
        }
        Ok(ix)
    }

    /// Length of the packet in bytes.
    pub fn packet_len(&self) -> usize {
        (self.packet_size_bits / 8) as usize
    }
}

/// Splits a stream file's bytes into its packets (each `packet_size / 8` bytes long).
///
/// Stops with an error at the first malformed packet; a truncated last packet is an error too.
///
/// ```
/// let packets: Vec<_> = hushtrace_relay::split_packets(&[]).collect();
/// assert!(packets.is_empty());
/// ```
pub fn split_packets(
    file: &[u8],
) -> impl Iterator<Item = Result<(&[u8], PacketIndex), PacketError>> + '_ {
    let mut off = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || off >= file.len() {
            return None;
        }
        let r = PacketIndex::from_header(&file[off..]).and_then(|ix| {
            let end = off
                .checked_add(ix.packet_len())
                .filter(|&e| e <= file.len())
                .ok_or_else(|| {
                    PacketError(format!(
                        "packet at byte {off} is {} bytes long, only {} left",
                        ix.packet_len(),
                        file.len() - off
                    ))
                })?;
            let p = &file[off..end];
            off = end;
            Ok((p, ix))
        });
        failed = r.is_err();
        Some(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn packet(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[..4].copy_from_slice(&layout::MAGIC.to_le_bytes());
        let bits = (len as u64 * 8).to_le_bytes();
        p[layout::OFF_PACKET_SIZE..][..8].copy_from_slice(&bits);
        p[layout::OFF_CONTENT_SIZE..][..8].copy_from_slice(&bits);
        p[layout::OFF_TIMESTAMP_BEGIN..][..8].copy_from_slice(&5u64.to_le_bytes());
        p[layout::OFF_PACKET_SEQ_NUM..][..8].copy_from_slice(&9u64.to_le_bytes());
        p
    }

    #[test]
    fn reads_the_context() {
        let p = packet(200);
        let ix = PacketIndex::from_packet(&p).unwrap();
        assert_eq!(
            (ix.packet_size_bits, ix.timestamp_begin, ix.packet_seq_num),
            (1600, 5, 9)
        );
        assert!(PacketIndex::from_packet(&p[..199]).is_err());
        let mut two = packet(120);
        two.extend(packet(130));
        let v: Vec<_> = split_packets(&two).map(|r| r.unwrap().0.len()).collect();
        assert_eq!(v, [120, 130]);
        let v: Vec<_> = split_packets(&two[..200]).collect();
        assert!(v[1].is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = PacketIndex::from_packet(&b);
            for r in split_packets(&b) { let _ = r; }
        }
    }
}
