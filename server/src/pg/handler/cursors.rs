//! Cursors' lifetimes as PostgreSQL 15 has them: `DECLARE c CURSOR FOR query` needs a
//! transaction block (25P01 otherwise; a multi-statement query's implicit block counts, the
//! extended protocol's statements up to Sync do not), and the cursor is closed when its
//! transaction ends, also by `COMMIT AND CHAIN` and `ROLLBACK AND CHAIN`. `WITH HOLD` cursors may
//! be declared anywhere and outlive the transaction that commits them (one that rolls back
//! closes them). `ROLLBACK TO SAVEPOINT s` closes the cursors declared since `s` (WITH HOLD
//! too), as PostgreSQL drops the portals of the subtransactions it aborts; a cursor keeps its
//! position. A cursor's rows are read when it is declared, so a held cursor needs nothing more
//! at COMMIT.
//!
//! `FETCH` and `MOVE` (parsed by `sluice::syntax::cursor`) move in every direction PostgreSQL
//! has (NEXT, PRIOR, FIRST, LAST, ABSOLUTE, RELATIVE, FORWARD, BACKWARD, ALL, counts), with its
//! positions: before the first row, on a row, after the last ([`Motion`]). A `NO SCROLL` cursor
//! refuses what would read a row again (55000). A cursor declared without `SCROLL` moves
//! backward too: its rows are read when it is declared, where PostgreSQL allows that only for
//! plans that can run backward (not an aggregate's, for example). Subscription cursors move
//! forward only (0A000 otherwise).
//!
//! Subscription cursors (`DECLARE c CURSOR FOR SUBSCRIBE ...`, see [`super::subscribe`]) follow
//! the same rules; WITH HOLD and BINARY are refused for them (0A000), and BINARY for any cursor.

use std::sync::atomic::Ordering;

use datafusion::sql::sqlparser::ast::{Ident, ValueWithSpan};

use super::*;

/// How long a cursor lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CursorLife {
    /// Until its transaction ends (WITHOUT HOLD, the default).
    Transaction,
    /// WITH HOLD, in a transaction that has not ended yet: kept if it commits.
    HoldUncommitted,
    /// WITH HOLD, past the commit of its transaction: until CLOSE or the end of the session.
    Held,
}

/// What a statement does to the transaction's outcome, as far as cursors care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// `ROLLBACK [AND CHAIN]`: the transaction, if it ends, does not commit.
    Rollback,
    /// `COMMIT AND CHAIN`: the transaction ends (committed unless it failed), the next begins.
    CommitAndChain,
    /// `ROLLBACK TO SAVEPOINT`: when it succeeds, an aborted block is usable again.
    RollbackTo,
    Other,
}

impl Outcome {
    pub(super) fn of(statement: &SluiceStatement) -> Self {
        match statement {
            SluiceStatement::Standard(s) => match s.as_ref() {
                Statement::Rollback { savepoint: None, .. } => Outcome::Rollback,
                Statement::Rollback { savepoint: Some(_), .. } => Outcome::RollbackTo,
                Statement::Commit { chain: true, .. } => Outcome::CommitAndChain,
                _ => Outcome::Other,
            },
            _ => Outcome::Other,
        }
    }
}

/// How many rows a FETCH (`verb`) in `direction` moves forward over, for a subscription cursor,
/// which moves forward only: the backward, absolute and relative directions are 0A000, and so is
/// a count of 0 (PostgreSQL's re-fetch of the current row).
pub(super) fn forward_count(verb: &str, direction: &FetchDirection) -> PgWireResult<usize> {
    let refused = || user_error("0A000", format!("{verb} {direction} is not supported: cursors move forward only"));
    match Motion::of(verb, direction)? {
        Motion::Forward(count) if count > 0 => Ok(usize::try_from(count).unwrap_or(usize::MAX)),
        _ => Err(refused()),
    }
}

/// A cursor's motion, as PostgreSQL's FETCH and MOVE directions are defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Motion {
    /// Over up to this many rows after the current one (`u64::MAX`: ALL); 0 re-reads the current.
    Forward(u64),
    /// Over up to this many rows before the current one, nearest first.
    Backward(u64),
    /// To row k (from the end when negative; 0 is before the first).
    Absolute(i64),
    /// To the row k rows away (0: the current one).
    Relative(i64),
}

impl Motion {
    pub(super) fn of(verb: &str, direction: &FetchDirection) -> PgWireResult<Self> {
        let count = |limit: &ValueWithSpan| match &limit.value {
            Value::Number(n, _) => {
                n.parse::<i64>().map_err(|_| user_error("22003", format!("{verb} count {n} is out of range")))
            }
            _ => Err(user_error("42601", format!("{verb} takes a count, not {limit}"))),
        };
        // A negative count goes the other way.
        let forward = |n: i64| if n < 0 { Motion::Backward(n.unsigned_abs()) } else { Motion::Forward(n as u64) };
        Ok(match direction {
            FetchDirection::Count { limit } | FetchDirection::Forward { limit: Some(limit) } => forward(count(limit)?),
            FetchDirection::Backward { limit: Some(limit) } => match count(limit)? {
                n if n < 0 => Motion::Forward(n.unsigned_abs()),
                n => Motion::Backward(n as u64),
            },
            FetchDirection::All | FetchDirection::ForwardAll => Motion::Forward(u64::MAX),
            FetchDirection::BackwardAll => Motion::Backward(u64::MAX),
            FetchDirection::Next | FetchDirection::Forward { limit: None } => Motion::Forward(1),
            FetchDirection::Prior | FetchDirection::Backward { limit: None } => Motion::Backward(1),
            FetchDirection::First => Motion::Absolute(1),
            FetchDirection::Last => Motion::Absolute(-1),
            FetchDirection::Absolute { limit } => Motion::Absolute(count(limit)?),
            FetchDirection::Relative { limit } => Motion::Relative(count(limit)?),
        })
    }

    /// The motion from `position` over `rows` rows (positions: 0 before the first row, k on row
    /// k, rows + 1 after the last).
    pub(super) fn run(self, position: u64, rows: u64) -> Step {
        let after = rows + 1;
        // Row k (1-based) if there is one.
        let on = |k: u64| if (1..=rows).contains(&k) { k - 1..k } else { 0..0 };
        let step = |rows: std::ops::Range<u64>, position: u64, goes_back: bool| Step {
            rows,
            reversed: false,
            position,
            goes_back,
        };
        match self {
            Motion::Forward(0) | Motion::Relative(0) => step(on(position), position, true),
            Motion::Forward(count) => {
                let last = position.saturating_add(count);
                let end = last.min(rows);
                step(position.min(end)..end, if last > rows { after } else { last }, false)
            }
            Motion::Backward(count) => {
                // Rows max(position - count, 1) ..= position - 1, nearest first.
                let end = position.saturating_sub(1).min(rows);
                let first = position.saturating_sub(count).max(1) - 1;
                Step {
                    rows: first.min(end)..end,
                    reversed: true,
                    position: position.saturating_sub(count),
                    goes_back: true,
                }
            }
            Motion::Absolute(k) if k > 0 => {
                let k = k.unsigned_abs();
                step(on(k), k.min(after), k <= position)
            }
            Motion::Absolute(0) => step(0..0, 0, position > 0),
            Motion::Absolute(k) => match after.checked_sub(k.unsigned_abs()) {
                Some(j) if j >= 1 => step(on(j), j, true),
                _ => step(0..0, 0, true),
            },
            Motion::Relative(k) => {
                let target = i128::from(position) + i128::from(k);
                let position = target.clamp(0, i128::from(after)) as u64;
                step(on(position), position, k < 0)
            }
        }
    }
}

/// Where a cursor's motion takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Step {
    /// The rows it returns (0-based), in this order or, `reversed`, the other.
    rows: std::ops::Range<u64>,
    reversed: bool,
    /// The new position.
    position: u64,
    /// It reads a row at or before the current one (which a NO SCROLL cursor refuses, as
    /// PostgreSQL does).
    goes_back: bool,
}

impl Step {
    /// How many rows it returns.
    fn count(&self) -> usize {
        (self.rows.end - self.rows.start) as usize
    }

    /// The rows it returns, from a cursor's `batch`.
    fn rows_of(&self, batch: &RecordBatch) -> PgWireResult<RecordBatch> {
        let slice = batch.slice(self.rows.start as usize, self.count());
        if !self.reversed || self.count() < 2 {
            return Ok(slice);
        }
        let indexes = arrow::array::UInt32Array::from_iter_values((0..self.count() as u32).rev());
        arrow::compute::take_record_batch(&slice, &indexes).map_err(|e| user_error("XX000", e.to_string()))
    }
}

impl Connection {
    /// The options a cursor asks for that Sluice lacks (0A000), then PostgreSQL's check that it
    /// is declared in a transaction block (25P01) unless WITH HOLD. Made after the query is read,
    /// as PostgreSQL reports a missing relation before the missing block.
    pub(super) fn check_declare(&self, binary: bool, hold: bool) -> PgWireResult<CursorLife> {
        if binary {
            return Err(user_error("0A000", "DECLARE ... BINARY CURSOR is not supported: cursors return text"));
        }
        let in_block = self.session.in_transaction_block()
            && !(self.session.in_implicit() && self.pipeline.load(Ordering::Relaxed));
        match (hold, in_block) {
            (false, false) => Err(user_error("25P01", "DECLARE CURSOR can only be used in transaction blocks")),
            (false, true) => Ok(CursorLife::Transaction),
            (true, true) => Ok(CursorLife::HoldUncommitted),
            // Outside a block the statement's own transaction commits at once.
            (true, false) => Ok(CursorLife::Held),
        }
    }

    /// A statement ended (`failed` or not): if it ended the session's transaction too, the
    /// transaction's cursors close (its WITH HOLD cursors stay if it committed).
    pub(super) async fn statement_ended(&self, outcome: Outcome, failed: bool) {
        if failed {
            self.transaction_failed.store(true, Ordering::Relaxed);
        } else if outcome == Outcome::RollbackTo {
            self.transaction_failed.store(false, Ordering::Relaxed);
            self.close_cursors_since_savepoint().await;
        }
        // A successful COMMIT AND CHAIN or ROLLBACK AND CHAIN ended the transaction although the
        // session is in a block (the next one).
        let chained = !failed && matches!(outcome, Outcome::Rollback | Outcome::CommitAndChain);
        if self.session.in_transaction_block() && !chained {
            return;
        }
        let failed = self.transaction_failed.swap(false, Ordering::Relaxed);
        let committed = !failed && outcome != Outcome::Rollback;
        self.pipeline.store(false, Ordering::Relaxed);
        self.close_transaction_cursors(committed).await;
    }

    /// After a rollback to a savepoint (now the block's newest): the cursors declared since it
    /// close.
    async fn close_cursors_since_savepoint(&self) {
        let Some(savepoint) = self.session.newest_savepoint() else { return };
        let since = |declared: Option<u64>| declared.is_some_and(|d| d >= savepoint);
        self.cursors.lock().retain(|_, c| !since(c.savepoint));
        self.subscriptions.lock().await.retain(|_, s| !since(s.savepoint));
    }

    async fn close_transaction_cursors(&self, committed: bool) {
        {
            let mut cursors = self.cursors.lock();
            cursors.retain(|_, c| c.life == CursorLife::Held || (committed && c.life == CursorLife::HoldUncommitted));
            for cursor in cursors.values_mut() {
                cursor.life = CursorLife::Held;
            }
        }
        // Subscription cursors are never held.
        let mut subscriptions = self.subscriptions.lock().await;
        if !subscriptions.is_empty() {
            subscriptions.clear();
        }
    }

    /// `DECLARE name [BINARY] CURSOR [WITH[OUT] HOLD] FOR query`: the query's rows, read now.
    pub(super) async fn declare<C>(
        &self,
        client: &C,
        declare: &datafusion::sql::sqlparser::ast::Declare,
    ) -> PgWireResult<()>
    where
        C: ClientInfo,
    {
        let Some(query) = declare.for_query.clone() else {
            return Err(user_error("42601", "DECLARE needs a query (DECLARE name CURSOR FOR query)"));
        };
        let name = declare.names.first().map(|n| n.value.clone()).unwrap_or_default();
        let statement = self.rewrite(SluiceStatement::Standard(Box::new(Statement::Query(query))))?;
        let result = self.run_in_engine(client, statement, &[]).await.map_err(|e| encode::error(&e))?;
        let StatementResult::Rows { schema, batches } = result else {
            return Err(user_error("42601", "a cursor needs a query"));
        };
        let life = self.check_declare(declare.binary == Some(true), declare.hold == Some(true))?;
        if self.cursors.lock().contains_key(&name) || self.subscriptions.lock().await.contains_key(&name) {
            return Err(user_error("42P03", format!("cursor \"{name}\" already exists")));
        }
        let batch = concat_batches(&schema, &batches).map_err(|e| user_error("XX000", e.to_string()))?;
        let savepoint = self.session.newest_savepoint();
        let scroll = declare.scroll != Some(false);
        self.cursors.lock().insert(name, Cursor { batch, position: 0, scroll, life, savepoint });
        Ok(())
    }

    /// Moves cursor `name` as `motion` says: the rows it returns (34000 for no such cursor,
    /// 55000 for a NO SCROLL cursor asked to go back).
    pub(super) fn advance(&self, name: &str, motion: Motion) -> PgWireResult<RecordBatch> {
        let (step, batch) = self.step(name, motion)?;
        step.rows_of(&batch)
    }

    /// Moves cursor `name`: the step, and the cursor's rows.
    fn step(&self, name: &str, motion: Motion) -> PgWireResult<(Step, RecordBatch)> {
        let mut cursors = self.cursors.lock();
        let cursor =
            cursors.get_mut(name).ok_or_else(|| user_error("34000", format!("cursor \"{name}\" does not exist")))?;
        let step = motion.run(cursor.position, cursor.batch.num_rows() as u64);
        if step.goes_back && !cursor.scroll {
            let mut info =
                ErrorInfo::new("ERROR".to_owned(), "55000".to_owned(), "cursor can only scan forward".to_owned());
            info.hint = Some("Declare it with SCROLL option to enable backward scan.".to_owned());
            return Err(PgWireError::UserError(Box::new(info)));
        }
        cursor.position = step.position;
        Ok((step, cursor.batch.clone()))
    }

    /// `MOVE [direction] [FROM | IN] name`: the cursor moves as FETCH would, and the answer is
    /// how many rows it moved over (`MOVE 2`).
    pub(super) async fn move_cursor(&self, name: &Ident, direction: &FetchDirection) -> PgWireResult<Response> {
        let motion = Motion::of("MOVE", direction)?;
        if !self.cursors.lock().contains_key(&name.value) && self.subscriptions.lock().await.contains_key(&name.value) {
            return Err(user_error("0A000", "MOVE on a subscription cursor is not supported: FETCH its rows"));
        }
        let (step, _) = self.step(&name.value, motion)?;
        Ok(Response::Execution(Tag::new("MOVE").with_rows(step.count())))
    }
}

#[cfg(test)]
mod tests {
    use super::Motion;

    /// The positions and rows of the PostgreSQL 15 session in server/tests/differential/cursors.sql
    /// (five rows), one motion after the other.
    #[test]
    fn motions_as_postgresql_moves_a_cursor() {
        let steps: &[(Motion, &[u64])] = &[
            (Motion::Forward(2), &[1, 2]),
            (Motion::Backward(1), &[1]),
            (Motion::Backward(1), &[]),
            (Motion::Backward(1), &[]),
            (Motion::Forward(1), &[1]),
            (Motion::Absolute(4), &[4]),
            (Motion::Relative(0), &[4]),
            (Motion::Forward(0), &[4]),
            (Motion::Backward(2), &[3, 2]),
            (Motion::Absolute(-1), &[5]),
            (Motion::Forward(1), &[]),
            (Motion::Forward(1), &[]),
            (Motion::Backward(1), &[5]),
            (Motion::Absolute(-2), &[4]),
            (Motion::Absolute(-9), &[]),
            (Motion::Relative(2), &[2]),
            (Motion::Relative(9), &[]),
            (Motion::Relative(-1), &[5]),
            (Motion::Backward(u64::MAX), &[4, 3, 2, 1]),
            (Motion::Forward(3), &[1, 2, 3]),
            (Motion::Absolute(2), &[2]),
            (Motion::Absolute(9), &[]),
            (Motion::Relative(-1), &[5]),
            (Motion::Backward(u64::MAX), &[4, 3, 2, 1]),
            (Motion::Absolute(-1), &[5]),
            (Motion::Forward(u64::MAX), &[]),
            (Motion::Relative(0), &[]),
            (Motion::Absolute(1), &[1]),
            (Motion::Absolute(0), &[]),
            (Motion::Forward(9), &[1, 2, 3, 4, 5]),
            (Motion::Backward(9), &[5, 4, 3, 2, 1]),
        ];
        let mut position = 0;
        for (i, (motion, expected)) in steps.iter().enumerate() {
            let step = motion.run(position, 5);
            let mut rows: Vec<u64> = step.rows.clone().map(|r| r + 1).collect();
            if step.reversed {
                rows.reverse();
            }
            assert_eq!(rows, *expected, "step {i}: {motion:?} from {position}");
            position = step.position;
        }
    }

    #[test]
    fn going_back_is_told() {
        assert!(!Motion::Forward(2).run(0, 5).goes_back);
        assert!(Motion::Backward(1).run(2, 5).goes_back);
        assert!(Motion::Relative(0).run(2, 5).goes_back);
        assert!(!Motion::Absolute(3).run(2, 5).goes_back);
        assert!(Motion::Absolute(1).run(2, 5).goes_back);
        assert!(!Motion::Absolute(1).run(0, 5).goes_back);
    }
}
