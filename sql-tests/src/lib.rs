//! The sqllogictest drivers for Sluice: runs `sql-tests/*.slt` against a fresh database per file,
//! in-process (here) and over the Postgres wire protocol ([`pg`]).
//!
//! Values print as DataFusion's suite prints them: `NULL`, `(empty)` for the empty string,
//! `true`/`false`, and Arrow's display for everything else. Column types are not checked.

pub mod pg;

use arrow::array::RecordBatch;
use arrow::datatypes::DataType;
use sluice::{Database, StatementResult};
use sqllogictest::{DBOutput, DefaultColumnType};

/// One test database (a fresh warehouse in a temporary folder).
pub struct SluiceDb {
    pub db: Database,
    _dir: tempfile::TempDir,
}

impl SluiceDb {
    pub async fn new() -> Result<Self, sluice::Error> {
        let dir = tempfile::tempdir().map_err(|e| sluice::Error::Internal(e.to_string()))?;
        let db = Database::open(dir.path().to_str().unwrap_or(".")).await?;
        Ok(Self { db, _dir: dir })
    }
}

fn column_type(data_type: &DataType) -> DefaultColumnType {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => DefaultColumnType::Integer,
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _) => {
            DefaultColumnType::FloatingPoint
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DefaultColumnType::Text,
        _ => DefaultColumnType::Any,
    }
}

/// Formats rows the way the .slt files expect them: `NULL`, and `(empty)` for the empty string.
pub fn format_rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut rows = sluice_server::format::cells(batches, "NULL");
    for cell in rows.iter_mut().flatten() {
        if cell.is_empty() {
            *cell = "(empty)".to_string();
        }
    }
    rows
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for SluiceDb {
    type Error = sluice::Error;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let mut results = self.db.execute(sql).await?;
        match results.pop() {
            Some(StatementResult::Rows { schema, batches } | StatementResult::Returned { schema, batches, .. }) => {
                Ok(DBOutput::Rows {
                    types: schema.fields().iter().map(|f| column_type(f.data_type())).collect(),
                    rows: format_rows(&batches),
                })
            }
            Some(StatementResult::Command { rows, .. }) => Ok(DBOutput::StatementComplete(rows.unwrap_or(0))),
            None => Ok(DBOutput::StatementComplete(0)),
        }
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "sluice"
    }

    fn error_sql_state(err: &Self::Error) -> Option<String> {
        Some(err.sqlstate().to_string())
    }
}
