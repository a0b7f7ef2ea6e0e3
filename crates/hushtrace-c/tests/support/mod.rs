//! Building and running the C and C++ test programs of `tests/c/` with the system compiler
//! (`$CC`/`$CXX`, default `cc`/`c++`), against the `libhushtrace` of this test binary's
//! profile and target directory (built on first use with `cargo build -p hushtrace-c`, a
//! no-op when up to date: never a stale library after a runtime change).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// What `--print native-static-libs` says `libhushtrace.a` needs.
pub const STATIC_LIBS: &[&str] = &["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"];

/// The warnings every test program compiles clean with.
pub const WARN: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// The directory holding `libhushtrace.so` and `libhushtrace.a`.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = hushtrace_testsupport::cargo_build(
            &hushtrace_testsupport::test_profile_dir(),
            "hushtrace-c",
            hushtrace_testsupport::Artifact::Lib,
        );
        for f in ["libhushtrace.so", "libhushtrace.a"] {
            assert!(dir.join(f).exists(), "{} missing", dir.join(f).display());
        }
        // Programs linked with -lhushtrace need the library by its SONAME at run time (as
        // install.sh installs it): a link beside cargo's output.
        let soname = dir.join(soname());
        match std::os::unix::fs::symlink("libhushtrace.so", &soname) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => panic!("cannot link {}: {e}", soname.display()),
        }
        dir
    })
}

/// The SONAME `build.rs` gives the shared library: `libhushtrace.so.<ABI version>`.
pub fn soname() -> String {
    format!("libhushtrace.so.{}", env!("HUSHTRACE_C_ABI"))
}

/// `crates/hushtrace-c/include`.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// `crates/hushtrace-c/tests/c/<name>`.
pub fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// Where test programs go.
pub fn out_dir() -> PathBuf {
    let d = hushtrace_testsupport::test_profile_dir().join("hushtrace-c-tests");
    std::fs::create_dir_all(&d).expect("create test program dir");
    d
}

/// How a test program links the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `-lhushtrace` against `libhushtrace.so` (with an rpath).
    Shared,
    /// `libhushtrace.a` and its system libraries.
    Static,
    /// Nothing (an object file or a syntax check).
    None,
}

/// The compiler for `src`: C++ for `.cpp`.
fn compiler(src: &Path) -> (String, bool) {
    let cxx = src.extension().is_some_and(|e| e == "cpp");
    let var = if cxx { "CXX" } else { "CC" };
    let default = if cxx { "c++" } else { "cc" };
    (std::env::var(var).unwrap_or_else(|_| default.into()), cxx)
}

/// Runs the system compiler; panics with its output on failure.
pub fn cc(src: &Path, out: &Path, std: &str, link: Link, extra: &[&str]) {
    cc_with(&compiler(src).0, src, out, std, link, extra)
}

/// `clang` for C and `clang++` for C++ if clang is installed (`None` otherwise).
pub fn clang(src: &Path) -> Option<String> {
    let cxx = src.extension().is_some_and(|e| e == "cpp");
    let name = if cxx { "clang++" } else { "clang" };
    let ok = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| name.to_string())
}

/// [`cc`] with the given compiler.
pub fn cc_with(compiler: &str, src: &Path, out: &Path, std: &str, link: Link, extra: &[&str]) {
    let mut cmd = Command::new(compiler);
    cmd.arg(format!("-std={std}"))
        .args(WARN)
        .args(["-O2", "-g", "-pthread"])
        .arg("-I")
        .arg(include_dir())
        .args(extra)
        .arg(src)
        .arg("-o")
        .arg(out);
    match link {
        Link::Shared => {
            let l = lib_dir();
            cmd.arg("-L").arg(l).arg("-lhushtrace").arg("-ldl");
            cmd.arg(format!("-Wl,-rpath,{}", l.display()));
        }
        Link::Static => {
            cmd.arg(lib_dir().join("libhushtrace.a")).args(STATIC_LIBS);
        }
        Link::None => {}
    }
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {compiler} (set CC/CXX): {e}"));
    assert!(
        o.status.success(),
        "{compiler} {} failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Builds the test program `tests/c/<name>` (C99 for `.c`, C++17 for `.cpp`).
pub fn program(name: &str, link: Link) -> PathBuf {
    let src = source(name);
    let (_, cxx) = compiler(&src);
    program_std(name, link, if cxx { "c++17" } else { "c99" })
}

/// Builds the test program `tests/c/<name>` as the language standard `std`.
pub fn program_std(name: &str, link: Link, std: &str) -> PathBuf {
    let src = source(name);
    let stem = src.file_stem().unwrap().to_str().unwrap();
    let suffix = if link == Link::Static { "-static" } else { "" };
    let out = out_dir().join(format!("{stem}-{std}{suffix}"));
    cc(&src, &out, std, link, &[]);
    out
}

/// A trace directory the runtime accepts (private).
pub fn trace_dir(tag: &str) -> PathBuf {
    let d = super::common::temp_dir(&format!("c-{tag}"));
    std::fs::create_dir_all(&d).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// Runs a program without `HUSHTRACE_*` variables (but `vars`); returns its output.
pub fn run(exe: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("HUSHTRACE_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(vars.iter().copied());
    cmd.output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()))
}

/// Runs a program and asserts it exits 0; returns its stdout.
pub fn run_ok(exe: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    let o = run(exe, args, vars);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{} {args:?} failed ({:?}):\n{stdout}\n{}",
        exe.display(),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// The `key value` pairs of a program's summary line, e.g. `written 12 discarded 0`.
pub fn summary(line: &str, key: &str) -> i64 {
    let mut it = line.split_whitespace();
    while let Some(k) = it.next() {
        if k == key {
            return it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                panic!("no number after {key} in {line:?}");
            });
        }
    }
    panic!("no {key} in {line:?}")
}

/// Every metadata file of a trace, concatenated.
pub fn metadata(dir: &Path) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.path().join("metadata");
        if m.exists() {
            all.push_str(&std::fs::read_to_string(m).unwrap());
        }
    }
    all
}

/// The declared type (`int64_t`, `double`, ...) of the field `field` of every event class
/// named `name` in a metadata text.
pub fn field_types_of(meta: &str, name: &str, field: &str) -> Vec<String> {
    let needle = format!("name = \"{name}\";");
    let decl = format!(" _{field};");
    meta.split("event {")
        .filter(|b| b.contains(&needle))
        .filter_map(|b| {
            b.lines()
                .find(|l| l.trim_end().ends_with(&decl))
                .and_then(|l| l.split_whitespace().next())
                .map(str::to_string)
        })
        .collect()
}

/// The `model.emf.uri` (kind) of every event class named `name` in a metadata text.
pub fn kinds_of(meta: &str, name: &str) -> Vec<String> {
    let needle = format!("name = \"{name}\";");
    meta.split("event {")
        .filter(|b| b.contains(&needle))
        .filter_map(|b| {
            b.lines()
                .find(|l| l.contains("model.emf.uri"))
                .and_then(|l| l.split('"').nth(1))
                .map(str::to_string)
        })
        .collect()
}

/// Installs the header, the libraries and the pkg-config file under `prefix` with
/// `install.sh` (the library from [`lib_dir`]); asserts it succeeds.
pub fn install(prefix: &Path) {
    let o = Command::new("sh")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .arg("--prefix")
        .arg(prefix)
        .arg("--lib-dir")
        .arg(lib_dir())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
