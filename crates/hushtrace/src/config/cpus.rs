//! CPU lists as `taskset -c` writes them (`HUSHTRACE_CONSUMER_CPUS`).

/// Largest CPU number accepted in `HUSHTRACE_CONSUMER_CPUS` (the kernel's `CPU_SETSIZE` − 1).
pub const MAX_CPU: usize = 1023;

/// Parses a CPU list as `taskset -c` and `isolcpus=` write it (`HUSHTRACE_CONSUMER_CPUS`):
/// sorted, without repeats; the error says what was expected.
///
/// ```
/// assert_eq!(hushtrace::parse_cpu_list("3,0-1"), Ok(vec![0, 1, 3]));
/// assert!(hushtrace::parse_cpu_list("1-0").is_err());
/// ```
pub fn parse_cpu_list(v: &str) -> Result<Vec<usize>, String> {
    const EXPECTED: &str = "expected CPU numbers and ranges such as `0`, `0,2` or `0-3,6`";
    let mut cpus = Vec::new();
    for part in v.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = match (a.trim().parse(), b.trim().parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(EXPECTED.to_string()),
        };
        if b > MAX_CPU {
            return Err(format!("CPU {b} is above {MAX_CPU} ({EXPECTED})"));
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A CPU list as [`parse_cpu_list`] reads it back, numbers only (`0,1,3`): for messages and
/// the environment of a recorded program.
///
/// ```
/// assert_eq!(hushtrace::cpu_list_text(&[0, 1, 3]), "0,1,3");
/// ```
pub fn cpu_list_text(cpus: &[usize]) -> String {
    let text: Vec<String> = cpus.iter().map(usize::to_string).collect();
    text.join(",")
}
