//! Sending metadata and packets (with their index entries) on the data connection, and the
//! acknowledgements of packets in flight.

use super::*;

impl RelayClient {
    /// Appends `bytes` to a metadata stream. The relay only appends: send each byte once, in
    /// order (a rewritten metadata file: send only what was added). The relay does not
    /// acknowledge metadata; a failure surfaces at the latest with the next command.
    pub fn send_metadata(&mut self, stream: StreamId, bytes: &[u8]) -> Result<(), Error> {
        let i = self.stream_index(stream, true)?;
        self.usable()?;
        for piece in bytes.chunks(METADATA_CHUNK) {
            let payload = wire::metadata_payload(stream.0, piece);
            self.send_command("metadata transfer", wire::CMD_SEND_METADATA, &payload)?;
            self.streams[i].info.sent += piece.len() as u64;
        }
        Ok(())
    }

    /// Sends one complete packet (exactly its `packet_size / 8` bytes) of a data stream: the
    /// bytes over the data connection, then its index entry (read from the packet's context)
    /// over the control connection. `Ok` once the relay acknowledged the index; `Err`: count
    /// the packet as lost. Returns the index sent.
    pub fn send_packet(&mut self, stream: StreamId, packet: &[u8]) -> Result<PacketIndex, Error> {
        let ix = PacketIndex::from_packet(packet).map_err(Error::from)?;
        self.send_packet_with_index(stream, packet, &ix)?;
        Ok(ix)
    }

    /// Like [`RelayClient::send_packet`] with an index the caller computed (its
    /// `packet_size_bits` must be the packet's length).
    pub fn send_packet_with_index(
        &mut self,
        stream: StreamId,
        packet: &[u8],
        index: &PacketIndex,
    ) -> Result<(), Error> {
        self.settle_in_flight()?;
        let i = self.send_data_and_index(stream, packet, index)?;
        self.generic_reply("packet index", false)?;
        self.streams[i].info.sent += 1;
        Ok(())
    }

    /// Sends a packet over the data connection and its index command over the control
    /// connection (its reply not read); returns the stream's position.
    pub(super) fn send_data_and_index(
        &mut self,
        stream: StreamId,
        packet: &[u8],
        index: &PacketIndex,
    ) -> Result<usize, Error> {
        let i = self.stream_index(stream, false)?;
        let len = u32::try_from(packet.len())
            .ok()
            .filter(|&l| l > 0 && u64::from(l) * 8 == index.packet_size_bits)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "packet of {} bytes does not match its index ({} bits) or exceeds 4 GiB",
                    packet.len(),
                    index.packet_size_bits
                ))
            })?;
        self.usable()?;
        let seq = self.streams[i].next_seq;
        let during = "packet transfer";
        let header = wire::data_header(stream.0, seq, len);
        // `write_all` (send(2) with MSG_NOSIGNAL on Linux), never writev: a relay that went
        // away must give EPIPE, not a SIGPIPE.
        let r = self
            .data
            .write_all(&header)
            .and_then(|()| self.data.write_all(packet));
        if let Err(e) = r {
            return Err(self.fail(Error::io(during, e)));
        }
        // The relay now expects this sequence number's index; whatever happens next, the
        // next packet takes the next number.
        self.streams[i].next_seq = seq + 1;
        let payload = wire::index_payload(stream.0, seq, index);
        self.send_command_raw("packet index", wire::CMD_SEND_INDEX, &payload)?;
        Ok(i)
    }

    /// Like [`RelayClient::send_packet_with_index`], without waiting for the relay to
    /// acknowledge the index: the acknowledgement is read later, by
    /// [`RelayClient::collect_acks`] (or before any other command, which keeps the replies in
    /// order). At most [`SessionOptions::max_in_flight`] wait; beyond, the oldest is read
    /// first. `Ok`: sent, outcome pending; `Err`: not sent
    /// (count it lost; with [`Error::connection_lost`], every packet still in flight is lost
    /// too: `collect_acks` says how many).
    pub fn send_packet_nowait(
        &mut self,
        stream: StreamId,
        packet: &[u8],
        index: &PacketIndex,
    ) -> Result<(), Error> {
        while self.in_flight.len() >= self.max_in_flight {
            self.read_one_ack()?;
        }
        let i = self.send_data_and_index(stream, packet, index)?;
        self.in_flight.push_back(i);
        Ok(())
    }

    /// Hands over, oldest first, whether the relay accepted each packet sent with
    /// [`RelayClient::send_packet_nowait`] (`each(true)`) or refused its index
    /// (`each(false)`), reading the acknowledgements still in flight. On a lost connection it
    /// returns the error after handing over those it could read: the packets still in flight
    /// (`in_flight()` of them) got no answer: count them lost.
    pub fn collect_acks(&mut self, each: impl FnMut(bool)) -> Result<(), Error> {
        let r = self.settle_in_flight();
        self.take_read_acks(each);
        r
    }

    /// Hands over the acknowledgements already read (to let another command through),
    /// oldest first, without reading more: for a client being dropped after a lost
    /// connection, whose remaining `in_flight()` packets got no answer.
    pub fn take_read_acks(&mut self, mut each: impl FnMut(bool)) {
        for ok in self.acked.drain(..) {
            each(ok);
        }
    }

    /// Packets sent with [`RelayClient::send_packet_nowait`] whose acknowledgement is not read
    /// yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Reads every acknowledgement in flight into `acked` (before another command's reply).
    pub(super) fn settle_in_flight(&mut self) -> Result<(), Error> {
        while !self.in_flight.is_empty() {
            self.read_one_ack()?;
        }
        Ok(())
    }

    pub(super) fn read_one_ack(&mut self) -> Result<(), Error> {
        let Some(&i) = self.in_flight.front() else {
            return Ok(());
        };
        let during = "packet index";
        let ok = match self.generic_reply(during, false) {
            Ok(()) => true,
            Err(Error::Refused { .. }) => false,
            Err(e) => return Err(e),
        };
        self.in_flight.pop_front();
        if ok {
            self.streams[i].info.sent += 1;
        }
        self.acked.push_back(ok);
        Ok(())
    }

    /// Sends a live beacon for an idle data stream: tells live viewers that the stream has
    /// no event before `timestamp_end` (clock cycles), so they can show the other streams'
    /// events up to there instead of waiting for this one.
    pub fn send_beacon(
        &mut self,
        stream: StreamId,
        stream_class_id: u64,
        timestamp_end: u64,
    ) -> Result<(), Error> {
        let i = self.stream_index(stream, false)?;
        self.usable()?;
        let beacon = PacketIndex {
            timestamp_end,
            stream_id: stream_class_id,
            ..PacketIndex::default()
        };
        let during = "live beacon";
        // packet size 0 marks a beacon; the sequence number is not consumed.
        let payload = wire::index_payload(stream.0, self.streams[i].next_seq, &beacon);
        self.send_command(during, wire::CMD_SEND_INDEX, &payload)?;
        self.generic_reply(during, false)
    }
}
