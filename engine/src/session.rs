//! [`Session`]: one client's session, and the one dispatcher of statements: each statement goes
//! to the code of its kind (SQL in [`crate::sql`], streaming tables and flows in [`crate::flow`],
//! materialized views in [`crate::ivm`], sources in [`crate::source`]), all run on the session's
//! [`QueryContext`].

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::execution::context::SessionContext;
use datafusion::sql::sqlparser::ast::{ObjectName, ObjectType, Statement};

use crate::control::StatementControl;
use crate::error::{Error, Result};
use crate::runtimes::Runtimes;
use crate::sql::context::QueryContext;
pub use crate::sql::context::{PreparedStatement, StatementResult};
use crate::sql::copy_in::StagedCopy;
use crate::sql::query::Described;
use crate::syntax::parser::{parse_statement_text, parse_statements, SluiceStatement};
use crate::syntax::streaming::StreamingStatement;

mod prepared;

/// The catalog name DataFusion knows the warehouse by.
pub use crate::names::CATALOG_NAME;

/// How many times an autocommit statement that lost its commit to a concurrent one runs again
/// before its 40001 reaches the client (each after a random wait of up to 2^attempt ms, at most 64).
const AUTOCOMMIT_RETRY_MAX: u32 = 20;

/// One client's session: its query context (settings, rights) and the statements it runs.
pub struct Session {
    query: QueryContext,
    /// The transaction block the session is in (see [`crate::transaction`]).
    block: crate::transaction::TransactionBlock,
    /// The runtimes the statements of streaming tables, views and sources act on.
    runtimes: Arc<Runtimes>,
    /// The session's temporary schema (see [`crate::sql::temporary`]).
    temporary: crate::sql::temporary::Namespace,
    /// The role the session runs as, as the event log names it (the server sets it per
    /// connection; the in-process API leaves it unset).
    user: std::sync::Mutex<Option<String>>,
    /// The statements SQL's PREPARE named (see [`prepared`]).
    prepared: std::sync::Mutex<std::collections::HashMap<String, prepared::Prepared>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("query", &self.query).finish()
    }
}

/// A session that ends inside a transaction block leaves nothing behind: the block's staged
/// writes are dropped and the files they wrote deleted.
/// Its temporary tables go too.
impl Drop for Session {
    fn drop(&mut self) {
        let db = self.query.db.clone();
        // Its row locks go at once: nothing else of the block can run.
        self.block.staging().release_rows(&db);
        let staged = self.block.staging().has_writes().then(|| self.block.staging().clone());
        let temporary = self.temporary.exists(&db.catalog.current()).then(|| self.temporary.schema().to_string());
        if staged.is_none() && temporary.is_none() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Some(staging) = staged {
                        staging.discard(&db).await;
                    }
                    if let Some(schema) = temporary {
                        if let Err(e) = crate::sql::temporary::drop_schema(&db, &schema).await {
                            tracing::warn!("the temporary tables of a session that ended stay in {schema}: {e}");
                        }
                    }
                });
            }
            // Without a runtime the files stay, unreferenced by any log (VACUUM's concern).
            Err(_) => tracing::debug!("a session ended with staged writes or temporary tables outside a runtime"),
        }
    }
}

impl Session {
    pub(crate) fn new(runtimes: Arc<Runtimes>) -> Self {
        let block = crate::transaction::TransactionBlock::default();
        let query = QueryContext::with_staging(runtimes.warehouse.clone(), block.staging().clone());
        Self {
            query,
            block,
            runtimes,
            temporary: Default::default(),
            user: Default::default(),
            prepared: Default::default(),
        }
    }

    /// Names the role the session runs as (for the event log's DDL events).
    pub fn set_user(&self, user: &str) {
        *crate::util::lock(&self.user) = Some(user.to_string());
    }

    /// The name of the session's temporary schema (`pg_temp_<n>`; it exists once the session
    /// made a temporary table).
    pub fn temporary_schema(&self) -> &str {
        self.temporary.schema()
    }

    /// `DISCARD TEMP`: drops the session's temporary tables and views now.
    pub async fn discard_temporary(&self) -> Result<()> {
        crate::sql::temporary::drop_schema(&self.query.db, self.temporary.schema()).await
    }

    /// Starts (or continues) the implicit transaction of a multi-statement query: until
    /// [`Session::end_implicit`], its statements' writes are held and committed together, and
    /// dropped together if one fails, as PostgreSQL runs a multi-statement simple query. A BEGIN
    /// among them opens a block as usual; a statement that cannot stage (DDL) first commits
    /// what the statements before it wrote (DDL is not transactional yet). A no-op in a block.
    pub fn begin_implicit(&self) {
        self.block.begin_implicit();
    }

    /// Ends the implicit transaction of a multi-statement query or of the extended protocol's
    /// statements up to Sync (if one is open):
    /// commits its writes, or drops them if a statement failed.
    pub async fn end_implicit(&self) -> Result<()> {
        let then = self.block.end_implicit();
        let commits = matches!(then, crate::transaction::Then::Commit(_));
        if matches!(then, crate::transaction::Then::Nothing) {
            return Ok(());
        }
        let done = self.block.complete(&self.query.db, Ok(StatementResult::command("COMMIT")), then).await;
        let ended = self.transaction_ended(commits && done.is_ok()).await;
        done.and(ended)
    }

    /// Names the session's temporary relations by their schema (see [`crate::sql::temporary`]).
    fn qualify(&self, statement: &mut SluiceStatement) -> Result<()> {
        self.temporary.qualify(&self.query.catalog_state(), statement)
    }

    /// A table name given as text, with the session's temporary tables found first.
    fn qualify_text(&self, table: &str) -> Result<String> {
        self.temporary.qualify_text(&self.query.catalog_state(), table)
    }

    /// What ends a transaction does to the session's temporary relations: those whose creation
    /// a rollback undid are dropped, and after `committed`, each `ON COMMIT DROP` table is dropped
    /// and each `ON COMMIT DELETE ROWS` one emptied.
    async fn transaction_ended(&self, committed: bool) -> Result<()> {
        for name in self.block.take_undone() {
            self.query.drop_temporary(&name).await?;
        }
        if committed {
            self.query.on_commit(&self.temporary).await?;
        }
        Ok(())
    }

    /// After a statement outside a transaction block (its own transaction ended).
    async fn statement_ended(&self, result: Result<StatementResult>) -> Result<StatementResult> {
        if self.block.in_block() {
            return result;
        }
        let ended = self.transaction_ended(result.is_ok()).await;
        result.and_then(|r| ended.map(|()| r))
    }

    /// Sets the rights of the role this session runs as (the server does, per connection).
    pub fn set_privileges(&self, privileges: crate::privileges::Privileges) {
        self.query.set_privileges(privileges)
    }

    /// The rights of the role this session runs as.
    pub fn privileges(&self) -> crate::privileges::Privileges {
        self.query.privileges()
    }

    /// Whether a statement may run in the session's transaction block now (see
    /// [`crate::transaction::TransactionBlock::admit`]); for statements that a caller answers
    /// without [`Session::run_with`] (the server's SET and SHOW).
    pub fn admit(&self, statement: &SluiceStatement) -> Result<()> {
        self.block.admit(statement)
    }

    /// A statement failed outside [`Session::run_with`]: the transaction block, if any, is aborted.
    pub fn statement_failed(&self) {
        self.block.finished(false, false);
    }

    /// Sets `default_transaction_read_only` (see [`crate::transaction`]).
    pub fn set_default_read_only(&self, read_only: bool) {
        self.block.set_default_read_only(read_only)
    }

    /// Sets `default_transaction_isolation` (see [`crate::transaction::Isolation`]).
    pub fn set_default_isolation(&self, isolation: crate::transaction::Isolation) {
        self.block.set_default_isolation(isolation)
    }

    /// `transaction_isolation`: the block's level, or the default outside one.
    pub fn isolation(&self) -> crate::transaction::Isolation {
        self.block.isolation()
    }

    /// `SET transaction_isolation = ...` (SET TRANSACTION ISOLATION LEVEL): in a block before
    /// its first query; outside one it does nothing, as in PostgreSQL.
    pub fn set_isolation(&self, isolation: crate::transaction::Isolation) -> Result<()> {
        self.block.set_isolation(isolation)
    }

    /// Whether `statement` is a write outside a block under serializable isolation, which runs
    /// as a transaction of its own (see [`Session::run_with`]).
    fn serializable_write(&self, statement: &SluiceStatement) -> bool {
        self.block.default_isolation() == crate::transaction::Isolation::Serializable
            && matches!(statement, SluiceStatement::Standard(s)
                if matches!(**s, Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Merge(_)))
    }

    /// Sets the order PostgreSQL's `DateStyle` gives dates written `1/8/1999` (see
    /// [`crate::datetime::DateOrder`]).
    pub fn set_date_order(&self, order: crate::datetime::DateOrder) {
        let state = self.query.context().state_ref();
        let mut state = state.write();
        state.config_mut().options_mut().extensions.insert(order);
    }

    /// The session's time zone (PostgreSQL's `TimeZone`): `timestamptz` values are points in
    /// time, and this zone is how input without an offset, `now()` and `current_date` read them.
    /// A zone Arrow does not know leaves UTC.
    pub fn set_time_zone(&self, zone: &str) {
        let zone = if zone.parse::<arrow::array::timezone::Tz>().is_ok() { zone } else { "UTC" };
        let state = self.query.context().state_ref();
        let mut state = state.write();
        state.config_mut().options_mut().execution.time_zone = Some(zone.to_string());
    }

    /// The warnings and notices its last statements gave the client, as PostgreSQL sends them in
    /// a NoticeResponse: warnings for COMMIT or ROLLBACK with no transaction block and BEGIN
    /// inside one, notices for `DROP ... IF EXISTS` of an object that is not there.
    pub fn take_warnings(&self) -> Vec<Notice> {
        let warnings = self.block.take_warnings().into_iter().map(|(sqlstate, message)| Notice {
            severity: "WARNING",
            sqlstate,
            message: message.to_string(),
        });
        let notices = self.query.take_notices().into_iter().map(|message| Notice {
            severity: "NOTICE",
            sqlstate: "00000",
            message,
        });
        warnings.chain(notices).collect()
    }

    /// Whether the session is in an implicit transaction (a multi-statement query's, or the
    /// extended protocol's up to Sync), not a block the client began.
    pub fn in_implicit(&self) -> bool {
        self.block.in_implicit()
    }

    /// The catalog as this session's statements see it, for the Postgres catalogs: a handle that
    /// reads it anew each time, with the tables and views its transaction block created or
    /// dropped (committed by others otherwise).
    pub fn catalog_view(&self) -> CatalogView {
        CatalogView { db: self.query.db.clone(), staging: self.query.staging.clone() }
    }

    /// Whether the session is inside a transaction block (BEGIN ... COMMIT / ROLLBACK).
    pub fn in_transaction_block(&self) -> bool {
        self.block.in_block()
    }

    /// The serial number of the transaction block's newest savepoint (see
    /// [`crate::transaction::TransactionBlock::newest_savepoint`]).
    pub fn newest_savepoint(&self) -> Option<u64> {
        self.block.newest_savepoint()
    }

    /// The DataFusion context (for planning by the server).
    pub fn context(&self) -> &SessionContext {
        self.query.context()
    }

    /// Whether a query plans to the end (logical plan, optimizer, physical plan) without running
    /// it or touching the transaction block: for the server, which keeps datafusion-pg-catalog's
    /// cruder rewrite of a catalog query for those that do not.
    pub async fn plans_fully(&self, statement: &SluiceStatement) -> bool {
        let mut statement = statement.clone();
        if self.qualify(&mut statement).is_err() {
            return false;
        }
        let SluiceStatement::Standard(standard) = statement else { return false };
        if !matches!(*standard, Statement::Query(_)) {
            return false;
        }
        self.query.clear_statement_state();
        let planned = match self.query.plan_statement(*standard).await {
            Ok(plan) => match self.query.context().state().create_physical_plan(&plan).await {
                Ok(_) => true,
                Err(e) => {
                    tracing::debug!("a query does not plan: {e}");
                    false
                }
            },
            Err(e) => {
                tracing::debug!("a query does not plan: {e}");
                false
            }
        };
        self.query.clear_statement_state();
        planned
    }

    /// The parameter types and result columns of a statement (see [`QueryContext::describe_statement`]).
    pub async fn describe_statement(&self, statement: &SluiceStatement) -> Described {
        let mut statement = statement.clone();
        if self.qualify(&mut statement).is_err() {
            // Running it gives the error; a description has none to give.
            return self.query.describe_statement(&statement).await;
        }
        // In a transaction block a query is planned as it will run: on the block's staged
        // tables, whose columns its ALTER TABLEs may have changed.
        self.set_staging_mode(crate::transaction::stages(&statement));
        self.query.clear_statement_state();
        let described = self.query.describe_statement(&statement).await;
        self.query.clear_statement_state();
        self.block.staging().set_mode(crate::staging::Mode::Off);
        described
    }

    /// Starts a COPY ... FROM into `table` (see [`crate::sql::copy_in`]).
    pub async fn copy_begin(&self, table: &str, control: Arc<StatementControl>) -> Result<StagedCopy> {
        self.block.admit_write("COPY FROM")?;
        let table = self.qualify_text(table)?;
        self.begin_statement(true);
        let begun = self.query.copy_begin(&table, control).await;
        self.block.staging().set_mode(crate::staging::Mode::Off);
        if begun.is_err() {
            self.block.finished(false, false);
        }
        begun
    }

    /// Adds rows to a COPY.
    pub async fn copy_rows(&self, copy: &mut StagedCopy, batches: Vec<RecordBatch>) -> Result<()> {
        self.query.copy_rows(copy, batches).await
    }

    /// Commits a COPY's rows in one commit; returns the rows written.
    pub async fn copy_commit(&self, copy: StagedCopy) -> Result<u64> {
        self.set_staging_mode(true);
        let committed = self.query.copy_commit(copy).await;
        self.block.staging().set_mode(crate::staging::Mode::Off);
        let committed = committed.and_then(|rows| self.check_staged_size().map(|()| rows));
        self.block.finished(false, committed.is_ok());
        if self.block.in_block() {
            return committed;
        }
        let ended = self.transaction_ended(committed.is_ok()).await;
        committed.and_then(|rows| ended.map(|()| rows))
    }

    /// Drops a COPY: deletes the data files it wrote.
    pub async fn copy_abort(&self, copy: StagedCopy) {
        self.query.copy_abort(copy).await;
        self.block.finished(false, false);
    }

    /// Runs one or more statements separated by `;`.
    pub async fn execute(&self, sql: &str) -> Result<Vec<StatementResult>> {
        let statements = parse_statements(sql)?;
        let mut results = Vec::with_capacity(statements.len());
        for statement in statements {
            results.push(self.run(statement, &[]).await?);
        }
        Ok(results)
    }

    /// Runs statements and returns the rows of the last one.
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let mut results = self.execute(sql).await?;
        match results.pop() {
            Some(StatementResult::Rows { batches, .. } | StatementResult::Returned { batches, .. }) => Ok(batches),
            Some(StatementResult::Command { tag, .. }) => {
                Err(Error::Plan(format!("the last statement ({tag}) returns no rows")))
            }
            None => Ok(vec![]),
        }
    }

    /// Parses a statement with parameters and infers their types where it can.
    pub async fn prepare(&self, sql: &str) -> Result<PreparedStatement> {
        let statement = parse_statement_text(sql)?;
        let described = self.describe_statement(&statement).await;
        Ok(PreparedStatement {
            statement,
            parameter_types: described.parameter_types,
            result_schema: described.result_schema,
        })
    }

    /// Runs a prepared statement with parameter values.
    pub async fn execute_prepared(
        &self,
        prepared: &PreparedStatement,
        parameters: &[ScalarValue],
    ) -> Result<StatementResult> {
        self.run(prepared.statement.clone(), parameters).await
    }

    /// Runs one parsed statement; `$n` placeholders take `parameters[n - 1]`.
    pub async fn run(&self, statement: SluiceStatement, parameters: &[ScalarValue]) -> Result<StatementResult> {
        self.run_with(statement, parameters, StatementControl::new(self.privileges())).await
    }

    /// Runs one parsed statement under `control`: its rights are checked on the statement, on
    /// the plan that runs and at every commit, and [`StatementControl::cancel`] stops it before
    /// its first commit (see [`crate::control`]).
    pub async fn run_with(
        &self,
        statement: SluiceStatement,
        parameters: &[ScalarValue],
        control: Arc<StatementControl>,
    ) -> Result<StatementResult> {
        if let Some((result, then)) = self.block.control(&statement) {
            let commits = matches!(then, crate::transaction::Then::Commit(_));
            // COMMIT's table commits ask the statement's control, as every commit does.
            let completed = self.block.complete(&self.query.db, result, then);
            let result = sluice_storage::gate::gated(control, Box::pin(completed)).await;
            let ended = Box::pin(self.transaction_ended(commits && result.is_ok())).await;
            return result.and_then(|r| ended.map(|()| r));
        }
        if !self.block.in_block() && (self.cascades(&statement) || self.serializable_write(&statement)) {
            // A DELETE or TRUNCATE whose foreign keys cascade runs in a transaction of its own,
            // so that the referencing tables' changes commit with it (or none does); so does a
            // write under `default_transaction_isolation = serializable`, whose COMMIT checks
            // that the tables it read are unchanged (crate::transaction::Isolation). Its COMMIT
            // lost to a concurrent one: it runs again on the newer snapshots, as an autocommit
            // statement does (nothing of it was committed or sent).
            let mut attempt = 0;
            loop {
                self.block.begin_implicit();
                let result = Box::pin(self.run_with(statement.clone(), parameters, control.clone())).await;
                let ended = Box::pin(self.end_implicit()).await;
                match result.and_then(|r| ended.map(|()| r)) {
                    Err(Error::SerializationFailure(reason)) if attempt < AUTOCOMMIT_RETRY_MAX => {
                        attempt += 1;
                        tracing::debug!(attempt, "a cascading statement lost a commit race and runs again: {reason}");
                        lost_race_pause(attempt).await;
                    }
                    other => return other,
                }
            }
        }
        self.block.admit(&statement)?;
        if let Some(result) = Box::pin(self.prepared_statement(&statement, &control)).await {
            return result;
        }
        let mut statement = statement;
        if let Err(e) = self.qualify(&mut statement) {
            self.block.finished(false, false);
            return self.statement_ended(Err(e)).await;
        }
        let staged = crate::transaction::stages(&statement) && !self.changes_maintained_table(&statement);
        // Making a temporary relation in a block is undone by dropping it, not refused.
        let temporary = crate::sql::temporary::created_relation(&statement);
        let wrote = !crate::rights::reads_only(&statement) && !staged && temporary.is_none();
        // DDL and maintenance go to the event log (who, what, when), once they ran.
        let ddl = is_ddl(&statement).then(|| ddl_event_text(&statement));
        let started = std::time::Instant::now();
        // A statement that commits at once on a table the block created goes with that table.
        let created = if wrote && self.block.in_block() { self.created_target(&statement) } else { None };
        // One on a temporary relation the block created goes with that relation too.
        let changed = target_name(&statement).or_else(|| dropped_name(&statement));
        let temporary_write = match (wrote && self.block.in_block() && created.is_none(), changed) {
            (true, Some(name)) if self.block.created_temporary_relation(&name) => Some(name),
            _ => None,
        };
        let wrote = wrote && created.is_none() && temporary_write.is_none();
        if wrote && self.block.in_implicit() {
            // DDL in a multi-statement query: what the statements before it wrote commits first
            // (it could not be undone with the DDL; see Session::begin_implicit).
            if let Err(e) = Box::pin(self.block.staging().commit(&self.query.db, self.block.isolation())).await {
                self.block.finished(false, false);
                return Err(e);
            }
        }
        self.begin_statement(staged);
        // An autocommit query or DML that lost its commit to a concurrent one runs again on the
        // newer snapshot, as PostgreSQL's READ COMMITTED reads a row that changed under an
        // UPDATE anew: nothing of it was committed or sent. (In a block, COMMIT reports 40001.)
        // (A statement that only reads commits nothing: it is neither retried nor copied for it.)
        let writes = staged && !crate::rights::reads_only(&statement);
        let retries = if writes && !self.block.in_block() { AUTOCOMMIT_RETRY_MAX } else { 0 };
        let mut attempt = 0;
        let mut result = loop {
            let again = (attempt < retries).then(|| statement.clone());
            // Boxed, as the calls below: a statement's future is deep, and a debug build's stack small.
            let result = Box::pin(self.run_admitted(statement, parameters, control.clone())).await;
            match (result, again) {
                (Err(Error::SerializationFailure(reason)), Some(next)) => {
                    attempt += 1;
                    tracing::debug!(attempt, "an autocommit statement lost a commit race and runs again: {reason}");
                    lost_race_pause(attempt).await;
                    statement = next;
                }
                (result, _) => break result,
            }
        };
        // The row locks an UPDATE or DELETE outside a block held while it ran (see
        // crate::row_locks): its commit is done, or it failed. A block whose statement failed
        // can only roll back (without a savepoint to return to): its row locks go now, as an
        // aborted PostgreSQL transaction's do, so that those waiting for them (the other side of
        // a deadlock) go on.
        let aborted = result.is_err() && self.block.newest_savepoint().is_none();
        if !self.block.in_block() || aborted {
            self.block.staging().release_rows(&self.query.db);
        }
        self.block.staging().set_mode(crate::staging::Mode::Off);
        if result.is_ok() && staged {
            if let Err(e) = self.check_staged_size() {
                result = Err(e);
            }
        }
        if let (Some(position), true) = (created, result.is_ok()) {
            self.block.wrote_created(position);
        }
        if let (Some(name), true) = (&temporary_write, result.is_ok()) {
            self.block.wrote_temporary(name);
        }
        self.block.finished(wrote, result.is_ok());
        if let (Some((object, text)), true) = (ddl, result.is_ok()) {
            self.query.db.events.record(crate::events::FlowEvent {
                at_ms: crate::util::now_ms(),
                flow: object,
                kind: "ddl",
                message: Some(text),
                user: crate::util::lock(&self.user).clone(),
                duration_ms: i64::try_from(started.elapsed().as_millis()).ok(),
                ..Default::default()
            });
        }
        if let (Some(name), true) = (temporary, result.is_ok()) {
            self.block.created_temporary(name);
        }
        Box::pin(self.statement_ended(result)).await
    }

    /// Whether a statement's foreign keys cascade (its names qualified as it will run them: a
    /// session's temporary tables first).
    fn cascades(&self, statement: &SluiceStatement) -> bool {
        let mut qualified = statement.clone();
        self.qualify(&mut qualified).is_ok() && self.query.cascades_from(&qualified)
    }

    /// Whether a statement is an ALTER TABLE (other than RENAME TO) or CREATE INDEX of a
    /// streaming table or a materialized view, in a block: those commit at once (flows and
    /// views write them outside the block), as outside one.
    fn changes_maintained_table(&self, statement: &SluiceStatement) -> bool {
        if !self.block.in_block() {
            return false;
        }
        let renames = matches!(
            standard(statement),
            Some(Statement::AlterTable(alter))
                if alter.operations.iter().all(|o| matches!(o, datafusion::sql::sqlparser::ast::AlterTableOperation::RenameTable { .. }))
        );
        let Some(name) = target_name(statement).filter(|_| !renames) else { return false };
        let state = self.query.catalog_state();
        state.table(&name.schema, &name.name).is_some_and(|entry| entry.kind != crate::catalog::TableKind::Table)
    }

    /// The position among the tables the block created of the one an ALTER TABLE or CREATE
    /// INDEX changes, if the block created it (nobody else sees such a table: the statement's
    /// commits go with it when the block rolls back).
    fn created_target(&self, statement: &SluiceStatement) -> Option<usize> {
        let name = target_name(statement)?;
        let state = self.query.catalog_state();
        let entry = state.table(&name.schema, &name.name)?;
        self.block.staging().created_position(&entry.id)
    }

    /// Refuses a transaction block past its staging limit (see [`crate::staging::Staging::check_size`]).
    fn check_staged_size(&self) -> Result<()> {
        if !self.block.in_block() {
            return Ok(());
        }
        self.block.staging().check_size(self.query.db.options.transaction_bytes_max)
    }

    /// How the next statement uses the block's staged tables (`staged`: it is a query or DML).
    fn set_staging_mode(&self, staged: bool) {
        self.block.staging().set_mode(self.staging_mode(staged));
    }

    /// [`Session::set_staging_mode`] for a statement that starts now: at READ COMMITTED, it
    /// reads the tables the block has not written anew (see [`crate::staging::Staging::begin_statement`]).
    /// Not for what continues a statement (a COPY's commit) or only plans one.
    fn begin_statement(&self, staged: bool) {
        self.block.staging().begin_statement(self.staging_mode(staged), self.block.isolation());
    }

    fn staging_mode(&self, staged: bool) -> crate::staging::Mode {
        match (self.block.in_block(), staged) {
            (false, _) => crate::staging::Mode::Off,
            (true, true) => crate::staging::Mode::Stage,
            (true, false) => crate::staging::Mode::Immediate,
        }
    }

    /// Runs a statement the transaction block admitted.
    async fn run_admitted(
        &self,
        statement: SluiceStatement,
        parameters: &[ScalarValue],
        control: Arc<StatementControl>,
    ) -> Result<StatementResult> {
        let statement = crate::sql::params::bind(statement, parameters)?;
        crate::rights::check_statement(&statement, control.privileges())?;
        self.query.db.catalog.refresh().await?;
        self.query.clear_statement_state();
        Box::pin(self.query.pin_tables(&statement)).await?;
        // Boxed: the future of a statement is large (every kind of statement, DataFusion's
        // planning), and callers should not carry it on their stacks.
        let result = sluice_storage::gate::gated(control, Box::pin(self.dispatch(statement))).await;
        self.query.clear_statement_state();
        result
    }

    async fn dispatch(&self, statement: SluiceStatement) -> Result<StatementResult> {
        match statement {
            SluiceStatement::CreateTable(create) => self.query.create_table(*create).await,
            SluiceStatement::DescribeHistory { table, limit } => self.query.describe_history(&table, limit).await,
            SluiceStatement::Optimize { table, purge: false, predicate: None } => self.query.optimize(&table).await,
            SluiceStatement::Optimize { table, purge: true, predicate: None } => self.query.reorg_purge(&table).await,
            SluiceStatement::Optimize { predicate: Some(_), .. } => {
                Err(Error::NotSupported("REORG TABLE ... WHERE (purge the whole table instead)".into()))
            }
            SluiceStatement::DropFeature { table, feature, truncate_history } => {
                self.query.drop_feature(&table, &feature, truncate_history).await
            }
            SluiceStatement::Vacuum { table, retain_hours, dry_run } => {
                self.query.vacuum(&table, retain_hours, dry_run).await
            }
            SluiceStatement::Restore { table, target } => self.query.restore(&table, *target).await,
            SluiceStatement::InsertByName { table, query, overwrite } => {
                self.query.insert_by_name(&table, *query, overwrite).await
            }
            SluiceStatement::InsertOverriding { insert, overriding } => match *insert {
                Statement::Insert(insert) => self.query.insert_overriding(insert, Some(overriding)).await,
                other => self.dispatch_standard(other).await,
            },
            SluiceStatement::Streaming(statement) => self.streaming(*statement).await,
            SluiceStatement::Comment(comment) => self.query.comment_on(*comment).await,
            SluiceStatement::Sequence(statement) => self.query.sequence_statement(*statement).await,
            SluiceStatement::Standard(statement) => self.dispatch_standard(*statement).await,
            SluiceStatement::Move { .. } => {
                Err(Error::NotSupported("MOVE in process: cursors are served over the PostgreSQL protocol".into()))
            }
        }
    }

    async fn dispatch_standard(&self, statement: Statement) -> Result<StatementResult> {
        match statement {
            Statement::Query(query) => self.query.run_query(*query).await,
            Statement::Insert(insert) => self.query.insert_statement(insert).await,
            Statement::Update(update) => self.query.update_statement(update).await,
            Statement::Delete(delete) => self.query.delete_statement(delete).await,
            Statement::Merge(merge) => self.query.merge_statement(merge).await,
            Statement::Truncate(truncate) => self.query.truncate_statement(truncate).await,
            Statement::CreateSchema { schema_name, if_not_exists, .. } => {
                self.query.create_schema(&schema_name, if_not_exists).await
            }
            Statement::Drop { object_type: ObjectType::Role, if_exists, names, .. } => {
                self.query.db.roles.drop(&self.query.db.catalog, &names, if_exists).await?;
                Ok(StatementResult::command("DROP ROLE"))
            }
            Statement::Drop { object_type: ObjectType::Sequence, if_exists, names, cascade, .. } => {
                self.query.drop_sequences(&names, if_exists, cascade).await
            }
            Statement::Drop { object_type: ObjectType::Type, if_exists, names, cascade, .. } => {
                self.query.drop_types(&names, if_exists, cascade).await
            }
            Statement::CreateType { name, representation } => self.query.create_type(&name, representation).await,
            Statement::AlterType(alter) => self.query.alter_type(alter).await,
            Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                self.query.drop(object_type, if_exists, &names, cascade).await
            }
            Statement::CreateRole(create) => {
                self.query.db.roles.create(&self.query.db.catalog, &create).await?;
                Ok(StatementResult::command("CREATE ROLE"))
            }
            Statement::AlterRole { name, operation } => {
                self.query.db.roles.alter(&self.query.db.catalog, &name, &operation).await?;
                Ok(StatementResult::command("ALTER ROLE"))
            }
            Statement::AlterTable(alter) => self.query.alter_table(alter).await,
            Statement::CreateView(create) if !create.materialized => self.query.create_view(create).await,
            Statement::CreateIndex(create) => self.query.create_index(create).await,
            // Rights come from the role's kind (owner, normal, read-only; see crate::privileges),
            // not from grants on objects.
            // Only sqlparser's own spellings reach here (`COMMENT IF EXISTS ON ...`, Snowflake's):
            // PostgreSQL's COMMENT ON is Sluice's statement (see crate::syntax::comment).
            Statement::Comment { .. } => {
                Err(Error::NotSupported("COMMENT IF EXISTS (PostgreSQL's COMMENT ON has no IF EXISTS)".into()))
            }
            Statement::Grant(_) | Statement::Revoke(_) => Err(Error::NotSupported(
                "GRANT and REVOKE (Sluice's roles are the warehouse owner, normal roles and read-only roles: \
                 CREATE ROLE ... IN ROLE pg_read_all_data makes a read-only one)"
                    .into(),
            )),
            other => self.query.run_datafusion(other).await,
        }
    }

    /// Appends rows to a table by column name.
    pub async fn insert(&self, table: &str, batches: Vec<RecordBatch>) -> Result<u64> {
        self.insert_with(table, batches, StatementControl::new(self.privileges())).await
    }

    /// Appends rows to a table by column name, under `control` (as [`Session::run_with`]).
    pub async fn insert_with(
        &self,
        table: &str,
        batches: Vec<RecordBatch>,
        control: Arc<StatementControl>,
    ) -> Result<u64> {
        if control.privileges().read_only {
            return Err(Error::ReadOnly(format!("this role is read-only and cannot write to {table}")));
        }
        self.block.admit_write("INSERT")?;
        self.begin_statement(true);
        let result = async {
            self.query.db.catalog.refresh().await?;
            self.query.clear_statement_state();
            let name = crate::names::parse_table_name(&self.qualify_text(table)?)?;
            let result = sluice_storage::gate::gated(control, self.query.insert_batches(&name, batches, None)).await;
            self.query.clear_statement_state();
            result
        }
        .await
        .and_then(|rows| self.check_staged_size().map(|()| rows));
        self.block.staging().set_mode(crate::staging::Mode::Off);
        self.block.finished(false, result.is_ok());
        if self.block.in_block() {
            return result;
        }
        let ended = self.transaction_ended(result.is_ok()).await;
        result.and_then(|rows| ended.map(|()| rows))
    }

    /// Streaming tables and flows, sources and materialized views.
    async fn streaming(&self, statement: StreamingStatement) -> Result<StatementResult> {
        let (flows, views) = (&self.runtimes.flows, &self.runtimes.views);
        let result = match statement {
            StreamingStatement::CreateStreamingTable(create) => {
                crate::flow::ddl::create_streaming_table(&self.query, flows, *create).await
            }
            StreamingStatement::CreateFlow(create) => crate::flow::ddl::create_flow(&self.query, flows, *create).await,
            StreamingStatement::AlterStreamingTable { table, change } => {
                crate::flow::ddl::alter_streaming(&self.query, flows, &table, *change).await
            }
            StreamingStatement::ResumeFlow { name } => crate::flow::ddl::resume_flow(&self.query, flows, &name).await,
            StreamingStatement::Refresh { table, full } => {
                crate::flow::ddl::refresh_streaming(&self.query, flows, &table, full).await
            }
            StreamingStatement::ExplainFlow { name } => crate::flow::ddl::explain_flow(&self.query, &name).await,
            StreamingStatement::DropFlow { name, if_exists } => {
                crate::flow::ddl::drop_flow(&self.query, flows, &name, if_exists).await
            }
            StreamingStatement::CreateSource(create) => crate::source::ddl::create_source(&self.query, *create).await,
            StreamingStatement::DropSource { name, if_exists, cascade } => {
                crate::source::ddl::drop_source(&self.query, &name, if_exists, cascade).await
            }
            StreamingStatement::CreateMaterializedView(create) => {
                crate::ivm::ddl::create_materialized_view(&self.query, views, *create).await
            }
            StreamingStatement::RefreshMaterializedView { name, full } => {
                crate::ivm::ddl::refresh_materialized_view(&self.query, views, &name, full).await
            }
            StreamingStatement::ExplainMaterializedView { name } => {
                crate::ivm::ddl::explain_materialized_view(&self.query, views, &name).await
            }
            StreamingStatement::DropMaterializedView { name, if_exists, cascade } => {
                crate::ivm::ddl::drop_materialized_view(&self.query, views, &name, if_exists, cascade).await
            }
            StreamingStatement::CreateSubscription { name, table, snapshot, if_not_exists } => {
                crate::subscribe::durable::create(&self.query, &name, &table, snapshot, if_not_exists).await
            }
            StreamingStatement::AcknowledgeSubscription { name, version } => {
                crate::subscribe::durable::acknowledge(&self.query, &name, version).await
            }
            StreamingStatement::DropSubscription { name, if_exists } => {
                crate::subscribe::durable::drop(&self.query, &name, if_exists).await
            }
            StreamingStatement::CreateAlert(create) => crate::alerts::create(&self.query, *create).await,
            StreamingStatement::DropAlert { name, if_exists } => {
                crate::alerts::drop(&self.query, &self.runtimes.alerts, &name, if_exists).await
            }
            StreamingStatement::NotSupported(what) => Err(Error::NotSupported(what)),
            StreamingStatement::Subscribe { .. } | StreamingStatement::DeclareSubscribe { .. } => Err(Error::NotSupported(
                "SUBSCRIBE as a statement: use COPY (SUBSCRIBE TO t) TO STDOUT over pgwire, or Database::subscribe in Rust"
                    .into(),
            )),
        };
        // A table that reads a source starts ingesting now, one whose source changed or went
        // stops (and restarts with the new definition).
        crate::source::supervise(&self.runtimes.sources);
        result
    }
}

/// Turns a `SluiceStatement` back into an AST statement where it is a standard one.
pub fn standard(statement: &SluiceStatement) -> Option<&Statement> {
    match statement {
        SluiceStatement::Standard(s) => Some(s),
        _ => None,
    }
}

/// The catalog as one session sees it (see [`Session::catalog_view`]).
#[derive(Clone)]
pub struct CatalogView {
    db: Arc<crate::warehouse::Warehouse>,
    staging: Arc<crate::staging::Staging>,
}

impl std::fmt::Debug for CatalogView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CatalogView")
    }
}

impl CatalogView {
    /// Every table's columns (defaults, identity) and keys.
    pub async fn relations(&self) -> Vec<crate::system::RelationInfo> {
        crate::system::relations_in(&self.db, self.staging.catalog_view(&self.db.catalog), Some(&*self.staging)).await
    }

    /// The sequences, standalone and SERIAL or identity columns'.
    pub async fn sequences(&self) -> Vec<crate::sequence::SequenceInfo> {
        let state = self.staging.catalog_view(&self.db.catalog);
        crate::sql::sequences::sequences_in(&self.db, &state).await
    }

    /// The enum types (`CREATE TYPE ... AS ENUM`).
    pub fn enums(&self) -> Vec<crate::catalog::EnumEntry> {
        self.staging.catalog_view(&self.db.catalog).enums.values().cloned().collect()
    }

    /// The views.
    pub fn views(&self) -> Vec<crate::catalog::ViewEntry> {
        self.staging.catalog_view(&self.db.catalog).views.values().cloned().collect()
    }

    /// The materialized views, as (schema, name, query).
    pub fn materialized_views(&self) -> Vec<(String, String, String)> {
        let state = self.staging.catalog_view(&self.db.catalog);
        let views = state.tables.values().filter(|t| t.kind == crate::catalog::TableKind::MaterializedView);
        views
            .map(|t| (t.schema.clone(), t.name.clone(), t.view.as_ref().map(|v| v.query.clone()).unwrap_or_default()))
            .collect()
    }
}

/// The one table a statement that commits at once changes (ALTER TABLE, CREATE INDEX, COMMENT
/// ON), as it will run (qualified).
fn target_name(statement: &SluiceStatement) -> Option<crate::names::TableName> {
    let name = match statement {
        SluiceStatement::Comment(comment) => comment.target.relation()?,
        SluiceStatement::Streaming(streaming) => match &**streaming {
            crate::syntax::streaming::StreamingStatement::RefreshMaterializedView { name, .. } => name,
            _ => return None,
        },
        _ => match standard(statement)? {
            Statement::AlterTable(alter) => &alter.name,
            Statement::CreateIndex(create) => &create.table_name,
            _ => return None,
        },
    };
    crate::names::table_name(name).ok()
}

/// The one table or view a DROP TABLE or DROP VIEW names (a DROP of a temporary relation the
/// block created goes with it: a ROLLBACK that drops it again has nothing left to undo).
fn dropped_name(statement: &SluiceStatement) -> Option<crate::names::TableName> {
    match standard(statement)? {
        Statement::Drop { object_type: ObjectType::Table | ObjectType::View, names, .. } => match names.as_slice() {
            [name] => crate::names::table_name(name).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Before the `attempt`th run of a statement that lost a commit race: a random wait of up to
/// 2^attempt ms (at most 64; a v4 uuid's random bits), so that racing statements part.
async fn lost_race_pause(attempt: u32) {
    let jitter = (uuid::Uuid::new_v4().as_u128() as u64) % ((1u64 << attempt.min(6)) + 1);
    tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
}

/// A warning or notice for the client (PostgreSQL's NoticeResponse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `WARNING` or `NOTICE`.
    pub severity: &'static str,
    pub sqlstate: &'static str,
    pub message: String,
}

/// The object and the text of a DDL statement as the event log keeps them: role statements
/// without their options (a password is not logged), long texts cut at
/// [`DDL_TEXT_BYTES_MAX`].
fn ddl_event_text(statement: &SluiceStatement) -> (String, String) {
    let object = ddl_object(statement).unwrap_or_default();
    let text = match standard(statement) {
        Some(Statement::CreateRole(create)) => {
            format!("CREATE ROLE {}", create.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "))
        }
        Some(Statement::AlterRole { name, .. }) => format!("ALTER ROLE {name}"),
        Some(other) => other.to_string(),
        // Sluice's own statements have no SQL printer: their kind and object.
        None => {
            let debug = format!("{statement:?}");
            let inner = debug.strip_prefix("Streaming(").unwrap_or(&debug);
            // `CreateStreamingTable` as `CREATE STREAMING TABLE`.
            let mut kind = String::new();
            for c in inner.chars().take_while(|c| c.is_alphanumeric()) {
                if c.is_uppercase() && !kind.is_empty() {
                    kind.push(' ');
                }
                kind.push(c.to_ascii_uppercase());
            }
            format!("{kind} {object}").trim_end().to_string()
        }
    };
    let mut end = text.len().min(DDL_TEXT_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (object, text.get(..end).unwrap_or_default().to_string())
}

/// The longest DDL text the event log keeps.
const DDL_TEXT_BYTES_MAX: usize = 4096;

/// The object a DDL statement creates, changes or drops, for the event log.
fn ddl_object(statement: &SluiceStatement) -> Option<String> {
    use crate::syntax::streaming::StreamingStatement as S;
    let relation =
        |name: &ObjectName| crate::names::table_name(name).map(|n| n.to_string()).unwrap_or(name.to_string());
    match statement {
        SluiceStatement::CreateTable(create) => Some(relation(&create.name)),
        SluiceStatement::Optimize { table, .. }
        | SluiceStatement::DropFeature { table, .. }
        | SluiceStatement::Restore { table, .. } => Some(relation(table)),
        SluiceStatement::Vacuum { table, .. } => Some(relation(table)),
        SluiceStatement::Streaming(streaming) => match &**streaming {
            S::CreateStreamingTable(create) => Some(relation(&create.name)),
            S::CreateMaterializedView(create) => Some(relation(&create.name)),
            S::AlterStreamingTable { table, .. } => Some(relation(table)),
            S::RefreshMaterializedView { name, .. } | S::DropMaterializedView { name, .. } => Some(relation(name)),
            S::CreateFlow(create) => Some(create.name.clone()),
            S::CreateSource(create) => Some(create.name.clone()),
            S::ResumeFlow { name, .. }
            | S::DropFlow { name, .. }
            | S::DropSource { name, .. }
            | S::CreateSubscription { name, .. }
            | S::DropSubscription { name, .. }
            | S::DropAlert { name, .. } => Some(name.clone()),
            S::CreateAlert(create) => Some(create.name.clone()),
            _ => None,
        },
        _ => match standard(statement)? {
            Statement::CreateTable(create) => Some(relation(&create.name)),
            Statement::CreateView(create) => Some(relation(&create.name)),
            Statement::Drop { names, .. } => names.first().map(relation),
            Statement::CreateRole(create) => create.names.first().map(|n| n.to_string()),
            Statement::AlterRole { name, .. } => Some(name.to_string()),
            _ => target_name(statement).map(|n| n.to_string()),
        },
    }
}

/// Whether a statement changes the catalog or a table's definition (what the event log records
/// as `ddl`), as opposed to a query or a change of rows.
fn is_ddl(statement: &SluiceStatement) -> bool {
    if crate::rights::reads_only(statement) {
        return false;
    }
    match statement {
        SluiceStatement::InsertByName { .. } | SluiceStatement::InsertOverriding { .. } => false,
        SluiceStatement::Streaming(streaming) => !matches!(
            &**streaming,
            crate::syntax::streaming::StreamingStatement::Subscribe { .. }
                | crate::syntax::streaming::StreamingStatement::DeclareSubscribe { .. }
                | crate::syntax::streaming::StreamingStatement::AcknowledgeSubscription { .. }
        ),
        _ => !matches!(
            standard(statement),
            Some(
                Statement::Insert(_)
                    | Statement::Update(_)
                    | Statement::Delete(_)
                    | Statement::Merge(_)
                    | Statement::Copy { .. }
                    | Statement::Truncate(_)
            )
        ),
    }
}
