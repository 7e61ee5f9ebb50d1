"""DuckDB beside Sluice's flow benchmark: the same bronze -> three silver tables pipeline, run as
three pulls (INSERT INTO silver SELECT ... FROM bronze WHERE <the new rows> ...) after each batch.

usage: duckdb_flows.py batched DB BATCHES BATCH_ROWS | duckdb_flows.py single DB ROWS
Prints one JSON line.
"""
import json
import os
import sys
import time

import duckdb
import pyarrow as pa

TOPICS = ["orders", "payments", "clicks"]

PULLS = [
    "INSERT INTO silver_orders SELECT id, key, json_extract_string(payload, '$.customer'), "
    "CAST(json_extract_string(payload, '$.amount') AS DOUBLE) FROM bronze "
    "WHERE topic = 'orders' AND id >= ? AND id < ?",
    "INSERT INTO silver_payments SELECT id, key, CAST(json_extract_string(payload, '$.paid') AS DOUBLE) FROM bronze "
    "WHERE topic = 'payments' AND id >= ? AND id < ?",
    "INSERT INTO silver_clicks SELECT id, key, json_extract_string(payload, '$.page') FROM bronze "
    "WHERE topic = 'clicks' AND id >= ? AND id < ?",
]


def rows(start, count):
    ids = list(range(start, start + count))
    payload = []
    for i in ids:
        if i % 3 == 0:
            payload.append(f'{{"customer": "c{i % 1000}", "amount": {i % 500}.25}}')
        elif i % 3 == 1:
            payload.append(f'{{"customer": "c{i % 1000}", "paid": {i % 300}.5}}')
        else:
            payload.append(f'{{"page": "/p/{i % 50}", "ms": {i % 9000}}}')
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "topic": [TOPICS[i % 3] for i in ids],
        "key": [f"k{i}" for i in ids],
        "payload": payload,
    })


def setup(path):
    for stale in [path, path + ".wal"]:
        if os.path.exists(stale):
            os.remove(stale)
    con = duckdb.connect(path)
    con.execute("CREATE TABLE bronze (id BIGINT, topic TEXT, key TEXT, payload TEXT)")
    con.execute("CREATE TABLE silver_orders (id BIGINT, order_id TEXT, customer TEXT, amount DOUBLE)")
    con.execute("CREATE TABLE silver_payments (id BIGINT, payment_id TEXT, paid DOUBLE)")
    con.execute("CREATE TABLE silver_clicks (id BIGINT, click_id TEXT, page TEXT)")
    return con


def push(con, batch, lo, hi):
    con.register("batch", batch)
    con.execute("BEGIN")
    con.execute("INSERT INTO bronze SELECT * FROM batch")
    for pull in PULLS:
        con.execute(pull, [lo, hi])
    con.execute("COMMIT")
    con.unregister("batch")


def routed(con):
    return sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ["silver_orders", "silver_payments", "silver_clicks"])


def batched(path, batches, batch_rows):
    con = setup(path)
    inputs = [rows(b * batch_rows, batch_rows) for b in range(batches)]
    started = time.perf_counter()
    for b, batch in enumerate(inputs):
        push(con, batch, b * batch_rows, (b + 1) * batch_rows)
    seconds = time.perf_counter() - started
    n = batches * batch_rows
    assert routed(con) == n
    return {"seconds": seconds, "rows": n, "rows_per_second": n / seconds}


def single(path, count):
    con = setup(path)
    inputs = [rows(i, 1) for i in range(count)]
    latencies = []
    for i, row in enumerate(inputs):
        started = time.perf_counter()
        push(con, row, i, i + 1)
        latencies.append(time.perf_counter() - started)
    assert routed(con) == count
    latencies.sort()
    return {"rows": count, "p50_ms": latencies[len(latencies) // 2] * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000}


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "batched":
        print(json.dumps(batched(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        print(json.dumps(single(sys.argv[2], int(sys.argv[3]))))
