//! What a session writes about its late spans (issue 31), read back: the lines of
//! `<dir>/late/index.json` and the counters of `<dir>/<pid>.stats.json`, both flat JSON objects.

use std::collections::BTreeMap;
use std::path::Path;

/// A flat JSON object (numbers and strings without commas, as the index and the statistics
/// file write them) as key → value text. Panics naming the line when it is not one.
pub fn parse_flat(line: &str) -> BTreeMap<String, String> {
    let body = line
        .trim()
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("not an object: {line}"));
    body.split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once(':')
                .unwrap_or_else(|| panic!("{kv} in {line}"));
            (
                k.trim_matches('"').to_string(),
                v.trim_matches('"').to_string(),
            )
        })
        .collect()
}

/// The lines of `<root>/late/index.json` (none when there is no index yet).
pub fn index_lines(root: &Path) -> Vec<BTreeMap<String, String>> {
    std::fs::read_to_string(root.join("late/index.json"))
        .unwrap_or_default()
        .lines()
        .map(parse_flat)
        .collect()
}

/// Value `k` of `m` as a number; panics naming the key and the object when it is not one.
pub fn num(m: &BTreeMap<String, String>, k: &str) -> u64 {
    m[k].parse()
        .unwrap_or_else(|_| panic!("{k} is not a number in {m:?}"))
}

/// This process's statistics file (`<root>/<pid>.stats.json`), key → value text.
pub fn stats(root: &Path) -> BTreeMap<String, String> {
    let name = format!("{}.stats.json", std::process::id());
    parse_flat(&std::fs::read_to_string(root.join(name)).expect("stats file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_objects_parse_to_their_keys() {
        let m = parse_flat(r#"{"n":1,"span":"rt:cycle","dir":"late/1"}"#);
        assert_eq!(num(&m, "n"), 1);
        assert_eq!(m["span"], "rt:cycle");
        assert_eq!(m["dir"], "late/1");
    }
}
