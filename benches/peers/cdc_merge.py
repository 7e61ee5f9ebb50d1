"""The peers of Sluice's CDC benchmark: the same change batches (written by `sluice-bench
cdc-gen`) applied to the same 10M-row target with DuckDB's MERGE INTO (a file database) or with
the deltalake package's merge (a Delta table on disk), each batch timed on its own.

usage: cdc_merge.py duckdb|deltalake INPUT_DIR WORK_DIR BATCHES
Prints one JSON line: median seconds per batch, every batch's seconds, rows and checksum after the
batches, and the peak RSS.
"""
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

COLUMNS = ["id", "a", "b", "c", "s", "ts", "flag", "d"]


def duckdb_run(input_dir: Path, work: Path, batches: int) -> dict:
    import duckdb
    con = duckdb.connect(str(work / "cdc.duckdb"))
    started = time.perf_counter()
    con.execute(f"CREATE TABLE target AS SELECT * FROM read_parquet('{input_dir / 'base.parquet'}')")
    load = time.perf_counter() - started
    sets = ", ".join(f"{c} = s.{c}" for c in COLUMNS if c != "id")
    values = ", ".join(f"s.{c}" for c in COLUMNS)
    times = []
    for i in range(batches):
        events = pq.read_table(input_dir / f"events-{i}.parquet")
        con.register("events", events)
        started = time.perf_counter()
        con.execute(
            f"MERGE INTO target USING events AS s ON target.id = s.id "
            f"WHEN MATCHED AND s.op = 'D' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT ({', '.join(COLUMNS)}) VALUES ({values})")
        times.append(time.perf_counter() - started)
        con.unregister("events")
    rows, checksum = con.execute("SELECT count(*), sum(a) + sum(d) FROM target").fetchone()
    return {"version": duckdb.__version__, "times": times, "load_seconds": load, "rows": rows,
            "checksum": float(checksum)}


def deltalake_run(input_dir: Path, work: Path, batches: int) -> dict:
    import deltalake
    from deltalake import DeltaTable, write_deltalake
    path = str(work / "delta")
    started = time.perf_counter()
    base = pq.ParquetFile(input_dir / "base.parquet")
    reader = pa.RecordBatchReader.from_batches(base.schema_arrow, base.iter_batches(batch_size=1_000_000))
    write_deltalake(path, reader, mode="overwrite")
    load = time.perf_counter() - started
    updates = {c: f"s.{c}" for c in COLUMNS if c != "id"}
    inserts = {c: f"s.{c}" for c in COLUMNS}
    times = []
    for i in range(batches):
        events = pq.read_table(input_dir / f"events-{i}.parquet")
        started = time.perf_counter()
        (DeltaTable(path).merge(source=events, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.op = 'D'")
            .when_matched_update(updates=updates)
            .when_not_matched_insert(updates=inserts, predicate="s.op <> 'D'")
            .execute())
        times.append(time.perf_counter() - started)
    import pyarrow.compute as pc
    table = DeltaTable(path).to_pyarrow_table(columns=["a", "d"])
    checksum = pc.sum(table["a"]).as_py() + pc.sum(table["d"]).as_py()
    return {"version": deltalake.__version__, "times": times, "load_seconds": load, "rows": table.num_rows,
            "checksum": float(checksum)}


def main() -> None:
    peer, input_dir, work, batches = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    work.mkdir(parents=True, exist_ok=True)
    result = {"duckdb": duckdb_run, "deltalake": deltalake_run}[peer](input_dir, work, batches)
    result["seconds"] = statistics.median(result["times"])
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()
