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
//!   session stopped: see `session.rs`), with the hand-over ordered by the buffer `state`
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
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

mod flush;
mod snapshot;
#[cfg(hushtrace_loom)]
pub use flush::OpenPacket;

use crate::clock;
use crate::handover::Handover;
use crate::local::LocalU64;
use crate::platform;
use crate::primitive::{compiler_fence, AtomicU64, AtomicU8, Ordering};
use crate::relaxed::{Relaxed16, RelaxedBool, RelaxedPtr, RelaxedU64};
use crossbeam_utils::CachePadded;
use hushtrace_ctf::layout::*;

pub use hushtrace_core::Mode;

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

/// Buffer life cycle, stored in [`Buffer::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BufState {
    /// Attached to a live thread; the thread is the producer.
    Attached = 0,
    /// The thread exited after its last event (Release); the consumer owns the producer side.
    Exited = 1,
    /// Taken from its thread by a session stop; quiescent once the stop has waited for it.
    Detached = 2,
    /// Drained and waiting in the pool for another thread.
    Pooled = 3,
    /// Inherited across `fork()` from a thread that does not exist in this process: never read.
    Abandoned = 4,
    /// Its thread did not leave a tracepoint within the stop's grace period (stopped or
    /// starved): never read, never unmapped (the thread may still write to it).
    Leaked = 5,
}

impl BufState {
    const ALL: [BufState; 6] = [
        BufState::Attached,
        BufState::Exited,
        BufState::Detached,
        BufState::Pooled,
        BufState::Abandoned,
        BufState::Leaked,
    ];
}

/// An atomic [`BufState`]: only valid states can be stored, so a load always decodes.
#[derive(Debug)]
pub struct AtomicBufState(AtomicU8);

impl AtomicBufState {
    /// A state word holding `s`.
    pub fn new(s: BufState) -> Self {
        AtomicBufState(AtomicU8::new(s as u8))
    }
    /// The current state.
    pub fn load(&self, order: Ordering) -> BufState {
        // Only `BufState as u8` values are ever stored (the field is private to this type).
        BufState::ALL[self.0.load(order) as usize]
    }
    /// Sets the state.
    pub fn store(&self, s: BufState, order: Ordering) {
        self.0.store(s as u8, order)
    }
    /// Moves from `from` to `to`; false if the state was not `from`.
    pub fn transition(&self, from: BufState, to: BufState, success: Ordering) -> bool {
        self.0
            .compare_exchange(from as u8, to as u8, success, Ordering::Relaxed)
            .is_ok()
    }
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

/// Outcome of [`Buffer::reserve_extended`].
enum Extended {
    /// Reserved and header written: the fields' address.
    Reserved(*mut u8),
    /// The event does not fit in the open packet.
    Full,
    /// A signal handler reserved in between: retry.
    Lost,
}

/// Outcome of a failed reservation.
#[derive(Debug)]
pub enum Full {
    /// The event was dropped and counted.
    Dropped,
}

impl Buffer {
    /// Allocates a buffer (an `mmap`: a system call; never called from a tracepoint of a
    /// no-syscall thread).
    pub fn new(
        subbuf_size: usize,
        num_subbufs: usize,
        mode: Mode,
        instance: u64,
        uuid: [u8; 16],
    ) -> Option<Buffer> {
        let hdr = platform::map_anon(RING_HEADER_LEN + subbuf_size * num_subbufs)?;
        // SAFETY: `hdr` is a fresh mapping of RING_HEADER_LEN + capacity bytes.
        let b = unsafe {
            Self::with_memory(hdr, false, subbuf_size, num_subbufs, mode, instance, uuid)
        };
        Some(b)
    }

    /// A buffer in the ring file `fd` (created empty, sized by this call): a shared mapping
    /// that outlives the process, for `hushtrace recover` after a crash. Every page of the
    /// file is allocated first ([`platform::reserve_file`]): a ring on a tmpfs that cannot
    /// supply its pages is refused here (`Err`, e.g. `ENOSPC`) instead of killing the program
    /// with SIGBUS at the first touch of a page. The caller removes the file on error.
    pub fn new_in_file(
        fd: std::os::fd::BorrowedFd<'_>,
        subbuf_size: usize,
        num_subbufs: usize,
        mode: Mode,
        instance: u64,
        uuid: [u8; 16],
    ) -> std::io::Result<Buffer> {
        let len = RING_HEADER_LEN + subbuf_size * num_subbufs;
        platform::reserve_file(fd, len as u64)?;
        let hdr = platform::map_shared(fd, len).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, "cannot map the ring file")
        })?;
        // SAFETY: `hdr` is a fresh shared mapping of `len` bytes of a file only we use.
        let b =
            unsafe { Self::with_memory(hdr, true, subbuf_size, num_subbufs, mode, instance, uuid) };
        b.write_ring_header();
        Ok(b)
    }

    /// # Safety
    /// `hdr` is a live mapping of `RING_HEADER_LEN + subbuf_size * num_subbufs` bytes that the
    /// buffer takes over (it unmaps it when dropped).
    unsafe fn with_memory(
        hdr: *mut u8,
        file_backed: bool,
        subbuf_size: usize,
        num_subbufs: usize,
        mode: Mode,
        instance: u64,
        uuid: [u8; 16],
    ) -> Buffer {
        // SAFETY: the slots follow the header page inside the mapping (caller).
        let mem = unsafe { hdr.add(RING_HEADER_LEN) };
        Buffer {
            producer: CachePadded::new(Producer {
                off: LocalU64::new(0),
                last_ts: LocalU64::new(0),
                events: LocalU64::new(0),
                discarded: LocalU64::new(0),
                overwritten: RelaxedU64::new(0),
                end: RelaxedU64::new(0),
                base: RelaxedPtr::new(mem),
                seq: RelaxedU64::new(0),
                open: RelaxedBool::new(false),
                discarded_reported: RelaxedU64::new(0),
                ident: AtomicIdent::new(Ident::default()),
                uuid: Relaxed16::new(uuid),
            }),
            handover: Handover::new(num_subbufs as u64),
            meta: (0..num_subbufs).map(|_| SlotMeta::default()).collect(),
            state: AtomicBufState::new(BufState::Attached),
            mem,
            hdr,
            file_backed,
            mapped: RelaxedBool::new(true),
            subbuf_size,
            num_subbufs,
            mode,
            instance,
            locked: RelaxedBool::new(false),
            #[cfg(hushtrace_loom)]
            cells: (0..num_subbufs * subbuf_size.div_ceil(CELL))
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
            #[cfg(hushtrace_loom)]
            hdr_words: (HDR_WORDS_FROM..=HDR_WORDS_TO)
                .step_by(8)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// A word of the ring header page, as an atomic of [`crate::primitive`].
    #[cfg(not(hushtrace_loom))]
    #[inline(always)]
    fn hdr_word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the ring file's 8-aligned header offsets, inside the header
        // page (page-aligned, so the word is 8-aligned); the page lives as long as `self` and
        // its words are only accessed atomically (`recover` reads the file after the process).
        unsafe { crate::primitive::atomic_u64_at(self.hdr.add(off) as *mut u64) }
    }

    /// Loom build: the header word at `off`, a loom atomic of this buffer (`hdr_words`), so
    /// the flush and snapshot protocols are model-checked.
    #[cfg(hushtrace_loom)]
    fn hdr_word(&self, off: usize) -> &AtomicU64 {
        &self.hdr_words[(off - HDR_WORDS_FROM) / 8]
    }

    /// The fixed part of the ring header (geometry, identity), as recovery decodes it.
    fn ring_file_header(&self) -> RingFileHeader {
        RingFileHeader {
            overwrite: self.mode == Mode::Overwrite,
            subbuf_size: self.subbuf_size as u64,
            num_subbufs: self.num_subbufs as u64,
            instance: self.instance,
            pid: platform::getpid(),
        }
    }

    /// Writes the fixed part of the ring header through the codec recovery reads it with.
    fn write_ring_header(&self) {
        let fixed = self.ring_file_header().encode();
        // SAFETY: the header page is ours, RING_HEADER_LEN >= RING_FIXED_LEN bytes long
        // (checked at compile time below), and nothing else writes its fixed part.
        unsafe { (self.hdr as *mut [u8; RING_FIXED_LEN]).write_unaligned(fixed) };
    }

    /// Producer, after an event is completely written at nesting depth 1: the open packet's
    /// complete bytes end at the current offset (nested events that completed meanwhile
    /// included). One store to the ring header (what `recover` trusts after a crash, and what
    /// the consumer's flush of an idle packet reads, `ring/flush.rs`). Release, so the event's
    /// bytes are visible to a consumer that Acquire-loads it: on x86_64 the same `mov` as a
    /// relaxed store (it only keeps the compiler from sinking the event's stores below it).
    #[inline(always)]
    fn mark_done(&self) {
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DONE)
            .store(self.producer.off.get(), Ordering::Release);
    }

    /// Mirrors the stream's discarded count into the ring header (cold paths).
    #[inline]
    fn mirror_discarded(&self) {
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DISCARDED)
            .store(self.producer.discarded.get(), Ordering::Relaxed);
    }

    /// Consumer, clean stop: the ring was drained (nothing to recover from it).
    fn mark_clean(&self) {
        self.hdr_word(hushtrace_ctf::ringfile::OFF_CLEAN)
            .store(1, Ordering::Release);
    }

    /// Fork child handler: this (another thread's) ring was a shared file mapping, which the
    /// child did not inherit: never touch or unmap it.
    pub fn forget_mapping_after_fork(&self) {
        if self.file_backed {
            self.mapped.set(false);
        }
    }

    /// Loom build only: tells loom's race detector that the producer side writes the bytes
    /// `off .. off + len` of `slot` (or, with `write == false`, that the consumer reads them),
    /// in cells of `CELL` bytes. Panics (failing the model) if the access can be concurrent
    /// with a conflicting one, e.g. a read of bytes whose write does not happen-before it.
    #[cfg(hushtrace_loom)]
    pub(crate) fn touch(&self, slot: usize, off: usize, len: usize, write: bool) {
        let per_slot = self.subbuf_size.div_ceil(CELL);
        for c in off / CELL..(off + len).div_ceil(CELL) {
            let cell = &self.cells[slot * per_slot + c];
            if write {
                cell.with_mut(|_| ());
            } else {
                cell.with(|_| ());
            }
        }
    }

    /// Total bytes of the ring.
    pub fn capacity(&self) -> usize {
        self.subbuf_size * self.num_subbufs
    }

    /// Asks for huge pages, writes every page (without changing it) so no page fault happens
    /// later, and `mlock`s the ring where the process may (ignoring EPERM/ENOMEM). Called by the
    /// owner before it enters no-syscall mode, or by a session start for such a thread before
    /// the buffer is published to it.
    /// Returns whether the ring is locked in memory.
    fn prefault(&self) -> bool {
        // Every page is about to be resident anyway: huge pages cost no extra memory here and
        // save TLB misses on the real-time thread's write path.
        platform::advise_hugepages(self.mem, self.capacity());
        let page = platform::page_size();
        let mut i = 0;
        while i < self.capacity() {
            // SAFETY: `i < capacity`, inside our mapping, and a byte is always a valid AtomicU8.
            // An atomic add of 0 writes the page (faulting it in, breaking copy-on-write) without
            // changing any byte, so packets being written or read stay intact.
            unsafe { crate::primitive::touch_byte(self.mem.add(i)) };
            i += page;
        }
        if !self.locked.get() && platform::mlock(self.mem, self.capacity()).is_ok() {
            self.locked.set(true);
        }
        self.locked.get()
    }

    /// Sets the identity used for the next packets (owner, or before publication), and the
    /// thread name of the open packet: a thread renamed just after it started (before its
    /// first packet was handed over) is never seen under its old name.
    fn set_ident(&self, ident: Ident) {
        self.producer.ident.set(ident);
        if self.producer.open.get() {
            let base = self.producer.base.get();
            for (i, b) in ident.procname.iter().enumerate() {
                // SAFETY: a packet is open, so `base` is its slot, which starts with its header
                // (PACKET_HEADER_LEN > OFF_PROCNAME + 16 bytes); we are its producer (the key).
                // Relaxed byte stores, as a snapshot may read the open packet at the same time
                // (byte loads, `primitive::load_byte`).
                unsafe { crate::primitive::store_byte(base.add(OFF_PROCNAME + i), *b) };
            }
        }
    }

    /// Reserves an event of class `id` with `body` bytes of fields, reads its timestamp and
    /// writes its header, atomically with respect to signal handlers on this thread: the
    /// timestamp is re-read if a handler reserved in between, so timestamps stay ordered in the
    /// stream. The header is compact when [`compact_fits`] against the stream's clock
    /// (`last_ts`), else extended; choosing the length and writing the header here keeps them
    /// in agreement. `depth` is the tracepoint nesting depth (1 = not nested). Returns the
    /// address of the `body` bytes for the fields.
    #[inline(always)]
    fn reserve_event(
        &self,
        id: u16,
        body: usize,
        depth: u32,
        now: impl Fn() -> u64,
        on_commit: impl Fn(),
    ) -> Result<*mut u8, Full> {
        match self.reserve_in_open_packet(id, body, &now) {
            Some(r) => Ok(r),
            None => self.reserve_slow(id, body, depth, now, on_commit),
        }
    }

    /// The signal-safe reservation in the open packet, or `None` when the event does not fit
    /// (or no packet is open). A handler that reserves between our read of `off` and the
    /// compare-and-swap makes it fail, and we retry with a fresh timestamp.
    ///
    /// The compact header is the common case and a branch, not a select: the compare-and-swap
    /// then does not wait for the cycle counter (a well-predicted branch lets the CPU run
    /// ahead; a conditional move would make the reserved length depend on `rdtsc`'s result).
    #[inline(always)]
    fn reserve_in_open_packet(
        &self,
        id: u16,
        body: usize,
        now: &impl Fn() -> u64,
    ) -> Option<*mut u8> {
        let p = &*self.producer;
        loop {
            let o = p.off.get();
            let end = p.end.get();
            // Room for the smaller header first: a full packet costs no clock read.
            let len = (COMPACT_HEADER_LEN + body) as u64;
            if o + len > end {
                return None;
            }
            let last = p.last_ts.get();
            let ts = now();
            if !compact_fits(id, ts, last) {
                match self.reserve_extended(o, end, id, body, ts) {
                    Extended::Reserved(fields) => return Some(fields),
                    Extended::Full => return None,
                    Extended::Lost => continue,
                }
            }
            // SAFETY: producer side, single writer (`Producer` docs).
            if unsafe { p.off.cas(o, o + len) } {
                // SAFETY: `o + len <= end <= subbuf_size`: the `len` bytes at `o` are inside
                // the open slot, and ours (the compare-and-swap reserved them).
                let dst = unsafe { self.reserved(o, len, ts) };
                // SAFETY: as above; the header is the first COMPACT_HEADER_LEN of them.
                unsafe {
                    put_u32(dst, 0, compact_word(id, ts));
                    return Some(dst.add(COMPACT_HEADER_LEN));
                }
            }
        }
    }

    /// The extended-header branch of [`Self::reserve_in_open_packet`], for an event at `ts`
    /// whose reservation read `off == o` and `end`: rare (an event id from 255, or the first
    /// event after a pause of 2^24 cycles), so out of line.
    #[cold]
    #[inline(never)]
    fn reserve_extended(&self, o: u64, end: u64, id: u16, body: usize, ts: u64) -> Extended {
        let len = (EXTENDED_HEADER_LEN + body) as u64;
        if o + len > end {
            return Extended::Full;
        }
        // SAFETY: producer side, single writer (`Producer` docs).
        if !unsafe { self.producer.off.cas(o, o + len) } {
            return Extended::Lost;
        }
        // SAFETY: `o + len <= end <= subbuf_size`: the `len` bytes at `o` are inside the open
        // slot, and ours (the compare-and-swap reserved them).
        let dst = unsafe { self.reserved(o, len, ts) };
        // SAFETY: as above; the header is the first EXTENDED_HEADER_LEN of them.
        unsafe {
            (dst as *mut [u8; EXTENDED_HEADER_LEN]).write_unaligned(extended_header(id, ts));
            Extended::Reserved(dst.add(EXTENDED_HEADER_LEN))
        }
    }

    /// After a successful compare-and-swap from `o`: records the event (`last_ts`, count) and
    /// returns its address in the open slot.
    ///
    /// # Safety
    /// The caller reserved bytes at offset `o` of the open packet with the compare-and-swap.
    #[inline(always)]
    unsafe fn reserved(&self, o: u64, _len: u64, ts: u64) -> *mut u8 {
        let p = &*self.producer;
        // `ts` is now the stream's newest timestamp; a handler that nests from here on reads
        // an older `last_ts` (see its docs).
        // SAFETY: producer side, single writer (`Producer` docs).
        unsafe {
            p.last_ts.set(ts);
            p.events.add(1);
        }
        // The caller writes the event's bytes into the open slot.
        #[cfg(hushtrace_loom)]
        self.touch(
            (p.base.get() as usize - self.mem as usize) / self.subbuf_size,
            o as usize,
            _len as usize,
            true,
        );
        // SAFETY: the caller reserved offset `o` of the open slot `base`.
        unsafe { p.base.get().add(o as usize) }
    }

    #[cold]
    #[inline(never)]
    fn reserve_slow(
        &self,
        id: u16,
        body: usize,
        depth: u32,
        now: impl Fn() -> u64,
        on_commit: impl Fn(),
    ) -> Result<*mut u8, Full> {
        let p = &*self.producer;
        // A nested (signal-handler) event must not switch packets under the interrupted one;
        // an event too large for an empty packet (with either header) is dropped.
        if depth > 1 || EXTENDED_HEADER_LEN + body > self.subbuf_size - PACKET_HEADER_LEN {
            // SAFETY: producer side, single writer (`Producer` docs).
            unsafe { p.discarded.add(1) };
            self.mirror_discarded();
            return Err(Full::Dropped);
        }
        // Signal handlers may fill the fresh packet before this thread reserves in it (a storm
        // of signals, each handler recording one event, while this thread makes only a few
        // instructions of progress between them): then close that packet too and open
        // another, at most once per slot, so the interrupted event is not dropped merely
        // because handlers were faster.
        let mut committed = false;
        let mut r = Err(Full::Dropped);
        for _ in 0..self.num_subbufs {
            if p.open.get() {
                self.finalize(&now);
                committed = true;
            }
            if !self.open_next(&now) {
                break;
            }
            if let Some(ok) = self.reserve_in_open_packet(id, body, &now) {
                r = Ok(ok);
                break;
            }
        }
        if r.is_err() {
            // SAFETY: producer side, single writer (`Producer` docs).
            unsafe { p.discarded.add(1) };
            self.mirror_discarded();
        }
        // Wake the consumer (discard mode only: an attached overwrite-mode ring is read only
        // when it stops) and only now: signals pending on the wake-up's system call are
        // delivered while a packet is open, so their events are not dropped.
        if committed && self.mode == Mode::Discard {
            on_commit();
        }
        r
    }

    /// Closes the open packet and hands it to the consumer. Signal-safe with respect to
    /// handlers on the owning thread: `end` is cleared first, so a handler arriving meanwhile
    /// cannot reserve in the packet being closed (its event is dropped and counted), and the
    /// offset, counts and end timestamp are read after that.
    fn finalize(&self, now: &impl Fn() -> u64) {
        let p = &*self.producer;
        p.end.set(0);
        compiler_fence(Ordering::SeqCst);
        let len = p.off.get();
        let base = p.base.get();
        let seq = p.seq.get();
        let discarded = p.discarded.get();
        let events = p.events.get();
        let ts_end = now();
        #[cfg(hushtrace_loom)]
        self.touch(
            (seq % self.num_subbufs as u64) as usize,
            0,
            PACKET_HEADER_LEN,
            true,
        );
        // SAFETY: `base` is the open slot, at least PACKET_HEADER_LEN bytes, owned by the
        // producer until the hand-over below.
        // The codec's words (constant offsets): four plain stores.
        let end = PacketEnd {
            timestamp_end: ts_end,
            len,
            events_discarded: discarded,
        };
        for (off, v) in end.words() {
            // SAFETY: as above; `off + 8 <= PACKET_HEADER_LEN`.
            unsafe { put_u64(base, off, v) };
        }
        let m = &self.meta[(seq % self.num_subbufs as u64) as usize];
        m.events.store(events, Ordering::Relaxed);
        m.len.store(len, Ordering::Relaxed);
        p.discarded_reported.set(discarded);
        p.open.set(false);
        p.seq.set(seq + 1);
        // Release: the packet bytes and `meta` above happen-before the consumer's Acquire load.
        self.handover.publish(seq + 1);
    }

    /// Opens packet `seq` if its slot is free (or overwritable). No system call.
    fn open_next(&self, now: &impl Fn() -> u64) -> bool {
        let p = &*self.producer;
        let seq = p.seq.get();
        let slot = (seq % self.num_subbufs as u64) as usize;
        // Acquire: the consumer's reads of the slot happen-before our overwriting it.
        if !self.handover.slot_free(seq) {
            match self.mode {
                Mode::Discard => return false,
                Mode::Overwrite => {
                    let lost = self.meta[slot].events.load(Ordering::Relaxed);
                    p.overwritten.set(p.overwritten.get() + lost);
                    self.hdr_word(hushtrace_ctf::ringfile::OFF_OVERWRITTEN)
                        .store(p.overwritten.get(), Ordering::Relaxed);
                }
            }
        }
        let ts_begin = now();
        // SAFETY: slot index < num_subbufs, so the slot is inside the mapping.
        let base = unsafe { self.mem.add(slot * self.subbuf_size) };
        let id = p.ident.get();
        #[cfg(hushtrace_loom)]
        self.touch(slot, 0, PACKET_HEADER_LEN, true);
        let header = PacketHeader {
            uuid: p.uuid.get(),
            stream_instance_id: self.instance,
            timestamp_begin: ts_begin,
            seq,
            vpid: id.vpid,
            vtid: id.vtid,
            procname: id.procname,
            pthread_id: id.pthread,
            // Not finalized (sizes, end time 0): a crash leaves a packet `recover` must cut
            // itself; `finalize` stores the `PacketEnd`.
            ..PacketHeader::default()
        };
        // SAFETY: the slot is free (checked above) and at least PACKET_HEADER_LEN bytes long;
        // one unaligned write of the encoded header.
        unsafe { (base as *mut [u8; PACKET_HEADER_LEN]).write_unaligned(header.encode()) };
        p.base.set(base);
        // SAFETY: producer side, single writer (`Producer` docs).
        unsafe {
            p.off.set(PACKET_HEADER_LEN as u64);
            // The packet's first event is relative to its begin time.
            p.last_ts.set(ts_begin);
            p.events.set(0);
        }
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DONE)
            .store(0, Ordering::Relaxed);
        // Release, after `done = 0` and the header: a consumer that Acquire-loads this
        // sequence number then reads `done` of this packet or a later one (`ring/flush.rs`).
        self.hdr_word(hushtrace_ctf::ringfile::OFF_OPEN_SEQ)
            .store(seq, Ordering::Release);
        p.open.set(true);
        // Everything above is in place before a signal handler can reserve in this packet.
        compiler_fence(Ordering::SeqCst);
        p.end.set(self.subbuf_size as u64);
        true
    }

    /// Calls `write` for every packet ready for the consumer (in order) and releases each slot
    /// after it. Discard mode only while attached. Consumer thread only.
    fn drain(&self, mut write: impl FnMut(&[u8], u64)) {
        while let Some(c) = self.handover.ready() {
            let slot = (c % self.num_subbufs as u64) as usize;
            let m = &self.meta[slot];
            let len = m.len.load(Ordering::Relaxed) as usize;
            #[cfg(hushtrace_loom)]
            self.touch(slot, 0, len, false);
            // SAFETY: packet `c` is committed and not yet consumed, so the producer does not
            // touch its slot; `len <= subbuf_size` (set by `finalize`).
            let bytes =
                unsafe { std::slice::from_raw_parts(self.mem.add(slot * self.subbuf_size), len) };
            write(bytes, m.events.load(Ordering::Relaxed));
            self.handover.release(c);
            self.hdr_word(hushtrace_ctf::ringfile::OFF_CONSUMED)
                .store(c + 1, Ordering::Release);
        }
    }

    /// Writes out everything a quiescent buffer holds: ready packets, the partly filled open
    /// packet, and an empty trailing packet when events were discarded after the last one (so the
    /// final discarded count is in the trace). In overwrite mode, only the newest `n` packets
    /// exist. Caller: the consumer, after the buffer became quiescent.
    fn finish(&self, mut write: impl FnMut(&[u8], u64)) {
        let p = &*self.producer;
        let n = self.num_subbufs as u64;
        if self.mode == Mode::Overwrite {
            let open_slot_lost = u64::from(p.open.get());
            // The open packet's slot no longer holds packet `seq - n`.
            let oldest = self.handover.committed().saturating_sub(n - open_slot_lost);
            self.handover.skip_to(oldest);
        }
        self.drain(&mut write);
        let now = clock::cycles_or_fallback();
        if p.open.get() {
            if p.events.get() > 0 || p.discarded.get() != p.discarded_reported.get() {
                self.finalize(&clock::cycles_or_fallback);
            } else {
                p.open.set(false);
                p.end.set(0);
            }
        } else if p.discarded.get() != p.discarded_reported.get() && self.open_next(&|| now) {
            self.finalize(&clock::cycles_or_fallback);
        }
        self.drain(&mut write);
    }

    /// Counts one event dropped before reaching the ring (owner only, signal-safe).
    fn count_dropped(&self) {
        // SAFETY: the key holder is the producer, the single writer.
        unsafe { self.producer.discarded.add(1) };
        self.mirror_discarded();
    }

    /// Owner, outside any tracepoint of its own (`depth == 1` for this call): closes the open
    /// packet now if it holds events, so a snapshot requested by this thread includes its
    /// newest events. No system call (the consumer is not woken).
    fn close_open_packet(&self, now: impl Fn() -> u64) {
        let p = &*self.producer;
        if p.open.get() && p.events.get() > 0 {
            self.finalize(&now);
            self.open_next(&now);
        }
    }

    /// Events dropped in this stream so far (discarded plus overwritten).
    pub fn lost(&self) -> u64 {
        self.producer.discarded.get() + self.producer.overwritten.get()
    }

    /// Prepares a drained buffer for another thread: the stream (sequence numbers, cumulative
    /// discarded count) continues, so readers see one well-formed stream.
    fn recycle(&self) {
        let p = &*self.producer;
        p.open.set(false);
        p.end.set(0);
        // SAFETY: the consumer (key) recycles a drained, quiescent buffer: the single writer.
        unsafe { p.off.set(0) };
        self.state.store(BufState::Pooled, Ordering::Release);
    }

    /// O(`num_subbufs`) reset of the forking thread's buffer in the child of a `fork()`: the
    /// inherited packets belong to the parent, which writes them; the child starts a new, empty
    /// stream. Only stores: async-signal-safe.
    fn reset_after_fork(&self, uuid: [u8; 16], ident: Ident) {
        if self.file_backed {
            // The parent's ring file was not inherited (MADV_DONTFORK): put private memory at
            // the same address so this thread keeps a ring of its own (not crash-persistent).
            // SAFETY: `hdr..hdr+len` is this buffer's reserved range.
            let ok =
                unsafe { platform::remap_private(self.hdr, RING_HEADER_LEN + self.capacity()) };
            if !ok {
                platform::abort();
            }
        }
        let p = &*self.producer;
        // SAFETY: the fork child's only thread, the buffer's producer (key): the single writer.
        unsafe {
            p.off.set(0);
            p.last_ts.set(0);
            p.events.set(0);
            p.discarded.set(0);
        }
        p.overwritten.set(0);
        p.end.set(0);
        p.open.set(false);
        p.seq.set(0);
        p.discarded_reported.set(0);
        p.ident.set(ident);
        p.uuid.set(uuid);
        for m in self.meta.iter() {
            m.events.store(0, Ordering::Relaxed);
            m.len.store(0, Ordering::Relaxed);
        }
        self.handover.reset();
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.mapped.get() {
            return; // not mapped in this process (a fork child): the address may be reused
        }
        if self.locked.get() {
            platform::munlock(self.mem, self.capacity());
        }
        // SAFETY: `hdr` is our live mapping of RING_HEADER_LEN + `capacity()` bytes and nothing
        // uses it any more (we are being dropped).
        unsafe { platform::unmap(self.hdr, RING_HEADER_LEN + self.capacity()) };
    }
}

/// Bytes of the ring header page before the slots.
const RING_HEADER_LEN: usize = hushtrace_ctf::ringfile::HEADER_LEN;
const _: () = assert!(RING_FIXED_LEN <= hushtrace_ctf::ringfile::OFF_DONE);

/// Loom build: the header words kept as loom atomics, `OFF_DONE ..= OFF_CLEAN`.
#[cfg(hushtrace_loom)]
const HDR_WORDS_FROM: usize = hushtrace_ctf::ringfile::OFF_DONE;
#[cfg(hushtrace_loom)]
const HDR_WORDS_TO: usize = hushtrace_ctf::ringfile::OFF_CLEAN;
/// Loom build: bytes of packet memory per race-detector cell. Events in the models are
/// multiples of 4 bytes from a 4-aligned packet header, so no cell holds two events.
#[cfg(hushtrace_loom)]
const CELL: usize = 4;

/// # Safety
/// `base + off .. base + off + 8` must be writable.
#[inline(always)]
unsafe fn put_u64(base: *mut u8, off: usize, v: u64) {
    // SAFETY: guaranteed by the caller; unaligned write.
    unsafe { (base.add(off) as *mut [u8; 8]).write_unaligned(v.to_le_bytes()) }
}

/// # Safety
/// `base + off .. base + off + 4` must be writable.
#[inline(always)]
unsafe fn put_u32(base: *mut u8, off: usize, v: u32) {
    // SAFETY: guaranteed by the caller; unaligned write.
    unsafe { (base.add(off) as *mut [u8; 4]).write_unaligned(v.to_le_bytes()) }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests, not the hot path
mod tests {
    use super::*;

    // The tests play both sides of each ring on one thread: they call the ring's own methods,
    // which the keys forward to.

    fn buf(mode: Mode) -> Buffer {
        let b = Buffer::new(4096, 4, mode, 7, [9; 16]).unwrap();
        b.set_ident(Ident {
            vpid: 1,
            vtid: 2,
            procname: *b"t\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            pthread: 3,
        });
        b
    }

    /// Bytes of a test event: a compact header (the clock advances by 1 per event) and a u64.
    const EV: u64 = (COMPACT_HEADER_LEN + 8) as u64;

    fn write_n(b: &Buffer, n: u64) -> u64 {
        let mut ok = 0;
        for i in 0..n {
            if let Ok(ptr) = b.reserve_event(1, 8, 1, || i, || {}) {
                // SAFETY: 8 bytes of fields reserved.
                unsafe { put_u64(ptr, 0, i) };
                ok += 1;
            }
        }
        ok
    }

    fn collect(b: &Buffer, finish: bool) -> Vec<(u64, u64)> {
        let mut out = vec![];
        let mut f = |bytes: &[u8], ev: u64| {
            let h = PacketHeader::decode(bytes).unwrap();
            out.push((h.seq, ev));
            assert!(PacketHeader::magic_ok(bytes));
            assert_eq!(h.len(), bytes.len());
            assert_eq!(h.packet_size, h.content_size);
        };
        if finish {
            b.finish(&mut f)
        } else {
            b.drain(&mut f)
        }
        out
    }

    /// A file-backed ring's header page is what recovery parses: the fixed part through the
    /// one codec (`layout::RingFileHeader`), the live words at their offsets.
    #[test]
    #[cfg_attr(miri, ignore = "creates and maps a file: outside Miri's isolation")]
    fn ring_file_header_is_what_recovery_parses() {
        use std::os::fd::AsFd;
        let path =
            std::env::temp_dir().join(format!("hushtrace-ring-header-test-{}", platform::getpid()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        let b = Buffer::new_in_file(f.as_fd(), 8192, 3, Mode::Overwrite, 77, [1; 16]).unwrap();
        let mut page = vec![0u8; RING_HEADER_LEN];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut page, 0).unwrap();
        let want = RingFileHeader {
            overwrite: true,
            subbuf_size: 8192,
            num_subbufs: 3,
            instance: 77,
            pid: platform::getpid(),
        };
        assert_eq!(RingFileHeader::decode(&page), Ok(want));
        let h = hushtrace_ctf::ringfile::RingHeader::parse(&page).unwrap();
        assert_eq!(
            (h.overwrite, h.subbuf_size, h.num_subbufs, h.instance, h.pid),
            (true, 8192, 3, 77, platform::getpid())
        );
        assert!(!h.clean);
        b.mark_clean();
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut page, 0).unwrap();
        assert!(
            hushtrace_ctf::ringfile::RingHeader::parse(&page)
                .unwrap()
                .clean
        );
    }

    #[test]
    fn discard_mode_counts_every_event() {
        let b = buf(Mode::Discard);
        let per_packet = (4096 - PACKET_HEADER_LEN as u64) / EV;
        let ok = write_n(&b, 10_000);
        assert_eq!(ok, per_packet * 4);
        assert_eq!(b.lost(), 10_000 - ok);
        let pk = collect(&b, true);
        assert_eq!(pk.iter().map(|p| p.1).sum::<u64>(), ok);
        // three full packets handed over, the open one flushed, then a tail carrying discards
        assert_eq!(
            pk.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
    }

    #[test]
    fn overwrite_mode_keeps_the_newest() {
        let b = buf(Mode::Overwrite);
        let ok = write_n(&b, 10_000);
        assert_eq!(ok, 10_000);
        let pk = collect(&b, true);
        let kept: u64 = pk.iter().map(|p| p.1).sum();
        assert_eq!(kept + b.lost(), 10_000);
        let seqs: Vec<u64> = pk.iter().map(|p| p.0).collect();
        let last = *seqs.last().unwrap();
        assert_eq!(seqs, (last - 3..=last).collect::<Vec<_>>());
    }

    /// A storm of signal handlers (nested reservations at depth 2, simulated from inside the
    /// interrupted reservation's clock read) fills the packet the interrupted event has just
    /// opened: the interrupted event goes into the next packet instead of being dropped; only
    /// the nested event that found no room is lost.
    #[test]
    fn handlers_filling_a_fresh_packet_do_not_drop_the_interrupted_event() {
        let b = buf(Mode::Discard);
        let per_packet = (4096 - PACKET_HEADER_LEN as u64) / EV;
        assert_eq!(write_n(&b, per_packet), per_packet);
        let calls = std::cell::Cell::new(0u32);
        let nested = std::cell::Cell::new(0u64);
        let now = || {
            calls.set(calls.get() + 1);
            // Third clock read: inside the fresh packet's reservation (after the old packet's
            // end and the new one's begin timestamps).
            if calls.get() == 3 {
                while b.reserve_event(1, 8, 2, || 9, || {}).is_ok() {
                    nested.set(nested.get() + 1);
                }
            }
            9
        };
        assert!(
            b.reserve_event(1, 8, 1, now, || {}).is_ok(),
            "interrupted event dropped"
        );
        assert_eq!(nested.get(), per_packet);
        assert_eq!(
            b.lost(),
            1,
            "only the nested event that did not fit is lost"
        );
        let pk = collect(&b, true);
        assert_eq!(pk.iter().map(|p| p.1).sum::<u64>(), 2 * per_packet + 1);
    }

    /// Headers decode, from each packet's `timestamp_begin`, to exactly the timestamps the
    /// clock gave: compact for small steps (low bits wrapping included), extended for steps of
    /// 2^24 cycles and more, for ids of 255 and up, and for a clock going backwards; and so do
    /// the events of a handler nesting inside a reservation's clock read.
    #[test]
    fn headers_decode_to_the_clock_readings() {
        const M: u64 = 1 << 24;
        let b = buf(Mode::Discard);
        // (id, timestamp): the clock's readings, one per event.
        let mut want = vec![];
        let mut t = 5 * M - 3;
        for (k, step) in [0, 1, 2, M - 1, M, 7, M + 1, 3, 2 * M, 0, 1]
            .into_iter()
            .enumerate()
        {
            t += step;
            want.push((if k % 4 == 3 { 300 } else { 7 }, t));
        }
        want.push((7, t - 5)); // backwards (a clock fallback): extended, decodes as is
        want.push((7, t - 4));
        // The clock; event 4's first read is interrupted by a handler recording two events,
        // and its retry reads the clock after them.
        let clock = std::cell::Cell::new(0);
        let expect = std::cell::RefCell::new(vec![]);
        for (k, &(id, ts)) in want.iter().enumerate() {
            clock.set(ts);
            let interrupt = std::cell::Cell::new(k == 4);
            let now = || {
                if interrupt.replace(false) {
                    for h in 1..=2 {
                        let p = b.reserve_event(254, 8, 2, || ts + h, || {}).unwrap();
                        // SAFETY: 8 bytes of fields reserved.
                        unsafe { put_u64(p, 0, ts + h) };
                        expect.borrow_mut().push((254, ts + h));
                    }
                    let read = clock.get();
                    clock.set(ts + 3);
                    return read; // the reservation's CAS fails: it retries
                }
                clock.get()
            };
            let p = b.reserve_event(id, 8, 1, now, || {}).unwrap();
            // SAFETY: 8 bytes of fields reserved.
            unsafe { put_u64(p, 0, clock.get()) };
            expect.borrow_mut().push((id, clock.get()));
        }
        let expect = expect.into_inner();
        assert_eq!(expect.len(), want.len() + 2);
        let mut got = vec![];
        let mut headers = vec![];
        b.finish(|bytes, _| {
            let mut clock = PacketHeader::decode(bytes).unwrap().timestamp_begin;
            let mut off = PACKET_HEADER_LEN;
            while off < bytes.len() {
                let h = parse_event_header(&bytes[off..], clock).unwrap();
                assert_eq!(
                    read_u64(bytes, off + h.len),
                    Some(h.ts),
                    "field = timestamp"
                );
                got.push((h.id, h.ts));
                headers.push(h.compact);
                clock = h.ts;
                off += h.len + 8;
            }
            assert_eq!(off, bytes.len());
        });
        assert_eq!(got, expect);
        // 0 and small steps compact, M-1 compact, M extended, id 300 extended, backwards
        // extended.
        let compact: Vec<bool> = expect
            .iter()
            .scan(None, |prev: &mut Option<u64>, &(id, ts)| {
                let c = compact_fits(id, ts, prev.unwrap_or(ts));
                *prev = Some(ts);
                Some(c)
            })
            .collect();
        assert_eq!(headers, compact);
        assert!(headers.contains(&true) && headers.contains(&false));
    }

    #[test]
    fn consumer_frees_slots() {
        let b = buf(Mode::Discard);
        for _ in 0..10 {
            write_n(&b, 500);
            collect(&b, false);
        }
        assert_eq!(b.lost(), 0);
    }
}
