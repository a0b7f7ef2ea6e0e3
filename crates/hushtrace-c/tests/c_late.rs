//! Deadlines of C spans (`tests/c/late.c`, issue 31 point 1): the session's rules apply to
//! `HT_SPAN_BEGIN`/`HT_SPAN_END` spans (also with three fields, the array path), and
//! `HT_SPAN_END_DEADLINE` declares one; each late span yields a capture `<dir>/late/<n>/` and
//! a line in `<dir>/late/index.json` naming it `cat:name`, and a punctual span none; the rules
//! apply to C++ scopes (`tests/c/late_scope.cpp`) and win over a declared deadline. No
//! timing assertion: late spans sleep 20 ms past a 1 ms deadline, the punctual one has an
//! hour.

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

use support::{program, run_ok, trace_dir, Link};

/// The value of `"key":` in a flat JSON line (a string's quotes removed).
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pat.len();
    let rest = &line[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim_matches('"')
}

#[test]
fn late_c_spans_are_captured() {
    let exe = program("late.c", Link::Shared);
    let dir = trace_dir("late");
    let d = dir.to_str().unwrap();
    let out = run_ok(
        &exe,
        &[d],
        &[
            ("HUSHTRACE_OUTPUT", d),
            ("HUSHTRACE_ON_LATE", "c:ruled>1ms,c:wide>1ms"),
            ("HUSHTRACE_LATE_INTERVAL", "1ms"),
        ],
    );
    assert!(out.contains("index lines: 3"), "{out}");
    let index = std::fs::read_to_string(dir.join("late/index.json")).unwrap();
    let lines: Vec<&str> = index.lines().collect();
    let mut spans: Vec<&str> = lines.iter().map(|l| field(l, "span")).collect();
    spans.sort_unstable();
    assert_eq!(spans, ["c:declared", "c:ruled", "c:wide"], "{index}");
    for line in &lines {
        let (duration, deadline) = (field(line, "duration_ns"), field(line, "deadline_ns"));
        assert_eq!(deadline, "1000000", "{line}");
        assert!(duration.parse::<u64>().unwrap() > 1_000_000, "{line}");
        let n = field(line, "n");
        assert!(dir.join("late").join(n).is_dir(), "no capture for {line}");
    }
    assert!(dir.join("late/1").is_dir(), "{index}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn late_cpp_scopes_follow_the_rules() {
    let exe = program("late_scope.cpp", Link::Shared);
    let dir = trace_dir("late-scope");
    let d = dir.to_str().unwrap();
    let out = run_ok(
        &exe,
        &[d],
        &[
            ("HUSHTRACE_OUTPUT", d),
            ("HUSHTRACE_ON_LATE", "cpp:*>1ms"),
            ("HUSHTRACE_LATE_INTERVAL", "1ms"),
        ],
    );
    assert!(!out.contains("index lines: 0"), "{out}");
    let index = std::fs::read_to_string(dir.join("late/index.json")).unwrap();
    let spans: Vec<&str> = index.lines().map(|l| field(l, "span")).collect();
    for want in ["cpp:outer", "cpp:inline"] {
        assert!(spans.contains(&want), "{want} missing: {index}");
    }
    for line in index.lines() {
        assert_eq!(field(line, "deadline_ns"), "1000000", "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
