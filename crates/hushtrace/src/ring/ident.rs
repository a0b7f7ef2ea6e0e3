//! The identity a ring writes into its packet contexts (process, thread, name).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::relaxed::{Relaxed16, RelaxedU64};

/// The identity a packet context carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ident {
    /// Process id.
    pub vpid: u32,
    /// Thread id.
    pub vtid: u32,
    /// Thread name, NUL-padded.
    pub procname: [u8; 16],
    /// `pthread_self()`.
    pub pthread: u64,
}

/// The identity of a packet context, in relaxed atomics (see [`crate::relaxed`]).
#[derive(Debug, Default)]
pub(crate) struct AtomicIdent {
    ids: RelaxedU64,
    procname: Relaxed16,
    pthread: RelaxedU64,
}

impl AtomicIdent {
    pub(crate) fn new(id: Ident) -> Self {
        let a = AtomicIdent::default();
        a.set(id);
        a
    }
    pub(crate) fn get(&self) -> Ident {
        let ids = self.ids.get();
        Ident {
            vpid: (ids >> 32) as u32,
            vtid: ids as u32,
            procname: self.procname.get(),
            pthread: self.pthread.get(),
        }
    }
    pub(crate) fn set(&self, id: Ident) {
        self.ids.set(((id.vpid as u64) << 32) | id.vtid as u64);
        self.procname.set(id.procname);
        self.pthread.set(id.pthread);
    }
}
