#!/usr/bin/env bash
# Builds and installs the Python package (crates/hushtrace-python) into one venv per CPython
# version and runs its pytest suite there, against this repo's hushtrace CLI.
#
#   bash ci/python.sh                 # 3.11 (Debian's /usr/bin/python3, else pyenv's) and
#                                     # 3.12+ (pyenv: 3.13.0, else 3.12.x)
#   HUSHTRACE_PYTHONS="/path/python3.11 /path/python3.13" bash ci/python.sh
#
# Exits non-zero when an install or a test fails, or when pytest collects no test (exit 5).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

pick() { for p in "$@"; do if [ -x "$p" ]; then echo "$p"; return 0; fi; done; return 1; }

if [ -n "${HUSHTRACE_PYTHONS:-}" ]; then
    read -r -a pythons <<<"$HUSHTRACE_PYTHONS"
else
    pythons=()
    py311="$(pick /usr/bin/python3.11 "$HOME"/.pyenv/versions/3.11*/bin/python3 || true)"
    # Debian's python3 needs python3-venv for `python3 -m venv`.
    if [ "$py311" = /usr/bin/python3.11 ] && ! /usr/bin/python3.11 -c 'import ensurepip' 2>/dev/null; then
        apt-get install -y -q python3-venv >&2 || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; } || true
    fi
    [ -n "$py311" ] && pythons+=("$py311")
    py3n="$(pick "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3 || true)"
    [ -n "$py3n" ] && pythons+=("$py3n")
fi
if [ "${#pythons[@]}" -eq 0 ]; then
    echo "ci/python.sh: no CPython 3.9+ found (looked for /usr/bin/python3.11 and pyenv's)" >&2
    exit 1
fi

nice -n 10 cargo build -q -p hushtrace-cli -p hushtrace-c  # the CLI, and libhushtrace.so for the C-library test
export HUSHTRACE_CLI="$root/target/debug/hushtrace"
# The Perfetto protos venv (decodes `convert --to perfetto` output in the tests).
HUSHTRACE_PERFETTO_PYTHON="$(bash ci/perfetto-venv.sh | tail -n 1)"
export HUSHTRACE_PERFETTO_PYTHON

status=0
for py in "${pythons[@]}"; do
    ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    venv="$root/target/python-venvs/$ver"
    echo "=== CPython $ver ($py): $venv" >&2
    if [ ! -x "$venv/bin/python" ]; then
        rm -rf "$venv"
        "$py" -m venv "$venv"
    fi
    # pytest; docutils (a real program the exactness tests trace, tests/test_exact.py) and
    # coverage.py (a tool that must keep working beside hushtrace, tests/test_behaviour.py).
    "$venv/bin/python" -m pip install -q --disable-pip-version-check pytest \
        docutils==0.21.2 coverage==7.6.1
    # PYO3_PYTHON: build the extension for this interpreter.
    PYO3_PYTHON="$venv/bin/python" "$venv/bin/python" -m pip install -q \
        --disable-pip-version-check --force-reinstall --no-deps ./crates/hushtrace-python
    set +e
    (cd "$root/crates/hushtrace-python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests)
    rc=$?
    set -e
    if [ "$rc" -eq 5 ]; then
        echo "ci/python.sh: pytest collected no test on CPython $ver" >&2
        status=1
    elif [ "$rc" -ne 0 ]; then
        echo "ci/python.sh: tests failed on CPython $ver (pytest exit $rc)" >&2
        status=1
    fi
done
exit "$status"
