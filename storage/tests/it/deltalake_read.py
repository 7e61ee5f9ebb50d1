"""Reads a Delta table with the `deltalake` package (delta-rs) and writes what it sees as Parquet.

Usage: deltalake_read.py TABLE OUT_DIR VERSION...   (VERSION is a number or 'latest')

Each version goes to OUT_DIR/<VERSION>.parquet. The DataFusion path (QueryBuilder) is used
because it reads deletion vectors and column mapping, which to_pyarrow_table() refuses.
"""
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder


def main() -> None:
    table, out_dir, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
    for label in versions:
        version = None if label == "latest" else int(label)
        dt = DeltaTable(table, version=version)
        reader = QueryBuilder().register("t", dt).execute("SELECT * FROM t")
        data = pa.table(reader.read_all())
        pq.write_table(data, f"{out_dir}/{label}.parquet")


if __name__ == "__main__":
    main()
