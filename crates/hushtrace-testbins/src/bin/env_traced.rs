//! A program traced only through the environment, as `hushtrace record` runs programs.
//!
//! `HUSHTRACE_OUTPUT=/tmp/t cargo run -p hushtrace-testbins --bin env_traced -- [events]`
//!
//! Starts a session with `hushtrace::start_from_env()` (nothing is recorded without
//! `HUSHTRACE_OUTPUT`), emits `event!("env", "ev", seq = <u64>)` `events` times (default 1000)
//! and prints `{"traced":true|false,"written":W,"discarded":D}`. A bad `HUSHTRACE_*` value is
//! reported on stderr and the program carries on untraced.
#![forbid(unsafe_code)]

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let session = match hushtrace::start_from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("env_traced: tracing disabled: {e}");
            None
        }
    };
    for seq in 0..events {
        hushtrace::event!("env", "ev", seq = seq);
    }
    let (traced, w, d) = match session.map(|s| s.stop()) {
        Some(Ok(st)) => (true, st.events_written, st.events_discarded),
        Some(Err(e)) => {
            eprintln!("env_traced: {e}");
            (true, 0, 0)
        }
        None => (false, 0, 0),
    };
    println!("{{\"traced\":{traced},\"written\":{w},\"discarded\":{d}}}");
}
