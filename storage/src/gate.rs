//! The commit gate: the last word of whoever runs a commit on whether it may happen.
//!
//! A caller that runs work on behalf of someone (the engine, for a client's statement) can wrap
//! that work in [`gated`]. Every commit made inside it, on any table, first asks the gate
//! ([`check`], called by [`crate::commit::Transaction::commit`] right before the log entry is
//! written); a refusal aborts the commit with [`crate::Error::CommitRefused`] and nothing written.
//! The engine uses it for two things that must hold on every write path: a read-only role commits
//! nothing, and a statement's cancellation is ordered with its commit (once a statement has
//! passed the gate it is no longer cancelled, before that it never commits).
//!
//! Work outside a gated scope (background workers, tools) is not asked.

use std::future::Future;
use std::sync::Arc;

/// Decides whether a commit may go ahead.
pub trait CommitGate: Send + Sync {
    /// Called right before a commit's log entry is written. An error refuses the commit.
    fn enter_commit(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

tokio::task_local! {
    static GATE: Arc<dyn CommitGate>;
}

/// Runs `work` with `gate` asked before each of its commits.
pub async fn gated<F: Future>(gate: Arc<dyn CommitGate>, work: F) -> F::Output {
    GATE.scope(gate, work).await
}

/// Asks the gate of the running work, if any, whether a commit may go ahead.
pub fn check() -> crate::Result<()> {
    match GATE.try_with(|gate| gate.enter_commit()) {
        Ok(Err(refusal)) => Err(crate::Error::CommitRefused(refusal)),
        Ok(Ok(())) | Err(_) => Ok(()),
    }
}
