//! Commands and replies on the control connection, the streams they name, and how a failure
//! breaks the client.

use super::*;

impl RelayClient {
    pub(super) fn streams_is_metadata(&self, id: StreamId) -> bool {
        self.by_handle
            .get(&id.0)
            .is_some_and(|&i| self.streams[i].info.is_metadata())
    }

    pub(super) fn stream_index(&self, id: StreamId, metadata: bool) -> Result<usize, Error> {
        let i = *self.by_handle.get(&id.0).ok_or_else(|| {
            Error::InvalidArgument(format!("stream {} is not a stream of this client", id.0))
        })?;
        let s = &self.streams[i].info;
        if s.closed {
            return Err(Error::InvalidArgument(format!(
                "stream {} ({}/{}) is closed",
                id.0, s.path, s.channel
            )));
        }
        if s.is_metadata() != metadata {
            return Err(Error::InvalidArgument(format!(
                "stream {} ({}/{}) is {}a metadata stream",
                id.0,
                s.path,
                s.channel,
                if metadata { "not " } else { "" }
            )));
        }
        Ok(i)
    }

    pub(super) fn usable(&self) -> Result<(), Error> {
        match &self.broken {
            Some(cause) => Err(Error::Broken {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Marks the client broken (for errors that desynchronise the protocol) and returns `e`.
    pub(super) fn fail(&mut self, e: Error) -> Error {
        if e.connection_lost() && self.broken.is_none() {
            self.broken = Some(e.to_string());
            let _ = self.data.shutdown(Shutdown::Both);
            let _ = self.control.shutdown(Shutdown::Both);
        }
        e
    }

    pub(super) fn garbage(&mut self, during: &'static str, e: wire::ReplyError) -> Error {
        self.fail(Error::Protocol {
            during,
            detail: e.to_string(),
        })
    }

    pub(super) fn refused(&mut self, during: &'static str, code: u32, fatal: bool) -> Error {
        let e = Error::Refused { during, code };
        if fatal {
            self.broken = Some(e.to_string());
        }
        e
    }

    /// Sends a command whose reply the caller reads next: acknowledgements still in flight
    /// are read first, so replies stay in order.
    pub(super) fn send_command(
        &mut self,
        during: &'static str,
        cmd: u32,
        payload: &[u8],
    ) -> Result<(), Error> {
        self.settle_in_flight()?;
        self.send_command_raw(during, cmd, payload)
    }

    pub(super) fn send_command_raw(
        &mut self,
        during: &'static str,
        cmd: u32,
        payload: &[u8],
    ) -> Result<(), Error> {
        self.usable()?;
        let msg = wire::command(cmd, payload);
        if let Err(e) = self.control.write_all(&msg) {
            return Err(self.fail(Error::io(during, e)));
        }
        Ok(())
    }

    pub(super) fn read_reply(
        &mut self,
        during: &'static str,
        len: usize,
    ) -> Result<Vec<u8>, Error> {
        let mut b = vec![0u8; len];
        if let Err(e) = self.control.read_exact(&mut b) {
            return Err(self.fail(Error::io(during, e)));
        }
        Ok(b)
    }

    pub(super) fn generic_reply(&mut self, during: &'static str, fatal: bool) -> Result<(), Error> {
        let reply = self.read_reply(during, 4)?;
        match wire::parse_generic(&reply).map_err(|e| self.garbage(during, e))? {
            Ok(()) => Ok(()),
            Err(code) => Err(self.refused(during, code, fatal)),
        }
    }
}
