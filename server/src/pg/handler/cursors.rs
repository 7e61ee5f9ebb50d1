//! Cursors' lifetimes as PostgreSQL 15 has them: `DECLARE c CURSOR FOR query` needs a
//! transaction block (25P01 otherwise; a multi-statement query's implicit block counts, the
//! extended protocol's statements up to Sync do not), and the cursor is closed when its
//! transaction ends. `WITH HOLD` cursors may be declared anywhere and outlive the transaction
//! that commits them (one that rolls back closes them). A cursor's rows are read when it is
//! declared, so a held cursor needs nothing more at COMMIT.
//!
//! Subscription cursors (`DECLARE c CURSOR FOR SUBSCRIBE ...`, see [`super::subscribe`]) follow
//! the same rules; WITH HOLD and BINARY are refused for them (0A000), and BINARY for any cursor.

use std::sync::atomic::Ordering;

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
    /// `ROLLBACK`: the transaction, if it ends, does not commit.
    Rollback,
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
                _ => Outcome::Other,
            },
            _ => Outcome::Other,
        }
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
        }
        if self.session.in_transaction_block() {
            return;
        }
        let failed = self.transaction_failed.swap(false, Ordering::Relaxed);
        let committed = !failed && outcome != Outcome::Rollback;
        self.pipeline.store(false, Ordering::Relaxed);
        self.close_transaction_cursors(committed).await;
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
        self.cursors.lock().insert(name, Cursor { batch, position: 0, life });
        Ok(())
    }
}
