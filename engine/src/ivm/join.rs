//! Inner and left outer equi-joins, maintained from both sides' changes.
//!
//! State: each side's rows indexed by join key, with their multiplicities. A change of the left
//! side joins the right side as it was; then a change of the right side joins the left side as it
//! now is (`Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR`), so a change that reaches both sides (a self-join) is
//! counted once. A left join also emits the left rows whose key has no right row, padded with
//! NULLs, and retracts them when the key's first right row arrives (and back when its last goes).
//! Rows with a NULL key never match (SQL equality).
// Indexes here are positions the operator itself assigned (group ids, row positions of its own
// batches, key slots); input reaches them only through those, so an index out of range would be a
// bug in the operator. Reviewed for issue 19; the hot loops keep plain indexing.
#![allow(clippy::indexing_slicing)]

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, Rows};
use datafusion::common::HashMap;
use datafusion::physical_expr::PhysicalExpr;

use super::dataflow::{
    add_count, batch_of, evaluate, prefetch, prefetch_batches, same_bytes, BoxFuture, Change, Delta, Node, RowBytes,
};
use super::Requery;
use crate::error::Result;
use crate::keymap::KeyMap;

/// Rows of one side by key. Both sides' indexes hash alike (see [`KeyMap::with_state`]).
pub type SideIndex = KeyMap<KeyRows>;

/// Entries of a key in one buffer (fixed or packed) before they move to a hash map.
const PACKED_ROWS_MAX: usize = 256;
/// How much of a key's packed rows is prefetched for a delete that scans them.
const PREFETCH_SCAN_BYTES: usize = 2048;

/// A packed entry's header: the row's length (u32), then its count (i64).
const ENTRY_HEADER: usize = 12;

/// The rows of one join key, with their multiplicities.
///
/// Three forms, by how many rows and of what lengths:
/// - **Fixed** (the first, while all of the key's rows have one length, as every row of a side
///   whose columns are fixed-width does): entries of a count (i64) and the row, one after
///   another, and a tag byte per entry (from the row's hash) in a second buffer. Adding a row
///   appends it. A delete finds the row's entries by the tags (a cache line or two), not by a
///   scan of the rows, and moves the last entry into the hole: a key's rows are a multiset, in
///   no order.
/// - **Packed** (rows of different lengths): entries of a 4-byte length, an 8-byte count and the
///   row. Adding a row appends to it; a delete scans it and takes from the row's entries in
///   order.
///
/// In both, a row may have more than one entry; its multiplicity is the sum.
/// - **Map**: past [`PACKED_ROWS_MAX`] entries, a map of row to multiplicity.
///
/// One buffer per key, read in order, where a hash map of boxed rows costs a cache miss per row
/// and an allocation per insert.
pub enum KeyRows {
    Fixed { width: usize, buf: Vec<u8>, tags: Vec<u8> },
    Packed { buf: Vec<u8>, entries: usize },
    Map(HashMap<RowBytes, i64>),
}

impl Default for KeyRows {
    fn default() -> Self {
        KeyRows::Fixed { width: 0, buf: Vec::new(), tags: Vec::new() }
    }
}

/// A fixed entry's count (i64) before its row.
const COUNT_BYTES: usize = 8;

/// The entry at `at` of a packed buffer: (row, count, the next entry's offset).
fn entry(buf: &[u8], at: usize) -> (&[u8], i64, usize) {
    let mut len = [0u8; 4];
    len.copy_from_slice(&buf[at..at + 4]);
    let mut count = [0u8; 8];
    count.copy_from_slice(&buf[at + 4..at + ENTRY_HEADER]);
    let end = at + ENTRY_HEADER + u32::from_le_bytes(len) as usize;
    (&buf[at + ENTRY_HEADER..end], i64::from_le_bytes(count), end)
}

/// Entry `i` of a fixed buffer of rows of `width` bytes: (row, count).
fn fixed_entry(buf: &[u8], width: usize, i: usize) -> (&[u8], i64) {
    let at = i * (COUNT_BYTES + width);
    let mut count = [0u8; COUNT_BYTES];
    count.copy_from_slice(&buf[at..at + COUNT_BYTES]);
    (&buf[at + COUNT_BYTES..at + COUNT_BYTES + width], i64::from_le_bytes(count))
}

/// A row's tag in a fixed buffer: a byte of its hash.
fn tag(row: &[u8]) -> u8 {
    use std::hash::BuildHasher;
    (foldhash::fast::FixedState::with_seed(0x5eed).hash_one(row) >> 56) as u8
}

/// The positions of `tag` in `tags`: eight tags compared at a time, as one word.
fn tag_positions(tags: &[u8], tag: u8) -> impl Iterator<Item = usize> + '_ {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let words = tags.chunks_exact(8).enumerate().flat_map(move |(w, chunk)| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        // A byte of `x` is 0 where the tag is; this flags those bytes' high bits (and, rarely, a
        // byte above one of them, which the exact comparison below drops).
        let x = u64::from_le_bytes(word) ^ (ONES * tag as u64);
        let mut flags = x.wrapping_sub(ONES) & !x & HIGHS;
        std::iter::from_fn(move || {
            if flags == 0 {
                return None;
            }
            let byte = flags.trailing_zeros() as usize / 8;
            flags &= flags - 1;
            Some(w * 8 + byte)
        })
    });
    let tail = tags.len() - tags.len() % 8;
    words.chain(tail..tags.len()).filter(move |&i| tags[i] == tag)
}

/// Where a key's rows are (see [`KeyRows::span`]), as prefetch hints for later, when a borrow
/// cannot be kept: never dereferenced, so a stale one is harmless. Each is (address, length);
/// the address is 0 for nothing.
#[derive(Clone, Copy, Default)]
pub struct Span {
    tags: (usize, usize),
    rows: (usize, usize),
}

/// Asks the CPU to load the start of `len` bytes at `at`, up to [`PREFETCH_SCAN_BYTES`].
fn prefetch_bytes((at, len): (usize, usize)) {
    if at != 0 {
        for offset in (0..len.min(PREFETCH_SCAN_BYTES)).step_by(64) {
            prefetch((at + offset) as *const u8);
        }
    }
}

impl Span {
    /// What a change of the key's own rows will touch. A delete: the fixed form's tags (it
    /// scans them) and last entry (it moves it), the packed form's rows (it scans them). An
    /// insert: where they end (it appends).
    fn prefetch_change(&self, delete: bool) {
        let ((tags, tags_len), (rows, rows_len)) = (self.tags, self.rows);
        if rows == 0 {
            return;
        }
        let fixed = tags != 0;
        if delete && !fixed {
            prefetch_bytes(self.rows);
            return;
        }
        if delete {
            prefetch_bytes(self.tags);
        } else if fixed {
            prefetch((tags + tags_len) as *const u8);
        }
        prefetch((rows + rows_len.saturating_sub(1)) as *const u8);
        prefetch((rows + rows_len) as *const u8);
    }

    /// What a read of all of the key's rows starts with.
    fn prefetch_read(&self) {
        if self.rows.0 != 0 {
            prefetch(self.rows.0 as *const u8);
        }
    }
}

impl KeyRows {
    /// The entries (in the packed form, a row may have more than one).
    pub fn len(&self) -> usize {
        match self {
            KeyRows::Fixed { tags, .. } => tags.len(),
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
            KeyRows::Fixed { width, buf, tags } => KeyRowsIter::Fixed { buf, width: *width, next: 0, len: tags.len() },
            KeyRows::Packed { buf, .. } => KeyRowsIter::Packed { buf, at: 0 },
            KeyRows::Map(rows) => KeyRowsIter::Map(Box::new(rows.iter().map(|(row, count)| (&row[..], *count)))),
        }
    }

    /// Where the rows are (see [`Span`]).
    pub fn span(&self) -> Span {
        match self {
            KeyRows::Fixed { buf, tags, .. } => {
                Span { tags: (tags.as_ptr() as usize, tags.len()), rows: (buf.as_ptr() as usize, buf.len()) }
            }
            KeyRows::Packed { buf, .. } => Span { tags: (0, 0), rows: (buf.as_ptr() as usize, buf.len()) },
            KeyRows::Map(_) => Span::default(),
        }
    }

    /// Asks the CPU to load the entry of `row`, in the fixed form (found by its tag).
    pub fn prefetch_row(&self, row: &[u8]) {
        if let KeyRows::Fixed { width, buf, tags } = self {
            let (stride, tag) = (COUNT_BYTES + width, tag(row));
            for i in tag_positions(tags, tag) {
                let at = buf.as_ptr().wrapping_add(i * stride);
                prefetch(at);
                prefetch(at.wrapping_add(stride - 1));
            }
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
            KeyRows::Fixed { width, tags, .. } if !tags.is_empty() && row.len() != *width => {
                self.repack();
                self.add(row, weight);
            }
            KeyRows::Fixed { width, buf, tags } => {
                if tags.is_empty() {
                    *width = row.len();
                }
                let (width, stride, tag) = (*width, COUNT_BYTES + *width, tag(row));
                let mut weight = weight;
                if weight < 0 {
                    // Take from the row's entries, found by their tags; an entry that reaches 0
                    // goes, and the last entry moves into its place.
                    let mut from = 0;
                    while weight < 0 {
                        let found = tag_positions(&tags[from..], tag).map(|i| from + i).find(|&i| {
                            let (existing, count) = fixed_entry(buf, width, i);
                            count > 0 && same_bytes(existing, row)
                        });
                        let Some(i) = found else { break };
                        let (_, count) = fixed_entry(buf, width, i);
                        let taken = count.min(-weight);
                        weight += taken;
                        if taken < count {
                            buf[i * stride..i * stride + COUNT_BYTES].copy_from_slice(&(count - taken).to_le_bytes());
                            from = i + 1;
                            continue;
                        }
                        // The last entry, now at `i`, is looked at again.
                        let last = tags.len() - 1;
                        buf.copy_within(last * stride..(last + 1) * stride, i * stride);
                        buf.truncate(last * stride);
                        tags.swap_remove(i);
                        from = i;
                    }
                    if weight == 0 {
                        return;
                    }
                }
                if tags.len() >= PACKED_ROWS_MAX {
                    self.make_map();
                    self.add(row, weight);
                    return;
                }
                buf.extend_from_slice(&weight.to_le_bytes());
                buf.extend_from_slice(row);
                tags.push(tag);
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
                    self.make_map();
                    self.add(row, weight);
                    return;
                }
                buf.extend_from_slice(&(row.len() as u32).to_le_bytes());
                buf.extend_from_slice(&weight.to_le_bytes());
                buf.extend_from_slice(row);
                *entries += 1;
            }
        }
    }

    /// Moves the rows to the packed form (a row of another length came).
    fn repack(&mut self) {
        let mut buf = Vec::new();
        let mut entries = 0;
        for (row, count) in self.iter() {
            buf.extend_from_slice(&(row.len() as u32).to_le_bytes());
            buf.extend_from_slice(&count.to_le_bytes());
            buf.extend_from_slice(row);
            entries += 1;
        }
        *self = KeyRows::Packed { buf, entries };
    }

    /// Moves the rows to the map form (too many for a scan).
    fn make_map(&mut self) {
        let mut rows: HashMap<RowBytes, i64> = HashMap::with_capacity(self.len() * 2);
        for (existing, count) in self.iter() {
            add_count(&mut rows, existing, count);
        }
        *self = KeyRows::Map(rows);
    }
}

pub enum KeyRowsIter<'a> {
    Fixed { buf: &'a [u8], width: usize, next: usize, len: usize },
    Packed { buf: &'a [u8], at: usize },
    Map(Box<dyn Iterator<Item = (&'a [u8], i64)> + 'a>),
}

impl<'a> Iterator for KeyRowsIter<'a> {
    type Item = (&'a [u8], i64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            KeyRowsIter::Fixed { buf, width, next, len } => {
                if *next >= *len {
                    return None;
                }
                let entry = fixed_entry(buf, *width, *next);
                *next += 1;
                Some(entry)
            }
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
        // In batches of rows, each in a few loops of lookups or prefetches alone: the indexes
        // are much larger than the caches, and the misses of one loop overlap, where one row at a
        // time would wait for each in turn (a batch's share of the state fits the L2 cache).
        // 1. The index slots of the rows' keys, by hash (one hash serves both sides).
        // 2. Each row's matches, and where its key's own rows are.
        // 3. What the change of those own rows touches: their tags and where they end.
        // 4. A delete's entries, found by those tags.
        let hashes: Vec<u64> = (0..delta.len()).map(|i| self.left_index.hash(keys.row(i).data())).collect();
        let mut matches: Vec<Option<&KeyRows>> = Vec::new();
        let mut spans: Vec<Span> = Vec::new();
        let mut pairs: Pairs = Vec::new();
        for batch in prefetch_batches(delta.len()) {
            for &hash in &hashes[batch.clone()] {
                self.right_index.prefetch(hash);
                self.left_index.prefetch(hash);
            }
            matches.clear();
            spans.clear();
            for i in batch.clone() {
                let key = keys.row(i).data();
                let null = null_key[i];
                let found = if null { None } else { self.right_index.get_hashed(hashes[i], key) };
                if let Some(found) = found {
                    found.span().prefetch_read();
                }
                spans.push(if null {
                    Span::default()
                } else {
                    self.left_index.get_hashed(hashes[i], key).map_or(Span::default(), KeyRows::span)
                });
                matches.push(found);
            }
            for (span, i) in spans.iter().zip(batch.clone()) {
                span.prefetch_change(delta.weights[i] < 0);
            }
            for i in batch.clone() {
                if delta.weights[i] < 0 && !null_key[i] {
                    if let Some(own) = self.left_index.get_hashed(hashes[i], keys.row(i).data()) {
                        own.prefetch_row(rows.row(i).data());
                    }
                }
            }
            for (i, found) in batch.zip(matches.drain(..)) {
                let weight = &delta.weights[i];
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
    fn tag_positions_finds_every_equal_tag_and_no_other() {
        let mut rng = StdRng::seed_from_u64(7);
        for len in 0..40 {
            for _ in 0..50 {
                // Few distinct tags, so that equal ones sit next to each other (the word
                // comparison's borrow can flag a byte above an equal one).
                let tags: Vec<u8> = (0..len).map(|_| rng.random_range(0..4_u8).wrapping_mul(0x7f)).collect();
                for tag in [0, 0x7f, 0xfe, 0x7d, 0x01, 0x80] {
                    let expected: Vec<usize> = (0..len).filter(|&i| tags[i] == tag).collect();
                    assert_eq!(tag_positions(&tags, tag).collect::<Vec<_>>(), expected, "{tags:?} {tag}");
                }
            }
        }
    }

    #[test]
    fn key_rows_keep_multiplicities_in_every_form() {
        for seed in 0..16_u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            // Few distinct rows stay packed; many move to the map.
            let distinct = if seed % 2 == 0 { 40 } else { PACKED_ROWS_MAX as u64 * 3 };
            let mut rows = KeyRows::default();
            let mut reference: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
            for step in 0..3_000 {
                let (row, weight) = if reference.is_empty() || rng.random_range(0..3) > 0 {
                    // Rows of one length (seeds 0-7) or of different lengths; inserted once or twice.
                    let n = rng.random_range(0..distinct);
                    let row = if seed < 8 {
                        format!("row-{n:06}")
                    } else {
                        format!("row-{n}-{}", "x".repeat((n % 7) as usize))
                    };
                    (row.into_bytes(), rng.random_range(1..3))
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
            match (seed % 2, seed < 8) {
                (1, _) => assert!(matches!(rows, KeyRows::Map(_)), "seed {seed}: many rows move to the map"),
                (_, true) => assert!(matches!(rows, KeyRows::Fixed { .. }), "seed {seed}: rows of one length"),
                (_, false) => assert!(matches!(rows, KeyRows::Packed { .. }), "seed {seed}: rows of several lengths"),
            }
            // Removing every row empties it.
            for (row, count) in reference.clone() {
                rows.add(&row, -count);
            }
            assert!(rows.is_empty(), "seed {seed}");
        }
    }
}
