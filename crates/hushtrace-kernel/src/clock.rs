//! The trace clock: ftrace's `x86-tsc` (the cycle counter hushtrace stamps with) where both
//! sides use it, otherwise `mono` (`CLOCK_MONOTONIC`) with its offset to the epoch recorded.
//! The choice is the runtime's ([`hushtrace::clock_choice`]), made once at the start.

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

/// The clock of a kernel trace, as its metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelClock {
    /// CTF clock name (`hushtrace` when it is the user-space traces' clock).
    pub name: String,
    /// Clock UUID (equal to the user-space traces' when both use the same clock).
    pub uuid: [u8; 16],
    /// Frequency and offset.
    pub desc: ClockDesc,
    /// One line saying how well it lines up with the user-space clock.
    pub note: String,
}

/// The name of the user-space traces' clock (what `hushtrace_ctf::metadata::to_tsdl` writes).
pub const USER_CLOCK_NAME: &str = "hushtrace";

/// Chooses the ftrace clock and describes it, from the runtime's own decision
/// ([`hushtrace::clock_choice`]: the cycle counter unless it is not invariant or
/// `HUSHTRACE_CLOCK=monotonic`) and `offered`, the text of the instance's `trace_clock` file.
/// The same decision as the traced program's, so both traces share one clock: `x86-tsc` when
/// the program stamps with the TSC, `mono` when it stamps with `CLOCK_MONOTONIC`; `mono` with
/// a clock of its own when the kernel lacks `x86-tsc` (or the counter is not the TSC).
pub fn decide(offered: &str) -> Result<(TraceClock, KernelClock), String> {
    let has = |c: &str| {
        offered
            .split_whitespace()
            .any(|w| w.trim_matches(|x| x == '[' || x == ']') == c)
    };
    let user = hushtrace::clock_choice();
    let shared = |note: &str| KernelClock {
        name: USER_CLOCK_NAME.into(),
        uuid: user.uuid,
        desc: user.desc.clone(),
        note: note.into(),
    };
    if user.counter && user.desc.source == "tsc" && has("x86-tsc") {
        return Ok((
            TraceClock::Tsc,
            shared(
                "x86-tsc: the cycle counter the user-space events are stamped with (exact \
                 alignment with the program's calibration; with the recorder's, within about \
                 1 us, if the recording did not finish)",
            ),
        ));
    }
    if !has("mono") {
        return Err(format!(
            "--kernel: this kernel has neither the x86-tsc nor the mono trace clock \
             (it offers: {})",
            offered.trim()
        ));
    }
    if !user.counter {
        return Ok((
            TraceClock::Mono,
            shared(
                "mono: CLOCK_MONOTONIC, the clock the user-space events are stamped with \
                 (exact alignment)",
            ),
        ));
    }
    Ok((
        TraceClock::Mono,
        KernelClock {
            name: "monotonic".into(),
            uuid: derived(user.uuid),
            desc: monotonic_desc(),
            note: "mono (this kernel or machine has no usable x86-tsc clock): CLOCK_MONOTONIC \
                   with its epoch offset measured at the start; the user-space cycle counter \
                   was calibrated against the same clock, so alignment is within that \
                   calibration error, about 1 us"
                .into(),
        },
    ))
}

/// A UUID distinct from, but derived from, `u` (a different clock of the same boot).
fn derived(mut u: [u8; 16]) -> [u8; 16] {
    u[15] ^= 0x6b;
    u
}

impl KernelClock {
    /// This clock with the calibration of the program's trace (`user`: its clock description
    /// and UUID) when that trace has the same clock: the recorder's calibration of the same
    /// counter differs from the program's by a few parts per million.
    pub fn with_user(mut self, user: Option<(ClockDesc, [u8; 16])>) -> KernelClock {
        if let Some((desc, uuid)) = user {
            if self.name == USER_CLOCK_NAME && uuid == self.uuid && desc.source == self.desc.source
            {
                self.desc = desc;
            }
        }
        self
    }
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
