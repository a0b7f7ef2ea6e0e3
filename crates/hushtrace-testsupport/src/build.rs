//! Building a workspace package's programs with the profile and target directory of the test
//! that needs them: cargo builds only a package's own targets for its tests, an up-to-date
//! build is a no-op, and a program is never stale after a change to what it links.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What [`cargo_build`] builds of a package.
#[derive(Debug, Clone, Copy)]
pub enum Artifact<'a> {
    /// One binary (`--bin NAME`): `<profile-dir>/NAME`.
    Bin(&'a str),
    /// Every binary (`--bins`): the profile directory.
    Bins,
    /// One example (`--example NAME`): `<profile-dir>/examples/NAME`.
    Example(&'a str),
    /// The library (`--lib`): the profile directory.
    Lib,
}

/// `<target-dir>/[<triple>/]<profile-dir>` of the running test binary (which is in its
/// `deps/`).
pub fn test_profile_dir() -> PathBuf {
    let mut dir = std::env::current_exe().expect("test exe path");
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Runs `cargo build --quiet -p PACKAGE` for `what` into `profile_dir`
/// (`<target-dir>/[<triple>/]<profile-dir>`, as [`test_profile_dir`] or the parent of a
/// `CARGO_BIN_EXE_*` gives it), with that directory's profile, target directory and (for a
/// `--target` build) triple. Returns where `what` is; panics, quoting cargo, when the build
/// fails or does not make it.
pub fn cargo_build(profile_dir: &Path, package: &str, what: Artifact<'_>) -> PathBuf {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other, // "release" or a custom profile's name
        None => panic!("unexpected build directory {}", profile_dir.display()),
    };
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--quiet", "-p", package])
        .args(["--profile", profile]);
    let path = match what {
        Artifact::Bin(name) => {
            cmd.args(["--bin", name]);
            profile_dir.join(name)
        }
        Artifact::Bins => {
            cmd.arg("--bins");
            profile_dir.to_path_buf()
        }
        Artifact::Example(name) => {
            cmd.args(["--example", name]);
            profile_dir.join("examples").join(name)
        }
        Artifact::Lib => {
            cmd.arg("--lib");
            profile_dir.to_path_buf()
        }
    };
    let parent = profile_dir.parent().expect("target dir");
    if parent.join("CACHEDIR.TAG").exists() {
        cmd.arg("--target-dir").arg(parent);
    } else {
        // <target-dir>/<triple>/<profile-dir>: a --target build.
        cmd.arg("--target").arg(parent.file_name().expect("triple"));
        cmd.arg("--target-dir")
            .arg(parent.parent().expect("target dir"));
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run cargo build -p {package}: {e}"));
    assert!(
        out.status.success() && path.exists(),
        "could not build {} ({what:?} of {package}): {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    path
}
