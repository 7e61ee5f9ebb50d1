//! A view's current rows in memory, kept so that a small change costs little for writers and
//! readers alike.
//!
//! Rows live in segments (Arrow batches with a liveness mask): a change appends its inserted rows
//! as a new segment and masks the deleted ones where they are (found through an index from each
//! row, in Arrow's row format, to its copies). Readers get every segment, filtered by its mask
//! (cached per segment until it changes). When segments pile up or half the rows are dead, they
//! are compacted into one: the index is then renumbered in place, not rebuilt.

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::{filter_record_batch, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::RowConverter;
use datafusion::common::HashMap;

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

/// Where a distinct row's copies are, as (segment, row in segment): one inline (a view's rows are
/// mostly distinct), more in a list.
enum Copies {
    One((u32, u32)),
    Many(Vec<(u32, u32)>),
}

impl Copies {
    fn push(&mut self, at: (u32, u32)) {
        match self {
            Copies::One(first) => *self = Copies::Many(vec![*first, at]),
            Copies::Many(all) => all.push(at),
        }
    }

    /// Takes the last copy; None when it was the only one (the caller drops the entry).
    fn pop(&mut self) -> Option<(u32, u32)> {
        match self {
            Copies::One(_) => None,
            Copies::Many(all) => {
                let last = all.pop();
                if let [only] = all[..] {
                    *self = Copies::One(only);
                }
                last
            }
        }
    }

    fn last(&self) -> (u32, u32) {
        match self {
            Copies::One(at) => *at,
            Copies::Many(all) => all.last().copied().unwrap_or((u32::MAX, u32::MAX)),
        }
    }

    fn for_each_mut(&mut self, mut f: impl FnMut(&mut (u32, u32))) {
        match self {
            Copies::One(at) => f(at),
            Copies::Many(all) => all.iter_mut().for_each(f),
        }
    }
}

pub struct OutputStore {
    /// The view table's schema (what readers and checkpoints see).
    pub schema: SchemaRef,
    rows: RowConverter,
    /// Each distinct row's copies.
    positions: HashMap<RowBytes, Copies>,
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
        let mut net: HashMap<&[u8], (i64, u32)> = HashMap::with_capacity(delta.len());
        for (i, weight) in delta.weights.iter().enumerate() {
            net.entry(rows.row(i).data()).or_insert((0, i as u32)).0 += weight;
        }
        let segment = self.segments.len() as u32;
        let mut inserted: Vec<u32> = Vec::new();
        for (row, (weight, index)) in net {
            if weight < 0 {
                self.remove(row, weight.unsigned_abs())?;
            }
            for _ in 0..weight.max(0) {
                let at = (segment, inserted.len() as u32);
                inserted.push(index);
                match self.positions.get_mut(row) {
                    Some(copies) => copies.push(at),
                    None => {
                        self.positions.insert(row.into(), Copies::One(at));
                    }
                }
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
        for _ in 0..count {
            let Some(copies) = self.positions.get_mut(row) else {
                return Err(Error::Internal(
                    "a materialized view change removes a row it does not have (or more often than it has it)".into(),
                ));
            };
            let (segment, index) = match copies.pop() {
                Some(at) => at,
                None => {
                    let at = copies.last();
                    self.positions.remove(row);
                    at
                }
            };
            let segment = self
                .segments
                .get_mut(segment as usize)
                .ok_or_else(|| Error::Internal("a materialized view row is in no segment".into()))?;
            segment.live[index as usize] = false;
            segment.dead += 1;
            segment.filtered = None;
            self.dead += 1;
            self.total -= 1;
        }
        Ok(())
    }

    /// Concatenates the live rows of all segments into one, and renumbers the index to match.
    fn compact(&mut self) -> Result<()> {
        // The new place of each live row: segments in order, dead rows left out.
        let mut renumbered: Vec<Vec<u32>> = Vec::with_capacity(self.segments.len());
        let mut next = 0_u32;
        for segment in &self.segments {
            renumbered.push(
                segment
                    .live
                    .iter()
                    .map(|&live| {
                        next += live as u32;
                        if live {
                            next - 1
                        } else {
                            u32::MAX
                        }
                    })
                    .collect(),
            );
        }
        for copies in self.positions.values_mut() {
            copies.for_each_mut(|(segment, index)| {
                *index = renumbered[*segment as usize][*index as usize];
                *segment = 0;
            });
        }
        let batches = self.batches()?;
        let batches: Vec<RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).cloned().collect();
        let all = arrow::compute::concat_batches(&self.schema, &batches)?;
        let rows = all.num_rows();
        self.segments.clear();
        if rows > 0 {
            self.segments.push(Segment { batch: all, live: vec![true; rows], dead: 0, filtered: None });
        }
        self.dead = 0;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    fn store() -> OutputStore {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        OutputStore::new(schema).expect("store")
    }

    fn delta(store: &OutputStore, values: &[i64], weights: Vec<i64>) -> Delta {
        let column = Arc::new(Int64Array::from(values.to_vec()));
        Delta::new(RecordBatch::try_new(store.schema.clone(), vec![column]).expect("batch"), weights)
    }

    fn sorted(store: &mut OutputStore) -> Vec<i64> {
        let mut out: Vec<i64> = Vec::new();
        for batch in store.batches().expect("batches").iter() {
            let column = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("int64");
            out.extend(column.values().iter());
        }
        out.sort();
        out
    }

    #[test]
    fn compaction_keeps_duplicates_and_later_deletes_find_their_rows() {
        let mut store = store();
        // Enough changes to compact more than once (every SEGMENTS_MAX segments).
        store.apply(&delta(&store, &[7], vec![1])).expect("insert");
        for round in 0..(SEGMENTS_MAX as i64 * 2 + 10) {
            store.apply(&delta(&store, &[round, 7], vec![1, 1])).expect("insert");
            if round > 0 {
                store.apply(&delta(&store, &[round - 1, 7], vec![-1, -1])).expect("delete");
            }
        }
        let last = SEGMENTS_MAX as i64 * 2 + 9;
        assert_eq!(sorted(&mut store), vec![7, 7, last]);
        assert!(store.segments.len() < SEGMENTS_MAX);
        store.apply(&delta(&store, &[7, 7, last], vec![-1, -1, -1])).expect("delete all");
        assert_eq!(sorted(&mut store), Vec::<i64>::new());
        assert_eq!(store.total, 0);
        let error = store.apply(&delta(&store, &[7], vec![-1])).expect_err("removing a missing row");
        assert!(error.to_string().contains("does not have"), "{error}");
    }
}
