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
//! `FETCH` and `MOVE` (parsed by `sluice::syntax::cursor`) move forward only: NEXT, a count,
//! FORWARD and ALL; the backward and absolute directions are refused (0A000).
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

/// How many rows a FETCH or MOVE (`verb`) in `direction` moves forward over. Sluice's cursors
/// move forward only: the backward, absolute and relative directions are 0A000, and so is a
/// count of 0 (PostgreSQL's re-fetch of the current row).
pub(super) fn forward_count(verb: &str, direction: &FetchDirection) -> PgWireResult<usize> {
    let refused = || user_error("0A000", format!("{verb} {direction} is not supported: cursors move forward only"));
    let count = |limit: &ValueWithSpan| match &limit.value {
        Value::Number(n, _) => match n.parse::<i64>() {
            Ok(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(_) => Err(refused()),
            Err(_) => Err(user_error("22003", format!("{verb} count {n} is out of range"))),
        },
        _ => Err(user_error("42601", format!("{verb} takes a count, not {limit}"))),
    };
    match direction {
        FetchDirection::Count { limit } | FetchDirection::Forward { limit: Some(limit) } => count(limit),
        FetchDirection::All | FetchDirection::ForwardAll => Ok(usize::MAX),
        FetchDirection::Next | FetchDirection::Forward { limit: None } => Ok(1),
        _ => Err(refused()),
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
        self.cursors.lock().insert(name, Cursor { batch, position: 0, life, savepoint });
        Ok(())
    }

    /// Moves cursor `name` forward over up to `count` rows: the rows (34000 for no such cursor).
    pub(super) fn advance(&self, name: &str, count: usize) -> PgWireResult<RecordBatch> {
        let mut cursors = self.cursors.lock();
        let cursor =
            cursors.get_mut(name).ok_or_else(|| user_error("34000", format!("cursor \"{name}\" does not exist")))?;
        let start = cursor.position.min(cursor.batch.num_rows());
        let length = count.min(cursor.batch.num_rows() - start);
        cursor.position = start + length;
        Ok(cursor.batch.slice(start, length))
    }

    /// `MOVE [direction] [FROM | IN] name`: the cursor moves as FETCH would, and the answer is
    /// how many rows it moved over (`MOVE 2`).
    pub(super) async fn move_cursor(&self, name: &Ident, direction: &FetchDirection) -> PgWireResult<Response> {
        let count = forward_count("MOVE", direction)?;
        if !self.cursors.lock().contains_key(&name.value) && self.subscriptions.lock().await.contains_key(&name.value) {
            return Err(user_error("0A000", "MOVE on a subscription cursor is not supported: FETCH its rows"));
        }
        let rows = self.advance(&name.value, count)?;
        Ok(Response::Execution(Tag::new("MOVE").with_rows(rows.num_rows())))
    }
}
