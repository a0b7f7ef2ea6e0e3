//! A child's output, line by line, and its exit, without ever blocking the test; babeltrace2's
//! text output counted per thread.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The lines of `child`'s stdout (which must be piped; it is taken), through a channel fed by
/// a thread: a test waits on it with a timeout and never hangs on a silent child.
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("the child's stdout is piped");
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most `timeout`) for a line of `rx` containing `prefix` (the test harness may print
/// "test role ... " before it on the same line); returns what follows `prefix`, trimmed.
/// Panics with every line seen when none comes.
pub fn wait_line(rx: &mpsc::Receiver<String>, prefix: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let mut seen = String::new();
    while Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            if let Some(i) = l.find(prefix) {
                return l[i + prefix.len()..].trim().to_string();
            }
            seen.push_str(&l);
            seen.push('\n');
        }
    }
    panic!("no line {prefix:?} within {timeout:?}; output:\n{seen}");
}

/// The events whose line contains `name`, per `(vpid, vtid)`, in babeltrace2's text output
/// (run with the default options, which print `vpid = N` and `vtid = N` context fields).
/// Panics on a matching line that lacks either.
pub fn count_per_thread(text: &str, name: &str) -> BTreeMap<(u32, u32), u64> {
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains(name)) {
        let field = |k: &str| -> u32 {
            let key = format!("{k} = ");
            let at = line
                .find(&key)
                .unwrap_or_else(|| panic!("no {k} in {line}"))
                + key.len();
            line[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|e| panic!("{k} in {line}: {e}"))
        };
        *m.entry((field("vpid"), field("vtid"))).or_insert(0) += 1;
    }
    m
}

/// Waits (at most `timeout`) for `child` to exit; `None` when it is still running then, after
/// killing and reaping it (the caller fails the test: a hang).
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
