"""Runs one SQL query with DuckDB over a `hushtrace convert --to parquet` folder and prints
its rows as JSON (tests/parquet.rs).

    parquet_query.py OUT SQL     # every `OUT` in SQL is replaced by the folder
"""

import json
import sys

import duckdb

out, sql = sys.argv[1:3]
rows = duckdb.connect().execute(sql.replace("OUT", out)).fetchall()
print(json.dumps([list(r) for r in rows], default=str))
