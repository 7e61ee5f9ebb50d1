//! Incrementally maintained materialized views (`CREATE MATERIALIZED VIEW v AS SELECT ...`).
//!
//! A view lives in memory while its database is open ([`view::LiveView`]): a dataflow
//! ([`dataflow`], [`join`], [`aggregate`] and its [`groups`]) compiled from its optimized plan
//! ([`compile`]) turns each input change (rows inserted and deleted, read from the input's change
//! data or handed over by the writer) into the change of the view's rows ([`output`]); a query
//! that cannot be maintained that way is recomputed in full, and the view says why. Readers get
//! the live rows, caught up with the inputs' latest versions first.
//!
//! A change's cost is cache misses: its rows touch state spread over far more memory than the
//! caches hold. So each operator takes a change's rows in batches ([`dataflow::PREFETCH_BATCH`]),
//! and for each batch first runs loops of prefetches or lookups alone (the CPU overlaps their
//! misses), one per level of state that the next level's address depends on, then applies the
//! rows to state that is in cache by then. The state's maps of keys
//! ([`keymap`]) keep their keys in their slots, so a lookup is one miss, and a slot can be
//! prefetched from the key's hash alone.
//!
//! Durability: a checkpoint writes the view's rows to its Delta table (what outside readers see)
//! together with `txn(appId = 'ivm-input:<table>', version)` per input and `txn('ivm-state', n)`
//! naming the operator state file `_sluice_state/<n>.bin` in the table's folder ([`state`]),
//! written first. A restart loads the latest checkpoint and replays the inputs' change data since
//! the versions it names, so it never recomputes from scratch (unless the state cannot be read,
//! which rebuilds the view and records why).
//!
//! - Sync views (the default) are maintained by the statement that wrote an input, after its
//!   commit; async views (`WITH (refresh = 'async')`) by the background worker.
//! - The worker also catches every view up with commits of other processes about once a second,
//!   and checkpoints changed views at most every [`CHECKPOINT_INTERVAL_MS`] (more rarely for views
//!   whose checkpoints are slow).

pub mod aggregate;
pub mod compile;
pub mod dataflow;
pub mod ddl;
pub mod groups;
pub mod join;
pub mod output;
pub mod state;
pub mod view;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::LogicalPlan;

use crate::catalog::{FlowMode, TableEntry, TableKind};
use crate::change::{Change, CommitListener, Operation};
use crate::error::{Error, Result};
use crate::provider::SluiceTable;
use crate::sql::context::QueryContext;
use crate::util::{lock, now_ms};
use crate::warehouse::Warehouse;
pub use dataflow::Delta;
use futures::future::BoxFuture;
use view::LiveView;

/// The pseudo-table of the change that starts a dataflow (a global aggregate's first row).
pub const START_TABLE: &str = "";
/// A changed view is checkpointed at most this often.
pub const CHECKPOINT_INTERVAL_MS: i64 = 1_000;
/// A checkpoint that took `d` waits at least `d` times this before the next one.
const CHECKPOINT_SLOWDOWN: i64 = 10;
/// The default delay of an async view.
pub const ASYNC_REFRESH_INTERVAL_MS_DEFAULT: u64 = 1_000;

/// What `sluice.views` shows of a view.
#[derive(Debug, Clone, Default)]
pub struct ViewStatus {
    pub state: &'static str,
    pub strategy: &'static str,
    pub reason: Option<String>,
    pub inputs: String,
    pub rows: u64,
    pub runs: u64,
    pub last_maintenance_us: Option<u64>,
    pub last_rows_in: u64,
    pub maintained_at_ms: Option<i64>,
    pub checkpoint_version: Option<u64>,
    pub checkpoint_inputs: Option<String>,
    pub checkpoint_at_ms: Option<i64>,
    checkpoint_cost_ms: i64,
    pub error: Option<String>,
    pub failures: u32,
    retry_at_ms: i64,
}

/// One view's live state and its maintenance session.
#[derive(Default)]
pub struct ViewHandle {
    live: tokio::sync::Mutex<Option<(LiveView, QueryContext)>>,
    status: Mutex<ViewStatus>,
}

/// The views of a database held in memory, by table id.
pub struct ViewRuntime {
    db: Arc<Warehouse>,
    views: Mutex<HashMap<String, Arc<ViewHandle>>>,
}

impl std::fmt::Debug for ViewRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewRuntime").finish_non_exhaustive()
    }
}

impl ViewRuntime {
    pub fn new(db: Arc<Warehouse>) -> Self {
        Self { db, views: Default::default() }
    }

    fn handle(&self, id: &str) -> Arc<ViewHandle> {
        lock(&self.views).entry(id.to_string()).or_default().clone()
    }

    /// Every view's status, by table id.
    pub fn statuses(&self) -> HashMap<String, ViewStatus> {
        lock(&self.views).iter().map(|(id, h)| (id.clone(), lock(&h.status).clone())).collect()
    }

    pub fn forget(&self, id: &str) {
        lock(&self.views).remove(id);
    }

    /// Drops the views held in memory (each holds a session, and so the database's shared state):
    /// the last `Database` handle calls this. A view needed again is loaded from its checkpoint.
    pub(crate) fn release(&self) {
        lock(&self.views).clear();
    }

    /// Installs a view built by CREATE (so that it is not loaded again).
    fn install(&self, live: LiveView, session: QueryContext, checkpoint_version: u64) -> Arc<ViewHandle> {
        let handle = self.handle(&live.entry.id);
        {
            let mut status = lock(&handle.status);
            status.checkpoint_version = Some(checkpoint_version);
            status.checkpoint_inputs = Some(versions_text(&live.versions()));
            status.checkpoint_at_ms = Some(now_ms());
            describe(&mut status, &live);
        }
        if let Ok(mut slot) = handle.live.try_lock() {
            *slot = Some((live, session));
        }
        handle
    }
}

fn versions_text(versions: &BTreeMap<String, Option<u64>>) -> String {
    versions
        .iter()
        .map(|(k, v)| format!("{k}@{}", v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe(status: &mut ViewStatus, live: &LiveView) {
    status.strategy = live.strategy_name();
    status.reason = live.reason();
    status.inputs = versions_text(&live.versions());
    status.rows = live.output.total;
    if status.state.is_empty() {
        status.state = "idle";
    }
}

/// Runs a plan with its tables pinned at given versions (`None`: read as empty).
pub struct Requery<'a> {
    pub db: &'a Arc<Warehouse>,
    pub session: &'a QueryContext,
    pub versions: BTreeMap<String, Option<u64>>,
}

impl Requery<'_> {
    pub async fn run(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>> {
        let mut sources = HashMap::new();
        for key in view::scanned_tables(&plan) {
            let Some(entry) = self.db.catalog.current().tables.get(&key).cloned() else { continue };
            let table = self.db.open_table(&entry).await?;
            let provider: Arc<dyn datafusion::catalog::TableProvider> = match self.versions.get(&key) {
                Some(None) => {
                    Arc::new(datafusion::datasource::empty::EmptyTable::new(table.cached_snapshot().arrow_schema()))
                }
                Some(Some(version)) => {
                    let snapshot = table.snapshot_at_version(*version).await?;
                    Arc::new(SluiceTable::new(table, snapshot, self.db.scan_options()))
                }
                None => {
                    let snapshot = table.snapshot().await?;
                    Arc::new(SluiceTable::new(table, snapshot, self.db.scan_options()))
                }
            };
            sources.insert(key, provider_as_source(provider));
        }
        let pinned = plan
            .transform_up(|node| match node {
                LogicalPlan::TableScan(mut scan) => match sources.get(&compile::table_key(&scan.table_name)) {
                    Some(source) => {
                        scan.source = source.clone();
                        Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
                    }
                    None => Ok(Transformed::no(LogicalPlan::TableScan(scan))),
                },
                other => Ok(Transformed::no(other)),
            })?
            .data;
        Ok(self.session.ctx.execute_logical_plan(pinned).await?.collect().await?)
    }
}

/// The view's table schema (its Delta table's columns).
async fn view_schema(db: &Arc<Warehouse>, entry: &TableEntry) -> Result<SchemaRef> {
    Ok(db.open_table(entry).await?.cached_snapshot().arrow_schema())
}

/// Loads a view: from its last checkpoint, or built from scratch when there is none usable.
async fn open(db: &Arc<Warehouse>, entry: &TableEntry, status: &Mutex<ViewStatus>) -> Result<(LiveView, QueryContext)> {
    let session = QueryContext::new(db.clone());
    let schema = view_schema(db, entry).await?;
    let mut live = LiveView::new(&session, entry, schema).await?;
    match state::restore(db, &mut live).await {
        Ok(Some(version)) => {
            let mut status = lock(status);
            status.checkpoint_version = Some(version);
            status.checkpoint_inputs = Some(versions_text(&live.versions()));
        }
        Ok(None) => {
            live.build(db, &session).await?;
        }
        Err(e) => {
            db.events.record_view_event(
                &entry.qualified_name(),
                "rebuild",
                0,
                Some(format!("checkpoint not usable: {e}")),
            );
            live.build(db, &session).await?;
        }
    }
    Ok((live, session))
}

/// Brings a view up to date (all inputs, or one input's commit) and records the outcome.
async fn maintain(
    views: &Arc<ViewRuntime>,
    entry: &TableEntry,
    only: Option<(&str, u64, Option<&[Delta]>)>,
) -> Result<Arc<ViewHandle>> {
    let db = &views.db;
    let handle = views.handle(&entry.id);
    let mut slot = handle.live.lock().await;
    let started = Instant::now();
    let result = async {
        if slot.is_none() {
            *slot = Some(open(db, entry, &handle.status).await?);
        }
        let Some((live, session)) = slot.as_mut() else { return Err(Error::Internal("view not loaded".into())) };
        let outcome = match live.catch_up(db, session, only).await {
            Ok(outcome) => outcome,
            // The change data may be gone (VACUUM) or unreadable: rebuild from the inputs.
            Err(e) => {
                db.events.record_view_event(
                    &entry.qualified_name(),
                    "rebuild",
                    0,
                    Some(format!("catching up failed: {e}")),
                );
                let rows_in = live.build(db, session).await?;
                return Ok((true, rows_in));
            }
        };
        if outcome.rebuild {
            // An input's columns changed: plan again and build from scratch.
            let schema = view_schema(db, entry).await?;
            *live = LiveView::new(session, entry, schema).await?;
            live.build(db, session).await?;
            return Ok((true, 0));
        }
        Ok((outcome.changed, outcome.rows_in))
    }
    .await;
    let mut status = lock(&handle.status);
    match &result {
        Ok((changed, rows_in)) => {
            if let Some((live, _)) = slot.as_ref() {
                describe(&mut status, live);
            }
            if *changed {
                status.runs += 1;
                status.last_maintenance_us = Some(started.elapsed().as_micros() as u64);
                status.last_rows_in = *rows_in;
                status.maintained_at_ms = Some(now_ms());
            }
            status.state = "idle";
            status.error = None;
            status.failures = 0;
        }
        Err(e) => {
            // The in-memory state may be half-applied: drop it, the next run reloads.
            *slot = None;
            status.state = "failed";
            status.error = Some(e.to_string());
            status.failures += 1;
            status.retry_at_ms = now_ms() + crate::util::retry_delay_ms(status.failures);
            db.events.record_view_event(&entry.qualified_name(), "failure", 0, Some(e.to_string()));
        }
    }
    drop(status);
    drop(slot);
    result.map(|_| handle)
}

/// [`maintain`] in a task of its own, awaited: a statement dropped while it waits (cancelled,
/// timed out, its client gone) cannot stop a view's maintenance half-way, which would leave the
/// view claiming input versions it never applied.
async fn maintain_to_end(
    views: &Arc<ViewRuntime>,
    entry: &TableEntry,
    only: Option<(&str, u64, Option<&[Delta]>)>,
) -> Result<Arc<ViewHandle>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return maintain(views, entry, only).await };
    let (views, entry) = (views.clone(), entry.clone());
    let only = only.map(|(key, version, rows)| (key.to_string(), version, rows.map(<[Delta]>::to_vec)));
    let task = runtime.spawn(async move {
        let only = only.as_ref().map(|(key, version, rows)| (key.as_str(), *version, rows.as_deref()));
        maintain(&views, &entry, only).await
    });
    task.await.map_err(|e| Error::Internal(format!("the maintenance of a view stopped: {e}")))?
}

/// The views that read `table_key` (directly or through other views).
fn views_reading(db: &Warehouse, table_key: &str) -> Vec<TableEntry> {
    db.catalog.current().tables.values().filter(|t| reads(t, table_key)).cloned().collect()
}

/// Whether a materialized view reads the table `key` (a writer then hands its changed rows over).
fn is_view_input(db: &Warehouse, key: &str) -> bool {
    db.catalog.current().tables.values().any(|t| reads(t, key))
}

/// Whether `entry` is a materialized view with `table_key` among its inputs.
fn reads(entry: &TableEntry, table_key: &str) -> bool {
    entry.view.as_ref().is_some_and(|v| v.inputs.iter().any(|i| i == table_key))
}

/// The views' [`CommitListener`]: after a commit of a view's input, maintains the sync views over
/// it (with the rows it changed, when the writer knows them: weights +1 inserted, -1 deleted);
/// async views are left to the worker. A failure is recorded on the view (and retried), not
/// returned to the writer.
pub(crate) struct ViewListener(pub std::sync::Weak<ViewRuntime>);

impl CommitListener for ViewListener {
    fn committed<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // OPTIMIZE and metadata commits change no rows; a view's own checkpoint is read by
            // the views over it from its live rows, not through this.
            if !change.operation.changes_rows() || change.operation == Operation::ViewCheckpoint {
                return Ok(());
            }
            let Some(views) = self.0.upgrade() else { return Ok(()) };
            let db = &views.db;
            let rows: Option<Vec<Delta>> = change.rows.as_ref().map(|rows| {
                let deleted = rows.deleted.iter().cloned().map(Delta::deleted);
                deleted.chain(rows.inserted.iter().cloned().map(Delta::inserted)).collect()
            });
            for view in views_reading(db, &change.table) {
                let Some(definition) = &view.view else { continue };
                if definition.refresh == FlowMode::Async {
                    db.wake_worker();
                    continue;
                }
                let _ = maintain_to_end(&views, &view, Some((&change.table, change.version, rows.as_deref()))).await;
            }
            Ok(())
        })
    }

    fn wants_rows(&self, table: &str) -> bool {
        self.0.upgrade().is_some_and(|views| is_view_input(&views.db, table))
    }
}

/// A view's rows for a reader, caught up with its inputs' latest versions first.
pub async fn read(views: &Arc<ViewRuntime>, entry: &TableEntry) -> Result<(SchemaRef, Arc<Vec<RecordBatch>>)> {
    let handle = maintain_to_end(views, entry, None).await?;
    let mut slot = handle.live.lock().await;
    let Some((live, _)) = slot.as_mut() else { return Err(Error::Internal("view not loaded".into())) };
    Ok((live.output.schema.clone(), live.output.batches()?))
}

/// REFRESH MATERIALIZED VIEW: catches up (or, FULL, rebuilds from scratch), then checkpoints.
pub async fn refresh(views: &Arc<ViewRuntime>, entry: &TableEntry, full: bool) -> Result<()> {
    let db = &views.db;
    let handle = maintain_to_end(views, entry, None).await?;
    if full {
        let mut slot = handle.live.lock().await;
        if let Some((live, session)) = slot.as_mut() {
            let started = Instant::now();
            live.build(db, session).await?;
            live.output.batches()?;
            let mut status = lock(&handle.status);
            describe(&mut status, live);
            status.runs += 1;
            status.last_maintenance_us = Some(started.elapsed().as_micros() as u64);
            status.maintained_at_ms = Some(now_ms());
        }
    }
    checkpoint(views, &handle).await
}

/// A view's status for `sluice.views` (loading and catching it up first; a failure shows in it).
pub async fn status(views: &Arc<ViewRuntime>, entry: &TableEntry) -> ViewStatus {
    let _ = maintain_to_end(views, entry, None).await;
    let handle = views.handle(&entry.id);
    let status = lock(&handle.status).clone();
    status
}

/// EXPLAIN MATERIALIZED VIEW.
pub async fn explain(views: &Arc<ViewRuntime>, entry: &TableEntry) -> Result<Vec<String>> {
    let handle = maintain(views, entry, None).await?;
    let slot = handle.live.lock().await;
    Ok(slot.as_ref().map(|(live, _)| live.explain()).unwrap_or_default())
}

/// Writes a checkpoint of a loaded view that changed since its last one.
async fn checkpoint(views: &Arc<ViewRuntime>, handle: &ViewHandle) -> Result<()> {
    let db = &views.db;
    let started = Instant::now();
    let mut slot = handle.live.lock().await;
    let Some((live, _)) = slot.as_mut() else { return Ok(()) };
    if !live.dirty {
        return Ok(());
    }
    let version = state::checkpoint(db, live).await?;
    live.dirty = false;
    let mut status = lock(&handle.status);
    status.checkpoint_version = Some(version);
    status.checkpoint_inputs = Some(versions_text(&live.versions()));
    status.checkpoint_at_ms = Some(now_ms());
    status.checkpoint_cost_ms = started.elapsed().as_millis() as i64;
    db.events.record(crate::events::FlowEvent {
        at_ms: now_ms(),
        flow: live.entry.qualified_name(),
        kind: "checkpoint",
        source_to: i64::try_from(version).ok(),
        message: status.checkpoint_inputs.clone(),
        duration_ms: Some(status.checkpoint_cost_ms),
        ..Default::default()
    });
    Ok(())
}

/// The worker's pass over views: async views that are due, every view when `full` (commits of
/// other processes), failed views whose retry time came; then checkpoints of changed views.
pub async fn worker_pass(views: &Arc<ViewRuntime>, full: bool) {
    let db = &views.db;
    let state = db.catalog.current();
    let statuses = views.statuses();
    let now = now_ms();
    for entry in state.tables.values().filter(|t| t.kind == TableKind::MaterializedView) {
        let Some(definition) = &entry.view else { continue };
        let status = statuses.get(&entry.id);
        let failed = status.is_some_and(|s| s.state == "failed");
        let due = if failed {
            status.is_some_and(|s| s.retry_at_ms <= now)
        } else if definition.refresh == FlowMode::Async {
            let interval = definition.refresh_interval_ms.unwrap_or(ASYNC_REFRESH_INTERVAL_MS_DEFAULT) as i64;
            full || status.and_then(|s| s.maintained_at_ms).is_none_or(|t| now - t >= interval)
        } else {
            full
        };
        if due {
            let _ = maintain(views, entry, None).await;
        }
    }
    let handles: Vec<(String, Arc<ViewHandle>)> =
        lock(&views.views).iter().map(|(id, h)| (id.clone(), h.clone())).collect();
    for (id, handle) in handles {
        if !state.tables.values().any(|t| t.id == id) {
            views.forget(&id);
            continue;
        }
        let (last, cost) = {
            let status = lock(&handle.status);
            (status.checkpoint_at_ms.unwrap_or(0), status.checkpoint_cost_ms)
        };
        if now - last >= CHECKPOINT_INTERVAL_MS.max(cost * CHECKPOINT_SLOWDOWN) {
            let _ = checkpoint(views, &handle).await;
        }
    }
}
