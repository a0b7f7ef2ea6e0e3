"""Switching whole-program function tracing on and off.

3.12+: ``sys.monitoring`` (PEP 669) with the extension's builtin callbacks, under a tool id
no other tool expects (3, 4 or 5: never the debugger's, coverage's or profiler's id, so
cProfile, coverage.py and debuggers started before or after keep theirs). Below 3.12: the C
profile hook (the slot cProfile uses) on every running thread plus a ``threading.setprofile``
bootstrap that installs it on threads started later; a profile function found in a thread's
slot (cProfile, ``sys.setprofile``) is chained and given its slot back at stop, as is one set
later through ``sys.setprofile`` (replaced while tracing) or cProfile; a profiler that takes a
thread's slot over for good is counted and warned about at stop (see ``src/hook.rs``). asyncio tasks become async slices (``py:task``), followed by
those same hooks (see the extension's ``tasks`` module): nothing in asyncio is patched.
"""

import sys
import threading
import warnings

from . import _hushtrace as _h

_tool = None
_active = False
# Below 3.12: the threading profile function that was set when tracing started (restored at
# stop, and set on each new thread before the hook chains it).
_prev_thread_profile = None

# sys.monitoring ids that no well-known tool expects (0-2: debugger, coverage, profiler).
_TOOL_IDS = (3, 4, 5)


def _free_tool_id(mon):
    for tool in _TOOL_IDS:
        if mon.get_tool(tool) is None:
            return tool
    raise RuntimeError("hushtrace: no free sys.monitoring tool id (ids 3-5 are all in use)")


# The interpreter's own; below 3.12, while tracing, sys.setprofile and sys.getprofile are the
# extension's (the profile function set is chained behind the hook, see src/hook.rs).
_real_setprofile = sys.setprofile
_real_getprofile = sys.getprofile


def _thread_bootstrap(frame, event, arg):
    # The first event of a thread started while tracing: give the thread the profile
    # function it would have had, then install the hook over it (chained).
    _real_setprofile(_prev_thread_profile)
    return _h._profile_thread_bootstrap(frame, event, arg)


def start(c_calls=False, include=(), exclude=(), max_depth=None, include_files=(),
          exclude_files=(), ignore_frozen=False, exceptions=True):
    global _tool, _active, _prev_thread_profile
    if _active:
        stop()
    _h._prepare_functions(c_calls, max_depth, list(include), list(exclude),
                          list(include_files), list(exclude_files), ignore_frozen)
    # py:exception events on the slices of the frames an exception unwinds.
    _h._set_exceptions(exceptions)
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
        # A previous user of this tool id may have left code locations DISABLEd for it.
        # restart_events() re-arms them for every tool; the others' callbacks just run once
        # more where they had returned DISABLE (what the PEP asks every tool to tolerate).
        mon.restart_events()
        mon.set_events(tool, mask)
        _tool = tool
    else:
        prev = getattr(threading, "_profile_hook", None)
        _prev_thread_profile = None if prev is _thread_bootstrap else prev
        _h._profile_all_threads(True)
        threading.setprofile(_thread_bootstrap)
        sys.setprofile, sys.getprofile = _h._setprofile, _h._getprofile
    _active = True


def stop():
    global _tool, _active
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
    else:
        if sys.setprofile is _h._setprofile:
            sys.setprofile, sys.getprofile = _real_setprofile, _real_getprofile
        if getattr(threading, "_profile_hook", None) is _thread_bootstrap:
            threading.setprofile(_prev_thread_profile)
        lost = _h._profile_all_threads(False)
        if lost:
            warnings.warn(
                f"hushtrace: another profiler took over the profile hook of {lost} thread(s) "
                "while tracing (e.g. cProfile enabled after hushtrace started, or a profiler "
                "that was chained then disabled): calls on those threads after that point are "
                "not in the trace", RuntimeWarning, stacklevel=2)


def active():
    return _active

