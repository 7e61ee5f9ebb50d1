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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{lit, Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::physical_expr::PhysicalExpr;

use super::dataflow::{batch_of, evaluate, BoxFuture, Change, Delta, Node, RowBytes};
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
    /// Decimal128 values as their unscaled integers.
    Decimal,
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
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extreme {
    pub values: Vec<RowBytes>,
    pub complete: bool,
    /// The buffer cannot tell the extreme: re-aggregate the group.
    pub dirty: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub rows: i64,
    pub aggs: Vec<AggState>,
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
    pub groups: HashMap<RowBytes, GroupState>,
    /// The aggregate's input plan (for re-aggregation).
    pub input_plan: Arc<LogicalPlan>,
    pub schema: SchemaRef,
    pub text: String,
    /// Whether the global group's first row was emitted.
    pub started: bool,
}

fn better(max: bool, a: &[u8], b: &[u8]) -> bool {
    if max {
        a > b
    } else {
        a < b
    }
}

impl Extreme {
    fn insert(&mut self, max: bool, value: &[u8]) {
        let worst_ok = self.values.last().is_some_and(|w| !better(max, w, value));
        if (self.complete && self.values.len() < EXTREME_BUFFER_VALUES_MAX) || worst_ok {
            let at = self.values.partition_point(|v| !better(max, value, v));
            self.values.insert(at, value.into());
            if self.values.len() > EXTREME_BUFFER_VALUES_MAX {
                self.values.pop();
                self.complete = false;
            }
        } else if self.values.is_empty() {
            // The buffer is empty but the group may hold better values than this one.
            self.dirty = true;
        } else {
            self.complete = false;
        }
    }

    fn delete(&mut self, max: bool, value: &[u8]) {
        if let Some(at) = self.values.iter().position(|v| v.as_ref() == value) {
            self.values.remove(at);
            if self.values.is_empty() && !self.complete {
                self.dirty = true;
            }
            return;
        }
        // Not in the buffer: fine only if the buffer is partial and the value is worse than it.
        let outside = !self.complete && self.values.last().is_some_and(|w| better(max, w, value));
        if !outside {
            self.dirty = true;
        }
    }
}

impl AggSpec {
    fn initial(&self) -> AggState {
        match self.kind {
            AggKind::Count => AggState::Count(0),
            AggKind::CountDistinct => AggState::Distinct(HashMap::new()),
            AggKind::Sum | AggKind::Avg if self.sum_kind == SumKind::Float => AggState::SumFloat { sum: 0.0, count: 0 },
            AggKind::Sum | AggKind::Avg => AggState::SumInt { sum: 0, count: 0 },
            AggKind::Min | AggKind::Max => AggState::Extreme(Extreme { complete: true, ..Default::default() }),
        }
    }

    /// The argument column in the form the state accumulates (Int64, Float64, Decimal128 or rows).
    fn prepare(&self, column: ArrayRef) -> Result<Prepared> {
        Ok(match (self.kind, self.sum_kind) {
            (AggKind::Count, _) => Prepared::Plain(column),
            (AggKind::Sum | AggKind::Avg, SumKind::Int) => Prepared::Plain(cast(&column, &DataType::Int64)?),
            (AggKind::Sum | AggKind::Avg, SumKind::Float) => Prepared::Plain(cast(&column, &DataType::Float64)?),
            (AggKind::Sum | AggKind::Avg, SumKind::Decimal) => Prepared::Plain(column),
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
                    SumKind::Decimal => column.as_primitive::<arrow::datatypes::Decimal128Type>().value(i),
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
                let value = rows.row(i);
                let n = values.entry(value.as_ref().into()).or_insert(0);
                *n += weight;
                if *n == 0 {
                    values.remove(value.as_ref());
                }
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

    fn output(&self, state: &AggState) -> Result<ScalarValue> {
        let null = || ScalarValue::try_from(&self.output_type);
        Ok(match state {
            AggState::Count(n) => ScalarValue::Int64(Some(*n)),
            AggState::Distinct(values) => ScalarValue::Int64(Some(values.len() as i64)),
            AggState::SumInt { count: 0, .. } | AggState::SumFloat { count: 0, .. } => null()?,
            AggState::SumInt { sum, count } => match (self.kind, &self.output_type) {
                (AggKind::Avg, _) => ScalarValue::Float64(Some(*sum as f64 / *count as f64)),
                (_, DataType::Decimal128(p, s)) => ScalarValue::Decimal128(Some(*sum), *p, *s),
                _ => ScalarValue::Int64(Some(i64::try_from(*sum).map_err(|_| Error::Data {
                    sqlstate: "22003",
                    message: "bigint out of range in a materialized view's sum".into(),
                })?)),
            },
            AggState::SumFloat { sum, count } => match self.kind {
                AggKind::Avg => ScalarValue::Float64(Some(sum / *count as f64)),
                _ => ScalarValue::Float64(Some(*sum)),
            },
            // The value stays in row format here; `decode_extremes` turns a column of them into
            // values with one conversion (one per group was most of an initial build's time).
            AggState::Extreme(extreme) => ScalarValue::Binary(extreme.values.first().map(|v| v.to_vec())),
        })
    }

    /// The column of a min or max from the outputs' row-format values (`Binary`, NULL: no value).
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

/// A group's output values before a change (None: the group had no row).
type Touched = Vec<(RowBytes, Option<Vec<ScalarValue>>)>;

impl AggregateNode {
    pub fn apply<'a>(
        &'a mut self,
        change: &'a Change<'a>,
        requery: &'a Requery<'a>,
    ) -> BoxFuture<'a, Result<Option<Delta>>> {
        Box::pin(async move {
            let mut touched: Touched = Vec::new();
            if change.table == START_TABLE && self.global && !self.started {
                self.started = true;
                self.groups.insert(global_key(), self.new_group());
                touched.push((global_key(), None));
            }
            let delta = self.input.apply(change, requery).await?;
            if let Some(delta) = &delta {
                self.update(delta, &mut touched)?;
            }
            if touched.is_empty() {
                return Ok(if delta.is_some() { Some(self.emit(Vec::new())?) } else { None });
            }
            self.reaggregate(&touched, requery).await?;
            Ok(Some(self.emit(touched)?))
        })
    }

    fn new_group(&self) -> GroupState {
        GroupState { rows: 0, aggs: self.specs.iter().map(|s| s.initial()).collect() }
    }

    fn outputs(&self, group: &GroupState) -> Result<Option<Vec<ScalarValue>>> {
        if group.rows <= 0 && !self.global {
            return Ok(None);
        }
        Ok(Some(self.specs.iter().zip(&group.aggs).map(|(s, a)| s.output(a)).collect::<Result<_>>()?))
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
        // Keys are looked up as borrowed bytes and copied only for a group seen for the first
        // time in this change.
        let mut seen: HashSet<RowBytes> = touched.iter().map(|(k, _)| k.clone()).collect();
        for (i, weight) in delta.weights.iter().enumerate() {
            let key: &[u8] = match &keys {
                Some(keys) => keys.row(i).data(),
                None => &[],
            };
            if !seen.contains(key) {
                let before = match self.groups.get(key) {
                    Some(group) => self.outputs(group)?,
                    None => None,
                };
                seen.insert(key.into());
                touched.push((key.into(), before));
            }
            if !self.groups.contains_key(key) {
                let fresh = self.new_group();
                self.groups.insert(key.into(), fresh);
            }
            let Some(group) = self.groups.get_mut(key) else { continue };
            group.rows += weight;
            for ((spec, state), column) in self.specs.iter().zip(group.aggs.iter_mut()).zip(&prepared) {
                spec.update(state, column, i, *weight)?;
            }
        }
        Ok(())
    }

    /// Re-aggregates the min/max of groups whose buffers cannot tell them, from the input.
    async fn reaggregate(&mut self, touched: &Touched, requery: &Requery<'_>) -> Result<()> {
        let mut dirty: Vec<RowBytes> = Vec::new();
        for (key, _) in touched {
            let Some(group) = self.groups.get(key) else { continue };
            if group.rows > 0 && group.aggs.iter().any(|a| matches!(a, AggState::Extreme(e) if e.dirty)) {
                dirty.push(key.clone());
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
                    group.aggs[a] = AggState::Extreme(Extreme { complete: true, ..Default::default() });
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
                    let key: RowBytes = keys.as_ref().map(|k| k.row(i).as_ref().into()).unwrap_or_else(global_key);
                    if let Some(AggState::Extreme(extreme)) = self.groups.get_mut(&key).map(|g| &mut g.aggs[a]) {
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

    fn emit(&mut self, touched: Touched) -> Result<Delta> {
        let mut keys: Vec<RowBytes> = Vec::new();
        let mut rows: Vec<Vec<ScalarValue>> = Vec::new();
        let mut weights = Vec::new();
        for (key, before) in touched {
            let after = match self.groups.get(&key) {
                Some(group) => self.outputs(group)?,
                None => None,
            };
            if self.groups.get(&key).is_some_and(|g| g.rows == 0 && !self.global) {
                self.groups.remove(&key);
            }
            if before == after {
                continue;
            }
            for (values, weight) in [(before, -1), (after, 1)] {
                if let Some(values) = values {
                    keys.push(key.clone());
                    rows.push(values);
                    weights.push(weight);
                }
            }
        }
        let mut columns: Vec<ArrayRef> = Vec::new();
        if !self.global {
            let parser = self.groups_converter.parser();
            columns = self.groups_converter.convert_rows(keys.iter().map(|k| parser.parse(k)))?;
        }
        for (a, spec) in self.specs.iter().enumerate() {
            columns.push(if rows.is_empty() {
                arrow::array::new_empty_array(&spec.output_type)
            } else if matches!(spec.kind, AggKind::Min | AggKind::Max) {
                let values: Vec<Option<&[u8]>> = rows
                    .iter()
                    .map(|r| match &r[a] {
                        ScalarValue::Binary(value) => value.as_deref(),
                        _ => None,
                    })
                    .collect();
                spec.decode_extremes(&values)?
            } else {
                ScalarValue::iter_to_array(rows.iter().map(|r| r[a].clone()))?
            });
        }
        let batch = batch_of(&self.schema, columns, weights.len())?;
        Ok(Delta::new(batch, weights))
    }
}

fn global_key() -> RowBytes {
    Box::new([])
}
