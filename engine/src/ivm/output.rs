//! A view's current rows in memory: each distinct row with its multiplicity, and the batches
//! readers get (rebuilt lazily after a change).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::row::RowConverter;

use super::dataflow::{batch_of, converter, Delta, RowBytes};
use crate::error::{Error, Result};

/// Rows per batch handed to readers.
const OUTPUT_BATCH_ROWS: usize = 8192;

pub struct OutputStore {
    /// The view table's schema (what readers and checkpoints see).
    pub schema: SchemaRef,
    rows: RowConverter,
    counts: HashMap<RowBytes, i64>,
    cached: Option<Arc<Vec<RecordBatch>>>,
    pub total: u64,
}

impl OutputStore {
    pub fn new(schema: SchemaRef) -> Result<Self> {
        Ok(Self { rows: converter(&schema)?, schema, counts: HashMap::new(), cached: None, total: 0 })
    }

    pub fn clear(&mut self) {
        self.counts.clear();
        self.cached = None;
        self.total = 0;
    }

    /// Adds a change (its columns are cast to the view's types).
    pub fn apply(&mut self, delta: &Delta) -> Result<()> {
        if delta.is_empty() {
            return Ok(());
        }
        let batch = batch_of(&self.schema, delta.batch.columns().to_vec(), delta.len())?;
        let rows = self.rows.convert_columns(batch.columns())?;
        for (i, weight) in delta.weights.iter().enumerate() {
            let row = rows.row(i);
            let count = self.counts.entry(row.as_ref().into()).or_insert(0);
            *count += weight;
            if *count == 0 {
                self.counts.remove(row.as_ref());
            }
        }
        self.cached = None;
        Ok(())
    }

    /// The rows as batches; an internal error if a change removed a row that was not there.
    pub fn batches(&mut self) -> Result<Arc<Vec<RecordBatch>>> {
        if let Some(cached) = &self.cached {
            return Ok(cached.clone());
        }
        if let Some((_, count)) = self.counts.iter().find(|(_, c)| **c < 0) {
            return Err(Error::Internal(format!("a materialized view row has multiplicity {count}")));
        }
        let parser = self.rows.parser();
        let mut expanded: Vec<&RowBytes> = Vec::new();
        for (row, count) in &self.counts {
            for _ in 0..*count {
                expanded.push(row);
            }
        }
        let mut batches = Vec::new();
        for chunk in expanded.chunks(OUTPUT_BATCH_ROWS) {
            let columns = self.rows.convert_rows(chunk.iter().map(|r| parser.parse(r)))?;
            batches.push(batch_of(&self.schema, columns, chunk.len())?);
        }
        self.total = expanded.len() as u64;
        let batches = Arc::new(batches);
        self.cached = Some(batches.clone());
        Ok(batches)
    }

    /// Replaces the rows (a recompute, or a checkpoint read back).
    pub fn replace(&mut self, batches: &[RecordBatch]) -> Result<()> {
        self.clear();
        for batch in batches {
            self.apply(&Delta::new(batch.clone(), vec![1; batch.num_rows()]))?;
        }
        Ok(())
    }
}
