use super::*;

#[test]
fn histogram_percentiles() {
    let mut a = SpanAcc::new();
    for v in 1..=10_000 {
        a.record(v);
    }
    // Within 0.1% (3 significant digits).
    for (q, want) in [(0.5, 5000), (0.99, 9900), (0.999, 9990), (0.9999, 9999)] {
        let got = a.quantile(q);
        assert!((got - want).abs() * 1000 <= want, "{q}: {got} vs {want}");
    }
    let mut one = SpanAcc::new();
    one.record(123_456_789);
    assert_eq!(one.quantile(0.5), 123_456_789, "clamped to the exact max");
}

#[test]
fn tables_align() {
    let t = table(
        &["A", "NUM"],
        &[
            vec!["long name".into(), "1".into()],
            vec!["x".into(), "200".into()],
        ],
    );
    assert_eq!(t, "A          NUM\nlong name    1\nx          200\n");
}
