/// Matches `text` against a glob `pattern` where `*` matches any run of characters (including
/// `:`) and `?` matches exactly one character. Everything else matches itself.
///
/// ```
/// use hushtrace_core::glob_match;
/// assert!(glob_match("*", "rt:cycle"));
/// assert!(glob_match("rt:*", "rt:cycle"));
/// assert!(glob_match("*:cyc?e", "rt:cycle"));
/// assert!(!glob_match("rt:sample", "rt:cycle"));
/// ```
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p = pattern.as_bytes();
    let t = text.as_bytes();
    // Iterative matcher with single-star backtracking: O(len(p) * len(t)) worst case, no
    // recursion, no allocation.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
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
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("", ""));
        assert!(!glob_match("", "a"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("**", "x"));
        assert!(glob_match("bench:t?ck", "bench:tick"));
        assert!(!glob_match("bench:t?ck", "bench:tiick"));
        assert!(glob_match("*tick", "bench:tick"));
        assert!(!glob_match("bench", "bench:tick"));
    }
}
