"""Checks a `hushtrace convert --to parquet` export against the Chrome conversion and the
report of the same trace, reading it with DuckDB and pyarrow (tests/parquet.rs runs it).

    parquet_check.py OUT HOST SESSION CHROME_JSON REPORT_JSON

Compares, for the partition OUT/host=HOST/session=SESSION:
* row counts: slices = Chrome's B + b events, instants = i, counters = C; ended slices =
  the report's span counts; losses = the report's discarded events and lost packets;
* every ended slice's (pid, tid, category, name, start, duration) with the Chrome slices
  (B/E matched per thread, b/e per process and id), to the nanosecond (absolute: Chrome's
  origin plus its relative microseconds with three decimals);
* parent links: each parent exists, is one level up, in the same process, and (thread spans)
  on the same thread and around its child;
* pyarrow reads the same rows and types as DuckDB.
Prints a JSON summary on success; exits non-zero with a message otherwise.
"""

import collections
import decimal
import json
import sys

import duckdb
import pyarrow.dataset as ds


def fail(msg):
    print("parquet_check: " + msg, file=sys.stderr)
    sys.exit(1)


def chrome_slices(doc):
    """(pid, tid or None, category, name, start_ns, dur_ns) of every ended Chrome slice, and
    the counts of B, b, i and C events."""
    origin = int(doc["otherData"]["ts_origin_unix_ns"])
    counts = collections.Counter()
    stacks = collections.defaultdict(list)
    asyncs = collections.defaultdict(list)
    out = []
    for e in doc["traceEvents"]:
        ph = e["ph"]
        if ph == "M":
            continue
        counts[ph] += 1
        # Exact: the text has at most three decimals of microseconds.
        ts = origin + int(decimal.Decimal(repr(e["ts"])) * 1000)
        if ph == "B":
            stacks[(e["pid"], e["tid"])].append((e["cat"], e["name"], ts))
        elif ph == "E":
            cat, name, start = stacks[(e["pid"], e["tid"])].pop()
            out.append((e["pid"], e["tid"], cat, name, start, ts - start))
        elif ph == "b":
            cat = e.get("args", {}).get("category", e["cat"])
            key = (e["pid"], e["id2"]["local"], e["name"])
            asyncs[key].append((cat, ts, e.get("args", {}).get("id")))
        elif ph == "e":
            key = (e["pid"], e["id2"]["local"], e["name"])
            own = e.get("args", {}).get("id")
            opened = asyncs[key]
            i = max(i for i, o in enumerate(opened) if o[2] == own)
            cat, start, _ = opened.pop(i)
            out.append((e["pid"], None, cat, e["name"], start, ts - start))
    return out, counts


def main():
    out, host, session, chrome_path, report_path = sys.argv[1:6]
    with open(chrome_path) as f:
        chrome = json.load(f)
    with open(report_path) as f:
        report = json.load(f)
    con = duckdb.connect()
    part = f"{out}/host={host}/session={session}"

    def table(name):
        return f"read_parquet('{part}/{name}.parquet')"

    def one(sql):
        return con.execute(sql).fetchone()

    want, counts = chrome_slices(chrome)
    summary = {}
    n_slices = one(f"select count(*) from {table('slices')}")[0]
    if n_slices != counts["B"] + counts["b"]:
        fail(f"slices {n_slices} != Chrome B {counts['B']} + b {counts['b']}")
    for t, ph in [("instants", "i"), ("counters", "C")]:
        n = one(f"select count(*) from {table(t)}")[0]
        if n != counts[ph]:
            fail(f"{t} {n} != Chrome {ph} events {counts[ph]}")
        summary[t] = n
    ended = one(f"select count(*) from {table('slices')} where dur_ns is not null")[0]
    rep = sum(s["count"] for s in report["spans"])
    if ended != rep:
        fail(f"ended slices {ended} != the report's span count {rep}")
    summary["slices"] = n_slices
    summary["ended"] = ended

    rows = con.execute(
        f"select pid, case when kind = 'span' then tid end, category, name, start_ns, dur_ns "
        f"from {table('slices')} where dur_ns is not null"
    ).fetchall()
    got = collections.Counter(tuple(r) for r in rows)
    exp = collections.Counter(want)
    if got != exp:
        missing = list((exp - got).elements())[:5]
        extra = list((got - exp).elements())[:5]
        fail(f"slices differ from Chrome's: missing {missing}, extra {extra}")

    bad = one(
        f"""select count(*) from {table('slices')} c
            left join {table('slices')} p on c.parent_id = p.slice_id
            where c.parent_id is not null and (
              p.slice_id is null or p.depth + 1 != c.depth or p.pid != c.pid
              or (c.kind = 'span' and (p.tid != c.tid or c.start_ns < p.start_ns
                  or (p.dur_ns is not null and c.dur_ns is not null
                      and c.start_ns + c.dur_ns > p.start_ns + p.dur_ns))))"""
    )[0]
    if bad:
        fail(f"{bad} slices with a bad parent link")
    roots_bad = one(
        f"select count(*) from {table('slices')} where (parent_id is null) != (depth = 0)"
    )[0]
    if roots_bad:
        fail(f"{roots_bad} slices whose depth disagrees with having a parent")
    dup = one(f"select count(*) - count(distinct slice_id) from {table('slices')}")[0]
    if dup:
        fail(f"{dup} duplicate slice ids")
    summary["with_parent"] = one(
        f"select count(*) from {table('slices')} where parent_id is not null"
    )[0]

    discarded = sum(p["discarded"] for p in report["processes"])
    lost = sum(p["lost_packets"] for p in report["processes"])
    d, l = one(
        f"select coalesce(sum(discarded_events), 0), coalesce(sum(lost_packets), 0) "
        f"from {table('losses')}"
    )
    if (d, l) != (discarded, lost):
        fail(f"losses ({d}, {l}) != the report's (discarded {discarded}, lost {lost})")
    summary["discarded"] = d
    summary["lost_packets"] = l
    tn = one(f"select count(*) from {table('threads')}")[0]
    rt = sum(len(p["threads"]) for p in report["processes"])
    if tn != rt:
        fail(f"threads {tn} != the report's {rt}")
    te = one(f"select coalesce(sum(events), 0) from {table('threads')}")[0]
    if te != report["events"]:
        fail(f"threads' events {te} != the report's {report['events']}")
    per = {
        (p["pid"], t["tid"]): t["events"] for p in report["processes"] for t in p["threads"]
    }
    got_per = {
        (r[0], r[1]): r[2]
        for r in con.execute(f"select pid, tid, events from {table('threads')}").fetchall()
    }
    if got_per != per:
        fail(f"events per thread {got_per} != the report's {per}")
    pn = one(f"select count(*) from {table('processes')}")[0]
    if pn != len(report["processes"]):
        fail(f"processes {pn} != the report's {len(report['processes'])}")

    # pyarrow: the whole folder as one Hive-partitioned dataset per table.
    for t in ["slices", "instants", "counters", "threads", "processes", "losses"]:
        files = [f"{part}/{t}.parquet"]
        d = ds.dataset(files, format="parquet", partitioning="hive")
        n = d.count_rows()
        m = one(f"select count(*) from {table(t)}")[0]
        if n != m:
            fail(f"pyarrow reads {n} rows of {t}, DuckDB {m}")
    sl = ds.dataset(f"{part}/slices.parquet", format="parquet").to_table()
    if str(sl.schema.field("start_ns").type) != "int64":
        fail(f"start_ns is {sl.schema.field('start_ns').type}")
    starts = sorted(sl.column("start_ns").to_pylist())
    if starts != sorted(r[0] for r in con.execute(f"select start_ns from {table('slices')}").fetchall()):
        fail("pyarrow and DuckDB read different start_ns")
    print(json.dumps(summary))


main()
