"""Imported by ``hushtrace.pth`` at interpreter start-up when ``HUSHTRACE_OUTPUT`` is set
(``hushtrace record -- python3 app.py``, ``python -m hushtrace run``'s children): starts the
session from the ``HUSHTRACE_*`` environment and, unless ``HUSHTRACE_PY_FUNCTIONS=0``,
whole-program function tracing with the options of ``HUSHTRACE_PY_*``
(``HUSHTRACE_PY_GC=1``: garbage collections too, see ``hushtrace._gc``).
``HUSHTRACE_PY=0`` turns this off."""

import os
import sys


def _globs(var):
    return [g for g in os.environ.get(var, "").split(",") if g]


def autostart():
    env = os.environ
    if not env.get("HUSHTRACE_OUTPUT") or env.get("HUSHTRACE_PY") == "0":
        return
    try:
        from . import _hushtrace as _h, _functions, _gc, _names, _process

        if _h.is_running():
            return
        _names.install()
        if not _h.start_from_env():
            return
        _process.install(sigterm=True)
        if env.get("HUSHTRACE_PY_GC") == "1":
            _gc.install()
        if env.get("HUSHTRACE_PY_FUNCTIONS", "1") != "0":
            depth = env.get("HUSHTRACE_PY_MAX_DEPTH")
            # Nothing before the main module is the program's (site's work, this import).
            _h._await_main(True, launcher=False)
            _functions.start(
                c_calls=env.get("HUSHTRACE_PY_C_CALLS") == "1",
                include=_globs("HUSHTRACE_PY_INCLUDE"),
                exclude=_globs("HUSHTRACE_PY_EXCLUDE"),
                max_depth=int(depth) if depth else None,
                include_files=_globs("HUSHTRACE_PY_INCLUDE_FILES"),
                exclude_files=_globs("HUSHTRACE_PY_EXCLUDE_FILES"),
                ignore_frozen=env.get("HUSHTRACE_PY_IGNORE_FROZEN") == "1",
                exceptions=env.get("HUSHTRACE_PY_EXCEPTIONS", "1") != "0",
            )
    except Exception as e:  # never break the program being traced
        print(f"hushtrace: tracing not started: {e}", file=sys.stderr)


autostart()
