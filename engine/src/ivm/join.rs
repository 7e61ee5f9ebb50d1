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

use super::dataflow::{add_count, batch_of, evaluate, BoxFuture, Change, Delta, Node, RowBytes};
use super::Requery;
use crate::error::Result;

/// Rows of one side by key: row -> multiplicity.
pub type SideIndex = HashMap<RowBytes, HashMap<RowBytes, i64>>;

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

fn add(index: &mut SideIndex, key: &[u8], row: &[u8], weight: i64) {
    if weight == 0 {
        return;
    }
    // Looked up as borrowed bytes: the key and row are copied only when they are new.
    let Some(rows) = index.get_mut(key) else {
        index.insert(key.into(), HashMap::from_iter([(row.into(), weight)]));
        return;
    };
    add_count(rows, row, weight);
    if rows.is_empty() {
        index.remove(key);
    }
}

fn total(index: &SideIndex, key: &[u8]) -> i64 {
    index.get(key).map(|rows| rows.values().sum()).unwrap_or(0)
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
        let mut pairs: Pairs = Vec::new();
        for (i, weight) in delta.weights.iter().enumerate() {
            let row = rows.row(i).data();
            if null_key[i] {
                if self.left_outer {
                    pairs.push((row, &self.null_right, *weight));
                }
                continue;
            }
            let key = keys.row(i).data();
            let mut matched = false;
            for (right, count) in self.right_index.get(key).into_iter().flatten() {
                matched |= *count != 0;
                pairs.push((row, right, weight * count));
            }
            if self.left_outer && !matched {
                pairs.push((row, &self.null_right, *weight));
            }
            add(&mut self.left_index, key, row, *weight);
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
            let before = if self.left_outer { total(&self.right_index, key) } else { 0 };
            for i in indices {
                let row = rows.row(i).data();
                let weight = delta.weights[i];
                for (left, count) in self.left_index.get(key).into_iter().flatten() {
                    pairs.push((left, row, count * weight));
                }
                add(&mut self.right_index, key, row, weight);
            }
            if self.left_outer {
                let after = total(&self.right_index, key);
                if (before > 0) != (after > 0) {
                    let sign = if after > 0 { -1 } else { 1 };
                    for (left, count) in self.left_index.get(key).into_iter().flatten() {
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
