"""Function traces are exact: for every Python function, the number of `py:call` spans equals
cProfile's call count (pstats, same interpreter), whatever path entered the frame.

The same program runs twice, under `python -m hushtrace run` and under `python -m cProfile`
(same hash seed, warm bytecode caches); the functions of its own file (and of docutils for
the real program) are matched by cProfile's key (file, first line, code name): the trace's
`py:function` definitions (read by babeltrace2) give each id its file, line and qualified
name, and the CLI's Chrome converter gives the begins of each id.
"""

import collections
import json
import os
import pstats
import re
import shutil
import subprocess
import sys

import pytest

from conftest import check_balanced, chrome, clean_env, write_script

# Every path into a Python frame, each taken N times (well past the specialisation warm-up
# of 3.11+: a specialised instruction is in place after a few dozen runs).
WORKLOAD = r'''
import functools, re, sys, weakref

N = int(sys.argv[1])


def plain(x):
    return x + 1


def defaults(x, y=2, *, z=3):
    return x + y + z


def varargs(*a, **k):
    return len(a) + len(k)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def deco(f):
    @functools.wraps(f)
    def wrapper(*a, **k):
        return f(*a, **k)
    return wrapper


@deco
def decorated(x):
    return x


class Desc:
    def __get__(self, obj, typ=None):
        return 1

    def __set__(self, obj, value):
        pass


class It:
    def __init__(self, n):
        self.i, self.n = 0, n

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class Base:
    def __init__(self, n):
        self.n = n


class Obj(Base):
    d = Desc()

    def __init__(self, n):
        super().__init__(n)
        self._p = 0

    def __getitem__(self, i):
        return i

    def __setitem__(self, i, v):
        pass

    def __delitem__(self, i):
        pass

    def __len__(self):
        return self.n

    def __iter__(self):
        return It(2)

    def __contains__(self, x):
        return True

    def __add__(self, o):
        return 1

    def __radd__(self, o):
        return 2

    def __iadd__(self, o):
        return self

    def __neg__(self):
        return 3

    def __lt__(self, o):
        return True

    def __eq__(self, o):
        return self is o

    def __hash__(self):
        return 7

    def __bool__(self):
        return True

    def __call__(self, x):
        return x

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __index__(self):
        return 2

    def __format__(self, spec):
        return "o"

    def __repr__(self):
        return "Obj"

    def __getattr__(self, name):
        return 5

    def method(self, x):
        return x

    @property
    def prop(self):
        return self._p

    @prop.setter
    def prop(self, v):
        self._p = v

    @staticmethod
    def static(x):
        return x

    @classmethod
    def klass(cls, x):
        return x


class GetAttribute:
    def __getattribute__(self, name):
        return 1


class Missing(dict):
    def __missing__(self, key):
        return 0


class Dying:
    def __del__(self):
        pass


class Await:
    def __await__(self):
        yield 1
        return 2


def gen(n):
    for i in range(n):
        yield i


def delegating(n):
    yield from gen(n)


async def coro(n):
    t = 0
    for _ in range(n):
        t += await Await()
    return t


async def agen(n):
    for i in range(n):
        yield i


async def use_agen():
    return [x async for x in agen(2)]


def drive(c):
    try:
        while True:
            c.send(None)
    except StopIteration as e:
        return e.value


def raises(x):
    raise ValueError(x)


def catches(x):
    try:
        raises(x)
    except ValueError:
        return 1


def make_class():
    class Body:
        x = 1

        def __init_subclass__(cls):
            pass

    class Sub(Body):
        pass

    return Sub


def comprehensions(k):
    a = [x for x in range(k)]
    b = {x: x for x in range(k)}
    c = {x for x in range(k)}
    d = sum(x for x in range(k))
    return a, b, c, d


def repl(m):
    return "b"


def callback(ref):
    pass


def main():
    o = Obj(3)
    ga = GetAttribute()
    m = Missing()
    part = functools.partial(plain, 1)
    lam = lambda x: x
    for i in range(N):
        plain(i)
        defaults(i)
        defaults(i, 1, z=2)
        varargs(1, 2, a=3)
        decorated(i)
        part()
        lam(i)
        Obj.static(i)
        o.static(i)
        Obj.klass(i)
        o.method(i)
        Obj.method(o, i)
        o.prop
        o.prop = i
        o.d
        o.d = i
        o.missing_attribute
        ga.anything
        o[i]
        o[i] = i
        del o[i]
        len(o)
        i in o
        o + 1
        1 + o
        -o
        o < o
        o == o
        hash(o)
        bool(o)
        if o:
            pass
        o(i)
        with o:
            pass
        range(o)
        f"{o}"
        repr(o)
        m[i]
        for _ in o:
            pass
        list(It(2))
        for _ in gen(3):
            pass
        next(gen(1))
        list(delegating(2))
        drive(coro(2))
        drive(use_agen())
        catches(i)
        Obj(1)
        Dying()
        make_class()
        comprehensions(2)
        sorted([3, 1, 2], key=lam)
        list(map(plain, (1, 2)))
        list(filter(lam, (1, 0)))
        functools.reduce(varargs, (1, 2, 3))
        re.sub("a", repl, "aa")
        min(o, o, key=lam)
        x = o
        x += 1
        r = weakref.ref(Obj(1), callback)
    fib(20)


main()
'''


def cprofile_counts(tmp_path, script, args, env):
    """cProfile's total call count per (file, line, name), from its pstats file."""
    prof = tmp_path / "run.prof"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), str(script), *args],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    stats = pstats.Stats(str(prof)).stats
    return collections.Counter({k: v[1] for k, v in stats.items()})


def trace_counts(tmp_path, script, args, env):
    """hushtrace's begins per (file, line, code name), from the Chrome converter (begins per
    function id) and babeltrace2 (each id's definition)."""
    out = tmp_path / "trace"
    r = subprocess.run([sys.executable, "-m", "hushtrace", "run", "-o", str(out), str(script),
                        *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    events = chrome(out, tmp_path)
    check_balanced(events)
    begins = collections.Counter(e["args"]["f"] for e in events
                                 if e.get("ph") == "B" and "f" in e.get("args", {}))
    bt = shutil.which("babeltrace2")
    if bt is None:
        pytest.fail("babeltrace2 not installed (apt-get install babeltrace2)")
    r = subprocess.run([bt, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    defs = {}
    pat = re.compile(r'\{ f = (\d+), module = "[^"]*", qualname = "([^"]*)", '
                     r'file = "([^"]*)", line = (\d+) \}')
    for line in r.stdout.splitlines():
        if " py:function:" in line:
            m = pat.search(line)
            assert m, line
            defs[int(m.group(1))] = (m.group(3), int(m.group(4)), m.group(2).split(".")[-1])
    counts = collections.Counter()
    for f, n in begins.items():
        assert f in defs, f"py:call id {f} without a definition"
        counts[defs[f]] += n
    return counts


def compare(tmp_path, text, args, select):
    script = write_script(tmp_path, text)
    env = clean_env(PYTHONHASHSEED="0")
    # Warm the bytecode caches: neither run compiles (and so calls) more than the other.
    r = subprocess.run([sys.executable, str(script), "1"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    want = cprofile_counts(tmp_path, script, args, env)
    got = trace_counts(tmp_path, script, args, env)
    want = {k: n for k, n in want.items() if select(k[0])}
    got = {k: n for k, n in got.items() if select(k[0])}
    diff = {k: (got.get(k, 0), want.get(k, 0)) for k in set(want) | set(got)
            if got.get(k, 0) != want.get(k, 0)}
    assert not diff, "(traced, cProfile) call counts differ:\n" + "\n".join(
        f"  {k}: {v}" for k, v in sorted(diff.items()))
    return want


N = 3000


def test_every_path_into_a_frame_is_one_call_as_cprofile_counts(tmp_path):
    counts = compare(tmp_path, WORKLOAD, [str(N)],
                     lambda f: os.path.basename(f) == "prog.py")
    by_name = collections.Counter()
    for (_, _, name), n in counts.items():
        by_name[name] += n
    # The workload ran: each special method reached through an operator or a specialised
    # instruction was called N times or more (so the comparison covers them all).
    for name in ("__getitem__", "__setitem__", "__delitem__", "__len__", "__next__",
                 "__iter__", "__init__", "__getattribute__", "__getattr__", "__get__",
                 "__set__", "__del__", "__missing__", "prop", "__await__", "<lambda>",
                 "wrapper", "decorated", "Body", "gen", "coro", "agen", "callback"):
        assert by_name[name] >= N, (name, by_name[name])


DOCUTILS = r'''
import sys
from docutils.core import publish_string

n = int(sys.argv[1])
parts = ["=========\nGenerated\n=========\n\n.. contents::\n"]
for i in range(n):
    parts.append(f"""
Section {i}
===========

Some *emphasis*, **strong**, ``literal``, a link_ and a footnote [#f{i}]_.

.. _link: https://example.org/{i}

- item one with `interpreted`
- item two

  1. nested
  2. list

.. note:: A note {i}.

+------+------+
| a    | b    |
+======+======+
| {i}  | x    |
+------+------+

::

    literal block {i}

.. [#f{i}] Footnote {i}.

term {i}
    definition {i}
""")
html = publish_string("".join(parts), writer_name="html5",
                      settings_overrides={"report_level": 5})
print(len(html))
'''


def test_docutils_call_counts_equal_cprofile(tmp_path):
    import docutils

    root = os.path.dirname(docutils.__file__)
    counts = compare(tmp_path, DOCUTILS, ["40"],
                     lambda f: f.startswith(root) or os.path.basename(f) == "prog.py")
    # A real run: thousands of docutils calls, ViewList.__getitem__ among them.
    assert sum(counts.values()) > 100000, sum(counts.values())
    getitem = sum(n for (f, _, name), n in counts.items()
                  if name == "__getitem__" and f.endswith("statemachine.py"))
    assert getitem > 1000, getitem
