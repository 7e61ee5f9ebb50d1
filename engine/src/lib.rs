//! # Sluice: an embedded lakehouse database with streaming tables
//!
//! Tables are Delta Lake tables (see `sluice-storage`); SQL is DataFusion with Sluice's own
//! statements on top. The pipeline of types:
//!
//! - [`Database`] opens a [`warehouse`] (local folder, `memory://`, `s3://`, `gs://`, `az://`)
//!   holding the [`catalog`] of schemas and tables, and starts its [`runtimes`];
//! - a [`Session`] parses statements ([`syntax::parser`]), plans queries with DataFusion over
//!   [`provider::SluiceTable`] (one snapshot per table per statement, with file and row-group
//!   pruning and deletion-vector masking), and runs DDL and DML as single Delta commits;
//! - [`functions`] adds JSON operators and `table_changes`;
//! - [`flow`] runs streaming flows (PUSH INTO routes, `STREAM()` pulls, CREATE FLOW) exactly once,
//!   [`sql::quality`] checks tables' expectations on every write, and [`system`] serves the
//!   `sluice` system schema;
//! - [`source`] ingests external sources (Kafka) into streaming tables, exactly once;
//! - [`ivm`] keeps materialized views equal to their queries, incrementally where it can;
//! - [`roles`] keeps login roles (SCRAM verifiers), [`privileges`] and [`rights`] say what each
//!   may run, [`paths`] which server files a client may name, [`control`] orders a statement's
//!   cancellation with its commit.
//!
//! ## Layers
//!
//! Each module uses only modules of the layers below it (`tests/it/layout.rs` refuses an import
//! cycle), so a new feature is a new module that plugs in at one place:
//!
//! 1. bottom: [`error`], [`util`] (locks, clock, retry backoff), [`datetime`] (date/time input),
//!    [`time_of_day`] (`time` and `timetz` values), [`types`], [`privileges`],
//!    [`control`], [`memory`], [`provider`] (table scans), [`change`] (the committed change,
//!    its listeners, and the writer every commit goes through), [`events`] (the event log),
//!    [`catalog`], [`sequence`] (standalone sequences' values), [`syntax`] (statements and their
//!    parsers), [`names`], [`rights`], [`roles`], [`paths`], [`hooks`] (what features plug into
//!    planning);
//! 2. [`warehouse`]: the store, the catalog, the table handles, the writer and its listeners, the
//!    hooks, the event log, roles, paths and memory of one open warehouse;
//! 3. planning and writing: [`functions`] (JSON operators, `table_changes`) and [`sql`]
//!    ([`sql::context::QueryContext`]: the DataFusion context and statement snapshots; queries,
//!    DDL, DML and COPY, their rows checked against the table's expectations ([`sql::quality`])
//!    and each commit made known through the writer);
//! 4. features, each a runtime over the warehouse plus its statements as functions of a query
//!    context: [`source`] (Kafka ingest), [`ivm`] (materialized views), [`flow`] (streaming
//!    flows, AUTO CDC), [`subscribe`] (a table's changes out, to Rust) and [`system`] (the
//!    `sluice` schema that shows them);
//! 5. top: [`runtimes`] (a warehouse with its runtimes, wired together, and the background
//!    worker), [`session`] (the one statement dispatcher) and [`database`] (the handle);
//! 6. over the handle: [`lineage`] (the lineage graph and status that the CLI and the status page
//!    draw, read from the system tables).
//!
//! ```no_run
//! # async fn example() -> sluice::Result<()> {
//! let db = sluice::Database::open("./warehouse").await?;
//! db.execute("CREATE TABLE t (id bigint, name text)").await?;
//! db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')").await?;
//! let batches = db.query("SELECT count(*) FROM t").await?;
//! # Ok(()) }
//! ```
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

pub mod alerts;
pub mod catalog;
pub mod change;
pub mod control;
pub mod database;
pub mod datetime;
pub mod documents;
pub mod error;
pub mod events;
pub mod files;
pub mod flow;
pub mod functions;
pub mod hooks;
pub mod identity;
pub mod ivm;
pub mod keymap;
pub mod keys;
pub mod lineage;
pub mod memory;
pub mod names;
pub mod paths;
pub mod privileges;
pub mod provider;
pub(crate) mod record_files;
pub mod rights;
pub mod roles;
pub mod row_locks;
pub mod runtimes;
pub mod sequence;
pub mod session;
pub mod source;
pub mod sql;
pub mod staging;
pub mod subscribe;
pub mod syntax;
pub mod system;
pub mod time_of_day;
pub mod transaction;
pub mod types;
pub mod util;
pub mod warehouse;

/// The stack a runtime's worker threads need for Sluice's statements (their futures nest deeply:
/// DDL that rewrites a table runs DML inside it), for runtimes that run them (`sluice serve`).
pub const STATEMENT_STACK_BYTES: usize = 16 * 1024 * 1024;

pub use database::{Database, DatabaseOptions, WriteStats};

/// The README's examples, compiled as doc tests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
pub use error::{Error, Result};
pub use privileges::Privileges;
pub use session::{CatalogView, PreparedStatement, Session, StatementResult};
pub use subscribe::{Subscription, TableChange};
