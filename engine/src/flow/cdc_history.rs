//! SCD type 2 for AUTO CDC: a key's versions rebuilt from its events in sequence order.
//!
//! A change of a tracked column opens a new version (closing the current one at its sequence),
//! a change of other columns updates the current version in place, a delete closes it. An event
//! that changes no tracked column leaves no trace in the versions, yet a later, older event can
//! need it: after `a=1 @1`, `a=1 @3`, a late `a=2 @2` gives `[1,2) a=1`, `[2,3) a=2`,
//! `[3,-) a=1`, not `[2,-) a=2`. So each key's state row keeps the key's events, in the order
//! they were applied (`__history`: an Arrow IPC stream of the sequence, the delete flag and the
//! data columns as each event sent them), and a run replays them merged with its own events.
//! A key whose state row has no history (written before it was kept, or whose tombstone expired)
//! has its versions and tombstone read back as events instead, and gains a history from then on.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    make_comparator, new_null_array, Array, ArrayRef, AsArray, BinaryBuilder, BooleanArray, DynComparator, RecordBatch,
};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::row::RowConverter;

use super::cdc::{
    build, column, data_arrays, encode_sequence, new_outcome, sequence_arrays, upserted, Cell, Events, Layout, Outcome,
    Outcomes, SeqCell, State, Version, END_AT, FROM_EVENT, FROM_EXISTING, FROM_HISTORY, NULL_CELL, SEQ_END, SEQ_EVENT,
    SEQ_HISTORY, SEQ_START, SEQ_STATE, START_AT,
};
use crate::catalog::CdcSpec;
use crate::error::{Error, Result};
use crate::sql::dml::cast_column;
use crate::sql::keyed::Located;

/// The state table's column holding an SCD 2 key's events.
pub(super) const STATE_HISTORY: &str = "__history";
/// The columns of a history beside the data columns.
const HISTORY_SEQUENCE: &str = "__sequence";
const HISTORY_DELETE: &str = "__delete";

/// The histories of the run's keys, decoded: one row per past event, each key's rows together
/// and in the order they were applied.
#[derive(Default)]
pub(super) struct History {
    /// The target's data columns (by name; NULL where an event predates a column).
    pub(super) data: Vec<ArrayRef>,
    pub(super) sequence: Option<ArrayRef>,
    order: Vec<Vec<u8>>,
    delete: Vec<bool>,
    by_key: HashMap<Vec<u8>, Range<usize>>,
}

/// Decodes the histories of the state rows `by_key` names (keys as bytes, state rows).
pub(super) fn read_history(
    layout: &Layout,
    sequences: &RowConverter,
    rows: &RecordBatch,
    by_key: &[(Vec<u8>, usize)],
) -> Result<History> {
    let mut history = History::default();
    let Some(blobs) = rows.column_by_name(STATE_HISTORY) else { return Ok(history) };
    let Some(blobs) = blobs.as_binary_opt::<i32>() else {
        return Err(Error::Internal(format!("{STATE_HISTORY} is not binary")));
    };
    let mut parts: Vec<RecordBatch> = Vec::new();
    let mut at = 0;
    for (key, row) in by_key {
        if !blobs.is_valid(*row) {
            continue;
        }
        let reader = StreamReader::try_new(std::io::Cursor::new(blobs.value(*row)), None)?;
        let start = at;
        for batch in reader {
            let batch = aligned(layout, &batch?)?;
            at += batch.num_rows();
            parts.push(batch);
        }
        history.by_key.insert(key.clone(), start..at);
    }
    let schema = history_schema(layout);
    let all = arrow::compute::concat_batches(&schema, &parts)?;
    let sequence = column(&all, HISTORY_SEQUENCE)?;
    history.order = encode_sequence(sequences, &sequence)?;
    history.sequence = Some(sequence);
    let delete = column(&all, HISTORY_DELETE)?;
    let delete = delete.as_boolean_opt().ok_or_else(|| Error::Internal(format!("{HISTORY_DELETE} is not boolean")))?;
    history.delete = (0..all.num_rows()).map(|i| delete.is_valid(i) && delete.value(i)).collect();
    history.data = all.columns().iter().skip(2).cloned().collect();
    Ok(history)
}

fn history_schema(layout: &Layout) -> Arc<Schema> {
    let mut fields = vec![
        Field::new(HISTORY_SEQUENCE, layout.sequence_type.clone(), true),
        Field::new(HISTORY_DELETE, DataType::Boolean, true),
    ];
    fields.extend(layout.data.iter().map(|f| f.clone().with_nullable(true)));
    Arc::new(Schema::new(fields))
}

/// A stored history's batch in the run's layout: columns by name, cast to today's types, NULL
/// for columns added since.
fn aligned(layout: &Layout, batch: &RecordBatch) -> Result<RecordBatch> {
    let schema = history_schema(layout);
    let mut arrays = Vec::new();
    for field in schema.fields() {
        arrays.push(match batch.column_by_name(field.name()) {
            Some(array) => cast_column(array, field.data_type(), field.name())?,
            None => new_null_array(field.data_type(), batch.num_rows()),
        });
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// One step of a key's timeline.
enum Step {
    /// A version read back from the target, with its values as they are.
    Version {
        values: Vec<Cell>,
    },
    /// An event (of this run, or of the key's history): its values as sent, merged with the
    /// current version's under IGNORE NULL UPDATES.
    Event {
        sent: Cell,
    },
    Delete,
}

/// A key's steps: each with its sequence (bytes), its rank among equal sequences (what was
/// applied before, then the run's events in arrival order) and its sequence cell.
type Timeline = Vec<(Vec<u8>, (usize, usize), SeqCell, Step)>;

/// One event of a key's new history: its sequence, whether it deletes, its data values.
pub(super) type HistoryStep = (SeqCell, bool, Vec<Cell>);

/// SCD type 2: per key, its history (or its versions and tombstone read back) merged with the
/// run's events in sequence order, and the versions rebuilt.
#[allow(clippy::too_many_arguments)]
pub(super) fn scd2(
    layout: &Layout,
    spec: &CdcSpec,
    sequences: &RowConverter,
    events: &Events,
    order: &[usize],
    state: &State,
    existing: &Located,
    existing_keys: &[Option<Vec<u8>>],
) -> Result<Outcomes> {
    let width = layout.data.len();
    let start = cast_column(&column(&existing.rows, START_AT)?, &layout.sequence_type, START_AT)?;
    let end = cast_column(&column(&existing.rows, END_AT)?, &layout.sequence_type, END_AT)?;
    let start_order = encode_sequence(sequences, &start)?;
    let end_order = encode_sequence(sequences, &end)?;
    // Comparators of the tracked columns across the arrays a cell can name.
    let mut comparators: HashMap<(usize, usize, usize), DynComparator> = HashMap::new();
    for &c in &layout.tracked {
        let arrays = data_arrays(layout, events, existing, state, c)?;
        for (a, left) in arrays.iter().enumerate() {
            for (b, right) in arrays.iter().enumerate() {
                comparators.insert((c, a, b), make_comparator(left.as_ref(), right.as_ref(), SortOptions::default())?);
            }
        }
    }
    let same_tracked = |x: &[Cell], y: &[Cell]| {
        layout.tracked.iter().all(|&c| match (x.get(c), y.get(c)) {
            (Some(&(a, i)), Some(&(b, j))) => {
                comparators.get(&(c, a, b)).is_some_and(|compare| compare(i, j) == Ordering::Equal)
            }
            _ => true,
        })
    };
    // An upsert's new values: in place when the current version began at the same sequence or
    // keeps its tracked values, else closing it and opening a version.
    let place = |current: &mut Option<Version>, versions: &mut Vec<Version>, values: Vec<Cell>, cell, bytes: &[u8]| {
        match current.as_mut() {
            Some(c) if c.start_order == bytes || same_tracked(&c.values, &values) => c.values = values,
            _ => {
                if let Some(mut closed) = current.take() {
                    closed.end = Some(cell);
                    versions.push(closed);
                }
                *current = Some(Version { values, start: cell, start_order: bytes.to_vec(), end: None });
            }
        }
    };
    let history = &state.history;
    let is_null = |c: usize, (array, row): Cell| match array {
        FROM_EVENT => events.data.get(c).is_none_or(|a| a.is_null(row)),
        FROM_HISTORY => history.data.get(c).is_none_or(|a| a.is_null(row)),
        _ => true,
    };
    let mut by_key: HashMap<Vec<u8>, Timeline> = HashMap::new();
    // Keys with a history: its events, in the order they were applied.
    for (key, rows) in &history.by_key {
        let steps = by_key.entry(key.clone()).or_default();
        for row in rows.clone() {
            let Some(bytes) = history.order.get(row) else { continue };
            let step = if history.delete.get(row).copied().unwrap_or(false) {
                Step::Delete
            } else {
                Step::Event { sent: (FROM_HISTORY, row) }
            };
            steps.push((bytes.clone(), (0, row), (SEQ_HISTORY, row), step));
        }
    }
    // Keys without: the existing versions read back in their history's order (by start, then
    // end, the current version last): each is an upsert at its start and, when closed, a delete
    // at its end, unless the key's next version starts there with other tracked values (that
    // upsert closed it). A delete there would end whatever a late event of this run opens
    // between the two: after `[1,3) a=1`, `[3,-) a=2` and a late `a=2 @2`, the versions are
    // `[1,2) a=1`, `[2,-) a=2`, not `[2,3) a=2`, `[3,-) a=2`. Their ranks keep that order among
    // steps of equal sequence.
    let mut versions: Vec<usize> = (0..existing_keys.len()).filter(|row| !start.is_null(*row)).collect();
    versions.sort_by(|a, b| {
        let bound = |row: &usize| (start_order.get(*row), end.is_null(*row), end_order.get(*row));
        bound(a).cmp(&bound(b))
    });
    // The versions that start at each (key, sequence).
    let mut starting: HashMap<(&[u8], &[u8]), Vec<usize>> = HashMap::new();
    for &row in &versions {
        if let (Some(Some(key)), Some(start_bytes)) = (existing_keys.get(row), start_order.get(row)) {
            starting.entry((key.as_slice(), start_bytes.as_slice())).or_default().push(row);
        }
    }
    let closed_by_change = |row: usize, key: &[u8], end_bytes: &[u8]| {
        let values = vec![(FROM_EXISTING, row); width];
        starting
            .get(&(key, end_bytes))
            .is_some_and(|next| next.iter().any(|&n| !same_tracked(&values, &vec![(FROM_EXISTING, n); width])))
    };
    let mut rank = 0;
    for &row in &versions {
        let Some(Some(key)) = existing_keys.get(row) else { continue };
        if history.by_key.contains_key(key) {
            continue;
        }
        let (Some(start_bytes), Some(end_bytes)) = (start_order.get(row), end_order.get(row)) else { continue };
        let ends_by_delete = !end.is_null(row) && !closed_by_change(row, key, end_bytes);
        let steps = by_key.entry(key.clone()).or_default();
        let values = vec![(FROM_EXISTING, row); width];
        steps.push((start_bytes.clone(), (0, rank), (SEQ_START, row), Step::Version { values }));
        if ends_by_delete {
            steps.push((end_bytes.clone(), (0, rank + 1), (SEQ_END, row), Step::Delete));
        }
        rank += 2;
    }
    for &i in order {
        let Some(Some(key)) = events.keys.get(i) else { continue };
        let Some(sequence) = events.order.get(i) else { continue };
        let step = if events.is_delete(i) { Step::Delete } else { Step::Event { sent: (FROM_EVENT, i) } };
        by_key.entry(key.clone()).or_default().push((sequence.clone(), (1, i), (SEQ_EVENT, i), step));
    }
    let mut outcomes = HashMap::new();
    for (&key, &first) in order
        .iter()
        .filter_map(|i| events.keys.get(*i).and_then(|k| k.as_deref()).map(|k| (k, i)))
        .collect::<HashMap<&[u8], &usize>>()
        .iter()
    {
        let mut outcome = new_outcome(state, key, *first);
        outcome.changed = true;
        outcome.replaces =
            existing_keys.iter().enumerate().filter(|(_, k)| k.as_deref() == Some(key)).map(|(row, _)| row).collect();
        let mut steps = by_key.remove(key).unwrap_or_default();
        // Without a history, the state's tombstone is a delete unless a version already ends
        // there.
        if let Some(known) = state.by_key.get(key).filter(|k| k.deleted && !history.by_key.contains_key(key)) {
            let ends_there = steps.iter().any(|s| matches!(s.3, Step::Delete) && s.1 .0 == 0 && s.0 == known.sequence);
            if !ends_there {
                steps.push((known.sequence.clone(), (0, usize::MAX), (SEQ_STATE, known.row), Step::Delete));
            }
        }
        steps.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut versions: Vec<Version> = Vec::new();
        let mut current: Option<Version> = None;
        for (bytes, _, cell, step) in steps {
            match step {
                Step::Delete => {
                    outcome.history.push((cell, true, vec![NULL_CELL; width]));
                    if let Some(mut closed) = current.take() {
                        closed.end = Some(cell);
                        versions.push(closed);
                    }
                    outcome.deleted = true;
                }
                Step::Version { values } => {
                    outcome.history.push((cell, false, values.clone()));
                    place(&mut current, &mut versions, values, cell, &bytes);
                    outcome.deleted = false;
                }
                Step::Event { sent } => {
                    let values = upserted(spec, sent, is_null, current.as_ref().map(|c| c.values.as_slice()), width);
                    outcome.history.push((cell, false, vec![sent; width]));
                    place(&mut current, &mut versions, values, cell, &bytes);
                    outcome.deleted = false;
                }
            }
            if outcome.sequence.as_ref().is_none_or(|(_, s)| bytes >= *s) {
                outcome.sequence = Some((cell, bytes));
            }
        }
        versions.extend(current);
        outcome.rows = versions;
        outcomes.insert(key.to_vec(), outcome);
    }
    Ok(outcomes)
}

/// The state rows' `__history` column: each outcome's events as an Arrow IPC stream (NULL for a
/// row without, such as a TRUNCATE's).
pub(super) fn history_column(
    layout: &Layout,
    events: &Events,
    existing: &Located,
    state: &State,
    outcomes: &[(Vec<u8>, Outcome)],
    rows: usize,
) -> Result<ArrayRef> {
    let steps: Vec<&HistoryStep> = outcomes.iter().flat_map(|(_, o)| o.history.iter()).collect();
    let schema = history_schema(layout);
    let mut arrays = Vec::new();
    let cells: Vec<SeqCell> = steps.iter().map(|s| s.0).collect();
    arrays.push(build(&sequence_arrays(layout, events, existing, state)?, &cells)?);
    arrays.push(Arc::new(BooleanArray::from(steps.iter().map(|s| s.1).collect::<Vec<_>>())) as ArrayRef);
    for c in 0..layout.data.len() {
        let cells: Vec<Cell> = steps.iter().map(|s| s.2.get(c).copied().unwrap_or(NULL_CELL)).collect();
        arrays.push(build(&data_arrays(layout, events, existing, state, c)?, &cells)?);
    }
    let all = RecordBatch::try_new(schema.clone(), arrays)?;
    let mut column = BinaryBuilder::new();
    let mut at = 0;
    for (_, outcome) in outcomes {
        let part = all.slice(at, outcome.history.len());
        at += outcome.history.len();
        if outcome.history.is_empty() {
            column.append_null();
            continue;
        }
        let mut writer = StreamWriter::try_new(Vec::new(), &schema)?;
        writer.write(&part)?;
        writer.finish()?;
        column.append_value(writer.into_inner()?);
    }
    for _ in outcomes.len()..rows {
        column.append_null();
    }
    Ok(Arc::new(column.finish()))
}
