//! Usage errors, missing or unreadable traces, and `hushtrace record`'s environment, exit status
//! and refusal to mix traces.

use super::*;

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["convert"][..],
        &["convert", "/tmp", "--to", "svg", "-o", "x"][..],
        &["record", "-o", "/tmp/x"][..],
        &["report", "/tmp", "--format", "yaml"][..],
        &[][..],
    ] {
        let o = hushtrace(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty());
    }
    for sub in ["record", "convert", "report", "flamegraph"] {
        let o = hushtrace(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage: hushtrace"));
    }
}

#[test]
fn missing_or_unreadable_trace_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for sub in ["report", "convert", "flamegraph"] {
        let mut args = vec![sub, missing.to_str().unwrap()];
        if sub != "report" {
            args.extend(["-o", "/dev/null"]);
        }
        let o = hushtrace(&args);
        assert_eq!(o.status.code(), Some(1), "{sub}");
        assert!(
            stderr(&o).contains(missing.to_str().unwrap()),
            "{}",
            stderr(&o)
        );
    }
    // Corrupt stream: error names the file and offset, and no partial output is left.
    write_workload(dir.path(), 2);
    let stream = dir.path().join("100/stream_0");
    let mut b = std::fs::read(&stream).unwrap();
    b[112] = 0xee;
    std::fs::write(&stream, b).unwrap();
    let out = dir.path().join("out.json");
    let o = hushtrace(&[
        "convert",
        dir.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("stream_0: byte offset 112"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    assert!(!dir.path().join("out.json.partial").exists());
}

#[test]
fn record_sets_environment_and_returns_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    let o = hushtrace(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "--mode",
        "overwrite",
        "--num-subbufs",
        "8",
        "--",
        "sh",
        "-c",
        "env | grep ^HUSHTRACE_ | sort; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("HUSHTRACE_MODE=overwrite\nHUSHTRACE_NUM_SUBBUFS=8\nHUSHTRACE_OUTPUT="),
        "{text}"
    );
    assert!(!text.contains("HUSHTRACE_SUBBUF_SIZE"), "{text}");
    assert!(
        text.contains(&format!("trace: {}", out.display())),
        "{text}"
    );
}

/// Issue 13.6: `record` into a directory that already holds a trace refuses (naming the
/// directory, what it holds and the two flags) without running the command; `--force`
/// replaces the trace (and only the trace), `--append` adds to it.
#[test]
fn record_refuses_a_directory_with_a_trace_unless_force_or_append() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    write_workload(&out, 1);
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let record = |extra: &[&str]| {
        let mut args = vec!["record", "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend(["--", "sh", "-c", &script]);
        hushtrace(&args)
    };

    let o = record(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    for needle in [
        out.to_str().unwrap(),
        "already holds a trace",
        "2 process trace(s): 100, 200",
        "--force",
        "--append",
    ] {
        assert!(err.contains(needle), "{needle} not in {err}");
    }
    assert!(!marker.exists(), "the command ran");
    assert!(out.join("100/metadata").exists());

    let o = record(&["--append"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(marker.exists());
    assert!(out.join("100/metadata").exists() && out.join("200.stats.json").exists());

    std::fs::remove_file(&marker).unwrap();
    let o = record(&["--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(marker.exists());
    for gone in ["100", "200", "100.stats.json", "200.stats.json"] {
        assert!(!out.join(gone).exists(), "{gone} left behind");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );

    // Both at once is a usage error; an empty or missing directory needs neither.
    let o = record(&["--force", "--append"]);
    assert_eq!(o.status.code(), Some(2));
    let o = record(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
}
