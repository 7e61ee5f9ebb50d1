//! AUTO CDC flows: a stream of inserts, updates and deletes (one row per event, with a key, a
//! sequence value and, optionally, conditions that make it a delete or a truncate) applied to a
//! target table, SCD type 1 (the latest row per key) or type 2 (every version, with `__START_AT`
//! and `__END_AT`).
//!
//! Events are applied in SEQUENCE BY order, not arrival order: within a run they are sorted by
//! sequence (ties keep their arrival order, the later arrival winning), and across runs a key's
//! latest sequence and whether it was deleted are kept in the target's state table
//! (`__cdc_state_<target>`, in the target's schema: the key columns, `__sequence`, `__deleted`,
//! and one row with NULL keys holding the last TRUNCATE's sequence). So an older event arriving
//! late never overwrites a newer one (SCD 1), a delete leaves a tombstone that an older insert
//! arriving later cannot bring back, and for SCD 2 a late event takes its place in the key's
//! history: the state row also keeps the key's past events, merged with the new ones in
//! sequence order and the versions rebuilt (see [`super::cdc_history`]).
//!
//! A run commits the target's deletions and insertions in one commit carrying the flow's txn,
//! then the state table's, carrying the same txn. A crash between the two leaves the state
//! behind the target; the next run first brings the state up to the target's txn by applying
//! the missing source versions to the state alone (the state depends on the events only, never
//! on the target), so every event counts exactly once. The one exception is an SCD 2 key whose
//! state row has no history (a key new in that run): its history starts from the target's
//! versions read back, which already hold the run's events; merged with them again, they change
//! nothing.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use arrow::compute::{concat_batches, interleave};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use sluice_storage::actions::Txn;

use crate::catalog::{CdcColumns, CdcSpec, FlowEntry};
use crate::error::{Error, Result};
use crate::names::quoted;
use crate::sql::context::QueryContext;
use crate::sql::dml::cast_column;
use crate::sql::keyed::Located;
use crate::syntax::cdc::{DELETE_COLUMN, SEQUENCE_COLUMN, TRUNCATE_COLUMN};

use super::cdc_history::{history_column, read_history, scd2, History, HistoryStep, STATE_HISTORY};

/// SCD type 2's version bounds (sequence values; a NULL end is the current version), in lower
/// case (Databricks spells them `__START_AT`, `__END_AT`; Spark resolves names without case, and
/// PostgreSQL folds unquoted names to lower case, so `__START_AT` finds them either way).
pub const START_AT: &str = "__start_at";
pub const END_AT: &str = "__end_at";
/// The state table's columns beside the keys.
pub const STATE_SEQUENCE: &str = "__sequence";
pub const STATE_DELETED: &str = "__deleted";
/// When the run that wrote a state row committed (ms since the epoch): a tombstone's age.
pub const STATE_UPDATED: &str = "__updated_ms";
/// The target's table property (Databricks' name) for how long a delete's tombstone is kept, in
/// seconds; without it tombstones are kept for good. Once a tombstone is gone, an event older
/// than the delete for that key applies again.
pub const TOMBSTONE_RETENTION_KEY: &str = "pipelines.cdc.tombstoneGCThresholdInSeconds";
/// The operation a run's commits are recorded as in the tables' history.
const OPERATION: &str = "AUTO CDC";

/// The name of the table that keeps a CDC target's per-key state (in the target's schema).
pub fn state_table_name(target: &str) -> String {
    format!("__cdc_state_{target}")
}

fn is_internal(name: &str) -> bool {
    name == SEQUENCE_COLUMN || name == DELETE_COLUMN || name == TRUNCATE_COLUMN
}

/// The source columns that reach the target (by `COLUMNS`), checked to hold the keys.
pub fn data_columns(schema: &Schema, spec: &CdcSpec) -> Result<Vec<String>> {
    let all: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).filter(|n| !is_internal(n)).collect();
    for listed in match &spec.columns {
        CdcColumns::All => &[][..],
        CdcColumns::Except(list) | CdcColumns::Only(list) => list.as_slice(),
    } {
        if !all.contains(listed) {
            return Err(Error::Plan(format!("COLUMNS names {listed}, which the CDC source does not have")));
        }
    }
    let chosen: Vec<String> = match &spec.columns {
        CdcColumns::All => all,
        CdcColumns::Except(list) => all.into_iter().filter(|c| !list.contains(c)).collect(),
        CdcColumns::Only(list) => list.clone(),
    };
    for key in &spec.keys {
        if !all_contains(schema, key) {
            return Err(Error::Plan(format!("the CDC source has no KEYS column {key}")));
        }
        if !chosen.contains(key) {
            return Err(Error::Plan(format!("KEYS column {key} must be among the COLUMNS the target gets")));
        }
    }
    if spec.scd_type == 2 && chosen.iter().any(|c| c == START_AT || c == END_AT) {
        return Err(Error::Plan(format!("an SCD type 2 source may not have columns named {START_AT} or {END_AT}")));
    }
    Ok(chosen)
}

fn all_contains(schema: &Schema, name: &str) -> bool {
    schema.fields().iter().any(|f| f.name() == name)
}

/// Checks a CDC spec against its source's flow output schema, at CREATE.
pub fn check_spec(schema: &Schema, spec: &CdcSpec) -> Result<()> {
    data_columns(schema, spec)?;
    if spec.keys.is_empty() {
        return Err(Error::Plan("AUTO CDC needs at least one KEYS column".into()));
    }
    if spec.scd_type == 2 && spec.truncate_when.is_some() {
        return Err(Error::NotSupported(
            "APPLY AS TRUNCATE WHEN with STORED AS SCD TYPE 2 (only SCD type 1 can truncate)".into(),
        ));
    }
    let sequence =
        schema.field_with_name(SEQUENCE_COLUMN).map_err(|_| Error::Internal("the CDC input has no sequence".into()))?;
    if !RowConverter::supports_fields(&[SortField::new(sequence.data_type().clone())]) {
        return Err(Error::data(
            "42804",
            format!("SEQUENCE BY {} has type {}, which cannot be ordered", spec.sequence_by, sequence.data_type()),
        ));
    }
    if let Some(CdcColumns::Only(list) | CdcColumns::Except(list)) = &spec.track_history {
        if spec.scd_type != 2 {
            return Err(Error::Plan("TRACK HISTORY ON needs STORED AS SCD TYPE 2".into()));
        }
        let data = data_columns(schema, spec)?;
        if let Some(missing) = list.iter().find(|c| !data.contains(c)) {
            return Err(Error::Plan(format!("TRACK HISTORY ON names {missing}, which the target does not get")));
        }
    }
    Ok(())
}

/// What one run did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Rows written to the target (new rows and new versions).
    pub rows_out: u64,
    /// Events that could not be applied (NULL key or NULL sequence), with the first reason.
    pub rejected: u64,
    pub rejection: Option<String>,
}

/// The events of one run, prepared: the data columns in the target's types (by name), the
/// sequence, the flags, and each event's key and sequence as comparable bytes.
pub(super) struct Events {
    /// The target's data columns (all but `__START_AT`/`__END_AT`), filled from the events.
    pub(super) data: Vec<ArrayRef>,
    pub(super) sequence: ArrayRef,
    delete: BooleanArray,
    truncate: BooleanArray,
    pub(super) keys: Vec<Option<Vec<u8>>>,
    pub(super) order: Vec<Vec<u8>>,
    len: usize,
}

/// The target's layout as a run sees it.
pub(super) struct Layout {
    /// The target's data columns (name, type).
    pub(super) data: Vec<Field>,
    /// Positions in `data` of the key columns, and of the columns whose change opens a version.
    keys: Vec<usize>,
    pub(super) tracked: Vec<usize>,
    pub(super) sequence_type: DataType,
}

/// Checks that a target can take a CDC input's events (at CREATE).
pub fn layout_check(target: &Schema, input: &Schema, spec: &CdcSpec) -> Result<()> {
    layout(target, input, spec).map(|_| ())
}

fn layout(target: &Schema, input: &Schema, spec: &CdcSpec) -> Result<Layout> {
    let chosen = data_columns(input, spec)?;
    let data: Vec<Field> = target
        .fields()
        .iter()
        .filter(|f| spec.scd_type != 2 || (f.name() != START_AT && f.name() != END_AT))
        .map(|f| f.as_ref().clone())
        .collect();
    if let Some(extra) = chosen.iter().find(|c| !data.iter().any(|f| f.name() == *c)) {
        return Err(Error::Plan(format!(
            "the CDC source's column {extra} is not a column of the target (add it with ALTER TABLE ... ADD COLUMN, or leave it out with COLUMNS * EXCEPT)"
        )));
    }
    if spec.scd_type == 2 && !(all_contains(target, START_AT) && all_contains(target, END_AT)) {
        return Err(Error::Plan(format!("an SCD type 2 target needs the columns {START_AT} and {END_AT}")));
    }
    let position = |name: &str| data.iter().position(|f| f.name() == name);
    let keys = spec
        .keys
        .iter()
        .map(|k| position(k).ok_or_else(|| Error::Plan(format!("the CDC target has no KEYS column {k}"))))
        .collect::<Result<Vec<_>>>()?;
    let tracked: Vec<usize> = (0..data.len())
        .filter(|i| !keys.contains(i))
        .filter(|i| {
            let name = data.get(*i).map(|f| f.name().as_str()).unwrap_or_default();
            match &spec.track_history {
                None | Some(CdcColumns::All) => true,
                Some(CdcColumns::Only(list)) => list.iter().any(|c| c == name),
                Some(CdcColumns::Except(list)) => !list.iter().any(|c| c == name),
            }
        })
        .collect();
    let sequence_type = input
        .field_with_name(SEQUENCE_COLUMN)
        .map_err(|_| Error::Internal("the CDC input has no sequence".into()))?
        .data_type()
        .clone();
    Ok(Layout { data, keys, tracked, sequence_type })
}

pub(super) fn column(batch: &RecordBatch, name: &str) -> Result<ArrayRef> {
    batch.column_by_name(name).cloned().ok_or_else(|| Error::Internal(format!("no column {name}")))
}

fn key_converter(layout: &Layout) -> Result<RowConverter> {
    let fields =
        layout.keys.iter().filter_map(|k| layout.data.get(*k)).map(|f| SortField::new(f.data_type().clone())).collect();
    Ok(RowConverter::new(fields)?)
}

/// Each row's key as bytes (None when a key column is NULL), from `columns` named like the keys.
fn encode_keys(layout: &Layout, converter: &RowConverter, batch: &RecordBatch) -> Result<Vec<Option<Vec<u8>>>> {
    let mut arrays = Vec::new();
    for k in &layout.keys {
        let field = layout.data.get(*k).ok_or_else(|| Error::Internal("key out of range".into()))?;
        arrays.push(cast_column(&column(batch, field.name())?, field.data_type(), field.name())?);
    }
    let rows = converter.convert_columns(&arrays)?;
    Ok((0..batch.num_rows())
        .map(|i| if arrays.iter().any(|a| a.is_null(i)) { None } else { Some(rows.row(i).as_ref().to_vec()) })
        .collect())
}

pub(super) fn encode_sequence(converter: &RowConverter, array: &ArrayRef) -> Result<Vec<Vec<u8>>> {
    let rows = converter.convert_columns(std::slice::from_ref(array))?;
    Ok((0..array.len()).map(|i| rows.row(i).as_ref().to_vec()).collect())
}

fn prepare(
    layout: &Layout,
    keys: &RowConverter,
    sequences: &RowConverter,
    batch: &RecordBatch,
    applied: &mut Applied,
) -> Result<Events> {
    let sequence = cast_column(&column(batch, SEQUENCE_COLUMN)?, &layout.sequence_type, SEQUENCE_COLUMN)?;
    let flag = |name: &str| -> Result<BooleanArray> {
        Ok(column(batch, name)?
            .as_boolean_opt()
            .cloned()
            .unwrap_or_else(|| BooleanArray::from(vec![false; batch.num_rows()])))
    };
    let delete = flag(DELETE_COLUMN)?;
    let truncate = flag(TRUNCATE_COLUMN)?;
    let mut data = Vec::new();
    for field in &layout.data {
        data.push(match batch.column_by_name(field.name()) {
            Some(array) => cast_column(array, field.data_type(), field.name())?,
            None => new_null_array(field.data_type(), batch.num_rows()),
        });
    }
    let mut event_keys = encode_keys(layout, keys, batch)?;
    let order = encode_sequence(sequences, &sequence)?;
    for (i, key) in event_keys.iter_mut().enumerate() {
        let truncating = truncate.is_valid(i) && truncate.value(i);
        let reason = if sequence.is_null(i) {
            Some("a NULL sequence value")
        } else if key.is_none() && !truncating {
            Some("a NULL key")
        } else {
            None
        };
        if let Some(reason) = reason {
            applied.rejected += 1;
            applied.rejection.get_or_insert_with(|| format!("an event with {reason} was not applied"));
            *key = None;
        }
    }
    Ok(Events { data, sequence, delete, truncate, keys: event_keys, order, len: batch.num_rows() })
}

impl Events {
    fn is_truncate(&self, i: usize) -> bool {
        self.truncate.is_valid(i) && self.truncate.value(i) && !self.sequence.is_null(i)
    }
    pub(super) fn is_delete(&self, i: usize) -> bool {
        self.delete.is_valid(i) && self.delete.value(i)
    }
    /// The events that can be applied, in sequence order (ties in arrival order).
    fn sorted(&self) -> Vec<usize> {
        let mut order: Vec<usize> =
            (0..self.len).filter(|i| self.is_truncate(*i) || self.keys.get(*i).is_some_and(|k| k.is_some())).collect();
        order.sort_by(|a, b| self.order.get(*a).cmp(&self.order.get(*b)).then(a.cmp(b)));
        order
    }
}

/// A data value of a row being built: (array, row) in the arrays [events, existing target rows,
/// one NULL, the keys' SCD 2 histories] of its column.
pub(super) type Cell = (usize, usize);
pub(super) const FROM_EVENT: usize = 0;
pub(super) const FROM_EXISTING: usize = 1;
pub(super) const NULL_CELL: Cell = (2, 0);
pub(super) const FROM_HISTORY: usize = 3;
/// A sequence value: (array, row) in [events' sequences, existing `__START_AT`, existing
/// `__END_AT`, the state's sequences, the histories' sequences].
pub(super) type SeqCell = (usize, usize);
pub(super) const SEQ_EVENT: usize = 0;
pub(super) const SEQ_START: usize = 1;
pub(super) const SEQ_END: usize = 2;
pub(super) const SEQ_STATE: usize = 3;
pub(super) const SEQ_HISTORY: usize = 4;

/// A key's latest sequence and whether it was deleted, from the state table.
pub(super) struct KeyState {
    pub(super) sequence: Vec<u8>,
    pub(super) deleted: bool,
    pub(super) row: usize,
}

/// The state table's rows for the run's keys, and its truncate row.
pub(super) struct State {
    located: Located,
    pub(super) by_key: HashMap<Vec<u8>, KeyState>,
    /// The last TRUNCATE's sequence and its state row.
    truncated: Option<(Vec<u8>, usize)>,
    sequence: ArrayRef,
    /// SCD 2: the run's keys' past events.
    pub(super) history: History,
}

fn read_state(
    layout: &Layout,
    spec: &CdcSpec,
    keys: &RowConverter,
    sequences: &RowConverter,
    located: Located,
) -> Result<State> {
    let rows = &located.rows;
    let sequence = cast_column(&column(rows, STATE_SEQUENCE)?, &layout.sequence_type, STATE_SEQUENCE)?;
    let order = encode_sequence(sequences, &sequence)?;
    let deleted = column(rows, STATE_DELETED)?;
    let deleted = deleted.as_boolean_opt().cloned().unwrap_or_else(|| BooleanArray::from(vec![false; rows.num_rows()]));
    let state_keys = encode_keys(layout, keys, rows)?;
    let mut by_key = HashMap::new();
    let mut truncated = None;
    for (row, (key, sequence)) in state_keys.into_iter().zip(order).enumerate() {
        match key {
            Some(key) => {
                let deleted = deleted.is_valid(row) && deleted.value(row);
                by_key.insert(key, KeyState { sequence, deleted, row });
            }
            None => truncated = Some((sequence, row)),
        }
    }
    let history = if spec.scd_type == 2 {
        let rows: Vec<(Vec<u8>, usize)> = by_key.iter().map(|(k, s)| (k.clone(), s.row)).collect();
        read_history(layout, sequences, &located.rows, &rows)?
    } else {
        History::default()
    };
    Ok(State { located, by_key, truncated, sequence, history })
}

/// One row of the target being built: its data values and, for SCD 2, its bounds.
#[derive(Clone)]
pub(super) struct Version {
    pub(super) values: Vec<Cell>,
    pub(super) start: SeqCell,
    pub(super) start_order: Vec<u8>,
    pub(super) end: Option<SeqCell>,
}

/// What a run decided, per key.
pub(super) type Outcomes = HashMap<Vec<u8>, Outcome>;

/// What a run decided for one key.
pub(super) struct Outcome {
    /// The key's latest sequence (cell and bytes), None while nothing is known.
    pub(super) sequence: Option<(SeqCell, Vec<u8>)>,
    pub(super) deleted: bool,
    /// The key's rows now: SCD 1 at most one, SCD 2 its versions.
    pub(super) rows: Vec<Version>,
    /// SCD 2: the key's events applied so far, to keep in its state row.
    pub(super) history: Vec<HistoryStep>,
    /// Existing target rows the new rows replace, and the key's state row.
    pub(super) replaces: Vec<usize>,
    state_row: Option<usize>,
    /// An event of the key (its key columns give the state row's key).
    key_event: usize,
    pub(super) changed: bool,
}

/// Applies one run's events (the flow query's output) to the target and then to its state,
/// each commit carrying `txn`. With `state_only` (bringing the state up after a crash between
/// the two commits: the target already has these events) only the state is written.
pub(crate) async fn apply(
    cx: &QueryContext,
    flow: &FlowEntry,
    spec: &CdcSpec,
    events: Vec<RecordBatch>,
    txn: Txn,
    applied_before: Option<i64>,
    state_only: bool,
) -> Result<Applied> {
    let mut applied = Applied::default();
    let target_name = crate::names::parse_table_name(&flow.target)?;
    ensure_key_indexes(cx, spec, &target_name.schema, &target_name.name).await?;
    let target = cx.target(&crate::names::object_name(&target_name.schema, &target_name.name)).await?;
    let state_name = crate::names::object_name(&target_name.schema, &state_table_name(&target_name.name));
    let mut state_target = cx.target(&state_name).await?;
    if spec.scd_type == 2 && state_target.snapshot.arrow_schema().field_with_name(STATE_HISTORY).is_err() {
        // A state table made before SCD 2 kept each key's events.
        let field = Field::new(STATE_HISTORY, DataType::Binary, true);
        let key = format!("{}.{}", quoted(&target_name.schema), quoted(&state_table_name(&target_name.name)));
        crate::sql::evolve::add_columns(cx, &key, &arrow::datatypes::Fields::from(vec![field])).await?;
        state_target = cx.target(&state_name).await?;
        cx.clear_statement_state();
    }
    let concurrent = if state_only {
        state_target.snapshot.txn_version(&txn.app_id) != applied_before
    } else {
        target.snapshot.txn_version(&txn.app_id) != applied_before
    };
    if concurrent {
        return Err(Error::SerializationFailure(format!(
            "flow {} was applied concurrently to {}",
            txn.app_id, flow.target
        )));
    }
    let Some(first) = events.first() else { return Ok(applied) };
    let input_schema = first.schema();
    let batch = concat_batches(&input_schema, &events)?;
    // Schema drift: source columns the target lacks are added to it (nullable) first.
    let target = if state_only { target } else { with_new_columns(cx, flow, spec, &input_schema, target).await? };
    let layout = layout(&target.snapshot.arrow_schema(), &input_schema, spec)?;
    let keys = key_converter(&layout)?;
    let sequences = RowConverter::new(vec![SortField::new(layout.sequence_type.clone())])?;
    let events = prepare(&layout, &keys, &sequences, &batch, &mut applied)?;
    let order = events.sorted();
    let mut first_of_key: HashMap<&[u8], usize> = HashMap::new();
    for &i in &order {
        if let Some(Some(key)) = events.keys.get(i) {
            first_of_key.entry(key.as_slice()).or_insert(i);
        }
    }
    let mut key_rows: Vec<usize> = first_of_key.values().copied().collect();
    key_rows.sort_unstable();
    let key_batch = key_batch(&layout, &events, &key_rows)?;
    let truncating = order.iter().any(|i| events.is_truncate(*i));
    let first_key = spec.keys.first().ok_or_else(|| Error::Plan("AUTO CDC needs KEYS".into()))?;
    // Tombstones older than the target's retention go with this run's state commit (they still
    // count for this run's events).
    let cutoff = match target.snapshot.configuration().get(TOMBSTONE_RETENTION_KEY) {
        Some(seconds) => {
            let seconds: i64 = seconds.trim().parse().map_err(|_| {
                Error::Plan(format!("table property {TOMBSTONE_RETENTION_KEY} must be a whole number of seconds"))
            })?;
            Some(crate::util::now_ms().saturating_sub(seconds.saturating_mul(1000)))
        }
        None => None,
    };
    // The state rows of the run's keys, the TRUNCATE row and the expired tombstones (a TRUNCATE
    // needs every key's sequence: it removes the rows older than itself).
    let state_located = if truncating {
        cx.located_rows(&state_target, None, None, false).await?
    } else {
        let mut located = cx.located_rows(&state_target, Some(&key_batch), None, false).await?;
        let mut others = format!("t.{} IS NULL", quoted(first_key));
        if let Some(cutoff) = cutoff {
            others.push_str(&format!(" OR (t.{STATE_DELETED} AND t.{STATE_UPDATED} < {cutoff})"));
        }
        located.append(cx.located_rows(&state_target, None, Some(&others), false).await?)?;
        located
    };
    let expired = match cutoff {
        Some(cutoff) => expired_tombstones(&state_located.rows, cutoff)?,
        None => Vec::new(),
    };
    let state = read_state(&layout, spec, &keys, &sequences, state_located)?;
    let existing = if truncating {
        cx.located_rows(&target, None, None, false).await?
    } else {
        // SCD 1 writes an upserted row from its event alone (unless IGNORE NULL UPDATES keeps
        // older values): where the key's row is, is all it needs of the target.
        let keys_only = spec.scd_type != 2 && !spec.ignore_null_updates;
        cx.located_rows(&target, Some(&key_batch), None, keys_only).await?
    };
    let existing_keys = encode_keys(&layout, &keys, &existing.rows)?;
    let (outcomes, truncated_at, truncated_rows) = match spec.scd_type {
        2 => (scd2(&layout, spec, &sequences, &events, &order, &state, &existing, &existing_keys)?, None, vec![]),
        _ => scd1(&layout, spec, &events, &order, &state, &existing_keys)?,
    };
    let mut outcomes: Vec<(Vec<u8>, Outcome)> = outcomes.into_iter().filter(|(_, o)| o.changed).collect();
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    if !state_only {
        let mut delete: Vec<usize> = outcomes.iter().flat_map(|(_, o)| o.replaces.iter().copied()).collect();
        delete.extend(truncated_rows);
        delete.sort_unstable();
        delete.dedup();
        let inserted = target_rows(&layout, spec, &events, &existing, &state, &outcomes)?;
        applied.rows_out = inserted.num_rows() as u64;
        cx.replace_rows(&target, &existing, &delete, vec![inserted], txn.clone(), OPERATION).await?;
    }
    let mut delete: Vec<usize> = outcomes.iter().filter_map(|(_, o)| o.state_row).collect();
    delete.extend(expired);
    delete.sort_unstable();
    delete.dedup();
    if let (Some(_), Some((_, row))) = (truncated_at, &state.truncated) {
        delete.push(*row);
    }
    let rows = state_rows(&layout, spec, &events, &existing, &state, &outcomes, truncated_at)?;
    // The state's own commit is checked against its txn (a concurrent runner of the flow).
    if state_target.snapshot.txn_version(&txn.app_id).unwrap_or(-1) >= txn.version {
        return Err(Error::SerializationFailure(format!("flow {} was applied concurrently", txn.app_id)));
    }
    cx.replace_rows(&state_target, &state.located, &delete, vec![rows], txn, OPERATION).await?;
    Ok(applied)
}

/// A run finds its keys' rows in the target and in the state table by an index on the KEYS
/// (made at the first run if the tables lack one; a lookup of a batch's keys then reads the rows
/// they name rather than joining them with every row).
async fn ensure_key_indexes(cx: &QueryContext, spec: &CdcSpec, schema: &str, target: &str) -> Result<()> {
    let state = state_table_name(target);
    for (table, base) in [(target.to_string(), format!("{target}_cdc_keys")), (state.clone(), format!("{state}_keys"))]
    {
        let object = crate::names::object_name(schema, &table);
        cx.ensure_index(&object, &spec.keys, &base).await?;
    }
    cx.clear_statement_state();
    Ok(())
}

/// The target after adding the chosen source columns it lacks, as nullable columns (Delta appends
/// them, so in an SCD 2 target they come after `__start_at` and `__end_at`).
async fn with_new_columns(
    cx: &QueryContext,
    flow: &FlowEntry,
    spec: &CdcSpec,
    input: &Schema,
    target: crate::sql::dml::Target,
) -> Result<crate::sql::dml::Target> {
    let present = target.snapshot.arrow_schema();
    let missing: Vec<Field> = data_columns(input, spec)?
        .iter()
        .filter(|c| present.field_with_name(c).is_err())
        .filter_map(|c| input.field_with_name(c).ok().map(|f| f.clone().with_nullable(true)))
        .collect();
    if missing.is_empty() {
        return Ok(target);
    }
    crate::sql::evolve::add_columns(cx, &flow.target, &arrow::datatypes::Fields::from(missing)).await?;
    let name = crate::names::parse_table_name(&flow.target)?;
    let target = cx.target(&crate::names::object_name(&name.schema, &name.name)).await;
    cx.clear_statement_state();
    target
}

fn key_batch(layout: &Layout, events: &Events, rows: &[usize]) -> Result<RecordBatch> {
    let indices = arrow::array::UInt32Array::from(rows.iter().map(|r| *r as u32).collect::<Vec<_>>());
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for k in &layout.keys {
        let field = layout.data.get(*k).ok_or_else(|| Error::Internal("key out of range".into()))?;
        let array = events.data.get(*k).ok_or_else(|| Error::Internal("key out of range".into()))?;
        arrays.push(arrow::compute::take(array, &indices, None)?);
        fields.push(field.clone().with_nullable(true));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

pub(super) fn new_outcome(state: &State, key: &[u8], event: usize) -> Outcome {
    let known = state.by_key.get(key);
    Outcome {
        sequence: known.map(|k| ((SEQ_STATE, k.row), k.sequence.clone())),
        deleted: known.is_some_and(|k| k.deleted),
        rows: Vec::new(),
        history: Vec::new(),
        replaces: Vec::new(),
        state_row: known.map(|k| k.row),
        key_event: event,
        changed: false,
    }
}

/// The new values of an upsert: the event's, or with IGNORE NULL UPDATES the previous row's
/// where the event has NULL.
pub(super) fn upserted(
    spec: &CdcSpec,
    sent: Cell,
    is_null: impl Fn(usize, Cell) -> bool,
    previous: Option<&[Cell]>,
    width: usize,
) -> Vec<Cell> {
    (0..width)
        .map(|c| {
            if spec.ignore_null_updates && is_null(c, sent) {
                previous.and_then(|r| r.get(c).copied()).unwrap_or(NULL_CELL)
            } else {
                sent
            }
        })
        .collect()
}

/// SCD type 1: per key, the events not older than what the key (or a TRUNCATE) last saw, in
/// sequence order; the last one decides the row. A TRUNCATE removes the rows whose key's last
/// event is not newer than it. Returns the outcomes, the last TRUNCATE event applied, if any,
/// and the existing rows of keys the run did not otherwise touch that TRUNCATEs removed.
fn scd1(
    layout: &Layout,
    spec: &CdcSpec,
    events: &Events,
    order: &[usize],
    state: &State,
    existing_keys: &[Option<Vec<u8>>],
) -> Result<(Outcomes, Option<usize>, Vec<usize>)> {
    let existing_by_key: HashMap<&[u8], usize> =
        existing_keys.iter().enumerate().filter_map(|(row, key)| key.as_deref().map(|k| (k, row))).collect();
    let width = layout.data.len();
    let mut truncate: Option<Vec<u8>> = state.truncated.as_ref().map(|(s, _)| s.clone());
    let mut truncated_now = None;
    let mut wiped: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    let mut truncated_rows = Vec::new();
    let mut outcomes: HashMap<Vec<u8>, Outcome> = HashMap::new();
    for &i in order {
        let Some(sequence) = events.order.get(i) else { continue };
        if truncate.as_ref().is_some_and(|t| sequence < t) {
            continue;
        }
        if events.is_truncate(i) {
            truncate = Some(sequence.clone());
            truncated_now = Some(i);
            // The rows of keys the run looked at so far whose last event is not newer.
            for outcome in outcomes.values_mut() {
                let older = outcome.sequence.as_ref().is_none_or(|(_, s)| s <= sequence);
                if older && !outcome.rows.is_empty() {
                    outcome.rows.clear();
                    outcome.changed = true;
                }
            }
            for (key, &row) in &existing_by_key {
                let older = state.by_key.get(*key).is_none_or(|k| k.sequence <= *sequence);
                if !outcomes.contains_key(*key) && older && wiped.insert(key.to_vec()) {
                    truncated_rows.push(row);
                }
            }
            continue;
        }
        let Some(Some(key)) = events.keys.get(i) else { continue };
        let outcome = outcomes.entry(key.clone()).or_insert_with(|| {
            let mut outcome = new_outcome(state, key, i);
            if let Some(&row) = existing_by_key.get(key.as_slice()) {
                outcome.replaces.push(row);
                if !wiped.contains(key.as_slice()) {
                    outcome.rows.push(Version {
                        values: vec![(FROM_EXISTING, row); width],
                        start: (SEQ_EVENT, i),
                        start_order: Vec::new(),
                        end: None,
                    });
                }
            }
            outcome
        });
        if outcome.sequence.as_ref().is_some_and(|(_, s)| sequence < s) {
            continue;
        }
        outcome.sequence = Some(((SEQ_EVENT, i), sequence.clone()));
        outcome.changed = true;
        if events.is_delete(i) {
            outcome.deleted = true;
            outcome.rows.clear();
        } else {
            let previous = outcome.rows.first().map(|v| v.values.clone());
            let is_null = |c: usize, (_, row): Cell| events.data.get(c).is_none_or(|a| a.is_null(row));
            let values = upserted(spec, (FROM_EVENT, i), is_null, previous.as_deref(), width);
            outcome.deleted = false;
            outcome.rows = vec![Version { values, start: (SEQ_EVENT, i), start_order: sequence.clone(), end: None }];
        }
    }
    Ok((outcomes, truncated_now, truncated_rows))
}

/// The positions of `rows` (state rows) that are tombstones written before `cutoff` (ms).
fn expired_tombstones(rows: &RecordBatch, cutoff: i64) -> Result<Vec<usize>> {
    let deleted = column(rows, STATE_DELETED)?;
    let updated = cast_column(&column(rows, STATE_UPDATED)?, &DataType::Int64, STATE_UPDATED)?;
    let (Some(deleted), Some(updated)) =
        (deleted.as_boolean_opt(), updated.as_primitive_opt::<arrow::datatypes::Int64Type>())
    else {
        return Ok(Vec::new());
    };
    Ok((0..rows.num_rows())
        .filter(|&i| deleted.is_valid(i) && deleted.value(i) && updated.is_valid(i) && updated.value(i) < cutoff)
        .collect())
}

/// Builds a column from cells over `arrays`.
pub(super) fn build(arrays: &[ArrayRef], cells: &[(usize, usize)]) -> Result<ArrayRef> {
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    Ok(interleave(&refs, cells)?)
}

pub(super) fn data_arrays(
    layout: &Layout,
    events: &Events,
    existing: &Located,
    state: &State,
    c: usize,
) -> Result<Vec<ArrayRef>> {
    let field = layout.data.get(c).ok_or_else(|| Error::Internal("column out of range".into()))?;
    let event = events.data.get(c).cloned().ok_or_else(|| Error::Internal("column out of range".into()))?;
    // Rows located by their keys alone have no other column: no cell takes one of theirs.
    let existing = match existing.rows.column_by_name(field.name()) {
        Some(array) => cast_column(array, field.data_type(), field.name())?,
        None => new_null_array(field.data_type(), existing.rows.num_rows()),
    };
    let history = match state.history.data.get(c) {
        Some(array) => array.clone(),
        None => new_null_array(field.data_type(), 0),
    };
    Ok(vec![event, existing, new_null_array(field.data_type(), 1), history])
}

pub(super) fn sequence_arrays(
    layout: &Layout,
    events: &Events,
    existing: &Located,
    state: &State,
) -> Result<Vec<ArrayRef>> {
    let bound = |name: &str| -> Result<ArrayRef> {
        match existing.rows.column_by_name(name) {
            Some(array) => cast_column(array, &layout.sequence_type, name),
            None => Ok(new_null_array(&layout.sequence_type, 0)),
        }
    };
    let history = state.history.sequence.clone().unwrap_or_else(|| new_null_array(&layout.sequence_type, 0));
    Ok(vec![events.sequence.clone(), bound(START_AT)?, bound(END_AT)?, state.sequence.clone(), history])
}

/// The target's new rows: every version of every changed key.
fn target_rows(
    layout: &Layout,
    spec: &CdcSpec,
    events: &Events,
    existing: &Located,
    state: &State,
    outcomes: &[(Vec<u8>, Outcome)],
) -> Result<RecordBatch> {
    let versions: Vec<&Version> = outcomes.iter().flat_map(|(_, o)| o.rows.iter()).collect();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (c, field) in layout.data.iter().enumerate() {
        let cells: Vec<Cell> = versions.iter().map(|v| v.values.get(c).copied().unwrap_or(NULL_CELL)).collect();
        arrays.push(build(&data_arrays(layout, events, existing, state, c)?, &cells)?);
        fields.push(field.clone().with_nullable(true));
    }
    if spec.scd_type == 2 {
        let sequence = sequence_arrays(layout, events, existing, state)?;
        let mut with_null = sequence.clone();
        with_null.push(new_null_array(&layout.sequence_type, 1));
        let null = (with_null.len() - 1, 0);
        let starts: Vec<SeqCell> = versions.iter().map(|v| v.start).collect();
        let ends: Vec<SeqCell> = versions.iter().map(|v| v.end.unwrap_or(null)).collect();
        arrays.push(build(&with_null, &starts)?);
        fields.push(Field::new(START_AT, layout.sequence_type.clone(), true));
        arrays.push(build(&with_null, &ends)?);
        fields.push(Field::new(END_AT, layout.sequence_type.clone(), true));
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(versions.len()));
    Ok(RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?)
}

/// The state's new rows: each changed key's latest sequence and whether it is deleted, and the
/// TRUNCATE's row when one applied.
fn state_rows(
    layout: &Layout,
    spec: &CdcSpec,
    events: &Events,
    existing: &Located,
    state: &State,
    outcomes: &[(Vec<u8>, Outcome)],
    truncated_at: Option<usize>,
) -> Result<RecordBatch> {
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    let count = outcomes.len() + usize::from(truncated_at.is_some());
    for &k in &layout.keys {
        let field = layout.data.get(k).ok_or_else(|| Error::Internal("key out of range".into()))?;
        let mut cells: Vec<Cell> = outcomes.iter().map(|(_, o)| (FROM_EVENT, o.key_event)).collect();
        if truncated_at.is_some() {
            cells.push(NULL_CELL);
        }
        arrays.push(build(&data_arrays(layout, events, existing, state, k)?, &cells)?);
        fields.push(field.clone().with_nullable(true));
    }
    let sequence = sequence_arrays(layout, events, existing, state)?;
    let mut cells: Vec<SeqCell> = outcomes
        .iter()
        .map(|(_, o)| o.sequence.as_ref().map(|(c, _)| *c).unwrap_or((SEQ_EVENT, o.key_event)))
        .collect();
    let mut deleted: Vec<bool> = outcomes.iter().map(|(_, o)| o.deleted).collect();
    if let Some(i) = truncated_at {
        cells.push((SEQ_EVENT, i));
        deleted.push(true);
    }
    arrays.push(build(&sequence, &cells)?);
    fields.push(Field::new(STATE_SEQUENCE, layout.sequence_type.clone(), true));
    arrays.push(Arc::new(BooleanArray::from(deleted)));
    fields.push(Field::new(STATE_DELETED, DataType::Boolean, true));
    arrays.push(Arc::new(arrow::array::Int64Array::from(vec![crate::util::now_ms(); count])));
    fields.push(Field::new(STATE_UPDATED, DataType::Int64, true));
    if spec.scd_type == 2 {
        arrays.push(history_column(layout, events, existing, state, outcomes, count)?);
        fields.push(Field::new(STATE_HISTORY, DataType::Binary, true));
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(count));
    Ok(RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?)
}

/// The schema a new CDC target gets from its flow's input: the chosen columns, and for SCD 2
/// the version bounds in the sequence's type.
pub fn target_schema(input: &Schema, spec: &CdcSpec) -> Result<SchemaRef> {
    let chosen = data_columns(input, spec)?;
    let mut fields: Vec<Field> = Vec::new();
    for name in &chosen {
        let field = input.field_with_name(name).map_err(|_| Error::Internal(format!("no column {name}")))?;
        fields.push(field.clone().with_nullable(true));
    }
    if spec.scd_type == 2 {
        let sequence = input
            .field_with_name(SEQUENCE_COLUMN)
            .map_err(|_| Error::Internal("the CDC input has no sequence".into()))?;
        fields.push(Field::new(START_AT, sequence.data_type().clone(), true));
        fields.push(Field::new(END_AT, sequence.data_type().clone(), true));
    }
    Ok(Arc::new(Schema::new(fields)))
}
