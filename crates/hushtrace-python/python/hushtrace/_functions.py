"""Switching whole-program function tracing on and off.

3.12+: ``sys.monitoring`` (PEP 669) with the extension's builtin callbacks; below 3.12: a
PEP 523 frame evaluation function (interpreter-wide: every thread, also those started
before), or with C calls the C profile hook on every running thread plus a
``threading.setprofile`` bootstrap that installs it on threads started later. asyncio tasks become async slices (``py:task``) through a wrapper
of ``BaseEventLoop.create_task``, installed when asyncio is (or gets) imported.
"""

import functools
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
    _asyncio_hook()


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


# ---- asyncio tasks as async slices ----

_patched = False


def _end_task(code, task):
    _h._task_end(code, id(task))


def _patch(base_events):
    global _patched
    if _patched:
        return
    _patched = True
    cls = base_events.BaseEventLoop
    orig = cls.create_task

    def create_task(self, coro, *args, **kwargs):
        task = orig(self, coro, *args, **kwargs)
        if _active:
            code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            module = frame.f_globals.get("__name__") if frame is not None else None
            if code is not None and _h._task_begin(code, id(task), module):
                task.add_done_callback(functools.partial(_end_task, code))
        return task

    create_task.__wrapped__ = orig
    cls.create_task = create_task


class _AsyncioFinder:
    """Patches asyncio.base_events right after it is imported (no import of asyncio here)."""

    def find_spec(self, name, path=None, target=None):
        if name != "asyncio.base_events":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        loader.exec_module = exec_and_patch
        return spec


def _asyncio_hook():
    if "asyncio.base_events" in sys.modules:
        _patch(sys.modules["asyncio.base_events"])
    elif not any(isinstance(f, _AsyncioFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AsyncioFinder())
