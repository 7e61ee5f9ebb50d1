//! Standalone sequences (`CREATE SEQUENCE`): the rules of their definitions and the values they
//! hand out. (The sequences of SERIAL and identity columns are the columns' own: see
//! [`crate::identity`]. The statements and `nextval`/`currval`/`setval`/`lastval` are
//! [`crate::sql::sequences`].)
//!
//! A sequence's definition is a catalog object ([`SequenceEntry`]): a transaction block's CREATE,
//! DROP and ALTER ... RENAME are held until COMMIT like a table's. What it has handed out is not
//! transactional, as in PostgreSQL: a value handed out is never handed out again, whether the
//! transaction that took it commits or not. That state is the sequence's [`SequenceMark`] in the
//! catalog, by id, written at once by the statement that moves it.
//!
//! To spare a catalog version per `nextval`, a mark reserves [`LOGGED_VALUES`] values ahead of the
//! one handed out, as PostgreSQL writes its WAL record 32 values ahead (`SEQ_LOG_VALS`); values are
//! then handed out from memory ([`Sequences`]) until the reservation is used up. A restart (or a
//! crash) continues after the mark, skipping at most the reserved values, never repeating one, as
//! PostgreSQL after a crash. `log_cnt` (in `SELECT * FROM seq`) is what is left of a reservation.
//!
//! Values come from one state per sequence shared by the warehouse's sessions: `CACHE n` is
//! recorded and shown, but no session keeps values of its own (PostgreSQL's per-session caches
//! make values interleave across sessions; here they follow each other in order of the calls).
//! Another process writing the same warehouse's sequence is noticed when a mark is written: the
//! newer mark is continued from.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::{Catalog, SequenceEntry, SequenceMark, SequenceType};
use crate::error::{Error, Result};

/// How many values a written mark reserves ahead of the last one handed out (PostgreSQL's
/// `SEQ_LOG_VALS`).
pub const LOGGED_VALUES: i64 = 32;
/// Attempts to write a mark while another process writes the same sequence's.
const MARK_RETRY_MAX: usize = 10;

/// The options of `CREATE SEQUENCE` and `ALTER SEQUENCE`, as given (None: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceOptions {
    /// `AS type`: the type's name as written.
    pub data_type: Option<String>,
    pub increment: Option<i64>,
    /// `MINVALUE n`, or `NO MINVALUE` (Some(None)).
    pub min_value: Option<Option<i64>>,
    /// `MAXVALUE n`, or `NO MAXVALUE` (Some(None)).
    pub max_value: Option<Option<i64>>,
    pub start: Option<i64>,
    /// `RESTART` (Some(None)) or `RESTART WITH n` (ALTER SEQUENCE only).
    pub restart: Option<Option<i64>>,
    pub cache: Option<i64>,
    pub cycle: Option<bool>,
}

fn invalid(message: String) -> Error {
    Error::data("22023", message)
}

/// The sequence type a type name stands for (PostgreSQL's spellings and aliases).
pub fn sequence_type(name: &str) -> Result<SequenceType> {
    match name.to_ascii_lowercase().as_str() {
        "smallint" | "int2" => Ok(SequenceType::Smallint),
        "integer" | "int" | "int4" => Ok(SequenceType::Integer),
        "bigint" | "int8" => Ok(SequenceType::Bigint),
        _ => Err(invalid("sequence type must be smallint, integer, or bigint".into())),
    }
}

/// Applies `options` to a definition, with PostgreSQL's defaults and checks (its
/// `init_params`, in its order): `base` is the sequence being altered, or when `creating` one
/// with the new sequence's id and name (its numbers are then all defaulted); `last_value` is its
/// current value. Returns the definition and, when the options restart the sequence, the value
/// it restarts at.
pub fn define(
    base: &SequenceEntry,
    creating: bool,
    options: &SequenceOptions,
    last_value: i64,
) -> Result<(SequenceEntry, Option<i64>)> {
    let mut next = base.clone();
    let old_range = base.data_type.range();
    if let Some(name) = &options.data_type {
        next.data_type = sequence_type(name)?;
    }
    let (type_min, type_max) = next.data_type.range();
    // A bound that was the old type's own follows the new type (PostgreSQL's reset_max_value).
    let type_changed = next.data_type != base.data_type && !creating;
    let reset_max = type_changed && base.max_value == old_range.1;
    let reset_min = type_changed && base.min_value == old_range.0;
    if let Some(increment) = options.increment {
        if increment == 0 {
            return Err(invalid("INCREMENT must not be zero".into()));
        }
        next.increment = increment;
    }
    if let Some(cycle) = options.cycle {
        next.cycle = cycle;
    }
    let ascending = next.increment > 0;
    let default_max = if ascending || reset_max { type_max } else { -1 };
    match options.max_value {
        Some(Some(max)) => next.max_value = max,
        Some(None) => next.max_value = default_max,
        None if creating || reset_max => next.max_value = default_max,
        None => {}
    }
    let default_min = if !ascending || reset_min { type_min } else { 1 };
    match options.min_value {
        Some(Some(min)) => next.min_value = min,
        Some(None) => next.min_value = default_min,
        None if creating || reset_min => next.min_value = default_min,
        None => {}
    }
    if next.max_value < type_min || next.max_value > type_max {
        return Err(invalid(format!(
            "MAXVALUE ({}) is out of range for sequence data type {}",
            next.max_value,
            next.data_type.name()
        )));
    }
    if next.min_value < type_min || next.min_value > type_max {
        return Err(invalid(format!(
            "MINVALUE ({}) is out of range for sequence data type {}",
            next.min_value,
            next.data_type.name()
        )));
    }
    if next.min_value >= next.max_value {
        return Err(invalid(format!("MINVALUE ({}) must be less than MAXVALUE ({})", next.min_value, next.max_value)));
    }
    match options.start {
        Some(start) => next.start = start,
        None if creating => next.start = if ascending { next.min_value } else { next.max_value },
        None => {}
    }
    if next.start < next.min_value {
        return Err(invalid(format!("START value ({}) cannot be less than MINVALUE ({})", next.start, next.min_value)));
    }
    if next.start > next.max_value {
        return Err(invalid(format!(
            "START value ({}) cannot be greater than MAXVALUE ({})",
            next.start, next.max_value
        )));
    }
    let restart = options.restart.map(|value| value.unwrap_or(next.start));
    let current = match restart {
        Some(value) => value,
        None if creating => next.start,
        None => last_value,
    };
    if current < next.min_value {
        return Err(invalid(format!("RESTART value ({current}) cannot be less than MINVALUE ({})", next.min_value)));
    }
    if current > next.max_value {
        return Err(invalid(format!("RESTART value ({current}) cannot be greater than MAXVALUE ({})", next.max_value)));
    }
    if let Some(cache) = options.cache {
        if cache <= 0 {
            return Err(invalid(format!("CACHE ({cache}) must be greater than zero")));
        }
        next.cache = cache;
    }
    Ok((next, restart))
}

/// The value after `last` (or `last` itself when it was not called yet), or PostgreSQL's
/// 2200H at the end of a sequence that does not cycle.
fn advance(entry: &SequenceEntry, last: i64, is_called: bool) -> Result<i64> {
    if !is_called {
        return Ok(last);
    }
    let next = last.checked_add(entry.increment);
    if entry.increment > 0 {
        match next {
            Some(next) if next <= entry.max_value => Ok(next),
            _ if entry.cycle => Ok(entry.min_value),
            _ => Err(Error::data(
                "2200H",
                format!("nextval: reached maximum value of sequence \"{}\" ({})", entry.name, entry.max_value),
            )),
        }
    } else {
        match next {
            Some(next) if next >= entry.min_value => Ok(next),
            _ if entry.cycle => Ok(entry.max_value),
            _ => Err(Error::data(
                "2200H",
                format!("nextval: reached minimum value of sequence \"{}\" ({})", entry.name, entry.min_value),
            )),
        }
    }
}

/// A sequence as the catalogs list it (`pg_class`, `pg_sequence`, `pg_sequences`,
/// `information_schema.sequences`): a standalone one, or a SERIAL or identity column's.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceInfo {
    pub schema: String,
    pub name: String,
    pub data_type: SequenceType,
    pub start: i64,
    pub increment: i64,
    pub min_value: i64,
    pub max_value: i64,
    pub cache: i64,
    pub cycle: bool,
    /// The last value handed out (`pg_sequences.last_value`), None before the first.
    pub last_value: Option<i64>,
    /// A column's sequence: its table and column.
    pub column: Option<(String, String)>,
}

impl SequenceInfo {
    /// A standalone sequence in its `state`.
    pub fn standalone(entry: &SequenceEntry, state: &SequenceState) -> Self {
        Self {
            schema: entry.schema.clone(),
            name: entry.name.clone(),
            data_type: entry.data_type,
            start: entry.start,
            increment: entry.increment,
            min_value: entry.min_value,
            max_value: entry.max_value,
            cache: entry.cache,
            cycle: entry.cycle,
            last_value: state.is_called.then_some(state.last_value),
            column: None,
        }
    }
}

/// What `SELECT * FROM seq` shows: PostgreSQL's `last_value`, `log_cnt` and `is_called`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceState {
    pub last_value: i64,
    /// The values left of the reservation the last written mark made.
    pub log_cnt: i64,
    pub is_called: bool,
    /// The mark as this process last wrote or read it.
    written: Option<SequenceMark>,
}

impl SequenceState {
    /// The state a mark gives (a sequence never called when there is none).
    fn from_mark(entry: &SequenceEntry, mark: Option<SequenceMark>) -> Self {
        match mark {
            Some(mark) => {
                Self { last_value: mark.last_value, log_cnt: 0, is_called: mark.is_called, written: Some(mark) }
            }
            None => Self { last_value: entry.start, log_cnt: 0, is_called: false, written: None },
        }
    }
}

/// The values of the warehouse's standalone sequences as this process hands them out.
#[derive(Debug, Default)]
pub struct Sequences {
    /// Each sequence's state (by id; None until this process knows it), behind a lock of its own:
    /// an async one, as handing out may write a mark, and a statement that calls `nextval` per
    /// row holds it while the statement runs ([`Drawing`]).
    states: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<SequenceState>>>>>,
}

/// The outcome of writing a mark: written, or another process wrote a different one first.
enum Written {
    Done,
    Moved(Option<SequenceMark>),
}

/// Values of one sequence being handed out, one at a time and without waiting ([`Drawing::take`],
/// what a function called per row needs), holding the sequence's lock: nobody else hands out
/// values of it until [`Drawing::finish`] has written the mark that covers them, or the drawing
/// is dropped (then the values it took count as not handed out, which only a statement that
/// failed, and so showed them to nobody, may do).
#[derive(Debug)]
pub struct Drawing {
    entry: SequenceEntry,
    guard: tokio::sync::OwnedMutexGuard<Option<SequenceState>>,
    /// The state before the first value taken, and after the last.
    start: SequenceState,
    next: SequenceState,
    taken: i64,
}

impl Drawing {
    /// The last value taken, if any.
    pub fn last_taken(&self) -> Option<i64> {
        (self.taken > 0).then_some(self.next.last_value)
    }

    /// The next value.
    pub fn take(&mut self) -> Result<i64> {
        self.next.last_value = advance(&self.entry, self.next.last_value, self.next.is_called)?;
        self.next.is_called = true;
        self.taken = self.taken.saturating_add(1);
        Ok(self.next.last_value)
    }

    /// Makes the values taken handed out: writes a mark past them (reserving [`LOGGED_VALUES`]
    /// more) unless the last one written covers them. 40001 when another process moved the
    /// sequence meanwhile (its values may be the ones taken).
    pub async fn finish(self, catalog: &Catalog) -> Result<()> {
        let name = self.entry.name.clone();
        match self.settle(catalog).await? {
            Written::Done => Ok(()),
            Written::Moved(_) => Err(Error::SerializationFailure(format!(
                "sequence \"{name}\" was moved by another process while this statement took its values"
            ))),
        }
    }

    /// Writes what [`Drawing::finish`] writes; on [`Written::Moved`] nothing is kept.
    async fn settle(mut self, catalog: &Catalog) -> Result<Written> {
        if self.taken <= self.start.log_cnt {
            self.next.log_cnt = self.start.log_cnt - self.taken;
            *self.guard = Some(self.next);
            return Ok(Written::Done);
        }
        // Reserve LOGGED_VALUES past the last value handed out, up to the sequence's end.
        let mut reserved = self.next.last_value;
        let mut log_cnt = 0;
        while log_cnt < LOGGED_VALUES {
            match reserved.checked_add(self.entry.increment) {
                Some(value) if value >= self.entry.min_value && value <= self.entry.max_value => reserved = value,
                _ => break,
            }
            log_cnt += 1;
        }
        let mark = SequenceMark { last_value: reserved, is_called: true };
        let written = write_mark(catalog, &self.entry.id, self.start.written, mark).await?;
        match &written {
            Written::Done => {
                self.next.log_cnt = log_cnt;
                self.next.written = Some(mark);
                *self.guard = Some(self.next);
            }
            Written::Moved(mark) => *self.guard = Some(SequenceState::from_mark(&self.entry, *mark)),
        }
        Ok(written)
    }
}

impl Sequences {
    /// The lock of a sequence's state.
    fn cell(&self, id: &str) -> Arc<tokio::sync::Mutex<Option<SequenceState>>> {
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        states.entry(id.to_string()).or_default().clone()
    }

    /// The sequence's state: this process's, unless the catalog holds a mark this process did not
    /// write (another process moved it, or this one just opened).
    fn known(entry: &SequenceEntry, known: Option<SequenceState>, catalog: &Catalog) -> SequenceState {
        let mark = catalog.current().sequence_marks.get(&entry.id).copied();
        match known {
            Some(state) if state.written == mark => state,
            _ => SequenceState::from_mark(entry, mark),
        }
    }

    /// What `SELECT * FROM seq` and `pg_sequences` show of a sequence now.
    pub async fn state(&self, catalog: &Catalog, entry: &SequenceEntry) -> SequenceState {
        let known = *self.cell(&entry.id).lock().await;
        Self::known(entry, known, catalog)
    }

    /// Starts handing out values of a sequence, one at a time (see [`Drawing`]).
    pub async fn draw(&self, catalog: &Catalog, entry: &SequenceEntry) -> Drawing {
        let guard = self.cell(&entry.id).lock_owned().await;
        let start = Self::known(entry, *guard, catalog);
        Drawing { entry: entry.clone(), guard, start, next: start, taken: 0 }
    }

    /// Hands out the next `count` values (`nextval`, once per value), in order.
    pub async fn next(&self, catalog: &Catalog, entry: &SequenceEntry, count: usize) -> Result<Vec<i64>> {
        let mut drawing = self.draw(catalog, entry).await;
        for _ in 0..MARK_RETRY_MAX {
            let values = (0..count).map(|_| drawing.take()).collect::<Result<Vec<i64>>>()?;
            match drawing.settle(catalog).await? {
                Written::Done => return Ok(values),
                // Another process moved the sequence: continue after its mark.
                Written::Moved(_) => drawing = self.draw(catalog, entry).await,
            }
        }
        Err(Error::SerializationFailure(format!(
            "sequence \"{}\" was moved too often concurrently by another process",
            entry.name
        )))
    }

    /// Sets the sequence's state (`setval`, `ALTER SEQUENCE ... RESTART`, a definition that
    /// changed): written at once, reserving nothing. `value` must be within the sequence's bounds.
    pub async fn set(&self, catalog: &Catalog, entry: &SequenceEntry, value: i64, is_called: bool) -> Result<()> {
        let mut guard = self.cell(&entry.id).lock_owned().await;
        let mark = SequenceMark { last_value: value, is_called };
        catalog
            .update(|state| {
                state.sequence_marks.insert(entry.id.clone(), mark);
                Ok(())
            })
            .await?;
        *guard = Some(SequenceState::from_mark(entry, Some(mark)));
        Ok(())
    }

    /// Writes the sequence's current state as its mark, giving back what it reserved (after a
    /// change of its definition, whose reservation was made under the old one).
    pub async fn settle(&self, catalog: &Catalog, entry: &SequenceEntry) -> Result<()> {
        let state = self.state(catalog, entry).await;
        if state.written.is_none() {
            return Ok(());
        }
        self.set(catalog, entry, state.last_value, state.is_called).await
    }

    /// Forgets a dropped sequence.
    pub fn forget(&self, id: &str) {
        self.states.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// Writes `mark` for sequence `id` if the catalog still holds `expected` (else another process
/// moved the sequence: its mark is returned).
async fn write_mark(
    catalog: &Catalog,
    id: &str,
    expected: Option<SequenceMark>,
    mark: SequenceMark,
) -> Result<Written> {
    let (_, written) = catalog
        .update(|state| {
            let now = state.sequence_marks.get(id).copied();
            if now != expected {
                return Ok(Written::Moved(now));
            }
            state.sequence_marks.insert(id.to_string(), mark);
            Ok(Written::Done)
        })
        .await?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use sluice_storage::store::TableStore;

    use super::*;

    fn entry(options: &SequenceOptions) -> SequenceEntry {
        let blank = SequenceEntry::blank("s1".into(), "public".into(), "s".into(), 0);
        define(&blank, true, options, 0).unwrap().0
    }

    #[test]
    fn definitions_take_postgresql_defaults_and_refuse_what_it_refuses() {
        let up = entry(&SequenceOptions::default());
        assert_eq!((up.min_value, up.max_value, up.start), (1, i64::MAX, 1));
        let down = entry(&SequenceOptions { increment: Some(-2), ..Default::default() });
        assert_eq!((down.min_value, down.max_value, down.start), (i64::MIN, -1, -1));
        let small = entry(&SequenceOptions { data_type: Some("int2".into()), ..Default::default() });
        assert_eq!(small.max_value, 32767);
        let refused = |options: SequenceOptions| define(&up, true, &options, 0).unwrap_err().to_string();
        assert_eq!(refused(SequenceOptions { increment: Some(0), ..Default::default() }), "INCREMENT must not be zero");
        assert_eq!(
            refused(SequenceOptions { start: Some(0), ..Default::default() }),
            "START value (0) cannot be less than MINVALUE (1)"
        );
        assert_eq!(
            refused(SequenceOptions { data_type: Some("text".into()), ..Default::default() }),
            "sequence type must be smallint, integer, or bigint"
        );
        // Altering the type moves a bound that was the old type's own.
        let options = SequenceOptions { data_type: Some("integer".into()), ..Default::default() };
        assert_eq!(define(&up, false, &options, 5).unwrap().0.max_value, i64::from(i32::MAX));
        let restart = SequenceOptions { restart: Some(None), ..Default::default() };
        assert_eq!(define(&up, false, &restart, 40).unwrap().1, Some(1));
    }

    #[tokio::test]
    async fn values_continue_after_the_mark_and_a_reopened_process_skips_the_reservation() {
        let store = TableStore::memory();
        let catalog = Catalog::open(store.clone()).await.unwrap();
        let seq = entry(&SequenceOptions { increment: Some(10), ..Default::default() });
        let sequences = Sequences::default();
        assert_eq!(sequences.next(&catalog, &seq, 2).await.unwrap(), vec![1, 11]);
        let state = sequences.state(&catalog, &seq).await;
        assert_eq!((state.last_value, state.log_cnt, state.is_called), (11, LOGGED_VALUES, true));
        let versions = catalog.persisted_version();
        assert_eq!(sequences.next(&catalog, &seq, 1).await.unwrap(), vec![21]);
        assert_eq!(catalog.persisted_version(), versions, "a reserved value writes no catalog version");
        // Another process (a restart) continues after the reservation.
        let reopened = Catalog::open(store).await.unwrap();
        let fresh = Sequences::default();
        assert_eq!(fresh.next(&reopened, &seq, 1).await.unwrap(), vec![11 + 10 * LOGGED_VALUES + 10]);
        // This process notices the newer mark when it next writes one.
        let rest = sequences.next(&catalog, &seq, 40).await.unwrap();
        assert!(rest.iter().all(|v| *v > 11 + 10 * LOGGED_VALUES + 10 || *v < 11 + 10 * LOGGED_VALUES));
        sequences.set(&catalog, &seq, 5, false).await.unwrap();
        assert_eq!(sequences.next(&catalog, &seq, 1).await.unwrap(), vec![5]);
    }

    #[tokio::test]
    async fn the_end_of_a_sequence_is_an_error_unless_it_cycles() {
        let catalog = Catalog::open(TableStore::memory()).await.unwrap();
        let sequences = Sequences::default();
        let options = SequenceOptions { max_value: Some(Some(3)), ..Default::default() };
        let seq = entry(&options);
        assert_eq!(sequences.next(&catalog, &seq, 3).await.unwrap(), vec![1, 2, 3]);
        let error = sequences.next(&catalog, &seq, 1).await.unwrap_err();
        assert_eq!(error.sqlstate(), "2200H");
        let cycling = SequenceEntry { id: "s2".into(), cycle: true, ..seq };
        assert_eq!(sequences.next(&catalog, &cycling, 5).await.unwrap(), vec![1, 2, 3, 1, 2]);
    }
}
