//! Setting the consumer up: this process's trace directory, the rings' directory, the control
//! socket, the outputs; and the metadata, written again whenever new event types appear.

use super::sink::{file::FileSink, Sink};
use super::Consumer;
use crate::clock;
use crate::config::Error;
use crate::platform;
use crate::state::{self, Shared};
use hushtrace_core::all_callsites;
use hushtrace_ctf::metadata::{EventClass, TraceDesc};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Consumer {
    /// Creates this process's trace directory (`<root>/<pid>`, or `<pid>.<n>` if an earlier
    /// process with the same pid — e.g. before an `exec` — or an earlier session of this process
    /// already has it), relative to the session root's descriptor, and writes the metadata.
    pub(crate) fn create(shared: Arc<Shared>) -> Result<Consumer, Error> {
        let pid = shared.pid.load(Ordering::Relaxed);
        let (mut dir, streams_dir) = {
            let mut inner = shared.inner.lock();
            let inner = &mut *inner;
            let root_path = inner.root.path().to_path_buf();
            let mut next = state::next_suffix();
            let io = |name: &str| {
                let path = root_path.join(name);
                move |source| Error::Io { path, source }
            };
            let dir = inner
                .root
                .create_subdir(&pid.to_string(), &mut next)
                .map_err(io(&pid.to_string()))?;
            state::set_next_suffix(next);
            inner.trace_dir = dir.path().to_path_buf();
            let name = dir_name(&dir, pid);
            // A second descriptor of the same directory for the stream files' sink.
            let streams_dir = inner.root.open_subdir(&name).map_err(io(&name))?;
            (dir, streams_dir)
        };
        // Rings in files that outlive the process (`hushtrace recover`): see `ringdir.rs`.
        let rings = crate::ringdir::setup(&mut dir, pid);
        shared.inner.lock().rings = rings;
        #[cfg(feature = "control")]
        let control = crate::control::Server::bind(pid).ok();
        let name = dir_name(&dir, pid);
        let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
        // Relay-only: the local directory holds the metadata (and statistics) only.
        let relay_only = shared.cfg.relay.is_some() && shared.cfg.relay_only;
        sinks.push(Box::new(FileSink::new(
            streams_dir,
            !relay_only,
            shared.cfg.direct_io,
        )));
        #[cfg(feature = "relay")]
        {
            let root = shared.inner.lock().root.path().to_path_buf();
            if let Some(r) = super::sink::relay::RelaySink::new(&shared.cfg, &root, &name) {
                sinks.push(Box::new(r));
            }
        }
        let _ = name;
        let mut c = Consumer {
            shared,
            dir,
            sinks,
            types_gen: None,
            #[cfg(feature = "control")]
            control,
            tally: super::stats::Tally::default(),
            snapshots: 0,
            late: super::late::LateState::default(),
            desc: TraceDesc {
                uuid: [0; 16],
                clock_uuid: [0; 16],
                clock: clock::calibrate().clone(),
                vpid: 0,
                procname: String::new(),
                hostname: String::new(),
                events: Vec::new(),
            },
            out: std::collections::HashMap::new(),
            last_flush: Instant::now(),
            // SAFETY: a session has one consumer at a time (`ensure_running` starts it once;
            // a stop without a consumer thread creates its own for the final pass), and it
            // finishes and recycles only quiescent buffers (`run`).
            right: unsafe { crate::ring::ConsumerRight::new() },
            sched_error: None,
        };
        c.write_metadata()?;
        Ok(c)
    }

    /// Session start: connects the outputs that connect (the relay): the error says why one
    /// cannot be used. A fork child's consumer connects on its first pass instead, and
    /// retries with backoff.
    pub(crate) fn connect(&mut self) -> Result<(), Error> {
        for s in &mut self.sinks {
            s.connect_now(&self.desc)?;
        }
        Ok(())
    }

    /// Gives every output the metadata as of now (the file sink writes the `metadata` file).
    pub(super) fn write_metadata(&mut self) -> Result<(), Error> {
        let gen = hushtrace_core::types_generation();
        self.desc = self.trace_desc();
        let mut first_err = None;
        for s in &mut self.sinks {
            if let Err(e) = s.metadata(&self.desc) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        self.types_gen = Some(gen);
        Ok(())
    }

    /// Whether event types were published since the metadata was last written.
    pub(super) fn metadata_stale(&self) -> bool {
        self.types_gen != Some(hushtrace_core::types_generation())
    }

    /// The description of this process's trace, listing every callsite.
    pub(super) fn trace_desc(&self) -> TraceDesc {
        let events = all_callsites()
            .enumerate()
            .map(|(i, cs)| EventClass {
                id: i as u16,
                name: cs.full_name(),
                kind: cs.kind,
                fields: cs.types().map(|t| {
                    cs.field_names
                        .iter()
                        .map(|n| n.to_string())
                        .zip(t)
                        .collect()
                }),
            })
            .collect();
        TraceDesc {
            uuid: self.shared.inner.lock().uuid,
            clock_uuid: self.shared.clock_uuid,
            clock: crate::clock::calibrate().clone(),
            vpid: self.shared.pid.load(Ordering::Relaxed),
            procname: state::process_name(),
            hostname: platform::hostname(),
            events,
        }
    }

    pub(super) fn note_error(&self, e: impl std::fmt::Display) {
        self.shared.note_error(e);
    }
}

/// The name of a trace directory (`<pid>` or `<pid>.<n>`).
fn dir_name(dir: &crate::tracedir::Dir, pid: u32) -> String {
    dir.path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| pid.to_string())
}
