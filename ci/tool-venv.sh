#!/usr/bin/env bash
# Creates (once) a Python virtualenv for tools the tests read traces with, and prints its
# python path on the last line. The callers name what it is for: ci/perfetto-venv.sh
# (Perfetto's protos), ci/sql-venv.sh (DuckDB and pyarrow).
#
#   bash ci/tool-venv.sh VENV 'IMPORT CHECK' 'PACKAGE SPEC'...
#
# Idempotent: a venv where the check's Python runs is kept. Tests run in parallel processes:
# one creates the venv, the others wait for it (a lock beside it).
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: ci/tool-venv.sh VENV 'IMPORT CHECK' PACKAGE..." >&2
    exit 2
fi
venv="$1"
check="$2"
shift 2
py="$venv/bin/python"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -x "$py" ] && "$py" -c "$check" 2>/dev/null; then
    echo "$py"
    exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    if command -v apt-get >/dev/null; then
        apt-get install -y -q python3-venv >&2 || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; }
    fi
fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
"$py" -m pip install -q --disable-pip-version-check "$@" >&2
"$py" -c "$check"
echo "$py"
