//! [`Runtimes`]: a warehouse with the runtimes of its features (flows, materialized views,
//! sources) and the background worker that drives them. Opening wires the features into the
//! warehouse: the flows and views listen to its writer (flows first, so that a sync flow's
//! target is written before the views over its source are maintained), the views' rows and the
//! `sluice` system schema plug into planning through its hooks.
//!
//! The worker holds the runtimes only weakly: it stops once the last [`crate::Database`] handle
//! and session are gone.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::flow::FlowRuntime;
use crate::ivm::ViewRuntime;
use crate::source::SourceRuntime;
use crate::warehouse::Warehouse;

/// The background worker's poll interval.
const WORKER_INTERVAL_MS: u64 = 100;
/// How often the worker runs every flow and view whose input moved (commits by other processes,
/// or missed while one was failed) and supervises the sources.
const FULL_PASS_INTERVAL_MS: u64 = 1_000;
/// A worker that has not finished a pass for this long is stalled (not healthy).
pub const WORKER_STALL_MS: i64 = 30_000;

/// A warehouse and its runtimes.
#[derive(Debug)]
pub struct Runtimes {
    pub warehouse: Arc<Warehouse>,
    pub flows: Arc<FlowRuntime>,
    pub views: Arc<ViewRuntime>,
    pub sources: Arc<SourceRuntime>,
    /// Moves on every commit, for [`crate::subscribe::Subscription`]s.
    pub commits: Arc<crate::subscribe::CommitSignal>,
    /// The alerts' states (see [`crate::alerts`]).
    pub alerts: Arc<crate::alerts::AlertRuntime>,
    /// When the background worker last finished a pass (0: it has not started).
    worker_pass_ms: std::sync::atomic::AtomicI64,
}

impl Runtimes {
    /// Starts the runtimes of an open warehouse: wires them in, starts the sources' ingest and
    /// the background worker (on the tokio runtime the database is opened on; without one, flows
    /// and views run only with writes).
    pub fn start(warehouse: Arc<Warehouse>) -> Arc<Self> {
        let runtimes = Arc::new(Self {
            flows: Arc::new(FlowRuntime::new(warehouse.clone())),
            views: Arc::new(ViewRuntime::new(warehouse.clone())),
            sources: Arc::new(SourceRuntime::new(warehouse.clone())),
            commits: Arc::default(),
            worker_pass_ms: Default::default(),
            alerts: Arc::default(),
            warehouse,
        });
        let warehouse = &runtimes.warehouse;
        warehouse.writer.subscribe(Arc::new(crate::flow::FlowListener(Arc::downgrade(&runtimes.flows))));
        warehouse.writer.subscribe(Arc::new(crate::ivm::ViewListener(Arc::downgrade(&runtimes.views))));
        warehouse.writer.subscribe(Arc::new(crate::subscribe::SignalListener(runtimes.commits.clone())));
        let views = Arc::downgrade(&runtimes.views);
        warehouse.hooks.set_view_reader(Arc::new(move |entry| {
            let views = views.clone();
            Box::pin(async move {
                let views = views.upgrade().ok_or_else(|| Error::Internal("the database is closed".into()))?;
                crate::ivm::read(&views, &entry).await
            })
        }));
        let flows = Arc::downgrade(&runtimes.flows);
        warehouse.hooks.set_flow_dropped(Arc::new(move |name| {
            if let Some(flows) = flows.upgrade() {
                flows.forget(name);
            }
        }));
        let weak = Arc::downgrade(&runtimes);
        warehouse.hooks.add_schema(
            crate::system::SYSTEM_SCHEMA,
            Arc::new(move || -> Arc<dyn datafusion::catalog::SchemaProvider> {
                match weak.upgrade() {
                    Some(r) => Arc::new(crate::system::SystemSchema::new(
                        r.warehouse.clone(),
                        r.flows.clone(),
                        r.views.clone(),
                        r.sources.clone(),
                        r.alerts.clone(),
                    )),
                    None => Arc::new(datafusion::catalog::MemorySchemaProvider::new()),
                }
            }),
        );
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(worker(Arc::downgrade(&runtimes)));
            handle.spawn(event_writer(Arc::downgrade(&runtimes.warehouse)));
            handle.spawn(crate::alerts::watch(Arc::downgrade(&runtimes.warehouse), Arc::downgrade(&runtimes.alerts)));
        }
        crate::source::supervise(&runtimes.sources);
        runtimes
    }
}

impl Runtimes {
    /// `Ok` while the background worker runs its passes (see [`WORKER_STALL_MS`]).
    pub fn worker_alive(&self) -> std::result::Result<(), String> {
        let last = self.worker_pass_ms.load(std::sync::atomic::Ordering::Relaxed);
        if last == 0 {
            return Err("the background worker has not finished its first pass (catching up)".into());
        }
        let age = crate::util::now_ms() - last;
        if age > WORKER_STALL_MS {
            return Err(format!("the background worker's last pass ended {} s ago", age / 1000));
        }
        Ok(())
    }
}

/// Catches up every flow and view (on open), then runs async flows and views as their inputs
/// move and failed ones when their retry time comes, keeps the sources' ingest running, and
/// compacts the small files of written tables, until the runtimes are dropped.
async fn worker(runtimes: Weak<Runtimes>) {
    let mut last_full_pass: Option<Instant> = None;
    loop {
        let Some(strong) = runtimes.upgrade() else { return };
        let full = last_full_pass.is_none_or(|t| t.elapsed() >= Duration::from_millis(FULL_PASS_INTERVAL_MS));
        if full {
            last_full_pass = Some(Instant::now());
        }
        strong.flows.worker_pass(full).await;
        if full {
            crate::source::supervise(&strong.sources);
        }
        crate::ivm::worker_pass(&strong.views, full).await;
        strong.flows.compact_written().await;
        strong.worker_pass_ms.store(crate::util::now_ms(), std::sync::atomic::Ordering::Relaxed);
        let wake = strong.warehouse.wake.clone();
        drop(strong);
        let _ = tokio::time::timeout(Duration::from_millis(WORKER_INTERVAL_MS), wake.notified()).await;
    }
}

/// Writes the recorded events to the event log every [`crate::events::FLUSH_INTERVAL_MS`] (apart
/// from the worker, so that a slow store never delays flows), until the warehouse is dropped.
async fn event_writer(warehouse: Weak<Warehouse>) {
    loop {
        tokio::time::sleep(Duration::from_millis(crate::events::FLUSH_INTERVAL_MS as u64)).await;
        let Some(strong) = warehouse.upgrade() else { return };
        if let Err(e) = strong.events.flush().await {
            tracing::warn!("event log: writing recorded events failed (retried): {e}");
        }
    }
}
