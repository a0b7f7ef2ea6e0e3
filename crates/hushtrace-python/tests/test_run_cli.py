"""`python -m hushtrace run` and `hushtrace record` running Python: the program's options
are the program's, an output directory holding a trace is refused unless --append or --force
(as `hushtrace record` does), --help shows the defaults, and `record` with an interpreter
that cannot import the package says how to fix it and fails."""

import json
import os
import subprocess
import sys
import venv

from conftest import chrome, clean_env, cli, write_script

SHOW_ARGV = "import json, sys\nprint(json.dumps(sys.argv))\n"


def run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "hushtrace", "run", *args],
                          capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
                          timeout=300)


def argv_of(r):
    assert r.returncode == 0, r.stderr
    return json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("[")][-1])


def test_options_after_the_module_are_the_modules(tmp_path):
    write_script(tmp_path, SHOW_ARGV, name="showargs.py")
    r = run(tmp_path, "-o", "t", "-m", "showargs", "-q", "-", "--mode", "x", "-o", "y")
    assert argv_of(r)[1:] == ["-q", "-", "--mode", "x", "-o", "y"]
    assert os.listdir(tmp_path / "t"), "no trace"
    r = run(tmp_path, "-o", "t2", "--mode=overwrite", "-mshowargs", "--c-calls")
    assert argv_of(r)[1:] == ["--c-calls"]


def test_options_after_the_script_are_the_scripts(tmp_path):
    script = write_script(tmp_path, SHOW_ARGV)
    r = run(tmp_path, "-o", "t", "--include", "__main__", str(script), "-q", "--help", "-m",
            "x")
    assert argv_of(r) == [str(script), "-q", "--help", "-m", "x"]
    r = run(tmp_path, "-o", "t3", "--", str(script), "-o")
    assert argv_of(r) == [str(script), "-o"]


def test_an_output_directory_holding_a_trace_needs_append_or_force(tmp_path):
    script = write_script(tmp_path, "print('hi')\n")
    assert run(tmp_path, "-o", "t", str(script)).returncode == 0
    first = sorted(os.listdir(tmp_path / "t"))
    r = run(tmp_path, "-o", "t", str(script))
    assert r.returncode == 2 and "already holds a trace" in r.stderr, r.stderr
    assert "--force" in r.stderr and "--append" in r.stderr
    assert sorted(os.listdir(tmp_path / "t")) == first  # untouched
    (tmp_path / "t" / "notes.txt").write_text("mine")
    r = run(tmp_path, "-o", "t", "--append", str(script))
    assert r.returncode == 0, r.stderr
    procs = [n for n in os.listdir(tmp_path / "t") if n.isdigit()]
    assert len(procs) == 2, procs
    r = run(tmp_path, "-o", "t", "--force", str(script))
    assert r.returncode == 0, r.stderr
    left = sorted(os.listdir(tmp_path / "t"))
    assert len([n for n in left if n.isdigit()]) == 1 and "notes.txt" in left, left
    r = run(tmp_path, "-o", "t", "--force", "--append", str(script))
    assert r.returncode == 2 and "not allowed with" in r.stderr, r.stderr


def test_bad_run_arguments(tmp_path):
    script = write_script(tmp_path, "print('hi')\n")
    (tmp_path / "afile").write_text("")
    for args, want in [
        (["-o", "afile", str(script)], "not a directory"),
        (["-o", "", str(script)], "empty"),
        (["--max-stack-depth", "-1", str(script)], "at least 1"),
        (["--max-stack-depth", "x", str(script)], "invalid int"),
        (["--include", "", str(script)], "not a glob"),
        (["-o", "t"], "give a script or -m MODULE"),
        (["-o", "t", "-m"], "expected one argument"),
        (["-o", "t", "missing.py"], "no such script"),
        (["-o", "t", "-m", "no_such_module_here"], "no module named 'no_such_module_here'"),
    ]:
        r = run(tmp_path, *args)
        assert r.returncode == 2 and want in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "t").exists()


def test_help_shows_the_defaults(tmp_path):
    r = run(tmp_path, "--help")
    assert r.returncode == 0
    for text in ["(default: hushtrace-trace)", "(default: discard", "--append", "--force",
                 "default: no limit", "are the program's"]:
        assert text in " ".join(r.stdout.split()), (text, r.stdout)


def test_record_with_an_interpreter_without_the_package_says_how_to_fix_it(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    py = bare / "bin" / "python"
    assert subprocess.run([py, "-c", "import hushtrace"], capture_output=True).returncode != 0
    r = subprocess.run([cli(), "record", "-o", str(tmp_path / "t"), "--", str(py), "-c",
                        "print('ran')"], capture_output=True, text=True, env=clean_env())
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "ran" in r.stdout
    assert "cannot import the hushtrace Python package" in r.stderr, r.stderr
    assert str(py) in r.stderr and "pip install" in r.stderr and "venv" in r.stderr
    assert "start_from_env" not in r.stdout + r.stderr

    # The interpreter of these tests has it: traced, exit 0.
    r = subprocess.run([cli(), "record", "-o", str(tmp_path / "t2"), "--", sys.executable,
                        "-c", "def f(): pass\nf()"], capture_output=True, text=True,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    assert any(e.get("name") == "f" for e in chrome(tmp_path / "t2", tmp_path))
