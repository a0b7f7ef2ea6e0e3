//! Everything that talks to the operating system lives here (after parking_lot's `imp`
//! modules): one file per platform. The rest of the runtime calls these functions and never
//! `libc` directly, which keeps every system call of the tracer in one reviewable place.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(not(target_os = "linux"))]
compile_error!("hushtrace currently supports Linux only");
