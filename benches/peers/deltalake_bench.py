"""The delta-rs side of the storage benchmarks (the `deltalake` Python package).

Usage:
  deltalake_bench.py write INPUT.parquet TABLE_DIR   load INPUT into memory, time one write_deltalake
  deltalake_bench.py open TABLE_DIR REPEAT            time DeltaTable(TABLE_DIR) (best of REPEAT)

Prints one JSON line: seconds, peak_rss_mb, ... (as sluice-bench does).
"""
import json
import resource
import sys
import time

import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    mode = sys.argv[1]
    if mode == "write":
        data = pq.read_table(sys.argv[2])
        started = time.perf_counter()
        write_deltalake(sys.argv[3], data)
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "rows": data.num_rows}))
    elif mode == "open":
        best = float("inf")
        version = None
        for _ in range(int(sys.argv[3])):
            started = time.perf_counter()
            table = DeltaTable(sys.argv[2])
            version = table.version()
            best = min(best, time.perf_counter() - started)
        print(json.dumps({"seconds": best, "peak_rss_mb": peak_rss_mb(), "version": version}))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
