//! `hushtrace view DIR`: one command to look at a trace in the Perfetto UI, the way Perfetto's
//! own `tools/open_trace_in_ui` script opens a file.
//!
//! 1. The trace is converted to Perfetto's protobuf format by [`crate::perfetto::convert`]
//!    (what `hushtrace convert --to perfetto` writes, byte for byte) into a temporary file
//!    that is unlinked as soon as it is created, so nothing is left behind however the command
//!    ends (Ctrl-C, a kill).
//! 2. A server on `127.0.0.1:PORT` (default [`DEFAULT_PORT`], 9001: the only port the Perfetto
//!    UI's Content-Security-Policy lets its page fetch from on this machine, the one
//!    `trace_processor_shell --httpd` uses too) serves it at `/<key>/<name>.perfetto-trace`,
//!    with `Access-Control-Allow-Origin: https://ui.perfetto.dev`. The key is 16 random hex
//!    digits: another user of this machine cannot guess the path and take the one download.
//! 3. The link `https://ui.perfetto.dev/#!/?url=http://127.0.0.1:PORT/<key>/<name>` is printed
//!    on stdout, alone on its line, and handed to a browser (`$BROWSER`, else `xdg-open` when
//!    there is a display) unless [`Options::browser`] is false. No browser is not an error.
//! 4. The server answers until the trace has been sent whole once, then the command ends, as
//!    the script does: the UI keeps the trace it loaded. Ctrl-C ends it before that.

use crate::chrome::Summary;
use anyhow::Context as _;
use hushtrace_ctf::reader::Session;
use std::fs::File;
use std::io::{IsTerminal, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

mod browser;
mod http;
mod server;

/// The Perfetto UI the link opens, and the only origin the server lets read the trace.
pub const UI_ORIGIN: &str = "https://ui.perfetto.dev";

/// The port the hosted Perfetto UI may fetch from on 127.0.0.1 (its Content-Security-Policy
/// allows `http://127.0.0.1:9001` only), like Perfetto's `open_trace_in_ui`.
pub const DEFAULT_PORT: u16 = 9001;

/// What `hushtrace view` does besides serving.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The port on 127.0.0.1 (0: any free port, said in the printed link).
    pub port: u16,
    /// Hand the link to a browser (else only print it).
    pub browser: bool,
}

/// The link that opens the trace served at `http://127.0.0.1:port{path}` in the Perfetto UI.
///
/// ```
/// assert_eq!(
///     hushtrace_cli::view::ui_link(9001, "/k/t.perfetto-trace"),
///     "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/k/t.perfetto-trace"
/// );
/// ```
pub fn ui_link(port: u16, path: &str) -> String {
    format!("{UI_ORIGIN}/#!/?url=http://127.0.0.1:{port}{path}")
}

/// The file name the trace of `dir` is served under: the directory's name with characters
/// other than ASCII letters, digits, `.`, `_` and `-` replaced by `_` (at most 64 of them;
/// `trace` for none), then `.perfetto-trace`. The UI shows it as the trace's title.
///
/// ```
/// use std::path::Path;
/// use hushtrace_cli::view::trace_name;
/// assert_eq!(trace_name(Path::new("/tmp/my run")), "my_run.perfetto-trace");
/// assert_eq!(trace_name(Path::new("/")), "trace.perfetto-trace");
/// ```
pub fn trace_name(dir: &Path) -> String {
    let base = std::path::absolute(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut name: String = base
        .chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    if name.is_empty() {
        name = "trace".to_string();
    }
    name + ".perfetto-trace"
}

/// Converts `session` to Perfetto's format into an unnamed temporary file (created under the
/// system's temporary directory, `$TMPDIR`, with mode 0600 and unlinked at once); returns the
/// file, its length and the conversion's summary. A progress bar shows while stderr is a
/// terminal.
pub fn convert_to_temp(session: &Session) -> anyhow::Result<(File, u64, Summary)> {
    let tmp = std::env::temp_dir().join(format!(
        "hushtrace-view-{}-{}.perfetto-trace",
        std::process::id(),
        random_key()
    ));
    // As `create_private`, and readable: the server reads it back.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .with_context(|| format!("cannot create the temporary file {}", tmp.display()))?;
    std::fs::remove_file(&tmp).with_context(|| format!("cannot unlink {}", tmp.display()))?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(session.stream_bytes());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} converting [{bar:40}] {bytes}/{total_bytes} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar
    });
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let summary = crate::perfetto::convert(session, &file, &mut progress).with_context(|| {
        format!(
            "converting to Perfetto's format (in {})",
            std::env::temp_dir().display()
        )
    })?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let len = (&file).seek(SeekFrom::End(0))?;
    Ok((file, len, summary))
}

/// `hushtrace view`: converts `session` (the trace of `dir`), serves it to the Perfetto UI on
/// 127.0.0.1 and opens or prints the link, and returns once the trace has been sent whole.
/// Fails when the port cannot be had or the trace cannot be converted.
pub fn run(session: &Session, dir: &Path, opts: Options) -> anyhow::Result<()> {
    // Before converting: a busy port is said at once, not after a long conversion.
    let listener = bind(opts.port)?;
    let port = listener.local_addr()?.port();
    let (file, len, summary) = convert_to_temp(session)?;
    for w in &summary.warnings {
        eprintln!("hushtrace: warning: {w}");
    }
    let trace = server::Trace {
        file,
        len,
        path: format!("/{}/{}", random_key(), trace_name(dir)),
    };
    let link = ui_link(port, &trace.path);
    // The link alone on stdout (a script or test reads it); the rest on stderr. A closed or
    // broken stdout must not lose it (nor panic, as `println!` would).
    if writeln!(std::io::stdout(), "{link}").is_err() {
        eprintln!("{link}");
    }
    eprintln!(
        "hushtrace: serving the trace of {} ({} events, {} process(es), {} thread(s), {} bytes \
         in Perfetto's format) on http://127.0.0.1:{port}/ until the Perfetto UI has loaded it \
         once; Ctrl-C ends it",
        dir.display(),
        summary.events,
        summary.processes,
        summary.threads,
        len
    );
    if port != DEFAULT_PORT {
        eprintln!(
            "hushtrace: note: the Perfetto UI at {UI_ORIGIN} fetches from 127.0.0.1:{DEFAULT_PORT} \
             only (its Content-Security-Policy): the link works with port {port} only in a \
             Perfetto UI that allows it"
        );
    }
    if opts.browser {
        match browser::open(&link) {
            browser::Opened::Started(with) => {
                eprintln!("hushtrace: opening the link above with {with}")
            }
            browser::Opened::NoBrowser(why) => {
                eprintln!("hushtrace: no browser to open ({why}): open the link above in one")
            }
        }
    } else {
        eprintln!("hushtrace: open the link above in a browser");
    }
    server::serve_once(listener, trace).context("serving the trace")?;
    eprintln!("hushtrace: the trace was sent ({len} bytes); done");
    Ok(())
}

/// Listens on `127.0.0.1:port`, saying what to do when the port is taken.
fn bind(port: u16) -> anyhow::Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            let who = if port == DEFAULT_PORT {
                " (by `trace_processor_shell --httpd`, or another `hushtrace view`?)"
            } else {
                ""
            };
            anyhow::anyhow!(
                "127.0.0.1:{port} is in use{who}: end what listens there, or choose another port \
                 with --port N (the Perfetto UI at {UI_ORIGIN} fetches from port {DEFAULT_PORT} \
                 only)"
            )
        } else {
            anyhow::anyhow!("cannot listen on 127.0.0.1:{port}: {e}")
        }
    })
}

/// 16 hex digits from the standard library's randomly keyed hasher (its keys come from the
/// operating system's random source), different at each call.
fn random_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_and_names_are_url_safe() {
        let (a, b) = (random_key(), random_key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
        assert_eq!(trace_name(Path::new("a/b c/é?#&x")), "____x.perfetto-trace");
        let long = "x".repeat(100);
        assert_eq!(
            trace_name(Path::new(&long)).len(),
            64 + ".perfetto-trace".len()
        );
    }
}
