//! TPC-H data and queries.
//!
//! Rows come from the `tpchgen` crate (a port of the official dbgen) in its `|`-separated text
//! form, parsed by Arrow's CSV reader into the column types below, and written as one Parquet
//! file per table. Both Sluice and the peers read those files, so they run on identical data.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The tables, in load order.
pub const TABLES: [&str; 8] = ["nation", "region", "part", "supplier", "partsupp", "customer", "orders", "lineitem"];

/// Rows parsed per batch.
const BATCH_ROWS: usize = 65_536;

fn decimal() -> DataType {
    DataType::Decimal128(15, 2)
}

/// The columns of a table (name, type).
pub fn columns(table: &str) -> Vec<(&'static str, DataType)> {
    use DataType::{Date32, Int32, Int64, Utf8};
    match table {
        "nation" => vec![("n_nationkey", Int64), ("n_name", Utf8), ("n_regionkey", Int64), ("n_comment", Utf8)],
        "region" => vec![("r_regionkey", Int64), ("r_name", Utf8), ("r_comment", Utf8)],
        "part" => vec![
            ("p_partkey", Int64),
            ("p_name", Utf8),
            ("p_mfgr", Utf8),
            ("p_brand", Utf8),
            ("p_type", Utf8),
            ("p_size", Int32),
            ("p_container", Utf8),
            ("p_retailprice", decimal()),
            ("p_comment", Utf8),
        ],
        "supplier" => vec![
            ("s_suppkey", Int64),
            ("s_name", Utf8),
            ("s_address", Utf8),
            ("s_nationkey", Int64),
            ("s_phone", Utf8),
            ("s_acctbal", decimal()),
            ("s_comment", Utf8),
        ],
        "partsupp" => vec![
            ("ps_partkey", Int64),
            ("ps_suppkey", Int64),
            ("ps_availqty", Int32),
            ("ps_supplycost", decimal()),
            ("ps_comment", Utf8),
        ],
        "customer" => vec![
            ("c_custkey", Int64),
            ("c_name", Utf8),
            ("c_address", Utf8),
            ("c_nationkey", Int64),
            ("c_phone", Utf8),
            ("c_acctbal", decimal()),
            ("c_mktsegment", Utf8),
            ("c_comment", Utf8),
        ],
        "orders" => vec![
            ("o_orderkey", Int64),
            ("o_custkey", Int64),
            ("o_orderstatus", Utf8),
            ("o_totalprice", decimal()),
            ("o_orderdate", Date32),
            ("o_orderpriority", Utf8),
            ("o_clerk", Utf8),
            ("o_shippriority", Int32),
            ("o_comment", Utf8),
        ],
        _ => vec![
            ("l_orderkey", Int64),
            ("l_partkey", Int64),
            ("l_suppkey", Int64),
            ("l_linenumber", Int32),
            ("l_quantity", decimal()),
            ("l_extendedprice", decimal()),
            ("l_discount", decimal()),
            ("l_tax", decimal()),
            ("l_returnflag", Utf8),
            ("l_linestatus", Utf8),
            ("l_shipdate", Date32),
            ("l_commitdate", Date32),
            ("l_receiptdate", Date32),
            ("l_shipinstruct", Utf8),
            ("l_shipmode", Utf8),
            ("l_comment", Utf8),
        ],
    }
}

pub fn schema(table: &str) -> SchemaRef {
    Arc::new(Schema::new(columns(table).into_iter().map(|(n, t)| Field::new(n, t, false)).collect::<Vec<_>>()))
}

/// `CREATE TABLE` for a table in Sluice's SQL.
pub fn create_table_sql(table: &str) -> String {
    let columns: Vec<String> = columns(table)
        .into_iter()
        .map(|(name, data_type)| {
            let sql = match data_type {
                DataType::Int64 => "bigint",
                DataType::Int32 => "int",
                DataType::Date32 => "date",
                DataType::Decimal128(_, _) => "numeric(15,2)",
                _ => "text",
            };
            format!("{name} {sql} NOT NULL")
        })
        .collect();
    format!("CREATE TABLE {table} ({})", columns.join(", "))
}

fn lines(table: &str, scale_factor: f64) -> Box<dyn Iterator<Item = String>> {
    use tpchgen::generators::*;
    match table {
        "nation" => Box::new(NationGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "region" => Box::new(RegionGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "part" => Box::new(PartGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "supplier" => Box::new(SupplierGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "partsupp" => Box::new(PartSuppGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "customer" => Box::new(CustomerGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        "orders" => Box::new(OrderGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
        _ => Box::new(LineItemGenerator::new(scale_factor, 1, 1).iter().map(|r| r.to_string())),
    }
}

/// Generates a table's rows as batches.
pub fn generate(
    table: &str,
    scale_factor: f64,
    mut sink: impl FnMut(RecordBatch) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let target = schema(table);
    // Every line ends with '|': read it as one more, empty column and drop it.
    let mut fields: Vec<Field> = target.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("__end", DataType::Utf8, true));
    let with_end = Arc::new(Schema::new(fields));
    let mut text = String::new();
    let mut count = 0;
    let mut flush = |text: &mut String| -> Result<(), Box<dyn std::error::Error>> {
        if text.is_empty() {
            return Ok(());
        }
        let reader = arrow::csv::ReaderBuilder::new(with_end.clone())
            .with_delimiter(b'|')
            .with_header(false)
            .with_batch_size(BATCH_ROWS)
            .build(std::io::Cursor::new(text.as_bytes()))?;
        for batch in reader {
            let batch = batch?;
            let columns = batch.columns()[..target.fields().len()].to_vec();
            sink(RecordBatch::try_new(target.clone(), columns)?)?;
        }
        text.clear();
        Ok(())
    };
    for line in lines(table, scale_factor) {
        text.push_str(&line);
        text.push('\n');
        count += 1;
        if count % BATCH_ROWS == 0 {
            flush(&mut text)?;
        }
    }
    flush(&mut text)
}

/// Writes every table as `<dir>/<table>.parquet` (skipping tables already there).
pub fn write_parquet(dir: &Path, scale_factor: f64) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    for table in TABLES {
        let path = dir.join(format!("{table}.parquet"));
        if path.exists() {
            continue;
        }
        let partial = dir.join(format!("{table}.parquet.partial"));
        let file = std::fs::File::create(&partial)?;
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema(table), None)?;
        generate(table, scale_factor, |batch| Ok(writer.write(&batch)?))?;
        writer.close()?;
        std::fs::rename(partial, path)?;
    }
    Ok(())
}

/// Reads one table's Parquet file.
pub fn read_parquet(dir: &Path, table: &str) -> Result<Vec<RecordBatch>, Box<dyn std::error::Error>> {
    let file = std::fs::File::open(dir.join(format!("{table}.parquet")))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?
        .with_batch_size(BATCH_ROWS)
        .build()?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// The folder of the 22 queries.
pub fn queries_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tpch")
}

/// The text of query `n` (1..=22).
pub fn query(n: usize) -> std::io::Result<String> {
    std::fs::read_to_string(queries_dir().join(format!("q{n}.sql")))
}

/// Loads Parquet files into a Sluice database (one CREATE TABLE and one insert per table).
pub async fn load(db: &sluice::Database, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    for table in TABLES {
        db.execute(&create_table_sql(table)).await?;
        let batches = read_parquet(dir, table)?;
        db.insert(table, batches).await?;
    }
    Ok(())
}

/// Result rows as text, sorted, as `peers/duckdb_tpch.py answers` prints them: numbers with two
/// decimals, NULL as `NULL`, text trimmed.
pub fn text_rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    use arrow::array::Array;
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        for row in 0..batch.num_rows() {
            let values = batch
                .columns()
                .iter()
                .map(|column| {
                    if column.is_null(row) {
                        return "NULL".to_string();
                    }
                    match column.data_type() {
                        DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _) => {
                            let value = arrow::compute::cast(&column.slice(row, 1), &DataType::Float64).ok();
                            let value = value
                                .as_ref()
                                .and_then(|v| v.as_any().downcast_ref::<arrow::array::Float64Array>())
                                .map(|v| v.value(0));
                            value.map(|v| format!("{v:.2}")).unwrap_or_default()
                        }
                        _ => ArrayFormatter::try_new(column.as_ref(), &options)
                            .map(|f| f.value(row).to_string().trim().to_string())
                            .unwrap_or_default(),
                    }
                })
                .collect();
            rows.push(values);
        }
    }
    rows.sort();
    rows
}
