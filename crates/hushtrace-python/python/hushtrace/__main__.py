"""``python -m hushtrace run [options] (script.py | -m module) [args...]``: run a Python
program with every function call traced (like ``viztracer script.py``); its child processes
(``fork``, ``multiprocessing`` with any start method, ``subprocess`` running Python) are
traced into the same session directory.

As with ``python``, everything after the script or ``-m MODULE`` belongs to the program:
``python -m hushtrace run -o t -m black -q -`` runs ``black -q -``.

``python -m hushtrace view DIR [--port N] [--no-browser]`` opens a trace in the Perfetto UI:
it runs the hushtrace command's ``view`` (``$HUSHTRACE_CLI``, else ``hushtrace`` on ``PATH``)."""

import argparse
import os
import runpy
import sys

USAGE = """python -m hushtrace run [-o DIR] [--force | --append] [--mode discard|overwrite]
                           [--c-calls] [--include GLOB]... [--exclude GLOB]...
                           [--include-files GLOB]... [--exclude-files GLOB]...
                           [--ignore-frozen]
                           [--max-stack-depth N] [--gc] [--no-exceptions] [--no-children]
                           (script.py | -m module) [args...]"""

DEFAULT_OUTPUT = "hushtrace-trace"
STATS_SUFFIX = ".stats.json"  # hushtrace_ctf::layout::STATS_SUFFIX
METADATA_FILE = "metadata"  # hushtrace_ctf::layout::METADATA_FILE


def _run_parser():
    r = argparse.ArgumentParser(
        prog="python -m hushtrace run",
        usage=USAGE,
        description="Run a Python program, tracing every call. Options after the script or "
        "-m MODULE are the program's.",
    )
    r.add_argument("-o", "--output", default=DEFAULT_OUTPUT, metavar="DIR",
                   help="session directory (default: %(default)s)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true",
                      help="replace the trace already in the output directory (its process "
                      "directories and statistics files; nothing else is touched)")
    mode.add_argument("--append", action="store_true",
                      help="add this run's processes to the trace already in the output "
                      "directory")
    r.add_argument("--mode", choices=("discard", "overwrite"), default=None,
                   help="discard new events when a buffer is full, or overwrite the oldest "
                   "(default: discard, or $HUSHTRACE_MODE)")
    r.add_argument("--c-calls", action="store_true",
                   help="also record builtin (C) calls (default: off)")
    r.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="trace only functions whose module or module.qualname matches "
                   "(repeatable; default: every function)")
    r.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="do not trace functions whose module or module.qualname matches "
                   "(repeatable; default: none)")
    r.add_argument("--include-files", action="append", default=[], metavar="GLOB",
                   help="trace only Python functions whose file (co_filename, or its absolute "
                   "path; * matches /) matches (repeatable; default: every file)")
    r.add_argument("--exclude-files", action="append", default=[], metavar="GLOB",
                   help="do not trace Python functions whose file matches (repeatable; "
                   "default: none)")
    r.add_argument("--ignore-frozen", action="store_true",
                   help="do not trace functions of frozen modules (file <frozen ...>: the "
                   "import machinery, and stdlib modules frozen by CPython 3.11+; default: "
                   "traced)")
    r.add_argument("--max-stack-depth", type=int, default=None, metavar="N",
                   help="record calls only up to this depth (at least 1; default: no limit)")
    r.add_argument("--gc", action="store_true",
                   help="record each garbage collection as a py:gc slice on the thread that "
                   "ran it, with its generation and the numbers collected and uncollectable "
                   "(default: off)")
    r.add_argument("--exceptions", action=argparse.BooleanOptionalAction, default=True,
                   help="record, on the slice of each frame an exception unwinds, a "
                   "py:exception event with its type and message (args[0] when a str, at "
                   "most 255 bytes; default: on)")
    r.add_argument("--no-children", action="store_true",
                   help="do not trace child processes started with exec (spawn, subprocess; "
                   "default: traced)")
    r.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a library module as a script (the rest are its arguments)")
    r.add_argument("script", nargs="?", metavar="script.py",
                   help="the program to run (the rest are its arguments)")
    return r


# The run options that take a value (the next argument, unless given as --opt=value).
_VALUE_OPTIONS = {"-o", "--output", "--mode", "--include", "--exclude", "--include-files",
                  "--exclude-files", "--max-stack-depth"}


def split_run_args(argv):
    """Splits ``run``'s arguments into (its options, module or None, the program's argv):
    the options end at the first argument that is not one (the script), at ``-m MODULE``,
    or after ``--``."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], None, argv[i + 1:]
        if a == "-m":
            if i + 1 == len(argv):
                return argv[: i + 1], None, []  # argparse says -m needs a value
            return argv[:i], argv[i + 1], argv[i + 2:]
        if a.startswith("-m") and not a.startswith("--"):
            return argv[:i], a[2:], argv[i + 1:]
        if a in _VALUE_OPTIONS:
            i += 2
        elif a.startswith("-") and a != "-":
            i += 1
        else:
            return argv[:i], None, argv[i:]
    return argv, None, []


def existing_trace(d):
    """The parts of a trace already in session directory ``d`` (process directories holding
    a metadata file, statistics files), as ``hushtrace record`` finds them."""
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        p = os.path.join(d, n)
        is_trace = (os.path.isdir(p) and not os.path.islink(p)
                    and os.path.lexists(os.path.join(p, METADATA_FILE)))
        if is_trace or n.endswith(STATS_SUFFIX):
            out.append(n)
    return sorted(out)


def _remove_trace(d, parts):
    import shutil

    for n in parts:
        p = os.path.join(d, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.remove(p)


def _find_module(name):
    """The spec of module ``name`` as ``python -m`` would find it (from the working
    directory first), or None."""
    import importlib.util

    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path.pop(0)


def _usage_error(msg):
    print(f"{USAGE}\npython -m hushtrace run: error: {msg}", file=sys.stderr)
    return 2


def _view(args):
    """``view``: replaced by the hushtrace command's ``hushtrace view ARGS`` (it prints the link,
    serves the trace and ends as that command does; Ctrl-C reaches it directly)."""
    import shutil

    cli = os.environ.get("HUSHTRACE_CLI") or shutil.which("hushtrace")
    if not cli:
        print("hushtrace: view needs the hushtrace command: install it (cargo install "
              "hushtrace-cli) or name it in HUSHTRACE_CLI", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(cli, [cli, "view", *args])
    except OSError as e:
        print(f"hushtrace: cannot run {cli}: {e}", file=sys.stderr)
        return 2


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m hushtrace run [options] (script.py | -m module) [args...]\n"
              f"       python -m hushtrace view DIR [--port N] [--no-browser]\n\n"
              f"commands:\n  run    run a Python program, tracing every call "
              f"(python -m hushtrace run --help)\n"
              f"  view   open a trace in the Perfetto UI (hushtrace view --help)",
              file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "view":
        return _view(argv[1:])
    if argv[0] != "run":
        return _usage_error(f"unknown command {argv[0]!r} (the commands are 'run' and 'view')")
    own, module, program = split_run_args(argv[1:])
    parser = _run_parser()
    args = parser.parse_args(own)
    if args.script is not None:  # only when `--` came first: `run -- script.py`
        program = [args.script] + program
    if args.module is not None:
        module = args.module
    if module is None and not program:
        parser.error("give a script or -m MODULE")
    if module == "":
        parser.error("-m needs a module name")
    if args.max_stack_depth is not None and args.max_stack_depth < 1:
        parser.error("--max-stack-depth must be at least 1")
    for g in args.include + args.exclude:
        if g == "" or "," in g:
            parser.error(f"--include/--exclude: {g!r} is not a glob (empty, or holds a comma)")
    for g in args.include_files + args.exclude_files:
        if g == "" or "," in g:
            parser.error(f"--include-files/--exclude-files: {g!r} is not a glob (empty, or "
                         f"holds a comma)")
    if args.output == "":
        parser.error("-o: the output directory is empty")
    out = os.path.abspath(args.output)
    if os.path.exists(out) and not os.path.isdir(out):
        parser.error(f"-o: {out} exists and is not a directory")
    if module is None and not os.path.exists(program[0]):
        print(f"hushtrace: no such script: {program[0]}", file=sys.stderr)
        return 2
    if module is not None and _find_module(module) is None:
        print(f"hushtrace: no module named {module!r}", file=sys.stderr)
        return 2
    existing = existing_trace(out)
    if existing and not args.append:
        if not args.force:
            shown = ", ".join(existing[:5]) + (", ..." if len(existing) > 5 else "")
            print(f"hushtrace: {out} already holds a trace ({shown}): use --force to replace "
                  f"it or --append to add to it, or choose another directory", file=sys.stderr)
            return 2
        _remove_trace(out, existing)
    os.makedirs(out, mode=0o700, exist_ok=True)

    from . import _names

    process = module if module is not None else os.path.basename(program[0])
    env = {
        "HUSHTRACE_OUTPUT": out,
        "HUSHTRACE_PY_C_CALLS": "1" if args.c_calls else "0",
        "HUSHTRACE_PY_INCLUDE": ",".join(args.include),
        "HUSHTRACE_PY_EXCLUDE": ",".join(args.exclude),
        "HUSHTRACE_PY_INCLUDE_FILES": ",".join(args.include_files),
        "HUSHTRACE_PY_EXCLUDE_FILES": ",".join(args.exclude_files),
        "HUSHTRACE_PY_IGNORE_FROZEN": "1" if args.ignore_frozen else "0",
        "HUSHTRACE_PY_MAX_DEPTH": str(args.max_stack_depth or ""),
        "HUSHTRACE_PY_GC": "1" if args.gc else "0",
        "HUSHTRACE_PY_EXCEPTIONS": "1" if args.exceptions else "0",
        _names.PROCESS_VAR: process,
    }
    if args.mode:
        env["HUSHTRACE_MODE"] = args.mode
    os.environ.update(env)

    from . import _functions, _gc, _process
    from . import _hushtrace as _h

    _names.install(process)
    try:
        if not _h.is_running():
            _h.start_from_env()
    except (ValueError, RuntimeError) as e:
        print(f"hushtrace: {e}", file=sys.stderr)
        return 2
    if args.no_children:
        os.environ["HUSHTRACE_PY"] = "0"
    _process.install(sigterm=True)
    if args.gc:
        _gc.install()

    if module is not None:
        sys.argv = [module] + program
    else:
        script = program[0]
        sys.argv = list(program)
        sys.path[0] = os.path.dirname(os.path.abspath(script))

    # The trace starts at the program's main module: runpy's frames (and the imports that find
    # a -m module) are the launcher's, not recorded nor counted by --max-stack-depth.
    _h._await_main(True)
    _functions.start(
        c_calls=args.c_calls,
        include=args.include,
        exclude=args.exclude,
        max_depth=args.max_stack_depth,
        include_files=args.include_files,
        exclude_files=args.exclude_files,
        ignore_frozen=args.ignore_frozen,
        exceptions=args.exceptions,
    )
    code = 0
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        _functions.stop()
        _gc.uninstall()
        _h._await_main(False)
        stats = _h.stop()
        if stats is not None:
            print(
                f"hushtrace: {stats['events_written']} events written, "
                f"{stats['events_discarded']} discarded: {out}",
                file=sys.stderr,
            )
    return code


if __name__ == "__main__":
    sys.exit(main())
