//! The trace clock: ftrace's `x86-tsc` (the cycle counter hushtrace stamps with) where both
//! sides use it, otherwise `mono` (`CLOCK_MONOTONIC`) with its offset to the epoch recorded.

use hushtrace_ctf::metadata::ClockDesc;

/// The ftrace clock an instance is set to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceClock {
    /// `x86-tsc`: raw cycle counter values.
    Tsc,
    /// `mono`: `CLOCK_MONOTONIC` nanoseconds.
    Mono,
}

impl TraceClock {
    /// Its name in `trace_clock`.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceClock::Tsc => "x86-tsc",
            TraceClock::Mono => "mono",
        }
    }
}

/// Whether hushtrace's runtime will stamp with the cycle counter on this machine (as its
/// `clock::calibrate` decides: an invariant TSC and `HUSHTRACE_CLOCK` not `monotonic`).
pub fn user_uses_tsc() -> bool {
    if std::env::var("HUSHTRACE_CLOCK").as_deref() == Ok("monotonic") {
        return false;
    }
    tsc_invariant()
}

#[cfg(target_arch = "x86_64")]
fn tsc_invariant() -> bool {
    // CPUID exists on every x86_64 CPU.
    let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_invariant() -> bool {
    false
}

fn clock_ns(id: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// `CLOCK_MONOTONIC` as a CTF clock: 1 GHz, its zero as an offset from the epoch.
pub fn monotonic_desc() -> ClockDesc {
    let mut best = (i128::MAX, 0i128);
    for _ in 0..16 {
        let a = clock_ns(libc::CLOCK_MONOTONIC);
        let r = clock_ns(libc::CLOCK_REALTIME);
        let b = clock_ns(libc::CLOCK_MONOTONIC);
        if b - a < best.0 {
            best = (b - a, r - (a + b) / 2);
        }
    }
    desc_from(1_000_000_000, best.1, "CLOCK_MONOTONIC")
}

fn desc_from(freq: u64, zero_ns: i128, source: &str) -> ClockDesc {
    ClockDesc {
        freq,
        offset_s: zero_ns.div_euclid(1_000_000_000) as i64,
        offset: (zero_ns.rem_euclid(1_000_000_000) * freq as i128 / 1_000_000_000) as u64,
        source: source.to_string(),
    }
}

/// The TSC calibrated against the epoch over 20 ms, for a kernel trace stamped with
/// `x86-tsc` when no user-space trace says how (`None` without a TSC).
pub fn tsc_desc() -> Option<ClockDesc> {
    #[cfg(target_arch = "x86_64")]
    {
        fn rdtsc() -> u64 {
            // SAFETY: RDTSC exists on every x86_64 CPU and has no memory effects.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        let sample = |id| {
            let mut best = (u64::MAX, 0u64, 0i128);
            for _ in 0..16 {
                let a = rdtsc();
                let c = clock_ns(id);
                let b = rdtsc();
                if b.wrapping_sub(a) < best.0 {
                    best = (b.wrapping_sub(a), a + (b - a) / 2, c);
                }
            }
            (best.1, best.2)
        };
        let (c0, m0) = sample(libc::CLOCK_MONOTONIC);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (c1, m1) = sample(libc::CLOCK_MONOTONIC);
        let freq = ((c1 - c0) as i128 * 1_000_000_000 / (m1 - m0).max(1)) as u64;
        let (cr, r) = sample(libc::CLOCK_REALTIME);
        let zero = r - cr as i128 * 1_000_000_000 / freq.max(1) as i128;
        Some(desc_from(freq, zero, "tsc"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The kernel's boot id as a UUID: what hushtrace's runtime uses as its clock UUID.
pub fn boot_uuid() -> [u8; 16] {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|s| hushtrace_ctf::metadata::parse_uuid(s.trim()))
        .unwrap_or([0x68; 16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_desc_maps_now_to_now() {
        let d = monotonic_desc();
        let now = clock_ns(libc::CLOCK_REALTIME);
        let mono = clock_ns(libc::CLOCK_MONOTONIC) as u64;
        assert!((d.to_epoch_ns(mono) - now).abs() < 5_000_000);
    }
}
