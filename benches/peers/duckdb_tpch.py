"""DuckDB's side of TPC-H: the same Parquet files, the same 22 queries.

Usage:
  duckdb_tpch.py answers PARQUET_DIR QUERIES_DIR     print every query's rows as JSON
  duckdb_tpch.py bench PARQUET_DIR QUERIES_DIR REPEAT print each query's best time (seconds) as JSON
"""
import decimal
import json
import os
import sys
import time

import duckdb

TABLES = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]


def connect(parquet_dir: str):
    con = duckdb.connect()
    con.execute(f"SET threads TO {os.cpu_count()}")
    for table in TABLES:
        path = os.path.join(parquet_dir, f"{table}.parquet")
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
    return con


def text(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (float, decimal.Decimal)):
        return f"{float(value):.2f}"
    return str(value).strip()


def main() -> None:
    mode, parquet_dir, queries_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    con = connect(parquet_dir)
    queries = {n: open(os.path.join(queries_dir, f"q{n}.sql")).read() for n in range(1, 23)}
    if mode == "answers":
        out = {n: [[text(v) for v in row] for row in con.execute(sql).fetchall()] for n, sql in queries.items()}
        print(json.dumps(out))
    elif mode == "bench":
        repeat = int(sys.argv[4])
        out = {}
        for n, sql in queries.items():
            best = float("inf")
            for _ in range(repeat):
                started = time.perf_counter()
                con.execute(sql).fetchall()
                best = min(best, time.perf_counter() - started)
            out[n] = best
        print(json.dumps(out))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
