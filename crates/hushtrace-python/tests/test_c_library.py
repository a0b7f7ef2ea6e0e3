"""A C library traced with hushtrace's C interface, loaded by a traced Python program, records
into the same session: one process, one trace."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, babeltrace_clean, check_balanced, chrome, clean_env

PLUGIN = r"""
#include <hushtrace.h>
int plugin_run(int n) {
    int i;
    HT_SPAN_BEGIN("plugin", "run", HT_I64("n", n));
    for (i = 0; i < n; i++) HT_EVENT("plugin", "hit", HT_I64("i", i));
    HT_SPAN_END("plugin", "run");
    return n;
}
"""


def test_c_library_records_into_the_python_session(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    libdir = ROOT / "target" / "debug"
    if not (libdir / "libhushtrace.so").exists():
        pytest.fail("no target/debug/libhushtrace.so: run 'cargo build -p hushtrace-c' first")
    # The library's SONAME is versioned (libhushtrace.so.<ABI>), which cargo's output
    # directory has no link for: the loader looks for the versioned name, as an install has it.
    libs = tmp_path / "lib"
    libs.mkdir()
    (libs / "libhushtrace.so").symlink_to(libdir / "libhushtrace.so")
    dynamic = subprocess.run(["objdump", "-p", str(libdir / "libhushtrace.so")],
                             capture_output=True, text=True, check=True).stdout
    soname = next((l.split()[1] for l in dynamic.splitlines() if l.split()[:1] == ["SONAME"]),
                  None)
    if soname and soname != "libhushtrace.so":
        (libs / soname).symlink_to(libdir / "libhushtrace.so")
    libdir = libs
    src = tmp_path / "plugin.c"
    src.write_text(PLUGIN)
    lib = tmp_path / "libplugin.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I", str(ROOT / "crates/hushtrace-c/include"),
                    str(src), "-L", str(libdir), "-lhushtrace", "-o", str(lib)], check=True)
    prog = tmp_path / "p.py"
    prog.write_text(textwrap.dedent(f"""
        import ctypes, hushtrace, json, os, sys, threading
        hushtrace.start(sys.argv[1], functions=True)
        def call_plugin():
            return ctypes.CDLL({str(lib)!r}).plugin_run(7)
        assert call_plugin() == 7
        hushtrace.event("py", "after")
        hushtrace.stop()
        print(json.dumps({{"pid": os.getpid(), "tid": threading.get_native_id()}}))
    """))
    out = tmp_path / "trace"
    env = clean_env(LD_LIBRARY_PATH=str(libdir))
    r = subprocess.run([sys.executable, str(prog), str(out)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    import json
    me = json.loads(r.stdout.splitlines()[-1])
    # One process trace directory: the C library did not start a runtime of its own.
    assert sorted(p for p in os.listdir(out) if not p.endswith(".json")) == [str(me["pid"])]
    events = chrome(out, tmp_path)
    slices = check_balanced(events)
    hits = [e for e in events if e.get("cat") == "plugin" and e.get("name") == "hit"]
    assert len(hits) == 7
    assert {(e["pid"], e["tid"]) for e in hits} == {(me["pid"], me["tid"])}
    # The C span nests inside the Python function that called into the library.
    caller = [s for s in slices if s[3] == "call_plugin"][0]
    run = [s for s in slices if s[3] == "run" and s[2] == "plugin"][0]
    assert caller[4] <= run[4] and run[5] <= caller[5]
    babeltrace_clean(out)
