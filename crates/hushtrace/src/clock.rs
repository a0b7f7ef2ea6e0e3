//! Timestamps: the CPU cycle counter, calibrated once per process against `CLOCK_MONOTONIC`
//! and `CLOCK_REALTIME`, with a `clock_gettime` fallback.
//!
//! The hot path reads only the counter (`rdtsc` on x86_64, `cntvct_el0` on aarch64): no vDSO,
//! no seqlock that could spin on a real-time kernel, no system call.

use crate::platform;
use hushtrace_ctf::metadata::ClockDesc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// True when timestamps come from the cycle counter; false means `clock_gettime` fallback.
/// Written once by [`calibrate`], read with Relaxed by every tracepoint (a read-only line).
static USE_COUNTER: AtomicBool = AtomicBool::new(false);
static CALIBRATION: OnceLock<ClockDesc> = OnceLock::new();

/// Reads the raw cycle counter.
#[inline(always)]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc is available on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: cntvct_el0 is readable from EL0 on Linux (the kernel enables it for the vDSO);
        // the instruction only reads a system register.
        unsafe { core::arch::asm!("mrs {v}, cntvct_el0", v = out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        platform::monotonic_ns()
    }
}

/// Whether the tracepoint path may use [`cycles`] (calibrated and invariant).
#[inline(always)]
pub fn counter_usable() -> bool {
    USE_COUNTER.load(Ordering::Relaxed)
}

/// The timestamp of the fallback clock (a system call or vDSO call: never from a no-syscall
/// thread).
pub fn fallback_now() -> u64 {
    platform::monotonic_ns()
}

/// Whether the counter ticks at a constant rate across frequency changes and idle states.
fn counter_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        if max_ext < 0x8000_0007 {
            return false;
        }
        // Leaf 0x80000007 exists (checked above). EDX bit 8 = invariant TSC.
        let r = core::arch::x86_64::__cpuid(0x8000_0007);
        r.edx & (1 << 8) != 0
    }
    #[cfg(target_arch = "aarch64")]
    {
        true // the generic timer runs at a fixed frequency by architecture
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Samples (counter, clock) with the counter read on both sides; returns the midpoint of the
/// tightest of a few tries.
fn sample(clock: fn() -> u64) -> (u64, u64) {
    let mut best = (u64::MAX, 0u64, 0u64);
    for _ in 0..16 {
        let a = cycles();
        let c = clock();
        let b = cycles();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + (b - a) / 2, c);
        }
    }
    (best.1, best.2)
}

/// Calibrates the clock once per process (about 20 ms the first time) and returns its
/// description. Children created by `fork()` inherit it. `HUSHTRACE_CLOCK=monotonic` forces the
/// `clock_gettime` fallback (used to test the no-syscall policies).
pub fn calibrate() -> &'static ClockDesc {
    CALIBRATION.get_or_init(|| {
        let forced = std::env::var("HUSHTRACE_CLOCK").ok();
        let use_counter = counter_invariant() && forced.as_deref() != Some("monotonic");
        let desc = if use_counter {
            let (c0, m0) = sample(platform::monotonic_ns);
            std::thread::sleep(Duration::from_millis(20));
            let (c1, m1) = sample(platform::monotonic_ns);
            let freq = ((c1 - c0) as u128 * 1_000_000_000 / (m1 - m0).max(1) as u128) as u64;
            let (cr, r) = sample(platform::realtime_ns);
            // Epoch time of counter value 0, in ns (may be far in the past).
            let zero_ns = r as i128 - (cr as i128 * 1_000_000_000 / freq as i128);
            let source = if cfg!(target_arch = "aarch64") {
                "cntvct"
            } else {
                "tsc"
            };
            desc_from(freq, zero_ns, source)
        } else {
            let zero_ns = platform::realtime_ns() as i128 - platform::monotonic_ns() as i128;
            desc_from(1_000_000_000, zero_ns, "clock_gettime")
        };
        USE_COUNTER.store(use_counter, Ordering::Relaxed);
        desc
    })
}

fn desc_from(freq: u64, zero_ns: i128, source: &str) -> ClockDesc {
    let offset_s = zero_ns.div_euclid(1_000_000_000);
    let rem_ns = zero_ns.rem_euclid(1_000_000_000);
    ClockDesc {
        freq,
        offset_s: offset_s as i64,
        offset: (rem_ns * freq as i128 / 1_000_000_000) as u64,
        source: source.to_string(),
    }
}

/// A timestamp from whichever clock is in use, for code that may make system calls (the
/// consumer, session stop).
pub fn cycles_or_fallback() -> u64 {
    if counter_usable() {
        cycles()
    } else {
        fallback_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_clock_tracks_realtime() {
        let d = calibrate();
        assert!(d.freq > 1_000_000, "implausible frequency {}", d.freq);
        let ts = if counter_usable() {
            cycles()
        } else {
            fallback_now()
        };
        let now = platform::realtime_ns() as i128;
        let diff = (d.to_epoch_ns(ts) - now).abs();
        assert!(diff < 5_000_000, "clock off by {diff} ns");
    }
}
