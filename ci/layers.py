#!/usr/bin/env python3
"""Fails when a module of the hushtrace runtime imports a module that (transitively) imports it
back: the runtime is built in layers (ARCHITECTURE.md, "Layers"), each module importing only
lower ones.

A module's imports are the `crate::<name>` paths in its file(s) (`src/<name>.rs`, or
`src/<name>/**.rs`), doc comments excluded. Usage: ci/layers.py [crates/hushtrace/src]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "crates/hushtrace/src")
modules = {}
for p in sorted(root.iterdir()):
    if p.suffix == ".rs" and p.stem not in ("lib", "main"):
        modules[p.stem] = [p]
    elif p.is_dir():
        files = sorted(p.rglob("*.rs"))
        modules.setdefault(p.name, []).extend(files)

uses = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
group = re.compile(r"\buse\s+crate::\{([^}]*)\}")
deps = {}
for name, files in modules.items():
    found = set()
    for f in files:
        text = "\n".join(
            line for line in f.read_text().splitlines()
            if not line.lstrip().startswith(("//", "///", "//!"))
        )
        found.update(uses.findall(text))
        for g in group.findall(text):
            found.update(x.strip().split("::")[0] for x in g.split(",") if x.strip())
    deps[name] = sorted(d for d in found if d in modules and d != name)

# Find cycles with a depth-first search; report each as a path.
WHITE, GREY, BLACK = 0, 1, 2
color = {m: WHITE for m in deps}
cycles = []


def visit(m, stack):
    color[m] = GREY
    stack.append(m)
    for d in deps[m]:
        if color[d] == GREY:
            cycles.append(stack[stack.index(d):] + [d])
        elif color[d] == WHITE:
            visit(d, stack)
    stack.pop()
    color[m] = BLACK


for m in sorted(deps):
    if color[m] == WHITE:
        visit(m, [])

if cycles:
    print("import cycles in the runtime (a module imports one that imports it back):")
    for c in cycles:
        print("  " + " -> ".join(c))
    sys.exit(1)

# Print the layers (longest path from the bottom) for ARCHITECTURE.md.
level = {}


def depth(m):
    if m not in level:
        level[m] = 1 + max((depth(d) for d in deps[m]), default=-1)
    return level[m]


for m in deps:
    depth(m)
for lv in range(max(level.values()) + 1):
    print(f"layer {lv}: " + ", ".join(sorted(m for m in level if level[m] == lv)))
print(f"no import cycles among {len(deps)} runtime modules")
