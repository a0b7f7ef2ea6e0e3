#!/usr/bin/env bash
# Creates (once) the Python virtualenv with DuckDB and pyarrow that the Parquet export tests
# (crates/hushtrace-cli/tests/parquet.rs) and docs/sql.md's queries read the export with.
#
#   bash ci/sql-venv.sh [VENV]     # default: target/sql-venv
#
# Prints the venv's python path on the last line. Idempotent: a venv that already imports both
# is kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/target/sql-venv}"
py="$venv/bin/python"
check='import duckdb, pyarrow.dataset, pyarrow.parquet'
mkdir -p "$(dirname "$venv")"
# Tests run in parallel processes: one creates the venv, the others wait for it.
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
"$py" -m pip install -q --disable-pip-version-check 'duckdb>=1.1' 'pyarrow>=14' >&2
"$py" -c "$check"
echo "$py"
