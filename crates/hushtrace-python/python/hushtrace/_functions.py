"""Switching whole-program function tracing on and off.

3.12+: ``sys.monitoring`` (PEP 669) with the extension's builtin callbacks; below 3.12: a
PEP 523 frame evaluation function (interpreter-wide: every thread, also those started
before), or with C calls the C profile hook on every running thread plus a
``threading.setprofile`` bootstrap that installs it on threads started later. asyncio tasks become async slices (``py:task``), followed
by those same hooks (see the extension's ``tasks`` module): nothing in asyncio is patched.
"""

import sys
import threading

from . import _hushtrace as _h

_tool = None
_active = False
_eval = False  # below 3.12: the frame evaluation function is installed (else the profile hook)


def _free_tool_id(mon):
    for tool in (mon.PROFILER_ID, 3, 4, 5):
        if mon.get_tool(tool) is None:
            return tool
    raise RuntimeError("hushtrace: no free sys.monitoring tool id (profiler and ids 3-5 in use)")


def start(c_calls=False, include=(), exclude=(), max_depth=None):
    global _tool, _active, _eval
    if _active:
        stop()
    _h._prepare_functions(c_calls, max_depth, list(include), list(exclude))
    if _h.MONITORING:
        mon = sys.monitoring
        E = mon.events
        tool = _free_tool_id(mon)
        mon.use_tool_id(tool, "hushtrace")
        _h._set_disable(mon.DISABLE)
        callbacks = [
            (E.PY_START, _h._mon_py_start),
            (E.PY_RESUME, _h._mon_py_resume),
            (E.PY_THROW, _h._mon_py_throw),
            (E.PY_RETURN, _h._mon_py_return),
            (E.PY_YIELD, _h._mon_py_yield),
            (E.PY_UNWIND, _h._mon_py_unwind),
        ]
        if c_calls:
            callbacks += [
                (E.CALL, _h._mon_call),
                (E.C_RETURN, _h._mon_c_return),
                (E.C_RAISE, _h._mon_c_raise),
            ]
        mask = 0
        for ev, cb in callbacks:
            mon.register_callback(tool, ev, cb)
            mask |= ev
        mon.restart_events()
        mon.set_events(tool, mask)
        _tool = tool
    elif not c_calls and _h._eval_frame(True):
        _eval = True
    else:
        threading.setprofile(_h._profile_thread_bootstrap)
        _h._profile_all_threads(True)
    _active = True


def stop():
    global _tool, _active, _eval
    if not _active:
        return
    _active = False
    _h._stop_c_calls()
    if _h.MONITORING:
        mon = sys.monitoring
        if _tool is not None:
            mon.set_events(_tool, 0)
            for name in ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD",
                         "PY_UNWIND", "CALL", "C_RETURN", "C_RAISE"):
                mon.register_callback(_tool, getattr(mon.events, name), None)
            mon.free_tool_id(_tool)
            _tool = None
    elif _eval:
        _h._eval_frame(False)
        _eval = False
    else:
        threading.setprofile(None)
        _h._profile_all_threads(False)


def active():
    return _active

