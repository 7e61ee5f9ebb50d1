"""DuckDB beside Sluice's materialized view benchmark: the same orders and customers (read from the
Parquet files `sluice-bench views-gen` wrote) in in-memory tables, the same kinds of delta
(1,000 new orders; 500 deleted + 500 new), and after each delta each view's query run in full
(CREATE OR REPLACE TABLE <view> AS <query>, once per round; the initial build best of 3): what keeping the view current costs
without incremental maintenance.

usage: duckdb_views.py PARQUET_DIR ROUNDS DELTA_ROWS
Prints one JSON line.
"""
import json
import resource
import statistics
import sys
import time

import duckdb

ORDERS_ROWS = 10_000_000
DELETE_STRIDE = 19_997  # as in benches/src/views.rs: deleted ids spread over the base table

VIEWS = {
    "agg_view": "SELECT customer_id, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi "
                "FROM orders GROUP BY customer_id",
    "join_view": "SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c "
                 "ON o.customer_id = c.id GROUP BY c.region",
}


def insert(con, start, count):
    """Orders start..start+count with the formulas of benches/src/views.rs."""
    con.execute(
        "INSERT INTO orders SELECT i, i * 7919 % 100000, i * 2654435761 % 4294967296 % 100000 + 1, "
        "TIMESTAMP '2024-01-01 00:00:00' + to_seconds(i) FROM range(?, ?) t(i)", [start, start + count])


def delete(con, round_, count):
    ids = [(round_ * count + j) * DELETE_STRIDE % ORDERS_ROWS for j in range(count)]
    con.execute(f"DELETE FROM orders WHERE id IN ({', '.join(map(str, ids))})")


def recompute(con, name, runs=1):
    best = None
    for _ in range(runs):
        started = time.perf_counter()
        con.execute(f"CREATE OR REPLACE TABLE {name} AS {VIEWS[name]}")
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return best


def main(parquet, rounds, delta_rows):
    con = duckdb.connect()
    started = time.perf_counter()
    con.execute(f"CREATE TABLE orders AS SELECT * FROM read_parquet('{parquet}/orders.parquet')")
    con.execute(f"CREATE TABLE customers AS SELECT * FROM read_parquet('{parquet}/customers.parquet')")
    load = time.perf_counter() - started
    build = {name: recompute(con, name, 3) for name in VIEWS}
    next_id = ORDERS_ROWS
    out = {"load_seconds": load, "build_seconds": build}
    for kind in ["inserts", "mixed"]:
        write_ms, seconds = [], {name: [] for name in VIEWS}
        for round_ in range(rounds):
            started = time.perf_counter()
            if kind == "inserts":
                insert(con, next_id, delta_rows)
                next_id += delta_rows
            else:
                delete(con, round_, delta_rows // 2)
                insert(con, next_id, delta_rows // 2)
                next_id += delta_rows // 2
            write_ms.append((time.perf_counter() - started) * 1000)
            for name in VIEWS:
                seconds[name].append(recompute(con, name))
        out[kind] = {"write_ms_median": statistics.median(write_ms),
                     "recompute_seconds_median": {name: statistics.median(s) for name, s in seconds.items()},
                     "recompute_seconds_best": {name: min(s) for name, s in seconds.items()}}
    out["orders_rows_final"] = con.execute("SELECT count(*) FROM orders").fetchone()[0]
    out["view_rows"] = {name: con.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in VIEWS}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["version"] = duckdb.__version__
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
