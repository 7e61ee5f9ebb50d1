//! The tables a transaction block has touched, each through a staged handle (see
//! [`sluice_storage::stage`]): the block's statements read the table at the snapshot they first
//! saw it at plus the block's own writes, and write by staging. COMMIT commits each written
//! table's staged changes as one commit and tells the writer's listeners once per table; ROLLBACK
//! deletes the files the block wrote and forgets the handles.
//!
//! Which statements stage: queries and DML (INSERT, UPDATE, DELETE, MERGE, TRUNCATE, COPY,
//! `Database::insert`), the DDL whose effects are catalog changes and new tables: CREATE and
//! DROP of tables, views and schemas, CREATE TABLE AS, ALTER ... RENAME TO ([`crate::catalog::changes`]: the
//! block's own view of the catalog, committed at COMMIT), and ALTER TABLE, CREATE INDEX and DROP
//! INDEX of tables: their schema and property changes are staged commits of the table (a key or
//! index is built in the block's copy of the key index), committed with the block's rows; they
//! depend on every row, so another writer's commit to the table in between is 40001 at COMMIT.
//! Other statements in a block (OPTIMIZE, streaming statements, ALTER TABLE of a streaming table
//! or materialized view) commit when they return, as
//! outside a block, and [`crate::transaction`] refuses a ROLLBACK that would have to undo one,
//! except on a table the block created (nobody else sees it, and the rollback deletes it). Such
//! a statement may not touch a table the block has written (it would not see the staged rows,
//! and its commit would make the block's conflict at COMMIT): 0A000.
//!
//! Isolation ([`isolation::Isolation`]): at REPEATABLE READ and SERIALIZABLE the block reads
//! every table as of one moment of the commit clock, taken when it first touched a table. At
//! READ COMMITTED (the default, as in PostgreSQL) each query or DML statement forgets the tables
//! the block has only read ([`Staging::begin_statement`]), so it reads them anew at its own
//! moment; a table the block has written stays on the version its writes were staged on. An
//! UPDATE or DELETE of a keyed table locks the keys of the rows it changes
//! ([`crate::row_locks`]); when it took a row from a block that held it, that block has ended, and
//! the statement runs again on the table's latest version ([`Staging::refresh_for_rerun`]: a
//! table the block wrote in one earlier statement has its staged commit moved onto that version,
//! as at COMMIT; one written in more than one is 40001). Locks go when the block ends.
//!
//! Keys: a keyed table written in a block gets the block's own copy of its key index (a
//! copy-on-write one: it costs what the block writes), caught up with the staged snapshot, so a
//! duplicate is refused (23505) by the statement that makes it and ON CONFLICT sees the block's
//! rows. A keyed write depends on the rows of its keys; when another writer committed to the
//! table since the block first read it, COMMIT resolves the conflict row by row: if the others
//! changed other rows and the block read the table only through key lookups, the block's commit
//! is moved onto their latest version (both deletion vectors merged,
//! [`sluice_storage::stage::Rebase`]) and the keys it inserts are checked against that version
//! (23505 if another transaction committed the key first). A row both changed, a file another
//! writer rewrote, or a block that scanned the table (its reads depend on every row) is 40001,
//! nothing applied.
//!
//! Several tables: COMMIT writes a record of the transaction under `_sluice/transactions/`, then
//! commits the tables side by side (under their key locks and the warehouse's commit gate, so no
//! statement of this process sees part of it), each commit naming the transaction; should a
//! later table lose a conflict, the earlier tables' commits are undone by compensating commits
//! before COMMIT reports 40001. A record found when the warehouse opens (a crash in between) is
//! completed or undone the same way ([`recover`]). Outside readers of the Delta logs may see one
//! table's commit without the other's until then. A block with catalog changes commits them
//! last, as a catalog version naming the transaction: that version is the commit point (a
//! record whose catalog version is missing is undone, whatever tables it reached). In a local
//! warehouse with its journal, a record is written into a file that the commit empties after its
//! last table commit and a later commit reuses (`crate::record_files`): creating and deleting a
//! file per commit costs more, on ext4 without a journal most of all.

pub mod isolation;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use sluice_storage::commit::CommitOutcome;
use sluice_storage::stage::Rebase;
use sluice_storage::table::Table;

use crate::catalog::changes::CatalogChanges;
use crate::catalog::{CatalogState, TableEntry};
use crate::change::Operation;
use crate::error::{Error, Result};
use crate::keys::TableKeys;
use crate::warehouse::Warehouse;

/// How the running statement uses the block's staged tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// No block: tables are read and written directly.
    #[default]
    Off,
    /// A query or DML in a block: through the staged handles.
    Stage,
    /// Another statement in a block: directly, but not on a table the block wrote.
    Immediate,
}

/// A session's staged tables.
#[derive(Debug, Default)]
pub struct Staging {
    state: Mutex<State>,
    /// The block's catalog changes (its DDL).
    catalog: Mutex<CatalogChanges>,
    /// What the block's foreign key checks found in other sessions' rows, checked again at
    /// COMMIT.
    relied: Mutex<Vec<Reliance>>,
    /// The block's id among the holders of row locks ([`crate::row_locks`]).
    owner: std::sync::OnceLock<u64>,
}

/// What a foreign key check in a block relied on in rows the block did not write. Other
/// sessions' writes are checked against the block's only once it commits, so COMMIT checks
/// these again, under the key locks of the tables they name: a change another session committed
/// in between is 40001, nothing applied.
#[derive(Debug, Clone)]
pub enum Reliance {
    /// Keys (in the row format of `parent`'s key on `columns`) that rows the block inserted
    /// reference: they must still be there.
    Present { parent: String, columns: Vec<String>, keys: Vec<Vec<u8>> },
    /// The block removed keys of a table that `child` references: nobody may have committed to
    /// `child` since `version` (the version the block read it at), since a row added there
    /// could reference them.
    Unchanged { child: String, version: u64 },
    /// The block read `table` at `version` with `SELECT ... FOR UPDATE | SHARE` (PostgreSQL's
    /// row locks): nobody may have committed to it since. Where PostgreSQL would make the other
    /// writer wait, Sluice lets it commit and fails this block's COMMIT (40001), at the grain of
    /// the table rather than of its rows.
    Locked { table: String, version: u64 },
    /// A serializable block read or wrote `table` at `version`
    /// ([`isolation::Isolation::Serializable`]): nobody may have committed to it since.
    Read { table: String, version: u64 },
}

#[derive(Debug, Default)]
struct State {
    mode: Mode,
    /// By table id.
    tables: BTreeMap<String, StagedTable>,
    /// The commit clock when the block first read or wrote a table: every table it reads is
    /// read as of that moment (one snapshot for the block, as PostgreSQL's REPEATABLE READ). At
    /// READ COMMITTED, the moment the running statement first read a table.
    clock: Option<u64>,
    /// The block is READ COMMITTED: each statement reads the tables the block has not written
    /// anew, and UPDATE and DELETE lock the rows they change.
    read_committed: bool,
}

struct StagedTable {
    id: String,
    /// The table's qualified name, for the writer's listeners.
    key: String,
    real: Arc<Table>,
    staged: Arc<Table>,
    /// The block's copy of the table's key index, once it used one.
    keys: Option<Arc<tokio::sync::Mutex<TableKeys>>>,
}

impl std::fmt::Debug for StagedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedTable").field("key", &self.key).field("keys", &self.keys.is_some()).finish()
    }
}

/// The staged commits each table held at a savepoint.
#[derive(Debug, Clone, Default)]
pub struct Mark {
    tables: BTreeMap<String, usize>,
    catalog: CatalogChanges,
}

fn lock(staging: &Staging) -> std::sync::MutexGuard<'_, State> {
    staging.state.lock().unwrap_or_else(|p| p.into_inner())
}

/// A READ COMMITTED statement's start: the tables the block has not written are forgotten, so
/// that the statement reads them anew, at a new moment of the commit clock.
fn forget_reads(state: &mut State) {
    state.clock = None;
    state.tables.retain(|_, t| t.staged.has_staged_commits());
}

fn lock_catalog(staging: &Staging) -> std::sync::MutexGuard<'_, CatalogChanges> {
    staging.catalog.lock().unwrap_or_else(|p| p.into_inner())
}

/// Deletes the folders of tables a block created that will never be committed.
async fn delete_created(db: &Warehouse, tables: Vec<TableEntry>) {
    for entry in tables {
        db.forget_table(&entry.id);
        if let Err(e) = db.delete_table_files(&entry).await {
            tracing::warn!(
                table = entry.qualified_name(),
                "the folder of a table a rolled-back transaction created stays: {e}"
            );
        }
    }
}

/// The change a table's staged operations make, for the listeners.
fn operation_of(table: &Table) -> Operation {
    let operations = table.staged_operations();
    let all = |name: &str| operations.iter().all(|o| o == name);
    // ALTER TABLE and indexes change the schema or properties, no row.
    if !table.stage_changes_files() {
        Operation::Metadata
    } else if all("WRITE") {
        Operation::Write
    } else if all("COPY") || operations.iter().all(|o| o == "WRITE" || o == "COPY") {
        Operation::Copy
    } else if all("DELETE") {
        Operation::Delete
    } else if all("UPDATE") {
        Operation::Update
    } else if all("TRUNCATE") {
        Operation::Truncate
    } else {
        Operation::Merge
    }
}

impl Staging {
    /// Sets how the next statement uses the staged tables.
    pub fn set_mode(&self, mode: Mode) {
        lock(self).mode = mode;
    }

    /// Sets how the next statement uses the staged tables, in a block of `isolation`: at READ
    /// COMMITTED, a query or DML reads the tables the block has not written as of its own start.
    pub fn begin_statement(&self, mode: Mode, isolation: isolation::Isolation) {
        let mut state = lock(self);
        state.mode = mode;
        state.read_committed = isolation == isolation::Isolation::ReadCommitted;
        if mode == Mode::Stage && state.read_committed {
            forget_reads(&mut state);
        }
    }

    /// Whether the running statement is a READ COMMITTED block's query or DML.
    pub fn read_committed(&self) -> bool {
        let state = lock(self);
        state.read_committed && state.mode == Mode::Stage
    }

    /// Whether the running statement is outside a block (autocommit).
    pub fn outside_block(&self) -> bool {
        lock(self).mode == Mode::Off
    }

    /// The block's id among the holders of row locks.
    pub fn owner(&self) -> u64 {
        *self.owner.get_or_init(crate::row_locks::new_owner)
    }

    /// Releases the row locks the block holds ([`crate::row_locks`]).
    pub fn release_rows(&self, db: &Warehouse) {
        if let Some(owner) = self.owner.get() {
            db.row_locks.release(*owner);
        }
    }

    /// Whether another transaction committed a change of any of `rows` (by file, as a statement
    /// read them through the block's handle on table `id`) after the version the block reads the
    /// table at: a READ COMMITTED statement that then locked them without waiting read them
    /// before their last holder committed, and must run again.
    pub async fn rows_changed_since_read(
        &self,
        id: &str,
        rows: &[(Arc<sluice_storage::actions::Add>, roaring::RoaringTreemap)],
    ) -> Result<bool> {
        let Some((real, staged)) = lock(self).tables.get(id).map(|t| (t.real.clone(), t.staged.clone())) else {
            return Ok(false);
        };
        let Some(base) = staged.stage_base() else { return Ok(false) };
        // This process's commits: the ones whose writers held the row locks.
        let latest = real.cached_snapshot();
        if latest.version() <= base.version() {
            return Ok(false);
        }
        for (add, wanted) in rows {
            let Some(then) = base.file_by_path(&add.path) else { continue }; // the block's own file
            let Some(now) = latest.file_by_path(&add.path) else { return Ok(true) }; // rewritten
            if now.key() == then.key() {
                continue;
            }
            let Some(dv) = &now.deletion_vector else { continue };
            let deleted = sluice_storage::scan::read_dv(real.store(), dv, &now.path).await?;
            if !(wanted & &deleted).is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Prepares a READ COMMITTED statement to run again after it took a row lock from another
    /// block or found its rows changed ([`Staging::rows_changed_since_read`]): the tables
    /// the block has not written are read anew, and the table with id `id` moves to its latest
    /// version with the block's writes to it (40001 when they cannot move: a row another
    /// transaction changed too, or writes of more than one statement).
    pub async fn refresh_for_rerun(&self, id: &str) -> Result<()> {
        let staged = {
            let mut state = lock(self);
            forget_reads(&mut state);
            state.tables.get(id).map(|t| (t.real.clone(), t.staged.clone(), t.key.clone()))
        };
        let Some((real, staged, name)) = staged else { return Ok(()) };
        let latest = real.snapshot().await?;
        let refused = |why: &str| {
            Err(Error::SerializationFailure(format!(
                "could not serialize access due to concurrent update of {name}: rows the statement changes \
                 were changed by another transaction since it read them, and {why}"
            )))
        };
        if staged.stage_base_version().is_some_and(|base| base >= latest.version()) {
            return Ok(());
        }
        if staged.stage_mark() > 1 {
            return refused("the block wrote the table in more than one statement");
        }
        match real.rebase_stage(&staged, &latest).await? {
            Rebase::Rebased { .. } => Ok(()),
            Rebase::Unchanged => refused("the block's writes to the table cannot move to its latest version"),
            Rebase::Conflict(conflict) => refused(&format!("a row the block changed changed too ({conflict})")),
        }
    }

    /// The handle the running statement uses for `entry`'s table (`real`: the shared one).
    pub async fn table_for(&self, db: &Warehouse, entry: &TableEntry, real: Arc<Table>) -> Result<Arc<Table>> {
        {
            let state = lock(self);
            match state.mode {
                Mode::Off => return Ok(real),
                Mode::Immediate => {
                    return match state.tables.get(&entry.id) {
                        Some(t) if t.staged.has_staged_commits() => Err(Error::NotSupported(format!(
                            "this statement inside a transaction block on {}, which the block has written to \
                             (DDL and maintenance commit at once and would not see the block's rows; run it \
                             before the writes or after COMMIT)",
                            entry.qualified_name()
                        ))),
                        _ => Ok(real),
                    };
                }
                Mode::Stage => {
                    if let Some(t) = state.tables.get(&entry.id) {
                        return Ok(t.staged.clone());
                    }
                }
            }
        }
        // The block reads every table as of one moment of the commit clock, taken when it first
        // touched a table (under the commit gate, which a commit to several tables holds, when
        // a statement's snapshot is taken: crate::sql::catalog_provider::statement_snapshot).
        let clock = *lock(self).clock.get_or_insert_with(sluice_storage::table::commit_clock);
        // A table the block created, or a temporary one (the session's alone), is read at its
        // latest version, which may hold rows a statement committed to it at once (CREATE TABLE
        // AS): no other session writes it.
        let created = lock_catalog(self).created_tables().iter().any(|t| t.id == entry.id)
            || crate::catalog::is_temporary_schema(&entry.schema);
        let latest = if created { Some(real.snapshot().await?) } else { real.snapshot_as_of_clock(clock).await? };
        let Some(latest) = latest else {
            return Err(Error::SerializationFailure(format!(
                "could not serialize access: {} changed too often since the transaction's snapshot",
                entry.qualified_name()
            )));
        };
        let current = real.cached_snapshot().version() == latest.version();
        // A keyed table: the block's copy of its index is taken with the snapshot it starts
        // from, as the index's last lock holder published them, or under the lock if no writer
        // holds it (never waiting: a statement's snapshot is taken under the commit gate, which
        // such a writer may wait for), so that its key lookups neither wait for nor scan past
        // other writers' commits. Otherwise (or when the block's snapshot is older than the
        // table's latest) its first write makes the copy, caught up with the block's snapshot.
        let keyed = !crate::keys::unique_defs(latest.configuration()).is_empty();
        let (staged, keys) = if !keyed || !current {
            (Arc::new(real.staged_on(latest)), None)
        } else if let Some(published) = db.keys.published_copy(&entry.id, latest.version(), false) {
            let (snapshot, copy) = published?;
            (Arc::new(real.staged_on(snapshot)), Some(copy))
        } else if let Some(guard) = db.keys.try_lock(&entry.id, &real).await {
            let guard = guard?;
            let copy = guard.private_copy()?;
            (Arc::new(real.staged_on(guard.snapshot().clone())), Some(copy))
        } else if let Some(published) = db.keys.published_copy(&entry.id, latest.version(), true) {
            // A writer holds the index and has not published its commit: the block starts
            // before that commit (it is not acknowledged yet).
            let (snapshot, copy) = published?;
            (Arc::new(real.staged_on(snapshot)), Some(copy))
        } else {
            (Arc::new(real.staged_on(latest)), None)
        };
        let mut state = lock(self);
        let table = state.tables.entry(entry.id.clone()).or_insert(StagedTable {
            id: entry.id.clone(),
            key: entry.qualified_name(),
            real,
            staged,
            keys,
        });
        Ok(table.staged.clone())
    }

    /// The block's copy of the key index of a staged table (made from the shared one).
    pub async fn keys_of(&self, db: &Warehouse, id: &str) -> Result<Arc<tokio::sync::Mutex<TableKeys>>> {
        if let Some(cell) = lock(self).tables.get(id).and_then(|t| t.keys.clone()) {
            return Ok(cell);
        }
        let copy = db.keys.private_copy(id).await?;
        let mut state = lock(self);
        match state.tables.get_mut(id) {
            Some(table) => Ok(table.keys.get_or_insert(copy).clone()),
            None => Err(Error::Internal(format!("table {id} is not staged in this transaction"))),
        }
    }

    /// The block's staged handle on the table with this id, if the block has touched it.
    pub fn staged_handle(&self, id: &str) -> Option<Arc<Table>> {
        lock(self).tables.get(id).map(|t| t.staged.clone())
    }

    /// The block's copy of a table's key index, if it made one.
    pub fn existing_keys(&self, id: &str) -> Option<Arc<tokio::sync::Mutex<TableKeys>>> {
        lock(self).tables.get(id).and_then(|t| t.keys.clone())
    }

    /// Refuses a block that staged more than `limit` bytes of data files (54000): the statement
    /// that went past it fails, which aborts the block; nothing is committed.
    pub fn check_size(&self, limit: u64) -> Result<()> {
        let staged: u64 = lock(self).tables.values().map(|t| t.staged.staged_bytes()).sum();
        if staged > limit {
            return Err(Error::data(
                "54000",
                format!(
                    "the transaction holds {staged} bytes of staged data, more than the limit of {limit} bytes \
                     (DatabaseOptions::transaction_bytes_max): commit in smaller transactions"
                ),
            ));
        }
        Ok(())
    }

    /// Whether the block holds writes (rows or catalog changes).
    pub fn has_writes(&self) -> bool {
        lock(self).tables.values().any(|t| t.staged.has_staged_commits()) || !lock_catalog(self).is_empty()
    }

    /// Whether the block has staged writes to the table with this id.
    pub fn has_writes_on(&self, id: &str) -> bool {
        lock(self).tables.get(id).is_some_and(|t| t.staged.has_staged_commits())
    }

    /// The catalog as the block sees it: what others committed, with the block's changes over it.
    pub fn catalog_view(&self, catalog: &crate::catalog::Catalog) -> Arc<CatalogState> {
        catalog.current_with(&lock_catalog(self))
    }

    /// Whether the running statement's catalog changes are held by the block until COMMIT.
    pub fn holds_catalog(&self) -> bool {
        lock(self).mode == Mode::Stage
    }

    /// Changes the catalog for the running statement: in the block's view when it is a
    /// statement the block stages (and, for one that commits at once, when it changes only
    /// tables the block created), else committed now. Returns whether the block holds the change.
    pub async fn update_catalog<T>(
        &self,
        catalog: &crate::catalog::Catalog,
        change: impl Fn(&mut CatalogState) -> Result<T>,
    ) -> Result<(bool, T)> {
        let mode = lock(self).mode;
        match mode {
            Mode::Off => catalog.update(change).await.map(|(_, value)| (false, value)),
            Mode::Stage => catalog.update_staged(&self.catalog, false, change).await,
            Mode::Immediate => catalog.update_staged(&self.catalog, true, change).await,
        }
    }

    /// Notes a table (a managed one) whose folder the block created: a rollback deletes it.
    pub fn table_created(&self, entry: TableEntry) {
        lock_catalog(self).created(entry);
    }

    /// Notes a table the block dropped: its files go at COMMIT.
    pub fn table_dropped(&self, entry: TableEntry) {
        lock_catalog(self).dropped(entry);
    }

    /// Where a table the block created stands among those it created (None: it did not create it).
    pub fn created_position(&self, id: &str) -> Option<usize> {
        lock_catalog(self).created_position(id)
    }

    /// How many tables the block has created.
    pub fn created_count(&self) -> usize {
        lock_catalog(self).created_count()
    }

    /// A savepoint's mark.
    pub fn mark(&self) -> Mark {
        Mark {
            tables: lock(self).tables.iter().map(|(id, t)| (id.clone(), t.staged.stage_mark())).collect(),
            catalog: lock_catalog(self).clone(),
        }
    }

    /// Undoes what the block staged after `mark` (ROLLBACK TO SAVEPOINT).
    pub async fn rollback_to(&self, db: &Warehouse, mark: &Mark) -> Result<()> {
        let (dropped, kept): (Vec<StagedTable>, Vec<(Arc<Table>, usize)>) = {
            let mut state = lock(self);
            let tables = std::mem::take(&mut state.tables);
            let mut dropped = Vec::new();
            let mut kept = Vec::new();
            for (id, mut table) in tables {
                match mark.tables.get(&id) {
                    Some(&at) => {
                        // The copy of the index may be past the mark: the next use makes another.
                        table.keys = None;
                        kept.push((table.staged.clone(), at));
                        state.tables.insert(id, table);
                    }
                    None => dropped.push(table),
                }
            }
            (dropped, kept)
        };
        for table in dropped {
            table.staged.discard_stage().await;
        }
        for (staged, at) in kept {
            staged.rollback_stage_to(at).await?;
        }
        let undone = {
            let mut catalog = lock_catalog(self);
            let undone = catalog.created_since(&mark.catalog);
            *catalog = mark.catalog.clone();
            undone
        };
        delete_created(db, undone).await;
        Ok(())
    }

    /// Records what a foreign key check relied on (see [`Reliance`]).
    pub fn rely(&self, reliance: Reliance) {
        self.relied.lock().unwrap_or_else(|p| p.into_inner()).push(reliance);
    }

    /// Forgets every staged table, deleting the files the block wrote (ROLLBACK, or a session
    /// that ends in a block).
    pub async fn discard(&self, db: &Warehouse) {
        self.release_rows(db);
        self.relied.lock().unwrap_or_else(|p| p.into_inner()).clear();
        lock(self).clock = None;
        let tables = std::mem::take(&mut lock(self).tables);
        for table in tables.into_values() {
            table.staged.discard_stage().await;
        }
        let catalog = std::mem::take(&mut *lock_catalog(self));
        delete_created(db, catalog.created_tables().to_vec()).await;
    }

    /// Commits the block's writes (see the module docs); the staged tables are forgotten
    /// whatever the outcome.
    pub async fn commit(&self, db: &Warehouse, isolation: isolation::Isolation) -> Result<()> {
        // The block's row locks go when it ends, whatever the outcome (once its commits are
        // visible: a waiter then reads them).
        struct Release<'a>(&'a Staging, &'a Warehouse);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release_rows(self.1);
            }
        }
        let _release = Release(self, db);
        lock(self).clock = None;
        let tables: Vec<(String, StagedTable)> = std::mem::take(&mut lock(self).tables).into_iter().collect();
        let catalog = std::mem::take(&mut *lock_catalog(self));
        let mut relied = std::mem::take(&mut *self.relied.lock().unwrap_or_else(|p| p.into_inner()));
        let serializable = isolation == isolation::Isolation::Serializable;
        if serializable {
            // Every table the block touched, but those nobody else writes (created by the block,
            // temporary).
            let state = db.catalog.current();
            for (id, table) in &tables {
                let own = catalog.created_tables().iter().any(|t| &t.id == id)
                    || state.table_by_id(id).is_none_or(|t| crate::catalog::is_temporary_schema(&t.schema));
                if let (false, Some(version)) = (own, table.staged.stage_base_version()) {
                    relied.push(Reliance::Read { table: id.clone(), version });
                }
            }
        }
        let (written, dropped): (Vec<_>, Vec<_>) = tables
            .into_iter()
            .filter(|(_, t): &(String, StagedTable)| t.staged.has_staged_commits())
            .partition(|(id, _)| !catalog.drops_table(id));
        // Rows written to a table the block then dropped go with it.
        for (_, table) in &dropped {
            table.staged.discard_stage().await;
        }
        // A block that writes nothing is serializable at its snapshot: the writers it might
        // conflict with were checked and committed one at a time.
        if written.is_empty() && catalog.is_empty() {
            return Ok(());
        }
        // Serializable commits are checked and made one at a time, so that two of them cannot
        // each miss the other's commit.
        let _serial = if serializable { Some(db.serializable_commits.lock().await) } else { None };
        let held = catalog.changes_catalog().then_some(&catalog);
        let committed = match commit_tables(db, &written, held, &relied).await {
            Ok(committed) => committed,
            Err(e) => {
                delete_created(db, catalog.created_tables().to_vec()).await;
                return Err(e);
            }
        };
        for flow in catalog.flows_removed() {
            db.hooks.flow_dropped(&flow);
        }
        for entry in catalog.folders_freed() {
            db.forget_table(&entry.id);
            if let Err(e) = db.delete_table_files(&entry).await {
                tracing::warn!(table = entry.qualified_name(), "the folder of a dropped table stays: {e}");
            }
        }
        // The tables' names as committed (the block may have renamed one it wrote).
        let names = db.catalog.current();
        let mut first_error = None;
        for (table, version) in committed {
            let operation = operation_of(&table.staged);
            let name = names
                .tables
                .values()
                .find(|t| t.id == table.id)
                .map_or_else(|| table.key.clone(), |t| t.qualified_name());
            let change = crate::change::Change { table: name, version, operation, rows: None };
            if let Err(e) = db.writer.publish(change).await {
                first_error.get_or_insert(e);
            }
        }
        // The materialized views the block created are built now, from their inputs as
        // committed (a view without a state checkpoint is built when first loaded anyway: this
        // spares the first reader the wait). A failure is the view's, shown in `sluice.views`.
        for created in catalog.created_tables() {
            let Some(entry) = names.table_by_id(&created.id) else { continue };
            if entry.kind == crate::catalog::TableKind::MaterializedView {
                if let Err(e) = db.hooks.view_rows(entry).await {
                    tracing::warn!(view = entry.qualified_name(), "building a materialized view after COMMIT: {e}");
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Commits each written table's staged changes (under the key locks of the keyed ones, and for
/// several tables, or tables and `catalog` changes, under the commit gate with a warehouse
/// record), then the catalog changes; returns the tables' versions.
async fn commit_tables<'a>(
    db: &Warehouse,
    written: &'a [(String, StagedTable)],
    catalog: Option<&CatalogChanges>,
    relied: &[Reliance],
) -> Result<Vec<(&'a StagedTable, u64)>> {
    // The key locks of the keyed tables and of the tables whose keys the block's rows reference,
    // in id order (other writers take theirs in that order too: no cycle), held until each
    // index has caught up with its commit.
    let mut ids: Vec<(String, Arc<Table>)> =
        written.iter().filter(|(_, t)| t.keys.is_some()).map(|(id, t)| (id.clone(), t.real.clone())).collect();
    let state = db.catalog.current();
    for reliance in relied {
        let Reliance::Present { parent, .. } = reliance else { continue };
        if ids.iter().any(|(id, _)| id == parent) || written.iter().any(|(id, _)| id == parent) {
            continue;
        }
        // A parent dropped meanwhile has none of the keys: the check below fails.
        if let Some(entry) = state.table_by_id(parent) {
            ids.push((parent.clone(), db.open_table(entry).await?));
        }
    }
    ids.sort_by(|a, b| a.0.cmp(&b.0));
    let mut guards = Vec::new();
    for (id, real) in &ids {
        guards.push((id.clone(), db.keys.lock(id, real).await?));
    }
    if let Err(error) = check_reliances(db, written, &guards, relied).await {
        for (_, table) in written {
            table.staged.discard_stage().await;
        }
        return Err(error);
    }
    // Row-level conflict resolution: a keyed table that others committed to since the block
    // first read it gets its commit moved onto their latest version when they changed other
    // rows, checked against that version's keys (see sluice_storage::stage::Rebase).
    for (id, table) in written.iter().filter(|(_, t)| t.keys.is_some()) {
        let Some((_, guard)) = guards.iter().find(|(g, _)| g == id) else { continue };
        let latest = guard.snapshot().clone();
        let moved = match table.real.rebase_stage(&table.staged, &latest).await {
            Ok(Rebase::Unchanged) => continue,
            Ok(Rebase::Rebased { deleted }) => {
                // The data files the stage adds: those of its snapshot (now built on `latest`)
                // that `latest` has under no path. The diff of the two related persistent sets
                // costs the changes, not the table's file count.
                let added: HashSet<String> = {
                    let ours = table.staged.snapshot().await?;
                    let changes = ours.file_set().changes_since(latest.file_set());
                    changes
                        .added
                        .iter()
                        .filter(|f| latest.file_by_path(&f.path).is_none())
                        .map(|f| f.path.clone())
                        .collect()
                };
                match &table.keys {
                    Some(cell) => cell.lock().await.check_moved(guard, &table.key, &added, &deleted),
                    None => Ok(()),
                }
            }
            Ok(Rebase::Conflict(conflict)) => Err(Error::SerializationFailure(format!(
                "could not serialize access due to a concurrent update of {}: {conflict}",
                table.key
            ))),
            Err(e) => Err(e.into()),
        };
        if let Err(error) = moved {
            tracing::debug!(table = id, "a transaction's commit could not be moved past a concurrent one: {error}");
            for (_, table) in written {
                table.staged.discard_stage().await;
            }
            return Err(error);
        }
    }
    let record = Record {
        id: uuid::Uuid::new_v4().to_string(),
        catalog: catalog.map(|_| db.catalog.persisted_version()),
        tables: written
            .iter()
            .map(|(id, t)| RecordTable {
                id: id.clone(),
                name: t.key.clone(),
                base: t.staged.stage_base_version().unwrap_or(0),
            })
            .collect(),
    };
    let several = written.len() + usize::from(catalog.is_some()) > 1;
    let gate = if several { Some(db.commit_gate.write().await) } else { None };
    let record_file = if several { Some(record.write(db).await?) } else { None };
    let mut committed: Vec<(&StagedTable, u64)> = Vec::new();
    let mut checkpoints = Vec::new();
    let mut failure = None;
    // The tables commit side by side, so that their log entries share the journal's syncs
    // (sluice_storage::journal); if one fails, those that committed are undone below.
    let id = record.id.as_str();
    let outcomes = futures::future::join_all(
        written.iter().map(|(_, table)| async move { (table, table.real.commit_staged(&table.staged, id).await) }),
    )
    .await;
    for (table, outcome) in outcomes {
        match outcome {
            Ok(Some((CommitOutcome::Committed(c), due))) => {
                committed.push((table, c.version));
                checkpoints.extend(due.map(|due| (table, due)));
            }
            Ok(None) => {}
            Ok(Some((CommitOutcome::Conflict(conflict), _))) => {
                failure.get_or_insert(Error::SerializationFailure(format!(
                    "could not serialize access due to a concurrent update of {}: {conflict}",
                    table.key
                )));
            }
            Err(e) => {
                failure.get_or_insert(e.into());
            }
        }
    }
    if let (None, Some(changes)) = (&failure, catalog) {
        // The commit point of a transaction with DDL (see the module docs).
        if let Err(e) = db.catalog.commit_staged(changes, &record.id).await {
            failure = Some(e);
        }
    }
    if let Some(error) = failure {
        // The files of a commit that was undone stay (the log's history names them; VACUUM
        // deletes them in time); the others' are deleted.
        for (_, table) in written {
            if !committed.iter().any(|(c, _)| std::ptr::eq(*c, table)) {
                table.staged.discard_stage().await;
            }
        }
        for (table, version) in &committed {
            if let Err(e) = table.real.revert_version(*version).await {
                tracing::error!(table = table.key, version, "a partly committed transaction could not be undone: {e}");
                return Err(error);
            }
        }
        if let Some(file) = record_file {
            file.done(db).await;
        }
        return Err(error);
    }
    if let Some(file) = record_file {
        file.done(db).await;
    }
    drop(gate);
    for (_, guard) in guards {
        if let Err(e) = guard.committed().await {
            tracing::warn!("a key index did not catch up with a transaction's commit: {e}");
        }
    }
    // Checkpoints once the key locks are free: the next commits need not wait for them.
    for (table, due) in checkpoints {
        table.real.checkpoint_committed(due).await;
    }
    Ok(committed)
}

/// Checks what the block's foreign key checks relied on (see [`Reliance`]), under the key locks
/// `guards` (by table id), before anything commits: 40001 if another session changed it.
async fn check_reliances(
    db: &Warehouse,
    written: &[(String, StagedTable)],
    guards: &[(String, crate::keys::KeyGuard)],
    relied: &[Reliance],
) -> Result<()> {
    let state = db.catalog.current();
    for reliance in relied {
        match reliance {
            Reliance::Present { parent, columns, keys } => {
                let name = state.table_by_id(parent).map_or_else(|| parent.clone(), |t| t.qualified_name());
                let gone = || {
                    Error::SerializationFailure(format!(
                        "a row of {name} that this transaction's rows reference was deleted or changed by a \
                         concurrent transaction"
                    ))
                };
                let Some((_, guard)) = guards.iter().find(|(id, _)| id == parent) else { return Err(gone()) };
                let Some(index) = guard.index_on(columns) else { return Err(gone()) };
                // A key the block inserted itself is in a file the committed table lacks.
                let own = match written.iter().find(|(id, _)| id == parent).and_then(|(_, t)| t.keys.clone()) {
                    Some(cell) => Some(cell.lock_owned().await),
                    None => None,
                };
                let live: HashSet<&str> = guard.snapshot().files().map(|f| f.path.as_str()).collect();
                for key in keys {
                    let found = guard.holds(index, key, None)
                        || own.as_ref().is_some_and(|own| {
                            own.index_on(columns).is_some_and(|at| own.holds_outside(at, key, &live))
                        });
                    if !found {
                        return Err(gone());
                    }
                }
            }
            // The table (if it still exists) must be at the version the block relied on.
            Reliance::Locked { table, version }
            | Reliance::Read { table, version }
            | Reliance::Unchanged { child: table, version } => {
                let Some(entry) = state.table_by_id(table) else { continue };
                let latest = db.open_table(entry).await?.snapshot().await?.version();
                if latest == *version {
                    continue;
                }
                let name = entry.qualified_name();
                return Err(Error::SerializationFailure(match reliance {
                    Reliance::Locked { .. } => format!(
                        "could not serialize access due to concurrent update: {name} changed (version {latest}) \
                         after this transaction read it FOR UPDATE or FOR SHARE at version {version}"
                    ),
                    Reliance::Read { .. } => format!(
                        "could not serialize access due to read/write dependencies among transactions: {name} \
                         changed (version {latest}) after this serializable transaction read it at version \
                         {version}"
                    ),
                    _ => format!(
                        "{name} changed (version {latest}, this transaction read version {version}) while this \
                         transaction removed keys it references"
                    ),
                }));
            }
        }
    }
    Ok(())
}

/// The folder of the records of transactions committing to several tables.
const RECORDS: &str = "_sluice/transactions";

/// A transaction committing to several tables, written before its first table commit and
/// deleted after its last: one found on open was cut short, and is undone.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Record {
    id: String,
    /// The persisted catalog version before the transaction, when it changes the catalog: the
    /// version after it that names the transaction is its commit point.
    #[serde(default)]
    catalog: Option<u64>,
    tables: Vec<RecordTable>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RecordTable {
    id: String,
    name: String,
    /// The version the transaction's commit is built on (it is a later one).
    base: u64,
}

impl Record {
    /// Writes the record, before the transaction's first table commit. Where the warehouse's
    /// store rewrites files in place (a local warehouse with its journal), into one of the
    /// process's [`crate::record_files::RecordFiles`], which the commit empties after its last
    /// table commit and a later commit reuses: a commit then creates and deletes no file for its
    /// record. Elsewhere into a file of its own, deleted after.
    async fn write(&self, db: &Warehouse) -> Result<RecordFile> {
        let bytes = serde_json::to_vec(self).map_err(|e| Error::Internal(format!("a transaction record: {e}")))?;
        if db.root.rewrites_in_place() {
            let name = db.record_files.take();
            let path = db.root.path(&format!("{RECORDS}/{name}"));
            if let Err(e) = db.root.put_in_place(&path, bytes.into()).await {
                db.record_files.give_back(name);
                return Err(e.into());
            }
            return Ok(RecordFile { transaction: self.id.clone(), path, reused: Some(name) });
        }
        let path = db.root.path(&format!("{RECORDS}/{}.json", self.id));
        db.root.put(&path, bytes.into()).await?;
        Ok(RecordFile { transaction: self.id.clone(), path, reused: None })
    }
}

/// The file that holds a committing transaction's [`Record`].
struct RecordFile {
    transaction: String,
    path: object_store::path::Path,
    /// Its name among the reused [`crate::record_files::RecordFiles`], if it is one.
    reused: Option<String>,
}

impl RecordFile {
    /// The transaction's table commits are over: the record goes (its file is emptied, or
    /// deleted). Should that fail, the next open finds the record and completes it again.
    async fn done(self, db: &Warehouse) {
        let outcome = match &self.reused {
            Some(_) => db.root.put_in_place(&self.path, bytes::Bytes::new()).await,
            None => db.root.delete(&self.path).await,
        };
        match (outcome, self.reused) {
            (Ok(()), Some(name)) => db.record_files.give_back(name),
            (Ok(()), None) => {}
            (Err(e), _) => tracing::warn!(
                transaction = self.transaction,
                "a transaction record was not removed (the next open will): {e}"
            ),
        }
    }
}

/// Completes what transactions cut short by a crash left (when a warehouse opens): a record
/// whose transaction reached every table is deleted; otherwise the tables it reached get their
/// commit undone, then the record is deleted.
pub async fn recover(db: &Warehouse) -> Result<()> {
    let listed = db.root.list(&db.root.path(RECORDS), None).await?;
    for meta in listed {
        let bytes = db.root.get(&meta.location).await?;
        if bytes.is_empty() {
            // A reused record file of a process gone, between two transactions.
            db.root.delete(&meta.location).await?;
            continue;
        }
        let record: Record = match serde_json::from_slice(&bytes) {
            Ok(record) => record,
            Err(e) => {
                // Written whole or not at all by put; unreadable means not ours to act on.
                tracing::warn!(path = %meta.location, "an unreadable transaction record is left alone: {e}");
                continue;
            }
        };
        let state = db.catalog.current();
        let mut reached = Vec::new();
        // A transaction with catalog changes committed if and only if its catalog version did.
        let mut missing = match record.catalog {
            Some(since) => !db.catalog.committed_by(since, &record.id).await?,
            None => false,
        };
        for table in &record.tables {
            let Some(entry) = state.tables.values().find(|t| t.id == table.id) else { continue };
            let handle = db.open_table(entry).await?;
            match handle.find_transaction(table.base, &record.id).await? {
                Some(version) => reached.push((table, handle, version)),
                None => missing = true,
            }
        }
        if missing {
            for (table, handle, version) in reached {
                match handle.revert_version(version).await? {
                    CommitOutcome::Committed(_) => tracing::warn!(
                        transaction = record.id,
                        table = table.name,
                        version,
                        "undid the commit of a transaction that a crash cut short"
                    ),
                    CommitOutcome::Conflict(c) => {
                        return Err(Error::Internal(format!(
                            "the commit {version} of {} by a transaction cut short could not be undone: {c}",
                            table.name
                        )))
                    }
                }
            }
        }
        db.root.delete(&meta.location).await?;
    }
    Ok(())
}
