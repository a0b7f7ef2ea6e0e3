#!/usr/bin/env python3
"""Entry point of the layering check (ARCHITECTURE.md, "Layers of the runtime" and "Checking").

The check itself is ci/layers-check, a Rust program that reads every crate with a real parser
(`syn`) and resolves paths (use trees, groups, aliases, globs, re-exports) before it builds the
module graph: no import cycle in any crate, the runtime's layer table in ARCHITECTURE.md equal
to the code's, the ring's keys minted only where ARCHITECTURE.md's "Who mints the ring's keys"
says, and the ring's atomics taken from crate::primitive. Its own tests (cargo test
--manifest-path ci/layers-check/Cargo.toml) show each of those checks failing on a bad edit.

Usage, from the repository root: ci/layers.py [SRC_DIR...]   (default: every crates/*/src)
Exit 0 when clean, 1 when a check fails, 2 when the checker cannot be built.
"""
import os
import pathlib
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
env = dict(os.environ, CARGO_TARGET_DIR=str(root / "target" / "layers-check"))
manifest = str(root / "ci" / "layers-check" / "Cargo.toml")
build = subprocess.run(
    ["cargo", "build", "--release", "--quiet", "--locked", "--manifest-path", manifest], env=env
)
if build.returncode != 0:
    print("ci/layers.py: cannot build ci/layers-check", file=sys.stderr)
    sys.exit(2)
exe = root / "target" / "layers-check" / "release" / "layers-check"
sys.exit(subprocess.run([str(exe)] + sys.argv[1:]).returncode)
