"""``python -m hushtrace run [options] (script.py | -m module) [args...]``: run a Python
program with every function call traced (like ``viztracer script.py``); its child processes
(``fork``, ``multiprocessing`` with any start method, ``subprocess`` running Python) are
traced into the same session directory."""

import argparse
import os
import runpy
import sys

USAGE = """python -m hushtrace run [-o DIR] [--mode discard|overwrite] [--c-calls]
                           [--include GLOB]... [--exclude GLOB]... [--max-stack-depth N]
                           (script.py | -m module) [args...]"""


def _parser():
    p = argparse.ArgumentParser(prog="python -m hushtrace", usage=USAGE)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", usage=USAGE, help="run a Python program, tracing every call")
    r.add_argument("-o", "--output", default="hushtrace-trace", help="session directory")
    r.add_argument("--mode", choices=("discard", "overwrite"), default=None)
    r.add_argument("--c-calls", action="store_true", help="also record builtin (C) calls")
    r.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="trace only functions whose module or module.qualname matches")
    r.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="do not trace functions whose module or module.qualname matches")
    r.add_argument("--max-stack-depth", type=int, default=None, metavar="N",
                   help="record calls only up to this depth")
    r.add_argument("--no-children", action="store_true",
                   help="do not trace child processes started with exec (spawn, subprocess)")
    r.add_argument("-m", dest="module", default=None, help="run a library module as a script")
    r.add_argument("target", nargs=argparse.REMAINDER, help="script.py [args...]")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.module is None and not args.target:
        _parser().error("run: give a script or -m module")
    if args.max_stack_depth is not None and args.max_stack_depth < 1:
        _parser().error("--max-stack-depth must be at least 1")
    out = os.path.abspath(args.output)
    os.makedirs(out, mode=0o700, exist_ok=True)
    env = {
        "HUSHTRACE_OUTPUT": out,
        "HUSHTRACE_PY_C_CALLS": "1" if args.c_calls else "0",
        "HUSHTRACE_PY_INCLUDE": ",".join(args.include),
        "HUSHTRACE_PY_EXCLUDE": ",".join(args.exclude),
        "HUSHTRACE_PY_MAX_DEPTH": str(args.max_stack_depth or ""),
    }
    if args.mode:
        env["HUSHTRACE_MODE"] = args.mode
    os.environ.update(env)

    from . import _functions, _process
    from . import _hushtrace as _h

    try:
        if not _h.is_running():
            _h.start_from_env()
    except (ValueError, RuntimeError) as e:
        print(f"hushtrace: {e}", file=sys.stderr)
        return 2
    if args.no_children:
        os.environ["HUSHTRACE_PY"] = "0"
    _process.install(sigterm=True)

    if args.module is not None:
        sys.argv = [args.module] + args.target
    else:
        script = args.target[0]
        if not os.path.exists(script):
            print(f"hushtrace: no such script: {script}", file=sys.stderr)
            return 2
        sys.argv = list(args.target)
        sys.path[0] = os.path.dirname(os.path.abspath(script))

    # The trace starts at the program's main module: runpy's frames (and the imports that find
    # a -m module) are the launcher's, not recorded nor counted by --max-stack-depth.
    _h._await_main(True)
    _functions.start(
        c_calls=args.c_calls,
        include=args.include,
        exclude=args.exclude,
        max_depth=args.max_stack_depth,
    )
    code = 0
    try:
        if args.module is not None:
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        _functions.stop()
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
