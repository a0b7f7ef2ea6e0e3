//! Issue 20.5: the README's C quick start, built as the README says — installed with
//! `install.sh` under a prefix outside the loader's default paths, compiled with
//! `cc app.c $(pkg-config --cflags --libs hushtrace)` — runs as it is, without
//! `LD_LIBRARY_PATH`; the installed library has a versioned SONAME and file names and its
//! debug info split off. Issue 30.8: the README's C and C++ shell blocks marked
//! `<!-- not run: crates/hushtrace-c/tests/quick_start.rs runs it -->` are run here, as they
//! are, one after the other in one shell.

#[path = "../../hushtrace/tests/common/mod.rs"]
mod common;
#[path = "../../hushtrace-cli/tests/readme_blocks/mod.rs"]
mod readme_blocks;
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
    readme_blocks::text()
}

/// The first fenced block of `lang` in the README section `heading`.
fn block(readme: &str, heading: &str, lang: &str) -> String {
    readme_blocks::parse(readme)
        .blocks
        .into_iter()
        .find(|b| b.section == heading && b.lang == lang)
        .unwrap_or_else(|| panic!("no {lang} block in README section {heading}"))
        .text
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

/// The README's C and C++ commands as one script: the install runs from the clone's root
/// with `--lib-dir` (this test's build of the library, not a release build), the compilers in
/// `work` where `app.c` and `app.cpp` are.
fn quick_start_script(readme: &str, work: &Path, files: &Path) -> String {
    let blocks = readme_blocks::run_by(
        &readme_blocks::parse(readme),
        Path::new("crates/hushtrace-c/tests/quick_start.rs"),
    );
    let all: String = blocks.iter().map(|b| b.text.as_str()).collect();
    for needed in [
        "sh crates/hushtrace-c/install.sh --prefix $HOME/.local\n",
        "cc app.c $(pkg-config --cflags --libs hushtrace) && ./a.out",
        "c++ -std=c++17 app.cpp $(pkg-config --cflags --libs hushtrace)",
    ] {
        assert!(
            all.contains(needed),
            "no README block marked for this test runs `{needed}`: update this test\n{all}"
        );
    }
    let lib = support::lib_dir().to_str().unwrap().to_string();
    let mut script = String::new();
    for b in &blocks {
        let text = readme_blocks::private_paths(&b.text, files);
        if text.contains("crates/hushtrace-c/install.sh ") {
            script.push_str(&format!("cd '{}'\n", readme_blocks::root().display()));
            script.push_str(&text.replace(
                "crates/hushtrace-c/install.sh ",
                &format!("crates/hushtrace-c/install.sh --lib-dir '{lib}' "),
            ));
        } else {
            script.push_str(&format!("cd '{}'\n", work.display()));
            script.push_str(&text);
        }
    }
    script
}

#[test]
fn readme_c_quick_start_runs_from_a_private_prefix() {
    if !have("pkg-config", "--version") || !have("objdump", "--version") {
        panic!("pkg-config and binutils are required (apt-get install pkg-config binutils)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (work, files) = (tmp.path().join("work"), tmp.path().join("files"));
    for d in [&home, &work, &files] {
        std::fs::create_dir(d).unwrap();
    }
    // The README's programs and commands, the trace in a private directory instead of
    // /tmp/trace.
    let readme = readme();
    for (file, lang) in [("app.c", "c"), ("app.cpp", "cpp")] {
        let code = readme_blocks::private_paths(&block(&readme, "C and C++", lang), &files);
        std::fs::write(work.join(file), code).unwrap();
    }
    let script = quick_start_script(&readme, &work, &files);
    let o = Command::new("bash")
        .args(["-e", "-c", &script])
        .env("HOME", &home)
        .env_remove("PKG_CONFIG_PATH")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("HUSHTRACE_OUTPUT")
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success(),
        "--- script ---\n{script}--- output ---\n{out}{err}"
    );
    assert!(out.contains("written"), "{out}");
    let trace = files.join("trace");
    assert!(trace.is_dir(), "no trace in {}", trace.display());
    // Both programs traced into it (the C++ one from the environment).
    let processes = std::fs::read_dir(&trace)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("metadata").is_file())
        .count();
    assert_eq!(processes, 2, "{}", trace.display());

    // Versioned names and the SONAME programs record.
    let prefix = home.join(".local");
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

    // The program (the C++ one, built last) loads the installed library by its SONAME.
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
