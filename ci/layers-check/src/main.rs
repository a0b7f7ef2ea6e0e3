//! `layers-check [SRC_DIR...]`, run from the repository root (default: every `crates/*/src`,
//! with the runtime's documentation and contract checks). Exit 0 when clean, 1 otherwise.

fn main() {
    let roots: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let (report, ok) = layers_check::run(std::path::Path::new("."), &roots);
    print!("{report}");
    std::process::exit(if ok { 0 } else { 1 });
}
