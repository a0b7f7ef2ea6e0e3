"""Argument checks of the public API, done before anything starts: a wrong type is a
``TypeError``, a wrong value a ``ValueError``, each naming the argument."""

import os


def _type_name(v):
    return type(v).__name__


def directory(v, what="dir"):
    """A directory path: a ``str`` or an ``os.PathLike`` giving one, not empty, not an existing
    non-directory. Returns it as a ``str``."""
    if not isinstance(v, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or os.PathLike, not {_type_name(v)}")
    p = os.fspath(v)
    if not isinstance(p, str):
        raise TypeError(f"{what} must give a str path, not {_type_name(p)}")
    if p == "":
        raise ValueError(f"{what} is empty: give a directory")
    if "\0" in p:
        raise ValueError(f"{what} contains a NUL character: {p!r}")
    if os.path.exists(p) and not os.path.isdir(p):
        raise ValueError(f"{what} {p!r} exists and is not a directory")
    return p


def choice(v, what, choices):
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {_type_name(v)}")
    if v not in choices:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, choices))}, not {v!r}")
    return v


def flag(v, what):
    if not isinstance(v, bool):
        raise TypeError(f"{what} must be True or False, not {_type_name(v)}")
    return v


def globs(v, what):
    """Globs: one ``str`` is one glob; else an iterable of non-empty ``str``. Returns a list."""
    if isinstance(v, str):
        v = [v]
    elif isinstance(v, (bytes, bytearray)) or not hasattr(v, "__iter__"):
        raise TypeError(f"{what} must be a glob (str) or a list of globs, not {_type_name(v)}")
    out = []
    for g in v:
        if not isinstance(g, str):
            raise TypeError(f"{what}: each glob must be a str, not {_type_name(g)}")
        if g == "" or "," in g:
            raise ValueError(f"{what}: {g!r} is not a glob (empty, or holds a comma)")
        out.append(g)
    return out


def count(v, what, minimum=1, optional=True):
    """An int (not a bool) at least ``minimum``, or None when ``optional``."""
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {_type_name(v)}")
    if v < minimum:
        raise ValueError(f"{what} must be at least {minimum}, not {v}")
    return v


def optional_str(v, what):
    if v is not None and not isinstance(v, str):
        raise TypeError(f"{what} must be a str, not {_type_name(v)}")
    return v


def cpus(v, what="consumer_cpus"):
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise TypeError(f"{what} must be a list of CPU numbers, not {_type_name(v)}")
    return [count(c, f"{what}: a CPU number", minimum=0, optional=False) for c in v]
