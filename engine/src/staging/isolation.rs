//! The isolation levels Sluice gives transaction blocks (see [`crate::transaction`]).

use datafusion::sql::sqlparser::ast::TransactionIsolationLevel;

/// The isolation a transaction gets. PostgreSQL's READ UNCOMMITTED and READ COMMITTED are
/// given REPEATABLE READ, which is stronger (each statement does not see what others committed
/// since the block's snapshot), and are reported as that; SERIALIZABLE is provided as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Snapshot isolation: the block reads one snapshot of every table; a row it changed that
    /// another transaction changed since is 40001 at COMMIT.
    #[default]
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
            _ => Isolation::RepeatableRead,
        }
    }

    /// The level as `transaction_isolation` is set to it ('read committed', 'SERIALIZABLE').
    pub fn named(level: &str) -> Self {
        if level.trim().trim_matches(['\'', '"']).eq_ignore_ascii_case("serializable") {
            Isolation::Serializable
        } else {
            Isolation::RepeatableRead
        }
    }

    /// The level's name, as `SHOW transaction_isolation` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }
}
