//! Reading a stream file's packets into the window and decoding their events, with the warnings
//! and errors of a damaged file.

use super::*;

impl StreamReader {
    pub(super) fn warn(&mut self, offset: u64, message: String) {
        // One stream with a systematic problem should not flood the caller.
        if self.warnings.len() < 100 {
            self.warnings
                .push(Warning::new(&self.path, offset, message));
        }
    }

    /// An error at index `at_in_buf` of the window.
    pub(super) fn corrupt(&self, at_in_buf: usize, what: String) -> Error {
        let at = self.packet.offset + self.win + at_in_buf as u64;
        Error::corrupt(&self.path, at, what)
    }

    /// Whether content of the current packet remains beyond the window.
    pub(super) fn more_in_packet(&self) -> bool {
        self.win + (self.buf.len() as u64) < self.content_end
    }

    /// Drops the consumed bytes of the window and reads more of the packet behind the rest,
    /// growing the window (up to [`MAX_EVENT_BYTES`]) if the event at `pos` fills it.
    /// `Ok(false)` if that event is larger than the limit. Call only when
    /// [`Self::more_in_packet`].
    pub(super) fn refill(&mut self) -> Result<bool, Error> {
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
    pub(super) fn next_packet(&mut self) -> Result<bool, Error> {
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
    pub(super) fn read_at(&mut self, off: u64, start: usize) -> Result<(), Error> {
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
    pub(super) fn decode_event(&mut self) -> Result<Current, Stop> {
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
