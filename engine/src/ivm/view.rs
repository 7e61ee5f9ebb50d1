//! One materialized view held live in memory: its plan, its strategy (a dataflow, or a full
//! recompute and why), the input versions its rows reflect, and its rows.
//!
//! A view over other materialized views is planned with their definitions inlined, so every
//! dataflow reads only tables; its inputs are those tables.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{cast, col, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::Statement;

use super::compile::{table_key, CompileContext};
use super::dataflow::{Change, Delta, Node};
use super::output::OutputStore;
use super::{Requery, START_TABLE};
use crate::catalog::{TableEntry, TableKind};
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;
use crate::warehouse::Warehouse;

/// Views inlined into one another at most this deep.
const VIEW_NESTING_MAX: usize = 16;
/// Rows per change batch fed to a dataflow when it is built from scratch.
const BUILD_BATCH_ROWS: usize = 1 << 20;

/// How a view is kept up to date.
pub enum Strategy {
    Incremental(Box<Node>),
    /// Recomputed in full after its inputs change, because of `reason`.
    Recompute {
        reason: String,
    },
}

/// An input table and the version of it the view's rows reflect (`None`: none yet, as if empty).
#[derive(Debug, Clone)]
pub struct Input {
    pub version: Option<u64>,
    /// The table's columns when the view was planned (a change of them rebuilds the view).
    pub columns: Vec<String>,
}

pub struct LiveView {
    pub entry: TableEntry,
    pub plan: LogicalPlan,
    pub strategy: Strategy,
    pub inputs: BTreeMap<String, Input>,
    pub output: OutputStore,
    /// A hash of the dataflow's shape and types (a checkpoint of another shape is not loaded).
    pub fingerprint: String,
    /// Changed since the last checkpoint.
    pub dirty: bool,
}

/// What one catch-up did.
#[derive(Debug, Default)]
pub struct CatchUp {
    pub rows_in: u64,
    pub changed: bool,
    /// The inputs' schema changed: the view must be rebuilt.
    pub rebuild: bool,
}

/// Plans a view's query: views it reads are inlined, then DataFusion optimizes the whole plan.
pub async fn plan_view(session: &QueryContext, query: &str) -> Result<LogicalPlan> {
    Ok(plan_view_naming(session, query).await?.0)
}

/// [`plan_view`], and the keys of the materialized views the query names directly.
pub async fn plan_view_naming(session: &QueryContext, query: &str) -> Result<(LogicalPlan, Vec<String>)> {
    let (plan, views) = plan_inlined(session, query, 0).await?;
    Ok((session.ctx.state().optimize(&plan)?, views))
}

fn plan_inlined<'a>(
    session: &'a QueryContext,
    query: &'a str,
    depth: usize,
) -> super::dataflow::BoxFuture<'a, Result<(LogicalPlan, Vec<String>)>> {
    Box::pin(async move {
        if depth > VIEW_NESTING_MAX {
            return Err(Error::Plan(format!(
                "materialized views nest more than {VIEW_NESTING_MAX} deep (does a view read itself?)"
            )));
        }
        let statement = match crate::syntax::parser::parse_statement_text(query)? {
            crate::syntax::parser::SluiceStatement::Standard(s) if matches!(*s, Statement::Query(_)) => *s,
            _ => return Err(Error::Plan("a materialized view is defined by a query".into())),
        };
        let plan = session.plan_statement(statement).await?;
        session.clear_statement_state();
        let catalog = session.db.catalog.current();
        let mut views: HashMap<String, (TableEntry, LogicalPlan)> = HashMap::new();
        for key in scanned_tables(&plan) {
            if let Some(entry) = catalog.tables.get(&key).filter(|e| e.kind == TableKind::MaterializedView) {
                let definition =
                    entry.view.as_ref().ok_or_else(|| Error::Internal(format!("view {key} has no query")))?;
                let (inner, _) = plan_inlined(session, &definition.query, depth + 1).await?;
                views.insert(key, (entry.clone(), inner));
            }
        }
        let mut named: Vec<String> = views.keys().cloned().collect();
        named.sort();
        if views.is_empty() {
            return Ok((plan, named));
        }
        let inlined = plan.transform_up(|node| {
            let LogicalPlan::TableScan(scan) = &node else { return Ok(Transformed::no(node)) };
            let Some((_, inner)) = views.get(&table_key(&scan.table_name)) else { return Ok(Transformed::no(node)) };
            // Cast to the view table's column types, which the outer query was planned against.
            let source = scan.source.schema();
            let exprs: Vec<_> = inner
                .schema()
                .columns()
                .into_iter()
                .zip(source.fields())
                .map(|(column, field)| cast(col(column), field.data_type().clone()).alias(field.name()))
                .collect();
            let projected = LogicalPlanBuilder::from(inner.clone()).project(exprs)?.alias(scan.table_name.clone())?;
            let projected = match &scan.projection {
                Some(indices) => {
                    let columns: Vec<_> = indices
                        .iter()
                        .map(|&i| {
                            col(datafusion::common::Column::new(Some(scan.table_name.clone()), source.field(i).name()))
                        })
                        .collect();
                    projected.project(columns)?
                }
                None => projected,
            };
            Ok(Transformed::yes(projected.build()?))
        })?;
        Ok((inlined.data, named))
    })
}

/// The catalog keys of the tables a plan scans.
pub fn scanned_tables(plan: &LogicalPlan) -> Vec<String> {
    let mut keys = Vec::new();
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            keys.push(table_key(&scan.table_name));
        }
        // Subqueries in expressions are plans too.
        let _ = node.apply_subqueries(|sub| {
            keys.extend(scanned_tables(sub));
            Ok(TreeNodeRecursion::Continue)
        });
        Ok(TreeNodeRecursion::Continue)
    });
    keys.sort();
    keys.dedup();
    keys
}

impl LiveView {
    /// Plans and compiles a view (empty: no input applied yet).
    pub async fn new(session: &QueryContext, entry: &TableEntry, schema: SchemaRef) -> Result<Self> {
        let definition = entry.view.as_ref().ok_or_else(|| Error::Internal("not a materialized view".into()))?;
        let plan = plan_view(session, &definition.query).await?;
        let catalog = session.db.catalog.current();
        let state = session.ctx.state();
        let context = CompileContext { state: &state, catalog: &catalog };
        let strategy = match context.compile(&plan) {
            Ok(node) => Strategy::Incremental(Box::new(node)),
            Err(fallback) => Strategy::Recompute { reason: fallback.0 },
        };
        let mut inputs = BTreeMap::new();
        for key in scanned_tables(&plan) {
            let Some(input) = catalog.tables.get(&key) else { continue };
            let table = session.db.open_table(input).await?;
            let columns = table.cached_snapshot().arrow_schema().fields().iter().map(|f| f.name().clone()).collect();
            inputs.insert(key, Input { version: None, columns });
        }
        let mut lines = Vec::new();
        if let Strategy::Incremental(node) = &strategy {
            node.describe(0, &mut lines);
        }
        let fingerprint = format!("{:?}|{}", plan.schema().as_arrow().fields(), lines.join("\n"));
        let key = match &strategy {
            Strategy::Incremental(node) => node.unique_key(),
            Strategy::Recompute { .. } => None,
        };
        Ok(Self {
            entry: entry.clone(),
            plan,
            strategy,
            inputs,
            output: OutputStore::new(schema, key)?,
            fingerprint,
            dirty: true,
        })
    }

    pub fn strategy_name(&self) -> &'static str {
        match self.strategy {
            Strategy::Incremental(_) => "incremental",
            Strategy::Recompute { .. } => "recompute",
        }
    }

    pub fn reason(&self) -> Option<String> {
        match &self.strategy {
            Strategy::Incremental(_) => None,
            Strategy::Recompute { reason } => Some(reason.clone()),
        }
    }

    /// EXPLAIN MATERIALIZED VIEW.
    pub fn explain(&self) -> Vec<String> {
        let mut lines = vec![match &self.strategy {
            Strategy::Incremental(_) => "strategy: incremental".to_string(),
            Strategy::Recompute { reason } => format!("strategy: recompute ({reason})"),
        }];
        match &self.strategy {
            Strategy::Incremental(node) => {
                node.describe(0, &mut lines);
                lines.push(match self.output.key_names() {
                    Some(key) => format!("Rows: indexed by the unique key ({})", key.join(", ")),
                    None => "Rows: indexed by whole row".to_string(),
                });
            }
            Strategy::Recompute { .. } => {
                lines.extend(self.plan.display_indent().to_string().lines().map(str::to_string))
            }
        }
        lines
    }

    /// The input versions the rows reflect.
    pub fn versions(&self) -> BTreeMap<String, Option<u64>> {
        self.inputs.iter().map(|(k, i)| (k.clone(), i.version)).collect()
    }

    /// Builds the rows from scratch at the inputs' latest versions.
    pub async fn build(&mut self, db: &Arc<Warehouse>, session: &QueryContext) -> Result<u64> {
        for input in self.inputs.values_mut() {
            input.version = None;
        }
        if let Strategy::Incremental(node) = &mut self.strategy {
            node.reset();
        }
        self.output.clear();
        self.dirty = true;
        let latest = self.latest_versions(db).await?;
        if let Strategy::Recompute { .. } = self.strategy {
            for (key, version) in &latest {
                if let Some(input) = self.inputs.get_mut(key) {
                    input.version = Some(*version);
                }
            }
            self.recompute(db, session).await?;
            return Ok(0);
        }
        self.push(
            db,
            session,
            START_TABLE,
            &Delta::new(RecordBatch::new_empty(Arc::new(arrow::datatypes::Schema::empty())), vec![]),
        )
        .await?;
        let mut rows_in = 0;
        for (key, version) in latest {
            let entry = current_entry(db, &key)?;
            let table = db.open_table(&entry).await?;
            let snapshot = table.snapshot_at_version(version).await?;
            let options = db.scan_options();
            let batches = sluice_storage::scan::scan(&snapshot, &options).await?;
            if let Some(input) = self.inputs.get_mut(&key) {
                input.version = Some(version);
            }
            // The scan's batches (a few thousand rows each) are pushed in slices of about
            // BUILD_BATCH_ROWS: each push emits every group it touches, so small pushes would
            // emit a grouped view's rows over and over.
            let schema = match batches.first() {
                Some(batch) => batch.schema(),
                None => continue,
            };
            let mut pending: Vec<RecordBatch> = Vec::new();
            let mut pending_rows = 0;
            let count = batches.len();
            for (n, batch) in batches.into_iter().enumerate() {
                pending_rows += batch.num_rows();
                pending.push(batch);
                if pending_rows < BUILD_BATCH_ROWS && n + 1 < count {
                    continue;
                }
                let slice = arrow::compute::concat_batches(&schema, &pending)?;
                pending.clear();
                pending_rows = 0;
                rows_in += slice.num_rows() as u64;
                self.push(db, session, &key, &Delta::inserted(slice)).await?;
            }
        }
        Ok(rows_in)
    }

    async fn latest_versions(&self, db: &Arc<Warehouse>) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for key in self.inputs.keys() {
            let table = db.open_table(&current_entry(db, key)?).await?;
            out.push((key.clone(), table.snapshot().await?.version()));
        }
        Ok(out)
    }

    /// Pushes one input's change through the dataflow into the rows (the input's version must
    /// already be set to the change's).
    async fn push(&mut self, db: &Arc<Warehouse>, session: &QueryContext, table: &str, delta: &Delta) -> Result<()> {
        let versions = self.versions();
        let Strategy::Incremental(node) = &mut self.strategy else { return Ok(()) };
        let requery = Requery { db, session, versions };
        let change = Change { table, delta };
        if let Some(out) = node.apply(&change, &requery).await? {
            self.output.apply(&out)?;
        }
        self.dirty = true;
        Ok(())
    }

    /// Runs the query at the applied versions and replaces the rows.
    pub async fn recompute(&mut self, db: &Arc<Warehouse>, session: &QueryContext) -> Result<()> {
        let requery = Requery { db, session, versions: self.versions() };
        let batches = requery.run(self.plan.clone()).await?;
        self.output.replace(&batches)?;
        self.dirty = true;
        Ok(())
    }

    /// Applies the inputs' commits after the versions applied: all inputs, or only `only` (with
    /// its rows when the writer handed them over: `(version, rows)` changed by that version).
    pub async fn catch_up(
        &mut self,
        db: &Arc<Warehouse>,
        session: &QueryContext,
        only: Option<(&str, u64, Option<&[Delta]>)>,
    ) -> Result<CatchUp> {
        let mut outcome = CatchUp::default();
        let keys: Vec<String> = match only {
            Some((key, _, _)) => vec![key.to_string()],
            None => self.inputs.keys().cloned().collect(),
        };
        let mut recompute = false;
        for key in keys {
            let Some(input) = self.inputs.get(&key).cloned() else { continue };
            let table = db.open_table(&current_entry(db, &key)?).await?;
            let known = only.and_then(|(_, version, rows)| rows.map(|r| (version, r)));
            let latest = match only {
                Some((_, version, _)) if table.cached_snapshot().version() >= version => table.cached_snapshot(),
                _ => table.snapshot().await?,
            };
            let start = input.version.map(|v| v + 1).unwrap_or(0);
            let end = latest.version();
            if start > end {
                continue;
            }
            let columns: Vec<String> = latest.arrow_schema().fields().iter().map(|f| f.name().clone()).collect();
            if columns != input.columns {
                outcome.rebuild = true;
                return Ok(outcome);
            }
            outcome.changed = true;
            if let Strategy::Recompute { .. } = self.strategy {
                recompute = true;
                if let Some(input) = self.inputs.get_mut(&key) {
                    input.version = Some(end);
                }
                continue;
            }
            // One push per version with all of its changes: a min/max re-aggregation queries the
            // input at the version being applied, so the state must hold that whole version by
            // then (the deletes of an UPDATE pushed before its inserts made a requery count the
            // new values twice).
            let changes: Vec<(u64, Delta)> = match known {
                Some((version, rows)) if start == version && end == version => {
                    Delta::concat(rows.to_vec())?.map(|d| (version, d)).into_iter().collect()
                }
                _ => read_changes(&table, start, end, columns.len()).await?,
            };
            for (version, delta) in changes {
                outcome.rows_in += delta.len() as u64;
                if let Some(input) = self.inputs.get_mut(&key) {
                    input.version = Some(version);
                }
                self.push(db, session, &key, &delta).await?;
            }
            if let Some(input) = self.inputs.get_mut(&key) {
                input.version = Some(end);
            }
        }
        if recompute {
            self.recompute(db, session).await?;
        }
        Ok(outcome)
    }
}

/// The catalog entry of an input table.
pub fn current_entry(db: &Warehouse, key: &str) -> Result<TableEntry> {
    db.catalog
        .current()
        .tables
        .get(key)
        .cloned()
        .ok_or_else(|| Error::UndefinedTable(format!("{key} (an input of a materialized view)")))
}

/// A table's changes in versions `start..=end` as deltas (one per version with changed rows, in
/// order).
async fn read_changes(
    table: &sluice_storage::table::Table,
    start: u64,
    end: u64,
    columns: usize,
) -> Result<Vec<(u64, Delta)>> {
    let mut out = Vec::new();
    for change in table.changes(start, Some(end)).await? {
        let mut deltas = Vec::new();
        for batch in change.batches {
            let Some(kinds) = batch.column_by_name(sluice_storage::write::CHANGE_TYPE_COLUMN) else { continue };
            let kinds = kinds.as_string::<i32>();
            let weights = (0..batch.num_rows())
                .map(|i| match kinds.value(i) {
                    "insert" | "update_postimage" => 1,
                    _ => -1,
                })
                .collect();
            deltas.push(Delta::new(batch.project(&(0..columns).collect::<Vec<_>>())?, weights));
        }
        if let Some(delta) = Delta::concat(deltas)? {
            out.push((change.version, delta));
        }
    }
    Ok(out)
}
