//! The C and C++ interface, tested from C and C++ programs (`tests/c/`) compiled with the
//! system compiler and checked with babeltrace2: every field type from several threads,
//! the seccomp proof, fork, a dlopen'd library, nested `HT_SCOPE` (also toggled while open),
//! counter types in C99 and C11, bad arguments, the header under `-Wall -Wextra -Werror
//! -pedantic`, the same with clang, static linking and the install + pkg-config path.

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

use common::babeltrace;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use support::{
    cc, field_types_of, kinds_of, metadata, program, program_std, run, run_ok, summary, trace_dir,
    Link,
};

#[test]
fn header_is_clean_c99_c11_cxx11_cxx17() {
    for (file, std) in [
        ("header.c", "c99"),
        ("header.c", "c11"),
        ("header.cpp", "c++11"),
        ("header.cpp", "c++17"),
    ] {
        let src = support::source(file);
        let out = support::out_dir().join(format!("header-{std}.o"));
        cc(&src, &out, std, Link::None, &["-c"]);
    }
}

#[test]
fn threads_record_every_field_type() {
    for link in [Link::Shared, Link::Static] {
        check_threads(&program("threads.c", link), "threads");
    }
}

/// Runs `threads.c` built as `exe` and checks every event it wrote.
fn check_threads(exe: &Path, tag: &str) {
    {
        let dir = trace_dir(tag);
        let (threads, iters) = (4i64, 3000i64);
        let out = run_ok(
            exe,
            &[
                dir.to_str().unwrap(),
                &threads.to_string(),
                &iters.to_string(),
            ],
            &[],
        );
        let line = out.lines().last().unwrap();
        let per_thread = 4 * iters; // span begin, event, counter, span end
        assert_eq!(summary(line, "written"), threads * per_thread + 1, "{line}");
        assert_eq!(summary(line, "discarded"), 0, "{line}");
        let events = babeltrace(&dir, false);
        assert_eq!(events.len() as i64, threads * per_thread + 1);
        let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &events {
            *by_name.entry(e.name.as_str()).or_default() += 1;
        }
        assert_eq!(by_name["c:empty"], 1);
        assert_eq!(by_name["c:iter"] as i64, 2 * threads * iters);
        assert_eq!(by_name["c:all"] as i64, threads * iters);
        assert_eq!(by_name["c:depth"] as i64, threads * iters);
        let mut seen = BTreeSet::new();
        let mut tids: BTreeMap<i128, BTreeSet<u32>> = BTreeMap::new();
        for e in events.iter().filter(|e| e.name == "c:all") {
            let (t, i) = (e.int("t"), -e.int("i64"));
            assert!(seen.insert((t, i)), "duplicate {e:?}");
            assert_eq!(e.int("u64"), i * 1_000_000_007, "{e:?}");
            assert_eq!(e.int("i32"), -i, "{e:?}");
            assert_eq!(e.int("u32"), i, "{e:?}");
            let f: f64 = e.fields["f64"].parse().unwrap();
            assert_eq!(f, i as f64 / 4.0, "{e:?}");
            assert_eq!(e.int("ok"), (i % 3 == 0) as i128, "{e:?}");
            assert_eq!(e.fields["s"], format!("t{t}-{i}"), "{e:?}");
            assert_eq!(e.procname, format!("cw-{t}"), "{e:?}");
            tids.entry(t).or_default().insert(e.vtid);
        }
        assert_eq!(seen.len() as i64, threads * iters);
        assert_eq!(tids.len() as i64, threads);
        assert!(tids.values().all(|s| s.len() == 1), "one tid per thread");
        // The counter of a `long` is an int64 (also in C99); the values are the loop counter.
        for e in events.iter().filter(|e| e.name == "c:depth") {
            assert!((0..iters as i128).contains(&e.int("value")), "{e:?}");
        }
        let meta = metadata(&dir);
        assert_eq!(field_types_of(&meta, "c:depth", "value"), ["int64_t"]);
        // The same kinds as the Rust macros.
        let mut iter_kinds = kinds_of(&meta, "c:iter");
        iter_kinds.sort();
        assert_eq!(iter_kinds, ["hushtrace:span_begin", "hushtrace:span_end"]);
        assert_eq!(kinds_of(&meta, "c:all"), ["hushtrace:instant"]);
        assert_eq!(kinds_of(&meta, "c:depth"), ["hushtrace:counter"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// The seccomp filter that proves no system call exists for these two architectures only.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn no_syscall_thread_traps_no_system_call() {
    let exe = program("seccomp.c", Link::Shared);
    let dir = trace_dir("seccomp");
    let events = 100_000u64;
    let o = run(
        &exe,
        &[&events.to_string()],
        &[
            ("HUSHTRACE_OUTPUT", dir.to_str().unwrap()),
            ("HUSHTRACE_SUBBUF_SIZE", "16k"),
            ("HUSHTRACE_NUM_SUBBUFS", "256"),
            ("HUSHTRACE_READ_TIMER_MS", "1"),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("setup 0 trapped 0"), "{stdout}\n{stderr}");
    // The process exited: its stats file says what was written, across many sub-buffers.
    let stats = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".stats.json"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .expect("stats file");
    let num = |k: &str| -> u64 {
        let i = stats
            .find(&format!("\"{k}\""))
            .unwrap_or_else(|| panic!("{stats}"));
        stats[i + k.len() + 3..]
            .trim_start_matches([':', ' '])
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    let (written, discarded) = (num("written"), num("discarded"));
    assert_eq!(written + discarded, 4 * events, "{stats}");
    // Every event is more than 10 bytes (a 4-byte compact header, an f64, a string and its
    // NUL, ...): that many bytes fill at least this many 16 KiB sub-buffers.
    let switches = written * 10 / (16 * 1024);
    assert!(
        switches >= 100,
        "only ~{switches} sub-buffer switches: {stats}"
    );
    {
        let ev = babeltrace(&dir, false);
        assert_eq!(ev.len() as u64, written);
        assert!(ev.iter().all(|e| e.procname == "c-rt"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fork_child_has_its_own_identity_and_no_duplicates() {
    let exe = program("fork.c", Link::Shared);
    let dir = trace_dir("fork");
    let (before, after) = (5000i64, 3000i64);
    let out = run_ok(
        &exe,
        &[
            dir.to_str().unwrap(),
            &before.to_string(),
            &after.to_string(),
        ],
        &[],
    );
    let line = out.lines().last().unwrap();
    let (parent, child) = (
        summary(line, "parent") as u32,
        summary(line, "child") as u32,
    );
    let events = babeltrace(&dir, false);
    let count = |name: &str, pid: u32| {
        events
            .iter()
            .filter(|e| e.name == name && e.vpid == pid)
            .count() as i64
    };
    assert_eq!(count("f:before", parent), before);
    assert_eq!(
        count("f:before", child),
        0,
        "the child duplicated buffered events"
    );
    assert_eq!(count("f:parent", parent), after);
    assert_eq!(count("f:child", child), after);
    for e in events.iter().filter(|e| e.name == "f:child") {
        assert_eq!(e.vpid, child);
        assert_eq!(e.vtid, child);
        assert_eq!(e.int("pid"), child as i128);
        assert_eq!(e.procname, "c-child");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dlopened_library_records_and_lists_its_tracepoints() {
    let plugin = support::out_dir().join("libhtplugin.so");
    cc(
        &support::source("plugin.c"),
        &plugin,
        "c99",
        Link::Shared,
        &["-shared", "-fPIC"],
    );
    let exe = program("dlopen.c", Link::Shared);
    let dir = trace_dir("dlopen");
    let n = 1000;
    let out = run_ok(
        &exe,
        &[
            dir.to_str().unwrap(),
            plugin.to_str().unwrap(),
            &n.to_string(),
        ],
        &[],
    );
    assert!(out.contains(&format!("total {}", 2 * n)), "{out}");
    let meta = metadata(&dir);
    // Both of the library's tracepoints, also the one never run.
    assert_eq!(
        kinds_of(&meta, "plugin:hit"),
        ["hushtrace:instant"],
        "{meta}"
    );
    assert_eq!(
        kinds_of(&meta, "plugin:never"),
        ["hushtrace:instant"],
        "{meta}"
    );
    let events = babeltrace(&dir, false);
    let hits: Vec<_> = events.iter().filter(|e| e.name == "plugin:hit").collect();
    assert_eq!(hits.len(), 2 * n, "both rounds, before and after dlclose");
    assert!(hits.iter().all(|e| e.fields["from"] == "plugin"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nested_cxx_scopes_end_in_order() {
    check_scopes(&program("scope.cpp", Link::Shared), "scope");
}

/// Runs `scope.cpp` built as `exe` and checks that its scopes nest.
fn check_scopes(exe: &Path, tag: &str) {
    let dir = trace_dir(tag);
    let depth = 5;
    run_ok(exe, &[dir.to_str().unwrap(), &depth.to_string()], &[]);
    let meta = metadata(&dir);
    let mut never = kinds_of(&meta, "cpp:never");
    never.sort();
    assert_eq!(never, ["hushtrace:span_begin", "hushtrace:span_end"]);
    let events = babeltrace(&dir, false);
    let begin_ids: BTreeSet<String> = kinds_of(&meta, "cpp:recurse").into_iter().collect();
    assert_eq!(begin_ids.len(), 2);
    // Per thread, begins and ends nest like parentheses. A begin has fields or is the first
    // of its name at its depth; tell them apart with the metadata's kinds by event order:
    // replay the stream as a stack of names.
    let mut threads: BTreeMap<u32, Vec<&common::BtEvent>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.name.starts_with("cpp:")) {
        threads.entry(e.vtid).or_default().push(e);
    }
    assert_eq!(threads.len(), 2);
    for evs in threads.values() {
        let mut stack: Vec<&str> = Vec::new();
        let mut max = 0;
        let mut recurse_depths = Vec::new();
        for e in evs {
            if e.name == "cpp:value" {
                continue;
            }
            // The end record of a span carries no fields; every begin here but the
            // field-less `inner` carries some. `inner` is a begin when it is not on top.
            let is_end = e.fields.is_empty() && stack.last() == Some(&e.name.as_str());
            if is_end {
                stack.pop();
            } else {
                if e.name == "cpp:recurse" {
                    recurse_depths.push(e.int("depth"));
                    assert_eq!(e.fields["tag"], e.int("depth").to_string());
                }
                stack.push(e.name.as_str());
                max = max.max(stack.len());
            }
        }
        assert!(stack.is_empty(), "unbalanced scopes: {stack:?}");
        assert_eq!(recurse_depths, (0..=depth).rev().collect::<Vec<i128>>());
        // recurse + inner + inner2 per level above 0, then recurse + leaf at the bottom.
        assert_eq!(max, 3 * depth as usize + 2);
        // The template's counter: int, double, unsigned.
        let values: Vec<&str> = evs
            .iter()
            .filter(|e| e.name == "cpp:value")
            .map(|e| e.fields["value"].as_str())
            .collect();
        assert_eq!(values, ["3", "2.5", "7"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scope_end_is_recorded_if_and_only_if_its_begin_was() {
    let exe = program("scope_toggle.cpp", Link::Shared);
    let dir = trace_dir("scope-toggle");
    let out = run_ok(&exe, &[dir.to_str().unwrap()], &[]);
    assert!(out.contains("written 12 discarded 0"), "{out}");
    let events = babeltrace(&dir, false);
    // A begin carries `k`, an end nothing.
    let got: Vec<String> = events
        .iter()
        .map(|e| match e.fields.get("k") {
            Some(k) => format!("{} begin {k}", e.name),
            None => format!("{} end", e.name),
        })
        .collect();
    let want = [
        "tog:steady begin 1",
        "tog:steady end",
        "tog:off_inside begin 2",
        "tog:off_inside end", // disabled while open: recorded anyway
        "tog:on_inside begin 3",
        "tog:on_inside end",
        // k = 4: disabled at the begin, enabled while open: neither
        "tog:outer begin 5",
        "tog:inner begin 6",
        "tog:inner end",
        "tog:outer end",
        // k = 7: disabled throughout
        "tog:off_inside begin 8",
        "tog:off_inside end",
    ];
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn counters_record_integers_as_integers_in_c99_and_c11() {
    for std in ["c99", "c11"] {
        check_counters(&program_std("counters.c", Link::Shared, std), std);
    }
}

/// Runs `counters.c` built as `exe` and checks each counter's type and value.
fn check_counters(exe: &Path, tag: &str) {
    let dir = trace_dir(&format!("counters-{tag}"));
    let out = run_ok(exe, &[dir.to_str().unwrap()], &[]);
    assert!(out.contains("written 16 discarded 0"), "{tag}: {out}");
    let meta = metadata(&dir);
    let events = babeltrace(&dir, false);
    for (name, ty, value) in [
        ("schar", "int64_t", "-3"),
        ("uchar", "uint64_t", "250"),
        ("short", "int64_t", "-300"),
        ("int", "int64_t", "-5"),
        ("unsigned", "uint64_t", "4000000000"),
        ("long", "int64_t", "-7000000000"),
        ("ull", "uint64_t", "18446744073709551615"),
        ("i64min", "int64_t", "-9223372036854775808"),
        ("bool", "uint64_t", "1"),
        ("float", "double", "0.25"),
        ("double", "double", "-2.5"),
        // An enumeration with no negative constant is unsigned in GCC and Clang.
        ("enum", "uint64_t", "7"),
        ("literal", "int64_t", "42"),
        ("expr", "int64_t", "-9"),
        ("once", "int64_t", "1"),
        ("once_after", "int64_t", "1"),
    ] {
        let full = format!("k:{name}");
        assert_eq!(field_types_of(&meta, &full, "value"), [ty], "{tag}: {full}");
        {
            let got: Vec<&str> = events
                .iter()
                .filter(|e| e.name == full)
                .map(|e| e.fields["value"].as_str())
                .collect();
            assert_eq!(got, [value], "{tag}: {full}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clang_compiles_the_header_and_the_programs() {
    let (Some(clang), Some(clangxx)) = (
        support::clang(&support::source("header.c")),
        support::clang(&support::source("header.cpp")),
    ) else {
        panic!("clang and clang++ are required (apt-get install clang; .ci/run installs it)");
    };
    for (file, compiler, std) in [
        ("header.c", &clang, "c99"),
        ("header.c", &clang, "c11"),
        ("header.cpp", &clangxx, "c++11"),
        ("header.cpp", &clangxx, "c++17"),
    ] {
        let out = support::out_dir().join(format!("header-clang-{std}.o"));
        support::cc_with(
            compiler,
            &support::source(file),
            &out,
            std,
            Link::None,
            &["-c"],
        );
    }
    let build = |name: &str, compiler: &str, std: &str, link: Link| {
        let stem = name.split('.').next().unwrap();
        let out = support::out_dir().join(format!("{stem}-clang-{std}-{link:?}"));
        support::cc_with(compiler, &support::source(name), &out, std, link, &[]);
        out
    };
    for link in [Link::Shared, Link::Static] {
        check_threads(&build("threads.c", &clang, "c99", link), "clang-threads");
    }
    check_scopes(
        &build("scope.cpp", &clangxx, "c++17", Link::Shared),
        "clang-scope",
    );
    for std in ["c99", "c11"] {
        let exe = build("counters.c", &clang, std, Link::Shared);
        check_counters(&exe, &format!("clang-{std}"));
    }
}

#[test]
fn bad_arguments_give_an_error_code_and_a_message() {
    let exe = program("errors.c", Link::Shared);
    let dir = trace_dir("errors");
    let out = run_ok(
        &exe,
        &[dir.to_str().unwrap()],
        &[("HUSHTRACE_OUTPUT", dir.to_str().unwrap())],
    );
    assert!(!out.contains("FAIL"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        18,
        "{out}"
    );
    let events = babeltrace(&dir, false);
    let e = events
        .iter()
        .find(|e| e.name == "e:strings")
        .expect("e:strings");
    assert_eq!(e.fields["null"], "");
    assert_eq!(
        e.fields["bad"], "ok",
        "cut before the first byte that is not UTF-8"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn install_script_and_pkg_config() {
    assert!(
        std::process::Command::new("pkg-config")
            .arg("--version")
            .output()
            .is_ok(),
        "pkg-config is required (apt-get install pkg-config; .ci/run installs it)"
    );
    let prefix = common::temp_dir("c-prefix");
    support::install(&prefix);
    for f in [
        "include/hushtrace.h",
        "lib/libhushtrace.so",
        "lib/libhushtrace.a",
        "lib/pkgconfig/hushtrace.pc",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }
    let pc = |args: &[&str]| -> Vec<String> {
        let o = std::process::Command::new("pkg-config")
            .args(args)
            .arg("hushtrace")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout)
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let dir = trace_dir("pkgconfig");
    for (flags, tag) in [
        (pc(&["--cflags", "--libs"]), "shared"),
        (pc(&["--static", "--cflags", "--libs"]), "static"),
    ] {
        let exe = support::out_dir().join(format!("threads-pc-{tag}"));
        let mut cmd = std::process::Command::new("cc");
        cmd.arg("-std=c99")
            .args(support::WARN)
            .arg(support::source("threads.c"))
            .arg("-o")
            .arg(&exe);
        if tag == "static" {
            // Link the archive, not the shared library, with pkg-config's static libraries.
            cmd.args(flags.iter().filter(|f| *f != "-lhushtrace"))
                .arg(prefix.join("lib/libhushtrace.a"));
        } else {
            cmd.args(&flags)
                .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()));
        }
        let o = cmd.arg("-pthread").output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = run_ok(&exe, &[dir.to_str().unwrap(), "2", "10"], &[]);
        assert!(out.contains("written 81 discarded 0"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
    }
    let _ = std::fs::remove_dir_all(&prefix);
    let _ = std::fs::remove_dir_all(&dir);
}
