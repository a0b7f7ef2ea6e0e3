//! The per-thread ring buffer: `num_subbufs` sub-buffers, each one CTF packet.
//!
//! # Protocol
//! One producer (the owning thread) and one consumer (the consumer thread). Packets are numbered
//! per stream; packet `s` lives in slot `s % n`.
//!
//! * The producer fills the open packet with events, each reserved with a signal-safe local
//!   compare-and-swap on `off` (so a signal handler that traces on the same thread gets its own
//!   bytes) and given its header by the reservation (compact or extended, see
//!   [`Buffer::reserve_event`]), then finalizes it: writes `timestamp_end`, sizes and the
//!   discarded count into the header, records the packet's event count and length in `meta`,
//!   and publishes it with a Release store of `committed = s + 1`. That store is the only write
//!   of the producer to a line another thread reads in the steady state.
//! * The consumer owns `consumed`: packets in `consumed .. committed` are ready. It Acquire-loads
//!   `committed`, writes the packets to disk and Release-stores `consumed`.
//! * Before opening packet `s` the producer Acquire-loads `consumed`. If `s - consumed == n`
//!   the ring is full: in discard mode the event is dropped and counted; in overwrite mode the
//!   oldest packet is overwritten and its events counted (the consumer does not read an
//!   overwrite-mode ring while it is attached, so the slot is not being read).
//! * Producer state ([`Producer`]) is written only by the owner while the buffer is attached to
//!   its thread (and by signal handlers nesting on it, hence relaxed atomics and signal-safe
//!   local operations), and only by the consumer once the buffer is quiescent (thread exited,
//!   session stopped: see `session/stop.rs`), with the hand-over ordered by the buffer `state`
//!   ([`BufState`]).
//!
//! # Who may call what
//! Producer methods are [`ProducerKey`]'s, consumer methods [`ConsumerKey`]'s: a key borrows
//! the one ring it opens, so neither side can call the other's methods, nor use one ring's key
//! on another, by accident. Producer keys only `unsafe` code mints; consumer keys come from the
//! consumer's one [`ConsumerRight`], which only `unsafe` code mints (in the modules
//! ARCHITECTURE.md lists, checked by `ci/layers.py`).
//! Read-only accessors (`lost`, `ident`, `state`) need no key.
//!
//! # Model checking
//! Every atomic here (the hand-over, `state`, `meta`, the header-page words of the flush and
//! snapshot protocols, their fences, the relaxed and local producer fields) comes from
//! [`crate::primitive`], so under `--cfg hushtrace_loom` this code runs on loom's atomics and
//! on heap memory (the platform fallback), and `tests/loom.rs` model-checks the life cycle:
//! reservation and packet switches against a draining consumer, the overwrite-mode finish, the
//! stop's detach and quiescence, thread exit with recycling, the flush's read of the open
//! packet and the snapshot of a live ring. Loom cannot see the raw packet memory, so in that
//! build every write and read of a slot's bytes also touches loom `UnsafeCell`s, one per 4
//! bytes (`cells`), and loom's race detector reports bytes read while they may be written or
//! before their write is visible. The module is `pub` (and `doc(hidden)`) only in that build.
//!
//! # Files
//! This file holds the ring's types (`Producer`, `Buffer`) and the keys; the methods are in
//! `ring/`: `memory.rs` (mapping, header page, prefault, unmap), `reserve.rs` (an event's
//! reservation), `packet.rs` (packet switches, fork reset), `drain.rs` (the consumer's drain,
//! finish and recycle), `flush.rs` and `snapshot.rs` (the consumer's live reads); `ident.rs` and
//! `lifecycle.rs` hold [`Ident`] and [`BufState`]. Every file but `flush.rs` and `snapshot.rs`
//! denies the hot-path lint (clippy.toml).
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

mod drain;
mod flush;
mod ident;
mod late;
mod lifecycle;
mod memory;
mod packet;
mod reserve;
mod snapshot;
#[cfg(hushtrace_loom)]
pub use flush::OpenPacket;
pub(crate) use ident::AtomicIdent;
pub use ident::Ident;
pub use late::LateSpan;
pub use lifecycle::{AtomicBufState, BufState};
pub use reserve::Full;

use crate::handover::Handover;
use crate::local::LocalU64;
use crate::primitive::AtomicU64;
use crate::relaxed::{Relaxed16, RelaxedBool, RelaxedPtr, RelaxedU64};
use crossbeam_utils::CachePadded;

pub use hushtrace_core::Mode;

/// Producer-side state. See the module docs for who may touch it when: the thread holding a
/// [`ProducerKey`] for the buffer (and signal handlers nesting on it), or the consumer
/// (holding a [`ConsumerKey`]) once the buffer is quiescent (`finish`, `recycle`). Every
/// mutation of its `LocalU64`s is in a method reached only from those (the private helpers
/// `reserve_*`, `finalize`, `open_next` are called by key-taking methods), which is the
/// single-writer argument their `unsafe` blocks cite.
#[derive(Debug)]
pub(crate) struct Producer {
    /// Reservation offset inside the open packet.
    off: LocalU64,
    /// The stream's clock as the producer last left it: the timestamp of an event already
    /// reserved in the open packet, or the packet's `timestamp_begin`. Invariant: never later
    /// than the timestamp of the event reserved last (the true previous event), because events
    /// are reserved in timestamp order and this is only ever set to the timestamp of a reserved
    /// event or to `timestamp_begin`. A signal handler nesting between a reservation's
    /// compare-and-swap and its store of `last_ts` reads an older value (its choice of header is
    /// only more conservative), and the interrupted store may then move `last_ts` back below the
    /// handler's event, which keeps the invariant. Hence a compact header chosen against
    /// `last_ts` ([`compact_fits`]) is within 2^24 cycles of the true previous event, and
    /// decodes.
    last_ts: LocalU64,
    /// Events in the open packet.
    events: LocalU64,
    /// Cumulative events dropped in this stream (CTF `events_discarded`).
    discarded: LocalU64,
    /// Events lost with overwritten packets (overwrite mode), not in the CTF field: readers see
    /// those as gaps in `packet_seq_num`.
    overwritten: RelaxedU64,
    /// `subbuf_size` while a packet is open, 0 otherwise (every reservation then fails).
    end: RelaxedU64,
    /// Start of the open packet's slot.
    base: RelaxedPtr<u8>,
    /// Sequence number of the open packet, or of the next one to open.
    seq: RelaxedU64,
    /// Whether a packet is open.
    open: RelaxedBool,
    /// `discarded` as written in the last committed packet.
    discarded_reported: RelaxedU64,
    /// Identity written into packet contexts.
    ident: AtomicIdent,
    /// Trace UUID written into packet headers.
    uuid: Relaxed16,
}

#[derive(Debug, Default)]
struct SlotMeta {
    events: AtomicU64,
    len: AtomicU64,
}

/// A per-thread ring of packets. Memory is an anonymous mapping allocated when the buffer is
/// created (never inside a tracepoint).
///
/// Invariants: `mem` is a live mapping of `subbuf_size * num_subbufs` bytes owned by this value;
/// `producer` is accessed as described in the module docs.
#[derive(Debug)]
pub struct Buffer {
    producer: CachePadded<Producer>,
    handover: Handover,
    /// Late spans (`ring/late.rs`): written by the producer only when a span ends late.
    late: CachePadded<late::LateSlots>,
    meta: Box<[SlotMeta]>,
    /// Where the buffer is in its life cycle; hands the producer side between threads.
    pub state: AtomicBufState,
    mem: *mut u8,
    /// The ring header page (see `hushtrace_ctf::ringfile`), right before `mem` in the same
    /// mapping: in a ring file for file-backed rings, so a crash leaves it to `recover`.
    hdr: *mut u8,
    /// Whether the mapping is a shared ring file (`MADV_DONTFORK`: absent in a fork child).
    file_backed: bool,
    /// False once the mapping is known to be absent (a fork child's copy of a file-backed
    /// ring of another thread): never unmapped then, its address may be reused.
    mapped: RelaxedBool,
    subbuf_size: usize,
    num_subbufs: usize,
    mode: Mode,
    /// Stream instance id: names the stream file.
    pub instance: u64,
    locked: RelaxedBool,
    /// Loom build only: one cell per `CELL` bytes of every slot, accessed wherever the code
    /// writes or reads those bytes, so loom's race detector sees the packet memory (module
    /// docs).
    #[cfg(hushtrace_loom)]
    cells: Box<[loom::cell::UnsafeCell<()>]>,
    /// Loom build only: the words of the ring header page from `HDR_WORDS_FROM` on (`done`,
    /// `open_seq`, `consumed`, the flush words, ...), as loom atomics.
    #[cfg(hushtrace_loom)]
    hdr_words: Box<[AtomicU64]>,
}

// SAFETY: the only non-thread-safe field is `mem`, a mapping the buffer owns: a slot's bytes
// are written by the producer only while the slot is free and read by the consumer only while
// its packet is committed and not yet consumed (the hand-over's Release/Acquire pairs order
// the two), or by the consumer alone once the producer is quiescent (`state`). Every other field
// is an atomic or a `LocalU64` (whose mutation is confined to one thread at a time by the same
// protocol).
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

/// The right to call one ring's producer methods, and the only way to call them: the methods
/// are the key's, so a key opens the ring it was minted for and no other (rtrb's split
/// producer half is the model). Held by the thread the buffer is attached to (inside a
/// tracepoint, or under the registry lock), by whoever prepares a buffer before it is
/// published to its thread, and by the fork child handler for the forking thread's buffer.
/// Neither `Copy`, `Send` nor `Sync`: a key stays on the thread that minted it, for as long as
/// it borrows the ring; only `unsafe` code can mint one ([`ProducerKey::new`]), only in the
/// modules ARCHITECTURE.md's "Who mints the ring's keys" lists (`ci/layers.py` checks).
///
/// No method takes a key and a ring apart, so there is nothing to mix up: `ring_a`'s key
/// calls `ring_a`'s methods (the ring's own are private to this module).
#[derive(Debug)]
pub struct ProducerKey<'b> {
    ring: &'b Buffer,
    _one_thread: core::marker::PhantomData<*const ()>,
}

impl<'b> ProducerKey<'b> {
    /// Mints the producer key of `ring`.
    ///
    /// # Safety
    /// The caller is `ring`'s producer while the key lives: `ring` is the buffer attached to
    /// the calling thread while it is inside a tracepoint on it (`depth > 0`) or holds the
    /// registry lock, a buffer not yet published to any thread, or, in a fork child, the
    /// forking thread's own buffer.
    #[inline(always)]
    #[cfg(not(hushtrace_loom))]
    pub(crate) unsafe fn new(ring: &'b Buffer) -> ProducerKey<'b> {
        ProducerKey {
            ring,
            _one_thread: core::marker::PhantomData,
        }
    }
    /// Mints the producer key of `ring` (the loom build's models play the thread).
    ///
    /// # Safety
    /// As in the normal build: the caller is the buffer's producer.
    #[cfg(hushtrace_loom)]
    pub unsafe fn new(ring: &'b Buffer) -> ProducerKey<'b> {
        ProducerKey {
            ring,
            _one_thread: core::marker::PhantomData,
        }
    }

    /// See [`Buffer::mark_done`](Buffer).
    #[inline(always)]
    pub fn mark_done(&self) {
        self.ring.mark_done()
    }

    /// Touches every page of the ring (and `mlock`s it); see `Buffer::prefault`.
    pub fn prefault(&self) -> bool {
        self.ring.prefault()
    }

    /// Sets the identity written into the ring's packets.
    pub fn set_ident(&self, ident: Ident) {
        self.ring.set_ident(ident)
    }

    /// Reserves an event's bytes (signal-safe); see `Buffer::reserve_event`.
    #[inline(always)]
    pub fn reserve_event(
        &self,
        id: u16,
        body: usize,
        depth: u32,
        now: impl Fn() -> u64,
        on_commit: impl Fn(),
    ) -> Result<*mut u8, Full> {
        self.ring.reserve_event(id, body, depth, now, on_commit)
    }

    /// Reserves an event with a compact header in the open packet, or nothing (`None`: take
    /// [`ProducerKey::reserve_event`]); see `Buffer::reserve_compact`.
    #[inline(always)]
    pub fn reserve_compact(&self, id: u16, body: usize, now: impl Fn() -> u64) -> Option<*mut u8> {
        self.ring.reserve_compact(id, body, now)
    }

    /// Counts one event dropped before reaching the ring (signal-safe).
    #[inline(always)]
    pub fn count_dropped(&self) {
        self.ring.count_dropped()
    }

    /// Closes the open packet now if it holds events (a snapshot asked by this thread).
    pub(crate) fn close_open_packet(&self, now: impl Fn() -> u64) {
        self.ring.close_open_packet(now)
    }

    /// O(`num_subbufs`) reset of the forking thread's ring in a fork child (only stores).
    pub fn reset_after_fork(&self, uuid: [u8; 16], ident: Ident) {
        self.ring.reset_after_fork(uuid, ident)
    }
}

/// The right of a session's one consumer: with it, [`ConsumerKey::new`] opens any ring of the
/// session for its consumer methods. Minted once per consumer, by `unsafe` code, only in the
/// modules ARCHITECTURE.md's "Who mints the ring's keys" lists (`ci/layers.py` checks).
/// `Send` (it moves to the consumer thread with the consumer), neither `Sync` nor `Copy`, so it
/// is never shared or duplicated.
#[derive(Debug)]
pub struct ConsumerRight(core::marker::PhantomData<core::cell::Cell<()>>);

impl ConsumerRight {
    /// Mints the consumer's right.
    ///
    /// # Safety
    /// The caller is the session's consumer: at most one thread uses consumer keys of a
    /// session's buffers at a time (the consumer thread, or a stop running the final pass when
    /// there is no consumer thread), and it uses the producer-side operations of `finish` and
    /// `recycle` only on buffers that are quiescent (module docs).
    #[inline(always)]
    #[cfg(not(hushtrace_loom))]
    pub(crate) unsafe fn new() -> ConsumerRight {
        ConsumerRight(core::marker::PhantomData)
    }
    /// Mints the consumer's right (the loom build's models play the consumer).
    ///
    /// # Safety
    /// As in the normal build: the caller is the buffers' one consumer.
    #[cfg(hushtrace_loom)]
    pub unsafe fn new() -> ConsumerRight {
        ConsumerRight(core::marker::PhantomData)
    }
}

/// The right to call one ring's consumer methods (drain, finish, recycle, the live reads of the
/// flush and the snapshot), and the only way to call them: the methods are the key's, so a key
/// opens only the ring it was made for. Made with the consumer's [`ConsumerRight`]; neither
/// `Copy`, `Send` nor `Sync`, so it stays with the consumer that made it. Producers never hold
/// one.
#[derive(Debug)]
pub struct ConsumerKey<'b> {
    ring: &'b Buffer,
    _consumer_thread: core::marker::PhantomData<*const ()>,
}

impl<'b> ConsumerKey<'b> {
    /// The consumer's key of `ring`.
    #[inline(always)]
    pub fn new(_right: &ConsumerRight, ring: &'b Buffer) -> ConsumerKey<'b> {
        ConsumerKey {
            ring,
            _consumer_thread: core::marker::PhantomData,
        }
    }

    /// Marks the ring's file clean (fully drained) for crash recovery.
    pub fn mark_clean(&self) {
        self.ring.mark_clean()
    }

    /// Calls `write` with each ready packet and its event count, and frees their slots.
    pub fn drain(&self, write: impl FnMut(&[u8], u64)) {
        self.ring.drain(write)
    }

    /// Writes out everything a quiescent ring holds; see `Buffer::finish`.
    pub fn finish(&self, write: impl FnMut(&[u8], u64)) {
        self.ring.finish(write)
    }

    /// Prepares a drained, quiescent ring for another thread.
    pub fn recycle(&self) {
        self.ring.recycle()
    }

    /// The open packet's complete events (discard mode, ring attached); see `Buffer::open_packet`.
    pub fn open_packet(&self) -> Option<flush::OpenPacket<'b>> {
        self.ring.open_packet()
    }

    /// Records in the ring header what the flush did to this stream, for crash recovery.
    pub(crate) fn set_flush_state(&self, extra: u64, partial: Option<(u64, u64, u64)>) {
        self.ring.set_flush_state(extra, partial)
    }

    /// The newest packets of a live overwrite-mode ring; see `Buffer::copy_newest`.
    pub fn copy_newest(
        &self,
        desc: &hushtrace_ctf::metadata::TraceDesc,
        write: impl FnMut(&[u8], u64),
    ) {
        self.ring.copy_newest(desc, write)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests, not the hot path
mod tests;
