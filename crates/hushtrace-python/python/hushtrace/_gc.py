"""Garbage collections as slices (``python -m hushtrace run --gc``, ``start(..., gc=True)``):
the extension's builtin callback in ``gc.callbacks`` records each collection as a ``py:gc``
span (category ``py``, name ``gc``) on the thread that ran it, with ``generation`` on its
begin and ``generation``, ``collected``, ``uncollectable`` on its end (``gc.callbacks``'
info). Nothing is installed unless asked: off, it costs nothing."""

import gc

from . import _hushtrace as _h

# The callback object, once installed (the same object every time).
_cb = None


def install():
    """Appends the callback to ``gc.callbacks`` (once)."""
    global _cb
    _cb = _h._gc_callback()
    if not installed():
        gc.callbacks.append(_cb)


def uninstall():
    """Removes the callback from ``gc.callbacks`` (if there)."""
    if _cb is not None:
        gc.callbacks[:] = [c for c in gc.callbacks if c is not _cb]


def installed():
    """Whether the callback is in ``gc.callbacks``."""
    return _cb is not None and any(c is _cb for c in gc.callbacks)
