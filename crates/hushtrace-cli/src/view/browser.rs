//! Opening a link in the user's browser, when there is one: the commands of `$BROWSER`, else
//! `xdg-open` when a display is set. Never an error: when nothing can be started, the caller
//! says so and the user opens the printed link.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How a link was (or was not) handed to a browser.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Opened {
    /// This command was started with the link (it runs on; a failure is said when it ends).
    Started(String),
    /// Nothing to start it with; the reason.
    NoBrowser(String),
}

/// Hands `url` to the first command of `$BROWSER` (a `:`-separated list; `%s` in a command
/// stands for the link, else the link is its last argument) that starts, else to `xdg-open`
/// when `$DISPLAY` or `$WAYLAND_DISPLAY` is set and it is on `$PATH`. The command runs in a
/// process group of its own, so the Ctrl-C that ends `hushtrace view` does not close the
/// browser it started, with its output discarded; a thread waits for it and says when it
/// failed.
pub(super) fn open(url: &str) -> Opened {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let mut tried = Vec::new();
    if let Some(list) = env("BROWSER") {
        for cmd in list.to_string_lossy().split(':') {
            let mut words = cmd.split_whitespace();
            let Some(program) = words.next() else {
                continue;
            };
            let mut args: Vec<String> = words.map(|w| w.replace("%s", url)).collect();
            if !cmd.contains("%s") {
                args.push(url.to_string());
            }
            if start(Path::new(program), &args) {
                return Opened::Started(program.to_string());
            }
            tried.push(program.to_string());
        }
    }
    if env("DISPLAY").is_none() && env("WAYLAND_DISPLAY").is_none() {
        return Opened::NoBrowser(match tried.is_empty() {
            true => "no $BROWSER and no display".to_string(),
            false => format!(
                "$BROWSER ({}) did not start, and no display",
                tried.join(", ")
            ),
        });
    }
    match on_path("xdg-open", env("PATH")) {
        Some(p) if start(&p, &[url.to_string()]) => Opened::Started("xdg-open".to_string()),
        Some(_) => Opened::NoBrowser("xdg-open did not start".to_string()),
        None => Opened::NoBrowser("no $BROWSER, and no xdg-open on $PATH".to_string()),
    }
}

/// Starts `program args...` detached from our terminal's signals; false if it cannot start.
fn start(program: &Path, args: &[String]) -> bool {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let name = program.display().to_string();
    std::thread::spawn(move || match child.wait() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!(
            "hushtrace: {name} ended with {s}: if no browser opened, open the link above in one"
        ),
        Err(e) => eprintln!("hushtrace: waiting for {name}: {e}"),
    });
    true
}

/// The executable `name` in the directories of `path`, if any.
fn on_path(name: &str, path: Option<OsString>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&path?)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
