//! [`QueryContext`]: the planning layer. One DataFusion context over a database's catalog, the
//! snapshot each table is read at in the running statement, the statement's temporary relations,
//! and the rights of the role it runs as. The statements of every kind (SQL here, streaming
//! tables, views and sources in their features) are methods on it; a client's [`Session`] and the
//! runtimes of flows, views and sources each hold one.
//!
//! Every statement sees one snapshot per table: the first time a statement touches a table its
//! latest snapshot is taken and kept until the statement ends (a self-join reads one version).
//!
//! [`Session`]: crate::session::Session

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::execution::context::SessionContext;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionConfig;
use datafusion::sql::sqlparser::ast::Statement;
use sluice_storage::snapshot::Snapshot;

use super::catalog_provider::{SluiceCatalogProvider, TempSchema};
use crate::catalog::DEFAULT_SCHEMA;
use crate::error::Result;
use crate::names::CATALOG_NAME;
use crate::syntax::parser::SluiceStatement;
use crate::warehouse::Warehouse;

/// The result of one statement.
#[derive(Debug, Clone)]
pub enum StatementResult {
    /// Rows (SELECT, SHOW, DESCRIBE, ...).
    Rows { schema: SchemaRef, batches: Vec<RecordBatch> },
    /// A command and its Postgres command tag (`INSERT 0 3`, `CREATE TABLE`, ...).
    Command { tag: String, rows: Option<u64> },
    /// The rows of a command's RETURNING list, and the command's tag.
    Returned { tag: String, schema: SchemaRef, batches: Vec<RecordBatch> },
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
            StatementResult::Rows { batches, .. } | StatementResult::Returned { batches, .. } => batches,
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

/// A database's planning context (see the module documentation).
pub struct QueryContext {
    pub(crate) db: Arc<Warehouse>,
    pub(crate) ctx: SessionContext,
    pub(crate) temp: Arc<TempSchema>,
    /// The snapshot each table is read at in the running statement.
    pub(crate) snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
    /// The session's transaction block's staged tables (see [`crate::staging`]).
    pub(crate) staging: Arc<crate::staging::Staging>,
    temp_counter: std::sync::atomic::AtomicU64,
    /// The rights of the role this session runs as (the owner's unless the server says otherwise).
    privileges: Mutex<crate::privileges::Privileges>,
    /// The values the session's sequence calls gave (`currval`, `lastval`).
    pub(crate) sequences: Mutex<super::sequences::SessionValues>,
    /// Notices its statements gave the client (`table "t" does not exist, skipping`), until taken.
    notices: Mutex<Vec<String>>,
}

/// How many notices a context keeps until they are taken.
const NOTICES_KEPT: usize = 32;

impl std::fmt::Debug for QueryContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryContext").field("session_id", &self.ctx.session_id()).finish()
    }
}

impl QueryContext {
    /// A context whose statements never stage (flows', views', sources').
    pub fn new(db: Arc<Warehouse>) -> Self {
        Self::with_staging(db, Default::default())
    }

    /// A context whose statements use `staging` (a session's transaction block's).
    pub fn with_staging(db: Arc<Warehouse>, staging: Arc<crate::staging::Staging>) -> Self {
        let config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(true)
            .with_target_partitions(db.options.target_partitions)
            .set_str("datafusion.sql_parser.dialect", "PostgreSQL")
            // `0.1` is numeric in PostgreSQL, not float8.
            .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
            // `timestamptz` is a point in time (Arrow's zoned timestamp), kept in UTC; a session's
            // TimeZone only changes how it is printed (server/src/pg/text.rs).
            .set_str("datafusion.execution.time_zone", "UTC")
            .set_str("datafusion.execution.parquet.coerce_int96", "us")
            .set_bool("datafusion.execution.parquet.pushdown_filters", false)
            // A window's rows come out in the order of its PARTITION BY and ORDER BY, as from
            // PostgreSQL's WindowAgg (clients that leave out the query's ORDER BY rely on it):
            // not hash-repartitioned by the PARTITION BY, which would interleave them.
            .set_bool("datafusion.optimizer.repartition_windows", false);
        let pool: Arc<dyn datafusion::execution::memory_pool::MemoryPool> =
            Arc::new(crate::memory::QueryMemoryPool::new(db.memory.clone(), db.query_memory_limit_bytes));
        let mut builder = SessionStateBuilder::new().with_config(config).with_default_features();
        match datafusion::execution::runtime_env::RuntimeEnvBuilder::new().with_memory_pool(pool).build_arc() {
            Ok(runtime) => builder = builder.with_runtime_env(runtime),
            Err(e) => tracing::warn!("queries of this session run without a memory limit: {e}"),
        }
        if let Some(planners) = builder.expr_planners() {
            planners.insert(0, Arc::new(crate::functions::json::JsonOperators));
            planners.insert(0, Arc::new(crate::functions::interval::IntervalArithmetic));
        }
        {
            use crate::functions::arithmetic::{FloatBesideNumeric, IntegerLiterals, PostgresArithmetic};
            use datafusion::optimizer::analyzer::{
                resolve_grouping_function::ResolveGroupingFunction, type_coercion::TypeCoercion,
            };
            // Enum values order by their labels' order (after coercion: it compares positions).
            let enum_catalog: crate::functions::enums::CatalogSource = {
                let (db, staging) = (db.clone(), staging.clone());
                Arc::new(move || staging.catalog_view(&db.catalog))
            };
            // DataFusion's rules, with PostgreSQL's literal types before coercion and its
            // arithmetic after it.
            builder = builder.with_analyzer_rules(vec![
                Arc::new(crate::functions::rows::WholeRows),
                Arc::new(ResolveGroupingFunction::new()),
                Arc::new(IntegerLiterals),
                Arc::new(crate::functions::arithmetic::IntegerAggregates),
                Arc::new(FloatBesideNumeric),
                Arc::new(crate::functions::time_of_day::TimeTzLiterals),
                Arc::new(crate::functions::timestamp_literals::TimestampLiterals),
                Arc::new(TypeCoercion::new()),
                Arc::new(crate::functions::date_casts::DateTimeCasts),
                Arc::new(crate::functions::enums::EnumOrder::new(enum_catalog)),
                Arc::new(PostgresArithmetic),
                Arc::new(crate::functions::single_row::SingleRowSubqueries),
            ]);
        }
        let ctx = SessionContext::new_with_state(builder.build());
        let temp = Arc::new(TempSchema::default());
        let snapshots = Arc::new(Mutex::new(HashMap::new()));
        let mut provider = SluiceCatalogProvider::new(db.clone(), temp.clone(), snapshots.clone(), staging.clone());
        for (name, schema) in db.hooks.schemas() {
            provider = provider.with_schema(&name, schema);
        }
        ctx.register_catalog(CATALOG_NAME, Arc::new(provider));
        crate::functions::register(&ctx, db.clone(), snapshots.clone());
        // COLLATE's identity function lives beside its statement rewrite (crate::sql::collations).
        ctx.register_udf(crate::sql::collations::function());
        Self {
            db,
            ctx,
            temp,
            snapshots,
            staging,
            temp_counter: Default::default(),
            privileges: Mutex::new(Default::default()),
            sequences: Default::default(),
            notices: Default::default(),
        }
    }

    /// Sets the rights of the role this session runs as (the server does, per connection).
    pub fn set_privileges(&self, privileges: crate::privileges::Privileges) {
        *self.privileges.lock().unwrap_or_else(|p| p.into_inner()) = privileges;
    }

    /// Gives the client a NOTICE (as PostgreSQL's `DROP ... IF EXISTS` of a missing object does).
    pub(crate) fn notice(&self, message: String) {
        let mut notices = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        if notices.len() < NOTICES_KEPT {
            notices.push(message);
        }
    }

    /// The notices given since the last call.
    pub(crate) fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The rights of the role this session runs as.
    pub fn privileges(&self) -> crate::privileges::Privileges {
        *self.privileges.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's time zone (PostgreSQL's `TimeZone`, see `Session::set_time_zone`).
    pub fn time_zone(&self) -> String {
        // Read in place: `SessionContext::state` clones the whole session state.
        let state = self.ctx.state_ref();
        let zone = state.read().config_options().execution.time_zone.clone();
        zone.unwrap_or_else(|| "UTC".into())
    }

    /// The order the session's `DateStyle` reads `1/8/1999` in (see `Session::set_date_order`):
    /// literals in a statement and text written to date/time columns follow it (casts in a plan
    /// read it from the config options themselves, see `functions::date_casts`).
    pub(crate) fn date_order(&self) -> crate::datetime::DateOrder {
        crate::datetime::DateOrder::of_config(self.ctx.state_ref().read().config_options())
    }

    /// The DataFusion context (for planning by the server).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The catalog as this session's statements see it: with its transaction block's changes
    /// (see [`crate::catalog::changes`]).
    pub(crate) fn catalog_state(&self) -> Arc<crate::catalog::CatalogState> {
        self.staging.catalog_view(&self.db.catalog)
    }

    /// Changes the catalog for the running statement, held by the transaction block when the
    /// statement is one it stages (see [`crate::staging::Staging::update_catalog`]). Returns
    /// whether the block holds the change, and the change's value.
    pub(crate) async fn update_catalog<T>(
        &self,
        change: impl Fn(&mut crate::catalog::CatalogState) -> Result<T>,
    ) -> Result<(bool, T)> {
        self.staging.update_catalog(&self.db.catalog, change).await
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

    /// Applies Sluice's rewrites (time travel, bytea literals) to a statement and plans it with
    /// DataFusion.
    pub(crate) async fn plan_statement(&self, statement: Statement) -> Result<datafusion::logical_expr::LogicalPlan> {
        Ok(self.plan_rewritten(statement).await?.1)
    }

    /// [`QueryContext::plan_statement`], also returning the rewritten statement (whose names
    /// the result's columns follow).
    pub(crate) async fn plan_rewritten(
        &self,
        statement: Statement,
    ) -> Result<(Statement, datafusion::logical_expr::LogicalPlan)> {
        let statement = self.rewrite(statement).await?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(datafusion::sql::parser::Statement::Statement(Box::new(statement.clone())))
            .await
            .map_err(|e| self.planning_error(&statement, e))?;
        crate::rights::check_plan(&plan, self.privileges())?;
        // Analyzed here, so that the plan's schema has the types its rows will have (PostgreSQL's
        // literal types, see `functions::arithmetic`); a plan the analyzer refuses (one whose
        // parameters are not typed yet) is analyzed again when it runs.
        let state = self.ctx.state_ref();
        let state = state.read();
        let plan = match state.analyzer().execute_and_check(plan.clone(), state.config_options(), |_, _| {}) {
            Ok(analyzed) => analyzed,
            Err(_) => plan,
        };
        Ok((statement, plan))
    }

    /// Statements DataFusion runs as they are (EXPLAIN, SHOW, SET, DESCRIBE, ...).
    pub(crate) async fn run_datafusion(&self, statement: Statement) -> Result<StatementResult> {
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
}

/// The command tag of a statement that DataFusion runs but that returns no rows to the client.
fn command_tag(statement: &Statement) -> Option<String> {
    match statement {
        Statement::Set(_) => Some("SET".into()),
        Statement::CreateView { .. } => Some("CREATE VIEW".into()),
        Statement::Prepare { .. } => Some("PREPARE".into()),
        _ => None,
    }
}
