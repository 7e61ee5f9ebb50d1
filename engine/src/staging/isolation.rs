//! The isolation levels Sluice gives transaction blocks (see [`crate::transaction`]).

use datafusion::sql::sqlparser::ast::TransactionIsolationLevel;

/// The isolation a transaction gets. PostgreSQL's READ UNCOMMITTED is given READ COMMITTED, as
/// PostgreSQL does; the other levels are provided as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// PostgreSQL's default. Each statement reads the tables as of its own start, but a table
    /// the block has written is read as of its snapshot when the block first wrote it, plus the
    /// block's writes (it moves to a later version only as below). An UPDATE or DELETE of rows
    /// of a keyed table locks their keys ([`crate::row_locks`]): another READ COMMITTED block
    /// that changes one of them waits until this one ends, then runs its statement again on the
    /// table's latest version. Where COMMIT still finds a row both changed (a wait cut short, a
    /// writer outside a block), it is 40001, nothing applied.
    #[default]
    ReadCommitted,
    /// Snapshot isolation: the block reads one snapshot of every table; a row it changed that
    /// another transaction changed since is 40001 at COMMIT.
    RepeatableRead,
    /// Repeatable read, and at COMMIT of a block that writes, 40001 when another transaction
    /// committed to any table the block read or wrote since its snapshot (at the grain of tables,
    /// where PostgreSQL's predicate locks track rows and pages: more retries, never an anomaly).
    /// Such commits are checked and made one at a time.
    Serializable,
}

impl Isolation {
    /// The level of `SET TRANSACTION ISOLATION LEVEL` and friends.
    pub fn asked(level: &TransactionIsolationLevel) -> Self {
        match level {
            TransactionIsolationLevel::Serializable => Isolation::Serializable,
            TransactionIsolationLevel::RepeatableRead | TransactionIsolationLevel::Snapshot => {
                Isolation::RepeatableRead
            }
            TransactionIsolationLevel::ReadCommitted | TransactionIsolationLevel::ReadUncommitted => {
                Isolation::ReadCommitted
            }
        }
    }

    /// The level as `transaction_isolation` is set to it ('read committed', 'SERIALIZABLE').
    pub fn named(level: &str) -> Self {
        let level = level.trim().trim_matches(['\'', '"']).to_ascii_lowercase();
        let words: Vec<&str> = level.split_whitespace().collect();
        match words.as_slice() {
            ["serializable"] => Isolation::Serializable,
            ["repeatable", "read"] => Isolation::RepeatableRead,
            _ => Isolation::ReadCommitted,
        }
    }

    /// The level's name, as `SHOW transaction_isolation` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }
}
