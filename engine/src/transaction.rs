//! A session's transaction block (`BEGIN` ... `COMMIT` / `ROLLBACK`, savepoints), with
//! PostgreSQL's states and errors: a statement that fails inside a block aborts it (every later
//! statement is refused with 25P02 until ROLLBACK); `START TRANSACTION READ ONLY` (or
//! `default_transaction_read_only`, which also covers statements outside a block) refuses writes
//! with 25006; `SAVEPOINT` and `RELEASE` outside a block are 25P01, an unknown savepoint 3B001.
//!
//! A block's queries, DML and the DDL of tables, views, schemas and sequences stage their writes
//! ([`crate::staging`]): COMMIT commits them, ROLLBACK and ROLLBACK TO SAVEPOINT drop them. (What
//! `nextval` and `setval` hand out is not transactional, as in PostgreSQL.) Its other writes
//! (ALTER TABLE and ALTER SEQUENCE other than RENAME, indexes, maintenance, streaming statements)
//! still
//! commit when they return, so a ROLLBACK (or ROLLBACK TO SAVEPOINT) that would have to undo one
//! of those is refused with 0A000 saying so, never answered as if it had undone it (one on a
//! table the block created goes with the table: nobody else saw it). The refusal aborts the
//! block; the next ROLLBACK ends it (dropping the staged writes).

use std::sync::{Arc, Mutex};

use datafusion::sql::sqlparser::ast::{
    Ident, ObjectName, ObjectType, Set, Statement, TransactionAccessMode, TransactionMode,
};

use crate::error::{Error, Result};
use crate::names::TableName;
use crate::sql::context::StatementResult;
pub use crate::staging::isolation::Isolation;
use crate::staging::{Mark, Staging};
use crate::syntax::parser::SluiceStatement;
use crate::syntax::sequence::{AlterSequence, SequenceStatement};
use crate::syntax::streaming::StreamingStatement;
use crate::warehouse::Warehouse;

/// How many warnings a session keeps until they are taken ([`TransactionBlock::take_warnings`]).
const WARNINGS_KEPT: usize = 16;

/// The block a session is in, if any.
#[derive(Debug, Default)]
pub struct TransactionBlock {
    state: Mutex<Option<Block>>,
    /// `default_transaction_read_only`: blocks begin READ ONLY unless they say READ WRITE, and a
    /// write outside a block is refused too (its implicit transaction is read-only).
    default_read_only: std::sync::atomic::AtomicBool,
    /// `default_transaction_isolation`: blocks' level unless they say otherwise. Under
    /// [`Isolation::Serializable`], the implicit transaction of a statement that writes is
    /// serializable too.
    default_isolation: Mutex<Isolation>,
    /// The tables the block read and wrote, through staged handles.
    staging: Arc<Staging>,
    /// Temporary relations a ROLLBACK (or ROLLBACK TO) undid the creation of: the session drops
    /// them ([`Self::take_undone`]).
    undone: Mutex<Vec<TableName>>,
    /// Warnings for the client, as PostgreSQL sends them (COMMIT or ROLLBACK with no block, a
    /// BEGIN inside one): SQLSTATE and message ([`Self::take_warnings`]).
    warnings: Mutex<Vec<(&'static str, &'static str)>>,
    /// How many savepoints the session has made: each savepoint's serial number, so that what
    /// the session made after one (a cursor) can tell ([`Self::newest_savepoint`]).
    savepoints_made: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct Block {
    read_only: bool,
    isolation: Isolation,
    /// A statement other than SET, SHOW and transaction control ran: the isolation level is
    /// fixed (PostgreSQL's "must be called before any query").
    queried: bool,
    /// The implicit transaction of a multi-statement query ([`TransactionBlock::begin_implicit`]):
    /// no savepoints, a BEGIN makes it explicit, and it ends with the query.
    implicit: bool,
    /// A statement failed: everything but ROLLBACK is refused.
    failed: bool,
    /// Statements that wrote without staging (each committed when it returned).
    writes: usize,
    /// Savepoints, oldest first.
    savepoints: Vec<Savepoint>,
    /// The temporary relations the block created, each with the number of savepoints there
    /// were then: a rollback undoes their creation by dropping them.
    temporaries: Vec<(TableName, usize)>,
    /// Statements that committed at once on a relation the block created (an index, an ALTER
    /// TABLE, a comment): a rollback to before the relation's creation undoes them with it (the
    /// relation is deleted), a later one cannot.
    owned_writes: Vec<OwnedWrite>,
}

/// A statement that committed at once on a relation the block created.
#[derive(Debug, Clone, Copy)]
enum OwnedWrite {
    /// On a table, at this position among the tables the block created.
    Created(usize),
    /// On a temporary relation created when the block had this many savepoints.
    Temporary(usize),
}

impl OwnedWrite {
    /// Whether a rollback to savepoint `at` (0-based), before which the block had created
    /// `created` tables, keeps the relation, and so cannot undo the write.
    fn outlives_rollback_to(self, at: usize, created: usize) -> bool {
        match self {
            OwnedWrite::Created(position) => position < created,
            OwnedWrite::Temporary(depth) => depth <= at,
        }
    }
}

/// A savepoint, with what the block had done before it.
#[derive(Debug)]
struct Savepoint {
    name: String,
    /// Its serial number among the session's savepoints.
    serial: u64,
    /// Statements that had written without staging.
    writes: usize,
    /// The length of [`Block::owned_writes`].
    owned_writes: usize,
    /// How many tables the block had created.
    created: usize,
    /// The staged tables' and catalog changes' marks.
    mark: Mark,
}

/// A transaction-control statement.
enum Control {
    /// `read_only`: as the statement says, if it does; `tag`: BEGIN or START TRANSACTION.
    Begin {
        read_only: Option<bool>,
        isolation: Option<Isolation>,
        tag: &'static str,
    },
    Commit {
        chain: bool,
    },
    Rollback {
        chain: bool,
    },
    Savepoint(String),
    Release(String),
    RollbackTo(String),
    /// SET TRANSACTION [ISOLATION LEVEL ...] [READ ONLY | READ WRITE].
    SetTransaction {
        read_only: Option<bool>,
        isolation: Option<Isolation>,
    },
}

fn read_only_mode(modes: &[TransactionMode]) -> Option<bool> {
    modes.iter().rev().find_map(|mode| match mode {
        TransactionMode::AccessMode(TransactionAccessMode::ReadOnly) => Some(true),
        TransactionMode::AccessMode(TransactionAccessMode::ReadWrite) => Some(false),
        TransactionMode::IsolationLevel(_) => None,
    })
}

fn isolation_mode(modes: &[TransactionMode]) -> Option<Isolation> {
    modes.iter().rev().find_map(|mode| match mode {
        TransactionMode::IsolationLevel(level) => Some(Isolation::asked(level)),
        TransactionMode::AccessMode(_) => None,
    })
}

/// A savepoint's name as PostgreSQL compares it (unquoted names fold to lower case).
fn savepoint_name(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

fn control_of(statement: &SluiceStatement) -> Option<Control> {
    let SluiceStatement::Standard(statement) = statement else { return None };
    Some(match &**statement {
        Statement::StartTransaction { modes, begin, .. } => Control::Begin {
            read_only: read_only_mode(modes),
            isolation: isolation_mode(modes),
            tag: if *begin { "BEGIN" } else { "START TRANSACTION" },
        },
        Statement::Commit { chain, .. } => Control::Commit { chain: *chain },
        Statement::Rollback { chain, savepoint: None } => Control::Rollback { chain: *chain },
        Statement::Rollback { savepoint: Some(name), .. } => Control::RollbackTo(savepoint_name(name)),
        Statement::Savepoint { name } => Control::Savepoint(savepoint_name(name)),
        Statement::ReleaseSavepoint { name } => Control::Release(savepoint_name(name)),
        Statement::Set(Set::SetTransaction { modes, session: false, .. }) => {
            Control::SetTransaction { read_only: read_only_mode(modes), isolation: isolation_mode(modes) }
        }
        _ => return None,
    })
}

/// Whether a statement in a block goes through the block's staged tables and catalog: queries,
/// DML, every statement that only reads, and the DDL that changes only the catalog and new
/// tables (CREATE and DROP of tables, views, materialized views, schemas and sequences, ALTER ...
/// RENAME TO; not on temporary relations, whose own undo is in [`TransactionBlock`], nor a table
/// at a LOCATION, whose log others may read). The others commit when they return; see the module
/// docs.
pub fn stages(statement: &SluiceStatement) -> bool {
    if crate::rights::reads_only(statement) {
        return true;
    }
    match statement {
        SluiceStatement::InsertByName { .. } | SluiceStatement::InsertOverriding { .. } => true,
        // A comment on a table, a column or a constraint is its Delta metadata, staged as ALTER
        // TABLE is (the block's catalogs read it from its staged table).
        SluiceStatement::Comment(comment) => comment.target.relation().is_some_and(|name| !temporary(name)),
        SluiceStatement::CreateTable(create) => create.location.is_none() && !create.external && !create.temporary,
        SluiceStatement::Sequence(sequence) => match sequence.as_ref() {
            SequenceStatement::Create { temporary, .. } => !temporary,
            // Other changes of a sequence move its values, which are not transactional here (in
            // PostgreSQL they are from the ALTER on).
            SequenceStatement::Alter { change, .. } => matches!(change, AlterSequence::RenameTo(_)),
        },
        // A materialized view a block creates is read as its query until COMMIT, then built
        // (`crate::ivm::ddl`); one that replaces another is built at once.
        SluiceStatement::Streaming(streaming) => match &**streaming {
            StreamingStatement::CreateMaterializedView(create) => !create.or_replace,
            StreamingStatement::DropMaterializedView { .. } => true,
            _ => false,
        },
        SluiceStatement::Standard(statement) => match &**statement {
            Statement::Query(_)
            | Statement::Insert(_)
            | Statement::Update(_)
            | Statement::Delete(_)
            | Statement::Merge(_)
            | Statement::Truncate(_)
            | Statement::CreateSchema { .. } => true,
            // Enum types are the catalog's alone (their columns' changes, for DROP TYPE CASCADE
            // and RENAME TO, are ALTER TABLEs through the block's staged handles).
            Statement::CreateType { .. } | Statement::AlterType(_) => true,
            Statement::CreateView(create) => !create.materialized && !create.temporary && !temporary(&create.name),
            Statement::Drop {
                object_type:
                    ObjectType::Table | ObjectType::View | ObjectType::Schema | ObjectType::Sequence | ObjectType::Type,
                names,
                ..
            } => !names.iter().any(temporary),
            // ALTER TABLE and indexes change the table's schema or properties through the
            // block's staged handle (and its copy of the key index), committed with its rows.
            // (Those of a streaming table or a materialized view commit at once: see
            // `Session::run_with`.)
            Statement::AlterTable(alter) => !temporary(&alter.name) && !alter.operations.is_empty(),
            Statement::CreateIndex(create) => !temporary(&create.table_name),
            Statement::Drop { object_type: ObjectType::Index, names, .. } => !names.iter().any(temporary),
            _ => false,
        },
        _ => false,
    }
}

/// Whether a (qualified) name is in a temporary schema.
fn temporary(name: &ObjectName) -> bool {
    let schema = match name.0.len() {
        3 => name.0.get(1),
        2 => name.0.first(),
        _ => None,
    };
    schema.and_then(|part| part.as_ident()).is_some_and(|ident| crate::catalog::is_temporary_schema(&ident.value))
}

fn isolation_too_late() -> Error {
    Error::data("25001", "SET TRANSACTION ISOLATION LEVEL must be called before any query")
}

fn aborted() -> Error {
    Error::data("25P02", "current transaction is aborted, commands ignored until end of transaction block")
}

fn read_only_refusal(what: &str) -> Error {
    Error::data("25006", format!("cannot execute {what} in a read-only transaction"))
}

fn outside_block(what: &str) -> Error {
    Error::data("25P01", format!("{what} can only be used in transaction blocks"))
}

fn missing_savepoint(name: &str) -> Error {
    Error::data("3B001", format!("savepoint \"{name}\" does not exist"))
}

/// The refusal of a rollback that would have to undo `writes` committed statements.
fn cannot_undo(what: &str, writes: usize) -> Error {
    let statements = if writes == 1 { "statement" } else { "statements" };
    Error::NotSupported(format!(
        "{what} cannot undo the {writes} {statements} of this transaction that committed when they returned: \
         inside a transaction block Sluice holds the writes of queries and DML (INSERT, UPDATE, DELETE, MERGE, \
         TRUNCATE, COPY) and the DDL of tables (ALTER TABLE and indexes too), views and schemas until COMMIT, \
         but other statements (ALTER SEQUENCE other than RENAME TO, maintenance, streaming tables and \
         materialized views other than their CREATE and DROP) commit at once; the transaction \
         is aborted, ROLLBACK ends it (dropping its held writes)"
    ))
}

/// What a control statement leaves to do once the block's state is updated.
pub enum Then {
    Nothing,
    Commit(Isolation),
    Discard,
    RollbackTo(Box<Mark>),
}

impl TransactionBlock {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Block>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets `default_transaction_read_only`.
    pub fn set_default_read_only(&self, read_only: bool) {
        self.default_read_only.store(read_only, std::sync::atomic::Ordering::Relaxed);
    }

    fn default_read_only(&self) -> bool {
        self.default_read_only.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets `default_transaction_isolation`.
    pub fn set_default_isolation(&self, isolation: Isolation) {
        *self.default_isolation.lock().unwrap_or_else(|p| p.into_inner()) = isolation;
    }

    /// `default_transaction_isolation`, as provided.
    pub fn default_isolation(&self) -> Isolation {
        *self.default_isolation.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `transaction_isolation`: the block's level, or the default outside one.
    pub fn isolation(&self) -> Isolation {
        self.lock().as_ref().map_or_else(|| self.default_isolation(), |b| b.isolation)
    }

    /// `SET transaction_isolation = ...`, which is `SET TRANSACTION ISOLATION LEVEL ...`.
    pub fn set_isolation(&self, isolation: Isolation) -> Result<()> {
        // Outside a block it does nothing, without SET TRANSACTION's warning (as PostgreSQL).
        if !self.in_block() {
            return Ok(());
        }
        let (result, _) = self.decide(Control::SetTransaction { read_only: None, isolation: Some(isolation) });
        result.map(|_| ())
    }

    /// Whether a transaction block is open (failed or not).
    pub fn in_block(&self) -> bool {
        self.lock().is_some()
    }

    /// The serial number of the block's newest savepoint (the session numbers its savepoints in
    /// the order it makes them). What was made while it was n or more was made after savepoint
    /// n, so a rollback to savepoint n undoes it (a savepoint released since does not matter).
    pub fn newest_savepoint(&self) -> Option<u64> {
        self.lock().as_ref().and_then(|b| b.savepoints.last()).map(|s| s.serial)
    }

    /// The block's staged tables.
    pub fn staging(&self) -> &Arc<Staging> {
        &self.staging
    }

    /// Runs a transaction-control statement (None for any other statement): updates the block
    /// and answers; what is left to do with the staged tables goes to [`Self::complete`].
    pub fn control(&self, statement: &SluiceStatement) -> Option<(Result<StatementResult>, Then)> {
        let control = control_of(statement)?;
        Some(self.decide(control))
    }

    /// Does what a control statement left to do ([`Self::control`]) and gives its answer.
    pub async fn complete(
        &self,
        db: &Warehouse,
        result: Result<StatementResult>,
        then: Then,
    ) -> Result<StatementResult> {
        let done = match then {
            Then::Nothing => Ok(()),
            Then::Commit(isolation) => self.staging.commit(db, isolation).await,
            Then::Discard => {
                self.staging.discard(db).await;
                Ok(())
            }
            Then::RollbackTo(mark) => self.staging.rollback_to(db, &mark).await,
        };
        match (result, done) {
            (Ok(_), Err(e)) => {
                // A COMMIT that failed ended the block all the same (as in PostgreSQL); a failed
                // ROLLBACK TO aborts it.
                if let Some(block) = self.lock().as_mut() {
                    block.failed = true;
                }
                Err(e)
            }
            (result, _) => result,
        }
    }

    /// Updates the block's state for a control statement: its answer, and what to do then.
    fn decide(&self, control: Control) -> (Result<StatementResult>, Then) {
        let mut state = self.lock();
        let mut then = Then::Nothing;
        let result = match control {
            Control::Begin { read_only, isolation, tag } => {
                let read_only = read_only.unwrap_or_else(|| self.default_read_only());
                match state.as_mut() {
                    Some(block) if block.failed => return (Err(aborted()), Then::Nothing),
                    // BEGIN inside a multi-statement query makes its implicit transaction a block.
                    Some(block) if block.implicit => {
                        block.implicit = false;
                        block.read_only = read_only;
                        if let Some(isolation) = isolation {
                            if block.queried && isolation != block.isolation {
                                block.failed = true;
                                return (Err(isolation_too_late()), Then::Nothing);
                            }
                            block.isolation = isolation;
                        }
                    }
                    // PostgreSQL warns (25001) and stays in the block it is in.
                    Some(_) => self.warn("25001", "there is already a transaction in progress"),
                    None => {
                        let isolation = isolation.unwrap_or_else(|| self.default_isolation());
                        *state = Some(Block { read_only, isolation, ..Block::default() })
                    }
                }
                Ok(StatementResult::command(tag))
            }
            Control::Commit { chain } => {
                if state.as_ref().is_none_or(|b| b.implicit) {
                    self.warn("25P01", "there is no transaction in progress");
                }
                // COMMIT of an aborted block rolls it back, as PostgreSQL does.
                let failed = state.as_ref().is_some_and(|b| b.failed);
                let tag = if failed { "ROLLBACK" } else { "COMMIT" };
                let block = state.take();
                let isolation = block.as_ref().map_or_else(|| self.default_isolation(), |b| b.isolation);
                then = if failed { Then::Discard } else { Then::Commit(isolation) };
                if failed {
                    self.undo(block.as_ref().map_or(&[][..], |b| &b.temporaries));
                }
                let read_only = block.is_some_and(|b| b.read_only);
                if chain {
                    *state = Some(Block { read_only, isolation, ..Block::default() });
                }
                Ok(StatementResult::command(tag))
            }
            Control::Rollback { chain } => match state.as_mut() {
                Some(block) if block.writes > 0 => {
                    let writes = std::mem::take(&mut block.writes);
                    block.failed = true;
                    block.savepoints.clear();
                    Err(cannot_undo("ROLLBACK", writes))
                }
                _ => {
                    if state.as_ref().is_none_or(|b| b.implicit) {
                        self.warn("25P01", "there is no transaction in progress");
                    }
                    let block = state.take();
                    self.undo(block.as_ref().map_or(&[][..], |b| &b.temporaries));
                    let isolation = block.as_ref().map_or_else(|| self.default_isolation(), |b| b.isolation);
                    let read_only = block.is_some_and(|b| b.read_only);
                    if chain {
                        *state = Some(Block { read_only, isolation, ..Block::default() });
                    }
                    then = Then::Discard;
                    Ok(StatementResult::command("ROLLBACK"))
                }
            },
            Control::Savepoint(name) => match state.as_mut() {
                None => Err(outside_block("SAVEPOINT")),
                Some(block) if block.implicit => {
                    block.failed = true;
                    Err(outside_block("SAVEPOINT"))
                }
                Some(block) if block.failed => Err(aborted()),
                Some(block) => {
                    block.savepoints.push(Savepoint {
                        name,
                        serial: self.savepoints_made.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                        writes: block.writes,
                        owned_writes: block.owned_writes.len(),
                        created: self.staging.created_count(),
                        mark: self.staging.mark(),
                    });
                    Ok(StatementResult::command("SAVEPOINT"))
                }
            },
            Control::Release(name) => match state.as_mut() {
                None => Err(outside_block("RELEASE SAVEPOINT")),
                Some(block) if block.implicit => {
                    block.failed = true;
                    Err(outside_block("RELEASE SAVEPOINT"))
                }
                Some(block) if block.failed => Err(aborted()),
                Some(block) => match block.savepoints.iter().rposition(|s| s.name == name) {
                    Some(at) => {
                        block.savepoints.truncate(at);
                        Ok(StatementResult::command("RELEASE"))
                    }
                    None => {
                        block.failed = true;
                        Err(missing_savepoint(&name))
                    }
                },
            },
            Control::RollbackTo(name) => match state.as_mut() {
                None => Err(outside_block("ROLLBACK TO SAVEPOINT")),
                Some(block) if block.implicit => {
                    block.failed = true;
                    Err(outside_block("ROLLBACK TO SAVEPOINT"))
                }
                Some(block) => match block.savepoints.iter().rposition(|s| s.name == name) {
                    None => {
                        block.failed = true;
                        Err(missing_savepoint(&name))
                    }
                    Some(at) => {
                        let (before, owned_writes, created) =
                            block.savepoints.get(at).map_or((0, 0, 0), |s| (s.writes, s.owned_writes, s.created));
                        // Writes since the savepoint to relations created before it stay.
                        let kept = block.owned_writes.get(owned_writes..).unwrap_or_default();
                        let kept = kept.iter().filter(|w| w.outlives_rollback_to(at, created)).count();
                        if block.writes > before || kept > 0 {
                            let writes = block.writes - before + kept;
                            block.writes = 0;
                            block.failed = true;
                            block.savepoints.clear();
                            Err(cannot_undo("ROLLBACK TO SAVEPOINT", writes))
                        } else {
                            // The savepoint stays (PostgreSQL keeps it); the ones after it go.
                            block.savepoints.truncate(at + 1);
                            let (undone, kept) =
                                std::mem::take(&mut block.temporaries).into_iter().partition(|(_, depth)| *depth > at);
                            block.temporaries = kept;
                            self.undo(&undone);
                            block.failed = false;
                            block.owned_writes.truncate(owned_writes);
                            if let Some(savepoint) = block.savepoints.get(at) {
                                then = Then::RollbackTo(Box::new(savepoint.mark.clone()));
                            }
                            Ok(StatementResult::command("ROLLBACK"))
                        }
                    }
                },
            },
            Control::SetTransaction { read_only, isolation } => match state.as_mut() {
                Some(block) if block.failed => Err(aborted()),
                Some(block) => {
                    if let Some(isolation) = isolation.filter(|i| *i != block.isolation) {
                        // As PostgreSQL: the level is fixed by the first query, and savepoints
                        // share their block's.
                        if block.queried {
                            block.failed = true;
                            return (Err(isolation_too_late()), Then::Nothing);
                        }
                        if !block.savepoints.is_empty() {
                            block.failed = true;
                            return (
                                Err(Error::data(
                                    "25001",
                                    "SET TRANSACTION ISOLATION LEVEL must not be called in a subtransaction",
                                )),
                                Then::Nothing,
                            );
                        }
                        block.isolation = isolation;
                    }
                    if let Some(read_only) = read_only {
                        block.read_only = read_only;
                    }
                    Ok(StatementResult::command("SET"))
                }
                // PostgreSQL warns (25P01) and does nothing outside a block.
                None => {
                    self.warn("25P01", "SET TRANSACTION can only be used in transaction blocks");
                    Ok(StatementResult::command("SET"))
                }
            },
        };
        (result, then)
    }

    /// Starts the implicit transaction of a multi-statement query, unless a block is open: its
    /// statements stage their writes as a block's do, and [`Self::end_implicit`] commits them
    /// together (or drops them all after an error), as PostgreSQL runs such a query.
    pub fn begin_implicit(&self) {
        let mut state = self.lock();
        if state.is_none() {
            *state = Some(Block {
                implicit: true,
                read_only: self.default_read_only(),
                isolation: self.default_isolation(),
                ..Block::default()
            });
        }
    }

    /// Whether the session is in the implicit transaction of a multi-statement query.
    pub fn in_implicit(&self) -> bool {
        self.lock().as_ref().is_some_and(|b| b.implicit)
    }

    /// Ends the implicit transaction, if the query left one (a BEGIN in it made it a block, a
    /// COMMIT or ROLLBACK ended it): what to do with its staged writes.
    pub fn end_implicit(&self) -> Then {
        let mut state = self.lock();
        if !state.as_ref().is_some_and(|b| b.implicit) {
            return Then::Nothing;
        }
        match state.take() {
            Some(block) if block.failed => {
                self.undo(&block.temporaries);
                Then::Discard
            }
            Some(block) => Then::Commit(block.isolation),
            None => Then::Nothing,
        }
    }

    /// Keeps a warning for the client. A session that never takes them (the Rust API's) keeps
    /// the last [`WARNINGS_KEPT`] only.
    fn warn(&self, sqlstate: &'static str, message: &'static str) {
        let mut warnings = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if warnings.len() >= WARNINGS_KEPT {
            warnings.remove(0);
        }
        warnings.push((sqlstate, message));
    }

    /// The warnings the last statements gave (see [`TransactionBlock::warnings`]), oldest first.
    pub fn take_warnings(&self) -> Vec<(&'static str, &'static str)> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn undo(&self, temporaries: &[(TableName, usize)]) {
        let mut undone = self.undone.lock().unwrap_or_else(|p| p.into_inner());
        undone.extend(temporaries.iter().map(|(name, _)| name.clone()));
    }

    /// The temporary relations whose creation a rollback undid (for the session to drop).
    pub fn take_undone(&self) -> Vec<TableName> {
        std::mem::take(&mut *self.undone.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Records that the block created a temporary relation (a rollback drops it again).
    pub fn created_temporary(&self, name: TableName) {
        if let Some(block) = self.lock().as_mut() {
            let depth = block.savepoints.len();
            block.temporaries.push((name, depth));
        }
    }

    /// Whether a statement may run in the block: none but ROLLBACK in an aborted block (25P02),
    /// no write in a READ ONLY one (25006, which aborts the block).
    pub fn admit(&self, statement: &SluiceStatement) -> Result<()> {
        let writes = !crate::rights::reads_only(statement);
        // SET and SHOW take no snapshot in PostgreSQL: the isolation level may still change.
        let queries = !matches!(statement, SluiceStatement::Standard(s)
            if matches!(**s, Statement::Set(_) | Statement::ShowVariable { .. }));
        self.admit_kind(writes, queries, || crate::rights::command_name(statement))
    }

    /// [`Self::admit`] for a write that is not a statement of its own (COPY's rows, the Rust
    /// API's insert), named `what`.
    pub fn admit_write(&self, what: &str) -> Result<()> {
        self.admit_kind(true, true, || what.to_string())
    }

    fn admit_kind(&self, writes: bool, queries: bool, what: impl FnOnce() -> String) -> Result<()> {
        let mut state = self.lock();
        let Some(block) = state.as_mut() else {
            if writes && self.default_read_only() {
                return Err(read_only_refusal(&what()));
            }
            return Ok(());
        };
        if block.failed {
            return Err(aborted());
        }
        if writes && block.read_only {
            block.failed = true;
            return Err(read_only_refusal(&what()));
        }
        block.queried |= queries;
        Ok(())
    }

    /// Whether the block created the temporary relation `name` (and no rollback dropped it).
    pub fn created_temporary_relation(&self, name: &TableName) -> bool {
        self.lock().as_ref().is_some_and(|block| block.temporaries.iter().any(|(t, _)| t == name))
    }

    /// Records that a statement that commits at once wrote only to `name`, a temporary relation
    /// the block created (see [`Block::owned_writes`]).
    pub fn wrote_temporary(&self, name: &TableName) {
        if let Some(block) = self.lock().as_mut() {
            if let Some(depth) = block.temporaries.iter().find(|(t, _)| t == name).map(|(_, depth)| *depth) {
                block.owned_writes.push(OwnedWrite::Temporary(depth));
            }
        }
    }

    /// Records that a statement that commits at once wrote only to a table the block created,
    /// at `position` among those it created (see [`Block::owned_writes`]).
    pub fn wrote_created(&self, position: usize) {
        if let Some(block) = self.lock().as_mut() {
            block.owned_writes.push(OwnedWrite::Created(position));
        }
    }

    /// Records how a statement admitted by [`Self::admit`] ended: a failure aborts the block;
    /// a write that succeeded is one more that a rollback cannot undo.
    pub fn finished(&self, wrote: bool, succeeded: bool) {
        if let Some(block) = self.lock().as_mut() {
            if !succeeded {
                block.failed = true;
            } else if wrote {
                block.writes += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parser::parse_statement_text;

    /// Runs `sql` through the block as a session would: a control statement is handled, another
    /// is admitted and ends as `succeeds` says. Returns the SQLSTATE of a refusal, or the tag.
    fn run(block: &TransactionBlock, sql: &str, succeeds: bool) -> String {
        let statement = parse_statement_text(sql).unwrap();
        let outcome = match block.control(&statement) {
            Some((result, _)) => result,
            None => block.admit(&statement).map(|()| {
                block.finished(!stages(&statement), succeeds);
                StatementResult::command("RAN")
            }),
        };
        match outcome {
            Ok(StatementResult::Command { tag, .. }) => tag,
            Ok(_) => "ROWS".into(),
            Err(e) => e.sqlstate().to_string(),
        }
    }

    #[test]
    fn warnings_as_postgresql_gives_them_and_a_bounded_number_kept() {
        let block = TransactionBlock::default();
        run(&block, "COMMIT", true);
        run(&block, "BEGIN", true);
        run(&block, "BEGIN", true);
        run(&block, "COMMIT", true);
        let codes: Vec<&str> = block.take_warnings().iter().map(|(code, _)| *code).collect();
        assert_eq!(codes, ["25P01", "25001"]);
        for _ in 0..100 {
            run(&block, "ROLLBACK", true);
        }
        assert_eq!(block.take_warnings().len(), WARNINGS_KEPT);
        assert!(block.take_warnings().is_empty());
    }

    #[test]
    fn an_error_aborts_the_block_until_rollback() {
        let block = TransactionBlock::default();
        assert_eq!(run(&block, "BEGIN", true), "BEGIN");
        assert_eq!(run(&block, "SELECT 1 / 0", false), "RAN");
        assert_eq!(run(&block, "SELECT 1", true), "25P02");
        assert_eq!(run(&block, "SAVEPOINT a", true), "25P02");
        assert_eq!(run(&block, "COMMIT", true), "ROLLBACK");
        assert!(!block.in_block());
        assert_eq!(run(&block, "SELECT 1", true), "RAN");
    }

    #[test]
    fn a_rollback_that_would_undo_a_write_is_refused_once() {
        let block = TransactionBlock::default();
        run(&block, "START TRANSACTION", true);
        // Staged: a rollback drops it.
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "RAN");
        assert_eq!(run(&block, "CREATE TABLE u (a int)", true), "RAN");
        assert_eq!(run(&block, "CREATE INDEX ON t (a)", true), "RAN");
        // Committed when it ran: the rollback is refused.
        assert_eq!(run(&block, "ALTER SEQUENCE s RESTART", true), "RAN");
        assert_eq!(run(&block, "ROLLBACK", true), "0A000");
        assert_eq!(run(&block, "SELECT 1", true), "25P02");
        assert_eq!(run(&block, "ROLLBACK", true), "ROLLBACK");
        assert!(!block.in_block());
        // Nothing written: the rollback succeeds.
        run(&block, "BEGIN", true);
        run(&block, "SELECT 1", true);
        assert_eq!(run(&block, "ROLLBACK", true), "ROLLBACK");
    }

    #[test]
    fn savepoints_roll_back_errors_and_staged_writes_but_not_what_committed() {
        let block = TransactionBlock::default();
        assert_eq!(run(&block, "SAVEPOINT a", true), "25P01");
        run(&block, "BEGIN", true);
        run(&block, "SAVEPOINT a", true);
        run(&block, "SAVEPOINT B", true);
        assert_eq!(run(&block, "SELECT 1 / 0", false), "RAN");
        assert_eq!(run(&block, "ROLLBACK TO SAVEPOINT b", true), "ROLLBACK");
        assert_eq!(run(&block, "SELECT 1", true), "RAN");
        assert_eq!(run(&block, "RELEASE SAVEPOINT a", true), "RELEASE");
        assert_eq!(run(&block, "ROLLBACK TO SAVEPOINT a", true), "3B001");
        assert_eq!(run(&block, "ROLLBACK", true), "ROLLBACK");
        run(&block, "BEGIN", true);
        run(&block, "SAVEPOINT a", true);
        run(&block, "DELETE FROM t", true);
        assert_eq!(run(&block, "ROLLBACK TO a", true), "ROLLBACK");
        run(&block, "DROP TABLE t", true);
        assert_eq!(run(&block, "ROLLBACK TO a", true), "ROLLBACK");
        run(&block, "ALTER TABLE t ADD COLUMN b int", true);
        assert_eq!(run(&block, "ROLLBACK TO a", true), "ROLLBACK");
        run(&block, "ALTER SEQUENCE s RESTART", true);
        assert_eq!(run(&block, "ROLLBACK TO a", true), "0A000");
        assert_eq!(run(&block, "ROLLBACK", true), "ROLLBACK");
    }

    #[test]
    fn the_ddl_of_tables_views_schemas_and_indexes_stages_but_not_on_temporary_relations() {
        let stages_sql = |sql: &str| stages(&parse_statement_text(sql).unwrap());
        for sql in [
            "CREATE TABLE t (a int)",
            "CREATE TABLE t AS SELECT 1 AS a",
            "DROP TABLE t, u",
            "CREATE VIEW v AS SELECT 1",
            "DROP VIEW v",
            "CREATE SCHEMA s",
            "DROP SCHEMA s CASCADE",
            "ALTER TABLE t RENAME TO u",
            "CREATE SEQUENCE s",
            "DROP SEQUENCE s, r",
            "ALTER SEQUENCE s RENAME TO r",
            "ALTER TABLE t ADD COLUMN b int",
            "ALTER TABLE t RENAME TO u, ADD COLUMN b int",
            "CREATE INDEX ON t (a)",
            "DROP INDEX i",
            "COMMENT ON TABLE t IS 'x'",
        ] {
            assert!(stages_sql(sql), "{sql}");
        }
        for sql in [
            "CREATE TABLE t (a int) LOCATION '/somewhere'",
            "CREATE TEMP TABLE t (a int)",
            "DROP TABLE pg_temp_3.t",
            "ALTER TABLE pg_temp_3.t RENAME TO u",
            "ALTER TABLE pg_temp_3.t ADD COLUMN b int",
            "CREATE INDEX ON pg_temp_3.t (a)",
            "VACUUM t",
            "ALTER SEQUENCE s RESTART",
            "ALTER SEQUENCE s INCREMENT 2",
        ] {
            assert!(!stages_sql(sql), "{sql}");
        }
    }

    #[test]
    fn an_implicit_transaction_commits_unless_a_statement_failed() {
        let block = TransactionBlock::default();
        block.begin_implicit();
        assert!(block.in_block() && block.in_implicit());
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "RAN");
        assert_eq!(run(&block, "SAVEPOINT a", true), "25P01");
        assert!(matches!(block.end_implicit(), Then::Discard));
        assert!(!block.in_block());
        block.begin_implicit();
        run(&block, "INSERT INTO t VALUES (1)", true);
        assert!(matches!(block.end_implicit(), Then::Commit(_)));
        // BEGIN makes it a block that outlives the query.
        block.begin_implicit();
        assert_eq!(run(&block, "BEGIN", true), "BEGIN");
        assert!(!block.in_implicit());
        assert!(matches!(block.end_implicit(), Then::Nothing));
        assert!(block.in_block());
        assert_eq!(run(&block, "COMMIT", true), "COMMIT");
        // COMMIT inside the query ends it; what follows runs in a new one, or none.
        block.begin_implicit();
        assert_eq!(run(&block, "COMMIT", true), "COMMIT");
        assert!(!block.in_block());
        assert!(matches!(block.end_implicit(), Then::Nothing));
    }

    #[test]
    fn read_only_blocks_refuse_writes() {
        let block = TransactionBlock::default();
        assert_eq!(run(&block, "START TRANSACTION READ ONLY", true), "START TRANSACTION");
        assert_eq!(run(&block, "SELECT 1", true), "RAN");
        assert_eq!(run(&block, "CREATE TABLE t (a int)", true), "25006");
        assert_eq!(run(&block, "SELECT 1", true), "25P02");
        run(&block, "ROLLBACK", true);
        run(&block, "BEGIN", true);
        assert_eq!(run(&block, "SET TRANSACTION READ ONLY", true), "SET");
        assert_eq!(run(&block, "UPDATE t SET a = 1", true), "25006");
        assert_eq!(run(&block, "ROLLBACK", true), "ROLLBACK");
        // A write outside any block is not the block's business...
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "RAN");
        // ... unless the session is read-only by default.
        block.set_default_read_only(true);
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "25006");
        assert_eq!(run(&block, "SELECT 1", true), "RAN");
        run(&block, "BEGIN", true);
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "25006");
        run(&block, "ROLLBACK", true);
        run(&block, "START TRANSACTION READ WRITE", true);
        assert_eq!(run(&block, "INSERT INTO t VALUES (1)", true), "RAN");
    }
}
