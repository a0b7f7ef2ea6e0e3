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
exec bash "$root/ci/tool-venv.sh" "${1:-$root/target/sql-venv}" \
    'import duckdb, pyarrow.dataset, pyarrow.parquet' \
    'duckdb>=1.1' 'pyarrow>=14'
