"""`python -m hushtrace view DIR` (issue 32.6): the package hands over to the hushtrace command's
`view` ($HUSHTRACE_CLI, else `hushtrace` on PATH), which serves a trace recorded by
`python -m hushtrace run` to the Perfetto UI once and ends; fetched here with urllib."""

import os
import subprocess
import sys
import urllib.request

from conftest import clean_env, cli, run_traced

UI = "https://ui.perfetto.dev"

PROGRAM = """
def work(n):
    return sum(range(n))

for i in range(20):
    work(1000)
"""


def view(tmp_path, *args, **env):
    return subprocess.Popen([sys.executable, "-m", "hushtrace", "view", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env(**env), cwd=tmp_path)


def test_view_serves_the_perfetto_trace_once(tmp_path):
    trace, _ = run_traced(tmp_path, PROGRAM)
    ref = subprocess.run([cli(), "convert", str(trace), "--to", "perfetto", "-o", "-", "-q"],
                         capture_output=True, check=True, timeout=300).stdout
    p = view(tmp_path, str(trace), "--no-browser", "--port", "0", HUSHTRACE_CLI=cli())
    try:
        link = p.stdout.readline().strip()
        assert link.startswith(f"{UI}/#!/?url=http://127.0.0.1:"), \
            (link, "" if link else p.stderr.read())
        # The package's process became the command (exec): nothing stands between them.
        assert os.path.realpath(f"/proc/{p.pid}/exe") == os.path.realpath(cli())
        url = link.split("url=", 1)[1]
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(urllib.request.Request(url, headers={"Origin": UI}), timeout=60) as r:
            assert r.status == 200
            assert r.headers["Access-Control-Allow-Origin"] == UI
            assert r.headers["Content-Type"] == "application/octet-stream"
            assert int(r.headers["Content-Length"]) == len(ref)
            body = r.read()
        assert body == ref
        assert p.wait(timeout=60) == 0, p.stderr.read()
        assert "the trace was sent" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_view_errors_are_clear(tmp_path):
    missing = tmp_path / "nope"
    p = view(tmp_path, str(missing), "--no-browser", HUSHTRACE_CLI=cli())
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert f"{missing}: no such file or directory" in err
    assert out == ""
    # No hushtrace command to run: said, with how to get one.
    p = view(tmp_path, str(missing), PATH=str(tmp_path))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert "view needs the hushtrace command" in err and "HUSHTRACE_CLI" in err
