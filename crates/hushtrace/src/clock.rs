//! Timestamps: the CPU cycle counter, calibrated once per process against `CLOCK_MONOTONIC`
//! and `CLOCK_REALTIME`, with a `clock_gettime` fallback.
//!
//! The hot path reads only the counter (`rdtsc` on x86_64, `cntvct_el0` on aarch64, through
//! `platform`): no vDSO, no seqlock that could spin on a real-time kernel, no system call.
//! Without an invariant counter (other architectures, Miri) every timestamp comes from the
//! fallback clock.
#![deny(clippy::disallowed_methods)] // hot path: no alloc, lock, sleep, syscall (clippy.toml)

use crate::platform;
use hushtrace_ctf::metadata::ClockDesc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// True when timestamps come from the cycle counter; false means `clock_gettime` fallback.
/// Written once by [`calibrate`], read with Relaxed by every tracepoint (a read-only line).
static USE_COUNTER: AtomicBool = AtomicBool::new(false);
static CALIBRATION: OnceLock<ClockDesc> = OnceLock::new();

/// Reads the raw cycle counter (`platform::cycles`: `rdtsc` on x86_64, `cntvct_el0` on
/// aarch64). Meaningful for timestamps only when [`counter_usable`].
#[inline(always)]
pub fn cycles() -> u64 {
    platform::cycles()
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

/// Samples (counter, clock) with the counter read on both sides; returns the midpoint of the
/// tightest of a few tries.
fn sample(clock: fn() -> u64) -> (u64, u64) {
    let mut best = (u64::MAX, 0u64, 0u64);
    for _ in 0..16 {
        let a = cycles();
        let c = clock();
        let b = cycles();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a.wrapping_add(b.wrapping_sub(a) / 2), c);
        }
    }
    (best.1, best.2)
}

/// The calibration, if done ([`calibrate`]): one atomic load, no initialization.
#[inline]
pub fn calibrated() -> Option<&'static ClockDesc> {
    CALIBRATION.get()
}

/// Calibrates the clock once per process (about 20 ms the first time) and returns its
/// description. Children created by `fork()` inherit it. `HUSHTRACE_CLOCK=monotonic` forces the
/// `clock_gettime` fallback (used to test the no-syscall policies), and so does a counter that
/// is not invariant or that measures below 1 MHz (no platform counter, or a broken one).
#[allow(clippy::disallowed_methods)] // calibrates once per process (session start, first use)
pub fn calibrate() -> &'static ClockDesc {
    CALIBRATION.get_or_init(|| {
        let forced = std::env::var(crate::env::CLOCK).ok();
        let counter = if platform::counter_invariant() && forced.as_deref() != Some("monotonic") {
            calibrate_counter()
        } else {
            None
        };
        let use_counter = counter.is_some();
        let desc = counter.unwrap_or_else(|| {
            let zero_ns = platform::realtime_ns() as i128 - platform::monotonic_ns() as i128;
            desc_from(1_000_000_000, zero_ns, "clock_gettime")
        });
        USE_COUNTER.store(use_counter, Ordering::Relaxed);
        desc
    })
}

/// Measures the counter's frequency over 20 ms and its epoch offset; `None` if it ticks below
/// 1 MHz. Once per process, before the first timestamp: not the hot path.
#[allow(clippy::disallowed_methods)] // sleeps 20 ms
fn calibrate_counter() -> Option<ClockDesc> {
    let (c0, m0) = sample(platform::monotonic_ns);
    std::thread::sleep(Duration::from_millis(20));
    let (c1, m1) = sample(platform::monotonic_ns);
    let ticks = c1.wrapping_sub(c0) as u128;
    let freq = (ticks * 1_000_000_000 / m1.saturating_sub(m0).max(1) as u128) as u64;
    if freq < 1_000_000 {
        return None;
    }
    let (cr, r) = sample(platform::realtime_ns);
    // Epoch time of counter value 0, in ns (may be far in the past).
    let zero_ns = r as i128 - (cr as i128 * 1_000_000_000 / freq as i128);
    Some(desc_from(freq, zero_ns, platform::COUNTER_SOURCE))
}

#[allow(clippy::disallowed_methods)] // allocates the source name: calibration only
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
#[allow(clippy::disallowed_methods)] // tests, not the hot path
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

    #[test]
    fn timestamps_never_go_backwards_on_one_thread() {
        calibrate();
        let mut last = cycles_or_fallback();
        for _ in 0..if cfg!(miri) { 100 } else { 100_000 } {
            let t = cycles_or_fallback();
            assert!(t >= last, "{t} < {last}");
            last = t;
        }
    }

    #[test]
    fn clock_description_splits_the_epoch_offset() {
        // 1 GHz, zero at 1.5 s after the epoch.
        let d = desc_from(1_000_000_000, 1_500_000_000, "x");
        assert_eq!((d.offset_s, d.offset), (1, 500_000_000));
        // 10 MHz, zero 0.25 s before the epoch: -1 s + 0.75 s.
        let d = desc_from(10_000_000, -250_000_000, "x");
        assert_eq!((d.offset_s, d.offset), (-1, 7_500_000));
        assert_eq!(d.to_epoch_ns(0), -250_000_000);
        assert_eq!(d.to_epoch_ns(10_000_000), 750_000_000);
    }

    #[test]
    fn counter_source_is_recorded() {
        let d = calibrate();
        if counter_usable() {
            assert_eq!(d.source, platform::COUNTER_SOURCE);
        } else {
            assert_eq!(d.source, "clock_gettime");
        }
    }
}
