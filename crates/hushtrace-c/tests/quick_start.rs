//! Issue 20.5: the README's C quick start, built as the README says — installed with
//! `install.sh` under a prefix outside the loader's default paths, compiled with
//! `cc app.c $(pkg-config --cflags --libs hushtrace)` — runs as it is, without
//! `LD_LIBRARY_PATH`; the installed library has a versioned SONAME and file names and its
//! debug info split off.

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap()
}

/// The first fenced block of `lang` in the README section `heading`.
fn block(readme: &str, heading: &str, lang: &str) -> String {
    let section = readme
        .split(&format!("\n## {heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("README has no section {heading}"));
    let start = section
        .find(&format!("```{lang}\n"))
        .unwrap_or_else(|| panic!("no {lang} block in {heading}"));
    let code = &section[start + lang.len() + 4..];
    code[..code.find("```").unwrap()].to_string()
}

fn objdump(args: &[&str], file: &Path) -> String {
    let o = Command::new("objdump")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn readme_c_quick_start_runs_from_a_private_prefix() {
    if !have("pkg-config", "--version") || !have("objdump", "--version") {
        panic!("pkg-config and binutils are required (apt-get install pkg-config binutils)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    support::install(&prefix);

    // Versioned names and the SONAME programs record.
    let lib = prefix.join("lib");
    let soname = support::soname();
    let version = env!("CARGO_PKG_VERSION");
    let real = lib.join(format!("libhushtrace.so.{version}"));
    assert!(real.is_file() && !real.is_symlink(), "{}", real.display());
    for (link, to) in [
        ("libhushtrace.so", soname.clone()),
        (soname.as_str(), format!("libhushtrace.so.{version}")),
    ] {
        if link == to {
            continue;
        }
        let target = std::fs::read_link(lib.join(link)).unwrap();
        assert_eq!(target, PathBuf::from(&to), "{link}");
    }
    let dynamic = objdump(&["-p"], &real);
    assert!(
        dynamic
            .lines()
            .any(|l| l.split_whitespace().eq(["SONAME", soname.as_str()])),
        "{dynamic}"
    );
    // Debug info split off, the link to it kept.
    let sections = objdump(&["-h"], &real);
    assert!(!sections.contains(".debug_info"), "{sections}");
    assert!(sections.contains(".gnu_debuglink"), "{sections}");
    let debug = lib.join(format!("debug/libhushtrace.so.{version}.debug"));
    assert!(objdump(&["-h"], &debug).contains(".debug_info"));

    // The README's program and command, in a directory of its own; the trace goes to a
    // private directory instead of /tmp/trace.
    let readme = readme();
    let trace = tmp.path().join("trace");
    let app = block(&readme, "C and C++", "c").replace("/tmp/trace", trace.to_str().unwrap());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("app.c"), app).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("`cc app.c "))
        .expect("README's C build command");
    let cmd = line
        .trim_matches('`')
        .split(" && babeltrace2")
        .next()
        .unwrap();
    assert_eq!(
        cmd, "cc app.c $(pkg-config --cflags --libs hushtrace) && ./a.out",
        "README's command changed: update this test"
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(&work)
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{cmd}: {out}{err}");
    assert!(out.contains("written"), "{out}");
    assert!(trace.is_dir(), "no trace in {}", trace.display());
    // The program loads the installed library by its SONAME.
    let needed = objdump(&["-p"], &work.join("a.out"));
    assert!(
        needed
            .lines()
            .any(|l| l.split_whitespace().eq(["NEEDED", soname.as_str()])),
        "{needed}"
    );
}

/// A system prefix gets no rpath (the loader's cache finds it, after `ldconfig`, which the
/// README and the script's last line say); installing it under DESTDIR stages the same files.
#[test]
fn a_system_prefix_gets_no_rpath_and_the_readme_says_ldconfig() {
    if !have("pkg-config", "--version") || !have("objdump", "--version") {
        panic!("pkg-config and binutils are required (apt-get install pkg-config binutils)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new("sh")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
        .args(["--prefix", "/usr/local", "--lib-dir"])
        .arg(support::lib_dir())
        .env("DESTDIR", tmp.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("ldconfig"), "{out}");
    let pc =
        std::fs::read_to_string(tmp.path().join("usr/local/lib/pkgconfig/hushtrace.pc")).unwrap();
    assert!(!pc.contains("rpath"), "{pc}");
    assert!(pc.contains("prefix=/usr/local\n"), "{pc}");
    assert!(readme().contains("sudo sh crates/hushtrace-c/install.sh --prefix /usr/local"));
}
