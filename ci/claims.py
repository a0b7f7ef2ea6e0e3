#!/usr/bin/env python3
"""Checks ARCHITECTURE.md's "every X does Y" claims that no other check covers.

ci/layers.py checks the layers, the key minters and the ring's atomics; clippy checks that
every `unsafe` block has a `// SAFETY:` comment and, in the hot-path modules, the methods
crates/hushtrace/clippy.toml denies (ci/lint-probe.sh shows each entry firing). This script
checks the rest:

1. "platform: every `asm!` and every `cfg(target_os/arch)` but tracedir/direct.rs's": in
   crates/hushtrace/src, outside platform/, no non-test file uses `asm!`, and none but
   tracedir/direct.rs a `target_os`/`target_arch` cfg.
2. "the hot-path modules (...) deny the methods clippy.toml lists": every module the sentence
   "None of these is reachable from a tracepoint: the hot-path modules (...)" names, and every
   file under ring/ but the consumer's live reads (flush.rs, snapshot.rs) and the unit tests,
   carries `#![deny(clippy::disallowed_methods)]`, so a producer method added anywhere in the
   ring is linted.
3. "a packet header is written and read only through `PacketHeader`": the CTF packet magic
   appears, as a number, only in hushtrace-ctf's layout (and in tests), so no other code
   writes or parses packet headers by hand.

Usage, from the repository root: ci/claims.py [--self-test]. Exit 0 when clean, 1 when a claim
fails (each failure names the file and the claim). --self-test copies the tree to a temporary
directory, breaks each claim once and expects a failure naming it.
"""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

RT = pathlib.Path("crates/hushtrace/src")
HOT_SENTENCE = re.compile(r"None of these is reachable from a\s+tracepoint: the hot-path modules \(([^)]*)\)")
DENY = "#![deny(clippy::disallowed_methods)]"
# The one file ARCHITECTURE.md names as holding target cfgs outside platform/ (O_DIRECT is
# Linux file I/O, which does not go through platform).
CFG_EXCEPTIONS = {"tracedir/direct.rs"}
RING_NOT_HOT = {"flush.rs", "snapshot.rs", "tests.rs"}
MAGIC = re.compile(r"0x_?c1_?fc_?1f_?c1", re.IGNORECASE)


def is_test_file(p: pathlib.Path) -> bool:
    return p.name == "tests.rs" or "tests" in p.parts[:-1]


def strip_comments(text: str) -> str:
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def check(root: pathlib.Path) -> list:
    errors = []
    rt = root / RT
    # 1. asm! and target cfgs only in platform/.
    for p in sorted(rt.rglob("*.rs")):
        rel = p.relative_to(rt)
        if rel.parts[0] == "platform" or is_test_file(rel):
            continue
        if str(rel) in CFG_EXCEPTIONS:
            if "asm!" in strip_comments(p.read_text()):
                errors.append(f"{RT / rel}: asm! outside platform/")
            continue
        code = strip_comments(p.read_text())
        if "asm!" in code or re.search(r"target_(os|arch)\s*=", code):
            errors.append(f"{RT / rel}: asm! or a target_os/target_arch cfg outside platform/ "
                          "(ARCHITECTURE.md: platform holds every asm! and cfg(target_os/arch))")
    # 2. the hot-path modules carry the lint.
    arch = (root / "ARCHITECTURE.md").read_text()
    m = HOT_SENTENCE.search(arch)
    if not m:
        errors.append("ARCHITECTURE.md: the sentence listing the hot-path modules is gone")
        return errors
    names = re.findall(r"`([^`]+)`", m.group(1))
    files = []
    for n in names:
        if n.endswith("/"):
            continue  # "ring/" is checked file by file below
        f = rt / (n if n.endswith(".rs") else n + ".rs")
        if not f.exists():
            errors.append(f"ARCHITECTURE.md names hot-path module `{n}`, but {f.relative_to(root)} does not exist")
            continue
        files.append(f)
    files += [p for p in sorted((rt / "ring").glob("*.rs")) if p.name not in RING_NOT_HOT]
    for f in files:
        if DENY not in f.read_text():
            errors.append(f"{f.relative_to(root)}: a hot-path module without {DENY} "
                          "(ARCHITECTURE.md: the hot-path modules deny clippy.toml's methods)")
    # 3. the packet magic only in hushtrace-ctf's layout.
    for p in sorted((root / "crates").rglob("*.rs")):
        rel = p.relative_to(root)
        if "target" in rel.parts or "tests" in rel.parts or "benches" in rel.parts or is_test_file(rel):
            continue
        if rel.parts[:4] == ("crates", "hushtrace-ctf", "src", "layout.rs") or \
                rel.parts[:4] == ("crates", "hushtrace-ctf", "src", "layout"):
            continue
        if MAGIC.search(strip_comments(p.read_text())):
            errors.append(f"{rel}: the CTF packet magic outside hushtrace-ctf's layout "
                          "(ARCHITECTURE.md: packet headers are written and read through PacketHeader)")
    return errors


def self_test() -> int:
    root = pathlib.Path.cwd()
    edits = [
        ("crates/hushtrace/src/session.rs", "\n#[cfg(target_os = \"linux\")]\nconst _X: u8 = 0;\n",
         "outside platform/"),
        ("crates/hushtrace/src/ring/reserve.rs", None, "a hot-path module without"),
        ("crates/hushtrace-kernel/src/capture.rs", "\nconst _M: u32 = 0xC1FC_1FC1;\n",
         "packet magic outside"),
    ]
    failed = 0
    for path, append, expect in edits:
        with tempfile.TemporaryDirectory() as tmp:
            t = pathlib.Path(tmp)
            shutil.copy(root / "ARCHITECTURE.md", t / "ARCHITECTURE.md")
            shutil.copytree(root / "crates", t / "crates",
                            ignore=shutil.ignore_patterns("target", "*.so", "*.a", ".venv"))
            f = t / path
            text = f.read_text()
            f.write_text(text + append if append is not None else text.replace(DENY, ""))
            errs = check(t)
            if not any(expect in e for e in errs):
                print(f"claims self-test: breaking {path} was not caught (expected '{expect}')")
                failed += 1
            else:
                print(f"claims self-test: breaking {path} caught")
    if check(root):
        print("claims self-test: the clean tree fails")
        failed += 1
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    errors = check(pathlib.Path.cwd())
    for e in errors:
        print(e)
    if not errors:
        print("ci/claims.py: ARCHITECTURE.md's every-X claims hold")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
