//! Test helper (`crates/hushtrace/tests/core_config.rs`, `core_env.rs`): a program configured
//! only by the environment.
//!
//! `test_env [events]`: calls `hushtrace::start_from_env()` and prints its outcome on the first
//! line (`start: ok`, `start: none` or `start: err: <message>`), then emits
//! `event!("env", "ev", seq = <u64>)` `events` times (default 1000) from the main thread. With a
//! session it stops it and prints `{"written":W,"discarded":D}` (or `stop: err: <message>`).
//! If `TEST_ENV_RETRY_DIR` is set and the start failed, it then starts a session with the
//! builder in that directory, emits the same events again and prints its stats the same way:
//! a failed start must leave the tracer usable. Prints `alive` last and exits 0.
#![forbid(unsafe_code)]

fn emit(n: u64) {
    for seq in 0..n {
        hushtrace::event!("env", "ev", seq = seq);
    }
}

fn print_stop(session: hushtrace::Session) {
    match session.stop() {
        Ok(st) => println!(
            "{{\"written\":{},\"discarded\":{}}}",
            st.events_written, st.events_discarded
        ),
        Err(e) => println!("stop: err: {e}"),
    }
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let failed = match hushtrace::start_from_env() {
        Ok(Some(session)) => {
            println!("start: ok");
            emit(events);
            print_stop(session);
            false
        }
        Ok(None) => {
            println!("start: none");
            emit(events);
            false
        }
        Err(e) => {
            println!("start: err: {e}");
            // Tracepoints after a failed start are no-ops.
            emit(events);
            true
        }
    };
    if let (true, Some(dir)) = (failed, std::env::var_os("TEST_ENV_RETRY_DIR")) {
        match hushtrace::Session::builder().output_dir(dir).start() {
            Ok(session) => {
                println!("retry: ok");
                emit(events);
                print_stop(session);
            }
            Err(e) => println!("retry: err: {e}"),
        }
    }
    println!("alive");
}
