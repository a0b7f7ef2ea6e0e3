use super::*;

#[test]
fn index_lines_parse_and_bad_ones_are_named() {
    let p = Path::new("/s/late/index.json");
    let line = r#"{"n":1,"span":"rt:cycle","pid":7,"tid":8,"start_ns":5,"duration_ns":900,"deadline_ns":600,"dir":"late/1"}"#;
    let v = parse_index(p, &format!("{line}\n\n{line}\n")).unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].span, "rt:cycle");
    assert_eq!(
        (v[0].tid, v[0].duration_ns, v[0].deadline_ns),
        (8, 900, 600)
    );
    let e = parse_index(p, &format!("{line}\nnot json é{}\n", "é".repeat(200)))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/s/late/index.json line 2: not a capture's entry"),
        "{e}"
    );
    let neg = line.replace("\"duration_ns\":900", "\"duration_ns\":-1");
    let e = parse_index(p, &neg).unwrap_err().to_string();
    assert!(e.contains("line 1: a negative duration"), "{e}");
}

#[test]
fn capture_directories_stay_inside_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("late/1")).unwrap();
    let idx = Path::new("index.json");
    let mut e = IndexEntry {
        n: 1,
        span: "a:b".into(),
        pid: 1,
        tid: 1,
        start_ns: 0,
        duration_ns: 1,
        deadline_ns: 1,
        dir: "late/1".into(),
    };
    assert!(capture_dir(tmp.path(), idx, &e).is_ok());
    for bad in ["", "/etc", "late/../..", "./late/1"] {
        e.dir = bad.into();
        let err = capture_dir(tmp.path(), idx, &e).unwrap_err().to_string();
        assert!(err.contains("is not a path inside"), "{bad}: {err}");
    }
}
