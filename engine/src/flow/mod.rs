//! The flow runtime: every flow (`source -> query -> target`) applies the source's new commits to
//! its target exactly once.
//!
//! A run reads the source's rows inserted after the flow's progress, runs the flow's query over
//! them, and commits the result to the target together with `txn(appId = flow name, version =
//! last source version read)`. The progress is that txn, read back from the target's log, so a
//! crash between the source's commit and the flow's leaves the flow to redo exactly the missing
//! versions; two runners of one flow conflict on the txn and the loser retries. Flows carry
//! appends: rows that UPDATE, DELETE or MERGE remove from a source are not retracted downstream
//! (as Delta Live Tables' streaming tables with `skipChangeCommits`).
//!
//! - Sync flows (the default) run inside the statement that wrote their source, after its commit,
//!   and then their target's flows, so the statement returns once the whole pipeline has it.
//! - Async flows and failed flows are run by one background worker per database: async flows as
//!   soon as their source moves (many source commits in one target commit), failed flows again
//!   after an exponential backoff. A writer waits when an async flow is more than
//!   [`ASYNC_LAG_VERSIONS_MAX`] versions behind (back-pressure).
//! - On open, and every second after, the worker catches every flow up from its target's txn
//!   (this also picks up commits other processes made to a flow's source).
//! - The worker also compacts the small files of tables that were written ([`compaction`]).
//!
//! Run states, errors and an event per run live in memory ([`FlowRuntime`]) and are served by the
//! `sluice` system schema.

pub mod apply;
pub mod cdc;
pub mod cdc_ddl;
mod cdc_history;
pub mod compaction;
pub mod ddl;
pub mod expand;
pub mod per_value;
pub mod query;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use futures::future::BoxFuture;
use sluice_storage::actions::Txn;

use crate::catalog::{FlowEntry, FlowMode};
use crate::change::{Change, CommitListener, Operation};
use crate::error::{Error, Result};
pub use crate::events::FlowEvent;
use crate::sql::context::QueryContext;
use crate::warehouse::Warehouse;

/// An async flow further behind its source than this makes the source's writers wait.
pub const ASYNC_LAG_VERSIONS_MAX: u64 = 64;
/// An async flow runs at most this often, so that it batches source commits.
pub const ASYNC_FLUSH_INTERVAL_MS: u64 = 100;
/// Runs of one flow retried after losing a commit race.
const RUN_CONFLICT_RETRY_MAX: usize = 20;

/// A flow's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowState {
    #[default]
    Idle,
    Running,
    Failed,
}

impl FlowState {
    pub fn as_str(&self) -> &'static str {
        match self {
            FlowState::Idle => "idle",
            FlowState::Running => "running",
            FlowState::Failed => "failed",
        }
    }
}

/// What the runtime knows about one flow.
#[derive(Debug, Clone, Default)]
pub struct FlowStatus {
    pub state: FlowState,
    /// The last source version applied (from the target's txn, or the runtime's own progress over
    /// versions that produced no rows).
    pub applied_version: Option<i64>,
    /// The source's version at the last run.
    pub source_version: Option<u64>,
    /// When the oldest unapplied source commit was seen, for the lag in seconds.
    pub last_run_ms: Option<i64>,
    pub error: Option<String>,
    pub failures: u32,
    pub retry_at_ms: i64,
    pub rows_out_total: u64,
    /// Runs that applied source versions, and the rows they read.
    pub runs: u64,
    pub rows_in_total: u64,
    /// Failed runs since the process started (`failures` counts those since the last success).
    pub failures_total: u64,
    /// How long the last such run took.
    pub last_duration_ms: Option<i64>,
}

/// What one run did.
#[derive(Debug, Default)]
pub struct RunOutcome {
    pub source_from: Option<i64>,
    pub source_to: Option<i64>,
    pub rows_in: u64,
    pub rows_out: u64,
    pub violations: BTreeMap<String, u64>,
}

/// The runtime state shared by every session of a database.
pub struct FlowRuntime {
    db: Arc<Warehouse>,
    /// Per flow: serializes its runs and keeps its session.
    runners: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<QueryContext>>>>>,
    status: Mutex<HashMap<String, FlowStatus>>,
    /// Tables written since the worker last looked at them (for auto-compaction).
    touched: Mutex<std::collections::BTreeSet<String>>,
    /// Per source of a per-value route: the last version it looked at (see
    /// [`per_value::discover`]; the catalog has it only now and then).
    scanned: Mutex<HashMap<String, (String, i64)>>,
}

impl std::fmt::Debug for FlowRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowRuntime").finish_non_exhaustive()
    }
}

pub(crate) use crate::util::{lock, now_ms};

impl FlowRuntime {
    pub fn new(db: Arc<Warehouse>) -> Self {
        Self {
            db,
            runners: Default::default(),
            status: Default::default(),
            touched: Default::default(),
            scanned: Default::default(),
        }
    }

    /// Every flow's status.
    pub fn statuses(&self) -> HashMap<String, FlowStatus> {
        lock(&self.status).clone()
    }

    fn update(&self, flow: &str, change: impl FnOnce(&mut FlowStatus)) {
        change(lock(&self.status).entry(flow.to_string()).or_default());
    }

    fn runner(&self, flow: &str) -> Arc<tokio::sync::Mutex<Option<QueryContext>>> {
        lock(&self.runners).entry(flow.to_string()).or_default().clone()
    }

    /// Drops the runners' sessions (each holds the database's shared state, so they would keep
    /// it alive): the last `Database` handle calls this. A runner needed again makes a new one.
    pub(crate) fn release(&self) {
        lock(&self.runners).clear();
    }

    /// Forgets a dropped flow (or one whose progress restarts).
    pub fn forget(&self, flow: &str) {
        lock(&self.status).remove(flow);
        lock(&self.runners).remove(flow);
    }

    /// Clears a flow's failure so that it runs again now.
    pub fn resume(&self, events: &crate::events::EventLog, flow: &str) {
        self.update(flow, |s| {
            s.state = FlowState::Idle;
            s.error = None;
            s.failures = 0;
            s.retry_at_ms = 0;
        });
        events.record(FlowEvent {
            at_ms: now_ms(),
            flow: flow.to_string(),
            kind: "resume",
            source_from: None,
            source_to: None,
            rows_in: 0,
            rows_out: 0,
            violations: BTreeMap::new(),
            message: None,
            ..Default::default()
        });
    }

    /// Resets the in-memory progress (after a full refresh rewrote the target's txn).
    pub fn reset_progress(&self, flow: &str) {
        self.update(flow, |s| s.applied_version = None);
    }

    fn is_failed(&self, flow: &str) -> bool {
        lock(&self.status).get(flow).is_some_and(|s| s.state == FlowState::Failed)
    }
}

/// The flows' [`CommitListener`]: after a commit that can add rows to a table, runs the flows
/// that read it (a sync flow that is up to date uses the rows the writer hands over, without
/// reading the log). Sync flows run now, and their targets' flows with their commits; async ones
/// are handed to the worker. A flow failing on a `FAIL UPDATE` expectation fails the writer's
/// statement; other failures are recorded and retried.
pub(crate) struct FlowListener(pub Weak<FlowRuntime>);

impl CommitListener for FlowListener {
    fn committed<'a>(&'a self, change: &'a Change) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // DELETE, UPDATE and TRUNCATE add no new rows (flows carry appends), OPTIMIZE and
            // metadata commits change none, and a view's checkpoint is not read by flows.
            let adds_rows = matches!(
                change.operation,
                Operation::Write | Operation::Copy | Operation::CreateAs | Operation::Merge | Operation::Restore
            );
            let Some(flows) = self.0.upgrade() else { return Ok(()) };
            // Flows over the change feed see every commit that changes rows.
            if !adds_rows {
                let rows_changed = change.operation.changes_rows() && change.operation != Operation::ViewCheckpoint;
                let feeds_changes = || flows.db.catalog.current().flows_from(&change.table).any(|f| f.changes);
                if !rows_changed || !feeds_changes() {
                    return Ok(());
                }
            }
            let rows = match (&change.operation, &change.rows) {
                (Operation::Write, Some(rows)) if rows.deleted.is_empty() => Some(rows.inserted.as_slice()),
                _ => None,
            };
            // Values seen for the first time get their tables and routes before the routes run.
            if adds_rows && flows.db.catalog.current().value_routes.contains_key(&change.table) {
                let known = rows.map(|rows| (change.version, rows));
                if let Err(e) = per_value::discover(&flows, &change.table, known).await {
                    tracing::warn!(table = %change.table, "per-value route: {e}");
                }
            }
            run_flows_after(&flows, &change.table, change.version, rows, !adds_rows).await
        })
    }
}

/// Runs the flows fed by `table` after its commit of `version`, which inserted `rows` when known
/// (only the flows over its change feed when `changes_only`: the commit added no rows).
async fn run_flows_after(
    flows_rt: &Arc<FlowRuntime>,
    key: &str,
    version: u64,
    rows: Option<&[RecordBatch]>,
    changes_only: bool,
) -> Result<()> {
    let db = &flows_rt.db;
    let state = db.catalog.current();
    lock(&flows_rt.touched).insert(key.to_string());
    let flows: Vec<FlowEntry> = state.flows_from(key).filter(|f| f.changes || !changes_only).cloned().collect();
    let mut expectation_failure = None;
    let mut tasks = Vec::new();
    for flow in flows {
        if flow.mode == FlowMode::Async || flows_rt.is_failed(&flow.name) {
            db.wake_worker();
            wait_for_async_lag(flows_rt, &flow, version).await;
            continue;
        }
        // Each flow runs as its own task: the flows of one source run in parallel, and a chain
        // of flows (bronze -> silver -> gold) nests tasks, not stack frames.
        let task_flows = flows_rt.clone();
        let known = rows.filter(|_| !flow.changes).map(|rows| (version, rows.to_vec()));
        tasks.push(tokio::spawn(async move {
            let known = known.as_ref().map(|(version, rows)| (*version, rows.as_slice()));
            run_flow(&task_flows, &flow, known).await
        }));
    }
    for task in tasks {
        match task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e @ Error::ExpectationFailed { .. })) => expectation_failure = Some(e),
            Ok(Err(_)) => {}
            Err(e) => return Err(Error::Internal(format!("a flow task failed: {e}"))),
        }
    }
    match expectation_failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Back-pressure: waits while an async flow is too far behind `version`.
async fn wait_for_async_lag(flows_rt: &FlowRuntime, flow: &FlowEntry, version: u64) {
    for _ in 0..600 {
        let applied = lock(&flows_rt.status).get(&flow.name).and_then(|s| s.applied_version);
        let behind = version as i64 - applied.unwrap_or(-1);
        if behind <= ASYNC_LAG_VERSIONS_MAX as i64 || flows_rt.is_failed(&flow.name) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs one flow up to its source's latest version; records the outcome. On failure the flow is
/// marked failed (with a retry time) and the error returned.
pub async fn run_flow(
    flows_rt: &Arc<FlowRuntime>,
    flow: &FlowEntry,
    known: Option<(u64, &[RecordBatch])>,
) -> Result<RunOutcome> {
    let db = &flows_rt.db;
    let runner = flows_rt.runner(&flow.name);
    let mut session = runner.lock().await;
    let session = session.get_or_insert_with(|| QueryContext::new(db.clone()));
    let mut attempt = 0;
    let started = std::time::Instant::now();
    let result = loop {
        // A retry after a lost race reads everything afresh.
        let attempt_known = if attempt == 0 { known } else { None };
        match run_once(flows_rt, session, flow, attempt_known).await {
            Err(Error::SerializationFailure(_)) if attempt < RUN_CONFLICT_RETRY_MAX => attempt += 1,
            other => break other,
        }
    };
    match &result {
        Ok(outcome) => {
            flows_rt.update(&flow.name, |s| {
                s.state = FlowState::Idle;
                s.error = None;
                s.failures = 0;
                s.rows_out_total += outcome.rows_out;
                if outcome.source_from.is_some() {
                    s.runs += 1;
                    s.rows_in_total += outcome.rows_in;
                    s.last_duration_ms = i64::try_from(started.elapsed().as_millis()).ok();
                }
                if outcome.source_to.is_some() {
                    s.applied_version = outcome.source_to;
                }
                s.last_run_ms = Some(now_ms());
            });
            if outcome.source_from.is_some() && (outcome.rows_in > 0 || outcome.rows_out > 0) {
                db.events.record(FlowEvent {
                    at_ms: now_ms(),
                    flow: flow.name.clone(),
                    kind: "run",
                    source_from: outcome.source_from,
                    source_to: outcome.source_to,
                    rows_in: outcome.rows_in,
                    rows_out: outcome.rows_out,
                    violations: outcome.violations.clone(),
                    message: None,
                    duration_ms: i64::try_from(started.elapsed().as_millis()).ok(),
                    ..Default::default()
                });
            }
        }
        Err(e) => {
            let message = e.to_string();
            let mut failures = 0;
            flows_rt.update(&flow.name, |s| {
                s.state = FlowState::Failed;
                s.error = Some(message.clone());
                s.failures += 1;
                s.failures_total += 1;
                failures = s.failures;
                s.retry_at_ms = now_ms() + crate::util::retry_delay_ms(s.failures);
            });
            db.events.record(FlowEvent {
                at_ms: now_ms(),
                flow: flow.name.clone(),
                kind: "failure",
                source_from: None,
                source_to: None,
                rows_in: 0,
                rows_out: 0,
                violations: crate::sql::quality::rejected_violations(e),
                message: Some(format!("attempt {failures}: {message}")),
                ..Default::default()
            });
        }
    }
    result
}

async fn run_once(
    flows_rt: &FlowRuntime,
    session: &QueryContext,
    flow: &FlowEntry,
    known: Option<(u64, &[RecordBatch])>,
) -> Result<RunOutcome> {
    let db = &flows_rt.db;
    // A writer handing over its rows has just refreshed the catalog; a catch-up reads it afresh.
    let state = if known.is_some() { db.catalog.current() } else { db.catalog.refresh().await? };
    let source_entry = state
        .tables
        .get(&flow.source)
        .cloned()
        .ok_or_else(|| Error::UndefinedTable(format!("{} (the source of flow {})", flow.source, flow.name)))?;
    let target_entry = state
        .tables
        .get(&flow.target)
        .cloned()
        .ok_or_else(|| Error::UndefinedTable(format!("{} (the target of flow {})", flow.target, flow.name)))?;
    let source = db.open_table(&source_entry).await?;
    // The writer's own commit is in the cached snapshot; otherwise look for newer commits.
    let cached = source.cached_snapshot();
    let source_snapshot = match known {
        Some((version, _)) if cached.version() >= version => cached,
        _ => source.snapshot().await?,
    };
    let target = db.open_table(&target_entry).await?;
    // A cached target snapshot may miss another process's commit of this flow; the commit then
    // conflicts on the flow's txn and the run is retried on a fresh snapshot.
    let target_snapshot = if known.is_some() { target.cached_snapshot() } else { target.snapshot().await? };
    let committed = target_snapshot.txn_version(&flow.name);
    let remembered = lock(&flows_rt.status).get(&flow.name).and_then(|s| s.applied_version);
    // The runtime's own progress counts only past versions that produced no rows (never below the
    // committed txn, which a full refresh may have reset to -1).
    let applied = match (committed, remembered) {
        (Some(c), Some(r)) if r > c => r,
        (Some(c), _) => c,
        (None, r) => r.unwrap_or(-1),
    };
    if let Some(spec) = &flow.cdc {
        cdc_catch_up_state(session, flow, spec, &source, &source_snapshot, committed).await?;
    }
    let end = source_snapshot.version();
    let start = (applied + 1).max(0) as u64;
    flows_rt.update(&flow.name, |s| s.source_version = Some(end));
    if start > end {
        return Ok(RunOutcome { source_to: Some(applied), ..Default::default() });
    }
    // Only a run with versions to apply shows as running (the worker's periodic passes over
    // flows that are up to date do not flicker their state).
    flows_rt.update(&flow.name, |s| s.state = FlowState::Running);
    let rows = match known {
        Some((version, rows)) if version == end && start == end && !flow.changes => rows.to_vec(),
        _ => source_rows(flow, &source, &source_snapshot, start, end).await?,
    };
    let rows_in: u64 = rows.iter().map(|b| b.num_rows() as u64).sum();
    let mut outcome =
        RunOutcome { source_from: Some(start as i64), source_to: Some(end as i64), rows_in, ..Default::default() };
    if rows_in == 0 {
        return Ok(outcome);
    }
    let schema = source_schema(flow, &source_snapshot);
    let txn = Txn { app_id: flow.name.clone(), version: end as i64, last_updated: Some(now_ms()) };
    if let Some(spec) = &flow.cdc {
        let output = apply::flow_output(session, flow, schema, rows).await?;
        let applied = cdc::apply(session, flow, spec, output, txn, committed, false).await?;
        outcome.rows_out = applied.rows_out;
        if let Some(message) = applied.rejection {
            db.events.record(FlowEvent {
                at_ms: now_ms(),
                flow: flow.name.clone(),
                kind: "rejected",
                source_from: outcome.source_from,
                source_to: outcome.source_to,
                rows_in: applied.rejected,
                rows_out: 0,
                violations: BTreeMap::new(),
                message: Some(format!("{} events not applied: {message}", applied.rejected)),
                ..Default::default()
            });
        }
        return Ok(outcome);
    }
    let mut output = apply::flow_output(session, flow, schema, rows).await?;
    if let Some(column) = &flow.expand_json {
        output = expand::expand_flow_output(session, flow, column, output).await?;
    }
    if flow.evolve {
        output = per_value::fit_output(session, &flow.target, output).await?;
    }
    let written = apply::write_flow_output(session, &flow.target, output, flow.by_name, txn, committed, end).await?;
    outcome.rows_out = written.rows;
    outcome.violations = written.violations;
    Ok(outcome)
}

/// Brings an AUTO CDC flow's state table up to its target's txn `committed` (a crash came
/// between a run's two commits): the source versions the state lacks are applied to it alone.
async fn cdc_catch_up_state(
    session: &QueryContext,
    flow: &FlowEntry,
    spec: &crate::catalog::CdcSpec,
    source: &sluice_storage::table::Table,
    source_snapshot: &sluice_storage::snapshot::Snapshot,
    committed: Option<i64>,
) -> Result<()> {
    let Some(committed) = committed.filter(|c| *c >= 0) else { return Ok(()) };
    let name = crate::names::parse_table_name(&flow.target)?;
    let state = crate::names::object_name(&name.schema, &cdc::state_table_name(&name.name));
    let state_target = session.target(&state).await;
    session.clear_statement_state();
    let state_applied = state_target?.snapshot.txn_version(&flow.name);
    if state_applied.is_some_and(|s| s >= committed) {
        return Ok(());
    }
    let start = (state_applied.unwrap_or(-1) + 1).max(0) as u64;
    let rows = source_rows(flow, source, source_snapshot, start, committed as u64).await?;
    let output = apply::flow_output(session, flow, source_schema(flow, source_snapshot), rows).await?;
    let txn = Txn { app_id: flow.name.clone(), version: committed, last_updated: Some(now_ms()) };
    cdc::apply(session, flow, spec, output, txn, state_applied, true).await?;
    Ok(())
}

/// The relation a flow's query reads its source as: the source's columns, plus the change
/// columns for a flow over the change feed.
fn source_schema(flow: &FlowEntry, snapshot: &sluice_storage::snapshot::Snapshot) -> SchemaRef {
    if flow.changes {
        Arc::new(sluice_storage::write::change_data_schema(snapshot.schema()).to_arrow())
    } else {
        snapshot.arrow_schema()
    }
}

/// What a run of `flow` reads of versions `start..=end` of its source: the rows they inserted,
/// or for a flow over the change feed every change (in the feed's schema as of `snapshot`).
async fn source_rows(
    flow: &FlowEntry,
    source: &sluice_storage::table::Table,
    snapshot: &sluice_storage::snapshot::Snapshot,
    start: u64,
    end: u64,
) -> Result<Vec<RecordBatch>> {
    if !flow.changes {
        return inserted_rows(source, start, end).await;
    }
    let schema = source_schema(flow, snapshot);
    let mut out = Vec::new();
    for change in source.changes(start, Some(end)).await? {
        // Within a version the rows that leave come before the rows that arrive (an UPDATE
        // without the change data feed on is a delete and an insert of one key in one version).
        let mut arriving = Vec::new();
        for batch in change.batches {
            let batch = batch.with_schema(schema.clone()).map_err(|e| {
                Error::Plan(format!(
                    "the change feed of {} changed shape at version {}: {e}",
                    flow.source, change.version
                ))
            })?;
            let Some(kind) = batch.column_by_name(sluice_storage::write::CHANGE_TYPE_COLUMN) else { continue };
            let kind = kind.as_string::<i32>();
            let leaving: arrow::array::BooleanArray =
                (0..batch.num_rows()).map(|i| Some(matches!(kind.value(i), "delete" | "update_preimage"))).collect();
            out.push(filter_record_batch(&batch, &leaving)?);
            arriving.push(filter_record_batch(&batch, &arrow::compute::not(&leaving)?)?);
        }
        out.extend(arriving);
    }
    Ok(out)
}

/// The rows versions `start..=end` of a table inserted (table columns only).
pub(super) async fn inserted_rows(
    table: &sluice_storage::table::Table,
    start: u64,
    end: u64,
) -> Result<Vec<RecordBatch>> {
    let changes = table.changes(start, Some(end)).await?;
    let mut out = Vec::new();
    for change in changes {
        // Only versions that purely inserted: an UPDATE or MERGE that rewrote rows shows as
        // deletes plus inserts, and its inserts are not new rows.
        let mut masks = Vec::with_capacity(change.batches.len());
        let mut rewrote = false;
        for batch in &change.batches {
            let Some(kind) = batch.column_by_name(sluice_storage::write::CHANGE_TYPE_COLUMN) else { continue };
            let inserted = arrow::compute::kernels::cmp::eq(
                kind.as_string::<i32>(),
                &arrow::array::StringArray::new_scalar("insert"),
            )?;
            rewrote |= inserted.true_count() != batch.num_rows();
            masks.push((batch, inserted));
        }
        if rewrote {
            continue;
        }
        for (batch, inserted) in masks {
            let batch = filter_record_batch(batch, &inserted)?;
            let columns = batch.num_columns().saturating_sub(3);
            out.push(batch.project(&(0..columns).collect::<Vec<_>>())?);
        }
    }
    Ok(out)
}

impl FlowRuntime {
    /// The worker's pass over flows: catches every flow up on a `full` pass (commits of other
    /// processes), runs async flows whose flush interval passed and failed flows whose retry
    /// time came.
    pub(crate) async fn worker_pass(self: &Arc<Self>, full: bool) {
        let db = &self.db;
        let mut state = if full {
            db.catalog.refresh().await.unwrap_or_else(|_| db.catalog.current())
        } else {
            db.catalog.current()
        };
        if full {
            let mut discovered = false;
            for source in state.value_routes.keys() {
                discovered |= per_value::discover(self, source, None).await.unwrap_or(false);
            }
            if discovered {
                // The new routes catch up below with the others.
                state = db.catalog.current();
            }
        }
        let statuses = self.statuses();
        let now = now_ms();
        for flow in state.flows.values() {
            let status = statuses.get(&flow.name);
            let due = match status {
                Some(s) if s.state == FlowState::Failed => {
                    if s.retry_at_ms > now {
                        continue;
                    }
                    db.events.record(FlowEvent {
                        at_ms: now,
                        flow: flow.name.clone(),
                        kind: "retry",
                        source_from: None,
                        source_to: None,
                        rows_in: 0,
                        rows_out: 0,
                        violations: BTreeMap::new(),
                        message: s.error.clone(),
                        ..Default::default()
                    });
                    true
                }
                Some(s) if flow.mode == FlowMode::Async => {
                    full || now - s.last_run_ms.unwrap_or(0) >= ASYNC_FLUSH_INTERVAL_MS as i64
                }
                _ => full,
            };
            if due {
                // A catch-up that writes the target runs the target's flows, as any write does.
                let _ = run_flow(self, flow, None).await;
            }
        }
    }

    /// Compacts the tables written since the last call that are due (see [`compaction`]).
    pub(crate) async fn compact_written(&self) {
        let touched = std::mem::take(&mut *lock(&self.touched));
        for key in touched {
            if let Some(entry) = self.db.catalog.current().tables.get(&key) {
                let _ = compaction::maybe_compact(&self.db, entry).await;
            }
        }
    }
}
