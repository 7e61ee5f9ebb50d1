"""The peers of Sluice's file-ingestion benchmark: the same folder of CSV files (written by
`sluice-bench files-gen`) loaded by DuckDB (`INSERT INTO t SELECT * FROM read_csv('dir/*.csv')`
into a file database) or written to a Delta table by the deltalake package (pyarrow's CSV reader
feeding `write_deltalake`).

usage: files_ingest.py duckdb|deltalake INPUT_DIR WORK_DIR
Prints one JSON line: seconds, rows, rows per second, checksum, peak RSS.
"""
import json
import resource
import sys
import time
from pathlib import Path


def duckdb_run(input_dir: Path, work: Path) -> dict:
    import duckdb
    con = duckdb.connect(str(work / "files.duckdb"))
    con.execute("CREATE TABLE t (id BIGINT, a BIGINT, b BIGINT, c DOUBLE, s VARCHAR, ts TIMESTAMP, flag BOOLEAN, d BIGINT)")
    started = time.perf_counter()
    con.execute(f"INSERT INTO t SELECT * FROM read_csv('{input_dir}/*.csv')")
    seconds = time.perf_counter() - started
    rows, checksum = con.execute("SELECT count(*), sum(a) + sum(d) FROM t").fetchone()
    return {"version": duckdb.__version__, "seconds": seconds, "rows": rows, "checksum": int(checksum)}


def deltalake_run(input_dir: Path, work: Path) -> dict:
    import deltalake
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake
    path = str(work / "delta")
    started = time.perf_counter()
    dataset = ds.dataset(str(input_dir), format="csv", exclude_invalid_files=True)
    files = [f for f in dataset.files if f.endswith(".csv")]
    dataset = ds.dataset(files, format="csv")
    write_deltalake(path, dataset.scanner(batch_size=65_536).to_reader(), mode="overwrite")
    seconds = time.perf_counter() - started
    table = DeltaTable(path).to_pyarrow_table(columns=["a", "d"])
    import pyarrow.compute as pc
    checksum = pc.sum(table.column("a")).as_py() + pc.sum(table.column("d")).as_py()
    return {"version": deltalake.__version__, "seconds": seconds, "rows": table.num_rows, "checksum": int(checksum)}


def main() -> None:
    peer, input_dir, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    result = {"duckdb": duckdb_run, "deltalake": deltalake_run}[peer](input_dir, work)
    result["rows_per_second"] = result["rows"] / result["seconds"]
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()
