//! The record path for fixed `u32` events (`hushtrace::__private::{with_thread, FastThread}`,
//! what the Python extension's call hooks use): every event written in order across packet
//! switches, the general path's rules for what it does not handle itself (disabled callsites,
//! other field types, threads without a buffer), the binding's per-thread word, and no system
//! call on a no-syscall thread.

mod common;

use common::{babeltrace, temp_dir};
use hushtrace::__private::{register_thread, with_thread};
use hushtrace::{register_callsite, verify, FieldType, Kind};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// Records `n` begin/end pairs through the fixed path on the calling thread, registering it
/// first if needed; returns how many records reported written.
fn record_pairs(begin: &hushtrace::Registered, end: &hushtrace::Registered, n: u32) -> u32 {
    if with_thread(|_| ()).is_none() {
        assert!(register_thread(), "a session runs: the thread registers");
    }
    let mut written = 0;
    for i in 0..n {
        written +=
            with_thread(|t| u32::from(t.record_u32(begin, i)) + u32::from(t.record_u32(end, i)))
                .expect("registered thread");
    }
    written
}

#[test]
fn fixed_events_are_written_in_order_across_packet_switches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fixed-order");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(64)
        .start()
        .unwrap();
    let f = [("f", FieldType::U32)];
    let begin = register_callsite("fx", "call", Kind::SpanBegin, &f).unwrap();
    let end = register_callsite("fx", "call", Kind::SpanEnd, &f).unwrap();
    let threads: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(move || record_pairs(&begin, &end, 5_000)))
        .collect();
    let written: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let stats = session.stop().unwrap();
    assert_eq!(written, 30_000, "every record reported written");
    assert_eq!(stats.events_written, 30_000);
    assert_eq!(stats.events_discarded, 0);
    let events = babeltrace(&dir, true);
    assert_eq!(events.len(), 30_000);
    // Per thread, begin i then end i, for i in order: nothing lost, reordered or torn at
    // the ~20 packet switches of each stream (taken by the general path).
    let mut by_tid: std::collections::BTreeMap<u32, Vec<(String, i128)>> = Default::default();
    for e in &events {
        by_tid
            .entry(e.vtid)
            .or_default()
            .push((e.name.clone(), e.int("f")));
    }
    assert_eq!(by_tid.len(), 3);
    for seq in by_tid.values() {
        assert_eq!(seq.len(), 10_000);
        for (k, (name, f)) in seq.iter().enumerate() {
            assert_eq!(name, "fx:call");
            assert_eq!(*f, (k / 2) as i128, "event {k}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn disabled_and_mistyped_callsites_follow_the_general_rules() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fixed-rules");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    let on = register_callsite("fxr", "on", Kind::Instant, &[("f", FieldType::U32)]).unwrap();
    let off = register_callsite("fxr-off", "x", Kind::Instant, &[("f", FieldType::U32)]).unwrap();
    let wide = register_callsite("fxr", "wide", Kind::Instant, &[("f", FieldType::U64)]).unwrap();
    let two = register_callsite(
        "fxr",
        "two",
        Kind::Instant,
        &[("a", FieldType::U32), ("b", FieldType::U32)],
    )
    .unwrap();
    hushtrace::disable("fxr-off:*");
    let t = std::thread::spawn(move || {
        assert!(register_thread());
        with_thread(|t| {
            assert!(t.record_u32(&on, 1));
            assert!(!t.record_u32(&off, 2), "a disabled callsite writes nothing");
            assert!(
                !t.record_u32(&wide, 3),
                "another field type: dropped and counted"
            );
            assert!(
                !t.record_u32(&two, 4),
                "another field count: dropped and counted"
            );
            assert!(t.record_u32(&on, 5));
        })
        .unwrap();
    });
    t.join().unwrap();
    hushtrace::enable("fxr-off:*");
    let stats = session.stop().unwrap();
    assert_eq!(stats.events_written, 2);
    assert_eq!(stats.events_discarded, 2, "the two mistyped records");
    let events = babeltrace(&dir, true);
    let got: Vec<_> = events
        .iter()
        .map(|e| (e.name.as_str(), e.int("f")))
        .collect();
    assert_eq!(got, [("fxr:on", 1), ("fxr:on", 5)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_binding_word_is_per_thread_and_threads_register_only_with_a_session() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // No session: a new thread has no context and cannot register one.
    std::thread::spawn(|| {
        assert!(with_thread(|_| ()).is_none());
        assert!(!register_thread());
        assert!(with_thread(|_| ()).is_none());
    })
    .join()
    .unwrap();
    let dir = temp_dir("fixed-word");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    let words: Vec<u64> = (1..=3u64)
        .map(|k| {
            std::thread::spawn(move || {
                assert!(register_thread());
                assert_eq!(
                    with_thread(|t| t.word()),
                    Some(0),
                    "a new thread's word is 0"
                );
                for _ in 0..k {
                    with_thread(|t| t.set_word(t.word() + 10)).unwrap();
                }
                std::thread::yield_now();
                with_thread(|t| t.word()).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(words, [10, 20, 30], "each thread kept its own word");
    session.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A no-syscall thread records fixed events (registered before it entered the mode): zero
/// system calls under the seccomp filter, across many packet switches.
#[test]
fn no_syscall_thread_records_fixed_events_without_syscalls() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fixed-nosys");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(256)
        .start()
        .unwrap();
    let f = [("f", FieldType::U32)];
    let begin = register_callsite("fxn", "call", Kind::SpanBegin, &f).unwrap();
    let end = register_callsite("fxn", "call", Kind::SpanEnd, &f).unwrap();
    let before = verify::trapped_syscalls();
    let t = std::thread::spawn(move || {
        hushtrace::init_thread();
        hushtrace::set_thread_no_syscall();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        for i in 0..10_000u32 {
            with_thread(|t| {
                t.set_word(t.word() + 1);
                t.record_u32(&begin, i);
                t.record_u32(&end, i);
            });
        }
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    verify::join_raw(t);
    let trapped = verify::trapped_syscalls() - before;
    let stats = session.stop().unwrap();
    assert_eq!(trapped, 0, "system calls on the no-syscall thread");
    assert_eq!(stats.events_written + stats.events_discarded, 20_000);
    assert!(stats.events_written > 0);
    let events = babeltrace(&dir, true);
    assert_eq!(events.len() as u64, stats.events_written);
    let _ = std::fs::remove_dir_all(&dir);
}
