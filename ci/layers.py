#!/usr/bin/env python3
"""Fails when a module of a hushtrace crate imports a module that (transitively) imports it
back: every crate is built in layers (ARCHITECTURE.md, "Layers"), each module importing only
lower ones.

Every crate's `src` is read (`crates/*/src`), each on its own: a module's imports are the
`crate::<name>` paths in its file(s) (`src/<name>.rs`, or `src/<name>/**.rs`), comments and
doc comments excluded; `crate::<item>` paths that name no module (re-exports at the crate
root) are not followed. Prints each crate's layers (longest path from the bottom), the
runtime's first, for ARCHITECTURE.md.

Usage: ci/layers.py [SRC_DIR...]   (default: every crates/*/src)
"""
import pathlib
import re
import sys

USES = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
GROUP = re.compile(r"\buse\s+crate::\{([^}]*)\}")


def module_deps(root):
    """{module: [modules it imports]} for the crate whose sources are in `root`."""
    modules = {}
    for p in sorted(root.iterdir()):
        if p.suffix == ".rs" and p.stem not in ("lib", "main"):
            modules.setdefault(p.stem, []).append(p)
        elif p.is_dir():
            modules.setdefault(p.name, []).extend(sorted(p.rglob("*.rs")))
    deps = {}
    for name, files in modules.items():
        found = set()
        for f in files:
            text = "\n".join(
                line for line in f.read_text().splitlines()
                if not line.lstrip().startswith("//")
            )
            found.update(USES.findall(text))
            for g in GROUP.findall(text):
                found.update(x.strip().split("::")[0] for x in g.split(",") if x.strip())
        deps[name] = sorted(d for d in found if d in modules and d != name)
    return deps


def cycles_of(deps):
    """Import cycles, each as a path that ends where it starts (depth-first search)."""
    white, grey, black = 0, 1, 2
    color = {m: white for m in deps}
    cycles = []

    def visit(m, stack):
        color[m] = grey
        stack.append(m)
        for d in deps[m]:
            if color[d] == grey:
                cycles.append(stack[stack.index(d):] + [d])
            elif color[d] == white:
                visit(d, stack)
        stack.pop()
        color[m] = black

    for m in sorted(deps):
        if color[m] == white:
            visit(m, [])
    return cycles


def layers_of(deps):
    """{module: layer}: 0 for a module importing none, else 1 + its highest import's."""
    level = {}

    def depth(m):
        if m not in level:
            level[m] = 1 + max((depth(d) for d in deps[m]), default=-1)
        return level[m]

    for m in deps:
        depth(m)
    return level


def main(args):
    if args:
        roots = [pathlib.Path(a) for a in args]
    else:
        runtime = pathlib.Path("crates/hushtrace/src")
        roots = [runtime] + sorted(
            p for p in pathlib.Path("crates").glob("*/src") if p.is_dir() and p != runtime
        )
    failed = False
    for root in roots:
        deps = module_deps(root)
        crate = root.parent.name
        cycles = cycles_of(deps)
        if cycles:
            failed = True
            print(f"{crate}: import cycles (a module imports one that imports it back):")
            for c in cycles:
                print("  " + " -> ".join(c))
            continue
        level = layers_of(deps)
        print(f"{crate}: no import cycles among {len(deps)} modules")
        for lv in range(max(level.values(), default=-1) + 1):
            print(f"  layer {lv}: " + ", ".join(sorted(m for m in level if level[m] == lv)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
