//! Who runs a statement, and what that role may do.
//!
//! Sluice's privilege model has PostgreSQL's shape, reduced to three kinds of role:
//!
//! - the **owner** of the warehouse (the operator: `sluice sql`, the Rust API, and the users-file
//!   user marked `"owner": true`, or the first user when none is marked) may do everything: attach
//!   tables at any location, manage roles, and set table properties that loosen safety (a retention
//!   shorter than Delta's default, say);
//! - a **normal** role reads and writes tables, creates objects, and names server-side paths only
//!   inside the data folder and the operator's `--allow-path` folders;
//! - a **read-only** role (PostgreSQL's `pg_read_all_data`) writes nothing by any path: the check is
//!   on what runs (the plan, every commit), not on a statement's first keyword.
//!
//! The rights are checked in the engine, where the statement runs: [`crate::Session`] holds the
//! privileges of its role, set by whoever authenticated it (the server, per connection).

/// The rights of the role a session runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Privileges {
    /// The warehouse owner: may attach outside locations, manage roles, loosen safety settings.
    pub owner: bool,
    /// May not write anything (data, catalog, files).
    pub read_only: bool,
}

impl Privileges {
    /// The operator's own rights (the in-process API and `sluice sql`).
    pub const OWNER: Privileges = Privileges { owner: true, read_only: false };
    /// A role that reads and writes tables inside the data folder.
    pub const NORMAL: Privileges = Privileges { owner: false, read_only: false };
    /// A role that may only read.
    pub const READ_ONLY: Privileges = Privileges { owner: false, read_only: true };
}

impl Default for Privileges {
    fn default() -> Self {
        Privileges::OWNER
    }
}
