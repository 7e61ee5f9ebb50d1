//! Changes out, in Rust: [`crate::Database::subscribe`] follows one table's committed changes,
//! from now or from a given version, as a [`Subscription`] whose [`Subscription::next`] waits for
//! the next commit that changed rows. Applications (and tests) wait on it for data to arrive
//! through a pipeline instead of polling.
//!
//! Each change is one version of the table's change data feed (its rows with `_change_type`,
//! `_commit_version`, `_commit_timestamp`; see `sluice_storage::cdf`), read from the log, so a
//! subscription sees every commit exactly once and in order, whoever made it. A listener on the
//! writer ([`CommitSignal`]) wakes subscriptions on every commit of this process; commits of other
//! processes are found by looking at the log at least every second.
//!
//! A durable subscription ([`durable`]) keeps a consumer's place in the catalog: the consumer
//! acknowledges versions, and [`Subscription::resume`] starts after the last one acknowledged
//! (with the table's rows as of the subscription's creation first, when it asked for them and
//! has not acknowledged yet).

pub mod durable;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use futures::future::BoxFuture;
use futures::Stream;

use crate::change::{Change, CommitListener};
use crate::error::{Error, Result};
use crate::names::TableName;
use crate::warehouse::Warehouse;

/// The most versions a subscription reads from the log at once.
const VERSIONS_PER_READ: u64 = 64;

/// How long a subscription waits for a signal before it looks at the log anyway.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Counts the commits of this process; subscriptions wait for it to move.
#[derive(Debug)]
pub struct CommitSignal(tokio::sync::watch::Sender<u64>);

impl Default for CommitSignal {
    fn default() -> Self {
        Self(tokio::sync::watch::channel(0).0)
    }
}

impl CommitSignal {
    fn receiver(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// The writer's listener that moves a [`CommitSignal`].
pub struct SignalListener(pub Arc<CommitSignal>);

impl CommitListener for SignalListener {
    fn committed<'a>(&'a self, _change: &'a Change) -> BoxFuture<'a, Result<()>> {
        self.0 .0.send_modify(|n| *n = n.wrapping_add(1));
        Box::pin(async { Ok(()) })
    }
}

/// One committed version of a subscribed table: the rows it inserted, deleted and updated.
#[derive(Debug, Clone)]
pub struct TableChange {
    pub version: u64,
    pub timestamp_ms: i64,
    /// The table's columns plus `_change_type`, `_commit_version` and `_commit_timestamp`.
    pub rows: Vec<RecordBatch>,
}

/// A table's changes, one committed version at a time (see the module text).
pub struct Subscription {
    warehouse: Arc<Warehouse>,
    table: TableName,
    /// The table's id (a table dropped and made again under its name is another table).
    table_id: String,
    next: u64,
    signal: tokio::sync::watch::Receiver<u64>,
    pending: VecDeque<TableChange>,
    /// The snapshot rows still to hand out, as inserts at their version (a durable
    /// subscription that starts with the table's rows).
    snapshot: Option<SnapshotRows>,
}

struct SnapshotRows {
    version: u64,
    timestamp_ms: i64,
    rows: futures::stream::BoxStream<'static, sluice_storage::Result<RecordBatch>>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("table", &self.table.to_string()).field("next", &self.next).finish()
    }
}

impl Subscription {
    /// Follows `table` from version `from` on (None: from the next commit).
    pub(crate) async fn start(
        warehouse: Arc<Warehouse>,
        signal: &CommitSignal,
        table: TableName,
        from: Option<u64>,
    ) -> Result<Self> {
        let signal = signal.receiver();
        let key = crate::catalog::key(&table.schema, &table.name);
        let mut state = warehouse.catalog.current();
        if !state.tables.contains_key(&key) {
            state = warehouse.catalog.refresh().await?;
        }
        let entry = state.tables.get(&key).ok_or_else(|| Error::UndefinedTable(table.to_string()))?;
        let handle = warehouse.open_table(entry).await?;
        let next = match from {
            Some(version) => version,
            None => handle.snapshot().await?.version() + 1,
        };
        let table_id = entry.id.clone();
        Ok(Self { warehouse, table, table_id, next, signal, pending: VecDeque::new(), snapshot: None })
    }

    /// Resumes the durable subscription `name` after the last version its consumer acknowledged
    /// (see [`durable`]).
    pub(crate) async fn resume(warehouse: Arc<Warehouse>, signal: &CommitSignal, name: &str) -> Result<Self> {
        let signal = signal.receiver();
        let state = warehouse.catalog.refresh().await?;
        let subscription = durable::find(&state, name)?;
        let entry = durable::table_of(&state, subscription)?;
        let handle = warehouse.open_table(entry).await?;
        let (next, snapshot) = if subscription.snapshot_pending() {
            let version = subscription.created_version;
            let timestamp_ms = handle.snapshot_at_version(version).await?.timestamp_ms();
            let rows = handle.rows_as_changes(version).await?;
            (version + 1, Some(SnapshotRows { version, timestamp_ms, rows }))
        } else {
            (subscription.needed_from(), None)
        };
        let table = TableName { schema: entry.schema.clone(), name: entry.name.clone() };
        Ok(Self { warehouse, table, table_id: entry.id.clone(), next, signal, pending: VecDeque::new(), snapshot })
    }

    /// The table followed.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The version the next change will be at or after.
    pub fn next_version(&self) -> u64 {
        self.next
    }

    /// Waits for the table's next change (a commit that changed rows) and returns it. Fails if
    /// the table is dropped.
    pub async fn next(&mut self) -> Result<TableChange> {
        loop {
            if let Some(change) = self.pending.pop_front() {
                return Ok(change);
            }
            if let Some(snapshot) = &mut self.snapshot {
                match futures::StreamExt::next(&mut snapshot.rows).await {
                    Some(rows) => {
                        let rows = rows?;
                        if rows.num_rows() > 0 {
                            let (version, timestamp_ms) = (snapshot.version, snapshot.timestamp_ms);
                            return Ok(TableChange { version, timestamp_ms, rows: vec![rows] });
                        }
                    }
                    None => self.snapshot = None,
                }
                continue;
            }
            // Marked seen before looking, so a commit after the look wakes the wait below.
            self.signal.borrow_and_update();
            let table = open(&self.warehouse, &self.table, &self.table_id).await?;
            let latest = table.snapshot().await?.version();
            if latest >= self.next {
                // A bounded number of versions at a time (a subscription far behind does not
                // load its whole backlog at once).
                let latest = latest.min(self.next.saturating_add(VERSIONS_PER_READ - 1));
                for change in table.changes(self.next, Some(latest)).await? {
                    self.pending.push_back(TableChange {
                        version: change.version,
                        timestamp_ms: change.timestamp_ms,
                        rows: change.batches,
                    });
                }
                self.next = latest + 1;
                continue;
            }
            let _ = tokio::time::timeout(POLL_INTERVAL, self.signal.changed()).await;
        }
    }

    /// [`Self::next`], or None when nothing changed within `timeout`.
    pub async fn next_within(&mut self, timeout: Duration) -> Result<Option<TableChange>> {
        match tokio::time::timeout(timeout, self.next()).await {
            Ok(change) => change.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// The subscription as a stream of changes (it ends after the first error).
    pub fn into_stream(self) -> impl Stream<Item = Result<TableChange>> {
        futures::stream::unfold(Some(self), |state| async move {
            let mut subscription = state?;
            match subscription.next().await {
                Ok(change) => Some((Ok(change), Some(subscription))),
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}

/// The followed table's handle, by id (a table dropped since is an error naming `name`).
async fn open(warehouse: &Warehouse, name: &TableName, id: &str) -> Result<Arc<sluice_storage::table::Table>> {
    let mut state = warehouse.catalog.current();
    if state.table_by_id(id).is_none() {
        state = warehouse.catalog.refresh().await?;
    }
    let entry = state.table_by_id(id).ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
    warehouse.open_table(entry).await
}
