//! The `*` and `?` glob matcher of `--include`/`--exclude` (plain Rust, no Python: its unit
//! tests also build as the integration test `tests/glob.rs`).

/// `*` and `?` glob match.
pub fn glob(pat: &str, s: &str) -> bool {
    let (p, s) = (pat.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (usize::MAX, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = pi;
            mark = si;
            pi += 1;
        } else if star != usize::MAX {
            pi = star + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::glob;
    #[test]
    fn globs() {
        assert!(glob("json*", "json.decoder"));
        assert!(glob("*.fib", "__main__.fib"));
        assert!(!glob("json", "json.decoder"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "a.x.b.y.c"));
        assert!(!glob("a*b*c", "a.x.b.y"));
    }
}
