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


RUNTIME = pathlib.Path("crates/hushtrace/src")
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([a-z_][a-z0-9_]*)`\s*\|")
# Where the ring's keys may be minted (module names of crates/hushtrace/src).
MINTS = {
    "ProducerKey::new": {"write", "state", "nosyscall", "thread", "ctx"},
    "ConsumerKey::new": {"consumer"},
}


def documented_layers(doc):
    """{module: layer} from the runtime's layer table in ARCHITECTURE.md."""
    text = doc.read_text()
    start = text.find("## Layers of the runtime")
    if start < 0:
        return None
    end = text.find("\n## ", start + 1)
    table = {}
    for line in text[start:end if end > 0 else None].splitlines():
        m = ROW.match(line)
        if m:
            table[m.group(2)] = int(m.group(1))
    return table


def check_doc(deps, level, doc):
    """Problems between the code's layers and ARCHITECTURE.md's table."""
    table = documented_layers(doc)
    if table is None:
        return [f"{doc}: no '## Layers of the runtime' section"]
    problems = []
    for m in sorted(set(level) - set(table)):
        problems.append(f"module `{m}` (layer {level[m]}) is missing from the table")
    for m in sorted(set(table) - set(level)):
        problems.append(f"the table names `{m}`, which is not a module of {RUNTIME}")
    for m in sorted(set(table) & set(level)):
        if table[m] != level[m]:
            up = max(deps[m], key=lambda d: level[d], default=None)
            why = f" (it imports `{up}`, layer {level[up]})" if up else " (it imports nothing)"
            problems.append(f"`{m}` is at layer {table[m]} in the table, {level[m]} in the code{why}")
    return problems


def strip_comments(text):
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))


def module_of(root, f):
    rel = f.relative_to(root)
    return rel.parts[0][:-3] if len(rel.parts) == 1 else rel.parts[0]


def check_contracts(root):
    """Key mints outside their modules; direct std atomics in the ring."""
    problems = []
    for f in sorted(root.rglob("*.rs")):
        text = strip_comments(f.read_text())
        mod = module_of(root, f)
        for mint, allowed in MINTS.items():
            if mint in text and mod not in allowed and mod != "ring":
                problems.append(f"{f}: mints `{mint}` (allowed in: {', '.join(sorted(allowed))})")
        if mod == "ring" and re.search(r"\b(std|core)::sync::atomic\b", text):
            problems.append(f"{f}: uses std atomics directly (take them from crate::primitive)")
    for f in sorted((root / "ring").rglob("*.rs")) + [root / "ring.rs"]:
        text = strip_comments(f.read_text())
        # In ring.rs itself only the unit tests may mint (they play both sides).
        body = text.split("#[cfg(test)]", 1)[0]
        for mint in MINTS:
            if re.search(r"\b" + re.escape(mint) + r"\(\)", body):
                problems.append(f"{f}: mints `{mint}` outside its unit tests")
    return problems


def main(args):
    if args:
        roots = [pathlib.Path(a) for a in args]
    else:
        roots = [RUNTIME] + sorted(
            p for p in pathlib.Path("crates").glob("*/src") if p.is_dir() and p != RUNTIME
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
        if not args and root == RUNTIME:
            problems = check_doc(deps, level, pathlib.Path("ARCHITECTURE.md"))
            if problems:
                failed = True
                print("ARCHITECTURE.md's layer table differs from the code:")
                for p in problems:
                    print("  " + p)
            problems = check_contracts(root)
            if problems:
                failed = True
                print("contracts of the ring broken:")
                for p in problems:
                    print("  " + p)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
