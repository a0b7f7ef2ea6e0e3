"""hushtrace for Python: whole-program function tracing and inline tracepoints.

Inline API::

    import hushtrace
    hushtrace.start("/tmp/trace")                 # or mode="overwrite"
    hushtrace.event("app", "login", user="ada", attempt=2)
    with hushtrace.span("app", "load", n=3):
        ...
    @hushtrace.trace
    def work(): ...
    hushtrace.counter("app", "queue", 17)
    stats = hushtrace.stop()

Whole program: ``python -m hushtrace run [-o DIR] script.py args...`` (every Python
function call and return), or ``hushtrace record -o DIR -- python3 app.py`` with this package
installed (its ``hushtrace.pth`` starts tracing when ``HUSHTRACE_OUTPUT`` is set).
"""

import functools as _functools
import inspect as _inspect
import os as _os
import sys as _sys

# The extension also exports the C interface (the ht_* symbols of libhushtrace.so): loaded
# with RTLD_GLOBAL, it is what C libraries loaded later bind to, so C tracepoints and Python
# record into one runtime, one session, one trace.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_GLOBAL)
try:
    from . import _hushtrace as _h
finally:
    _sys.setdlopenflags(_flags)
from . import _check, _functions, _gc, _names, _process
from ._hushtrace import counter, disable, enable, event, snapshot, span

__all__ = [
    "start",
    "stop",
    "event",
    "span",
    "trace",
    "counter",
    "enable",
    "disable",
    "snapshot",
    "is_running",
    "trace_functions",
    "stop_functions",
]


def start(
    dir,
    mode="discard",
    *,
    functions=False,
    c_calls=False,
    include=(),
    exclude=(),
    include_files=(),
    exclude_files=(),
    ignore_frozen=False,
    max_stack_depth=None,
    subbuf_size=None,
    num_subbufs=None,
    consumer_sched=None,
    consumer_cpus=None,
    gc=False,
    exceptions=True,
):
    """Starts a session writing to ``dir`` (this process's trace goes to ``dir/<pid>``).

    ``mode``: ``"discard"`` (default: a full ring drops new events and counts them) or
    ``"overwrite"`` (flight recorder; see ``snapshot()``). ``functions=True`` also records every
    Python function call (see ``trace_functions``). ``consumer_sched`` (``"fifo:1"``,
    ``"rr:N"``, ``"nice:N"``; default: as the calling thread) and ``consumer_cpus`` (a list of
    CPU numbers) place the tracer's consumer thread, as ``HUSHTRACE_CONSUMER_SCHED`` and
    ``HUSHTRACE_CONSUMER_CPUS`` do. ``exceptions`` (default True; with ``functions``): a
    ``py:exception`` event on the slice of each frame an exception unwinds (see
    ``trace_functions``). Returns this process's trace directory.

    Every argument is checked before anything starts: ``dir`` is a ``str`` or
    ``os.PathLike`` (else ``TypeError``), not empty and not an existing file (else
    ``ValueError``); ``include``/``exclude``/``include_files``/``exclude_files`` are a glob
    or a list of globs (see ``trace_functions``); ``ignore_frozen`` a bool;
    ``max_stack_depth``, ``subbuf_size`` and ``num_subbufs`` are positive ints. If function
    tracing cannot start, the session is stopped again and the error raised.

    The trace names this process after its program (the script's file name) and each thread
    after its ``threading`` name (see ``hushtrace._names``).
    """
    dir = _check.directory(dir)
    _check.choice(mode, "mode", ("discard", "overwrite"))
    _check.flag(functions, "functions")
    _check.flag(c_calls, "c_calls")
    _check.flag(gc, "gc")
    _check.flag(exceptions, "exceptions")
    include = _check.globs(include, "include")
    exclude = _check.globs(exclude, "exclude")
    include_files = _check.globs(include_files, "include_files")
    exclude_files = _check.globs(exclude_files, "exclude_files")
    _check.flag(ignore_frozen, "ignore_frozen")
    _check.count(max_stack_depth, "max_stack_depth")
    _check.count(subbuf_size, "subbuf_size")
    _check.count(num_subbufs, "num_subbufs")
    _check.optional_str(consumer_sched, "consumer_sched")
    consumer_cpus = _check.cpus(consumer_cpus)
    _names.install()
    path = _h.start(dir, mode, subbuf_size, num_subbufs, consumer_sched, consumer_cpus)
    try:
        _process.install()
        if gc:
            _gc.install()
        if functions:
            trace_functions(
                c_calls=c_calls, include=include, exclude=exclude,
                max_stack_depth=max_stack_depth, include_files=include_files,
                exclude_files=exclude_files, ignore_frozen=ignore_frozen,
                exceptions=exceptions,
            )
    except BaseException:
        stop()
        raise
    return path


def stop():
    """Stops function tracing and the session; returns its statistics as a dict
    (``events_written``, ``events_discarded``, ``trace_dir``), or None if none was running."""
    if _functions.active():
        _h._close_open_frames()
    _functions.stop()
    _gc.uninstall()
    return _h.stop()


def is_running():
    """Whether a session started by this module is running."""
    return _h.is_running()


def trace_functions(c_calls=False, include=(), exclude=(), max_stack_depth=None,
                    include_files=(), exclude_files=(), ignore_frozen=False, exceptions=True):
    """Records every Python function call and return on every thread (also threads started
    before), as ``py:call`` spans named after the function. ``include``/``exclude``: globs on
    the module or ``module.qualname`` (one str is one glob); ``include_files``/
    ``exclude_files``: globs on the function's file (its code object's ``co_filename``, and
    its absolute form when that is relative; ``*`` also matches ``/``); ``ignore_frozen``:
    leave out the functions of frozen modules (file ``<frozen ...>``: the import machinery,
    and on 3.11+ the standard modules CPython freezes, such as ``os`` and ``posixpath``).
    A function is traced when every filter lets it through; the verdict is reached once per
    function, when it is first called. The file filters apply to Python functions only (C
    functions have no file). ``c_calls``: builtin (C) functions too; ``max_stack_depth``:
    record calls only up to this depth (an int, at least 1). ``exceptions`` (default True):
    each frame an exception unwinds gets a ``py:exception`` event (``type``: the class's
    qualified name; ``message``: ``args[0]`` when it is a str, at most 255 bytes, else
    empty; ``str()`` is never called) just before its slice ends; below Python 3.12 the
    exception is not visible to the profile hook and ``type`` is empty. The arguments are
    checked before anything changes."""
    _check.flag(c_calls, "c_calls")
    _check.flag(exceptions, "exceptions")
    include = _check.globs(include, "include")
    exclude = _check.globs(exclude, "exclude")
    include_files = _check.globs(include_files, "include_files")
    exclude_files = _check.globs(exclude_files, "exclude_files")
    _check.flag(ignore_frozen, "ignore_frozen")
    _check.count(max_stack_depth, "max_stack_depth")
    _functions.start(
        c_calls=c_calls, include=include, exclude=exclude, max_depth=max_stack_depth,
        include_files=include_files, exclude_files=exclude_files, ignore_frozen=ignore_frozen,
        exceptions=exceptions,
    )


def stop_functions():
    """Stops function tracing (the session goes on)."""
    _functions.stop()


def trace(fn=None, *, cat=None, name=None, deadline=None):
    """Decorator: records each call of the function as a span ``cat:name`` (default: its
    module and qualified name). Works on plain and ``async`` functions.

    ``deadline``: seconds (a positive int or float; else ``TypeError``/``ValueError`` here):
    a call that takes longer is a late span, captured in ``<dir>/late/<n>/`` as
    ``span(..., deadline=...)`` says. The session's rules (``HUSHTRACE_ON_LATE``,
    ``hushtrace record --on-late``) win over it."""
    _h._check_deadline(deadline)

    def wrap(f):
        pair = _h.SpanPair(cat or f.__module__ or "py", name or f.__qualname__, deadline)
        begin, end = pair.begin, pair.end
        if _inspect.iscoroutinefunction(f):

            @_functools.wraps(f)
            async def traced_async(*args, **kwargs):
                start = begin()
                if start is None:
                    return await f(*args, **kwargs)
                try:
                    return await f(*args, **kwargs)
                finally:
                    end(start)

            return traced_async

        @_functools.wraps(f)
        def traced(*args, **kwargs):
            start = begin()
            if start is None:
                return f(*args, **kwargs)
            try:
                return f(*args, **kwargs)
            finally:
                end(start)

        return traced

    return wrap(fn) if fn is not None else wrap
