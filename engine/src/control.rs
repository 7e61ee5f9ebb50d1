//! A running statement's control: its role's rights at the moment it commits, and its
//! cancellation, ordered with that commit.
//!
//! [`crate::Session::run_with`] runs a statement inside a storage commit gate
//! ([`sluice_storage::gate`]) whose gate is a [`StatementControl`]. Every commit the statement
//! makes, on any table or the catalog, asks it first:
//!
//! - a read-only role is refused there, whatever path led to the commit (a DML inside COPY, a
//!   CTE, a flow it triggers, a function): SQLSTATE 25006;
//! - a cancellation (a CancelRequest or `statement_timeout`) and the first commit race through one
//!   atomic state. [`StatementControl::cancel`] wins only while no commit has started, and then
//!   no commit ever will; once the first commit has passed the gate, `cancel` returns false and
//!   the caller must let the statement finish and report its success. So a client told 57014
//!   can rely on nothing having been committed, and a statement that committed is never reported
//!   as cancelled.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::privileges::Privileges;

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const COMMITTING: u8 = 2;

/// The control of one running statement.
#[derive(Debug)]
pub struct StatementControl {
    state: AtomicU8,
    privileges: Privileges,
    reason: Mutex<String>,
}

impl StatementControl {
    /// The control of a statement run by a role with `privileges`.
    pub fn new(privileges: Privileges) -> Arc<Self> {
        Arc::new(Self { state: AtomicU8::new(RUNNING), privileges, reason: Mutex::new(String::new()) })
    }

    /// Cancels the statement if it has not started to commit: then it never will, and the caller
    /// may drop it. Returns false once a commit has started: the statement must run to its end.
    /// `reason` completes "canceling statement due to ..." ("user request", "statement timeout").
    #[must_use]
    pub fn cancel(&self, reason: &str) -> bool {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.to_string();
        match self.state.compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == CANCELLED,
        }
    }

    /// Whether the statement has started to commit.
    pub fn committing(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMMITTING
    }

    /// The rights the statement runs with.
    pub fn privileges(&self) -> Privileges {
        self.privileges
    }
}

impl sluice_storage::gate::CommitGate for StatementControl {
    fn enter_commit(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.privileges.read_only {
            return Err(Box::new(Error::ReadOnly("this role is read-only and cannot write".into())));
        }
        match self.state.compare_exchange(RUNNING, COMMITTING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(()),
            Err(COMMITTING) => Ok(()),
            Err(_) => {
                let reason = self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Err(Box::new(Error::Cancelled(reason)))
            }
        }
    }
}

/// Asks the running statement's gate (if any) whether it may commit; for commits that do not go
/// through a Delta table (the catalog).
pub fn check_commit() -> crate::Result<()> {
    Ok(sluice_storage::gate::check()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_storage::gate::CommitGate;

    #[test]
    fn cancel_and_commit_are_ordered() {
        let control = StatementControl::new(Privileges::NORMAL);
        assert!(control.cancel("user request"));
        let refused = control.enter_commit().unwrap_err();
        assert!(refused.to_string().contains("user request"), "{refused}");

        let control = StatementControl::new(Privileges::NORMAL);
        assert!(control.enter_commit().is_ok());
        assert!(!control.cancel("statement timeout"));
        assert!(control.enter_commit().is_ok(), "later commits of a committing statement go ahead");
        assert!(control.committing());

        let control = StatementControl::new(Privileges::READ_ONLY);
        assert!(control.enter_commit().is_err());
        assert!(control.cancel("user request"), "a refused read-only write has not committed");
    }
}
