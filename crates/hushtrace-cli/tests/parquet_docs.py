"""Runs every ```sql block of docs/sql.md with DuckDB over an exported folder (every `OUT`
replaced by it) and prints, as JSON, each query's first line and rows (tests/parquet.rs).

    parquet_docs.py OUT DOCS_SQL_MD [kernel]

Queries whose first line is `-- needs: kernel` need a kernel trace's tables: they run only
with `kernel`, and the others only without it.
"""

import json
import sys

import duckdb

out, doc = sys.argv[1:3]
kernel = sys.argv[3:4] == ["kernel"]
with open(doc) as f:
    text = f.read()
blocks = []
inside = None
for line in text.splitlines():
    if inside is None and line.strip() == "```sql":
        inside = []
    elif inside is not None and line.strip() == "```":
        blocks.append("\n".join(inside))
        inside = None
    elif inside is not None:
        inside.append(line)
con = duckdb.connect()
results = []
for sql in blocks:
    if sql.startswith("-- needs: kernel") != kernel:
        continue
    try:
        rows = con.execute(sql.replace("OUT", out)).fetchall()
    except Exception as e:  # the query and the error, for the test's message
        print(f"docs/sql.md query failed: {e}\n{sql}", file=sys.stderr)
        sys.exit(1)
    first = [l for l in sql.splitlines() if not l.startswith("--")][0]
    results.append({"query": first, "rows": [list(r) for r in rows]})
print(json.dumps(results, default=str))
