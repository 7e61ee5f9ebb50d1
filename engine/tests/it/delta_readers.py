"""Reads Delta tables with every everyday Python reader and compares their rows with Sluice's.

Usage: delta_readers.py SHAPE TABLE EXPECTED.parquet [SHAPE TABLE EXPECTED.parquet ...]

For each table, each reader prints one line, tab-separated: SHAPE, READER, then `ok`, `refused`
(the reader raised; its message follows) or `mismatch` (it read other rows; both follow). Values
are compared in a canonical form, so that a reader's types (pandas' NaN for a NULL integer, a
timestamp's unit or zone, a Decimal or a float) do not count as differences; a timestamp with a
zone is compared in UTC, a time of day as its microseconds since midnight (what the table stores).
"""
import datetime
import decimal
import json
import math
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def canonical(value):
    if value is None:
        return None
    try:
        import numpy as np
        import pandas as pd

        if value is pd.NaT:
            return None
        if isinstance(value, np.ndarray):
            value = value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, pd.Timestamp):
            value = value.to_pydatetime()
    except ImportError:
        pass
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() else round(value, 9)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, datetime.time):
        # A time of day is stored as a long of microseconds since midnight, which other readers
        # read; Sluice reads the time.
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return str(value)


def rows(records, columns):
    out = [json.dumps([canonical(r.get(c)) for c in columns], sort_keys=True) for r in records]
    return sorted(out)


def deltalake_to_pandas(path):
    from deltalake import DeltaTable

    return DeltaTable(path).to_pandas().to_dict("records")


def deltalake_to_pyarrow_dataset(path):
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_dataset().to_table().to_pylist()


def deltalake_query_builder(path):
    from deltalake import DeltaTable, QueryBuilder

    reader = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t")
    return pa.table(reader.read_all()).to_pylist()


def polars_read_delta(path):
    import polars as pl

    return pl.read_delta(path).to_dicts()


def polars_scan_delta(path):
    import polars as pl

    return pl.scan_delta(path).collect().to_dicts()


READERS = [
    ("deltalake.to_pandas", deltalake_to_pandas),
    ("deltalake.to_pyarrow_dataset", deltalake_to_pyarrow_dataset),
    ("deltalake.QueryBuilder", deltalake_query_builder),
    ("polars.read_delta", polars_read_delta),
    ("polars.scan_delta", polars_scan_delta),
]


def one_line(text):
    return " ".join(str(text).split())[:400]


def main():
    args = sys.argv[1:]
    for i in range(0, len(args), 3):
        shape, path, expected_path = args[i : i + 3]
        expected_table = pq.read_table(expected_path)
        columns = expected_table.column_names
        expected = rows(expected_table.to_pylist(), columns)
        for name, read in READERS:
            try:
                got = rows(read(path), columns)
            except Exception as e:  # a reader's refusal: reported, judged by the test
                print(f"{shape}\t{name}\trefused\t{one_line(type(e).__name__ + ': ' + str(e))}", flush=True)
                continue
            if got == expected:
                print(f"{shape}\t{name}\tok\t{len(got)} rows", flush=True)
            else:
                detail = f"expected {expected[:5]} ({len(expected)} rows), got {got[:5]} ({len(got)} rows)"
                print(f"{shape}\t{name}\tmismatch\t{one_line(detail)}", flush=True)


if __name__ == "__main__":
    main()
