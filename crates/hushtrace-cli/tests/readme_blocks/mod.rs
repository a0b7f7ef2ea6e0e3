//! The README's fenced code blocks, for the tests that run its commands
//! (`tests/readme.rs` here, `crates/hushtrace-c/tests/quick_start.rs` for the C and C++ ones).
//!
//! A shell block (` ```sh `) is run by `tests/readme.rs` unless the line just before it is a
//! marker `<!-- not run: REASON -->`; the reason says which test runs it instead, or why
//! nothing can (docs/CI.md, "The README's commands are tested").
#![allow(dead_code)] // each test binary uses some of it

use std::path::{Path, PathBuf};

/// One fenced block of the README.
#[derive(Debug, Clone)]
pub struct Block {
    /// 1-based line number of the opening fence.
    pub line: usize,
    /// The fence's info string (`sh`, `rust`, `text`, ...).
    pub lang: String,
    /// The `## ` section the block is in.
    pub section: String,
    /// The block's lines, each ending with a newline.
    pub text: String,
    /// The reason of a `<!-- not run: REASON -->` marker on the line before the fence.
    pub not_run: Option<String>,
}

impl Block {
    /// True for a shell block (`sh`, `bash`, `shell`, `console`).
    pub fn is_shell(&self) -> bool {
        matches!(self.lang.as_str(), "sh" | "bash" | "shell" | "console")
    }

    /// Where the block is, for a failure message.
    pub fn place(&self) -> String {
        format!("README.md:{} (section \"{}\")", self.line, self.section)
    }
}

/// The README as parsed: its blocks, and the markers that stand before no fence.
#[derive(Debug)]
pub struct Readme {
    /// Every fenced block, in order.
    pub blocks: Vec<Block>,
    /// `(line, text)` of each `<!-- not run ... -->` marker not directly before a fence.
    pub stray_markers: Vec<(usize, String)>,
}

const MARKER: &str = "<!-- not run";

/// The root of the workspace (the clone).
pub fn root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join(".ci/run").exists() {
        assert!(
            dir.pop(),
            "no workspace root above {}",
            env!("CARGO_MANIFEST_DIR")
        );
    }
    dir
}

/// The README's text.
pub fn text() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("read README.md")
}

/// The reason of a marker line, `None` when the line is no marker.
fn marker_reason(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix(MARKER)?;
    let rest = rest.strip_suffix("-->").unwrap_or(rest);
    Some(rest.trim_start_matches(':').trim().to_string())
}

/// Splits `readme` into its fenced blocks.
pub fn parse(readme: &str) -> Readme {
    let mut blocks = Vec::new();
    let mut stray_markers = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in readme.lines().enumerate() {
        if let Some(block) = open.as_mut() {
            if line.trim() == "```" {
                blocks.push(open.take().unwrap());
            } else {
                block.text.push_str(line);
                block.text.push('\n');
            }
            continue;
        }
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            open = Some(Block {
                line: i + 1,
                lang: lang.trim().to_string(),
                section: section.clone(),
                text: String::new(),
                not_run: pending.take().map(|(_, reason)| reason),
            });
            continue;
        }
        if let Some(stray) = pending.take() {
            stray_markers.push(stray);
        }
        if let Some(reason) = marker_reason(line) {
            pending = Some((i + 1, reason));
        } else if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_string();
        }
    }
    assert!(open.is_none(), "README ends inside a fenced block");
    stray_markers.extend(pending);
    Readme {
        blocks,
        stray_markers,
    }
}

/// The paths a marker's reason names (words with a `/` that end in `.rs`, `.sh` or `.py`),
/// relative to the clone's root.
pub fn named_files(reason: &str) -> Vec<PathBuf> {
    reason
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';'))
        .filter(|w| w.contains('/') && [".rs", ".sh", ".py"].iter().any(|x| w.ends_with(x)))
        .map(PathBuf::from)
        .collect()
}

/// The shell blocks whose marker names `test_file` (a path from the clone's root): those that
/// test runs.
pub fn run_by(readme: &Readme, test_file: &Path) -> Vec<Block> {
    readme
        .blocks
        .iter()
        .filter(|b| b.is_shell())
        .filter(|b| {
            b.not_run.as_deref().is_some_and(|r| {
                r.contains(" runs it") && named_files(r).iter().any(|f| f == test_file)
            })
        })
        .cloned()
        .collect()
}

/// `/tmp/...` and `/var/tmp/...` of a README command moved into `dir`, so that a test's run
/// neither meets an earlier run's files nor leaves any.
pub fn private_paths(command: &str, dir: &Path) -> String {
    let dir = dir.to_str().expect("a UTF-8 temporary directory");
    // In one pass: `dir` itself may be under /tmp.
    let mut out = String::new();
    let mut rest = command;
    while let Some(at) = rest.find("/tmp/") {
        let var = rest[..at].ends_with("/var");
        out.push_str(&rest[..at - if var { 4 } else { 0 }]);
        out.push_str(dir);
        out.push('/');
        rest = &rest[at + 5..];
    }
    out.push_str(rest);
    out
}
