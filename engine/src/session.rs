//! [`Session`]: one client's view of a database: its DataFusion context, its settings, and the
//! dispatch of each statement to the code that runs it.
//!
//! Every statement sees one snapshot per table: the first time a statement touches a table its
//! latest snapshot is taken and kept until the statement ends (a self-join reads one version).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::execution::context::SessionContext;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionConfig;
use datafusion::sql::sqlparser::ast::{ObjectType, Statement};
use sluice_storage::snapshot::Snapshot;

use crate::catalog::DEFAULT_SCHEMA;
use crate::control::StatementControl;
use crate::database::DatabaseInner;
use crate::error::{Error, Result};
use crate::sql::catalog_provider::{SluiceCatalogProvider, TempSchema};
use crate::syntax::parser::{parse_statement_text, parse_statements, SluiceStatement};

/// The catalog name DataFusion knows the warehouse by.
pub use crate::names::CATALOG_NAME;

/// The result of one statement.
#[derive(Debug, Clone)]
pub enum StatementResult {
    /// Rows (SELECT, SHOW, DESCRIBE, ...).
    Rows { schema: SchemaRef, batches: Vec<RecordBatch> },
    /// A command and its Postgres command tag (`INSERT 0 3`, `CREATE TABLE`, ...).
    Command { tag: String, rows: Option<u64> },
}

impl StatementResult {
    pub fn command(tag: impl Into<String>) -> Self {
        StatementResult::Command { tag: tag.into(), rows: None }
    }

    pub fn count(tag: &str, rows: u64) -> Self {
        StatementResult::Command { tag: format!("{tag} {rows}"), rows: Some(rows) }
    }

    /// The rows, or nothing for commands.
    pub fn batches(&self) -> &[RecordBatch] {
        match self {
            StatementResult::Rows { batches, .. } => batches,
            StatementResult::Command { .. } => &[],
        }
    }
}

/// A statement parsed once and run many times with `$n` parameters.
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    pub statement: SluiceStatement,
    /// The types of `$1..$n` where they could be inferred.
    pub parameter_types: Vec<Option<DataType>>,
    /// The columns a query returns (None for commands).
    pub result_schema: Option<SchemaRef>,
}

/// One client's session.
pub struct Session {
    pub(crate) db: Arc<DatabaseInner>,
    pub(crate) ctx: SessionContext,
    pub(crate) temp: Arc<TempSchema>,
    /// The snapshot each table is read at in the running statement.
    pub(crate) snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
    temp_counter: std::sync::atomic::AtomicU64,
    /// The rights of the role this session runs as (the owner's unless the server says otherwise).
    privileges: Mutex<crate::privileges::Privileges>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("session_id", &self.ctx.session_id()).finish()
    }
}

impl Session {
    pub(crate) fn new(db: Arc<DatabaseInner>) -> Self {
        let config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(true)
            .with_target_partitions(db.options.target_partitions)
            .set_str("datafusion.sql_parser.dialect", "PostgreSQL")
            .set_str("datafusion.execution.parquet.coerce_int96", "us")
            .set_bool("datafusion.execution.parquet.pushdown_filters", false);
        let pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool> =
            Arc::new(crate::memory::QueryMemoryPool::new(db.memory.clone(), db.query_memory_limit_bytes));
        let mut builder = SessionStateBuilder::new().with_config(config).with_default_features();
        match datafusion::execution::runtime_env::RuntimeEnvBuilder::new().with_memory_pool(pool).build_arc() {
            Ok(runtime) => builder = builder.with_runtime_env(runtime),
            Err(e) => tracing::warn!("queries of this session run without a memory limit: {e}"),
        }
        if let Some(planners) = builder.expr_planners() {
            planners.insert(0, Arc::new(crate::functions::json::JsonOperators));
        }
        let ctx = SessionContext::new_with_state(builder.build());
        let temp = Arc::new(TempSchema::default());
        let snapshots = Arc::new(Mutex::new(HashMap::new()));
        let provider = SluiceCatalogProvider::new(db.clone(), temp.clone(), snapshots.clone())
            .with_schema(crate::system::SYSTEM_SCHEMA, Arc::new(crate::system::SystemSchema::new(db.clone())));
        ctx.register_catalog(CATALOG_NAME, Arc::new(provider));
        crate::functions::register(&ctx, db.clone(), snapshots.clone());
        Self { db, ctx, temp, snapshots, temp_counter: Default::default(), privileges: Mutex::new(Default::default()) }
    }

    /// Sets the rights of the role this session runs as (the server does, per connection).
    pub fn set_privileges(&self, privileges: crate::privileges::Privileges) {
        *self.privileges.lock().unwrap_or_else(|p| p.into_inner()) = privileges;
    }

    /// The rights of the role this session runs as.
    pub fn privileges(&self) -> crate::privileges::Privileges {
        *self.privileges.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The DataFusion context (for planning by the server).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
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
            Some(StatementResult::Rows { batches, .. }) => Ok(batches),
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
        let statement = crate::sql::params::bind(statement, parameters)?;
        crate::rights::check_statement(&statement, control.privileges())?;
        self.db.catalog.refresh().await?;
        self.clear_statement_state();
        // Boxed: the future of a statement is large (every kind of statement, DataFusion's
        // planning), and callers should not carry it on their stacks.
        let result = sluice_storage::gate::gated(control, Box::pin(self.dispatch(statement))).await;
        self.clear_statement_state();
        result
    }

    pub(crate) fn clear_statement_state(&self) {
        self.snapshots.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.temp.clear();
    }

    /// A name for a temporary relation that lives for one statement.
    pub(crate) fn temp_name(&self, hint: &str) -> String {
        let n = self.temp_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{hint}_{n}")
    }

    async fn dispatch(&self, statement: SluiceStatement) -> Result<StatementResult> {
        match statement {
            SluiceStatement::CreateTable(create) => self.create_table(*create).await,
            SluiceStatement::DescribeHistory { table, limit } => self.describe_history(&table, limit).await,
            SluiceStatement::Optimize { table } => self.optimize(&table).await,
            SluiceStatement::Vacuum { table, retain_hours, dry_run } => {
                self.vacuum(&table, retain_hours, dry_run).await
            }
            SluiceStatement::Restore { table, target } => self.restore(&table, *target).await,
            SluiceStatement::InsertByName { table, query, overwrite } => {
                self.insert_by_name(&table, *query, overwrite).await
            }
            SluiceStatement::Streaming(statement) => self.streaming(*statement).await,
            SluiceStatement::Standard(statement) => self.dispatch_standard(*statement).await,
        }
    }

    async fn dispatch_standard(&self, statement: Statement) -> Result<StatementResult> {
        match statement {
            Statement::Query(query) => self.run_query(*query).await,
            Statement::Insert(insert) => self.insert_statement(insert).await,
            Statement::Update(update) => self.update_statement(update).await,
            Statement::Delete(delete) => self.delete_statement(delete).await,
            Statement::Merge(merge) => self.merge_statement(merge).await,
            Statement::Truncate(truncate) => self.truncate_statement(truncate).await,
            Statement::CreateSchema { schema_name, if_not_exists, .. } => {
                self.create_schema(&schema_name, if_not_exists).await
            }
            Statement::Drop { object_type: ObjectType::Role, if_exists, names, .. } => {
                self.db.roles.drop(&self.db.catalog, &names, if_exists).await?;
                Ok(StatementResult::command("DROP ROLE"))
            }
            Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                self.drop(object_type, if_exists, &names, cascade).await
            }
            Statement::CreateRole(create) => {
                self.db.roles.create(&self.db.catalog, &create).await?;
                Ok(StatementResult::command("CREATE ROLE"))
            }
            Statement::AlterRole { name, operation } => {
                self.db.roles.alter(&self.db.catalog, &name, &operation).await?;
                Ok(StatementResult::command("ALTER ROLE"))
            }
            Statement::AlterTable(alter) => self.alter_table(alter).await,
            Statement::StartTransaction { .. } => Ok(StatementResult::command("BEGIN")),
            Statement::Commit { .. } => Ok(StatementResult::command("COMMIT")),
            Statement::Rollback { .. } => Ok(StatementResult::command("ROLLBACK")),
            // Savepoints are accepted like BEGIN: every statement is atomic on its own.
            Statement::Savepoint { .. } => Ok(StatementResult::command("SAVEPOINT")),
            Statement::ReleaseSavepoint { .. } => Ok(StatementResult::command("RELEASE")),
            // Rights come from the role's kind (owner, normal, read-only; see crate::privileges),
            // not from grants on objects.
            Statement::Grant(_) | Statement::Revoke(_) => Err(Error::NotSupported(
                "GRANT and REVOKE (Sluice's roles are the warehouse owner, normal roles and read-only roles: \
                 CREATE ROLE ... IN ROLE pg_read_all_data makes a read-only one)"
                    .into(),
            )),
            other => self.run_datafusion(other).await,
        }
    }

    /// Applies Sluice's rewrites (time travel, bytea literals) to a statement and plans it with
    /// DataFusion.
    pub(crate) async fn plan_statement(&self, statement: Statement) -> Result<datafusion::logical_expr::LogicalPlan> {
        let statement = self.rewrite(statement).await?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(statement.clone())))
            .await
            .map_err(|e| self.planning_error(&statement, e))?;
        crate::rights::check_plan(&plan, self.privileges())?;
        Ok(plan)
    }

    /// Statements DataFusion runs as they are (EXPLAIN, SHOW, SET, DESCRIBE, ...).
    async fn run_datafusion(&self, statement: Statement) -> Result<StatementResult> {
        let tag = command_tag(&statement);
        let plan = self.plan_statement(statement).await?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
        let batches = self.collect(frame).await?;
        match tag {
            Some(tag) => Ok(StatementResult::command(tag)),
            None => Ok(StatementResult::Rows { schema, batches }),
        }
    }

    /// Runs a DataFrame and collects its rows, accounted in the query's memory limit.
    pub(crate) async fn collect(&self, frame: datafusion::dataframe::DataFrame) -> Result<Vec<RecordBatch>> {
        let pool = self.ctx.runtime_env().memory_pool.clone();
        crate::memory::collect_limited(frame.execute_stream().await?, &pool).await
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
        self.db.catalog.refresh().await?;
        self.clear_statement_state();
        let name = crate::names::parse_table_name(table)?;
        let result = sluice_storage::gate::gated(control, self.insert_batches(&name, batches, None)).await;
        self.clear_statement_state();
        result
    }
}

/// The command tag of a statement that DataFusion runs but that returns no rows to the client.
fn command_tag(statement: &Statement) -> Option<String> {
    match statement {
        Statement::Set(_) => Some("SET".into()),
        Statement::CreateView { .. } => Some("CREATE VIEW".into()),
        _ => None,
    }
}

/// Turns a `SluiceStatement` back into an AST statement where it is a standard one.
pub fn standard(statement: &SluiceStatement) -> Option<&Statement> {
    match statement {
        SluiceStatement::Standard(s) => Some(s),
        _ => None,
    }
}
