//! Issue 30.8: the README's commands run as written. Every shell block is run here, in the
//! README's order, or says on the line before it which test runs it instead or why nothing can
//! (`<!-- not run: REASON -->`); the README names no commit. docs/CI.md describes the scheme.

mod common;
mod readme_blocks;

use common::BIN;
use readme_blocks::Block;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[test]
fn every_shell_block_is_run_or_says_why_not() {
    let readme = readme_blocks::parse(&readme_blocks::text());
    let root = readme_blocks::root();
    let mut problems = Vec::new();
    for (line, marker) in &readme.stray_markers {
        problems.push(format!(
            "README.md:{line}: marker `{marker}` is not on the line before a fence"
        ));
    }
    for b in &readme.blocks {
        if b.lang.is_empty() {
            problems.push(format!(
                "{}: a fence without a language (`sh` for commands, `text` for output)",
                b.place()
            ));
        }
        let Some(reason) = &b.not_run else { continue };
        if !b.is_shell() {
            problems.push(format!(
                "{}: a `not run` marker on a {} block",
                b.place(),
                b.lang
            ));
        }
        if reason.is_empty() {
            problems.push(format!("{}: `not run` without a reason", b.place()));
        }
        for f in readme_blocks::named_files(reason) {
            if !root.join(&f).is_file() {
                problems.push(format!(
                    "{}: names {}, which is missing",
                    b.place(),
                    f.display()
                ));
            }
        }
    }
    let run = readme
        .blocks
        .iter()
        .filter(|b| b.is_shell() && b.not_run.is_none());
    assert!(run.count() >= 5, "too few shell blocks run: {readme:#?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The README installs the `hushtrace` command before any text uses it (the demo's closing
/// hints and every later section run `hushtrace ...`).
#[test]
fn the_command_is_installed_before_the_text_uses_it() {
    let readme = readme_blocks::text();
    let install = readme
        .find("cargo install --path crates/hushtrace-cli")
        .expect("the README installs the command");
    let before = &readme[..install];
    for c in [
        "record",
        "convert",
        "report",
        "flamegraph",
        "recover",
        "ctl",
        "demo",
    ] {
        assert!(
            !before.contains(&format!("hushtrace {c}")),
            "`hushtrace {c}` is used before the README installs the command"
        );
    }
}

/// A word that looks like an abbreviated or full commit hash: 7 to 40 hexadecimal digits with
/// both a digit and a letter.
fn looks_like_a_commit(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word.bytes().all(|c| c.is_ascii_hexdigit())
        && word.bytes().any(|c| c.is_ascii_digit())
        && word.bytes().any(|c| c.is_ascii_alphabetic())
}

#[test]
fn the_readme_names_no_commit() {
    assert!(looks_like_a_commit("05e7c50") && !looks_like_a_commit("1000000"));
    let readme = readme_blocks::text();
    let found: Vec<(usize, &str)> = readme
        .lines()
        .enumerate()
        .flat_map(|(i, l)| {
            l.split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| looks_like_a_commit(w))
                .map(move |w| (i + 1, w))
        })
        .collect();
    assert!(
        found.is_empty(),
        "commit hashes in the README (dated figures go to docs/PERFORMANCE.md): {found:?}"
    );
}

/// `cargo`, first on the blocks' `PATH`: `cargo install --path crates/hushtrace-cli` links the
/// `hushtrace` binary cargo built for this test into `$HOME/.cargo/bin` (a release build and
/// install into the real home would take minutes and change the machine); any other
/// `cargo install` is refused; everything else goes to the real cargo.
fn cargo_shim(dir: &Path) {
    let real = Path::new(env!("CARGO"));
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$1 $2 $3\" = 'install --path crates/hushtrace-cli' ] && [ $# = 3 ]; then\n\
         \x20   mkdir -p \"$HOME/.cargo/bin\" && exec ln -sf '{bin}' \"$HOME/.cargo/bin/hushtrace\"\n\
         fi\n\
         if [ \"$1\" = install ]; then\n\
         \x20   echo \"readme test: cargo $*: only 'cargo install --path crates/hushtrace-cli' is known\" >&2\n\
         \x20   exit 1\n\
         fi\n\
         PATH='{real_dir}':\"$PATH\" exec '{real}' \"$@\"\n",
        bin = BIN,
        real_dir = real.parent().unwrap().display(),
        real = real.display(),
    );
    let shim = dir.join("cargo");
    std::fs::write(&shim, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The blocks' `PATH`: the cargo shim, the private `$HOME/.cargo/bin`, then this `PATH`
/// without any directory that holds a `hushtrace` (so only the README's install provides it).
fn blocks_path(shim: &Path, home: &Path) -> OsString {
    let outer = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![shim.to_path_buf(), home.join(".cargo/bin")];
    dirs.extend(std::env::split_paths(&outer).filter(|d| !d.join("hushtrace").exists()));
    std::env::join_paths(dirs).unwrap()
}

/// Runs `script` with `bash -e` from the clone's root in a process group of its own (killed
/// afterwards, with anything the block left running); returns its exit status and its output.
fn run_block(
    script: &str,
    env: &[(&str, OsString)],
    log: &Path,
) -> (std::process::ExitStatus, String) {
    let out = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new("timeout");
    // Against a hang only (a block of the README takes seconds).
    cmd.args(["--kill-after=10", "900", "bash", "-e", "-c", script])
        .current_dir(readme_blocks::root())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .env_remove("CARGO_TARGET_DIR")
        .process_group(0);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run timeout and bash");
    let status = child.wait().unwrap();
    // SAFETY: signals the process group this test created for the block; nothing else is in it.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    (status, std::fs::read_to_string(log).unwrap_or_default())
}

/// Every shell block without a `not run` marker, in the README's order, in one private
/// environment: `HOME` and `/tmp` paths in a temporary directory, the `hushtrace` command on
/// `PATH` only once the README installed it.
#[test]
fn readme_commands_run() {
    let readme = readme_blocks::parse(&readme_blocks::text());
    let blocks: Vec<&Block> = readme
        .blocks
        .iter()
        .filter(|b| b.is_shell() && b.not_run.is_none())
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let (shim, home, files) = (
        tmp.path().join("shim"),
        tmp.path().join("home"),
        tmp.path().join("files"),
    );
    for d in [&shim, &home, &files] {
        std::fs::create_dir(d).unwrap();
    }
    cargo_shim(&shim);
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let var_or =
        |k: &str, default: PathBuf| std::env::var_os(k).unwrap_or(default.into_os_string());
    let env = [
        ("PATH", blocks_path(&shim, &home)),
        ("HOME", home.clone().into_os_string()),
        ("CARGO_HOME", var_or("CARGO_HOME", real_home.join(".cargo"))),
        (
            "RUSTUP_HOME",
            var_or("RUSTUP_HOME", real_home.join(".rustup")),
        ),
    ];
    for b in &blocks {
        let script = readme_blocks::private_paths(&b.text, &files);
        let (status, output) = run_block(
            &script,
            &env,
            &tmp.path().join(format!("block-{}.log", b.line)),
        );
        assert!(
            status.success(),
            "{} failed ({status}):\n--- the block, as run ---\n{script}--- its output ---\n{output}",
            b.place()
        );
    }
    // The blocks ran where they were meant to: the demo's files are in the private /tmp.
    for f in ["hushtrace-demo/trace.json", "hushtrace-demo/flame.svg"] {
        assert!(files.join(f).is_file(), "no {f} in {}", files.display());
    }
}
