//! Shared pieces of the benchmarks: TPC-H data generation (with the `tpchgen` crate) and the 22
//! queries in `benches/tpch/`.

pub mod tpch;
