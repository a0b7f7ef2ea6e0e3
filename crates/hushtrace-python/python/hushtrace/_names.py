"""Thread and process names in the trace.

Converters (``hushtrace convert``, ``report``) name a thread after its packets' thread name
and a process after its trace's process name. Without this module both are the interpreter's
kernel name (``python3``) for every thread and process. With it:

* a thread is named after its ``threading`` name (``worker-3``; the main thread
  ``MainThread``), cut to 15 bytes on a character boundary, from its start, and again when it
  renames itself (``threading.current_thread().name = ...``); a thread renamed by another
  thread while it runs keeps its old name in the trace until it next names itself;
* the process is named after its program: the script's file name (``app.py``), the module
  run with ``-m``, or the name given by the process that started it (``HUSHTRACE_PY_PROCESS``,
  set by ``python -m hushtrace run`` for its children, ``multiprocessing``'s spawned workers
  among them).

Only the trace sees these names: kernel thread and process names are left as they are.
"""

import os
import sys
import threading

from . import _hushtrace as _h

PROCESS_VAR = "HUSHTRACE_PY_PROCESS"

_installed = False


def program_name():
    """The name of the program this interpreter runs: ``HUSHTRACE_PY_PROCESS`` if set, else
    the script's file name or the ``-m`` module, else the interpreter's file name."""
    given = os.environ.get(PROCESS_VAR)
    if given:
        return given
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] and argv[0] not in ("-c", "-m", "-"):
        return os.path.basename(argv[0])
    orig = getattr(sys, "orig_argv", [])
    if "-m" in orig[1:-1]:
        return orig[orig.index("-m", 1) + 1]
    return os.path.basename(sys.executable or "python")


def _name_current(name):
    try:
        _h._set_thread_name(str(name))
    except Exception:  # a name the trace cannot take (a lone surrogate): keep the old one
        pass


def install(process=None):
    """Names this process (``process``, default :func:`program_name`) and the calling thread
    in the trace, and every thread from its start and its own renames."""
    global _installed
    _h._set_process_name(process or program_name())
    _name_current(threading.current_thread().name)
    if _installed:
        return
    _installed = True
    cls = threading.Thread
    bootstrap = getattr(cls, "_bootstrap_inner", None)
    if bootstrap is not None:

        def _bootstrap_inner(self):
            _name_current(self.name)
            return bootstrap(self)

        cls._bootstrap_inner = _bootstrap_inner
    prop = cls.__dict__.get("name")
    if isinstance(prop, property) and prop.fset is not None:
        fset = prop.fset

        def set_name(self, name):
            fset(self, name)
            if self.ident is not None and self.ident == threading.get_ident():
                _name_current(self.name)

        cls.name = property(prop.fget, set_name, prop.fdel, prop.__doc__)
