//! The files of a trace, handled through directory descriptors.
//!
//! * The session root is resolved to an absolute path **once**, at session start, and opened
//!   as a directory descriptor; a later `chdir()` of the program changes nothing.
//! * The root must belong to the user and must not be writable by group or others (as ssh
//!   requires of its files); every file and directory below it is created relative to a
//!   descriptor opened with `O_NOFOLLOW | O_DIRECTORY`, so swapping a path component for a
//!   symbolic link cannot redirect the trace.
//! * Every descriptor is verified (device and inode, one `fstat`) before it is used: a program
//!   that closes all its descriptors (as daemons do) and reuses their numbers never receives a
//!   trace packet. A descriptor found closed or replaced is forgotten (the number is the
//!   program's now: never closed by us) and the file is reopened by name and verified.
//! * Streams are written with `pwritev` (a packet's header and events in one call) at the
//!   offset the consumer keeps: a failed write (a full disk) is cut off with `ftruncate`, so
//!   the stream stays well-formed and later packets follow the last complete one.
//! * With `O_DIRECT` ([`StreamIo`], `SessionBuilder::direct_io(true)` or
//!   `HUSHTRACE_DIRECT_IO=1`, where the file system supports it) the device reads a packet's
//!   blocks from the ring itself instead of the kernel copying them into the page cache; every
//!   packet is then padded to the alignment (`packet_size` covers the zeros, `content_size`
//!   the events, as LTTng's padded sub-buffers).
//! * At most [`MAX_OPEN_STREAMS`](streams::MAX_OPEN_STREAMS) stream files are open at once; the others are reopened on
//!   demand, so the tracer's descriptors do not grow with the number of threads.
//!
//! Files: `fd.rs` (checked descriptors), `dir.rs` (directories), `pwrite.rs` (positional
//! writes), `streams.rs` (the stream-file cache), `direct.rs` (`O_DIRECT` layout and probing).

mod dir;
mod direct;
mod fd;
mod pwrite;
mod streams;

pub(crate) use dir::Dir;
pub(crate) use direct::StreamIo;
pub(crate) use streams::TraceFiles;

#[cfg(test)]
mod tests;
