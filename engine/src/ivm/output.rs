//! A view's current rows in memory, kept so that a small change costs little for writers and
//! readers alike.
//!
//! Rows live in segments (Arrow batches with a liveness mask): a change appends its inserted rows
//! as a new segment and masks the deleted ones where they are (found through an index from each
//! row, in Arrow's row format, to its copies). Readers get every segment, filtered by its mask
//! (cached per segment until it changes). When segments pile up or half the rows are dead, they
//! are compacted into one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::{filter_record_batch, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::RowConverter;

use super::dataflow::{batch_of, converter, Delta, RowBytes};
use crate::error::{Error, Result};

/// Segments kept before they are compacted into one.
const SEGMENTS_MAX: usize = 256;

struct Segment {
    batch: RecordBatch,
    live: Vec<bool>,
    dead: usize,
    /// The live rows, while the mask is unchanged.
    filtered: Option<RecordBatch>,
}

impl Segment {
    fn rows(&mut self) -> Result<RecordBatch> {
        if self.dead == 0 {
            return Ok(self.batch.clone());
        }
        if let Some(filtered) = &self.filtered {
            return Ok(filtered.clone());
        }
        let filtered = filter_record_batch(&self.batch, &BooleanArray::from(self.live.clone()))?;
        self.filtered = Some(filtered.clone());
        Ok(filtered)
    }
}

pub struct OutputStore {
    /// The view table's schema (what readers and checkpoints see).
    pub schema: SchemaRef,
    rows: RowConverter,
    /// Each distinct row's copies: (segment, row in segment).
    positions: HashMap<RowBytes, Vec<(u32, u32)>>,
    segments: Vec<Segment>,
    dead: usize,
    pub total: u64,
}

impl OutputStore {
    pub fn new(schema: SchemaRef) -> Result<Self> {
        Ok(Self {
            rows: converter(&schema)?,
            schema,
            positions: HashMap::new(),
            segments: Vec::new(),
            dead: 0,
            total: 0,
        })
    }

    pub fn clear(&mut self) {
        self.positions.clear();
        self.segments.clear();
        self.dead = 0;
        self.total = 0;
    }

    /// Adds a change (its columns are cast to the view's types). Removing a row that is not
    /// there is a bug, reported as an internal error.
    pub fn apply(&mut self, delta: &Delta) -> Result<()> {
        if delta.is_empty() {
            return Ok(());
        }
        let batch = batch_of(&self.schema, delta.batch.columns().to_vec(), delta.len())?;
        let rows = self.rows.convert_columns(batch.columns())?;
        // The net change per distinct row (a change may remove and add one row).
        let mut net: HashMap<&[u8], (i64, u32)> = HashMap::new();
        for (i, weight) in delta.weights.iter().enumerate() {
            net.entry(rows.row(i).data()).or_insert((0, i as u32)).0 += weight;
        }
        let segment = self.segments.len() as u32;
        let mut inserted: Vec<u32> = Vec::new();
        for (row, (weight, index)) in net {
            if weight > 0 {
                let copies = self.positions.entry(row.into()).or_default();
                for _ in 0..weight {
                    copies.push((segment, inserted.len() as u32));
                    inserted.push(index);
                }
            } else if weight < 0 {
                self.remove(row, weight.unsigned_abs())?;
            }
        }
        self.total += inserted.len() as u64;
        if !inserted.is_empty() {
            let batch = take_record_batch(&batch, &UInt32Array::from(inserted))?;
            let live = vec![true; batch.num_rows()];
            self.segments.push(Segment { batch, live, dead: 0, filtered: None });
        }
        if self.segments.len() > SEGMENTS_MAX || (self.dead > 1024 && self.dead as u64 > self.total) {
            self.compact()?;
        }
        Ok(())
    }

    fn remove(&mut self, row: &[u8], count: u64) -> Result<()> {
        let Some(copies) = self.positions.get_mut(row) else {
            return Err(Error::Internal("a materialized view change removes a row it does not have".into()));
        };
        for _ in 0..count {
            let Some((segment, index)) = copies.pop() else {
                return Err(Error::Internal(
                    "a materialized view change removes a row more often than it has it".into(),
                ));
            };
            let segment = &mut self.segments[segment as usize];
            segment.live[index as usize] = false;
            segment.dead += 1;
            segment.filtered = None;
            self.dead += 1;
            self.total -= 1;
        }
        if copies.is_empty() {
            self.positions.remove(row);
        }
        Ok(())
    }

    fn compact(&mut self) -> Result<()> {
        let batches = self.batches()?;
        let batches: Vec<RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).cloned().collect();
        let all = arrow::compute::concat_batches(&self.schema, &batches)?;
        self.clear();
        self.apply(&Delta::new(all.clone(), vec![1; all.num_rows()]))
    }

    /// The rows as batches.
    pub fn batches(&mut self) -> Result<Arc<Vec<RecordBatch>>> {
        let batches = self.segments.iter_mut().map(|s| s.rows()).collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(batches))
    }

    /// Replaces the rows (a recompute, or a checkpoint read back).
    pub fn replace(&mut self, batches: &[RecordBatch]) -> Result<()> {
        self.clear();
        let batches: Vec<RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).cloned().collect();
        if batches.is_empty() {
            return Ok(());
        }
        let all = arrow::compute::concat_batches(&batches[0].schema(), &batches)?;
        self.apply(&Delta::new(all.clone(), vec![1; all.num_rows()]))
    }
}
