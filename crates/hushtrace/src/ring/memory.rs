//! A ring's memory: the mapping (anonymous or a ring file), its header page and the words
//! the producer and consumer store there for crash recovery and the flush, prefaulting and
//! locking, and the unmap when the ring is dropped.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use super::{AtomicBufState, AtomicIdent, BufState, Buffer, Ident, Mode, Producer, SlotMeta};
use crate::handover::Handover;
use crate::local::LocalU64;
use crate::platform;
use crate::primitive::{AtomicU64, Ordering};
use crate::relaxed::{Relaxed16, RelaxedBool, RelaxedPtr, RelaxedU64};
use crossbeam_utils::CachePadded;
use hushtrace_ctf::layout::*;

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
            late: CachePadded::default(),
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
    pub(super) fn hdr_word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the ring file's 8-aligned header offsets, inside the header
        // page (page-aligned, so the word is 8-aligned); the page lives as long as `self` and
        // its words are only accessed atomically (`recover` reads the file after the process).
        unsafe { crate::primitive::atomic_u64_at(self.hdr.add(off) as *mut u64) }
    }

    /// Loom build: the header word at `off`, a loom atomic of this buffer (`hdr_words`), so
    /// the flush and snapshot protocols are model-checked.
    #[cfg(hushtrace_loom)]
    pub(super) fn hdr_word(&self, off: usize) -> &AtomicU64 {
        &self.hdr_words[(off - HDR_WORDS_FROM) / 8]
    }

    /// The fixed part of the ring header (geometry, identity), as recovery decodes it.
    pub(super) fn ring_file_header(&self) -> RingFileHeader {
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
    pub(super) fn mark_done(&self) {
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DONE)
            .store(self.producer.off.get(), Ordering::Release);
    }

    /// Mirrors the stream's discarded count into the ring header (cold paths).
    #[inline]
    pub(super) fn mirror_discarded(&self) {
        self.hdr_word(hushtrace_ctf::ringfile::OFF_DISCARDED)
            .store(self.producer.discarded.get(), Ordering::Relaxed);
    }

    /// Consumer, clean stop: the ring was drained (nothing to recover from it).
    pub(super) fn mark_clean(&self) {
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
    pub(super) fn prefault(&self) -> bool {
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
pub(super) const RING_HEADER_LEN: usize = hushtrace_ctf::ringfile::HEADER_LEN;
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
