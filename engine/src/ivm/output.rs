//! A view's current rows in memory, kept so that a small change costs little for writers and
//! readers alike.
//!
//! Rows live in segments (Arrow batches with a liveness mask): a change appends its inserted rows
//! as a new segment and masks the deleted ones where they are. Readers get every segment, filtered
//! by its mask (cached per segment until it changes). When segments pile up or half the rows are
//! dead, they are compacted into one: the index is then renumbered in place, not rebuilt.
//!
//! The index finds a deleted row. For most views it maps each row (in Arrow's row format) to its
//! copies. When the dataflow guarantees that some columns are unique (the group columns of an
//! aggregate), it finds the one row that has them: by the group's id when the change carries the
//! ids ([`Delta::ids`]), in a vector, with no key converted, hashed or looked up; else (rows read
//! back from a checkpoint, until their group's first change) by a map of those columns.
// Indexes here are positions the operator itself assigned (group ids, row positions of its own
// batches, key slots); input reaches them only through those, so an index out of range would be a
// bug in the operator. Reviewed for issue 19; the hot loops keep plain indexing.
#![allow(clippy::indexing_slicing)]

use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch, UInt32Array};
use arrow::compute::{filter_record_batch, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows};
use datafusion::common::HashMap;

use super::dataflow::{batch_of, converter, prefetch, prefetch_batches, Delta, RowBytes};
use crate::error::{Error, Result};
use crate::keymap::KeyMap;

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

/// How a deleted row is found.
enum Index {
    /// Each distinct row's copies.
    Rows(HashMap<RowBytes, Copies>),
    /// The one row of each value of the unique `columns`: each group's row by its id (or
    /// [`NO_ROW`]), and the rows whose group's id is not known yet by key. A row is in one of them.
    Keys { columns: Vec<usize>, by_id: Vec<(u32, u32)>, positions: KeyMap<(u32, u32)> },
}

pub struct OutputStore {
    /// The view table's schema (what readers and checkpoints see).
    pub schema: SchemaRef,
    /// Converts the indexed columns (all, or the unique key) to row format.
    rows: RowConverter,
    index: Index,
    segments: Vec<Segment>,
    dead: usize,
    pub total: u64,
}

/// A key's position while a change removes its row and may add another.
const REMOVED: (u32, u32) = (u32::MAX, u32::MAX);
/// An id whose group has no row, or whose row is found by key.
const NO_ROW: (u32, u32) = (u32::MAX, u32::MAX);

/// The unique key `columns` of `batch`'s rows, in row format.
fn key_rows(converter: &RowConverter, columns: &[usize], batch: &RecordBatch) -> Result<Rows> {
    let keys: Vec<_> = columns.iter().map(|&c| batch.column(c).clone()).collect();
    Ok(converter.convert_columns(&keys)?)
}

fn second_row() -> Error {
    Error::Internal("a materialized view change adds a row whose unique key is there".into())
}

fn missing_row() -> Error {
    Error::Internal("a materialized view change removes a row it does not have (or more often than it has it)".into())
}

impl OutputStore {
    /// A store of the view's rows; `key`: columns that no two rows share (see the module docs).
    pub fn new(schema: SchemaRef, key: Option<Vec<usize>>) -> Result<Self> {
        let (rows, index) = match key {
            Some(columns) if !columns.is_empty() && columns.iter().all(|&c| c < schema.fields().len()) => {
                let fields: Vec<_> = columns.iter().map(|&c| schema.field(c).clone()).collect();
                let converter = converter(&Arc::new(arrow::datatypes::Schema::new(fields)))?;
                (converter, Index::Keys { columns, by_id: Vec::new(), positions: KeyMap::new() })
            }
            _ => (converter(&schema)?, Index::Rows(HashMap::new())),
        };
        Ok(Self { rows, index, schema, segments: Vec::new(), dead: 0, total: 0 })
    }

    /// The unique key's column names, when rows are indexed by it.
    pub fn key_names(&self) -> Option<Vec<String>> {
        match &self.index {
            Index::Keys { columns, .. } => Some(columns.iter().map(|&c| self.schema.field(c).name().clone()).collect()),
            Index::Rows(_) => None,
        }
    }

    pub fn clear(&mut self) {
        match &mut self.index {
            Index::Rows(positions) => positions.clear(),
            Index::Keys { positions, by_id, .. } => {
                positions.clear();
                by_id.clear();
            }
        }
        self.segments.clear();
        self.dead = 0;
        self.total = 0;
    }

    /// Adds a change (its columns are cast to the view's types). Removing a row that is not
    /// there (or, by key, adding a second row with one key) is a bug, reported as an internal error.
    pub fn apply(&mut self, delta: &Delta) -> Result<()> {
        if delta.is_empty() {
            return Ok(());
        }
        let batch = batch_of(&self.schema, delta.batch.columns().to_vec(), delta.len())?;
        let (inserted, removed) = match &self.index {
            Index::Rows(_) => self.apply_rows(&batch, &delta.weights)?,
            Index::Keys { .. } => match &delta.ids {
                Some(ids) => self.apply_by_id(&batch, &delta.weights, ids)?,
                None => self.apply_keyed(&batch, &delta.weights)?,
            },
        };
        self.dead += removed;
        self.total = self.total + inserted.len() as u64 - removed as u64;
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

    /// Indexed by key: per key, the change removes its row, adds one, or replaces it. Returns the
    /// rows of `batch` to append, in order, and how many rows it masked.
    ///
    /// The removals go first, then the additions: a replaced key's position is [`REMOVED`] in
    /// between. A change that adds a key and removes it while it is absent is nothing; a key
    /// removed but absent and not added is a missing row. No map of the change's keys is built
    /// for what an aggregate emits (it cost a cache miss per row), only for such absent keys.
    fn apply_keyed(&mut self, batch: &RecordBatch, weights: &[i64]) -> Result<(Vec<u32>, usize)> {
        let Index::Keys { columns, by_id, positions } = &mut self.index else { return Ok((Vec::new(), 0)) };
        if by_id.iter().any(|&at| at != NO_ROW) {
            return Err(Error::Internal("a materialized view change has no ids, and its rows are found by id".into()));
        }
        let keys = key_rows(&self.rows, columns, batch)?;
        // Each key's row first, in a loop of lookups alone (the index is much larger than the
        // caches), after the index slots of its batch of keys were prefetched by their hashes;
        // the loops after it find them cached.
        let hashes: Vec<u64> = (0..weights.len()).map(|i| positions.hash(keys.row(i).data())).collect();
        for batch in prefetch_batches(hashes.len()) {
            for &hash in &hashes[batch.clone()] {
                positions.prefetch(hash);
            }
            for i in batch {
                if let Some(&(segment, index)) = positions.get_hashed(hashes[i], keys.row(i).data()) {
                    if let Some(segment) = self.segments.get(segment as usize) {
                        prefetch(segment.live.as_ptr().wrapping_add(index as usize) as *const u8);
                    }
                }
            }
        }
        let mut removed = 0;
        let mut emptied: Vec<usize> = Vec::new();
        // Removals of keys that are absent: cancelled by an addition of the same key, if any.
        let mut absent: HashMap<&[u8], i64> = HashMap::new();
        for (i, &weight) in weights.iter().enumerate().filter(|(_, &w)| w < 0) {
            let key = keys.row(i).data();
            let Some(at) = positions.get_mut_hashed(hashes[i], key) else {
                *absent.entry(key).or_default() -= weight;
                continue;
            };
            if weight < -1 || *at == REMOVED {
                return Err(missing_row());
            }
            let (segment, index) = std::mem::replace(at, REMOVED);
            Self::kill(&mut self.segments, segment, index)?;
            removed += 1;
            emptied.push(i);
        }
        let segment = self.segments.len() as u32;
        let mut inserted: Vec<u32> = Vec::new();
        for (i, &weight) in weights.iter().enumerate().filter(|(_, &w)| w > 0) {
            let key = keys.row(i).data();
            if weight > 1 {
                return Err(second_row());
            }
            if let Some(pending) = absent.get_mut(key).filter(|pending| **pending > 0) {
                *pending -= 1;
                continue;
            }
            let at = (segment, inserted.len() as u32);
            match positions.get_mut_hashed(hashes[i], key) {
                Some(existing) if *existing == REMOVED => *existing = at,
                Some(_) => return Err(second_row()),
                None => {
                    positions.insert_hashed(hashes[i], key, at);
                }
            }
            inserted.push(i as u32);
        }
        if absent.values().any(|&pending| pending > 0) {
            return Err(missing_row());
        }
        // Keys removed and not added back.
        for i in emptied {
            let key = keys.row(i).data();
            if positions.get_hashed(hashes[i], key) == Some(&REMOVED) {
                positions.remove_hashed(hashes[i], key);
            }
        }
        Ok((inserted, removed))
    }

    /// Indexed by key, with each row's group id: as [`Self::apply_keyed`], but a group's row is
    /// found by its id. A removed row whose id has no position is found by key (a row read back
    /// from a checkpoint), and then leaves the key map: from then on its group's id finds it.
    fn apply_by_id(&mut self, batch: &RecordBatch, weights: &[i64], ids: &[u32]) -> Result<(Vec<u32>, usize)> {
        let Index::Keys { columns, by_id, positions } = &mut self.index else { return Ok((Vec::new(), 0)) };
        if ids.len() != weights.len() {
            return Err(Error::Internal("a materialized view change has ids for some rows only".into()));
        }
        let position = |by_id: &[(u32, u32)], id: u32| by_id.get(id as usize).copied().unwrap_or(NO_ROW);
        // The rows' positions, then the liveness bytes a removal writes, each in a loop of
        // prefetches alone (see `ivm`).
        for batch in prefetch_batches(ids.len()) {
            for &id in &ids[batch.clone()] {
                prefetch(by_id.as_ptr().wrapping_add(id as usize) as *const u8);
            }
            for &id in &ids[batch] {
                let (segment, index) = position(by_id, id);
                if let Some(segment) = self.segments.get(segment as usize) {
                    prefetch(segment.live.as_ptr().wrapping_add(index as usize) as *const u8);
                }
            }
        }
        let mut removed = 0;
        let mut by_key: Vec<usize> = Vec::new();
        for (i, &weight) in weights.iter().enumerate().filter(|(_, &w)| w < 0) {
            if weight < -1 {
                return Err(missing_row());
            }
            let at = position(by_id, ids[i]);
            if at == NO_ROW {
                by_key.push(i);
                continue;
            }
            Self::kill(&mut self.segments, at.0, at.1)?;
            by_id[ids[i] as usize] = NO_ROW;
            removed += 1;
        }
        // Removals of rows not known by id: by key (converted only for them); those absent wait
        // for an addition of the same key that cancels them (as in `apply_keyed`).
        let keys = if by_key.is_empty() { None } else { Some(key_rows(&self.rows, columns, batch)?) };
        let mut absent: HashMap<&[u8], i64> = HashMap::new();
        if let Some(keys) = &keys {
            for i in by_key {
                let key = keys.row(i).data();
                match positions.remove(key) {
                    Some(at) => {
                        Self::kill(&mut self.segments, at.0, at.1)?;
                        removed += 1;
                    }
                    None => *absent.entry(key).or_default() += 1,
                }
            }
        }
        let segment = self.segments.len() as u32;
        let mut inserted: Vec<u32> = Vec::new();
        for (i, &weight) in weights.iter().enumerate().filter(|(_, &w)| w > 0) {
            if weight > 1 {
                return Err(second_row());
            }
            if let Some(keys) = keys.as_ref().filter(|_| !absent.is_empty()) {
                if let Some(pending) = absent.get_mut(keys.row(i).data()).filter(|pending| **pending > 0) {
                    *pending -= 1;
                    continue;
                }
            }
            let id = ids[i] as usize;
            if id >= by_id.len() {
                by_id.resize(id + 1, NO_ROW);
            }
            if by_id[id] != NO_ROW {
                return Err(second_row());
            }
            by_id[id] = (segment, inserted.len() as u32);
            inserted.push(i as u32);
        }
        if absent.values().any(|&pending| pending > 0) {
            return Err(missing_row());
        }
        Ok((inserted, removed))
    }

    /// Indexed by rows: the net change of each distinct row. Returns the rows of `batch` to
    /// append, in order, and how many rows it masked.
    fn apply_rows(&mut self, batch: &RecordBatch, weights: &[i64]) -> Result<(Vec<u32>, usize)> {
        let rows = self.rows.convert_columns(batch.columns())?;
        // The net change per distinct row (a change may remove and add one row).
        let mut net: HashMap<&[u8], (i64, u32)> = HashMap::with_capacity(weights.len());
        for (i, weight) in weights.iter().enumerate() {
            net.entry(rows.row(i).data()).or_insert((0, i as u32)).0 += weight;
        }
        let Index::Rows(positions) = &mut self.index else { return Ok((Vec::new(), 0)) };
        let segment = self.segments.len() as u32;
        let mut inserted: Vec<u32> = Vec::new();
        let mut removed = 0;
        for (row, (weight, index)) in net {
            for _ in 0..weight.min(0).unsigned_abs() {
                let copies = positions.get_mut(row).ok_or_else(missing_row)?;
                let (segment, index) = match copies.pop() {
                    Some(at) => at,
                    None => {
                        let at = copies.last();
                        positions.remove(row);
                        at
                    }
                };
                Self::kill(&mut self.segments, segment, index)?;
                removed += 1;
            }
            for _ in 0..weight.max(0) {
                let at = (segment, inserted.len() as u32);
                inserted.push(index);
                match positions.get_mut(row) {
                    Some(copies) => copies.push(at),
                    None => {
                        positions.insert(row.into(), Copies::One(at));
                    }
                }
            }
        }
        Ok((inserted, removed))
    }

    /// Masks a row of a segment.
    fn kill(segments: &mut [Segment], segment: u32, index: u32) -> Result<()> {
        let segment = segments
            .get_mut(segment as usize)
            .ok_or_else(|| Error::Internal("a materialized view row is in no segment".into()))?;
        let live = segment
            .live
            .get_mut(index as usize)
            .ok_or_else(|| Error::Internal("a materialized view row is past its segment's end".into()))?;
        if !*live {
            return Err(missing_row());
        }
        *live = false;
        segment.dead += 1;
        segment.filtered = None;
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
        let renumber = |(segment, index): &mut (u32, u32)| {
            *index = renumbered[*segment as usize][*index as usize];
            *segment = 0;
        };
        match &mut self.index {
            Index::Rows(positions) => positions.values_mut().for_each(|copies| copies.for_each_mut(renumber)),
            Index::Keys { positions, by_id, .. } => {
                positions.values_mut().for_each(renumber);
                by_id.iter_mut().filter(|at| **at != NO_ROW).for_each(renumber);
            }
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
        OutputStore::new(schema, None).expect("store")
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

    fn keyed() -> OutputStore {
        let schema =
            Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true), Field::new("v", DataType::Int64, true)]));
        OutputStore::new(schema, Some(vec![0])).expect("store")
    }

    fn pairs(store: &OutputStore, rows: &[(i64, i64)], weights: Vec<i64>) -> Delta {
        let keys = Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>()));
        let values = Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()));
        Delta::new(RecordBatch::try_new(store.schema.clone(), vec![keys, values]).expect("batch"), weights)
    }

    fn sorted_pairs(store: &mut OutputStore) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        for batch in store.batches().expect("batches").iter() {
            let k = batch.column(0).as_any().downcast_ref::<Int64Array>().expect("int64");
            let v = batch.column(1).as_any().downcast_ref::<Int64Array>().expect("int64");
            out.extend(k.values().iter().copied().zip(v.values().iter().copied()));
        }
        out.sort();
        out
    }

    #[test]
    fn keyed_rows_are_replaced_added_and_removed_by_key_across_compactions() {
        let mut store = keyed();
        assert_eq!(store.key_names(), Some(vec!["k".to_string()]));
        store.apply(&pairs(&store, &[(1, 10), (2, 20)], vec![1, 1])).expect("insert");
        for round in 0..(SEGMENTS_MAX as i64 * 2 + 10) {
            // A group's change: -old +new, in either order within the change.
            let change = if round % 2 == 0 {
                pairs(&store, &[(1, 10 + round), (1, 11 + round)], vec![-1, 1])
            } else {
                pairs(&store, &[(1, 11 + round), (1, 10 + round)], vec![1, -1])
            };
            store.apply(&change).expect("replace");
        }
        let last = 10 + SEGMENTS_MAX as i64 * 2 + 10;
        assert_eq!(sorted_pairs(&mut store), vec![(1, last), (2, 20)]);
        assert!(store.segments.len() < SEGMENTS_MAX);
        store.apply(&pairs(&store, &[(2, 20), (3, 30)], vec![-1, 1])).expect("remove one key, add another");
        assert_eq!(sorted_pairs(&mut store), vec![(1, last), (3, 30)]);
        assert_eq!(store.total, 2);
        // Added and removed within one change: nothing.
        store.apply(&pairs(&store, &[(4, 40), (4, 40)], vec![1, -1])).expect("no-op");
        assert_eq!(store.total, 2);
        let error = store.apply(&pairs(&store, &[(3, 31)], vec![1])).expect_err("a second row for a key");
        assert!(error.to_string().contains("unique key"), "{error}");
        let error = store.apply(&pairs(&store, &[(9, 90)], vec![-1])).expect_err("removing a missing key");
        assert!(error.to_string().contains("does not have"), "{error}");
    }

    #[test]
    fn rows_are_found_by_group_id_and_by_key_until_their_group_changes_after_a_restore() {
        let mut store = keyed();
        let by_id = |store: &OutputStore, rows: &[(i64, i64)], weights: Vec<i64>, ids: Vec<u32>| {
            pairs(store, rows, weights).with_ids(ids)
        };
        store.apply(&by_id(&store, &[(1, 10), (2, 20)], vec![1, 1], vec![0, 1])).expect("insert");
        for round in 0..(SEGMENTS_MAX as i64 * 2 + 10) {
            let change = by_id(&store, &[(1, 10 + round), (1, 11 + round)], vec![-1, 1], vec![0, 0]);
            store.apply(&change).expect("replace by id");
        }
        let last = 11 + SEGMENTS_MAX as i64 * 2 + 9;
        assert_eq!(sorted_pairs(&mut store), vec![(1, last), (2, 20)]);
        // Group 1 goes; its id is reused by a new group.
        store.apply(&by_id(&store, &[(2, 20), (3, 30)], vec![-1, 1], vec![1, 1])).expect("reuse an id");
        assert_eq!(sorted_pairs(&mut store), vec![(1, last), (3, 30)]);
        let error = store.apply(&by_id(&store, &[(3, 31)], vec![1], vec![1])).expect_err("a second row for an id");
        assert!(error.to_string().contains("unique key"), "{error}");

        // Read back from a checkpoint: the rows are found by key, and the groups have new ids.
        let batches = store.batches().expect("batches");
        store.replace(&batches).expect("restore");
        store.apply(&by_id(&store, &[(3, 30), (3, 33)], vec![-1, 1], vec![0, 0])).expect("by key, then by id");
        store.apply(&by_id(&store, &[(3, 33), (3, 34)], vec![-1, 1], vec![0, 0])).expect("by id");
        store.apply(&by_id(&store, &[(1, last)], vec![-1], vec![1])).expect("by key");
        assert_eq!(sorted_pairs(&mut store), vec![(3, 34)]);
        // Added and removed within one change, absent before: nothing.
        store.apply(&by_id(&store, &[(4, 40), (4, 40)], vec![1, -1], vec![5, 5])).expect("no-op");
        assert_eq!(store.total, 1);
        let error = store.apply(&by_id(&store, &[(9, 90)], vec![-1], vec![7])).expect_err("removing a missing key");
        assert!(error.to_string().contains("does not have"), "{error}");
        let error = store.apply(&pairs(&store, &[(5, 50)], vec![1])).expect_err("a change without ids");
        assert!(error.to_string().contains("no ids"), "{error}");
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
