//! GROUP BY with count, count(DISTINCT), sum, avg, min and max, maintained per group.
//!
//! Each group keeps its row count and one state per aggregate: counts and sums (with the count of
//! non-NULL values, so a sum knows when it is NULL again), the multiset of values for
//! count(DISTINCT), and for min and max a small sorted buffer of the group's best values. A delete
//! only removes its value from the buffer; only when a buffer runs empty while the group still has
//! values (or an inconsistency is seen) is that group re-aggregated, by querying the aggregate's
//! input at the versions being applied, for those groups alone. A group whose output changed
//! emits its old row with weight -1 and its new one with +1. An aggregate without GROUP BY has
//! one group that always exists (count 0, sums NULL on no rows).
// Indexes here are positions the operator itself assigned (group ids, row positions of its own
// batches, key slots); input reaches them only through those, so an index out of range would be a
// bug in the operator. Reviewed for issue 19; the hot loops keep plain indexing.
#![allow(clippy::indexing_slicing)]

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int64Array, UInt32Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use arrow::row::RowConverter;
use datafusion::common::{HashMap, ScalarValue};
use datafusion::logical_expr::{lit, Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_expr::PhysicalExpr;

use super::dataflow::{
    add_count, batch_of, evaluate, prefetch_batches, same_bytes, BoxFuture, Change, Delta, Node, RowBytes,
};
use super::groups::Groups;
use super::{Requery, START_TABLE};
use crate::error::{Error, Result};

/// Values kept per group for min and max before a delete may need a re-aggregation.
pub const EXTREME_BUFFER_VALUES_MAX: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Count,
    CountDistinct,
    Sum,
    Avg,
    Min,
    Max,
}

/// How a sum or average accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumKind {
    Int,
    Float,
    /// Decimal128 values of this scale as their unscaled integers.
    Decimal(i8),
}

pub struct AggSpec {
    pub kind: AggKind,
    pub arg: Arc<dyn PhysicalExpr>,
    /// The argument as a logical expression over the input (for re-aggregation).
    pub arg_expr: Expr,
    pub sum_kind: SumKind,
    /// Rows of the argument's values (count DISTINCT, min, max).
    pub values: Option<RowConverter>,
    pub output_type: DataType,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AggState {
    Count(i64),
    SumInt { sum: i128, count: i64 },
    SumFloat { sum: f64, count: i64 },
    Distinct(HashMap<RowBytes, i64>),
    Extreme(Extreme),
}

/// The best values of a group (ascending for min, descending for max), at most
/// [`EXTREME_BUFFER_VALUES_MAX`]; `complete` when they are all of the group's values.
///
/// The values, in row format, are packed one after another in one buffer (each a 4-byte length,
/// its bytes, the length again): a group's buffer is one allocation that a scan reads in a few
/// cache lines, and its worst value is read from its end, with no scan. A delete of a value worse
/// than the worst (most deletes, when a group has many more values than the buffer) reads only
/// that.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extreme {
    packed: Vec<u8>,
    count: usize,
    pub complete: bool,
    /// The buffer cannot tell the extreme: re-aggregate the group.
    pub dirty: bool,
}

/// The length before and after a packed value.
const PACKED_LEN: usize = 4;

#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub rows: i64,
    pub aggs: Vec<AggState>,
    /// The change (see [`AggregateNode::epoch`]) that last recorded this group's output before it.
    pub seen: u64,
}

pub struct AggregateNode {
    pub input: Node,
    pub group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The group expressions as logical expressions over the input (for re-aggregation).
    pub group_logical: Vec<Expr>,
    pub group_types: Vec<DataType>,
    pub groups_converter: RowConverter,
    /// No GROUP BY: one group that always exists.
    pub global: bool,
    pub specs: Vec<AggSpec>,
    pub groups: Groups,
    /// The aggregate's input plan (for re-aggregation).
    pub input_plan: Arc<LogicalPlan>,
    pub schema: SchemaRef,
    pub text: String,
    /// Whether the global group's first row was emitted.
    pub started: bool,
    /// Counts the changes applied (a group whose `seen` is this was touched by the current one).
    pub epoch: u64,
}

fn better(max: bool, a: &[u8], b: &[u8]) -> bool {
    if max {
        a > b
    } else {
        a < b
    }
}

impl Extreme {
    /// An empty buffer that holds all of the group's values (none yet).
    pub fn complete() -> Self {
        Self { complete: true, ..Default::default() }
    }

    /// An empty buffer with these flags, filled by [`Self::push`] (a checkpoint read back).
    pub fn with_flags(complete: bool, dirty: bool) -> Self {
        Self { complete, dirty, ..Default::default() }
    }

    /// Adds a value after the others (the caller keeps them in order).
    pub fn push(&mut self, value: &[u8]) {
        self.splice(self.packed.len(), value);
    }

    /// The values, best first.
    pub fn values(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans().map(|span| self.value(span))
    }

    /// The value of a packed span.
    fn value(&self, (start, end): (usize, usize)) -> &[u8] {
        &self.packed[start + PACKED_LEN..end - PACKED_LEN]
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Where the values are in memory (for a prefetch): the first byte and the last.
    pub fn ends(&self) -> (*const u8, *const u8) {
        let start = self.packed.as_ptr();
        (start, start.wrapping_add(self.packed.len().saturating_sub(1)))
    }

    /// The best value.
    pub fn first(&self) -> Option<&[u8]> {
        self.values().next()
    }

    /// The worst value, read from the length after it.
    pub fn last(&self) -> Option<&[u8]> {
        self.last_span().map(|span| self.value(span))
    }

    fn last_span(&self) -> Option<(usize, usize)> {
        let end = self.packed.len();
        let trailer = self.packed.get(end.checked_sub(PACKED_LEN)?..end)?;
        let len = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]) as usize;
        Some((end.checked_sub(2 * PACKED_LEN + len)?, end))
    }

    /// Each packed value's byte range (its length prefix included).
    fn spans(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let header = self.packed.get(at..at + PACKED_LEN)?;
            let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
            let span = (at, at + 2 * PACKED_LEN + len);
            at = span.1;
            Some(span)
        })
    }

    fn splice(&mut self, at: usize, value: &[u8]) {
        let header = (value.len() as u32).to_le_bytes();
        self.packed.splice(at..at, header.iter().chain(value).chain(header.iter()).copied());
        self.count += 1;
    }

    fn remove_span(&mut self, (start, end): (usize, usize)) {
        self.packed.drain(start..end);
        self.count -= 1;
    }

    fn insert(&mut self, max: bool, value: &[u8]) {
        let worst_ok = self.last().is_some_and(|w| !better(max, w, value));
        if (self.complete && self.count < EXTREME_BUFFER_VALUES_MAX) || worst_ok {
            // Before the first value this one beats.
            let at = self
                .spans()
                .find(|&span| better(max, value, self.value(span)))
                .map_or(self.packed.len(), |(start, _)| start);
            self.splice(at, value);
            if self.count > EXTREME_BUFFER_VALUES_MAX {
                if let Some(last) = self.last_span() {
                    self.remove_span(last);
                }
                self.complete = false;
            }
        } else if self.count == 0 {
            // The buffer is empty but the group may hold better values than this one.
            self.dirty = true;
        } else {
            self.complete = false;
        }
    }

    fn delete(&mut self, max: bool, value: &[u8]) {
        // Worse than the worst: not in the buffer, fine only if the buffer is partial (the value
        // was one of those beyond it). Read from the buffer's end, with no scan.
        if self.last().is_some_and(|worst| better(max, worst, value)) {
            if self.complete {
                self.dirty = true;
            }
            return;
        }
        let found = self.spans().find(|&span| same_bytes(self.value(span), value));
        if let Some(span) = found {
            self.remove_span(span);
            if self.count == 0 && !self.complete {
                self.dirty = true;
            }
            return;
        }
        // Within the buffer's range but not in it: the buffer cannot tell the extreme.
        self.dirty = true;
    }
}

impl AggSpec {
    fn initial(&self) -> AggState {
        match self.kind {
            AggKind::Count => AggState::Count(0),
            AggKind::CountDistinct => AggState::Distinct(HashMap::new()),
            AggKind::Sum | AggKind::Avg if self.sum_kind == SumKind::Float => AggState::SumFloat { sum: 0.0, count: 0 },
            AggKind::Sum | AggKind::Avg => AggState::SumInt { sum: 0, count: 0 },
            AggKind::Min | AggKind::Max => AggState::Extreme(Extreme::complete()),
        }
    }

    /// The argument column in the form the state accumulates (Int64, Float64, Decimal128 or rows).
    fn prepare(&self, column: ArrayRef) -> Result<Prepared> {
        Ok(match (self.kind, self.sum_kind) {
            (AggKind::Count, _) => Prepared::Plain(column),
            (AggKind::Sum | AggKind::Avg, SumKind::Int) => Prepared::Plain(cast(&column, &DataType::Int64)?),
            (AggKind::Sum | AggKind::Avg, SumKind::Float) => Prepared::Plain(cast(&column, &DataType::Float64)?),
            (AggKind::Sum | AggKind::Avg, SumKind::Decimal(_)) => Prepared::Plain(column),
            _ => {
                let converter = self.values.as_ref().ok_or_else(|| Error::Internal("no value converter".into()))?;
                Prepared::Rows(converter.convert_columns(std::slice::from_ref(&column))?, column)
            }
        })
    }

    fn update(&self, state: &mut AggState, prepared: &Prepared, i: usize, weight: i64) -> Result<()> {
        let column = prepared.column();
        if column.is_null(i) {
            return Ok(());
        }
        match state {
            AggState::Count(n) => *n += weight,
            AggState::SumInt { sum, count } => {
                let value = match self.sum_kind {
                    SumKind::Decimal(_) => column.as_primitive::<arrow::datatypes::Decimal128Type>().value(i),
                    _ => column.as_primitive::<Int64Type>().value(i) as i128,
                };
                *sum += value * weight as i128;
                *count += weight;
            }
            AggState::SumFloat { sum, count } => {
                *sum += column.as_primitive::<Float64Type>().value(i) * weight as f64;
                *count += weight;
            }
            AggState::Distinct(values) => {
                let Prepared::Rows(rows, _) = prepared else { return Err(Error::Internal("distinct rows".into())) };
                add_count(values, rows.row(i).data(), weight);
            }
            AggState::Extreme(extreme) => {
                let Prepared::Rows(rows, _) = prepared else { return Err(Error::Internal("extreme rows".into())) };
                let max = self.kind == AggKind::Max;
                for _ in 0..weight.unsigned_abs() {
                    if weight > 0 {
                        extreme.insert(max, rows.row(i).as_ref());
                    } else {
                        extreme.delete(max, rows.row(i).as_ref());
                    }
                }
            }
        }
        Ok(())
    }

    /// The column kind this aggregate's outputs are collected in.
    fn out_column(&self) -> OutColumn {
        match (self.kind, self.sum_kind, &self.output_type) {
            (AggKind::Min | AggKind::Max, _, _) => OutColumn::Rows { bytes: Vec::new(), ranges: Vec::new() },
            (AggKind::Avg, SumKind::Decimal(_), DataType::Decimal128(..)) => OutColumn::Decimal(Vec::new()),
            (AggKind::Avg, _, _) | (AggKind::Sum, SumKind::Float, _) => OutColumn::Float(Vec::new()),
            (AggKind::Sum, _, DataType::Decimal128(..)) => OutColumn::Decimal(Vec::new()),
            _ => OutColumn::Int(Vec::new()),
        }
    }

    /// Appends the output of `state` to `out` (made by [`Self::out_column`]).
    fn output(&self, state: &AggState, out: &mut OutColumn) -> Result<()> {
        match (state, out) {
            (AggState::Count(n), OutColumn::Int(v)) => v.push(Some(*n)),
            (AggState::Distinct(values), OutColumn::Int(v)) => v.push(Some(values.len() as i64)),
            (AggState::SumInt { count: 0, .. } | AggState::SumFloat { count: 0, .. }, out) => out.push_null(),
            (AggState::SumInt { sum, count }, OutColumn::Float(v)) => v.push(Some(*sum as f64 / *count as f64)),
            (AggState::SumInt { sum, count }, OutColumn::Decimal(v)) => {
                match (self.kind, self.sum_kind, &self.output_type) {
                    // A numeric mean, rounded as `avg` rounds it.
                    (AggKind::Avg, SumKind::Decimal(scale), DataType::Decimal128(_, column_scale)) => {
                        v.push(Some(crate::functions::arithmetic::numeric_mean(*sum, scale, *count, *column_scale)?))
                    }
                    _ => v.push(Some(*sum)),
                }
            }
            (AggState::SumInt { sum, .. }, OutColumn::Int(v)) => v.push(Some(i64::try_from(*sum).map_err(|_| {
                Error::Data { sqlstate: "22003", message: "bigint out of range in a materialized view's sum".into() }
            })?)),
            (AggState::SumFloat { sum, count }, OutColumn::Float(v)) => {
                v.push(Some(if self.kind == AggKind::Avg { sum / *count as f64 } else { *sum }))
            }
            // The value stays in row format here; `decode_extremes` turns a column of them into
            // values with one conversion (one per group was most of an initial build's time).
            (AggState::Extreme(extreme), out @ OutColumn::Rows { .. }) => out.push_row(extreme.first()),
            _ => return Err(Error::Internal("a view aggregate's state and output disagree".into())),
        }
        Ok(())
    }

    /// The column of a min or max from the outputs' row-format values (None: NULL).
    fn decode_extremes(&self, values: &[Option<&[u8]>]) -> Result<ArrayRef> {
        if values.iter().all(Option::is_none) {
            return Ok(arrow::array::new_null_array(&self.output_type, values.len()));
        }
        let converter = self.values.as_ref().ok_or_else(|| Error::Internal("no value converter".into()))?;
        let parser = converter.parser();
        let arrays = converter.convert_rows(values.iter().flatten().map(|v| parser.parse(v)))?;
        let array = arrays.first().ok_or_else(|| Error::Internal("no extreme column".into()))?;
        let mut next = 0_u32;
        let indices: UInt32Array = values
            .iter()
            .map(|v| {
                v.map(|_| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        Ok(arrow::compute::take(array.as_ref(), &indices, None)?)
    }

    /// The column of the outputs `picks` selects (each: a column and an index into it).
    fn array(&self, picks: &[(&OutColumn, usize)]) -> Result<ArrayRef> {
        let Some((first, _)) = picks.first() else { return Ok(arrow::array::new_empty_array(&self.output_type)) };
        Ok(match first {
            OutColumn::Int(_) => Arc::new(picks.iter().map(|(c, i)| c.int(*i)).collect::<Int64Array>()),
            OutColumn::Float(_) => Arc::new(picks.iter().map(|(c, i)| c.float(*i)).collect::<Float64Array>()),
            OutColumn::Decimal(_) => {
                let array: Decimal128Array = picks.iter().map(|(c, i)| c.decimal(*i)).collect();
                match self.output_type {
                    DataType::Decimal128(p, s) => Arc::new(array.with_precision_and_scale(p, s)?),
                    _ => Arc::new(array),
                }
            }
            OutColumn::Rows { .. } => {
                let values: Vec<Option<&[u8]>> = picks.iter().map(|(c, i)| c.row(*i)).collect();
                self.decode_extremes(&values)?
            }
        })
    }
}

/// One aggregate's outputs for the groups a change touched, in the order they were touched.
#[derive(Debug)]
enum OutColumn {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Decimal(Vec<Option<i128>>),
    /// Min or max values in row format: their bytes one after another, and each one's range.
    Rows {
        bytes: Vec<u8>,
        ranges: Vec<Option<(usize, usize)>>,
    },
}

impl OutColumn {
    fn push_null(&mut self) {
        match self {
            OutColumn::Int(v) => v.push(None),
            OutColumn::Float(v) => v.push(None),
            OutColumn::Decimal(v) => v.push(None),
            OutColumn::Rows { ranges, .. } => ranges.push(None),
        }
    }

    fn push_row(&mut self, value: Option<&[u8]>) {
        if let OutColumn::Rows { bytes, ranges } = self {
            ranges.push(value.map(|value| {
                bytes.extend_from_slice(value);
                (bytes.len() - value.len(), bytes.len())
            }));
        }
    }

    fn int(&self, i: usize) -> Option<i64> {
        match self {
            OutColumn::Int(v) => v.get(i).copied().flatten(),
            _ => None,
        }
    }

    fn float(&self, i: usize) -> Option<f64> {
        match self {
            OutColumn::Float(v) => v.get(i).copied().flatten(),
            _ => None,
        }
    }

    fn decimal(&self, i: usize) -> Option<i128> {
        match self {
            OutColumn::Decimal(v) => v.get(i).copied().flatten(),
            _ => None,
        }
    }

    fn row(&self, i: usize) -> Option<&[u8]> {
        match self {
            OutColumn::Rows { bytes, ranges } => ranges.get(i).copied().flatten().map(|(s, e)| &bytes[s..e]),
            _ => None,
        }
    }

    /// Whether value `i` here equals value `j` of `other` (a column of the same kind).
    fn same(&self, i: usize, other: &OutColumn, j: usize) -> bool {
        match self {
            OutColumn::Int(_) => self.int(i) == other.int(j),
            OutColumn::Float(_) => self.float(i).map(f64::to_bits) == other.float(j).map(f64::to_bits),
            OutColumn::Decimal(_) => self.decimal(i) == other.decimal(j),
            OutColumn::Rows { .. } => self.row(i) == other.row(j),
        }
    }
}

enum Prepared {
    Plain(ArrayRef),
    Rows(arrow::row::Rows, ArrayRef),
}

impl Prepared {
    fn column(&self) -> &ArrayRef {
        match self {
            Prepared::Plain(c) | Prepared::Rows(_, c) => c,
        }
    }
}

/// The groups a change touched, in order, with their outputs before it.
struct Touched {
    /// The groups' keys, one after another (one allocation for the change, not one per group).
    key_bytes: Vec<u8>,
    /// Where each key ends in `key_bytes`.
    key_ends: Vec<usize>,
    /// Each touched group's id (a group forgotten by the change keeps its old id here).
    ids: Vec<u32>,
    /// Whether the group had a row before the change.
    present: Vec<bool>,
    /// One column per aggregate (a value for each touched group; NULL where it had no row).
    before: Vec<OutColumn>,
}

impl Touched {
    fn new(specs: &[AggSpec]) -> Self {
        Self {
            key_bytes: Vec::new(),
            key_ends: Vec::new(),
            ids: Vec::new(),
            present: Vec::new(),
            before: specs.iter().map(AggSpec::out_column).collect(),
        }
    }

    /// Records a group's key and its outputs before the change (None: it had no row).
    fn record(&mut self, specs: &[AggSpec], key: &[u8], id: u32, group: Option<&GroupState>) -> Result<()> {
        self.key_bytes.extend_from_slice(key);
        self.key_ends.push(self.key_bytes.len());
        self.ids.push(id);
        self.present.push(group.is_some());
        outputs(specs, group, &mut self.before)
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// The key of the `i`-th touched group.
    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] };
        &self.key_bytes[start..self.key_ends[i]]
    }

    /// Each touched group's key and id.
    fn groups(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        (0..self.len()).map(|i| (self.key(i), self.ids[i]))
    }
}

/// Appends a group's outputs to `columns` (NULLs when it has no row).
fn outputs(specs: &[AggSpec], group: Option<&GroupState>, columns: &mut [OutColumn]) -> Result<()> {
    match group {
        Some(group) => {
            for ((spec, state), out) in specs.iter().zip(&group.aggs).zip(columns.iter_mut()) {
                spec.output(state, out)?;
            }
        }
        None => columns.iter_mut().for_each(OutColumn::push_null),
    }
    Ok(())
}

impl AggregateNode {
    pub fn apply<'a>(
        &'a mut self,
        change: &'a Change<'a>,
        requery: &'a Requery<'a>,
    ) -> BoxFuture<'a, Result<Option<Delta>>> {
        Box::pin(async move {
            self.epoch += 1;
            let mut touched = Touched::new(&self.specs);
            if change.table == START_TABLE && self.global && !self.started {
                self.started = true;
                let mut group = self.new_group();
                group.seen = self.epoch;
                let id = self.groups.insert(&global_key(), group)?;
                touched.record(&self.specs, &global_key(), id, None)?;
            }
            let delta = self.input.apply(change, requery).await?;
            if let Some(delta) = &delta {
                self.update(delta, &mut touched)?;
            }
            if touched.len() == 0 {
                return Ok(if delta.is_some() { Some(self.emit(touched)?) } else { None });
            }
            self.reaggregate(&touched, requery).await?;
            Ok(Some(self.emit(touched)?))
        })
    }

    fn new_group(&self) -> GroupState {
        GroupState { rows: 0, aggs: self.specs.iter().map(|s| s.initial()).collect(), seen: 0 }
    }

    /// Whether a group has an output row.
    fn has_row(&self, group: &GroupState) -> bool {
        group.rows > 0 || self.global
    }

    fn update(&mut self, delta: &Delta, touched: &mut Touched) -> Result<()> {
        let keys = if self.global {
            None
        } else {
            let columns = evaluate(&self.group_exprs, &delta.batch)?;
            let columns = columns
                .into_iter()
                .zip(&self.group_types)
                .map(|(c, t)| if c.data_type() == t { Ok(c) } else { cast(&c, t) })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Some(self.groups_converter.convert_columns(&columns)?)
        };
        let mut prepared = Vec::with_capacity(self.specs.len());
        for spec in &self.specs {
            let column = spec.arg.evaluate(&delta.batch)?.into_array(delta.len())?;
            prepared.push(spec.prepare(column)?);
        }
        let fresh = self.new_group();
        let global = self.global;
        let key = |i: usize| -> &[u8] {
            match &keys {
                Some(keys) => keys.row(i).data(),
                None => &[],
            }
        };
        // First every row's group, in a loop of lookups alone (see `groups`), after the index
        // slots of its batch of rows were prefetched by their hashes; a group seen for the first
        // time is created, and recorded as having had no row.
        let hashes: Vec<u64> = (0..delta.len()).map(|i| self.groups.hash(key(i))).collect();
        let mut ids: Vec<u32> = Vec::with_capacity(delta.len());
        for batch in prefetch_batches(delta.len()) {
            for &hash in &hashes[batch.clone()] {
                self.groups.prefetch_key(hash);
            }
            for i in batch {
                let id = match self.groups.id_hashed(hashes[i], key(i)) {
                    Some(id) => id,
                    None => {
                        let mut group = fresh.clone();
                        group.seen = self.epoch;
                        let id = self.groups.insert(key(i), group)?;
                        touched.record(&self.specs, key(i), id, None)?;
                        id
                    }
                };
                ids.push(id);
            }
        }
        // Then the updates, each batch of rows after three passes of prefetches over its groups:
        // their states, then their aggregate states, then their min/max buffers (each pass reads
        // what the one before brought in).
        for batch in prefetch_batches(ids.len()) {
            for stage in 0..3 {
                for &id in &ids[batch.clone()] {
                    self.groups.prefetch(id, stage);
                }
            }
            for i in batch {
                let (id, weight) = (ids[i], &delta.weights[i]);
                let group = self.groups.state_mut(id)?;
                // A group's `seen` tells whether its outputs before this change were recorded.
                if group.seen != self.epoch {
                    group.seen = self.epoch;
                    let before = (group.rows > 0 || global).then_some(&*group);
                    touched.record(&self.specs, key(i), id, before)?;
                }
                group.rows += weight;
                for ((spec, state), column) in self.specs.iter().zip(group.aggs.iter_mut()).zip(&prepared) {
                    spec.update(state, column, i, *weight)?;
                }
            }
        }
        Ok(())
    }

    /// Re-aggregates the min/max of groups whose buffers cannot tell them, from the input.
    async fn reaggregate(&mut self, touched: &Touched, requery: &Requery<'_>) -> Result<()> {
        let mut dirty: Vec<RowBytes> = Vec::new();
        for (key, id) in touched.groups() {
            let group = self.groups.state(id)?;
            if group.rows > 0 && group.aggs.iter().any(|a| matches!(a, AggState::Extreme(e) if e.dirty)) {
                dirty.push(key.into());
            }
        }
        if dirty.is_empty() {
            return Ok(());
        }
        let plan = self.requery_plan(&dirty)?;
        let batches = requery.run(plan).await?;
        let extremes: Vec<usize> =
            (0..self.specs.len()).filter(|&i| matches!(self.specs[i].kind, AggKind::Min | AggKind::Max)).collect();
        for key in &dirty {
            if let Some(group) = self.groups.get_mut(key) {
                for &a in &extremes {
                    group.aggs[a] = AggState::Extreme(Extreme::complete());
                }
            }
        }
        let groups = self.group_exprs.len();
        for batch in batches {
            let keys = if self.global {
                None
            } else {
                let columns: Vec<ArrayRef> = (0..groups)
                    .map(|c| cast(batch.column(c), &self.group_types[c]))
                    .collect::<std::result::Result<_, _>>()?;
                Some(self.groups_converter.convert_columns(&columns)?)
            };
            for (n, &a) in extremes.iter().enumerate() {
                let spec = &self.specs[a];
                let Prepared::Rows(rows, column) = spec.prepare(batch.column(groups + n).clone())? else { continue };
                for i in 0..batch.num_rows() {
                    if column.is_null(i) {
                        continue;
                    }
                    let key: &[u8] = keys.as_ref().map(|k| k.row(i).data()).unwrap_or(&[]);
                    if let Some(AggState::Extreme(extreme)) = self.groups.get_mut(key).map(|g| &mut g.aggs[a]) {
                        extreme.insert(spec.kind == AggKind::Max, rows.row(i).as_ref());
                    }
                }
            }
        }
        Ok(())
    }
    /// `SELECT groups, min/max arguments FROM input WHERE group in (dirty groups)`.
    fn requery_plan(&self, dirty: &[RowBytes]) -> Result<LogicalPlan> {
        let parser = self.groups_converter.parser();
        let mut builder = LogicalPlanBuilder::from(self.input_plan.as_ref().clone());
        if !self.global {
            let columns = self.groups_converter.convert_rows(dirty.iter().map(|k| parser.parse(k)))?;
            let mut predicate: Option<Expr> = None;
            for row in 0..dirty.len() {
                let mut conjunction: Option<Expr> = None;
                for (expr, column) in self.group_logical.iter().zip(&columns) {
                    let value = ScalarValue::try_from_array(column, row)?;
                    let term = if value.is_null() { expr.clone().is_null() } else { expr.clone().eq(lit(value)) };
                    conjunction = Some(match conjunction {
                        Some(c) => c.and(term),
                        None => term,
                    });
                }
                if let Some(c) = conjunction {
                    predicate = Some(match predicate {
                        Some(p) => p.or(c),
                        None => c,
                    });
                }
            }
            if let Some(predicate) = predicate {
                builder = builder.filter(predicate)?;
            }
        }
        let mut exprs: Vec<Expr> =
            self.group_logical.iter().enumerate().map(|(i, e)| e.clone().alias(format!("__g{i}"))).collect();
        for (i, spec) in self.specs.iter().enumerate() {
            if matches!(spec.kind, AggKind::Min | AggKind::Max) {
                exprs.push(spec.arg_expr.clone().alias(format!("__a{i}")));
            }
        }
        Ok(builder.project(exprs)?.build()?)
    }

    /// The change of the output: for each touched group whose outputs changed, its row before
    /// (weight -1) and after (+1). Groups left without rows are forgotten.
    fn emit(&mut self, touched: Touched) -> Result<Delta> {
        let mut after: Vec<OutColumn> = self.specs.iter().map(AggSpec::out_column).collect();
        let mut present_after = Vec::with_capacity(touched.len());
        for (key, id) in touched.groups() {
            let group = Some(self.groups.state(id)?).filter(|g| self.has_row(g));
            present_after.push(group.is_some());
            outputs(&self.specs, group, &mut after)?;
            if group.is_none() && !self.global {
                self.groups.remove(key);
            }
        }
        let mut deleted: Vec<usize> = Vec::new();
        let mut inserted: Vec<usize> = Vec::new();
        for (i, (&before, &now)) in touched.present.iter().zip(&present_after).enumerate() {
            if before && now && touched.before.iter().zip(&after).all(|(b, a)| b.same(i, a, i)) {
                continue;
            }
            if before {
                deleted.push(i);
            }
            if now {
                inserted.push(i);
            }
        }
        let rows = deleted.len() + inserted.len();
        let mut columns: Vec<ArrayRef> = Vec::new();
        if !self.global {
            let parser = self.groups_converter.parser();
            let keys = deleted.iter().chain(&inserted).map(|&i| parser.parse(touched.key(i)));
            columns = self.groups_converter.convert_rows(keys)?;
        }
        for (a, spec) in self.specs.iter().enumerate() {
            let picks: Vec<(&OutColumn, usize)> = deleted
                .iter()
                .map(|&i| (&touched.before[a], i))
                .chain(inserted.iter().map(|&i| (&after[a], i)))
                .collect();
            columns.push(spec.array(&picks)?);
        }
        let batch = batch_of(&self.schema, columns, rows)?;
        let weights = deleted.iter().map(|_| -1).chain(inserted.iter().map(|_| 1)).collect();
        let ids = deleted.iter().chain(&inserted).map(|&i| touched.ids[i]).collect();
        Ok(Delta::new(batch, weights).with_ids(ids))
    }
}

fn global_key() -> RowBytes {
    Box::new([])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(extreme: &Extreme) -> Vec<Vec<u8>> {
        extreme.values().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn a_min_buffer_keeps_the_smallest_values_in_order() {
        let mut extreme = Extreme::complete();
        for v in [5_u8, 3, 9, 3, 1] {
            extreme.insert(false, &[v, 0xaa]);
        }
        assert_eq!(values(&extreme), vec![vec![1, 0xaa], vec![3, 0xaa], vec![3, 0xaa], vec![5, 0xaa], vec![9, 0xaa]]);
        extreme.delete(false, &[3, 0xaa]);
        extreme.delete(false, &[1, 0xaa]);
        assert_eq!(extreme.first(), Some(&[3_u8, 0xaa][..]));
        assert_eq!(extreme.len(), 3);
        assert!(extreme.complete && !extreme.dirty);
    }

    #[test]
    fn a_full_max_buffer_drops_its_worst_value_and_turns_dirty_when_emptied() {
        let mut extreme = Extreme::complete();
        for v in 0..(EXTREME_BUFFER_VALUES_MAX as u8 + 4) {
            extreme.insert(true, &[v]);
        }
        assert_eq!(extreme.len(), EXTREME_BUFFER_VALUES_MAX);
        assert!(!extreme.complete);
        assert_eq!(extreme.first(), Some(&[EXTREME_BUFFER_VALUES_MAX as u8 + 3][..]));
        // A value worse than the whole buffer is not kept, and deleting it is fine.
        extreme.insert(true, &[0]);
        extreme.delete(true, &[0]);
        assert!(!extreme.dirty);
        let kept = values(&extreme);
        for value in &kept {
            extreme.delete(true, value);
        }
        assert!(extreme.is_empty() && extreme.dirty);
    }

    #[test]
    fn values_of_different_lengths_round_trip_through_push() {
        // A min buffer's values, best first.
        let mut extreme = Extreme::with_flags(true, false);
        extreme.push(&[]);
        extreme.push(b"a");
        extreme.push(b"abc");
        assert_eq!(values(&extreme), vec![vec![], b"a".to_vec(), b"abc".to_vec()]);
        assert_eq!(extreme.last(), Some(&b"abc"[..]));
        extreme.delete(false, b"a");
        assert_eq!(values(&extreme), vec![vec![], b"abc".to_vec()]);
        extreme.delete(false, b"abc");
        assert_eq!(extreme.last(), Some(&[][..]));
        assert!(!extreme.dirty);
    }

    #[test]
    fn a_delete_the_buffer_cannot_account_for_makes_it_dirty() {
        // Complete: every value of the group is in the buffer, so a value beyond it is not.
        let mut extreme = Extreme::complete();
        for v in [10_u8, 20, 30] {
            extreme.insert(false, &[v]);
        }
        extreme.delete(false, &[40]);
        assert!(extreme.dirty, "a value worse than a complete buffer's worst");
        // Within the buffer's range but not in it.
        let mut extreme = Extreme::complete();
        for v in [10_u8, 20, 30] {
            extreme.insert(false, &[v]);
        }
        extreme.delete(false, &[25]);
        assert!(extreme.dirty, "a value between two of the buffer's");
        // Partial: a value worse than the worst was one of those beyond the buffer.
        let mut extreme = Extreme::with_flags(false, false);
        for v in [10_u8, 20, 30] {
            extreme.push(&[v]);
        }
        extreme.delete(false, &[40]);
        assert!(!extreme.dirty);
        assert_eq!(extreme.last(), Some(&[30_u8][..]));
        assert_eq!(extreme.len(), 3);
    }
}
