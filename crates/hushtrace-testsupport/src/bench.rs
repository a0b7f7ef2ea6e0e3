//! What the runtime's benches share (`crates/hushtrace/benches/tracepoint.rs`, `tail.rs`,
//! `fork.rs` and `benches/tracy`): the floor every tracepoint is measured against (and the
//! two-timestamp floor of a span), the interleaved batch timing, percentiles of sorted
//! samples, whether this is a full run, and where temporary traces go. The timed loops are not here: each bench writes its own, so each has
//! one callsite of the code it measures, inlined as the bench wrote it.

use std::cell::Cell;
use std::path::PathBuf;
use std::time::Duration;

/// Slots of the floor's thread-local buffer: 16 bytes each, 64 KiB in all (a power of two).
pub const FLOOR_SLOTS: usize = 4096;

thread_local! {
    static FLOOR_IDX: Cell<usize> = const { Cell::new(0) };
    static FLOOR_BUF: [Cell<[u64; 2]>; FLOOR_SLOTS] =
        const { [const { Cell::new([0; 2]) }; FLOOR_SLOTS] };
}

/// The floor: reads the cycle counter (`rdtsc`; elsewhere than x86_64 there is none and `v`
/// stands in for it) and stores it with one payload word into the next 16-byte slot of a
/// thread-local buffer, the index advanced and wrapped. The least any "timestamp + copy the
/// payload into a per-thread buffer" tracer can do; call [`floor_pretouch`] once per thread
/// before timing it.
#[inline(always)]
pub fn floor_write(v: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc exists on every x86_64 CPU and only reads the time-stamp counter.
    let ts = unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    let ts = v;
    let i = FLOOR_IDX.with(|c| c.get());
    // A volatile store: nothing reads the buffer, so a plain `set` is removed by the optimiser
    // (the floor was then rdtsc and the index alone, found in the disassembly of the bench).
    FLOOR_BUF.with(|b| {
        // SAFETY: the cell is this thread's, live for the call, and nothing else borrows it
        // (a `Cell` hands out no references); the pointer is aligned and valid for 16 bytes.
        unsafe { std::ptr::write_volatile(b[i].as_ptr(), [ts, v]) }
    });
    FLOOR_IDX.with(|c| c.set((i + 1) & (FLOOR_SLOTS - 1)));
}

/// The two-timestamp floor: [`floor_write`] with two reads of the cycle counter, both stored
/// into one 16-byte slot (`[start, end]`; `v` stands in for the counter elsewhere than x86_64).
/// The least any span that records its start and its end can cost, whatever its record
/// layout: a span needs two clock reads. Same buffer as [`floor_write`] (call
/// [`floor_pretouch`] once per thread).
#[inline(always)]
pub fn floor2_write(v: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc exists on every x86_64 CPU and only reads the time-stamp counter.
    let (start, end) = unsafe { (core::arch::x86_64::_rdtsc(), core::arch::x86_64::_rdtsc()) };
    #[cfg(not(target_arch = "x86_64"))]
    let (start, end) = (v, v);
    #[cfg(target_arch = "x86_64")]
    let _ = v;
    let i = FLOOR_IDX.with(|c| c.get());
    FLOOR_BUF.with(|b| {
        // SAFETY: as in `floor_write`: this thread's cell, aligned, valid for 16 bytes.
        unsafe { std::ptr::write_volatile(b[i].as_ptr(), [start, end]) }
    });
    FLOOR_IDX.with(|c| c.set((i + 1) & (FLOOR_SLOTS - 1)));
}

/// Touches every page of the calling thread's floor buffer (and runs its const initializer), so
/// the timed floor takes no page fault.
pub fn floor_pretouch() {
    for _ in 0..FLOOR_SLOTS {
        floor_write(0);
    }
}

/// One case of an interleaved measurement: runs its loop `iters` times and returns the elapsed
/// time.
pub type BenchFn = fn(u64) -> Duration;

/// Interleaved batches: each case runs one warm-up batch, then `rounds` rounds in which every
/// case runs one batch of `batch(id)` iterations. Returns, per case, the per-iteration time
/// (ns) of each batch, sorted ascending. Interleaving exposes every case to the same background
/// load, and short batches are rarely preempted, so the low percentiles show the undisturbed
/// cost on a noisy machine.
pub fn interleaved(
    cases: &[(&str, BenchFn)],
    rounds: usize,
    batch: impl Fn(&str) -> u64,
) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(rounds); cases.len()];
    for (id, f) in cases {
        f(batch(id)); // warm-up: first-use registration, pages touched
    }
    for _ in 0..rounds {
        for (k, (id, f)) in cases.iter().enumerate() {
            let n = batch(id);
            out[k].push(f(n).as_nanos() as f64 / n as f64);
        }
    }
    for v in &mut out {
        v.sort_by(f64::total_cmp);
    }
    out
}

/// The `q` quantile (0 to 1) of ascending `sorted` samples: the sample at index `q × len`,
/// the last one for `q = 1`.
///
/// # Panics
/// If `sorted` is empty.
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> T {
    sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)]
}

/// Whether this is a full run (`cargo bench` passes `--bench`) rather than the smoke test of
/// `cargo test --benches` (no `--bench`, or `--test`).
pub fn full_run() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// Where bench `name` puts its temporary traces: `$HUSHTRACE_BENCH_DIR` (default: the system
/// temporary directory) `/hushtrace-bench-<name>-<pid>`. The bench removes it at the end.
pub fn bench_dir(name: &str) -> PathBuf {
    std::env::var_os("HUSHTRACE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("hushtrace-bench-{name}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_index_the_sorted_samples() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&v, 0.1), 2);
        assert_eq!(percentile(&v, 0.5), 6);
        assert_eq!(percentile(&v, 1.0), 10);
        assert_eq!(percentile(&[7.5], 0.99), 7.5);
    }

    fn ten_ns_per_iter(iters: u64) -> Duration {
        Duration::from_nanos(10 * iters)
    }

    fn three_ns_per_iter(iters: u64) -> Duration {
        Duration::from_nanos(3 * iters)
    }

    #[test]
    fn interleaved_runs_every_case_every_round_with_its_batch() {
        let cases: [(&str, BenchFn); 2] = [("a", ten_ns_per_iter), ("b", three_ns_per_iter)];
        let out = interleaved(&cases, 5, |id| if id == "a" { 100 } else { 7 });
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], vec![10.0; 5]);
        assert_eq!(out[1], vec![3.0; 5]);
    }

    #[test]
    fn the_floor_wraps_its_buffer() {
        floor_pretouch();
        let before = FLOOR_IDX.with(|c| c.get());
        for i in 0..FLOOR_SLOTS as u64 + 3 {
            floor_write(i);
        }
        assert_eq!(FLOOR_IDX.with(|c| c.get()), (before + 3) % FLOOR_SLOTS);
        let last = FLOOR_BUF.with(|b| b[(before + 2) % FLOOR_SLOTS].get());
        assert_eq!(last[1], FLOOR_SLOTS as u64 + 2);
    }

    #[test]
    fn bench_dirs_are_per_bench_and_process() {
        let d = bench_dir("x");
        let name = d.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name, format!("hushtrace-bench-x-{}", std::process::id()));
    }
}
