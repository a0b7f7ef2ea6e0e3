"""Process life cycle: the trace of a process is complete however it ends.

* normal exit: an ``atexit`` handler stops function tracing and the session (the runtime's
  own C ``atexit`` handler would too, but after Python's finalization);
* ``os._exit()`` (how ``multiprocessing`` ends a forked or forkserver child, after its task
  loop): ``os._exit`` is wrapped to stop the session first;
* ``SIGTERM`` (``Pool.terminate()``, ``Pool.__exit__``): where the signal's disposition is the
  default, a handler stops the session and dies of the signal as before. CPython runs it only
  when the main thread next checks for signals; if it has not started within two seconds (the
  main thread blocked in a call the signal did not interrupt), the extension's watcher thread
  ends the process with the default action, as untraced (its rings stay for ``recover``).

``fork()`` itself needs nothing here: the runtime's at-fork handlers give the child its own
trace (``<dir>/<childpid>``) in O(threads), and the extension's describe functions again.
"""

import atexit
import os
import signal
import threading

from . import _hushtrace as _h
from . import _functions

_installed = False
_real_exit = os._exit


def shutdown():
    """Stops function tracing and the session, if running (idempotent)."""
    try:
        if _functions.active():
            _h._close_open_frames()
        _functions.stop()
    except Exception:
        pass
    try:
        _h.stop()
    except Exception:
        pass


def _exit(code):
    shutdown()
    _real_exit(code)


def _on_sigterm(signum, frame):
    _h._sigterm_handler_started()
    shutdown()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _sigterm_handler():
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            _h._sigterm_net()
            _watch_in_children()
    except (ValueError, OSError):
        pass


_watching_children = False


def _watch_in_children():
    """A fork child keeps the handlers but not the watcher thread: it starts its own."""
    global _watching_children
    if _watching_children:
        return
    _watching_children = True

    def again():
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            try:
                _h._sigterm_net()
            except OSError:
                pass

    os.register_at_fork(after_in_child=again)


def install(sigterm=False):
    global _installed
    if sigterm:
        _sigterm_handler()
    if _installed:
        return
    _installed = True
    os._exit = _exit
    atexit.register(shutdown)
