//! Data quality: the expectations of streaming tables, checked on every write into them (a flow's
//! output or a direct INSERT/COPY).
//!
//! `FAIL UPDATE` expectations are checked first. `CONSTRAINT c EXPECT (expr)` counts a violation for every row where `expr` is not true (false
//! or NULL) and keeps the row; `ON VIOLATION DROP ROW` drops it; `FAIL UPDATE` fails the write
//! (nothing is committed to the table); `QUARANTINE INTO q` moves it to table `q` with two more
//! columns, `_constraint` and `_source_version`. A row violating several expectations is counted
//! for each; a quarantined row lands once, under the first constraint it violated. A write that
//! a `FAIL UPDATE` expectation rejects counts the violations its checks found too (the rows were
//! there and violated it, though nothing was written): each rejected write counts, so a flow whose
//! retried run fails again counts its rows again, as each of its failure events shows them.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::{filter_record_batch, not};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::DFSchema;
use datafusion::logical_expr::ColumnarValue;

use crate::catalog::{Expectation, TableEntry, ViolationAction};
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;

/// The columns a quarantine table has besides the streaming table's.
pub const CONSTRAINT_COLUMN: &str = "_constraint";
pub const SOURCE_VERSION_COLUMN: &str = "_source_version";

/// The outcome of checking rows.
#[derive(Debug, Default)]
pub struct Checked {
    pub kept: Vec<RecordBatch>,
    /// Violating rows per quarantine table (with the two extra columns).
    pub quarantined: Vec<(String, RecordBatch)>,
    pub violations: BTreeMap<String, u64>,
}

/// The schema of a quarantine table for rows of `schema`.
pub fn quarantine_schema(schema: &Schema) -> Schema {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    fields.push(Field::new(CONSTRAINT_COLUMN, DataType::Utf8, true));
    fields.push(Field::new(SOURCE_VERSION_COLUMN, DataType::Int64, true));
    Schema::new(fields)
}

/// The `_source_version` of the rows a write quarantines when no flow names the source version
/// its rows came from (an INSERT, a COPY, a source's batch): the version of the target that the
/// write is based on, plus one. That is the version the write commits as unless another writer
/// commits to the table first: an append then lands on a later version (a commit rebases over
/// the appends that won, see `sluice_storage::commit::Transaction::commit`). The exact version is
/// not known here, since the quarantined rows are committed before the write's own commit. In a
/// transaction block, whose writes reach the log as one commit on the version the block began
/// from, it is that version plus one (later when the block's commit is rebased).
pub(crate) fn write_version(target: &super::dml::Target) -> u64 {
    target.table.stage_base_version().unwrap_or_else(|| target.snapshot.version()) + 1
}

/// Checks rows written into `entry` against its expectations; `source_version` is what the rows
/// it quarantines carry in `_source_version`.
pub(crate) async fn check_expectations(
    cx: &QueryContext,
    entry: &TableEntry,
    batches: Vec<RecordBatch>,
    source_version: u64,
) -> Result<Checked> {
    if entry.expectations.is_empty() {
        return Ok(Checked { kept: batches, ..Default::default() });
    }
    // Rows checked, for each expectation's pass rate (`sluice.expectations`, `/metrics`).
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    for expectation in &entry.expectations {
        cx.db.events.count_checked(&entry.qualified_name(), &expectation.name, rows);
    }
    let mut checked = Checked::default();
    let mut rejected = None;
    for batch in batches {
        match check_batch(cx, entry, batch, source_version, &mut checked).await {
            Ok(kept) if kept.num_rows() > 0 => checked.kept.push(kept),
            Ok(_) => {}
            Err(e @ Error::ExpectationFailed { .. }) => {
                rejected = Some(e);
                break;
            }
            Err(e) => return Err(e),
        }
    }
    for (constraint, rows) in &checked.violations {
        cx.db.events.count_violations(&entry.qualified_name(), constraint, *rows);
    }
    match rejected {
        Some(e) => Err(e),
        None => Ok(checked),
    }
}

async fn check_batch(
    cx: &QueryContext,
    entry: &TableEntry,
    batch: RecordBatch,
    source_version: u64,
    checked: &mut Checked,
) -> Result<RecordBatch> {
    let mut batch = batch;
    // FAIL UPDATE expectations first: a failing row must fail the write even if another
    // expectation would drop or quarantine it. Each of them is counted before the write fails.
    let (fail, others): (Vec<&Expectation>, Vec<&Expectation>) =
        entry.expectations.iter().partition(|e| e.action == ViolationAction::Fail);
    let mut rejected = None;
    for expectation in fail {
        let count = violations_of(cx, expectation, &batch)?.true_count() as u64;
        *checked.violations.entry(expectation.name.clone()).or_default() += count;
        if count > 0 && rejected.is_none() {
            rejected = Some(Error::ExpectationFailed {
                table: entry.qualified_name(),
                constraint: expectation.name.clone(),
                rows: count,
            });
        }
    }
    if let Some(e) = rejected {
        return Err(e);
    }
    for expectation in others {
        let violating = violations_of(cx, expectation, &batch)?;
        let count = violating.true_count() as u64;
        *checked.violations.entry(expectation.name.clone()).or_default() += count;
        if count == 0 {
            continue;
        }
        match &expectation.action {
            ViolationAction::Keep | ViolationAction::Fail => {}
            ViolationAction::DropRow => batch = filter_record_batch(&batch, &not(&violating)?)?,
            ViolationAction::Quarantine(table) => {
                let rows = filter_record_batch(&batch, &violating)?;
                checked.quarantined.push((table.clone(), with_origin(&rows, &expectation.name, source_version)?));
                batch = filter_record_batch(&batch, &not(&violating)?)?;
            }
        }
    }
    Ok(batch)
}

/// The violations of a write that a `FAIL UPDATE` expectation rejected (those of the expectation
/// the error names), for its writer's failure event; none for any other error.
pub(crate) fn rejected_violations(error: &Error) -> BTreeMap<String, u64> {
    match error {
        Error::ExpectationFailed { constraint, rows, .. } => BTreeMap::from([(constraint.clone(), *rows)]),
        _ => BTreeMap::new(),
    }
}

/// A mask of the rows for which the expectation is not true.
fn violations_of(cx: &QueryContext, expectation: &Expectation, batch: &RecordBatch) -> Result<BooleanArray> {
    let schema = DFSchema::try_from(batch.schema().as_ref().clone())?;
    let logical = cx.ctx.parse_sql_expr(&expectation.expr, &schema)?;
    let physical = cx.ctx.create_physical_expr(logical, &schema)?;
    let result = match physical.evaluate(batch)? {
        ColumnarValue::Array(array) => array,
        ColumnarValue::Scalar(scalar) => scalar.to_array_of_size(batch.num_rows())?,
    };
    let result = arrow::compute::cast(&result, &DataType::Boolean)?;
    Ok(result.as_boolean().iter().map(|v| Some(v != Some(true))).collect())
}

/// Writes quarantined rows (each table once per flow run, under the run's txn when a flow
/// writes, so a replayed run does not quarantine twice).
pub(crate) async fn write_quarantine(
    cx: &QueryContext,
    rows: &[(String, RecordBatch)],
    txns: &[sluice_storage::actions::Txn],
) -> Result<()> {
    let mut by_table: BTreeMap<&str, Vec<RecordBatch>> = BTreeMap::new();
    for (table, batch) in rows {
        by_table.entry(table.as_str()).or_default().push(batch.clone());
    }
    for (table, batches) in by_table {
        let name = crate::names::parse_table_name(table)?;
        let object = crate::names::object_name(&name.schema, &name.name);
        let target = cx.target(&object).await?;
        let txns: Vec<sluice_storage::actions::Txn> = txns
            .iter()
            .map(|t| sluice_storage::actions::Txn {
                app_id: format!("{}:quarantine", t.app_id),
                version: t.version,
                last_updated: t.last_updated,
            })
            .collect();
        let replayed =
            txns.iter().all(|txn| target.snapshot.txn_version(&txn.app_id).is_some_and(|v| v >= txn.version));
        if !txns.is_empty() && replayed {
            continue;
        }
        let context = crate::change::WriteContext { txns, source_version: None, commit_empty: false };
        // Boxed: a quarantine table may itself feed flows, which write again.
        Box::pin(cx.write_rows_with(
            &target,
            batches,
            crate::change::ColumnMatch::ByName,
            sluice_storage::write::SaveMode::Append,
            context,
        ))
        .await?;
    }
    Ok(())
}

/// Rows with the constraint they violated and the source version they came from.
fn with_origin(rows: &RecordBatch, constraint: &str, source_version: u64) -> Result<RecordBatch> {
    let n = rows.num_rows();
    let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![constraint; n])));
    columns.push(Arc::new(Int64Array::from(vec![source_version as i64; n])));
    let schema = quarantine_schema(rows.schema().as_ref());
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| if c.data_type() == f.data_type() { Ok(c) } else { arrow::compute::cast(&c, f.data_type()) })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::new(schema), columns)?)
}
