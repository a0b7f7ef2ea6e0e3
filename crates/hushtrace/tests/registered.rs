//! Callsites registered at run time (the mechanism the C interface and the `tracing` bridge
//! use): recorded like link-time ones, listed in the metadata, enabled by the same globs, typed
//! values checked, and no system call on a no-syscall thread.

mod common;

use common::{babeltrace, temp_dir};
use hushtrace::{register_callsite, verify, FieldType, Kind, Value};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

/// One field of every type, in the order the tests' rows give their values.
const ALL_TYPES: [(&str, FieldType); 11] = [
    ("u8", FieldType::U8),
    ("u16", FieldType::U16),
    ("u32", FieldType::U32),
    ("u64", FieldType::U64),
    ("i8", FieldType::I8),
    ("i16", FieldType::I16),
    ("i32", FieldType::I32),
    ("i64", FieldType::I64),
    ("f64", FieldType::F64),
    ("ok", FieldType::Bool),
    ("s", FieldType::Str),
];

#[test]
fn registered_callsites_record_every_type_and_babeltrace_reads_them() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("registered");
    // A glob applied before registration covers the callsite registered later.
    hushtrace::disable("rt-off:*");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(64 * 1024)
        .num_subbufs(16)
        .start()
        .unwrap();
    let fields = ALL_TYPES;
    // Registered while the session runs (after its first metadata was written).
    let all = register_callsite("rt", "all_types", Kind::Instant, &fields).unwrap();
    let off = register_callsite("rt-off", "quiet", Kind::Instant, &[]).unwrap();
    assert!(!off.is_enabled());
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..1000u64 {
                    let s = format!("t{t}-{i}");
                    assert!(all.record(&[
                        Value::U8(i as u8),
                        Value::U16(i as u16),
                        Value::U32(i as u32),
                        Value::U64(i),
                        Value::I8(-(i as i8 & 0x3f)),
                        Value::I16(-(i as i16)),
                        Value::I32(-(i as i32)),
                        Value::I64(-(i as i64)),
                        Value::F64(i as f64 / 2.0),
                        Value::Bool(i % 2 == 0),
                        Value::Str(&s),
                    ]));
                    assert!(!off.record(&[]));
                }
                // Wrong types or count: dropped and counted, never written.
                assert!(!all.record(&[Value::U8(1)]));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = session.stop().unwrap();
    assert_eq!(stats.events_written, 3000);
    assert_eq!(stats.events_discarded, 3, "the three mistyped records");
    let events = babeltrace(&dir, true);
    assert_eq!(events.len(), 3000);
    for e in &events {
        assert_eq!(e.name, "rt:all_types");
        let i = e.int("u64");
        assert_eq!(e.int("u8"), i % 256);
        assert_eq!(e.int("i64"), -i);
        assert_eq!(e.fields["f64"].parse::<f64>().unwrap(), i as f64 / 2.0);
        assert!(e.fields["s"].ends_with(&format!("-{i}")), "{e:?}");
        assert_eq!(e.int("ok"), i128::from(i % 2 == 0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A no-syscall thread records a callsite registered before it entered the mode: zero
/// system calls under the seccomp filter, across many sub-buffer switches.
#[test]
fn no_syscall_thread_records_registered_callsites_without_syscalls() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("registered-rt");
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .subbuf_size(4096)
        .num_subbufs(256)
        .start()
        .unwrap();
    let cs = register_callsite("rt", "tick", Kind::Instant, &[("n", FieldType::U64)]).unwrap();
    let before = verify::trapped_syscalls();
    let t = std::thread::spawn(move || {
        hushtrace::set_thread_no_syscall();
        verify::trap_syscalls_on_this_thread().expect("seccomp");
        for i in 0..20_000u64 {
            cs.record(&[Value::U64(i)]);
        }
        // SAFETY: no value on this thread's stack relies on its destructor running.
        unsafe { verify::exit_thread() };
    });
    verify::join_raw(t);
    let trapped = verify::trapped_syscalls() - before;
    let stats = session.stop().unwrap();
    assert_eq!(trapped, 0, "system calls on the no-syscall thread");
    assert_eq!(stats.events_written + stats.events_discarded, 20_000);
    {
        let events = babeltrace(&dir, true);
        assert_eq!(events.len() as u64, stats.events_written);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_descriptions_are_clear_errors() {
    let e = register_callsite("c", "x", Kind::Instant, &[("no spaces", FieldType::U8)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no spaces"), "{e}");
    let e = register_callsite("", "x", Kind::Instant, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid"), "{e}");
}

/// The one value type: what the dynamic write path takes is what the reader returns. Values of
/// every type and width, at their extremes, written through `Registered::record`, come back
/// from `hushtrace_ctf::reader` as the same type and `==` (strings as the runtime cuts them).
#[test]
fn dynamic_values_come_back_equal_from_the_reader() {
    use hushtrace_ctf::reader::{Session as Reader, Value as ReadValue};
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("registered-values");
    let fields = ALL_TYPES;
    let long = "é".repeat(hushtrace::STR_CAP);
    let rows: Vec<[Value<'_>; 11]> = vec![
        [
            Value::U8(u8::MAX),
            Value::U16(u16::MAX),
            Value::U32(u32::MAX),
            Value::U64(u64::MAX),
            Value::I8(i8::MIN),
            Value::I16(i16::MIN),
            Value::I32(i32::MIN),
            Value::I64(i64::MIN),
            Value::F64(-1.5e300),
            Value::Bool(true),
            Value::Str("héllo \"wörld\""),
        ],
        [
            Value::U8(0),
            Value::U16(1),
            Value::U32(0x8000_0000),
            Value::U64(1 << 63),
            Value::I8(i8::MAX),
            Value::I16(-1),
            Value::I32(i32::MAX),
            Value::I64(i64::MAX),
            Value::F64(f64::MIN_POSITIVE),
            Value::Bool(false),
            Value::Str(""),
        ],
        [
            Value::U8(7),
            Value::U16(300),
            Value::U32(70_000),
            Value::U64(5_000_000_000),
            Value::I8(-7),
            Value::I16(-300),
            Value::I32(-70_000),
            Value::I64(-5_000_000_000),
            Value::F64(f64::INFINITY),
            Value::Bool(true),
            Value::Str(&long),
        ],
    ];
    let session = hushtrace::Session::builder()
        .output_dir(&dir)
        .start()
        .unwrap();
    let cs = register_callsite("rt", "values", Kind::Instant, &fields).unwrap();
    for row in &rows {
        assert!(cs.record(row));
    }
    session.stop().unwrap();

    // The long string comes back cut at the last whole character within STR_CAP bytes.
    let cut = &long[..hushtrace::STR_CAP - 1];
    let want = rows.iter().map(|r| {
        r.map(|v| match v {
            Value::Str(s) if s.len() > hushtrace::STR_CAP => Value::Str(cut),
            v => v,
        })
    });
    let reader = Reader::open(&dir).unwrap();
    let mut merged = reader.merged().unwrap();
    let mut want = want.peekable();
    while let Some(ev) = merged.next().unwrap() {
        assert_eq!(ev.event.class.name, "rt:values");
        // Collected as the writer's type: the reader's `Value` is the same type, no conversion.
        let got: Vec<Value<'_>> = ev.event.fields().map(|(_, v): (_, ReadValue)| v).collect();
        let want = want.next().expect("no more events than written");
        assert_eq!(got, want);
    }
    assert!(want.peek().is_none(), "every event read back");
    let _ = std::fs::remove_dir_all(&dir);
}
