//! Inner and left outer equi-joins, maintained from both sides' changes.
//!
//! State: each side's rows indexed by join key, with their multiplicities. A change of the left
//! side joins the right side as it was; then a change of the right side joins the left side as it
//! now is (`Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR`), so a change that reaches both sides (a self-join) is
//! counted once. A left join also emits the left rows whose key has no right row, padded with
//! NULLs, and retracts them when the key's first right row arrives (and back when its last goes).
//! Rows with a NULL key never match (SQL equality).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, Rows};
use datafusion::common::HashMap;
use datafusion::physical_expr::PhysicalExpr;

use super::dataflow::{
    add_count, batch_of, evaluate, prefetch, same_bytes, BoxFuture, Change, Delta, Node, RowBytes, PREFETCH_DISTANCE,
};
use super::keymap::KeyMap;
use super::Requery;
use crate::error::Result;

/// Rows of one side by key. Both sides' indexes hash alike (see [`KeyMap::with_state`]).
pub type SideIndex = KeyMap<KeyRows>;

/// Rows packed in a key's buffer before they move to a hash map (a delete scans the buffer).
const PACKED_ROWS_MAX: usize = 256;
/// How much of a key's packed rows is prefetched for a delete that scans them.
const PREFETCH_SCAN_BYTES: usize = 2048;

/// A packed entry's header: the row's length (u32), then its count (i64).
const ENTRY_HEADER: usize = 12;

/// The rows of one join key, with their multiplicities.
///
/// Up to [`PACKED_ROWS_MAX`] entries are packed one after another in one buffer (a 4-byte length,
/// an 8-byte count, the row's bytes): adding a row appends to it, and reading a key's rows reads
/// one allocation in order, where a hash map of boxed rows costs a cache miss per row and an
/// allocation per insert. A row may have more than one entry (an insert appends without looking
/// for its earlier copies); its multiplicity is the sum. A delete takes from the row's entries in
/// order and drops those that reach 0. Past the limit the rows move to a map of row to
/// multiplicity.
pub enum KeyRows {
    Packed { buf: Vec<u8>, entries: usize },
    Map(HashMap<RowBytes, i64>),
}

impl Default for KeyRows {
    fn default() -> Self {
        KeyRows::Packed { buf: Vec::new(), entries: 0 }
    }
}

/// The entry at `at` of a packed buffer: (row, count, the next entry's offset).
fn entry(buf: &[u8], at: usize) -> (&[u8], i64, usize) {
    let mut len = [0u8; 4];
    len.copy_from_slice(&buf[at..at + 4]);
    let mut count = [0u8; 8];
    count.copy_from_slice(&buf[at + 4..at + ENTRY_HEADER]);
    let end = at + ENTRY_HEADER + u32::from_le_bytes(len) as usize;
    (&buf[at + ENTRY_HEADER..end], i64::from_le_bytes(count), end)
}

/// Asks the CPU to load what a change of a key's packed rows (see [`KeyRows::span`]) will touch:
/// a delete scans them from the start, an insert appends at the end.
fn prefetch_span((at, len): (usize, usize), delete: bool) {
    if at == 0 {
        return;
    }
    if delete {
        for offset in (0..len.min(PREFETCH_SCAN_BYTES)).step_by(64) {
            prefetch((at + offset) as *const u8);
        }
    } else {
        prefetch((at + len) as *const u8);
    }
}

impl KeyRows {
    /// The entries (in the packed form, a row may have more than one).
    pub fn len(&self) -> usize {
        match self {
            KeyRows::Packed { entries, .. } => *entries,
            KeyRows::Map(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each row with its multiplicity (a row may come more than once; see the type's docs).
    pub fn iter(&self) -> KeyRowsIter<'_> {
        match self {
            KeyRows::Packed { buf, .. } => KeyRowsIter::Packed { buf, at: 0 },
            KeyRows::Map(rows) => KeyRowsIter::Map(Box::new(rows.iter().map(|(row, count)| (&row[..], *count)))),
        }
    }

    /// Where the packed rows are (address, length), as a prefetch hint for later, when a borrow
    /// cannot be kept: never dereferenced, so a stale one is harmless. (0, 0) for the map form.
    pub fn span(&self) -> (usize, usize) {
        match self {
            KeyRows::Packed { buf, .. } => (buf.as_ptr() as usize, buf.len()),
            KeyRows::Map(_) => (0, 0),
        }
    }

    /// The sum of the multiplicities.
    pub fn total(&self) -> i64 {
        self.iter().map(|(_, count)| count).sum()
    }

    /// Adds `weight` copies of `row` (negative: removes them).
    pub fn add(&mut self, row: &[u8], weight: i64) {
        if weight == 0 {
            return;
        }
        match self {
            KeyRows::Map(rows) => {
                add_count(rows, row, weight);
            }
            KeyRows::Packed { buf, entries } => {
                let mut weight = weight;
                if weight < 0 {
                    // Take from the row's entries in order; an entry that reaches 0 goes.
                    let mut at = 0;
                    while at < buf.len() && weight < 0 {
                        let (existing, count, end) = entry(buf, at);
                        if count <= 0 || !same_bytes(existing, row) {
                            at = end;
                            continue;
                        }
                        let taken = count.min(-weight);
                        weight += taken;
                        if taken == count {
                            buf.drain(at..end);
                            *entries -= 1;
                        } else {
                            buf[at + 4..at + ENTRY_HEADER].copy_from_slice(&(count - taken).to_le_bytes());
                            at = end;
                        }
                    }
                    if weight == 0 {
                        return;
                    }
                }
                if *entries >= PACKED_ROWS_MAX {
                    let mut rows: HashMap<RowBytes, i64> = HashMap::with_capacity(*entries * 2);
                    for (existing, count) in self.iter() {
                        add_count(&mut rows, existing, count);
                    }
                    add_count(&mut rows, row, weight);
                    *self = KeyRows::Map(rows);
                    return;
                }
                buf.extend_from_slice(&(row.len() as u32).to_le_bytes());
                buf.extend_from_slice(&weight.to_le_bytes());
                buf.extend_from_slice(row);
                *entries += 1;
            }
        }
    }
}

pub enum KeyRowsIter<'a> {
    Packed { buf: &'a [u8], at: usize },
    Map(Box<dyn Iterator<Item = (&'a [u8], i64)> + 'a>),
}

impl<'a> Iterator for KeyRowsIter<'a> {
    type Item = (&'a [u8], i64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            KeyRowsIter::Packed { buf, at } => {
                if *at >= buf.len() {
                    return None;
                }
                let (row, count, end) = entry(buf, *at);
                *at = end;
                Some((row, count))
            }
            KeyRowsIter::Map(rows) => rows.next(),
        }
    }
}

pub struct JoinNode {
    pub left: Node,
    pub right: Node,
    pub left_outer: bool,
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Non-equality conditions of an inner join, over the joined row.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    pub keys: RowConverter,
    /// The key columns' types (the right side's keys are cast to them).
    pub key_types: Vec<DataType>,
    pub left_rows: RowConverter,
    pub right_rows: RowConverter,
    pub left_schema: SchemaRef,
    pub right_schema: SchemaRef,
    pub schema: SchemaRef,
    /// The right row of all NULLs (left join padding).
    pub null_right: RowBytes,
    pub left_index: SideIndex,
    pub right_index: SideIndex,
    pub text: String,
}

/// Output pairs: left row, right row (the NULL row for padding), weight. They borrow the change's
/// rows and the other side's index, so a pair costs no copy of either row.
type Pairs<'a> = Vec<(&'a [u8], &'a [u8], i64)>;

/// Keys of a delta's rows in row format, and which rows have a NULL key part.
fn key_rows(
    keys: &RowConverter,
    types: &[DataType],
    exprs: &[Arc<dyn PhysicalExpr>],
    batch: &RecordBatch,
) -> Result<(Rows, Vec<bool>)> {
    let columns = evaluate(exprs, batch)?;
    let columns: Vec<ArrayRef> = columns
        .into_iter()
        .zip(types)
        .map(|(c, t)| if c.data_type() == t { Ok(c) } else { arrow::compute::cast(&c, t) })
        .collect::<std::result::Result<_, _>>()?;
    let mut has_null = vec![false; batch.num_rows()];
    for column in &columns {
        if column.null_count() > 0 {
            for (i, flag) in has_null.iter_mut().enumerate() {
                *flag |= column.is_null(i);
            }
        }
    }
    Ok((keys.convert_columns(&columns)?, has_null))
}

/// Adds `weight` copies of `row` to `key`'s rows, whose hash is `hash`.
fn add(index: &mut SideIndex, hash: u64, key: &[u8], row: &[u8], weight: i64) {
    if weight == 0 {
        return;
    }
    let rows = index.entry_hashed(hash, key);
    rows.add(row, weight);
    if rows.is_empty() {
        index.remove_hashed(hash, key);
    }
}

fn total(index: &SideIndex, key: &[u8]) -> i64 {
    index.get(key).map(KeyRows::total).unwrap_or(0)
}

impl JoinNode {
    pub fn apply<'a>(
        &'a mut self,
        change: &'a Change<'a>,
        requery: &'a Requery<'a>,
    ) -> BoxFuture<'a, Result<Option<Delta>>> {
        Box::pin(async move {
            let left = self.left.apply(change, requery).await?;
            let right = self.right.apply(change, requery).await?;
            if left.is_none() && right.is_none() {
                return Ok(None);
            }
            // The left side's change joins the right side before the right side's change is
            // applied (see the module docs).
            let mut out: Vec<Delta> = Vec::new();
            if let Some(left) = left {
                out.push(self.apply_left(&left)?);
            }
            if let Some(right) = right {
                out.push(self.apply_right(&right)?);
            }
            Delta::concat(out)
        })
    }

    fn apply_left(&mut self, delta: &Delta) -> Result<Delta> {
        let (keys, null_key) = key_rows(&self.keys, &self.key_types, &self.left_keys, &delta.batch)?;
        let rows = self.left_rows.convert_columns(delta.batch.columns())?;
        // Each row's matches first, and where its key's own rows are, in a loop of lookups
        // alone: the indexes are much larger than the caches, and their misses overlap there,
        // where one row at a time would wait for each in turn. The index slots of the row a few
        // places ahead are prefetched by its key's hash (one for both sides). The loop below then
        // prefetches the own rows a few rows ahead (all of them at once would not stay cached).
        let hashes: Vec<u64> = (0..delta.len()).map(|i| self.left_index.hash(keys.row(i).data())).collect();
        let mut matches: Vec<Option<&KeyRows>> = Vec::with_capacity(delta.len());
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(delta.len());
        for (i, &null) in null_key.iter().enumerate() {
            if let Some(&ahead) = hashes.get(i + PREFETCH_DISTANCE) {
                self.right_index.prefetch(ahead);
                self.left_index.prefetch(ahead);
            }
            let key = keys.row(i).data();
            let found = if null { None } else { self.right_index.get_hashed(hashes[i], key) };
            if let Some((at, _)) = found.map(KeyRows::span) {
                prefetch(at as *const u8);
            }
            spans.push(if null {
                (0, 0)
            } else {
                self.left_index.get_hashed(hashes[i], key).map_or((0, 0), KeyRows::span)
            });
            matches.push(found);
        }
        let mut pairs: Pairs = Vec::new();
        for (i, (weight, found)) in delta.weights.iter().zip(matches).enumerate() {
            if let (Some(&span), Some(&ahead)) =
                (spans.get(i + PREFETCH_DISTANCE), delta.weights.get(i + PREFETCH_DISTANCE))
            {
                prefetch_span(span, ahead < 0);
            }
            let row = rows.row(i).data();
            if null_key[i] {
                if self.left_outer {
                    pairs.push((row, &self.null_right, *weight));
                }
                continue;
            }
            let key = keys.row(i).data();
            let mut matched = false;
            for (right, count) in found.into_iter().flat_map(KeyRows::iter) {
                matched |= count != 0;
                pairs.push((row, right, weight * count));
            }
            if self.left_outer && !matched {
                pairs.push((row, &self.null_right, *weight));
            }
            add(&mut self.left_index, hashes[i], key, row, *weight);
        }
        output(self.pair_schema(), pairs)
    }

    fn apply_right(&mut self, delta: &Delta) -> Result<Delta> {
        let (keys, null_key) = key_rows(&self.keys, &self.key_types, &self.right_keys, &delta.batch)?;
        let rows = self.right_rows.convert_columns(delta.batch.columns())?;
        // Grouped by key, so that a left join sees each key's right total before and after.
        let mut by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
        for (i, null) in null_key.iter().enumerate() {
            if !null {
                by_key.entry(keys.row(i).data()).or_default().push(i);
            }
        }
        let mut pairs: Pairs = Vec::new();
        for (key, indices) in by_key {
            let hash = self.right_index.hash(key);
            let before = if self.left_outer { total(&self.right_index, key) } else { 0 };
            for i in indices {
                let row = rows.row(i).data();
                let weight = delta.weights[i];
                for (left, count) in self.left_index.get(key).into_iter().flat_map(KeyRows::iter) {
                    pairs.push((left, row, count * weight));
                }
                add(&mut self.right_index, hash, key, row, weight);
            }
            if self.left_outer {
                let after = total(&self.right_index, key);
                if (before > 0) != (after > 0) {
                    let sign = if after > 0 { -1 } else { 1 };
                    for (left, count) in self.left_index.get(key).into_iter().flat_map(KeyRows::iter) {
                        pairs.push((left, &self.null_right, sign * count));
                    }
                }
            }
        }
        output(self.pair_schema(), pairs)
    }

    fn pair_schema(&self) -> PairSchema<'_> {
        PairSchema { left: &self.left_rows, right: &self.right_rows, schema: &self.schema, filter: &self.filter }
    }
}

/// What turns pairs of rows into the join's output batch.
struct PairSchema<'a> {
    left: &'a RowConverter,
    right: &'a RowConverter,
    schema: &'a SchemaRef,
    filter: &'a Option<Arc<dyn PhysicalExpr>>,
}

fn output(to: PairSchema<'_>, pairs: Pairs<'_>) -> Result<Delta> {
    let left_parser = to.left.parser();
    let right_parser = to.right.parser();
    let mut columns = to.left.convert_rows(pairs.iter().map(|(l, _, _)| left_parser.parse(l)))?;
    columns.extend(to.right.convert_rows(pairs.iter().map(|(_, r, _)| right_parser.parse(r)))?);
    let weights: Vec<i64> = pairs.iter().map(|(_, _, w)| *w).collect();
    let batch = batch_of(to.schema, columns, weights.len())?;
    let delta = Delta::new(batch, weights);
    match to.filter {
        None => Ok(delta),
        Some(filter) => delta.keep_where(filter),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Each row's multiplicity (rows at 0 left out).
    fn net(rows: &KeyRows) -> BTreeMap<Vec<u8>, i64> {
        let mut out: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for (row, count) in rows.iter() {
            *out.entry(row.to_vec()).or_default() += count;
        }
        out.retain(|_, count| *count != 0);
        out
    }

    #[test]
    fn key_rows_keep_multiplicities_packed_and_after_moving_to_a_map() {
        for seed in 0..16_u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            // Few distinct rows stay packed; many move to the map.
            let distinct = if seed % 2 == 0 { 40 } else { PACKED_ROWS_MAX as u64 * 3 };
            let mut rows = KeyRows::default();
            let mut reference: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
            for step in 0..3_000 {
                let (row, weight) = if reference.is_empty() || rng.random_range(0..3) > 0 {
                    // Rows of different lengths; inserted once or twice.
                    let n = rng.random_range(0..distinct);
                    (format!("row-{n}-{}", "x".repeat((n % 7) as usize)).into_bytes(), rng.random_range(1..3))
                } else {
                    let pick = rng.random_range(0..reference.len());
                    let row = reference.keys().nth(pick).cloned().unwrap_or_default();
                    let count = reference[&row];
                    (row, -rng.random_range(1..=count))
                };
                rows.add(&row, weight);
                *reference.entry(row).or_default() += weight;
                reference.retain(|_, count| *count != 0);
                assert_eq!(rows.is_empty(), reference.is_empty(), "seed {seed}, step {step}");
                if step % 25 == 0 {
                    assert_eq!(net(&rows), reference, "seed {seed}, step {step}");
                    assert_eq!(rows.total(), reference.values().sum::<i64>());
                }
            }
            assert_eq!(net(&rows), reference, "seed {seed}");
            if seed % 2 == 1 {
                assert!(matches!(rows, KeyRows::Map(_)), "seed {seed}: many rows move to the map");
            }
            // Removing every row empties it.
            for (row, count) in reference.clone() {
                rows.add(&row, -count);
            }
            assert!(rows.is_empty(), "seed {seed}");
        }
    }
}
