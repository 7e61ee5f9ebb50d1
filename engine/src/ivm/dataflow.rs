//! The dataflow of an incrementally maintained view: a tree of operators that turns a change of
//! one input table (a [`Delta`]: rows with weights, +1 inserted, -1 deleted) into the change of
//! the view's rows.
//!
//! Stateless operators (scan, filter, projection, union) map a delta batch to a delta batch with
//! DataFusion's physical expressions. Stateful operators ([`super::join`], [`super::aggregate`],
//! distinct) keep what they need in memory, keyed by rows in Arrow's row format (bytes that
//! compare and hash like the values), and are serialized by [`super::state`] for checkpoints.
//! Compiling a DataFusion logical plan into this tree lives in [`super::compile`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use datafusion::common::HashMap;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

use super::aggregate::AggregateNode;
use super::join::JoinNode;
use super::Requery;
use crate::error::{Error, Result};

/// A row in Arrow's row format (hashes and compares as its values).
pub type RowBytes = Box<[u8]>;

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A change: each row of `batch` counted `weights[i]` times (negative: removed).
#[derive(Debug, Clone)]
pub struct Delta {
    pub batch: RecordBatch,
    pub weights: Vec<i64>,
    /// Each row's group id, when the rows are an aggregate's (through projections and filters):
    /// the rows of one group share its id, which no other group has while this one has a row.
    /// The output store finds a group's row by it, with no lookup of the key.
    pub ids: Option<Vec<u32>>,
}

impl Delta {
    pub fn new(batch: RecordBatch, weights: Vec<i64>) -> Self {
        Self { batch, weights, ids: None }
    }

    /// The same change with each row's group id (see [`Delta::ids`]).
    pub fn with_ids(self, ids: Vec<u32>) -> Self {
        Self { ids: Some(ids), ..self }
    }

    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// Rows inserted (each counted once).
    pub fn inserted(batch: RecordBatch) -> Self {
        let weights = vec![1; batch.num_rows()];
        Self::new(batch, weights)
    }

    /// Rows deleted (each counted once).
    pub fn deleted(batch: RecordBatch) -> Self {
        let weights = vec![-1; batch.num_rows()];
        Self::new(batch, weights)
    }

    /// Several deltas as one, in the schema of the first (None when there are none).
    pub fn concat(mut deltas: Vec<Delta>) -> Result<Option<Delta>> {
        let schema = match deltas.as_slice() {
            [] | [_] => return Ok(deltas.pop()),
            [first, ..] => first.batch.schema(),
        };
        let batches = deltas
            .iter()
            .map(|d| batch_of(&schema, d.batch.columns().to_vec(), d.len()))
            .collect::<Result<Vec<_>>>()?;
        let batch = arrow::compute::concat_batches(&schema, &batches)?;
        Ok(Some(Delta::new(batch, deltas.into_iter().flat_map(|d| d.weights).collect())))
    }

    /// The rows for which a boolean expression is true.
    pub fn keep_where(&self, predicate: &Arc<dyn PhysicalExpr>) -> Result<Delta> {
        let mask = predicate.evaluate(&self.batch)?.into_array(self.len())?;
        let mask = mask
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| Error::Internal(format!("a view condition is not boolean: {predicate}")))?;
        self.filter(mask)
    }

    /// The rows where `mask` is true (NULL counts as false).
    pub fn filter(&self, mask: &BooleanArray) -> Result<Delta> {
        let batch = filter_record_batch(&self.batch, mask)?;
        let kept = |i: &usize| mask.is_valid(*i) && mask.value(*i);
        let weights = self.weights.iter().enumerate().filter(|(i, _)| kept(i)).map(|(_, w)| *w).collect();
        let ids =
            self.ids.as_ref().map(|ids| ids.iter().enumerate().filter(|(i, _)| kept(i)).map(|(_, id)| *id).collect());
        Ok(Delta { batch, weights, ids })
    }
}

/// Adds `weight` to a row's count (the row is copied only when it is new; a count that reaches 0
/// is dropped) and returns the count before and after.
pub fn add_count(counts: &mut HashMap<RowBytes, i64>, row: &[u8], weight: i64) -> (i64, i64) {
    match counts.get_mut(row) {
        Some(count) => {
            let before = *count;
            *count += weight;
            if *count == 0 {
                counts.remove(row);
            }
            (before, before + weight)
        }
        None => {
            if weight != 0 {
                counts.insert(row.into(), weight);
            }
            (0, weight)
        }
    }
}

/// Whether two values in row format are equal, for scans that compare one value with many (a
/// join key's rows, a min/max buffer): their last 8 bytes are compared first, inline, where most
/// values differ (a join key's rows share the key, a leading column), before the full compare.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match (a.last_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(x), Some(y)) if x != y => false,
        _ => a == b,
    }
}

/// Rows whose state is prefetched together, in a loop of prefetches alone, before a loop uses it:
/// the first cache lines of that many rows' state fit the L2 cache, and the CPU then has as many
/// misses in flight as it can take (prefetching a fixed distance ahead kept it to that distance).
pub const PREFETCH_BATCH: usize = 256;

/// `0..len` in runs of [`PREFETCH_BATCH`].
pub fn prefetch_batches(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len).step_by(PREFETCH_BATCH).map(move |start| start..(start + PREFETCH_BATCH).min(len))
}

pub use crate::keymap::prefetch;

/// Evaluates expressions over a batch into arrays of its length.
pub fn evaluate(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    exprs.iter().map(|e| Ok(e.evaluate(batch)?.into_array(batch.num_rows())?)).collect()
}

pub use crate::types::batch_of;

/// A row converter for columns of these types.
pub fn converter(schema: &SchemaRef) -> Result<RowConverter> {
    Ok(RowConverter::new(schema.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())?)
}

/// One operator of a view's dataflow.
pub enum Node {
    Scan(ScanNode),
    Filter { input: Box<Node>, predicate: Arc<dyn PhysicalExpr>, text: String },
    Project { input: Box<Node>, exprs: Vec<Arc<dyn PhysicalExpr>>, schema: SchemaRef, text: String },
    Join(Box<JoinNode>),
    Aggregate(Box<AggregateNode>),
    Distinct(DistinctNode),
    Union { inputs: Vec<Node>, schema: SchemaRef },
}

/// Reads one input table: its change rows, projected and filtered as the plan's scan is.
pub struct ScanNode {
    /// The catalog key of the table.
    pub table: String,
    pub projection: Option<Vec<usize>>,
    /// Filters pushed into the scan, over the table's full row.
    pub filters: Vec<Arc<dyn PhysicalExpr>>,
    pub text: String,
}

/// DISTINCT: each row's multiplicity; a row is in the output while it is positive.
pub struct DistinctNode {
    pub input: Box<Node>,
    pub rows: RowConverter,
    pub counts: HashMap<RowBytes, i64>,
}

/// One input table's change, handed down the tree.
pub struct Change<'a> {
    pub table: &'a str,
    pub delta: &'a Delta,
}

impl Node {
    /// Pushes a change of one table through this operator; `None` when no input below reads it.
    pub fn apply<'a>(
        &'a mut self,
        change: &'a Change<'a>,
        requery: &'a Requery<'a>,
    ) -> BoxFuture<'a, Result<Option<Delta>>> {
        Box::pin(async move {
            match self {
                Node::Scan(scan) => scan.apply(change),
                Node::Filter { input, predicate, .. } => {
                    let Some(delta) = input.apply(change, requery).await? else { return Ok(None) };
                    Ok(Some(delta.keep_where(predicate)?))
                }
                Node::Project { input, exprs, schema, .. } => {
                    let Some(delta) = input.apply(change, requery).await? else { return Ok(None) };
                    let columns = evaluate(exprs, &delta.batch)?;
                    let batch = batch_of(schema, columns, delta.len())?;
                    Ok(Some(Delta { batch, ..delta }))
                }
                Node::Join(join) => join.apply(change, requery).await,
                Node::Aggregate(aggregate) => aggregate.apply(change, requery).await,
                Node::Distinct(distinct) => {
                    let Some(delta) = distinct.input.apply(change, requery).await? else { return Ok(None) };
                    Ok(Some(distinct.apply(delta)?))
                }
                Node::Union { inputs, schema } => {
                    let mut out: Vec<Delta> = Vec::new();
                    for input in inputs.iter_mut() {
                        if let Some(delta) = input.apply(change, requery).await? {
                            let batch = batch_of(schema, delta.batch.columns().to_vec(), delta.len())?;
                            out.push(Delta::new(batch, delta.weights));
                        }
                    }
                    Delta::concat(out)
                }
            }
        })
    }

    /// The operator tree as indented lines (EXPLAIN MATERIALIZED VIEW).
    pub fn describe(&self, depth: usize, out: &mut Vec<String>) {
        let pad = "  ".repeat(depth);
        match self {
            Node::Scan(scan) => out.push(format!("{pad}{}", scan.text)),
            Node::Filter { input, text, .. } => {
                out.push(format!("{pad}Filter: {text}"));
                input.describe(depth + 1, out);
            }
            Node::Project { input, text, .. } => {
                out.push(format!("{pad}Project: {text}"));
                input.describe(depth + 1, out);
            }
            Node::Join(join) => {
                out.push(format!("{pad}{} (state: both sides indexed by key)", join.text));
                join.left.describe(depth + 1, out);
                join.right.describe(depth + 1, out);
            }
            Node::Aggregate(aggregate) => {
                out.push(format!("{pad}{} (state: per group)", aggregate.text));
                aggregate.input.describe(depth + 1, out);
            }
            Node::Distinct(distinct) => {
                out.push(format!("{pad}Distinct (state: row counts)"));
                distinct.input.describe(depth + 1, out);
            }
            Node::Union { inputs, .. } => {
                out.push(format!("{pad}Union All"));
                for input in inputs {
                    input.describe(depth + 1, out);
                }
            }
        }
    }

    /// Forgets all state (before a build from scratch).
    pub fn reset(&mut self) {
        match self {
            Node::Scan(_) => {}
            Node::Filter { input, .. } | Node::Project { input, .. } => input.reset(),
            Node::Join(join) => {
                join.left_index.clear();
                join.right_index.clear();
                join.left.reset();
                join.right.reset();
            }
            Node::Aggregate(aggregate) => {
                aggregate.groups.clear();
                aggregate.started = false;
                aggregate.input.reset();
            }
            Node::Distinct(distinct) => {
                distinct.counts.clear();
                distinct.input.reset();
            }
            Node::Union { inputs, .. } => inputs.iter_mut().for_each(Node::reset),
        }
    }

    /// Output columns that no two rows share (all together), when the operators guarantee it: the
    /// group columns of a grouped aggregate, kept through filters and plain-column projections.
    /// The view's rows can then be stored by that key.
    pub fn unique_key(&self) -> Option<Vec<usize>> {
        match self {
            Node::Aggregate(aggregate) if !aggregate.global => Some((0..aggregate.group_exprs.len()).collect()),
            Node::Filter { input, .. } => input.unique_key(),
            Node::Project { input, exprs, .. } => {
                let key = input.unique_key()?;
                key.iter()
                    .map(|&k| {
                        exprs.iter().position(|e| {
                            (e.as_ref() as &dyn std::any::Any)
                                .downcast_ref::<Column>()
                                .is_some_and(|column| column.index() == k)
                        })
                    })
                    .collect()
            }
            _ => None,
        }
    }

    /// The tables this dataflow reads.
    pub fn tables(&self, out: &mut Vec<String>) {
        match self {
            Node::Scan(scan) => out.push(scan.table.clone()),
            Node::Filter { input, .. } | Node::Project { input, .. } => input.tables(out),
            Node::Join(join) => {
                join.left.tables(out);
                join.right.tables(out);
            }
            Node::Aggregate(aggregate) => aggregate.input.tables(out),
            Node::Distinct(distinct) => distinct.input.tables(out),
            Node::Union { inputs, .. } => inputs.iter().for_each(|i| i.tables(out)),
        }
    }
}

impl ScanNode {
    fn apply(&self, change: &Change<'_>) -> Result<Option<Delta>> {
        if change.table != self.table {
            return Ok(None);
        }
        let mut delta = change.delta.clone();
        for filter in &self.filters {
            delta = delta.keep_where(filter)?;
        }
        if let Some(projection) = &self.projection {
            delta.batch = delta.batch.project(projection)?;
        }
        Ok(Some(delta))
    }
}

impl DistinctNode {
    fn apply(&mut self, delta: Delta) -> Result<Delta> {
        let rows = self.rows.convert_columns(delta.batch.columns())?;
        let mut keep = Vec::new();
        let mut weights = Vec::new();
        for (i, weight) in delta.weights.iter().enumerate() {
            let (before, after) = add_count(&mut self.counts, rows.row(i).data(), *weight);
            let (before, after) = (before > 0, after > 0);
            if before != after {
                keep.push(i as u32);
                weights.push(if after { 1 } else { -1 });
            }
        }
        let indices = arrow::array::UInt32Array::from(keep);
        let columns = delta
            .batch
            .columns()
            .iter()
            .map(|c| arrow::compute::take(c, &indices, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let batch = batch_of(&delta.batch.schema(), columns, weights.len())?;
        Ok(Delta::new(batch, weights))
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_compares_every_byte_whatever_the_length() {
        let long = b"0123456789abcdef".to_vec();
        assert!(same_bytes(&long, &long.clone()));
        let mut head = long.clone();
        head[0] = b'x';
        assert!(!same_bytes(&long, &head), "differs before the last 8 bytes");
        let mut tail = long.clone();
        tail[15] = b'x';
        assert!(!same_bytes(&long, &tail), "differs in the last 8 bytes");
        assert!(!same_bytes(&long, &long[..15]), "a prefix");
        assert!(same_bytes(b"abc", b"abc"));
        assert!(!same_bytes(b"abc", b"abd"), "shorter than 8 bytes");
        assert!(same_bytes(b"", b""));
    }
}
