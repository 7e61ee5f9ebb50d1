//! Memory limits: one pool for the whole database, and a limit per query.
//!
//! DataFusion's operators account for what they hold (hash tables, sort buffers, ...) in a
//! memory pool, and the ones that can spill to disk (sorts, grouped aggregates, sort-merge
//! joins) do so when the pool refuses them more. Sluice gives every database one
//! [`FairSpillPool`] of `memory_limit_bytes` (by default half of the machine's memory), shared by
//! all sessions, and each session a [`QueryMemoryPool`] on top of it that refuses a single query
//! more than `query_memory_limit_bytes` (by default the database's limit: the operator lowers it
//! with `--query-memory-limit`). A query that cannot spill past its limit fails with SQLSTATE
//! 53200 (out of memory) and the server goes on. A query's collected result is accounted in the
//! same pool ([`collect_limited`]).
//!
//! The limits are only as good as DataFusion's accounting, which overestimates some states by far:
//! `count(DISTINCT (a, b))` over a million rows claims about 6 GB while it holds about 100 MB
//! (each distinct struct value is charged its whole source batch), past any limit. So the states
//! of non-grouped aggregates (DataFusion's `AggregateStream`, whose only large states are such
//! distinct sets) are not held to the limits ([`EXEMPT_CONSUMER_PREFIXES`]); grouped aggregates,
//! sorts, joins and results are. One query may use the database's whole limit by default.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::error::{DataFusionError, Result as DataFusionResult};
use datafusion::execution::memory_pool::{FairSpillPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation};
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::StreamExt;

use crate::error::{Error, Result};

/// The database's memory limit when none is given: this share of the machine's memory.
pub const MEMORY_SHARE_DEFAULT: f64 = 0.5;
/// The limit of one query when none is given: this share of the database's limit.
pub const QUERY_SHARE_DEFAULT: f64 = 1.0;
/// Memory consumers whose accounting DataFusion overestimates without bound: not limited.
pub const EXEMPT_CONSUMER_PREFIXES: [&str; 1] = ["AggregateStream"];

fn exempt(reservation: &MemoryReservation) -> bool {
    let name = reservation.consumer().name();
    EXEMPT_CONSUMER_PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The machine's memory when it cannot be read (`/proc/meminfo`).
const MACHINE_MEMORY_FALLBACK_BYTES: usize = 4 << 30;

/// The machine's physical memory in bytes.
pub fn machine_memory_bytes() -> usize {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map(|kb| kb.saturating_mul(1024))
        .unwrap_or(MACHINE_MEMORY_FALLBACK_BYTES)
}

/// The database's memory pool.
pub fn database_pool(limit_bytes: usize) -> Arc<dyn MemoryPool> {
    Arc::new(FairSpillPool::new(limit_bytes))
}

/// A query's share of the database's pool: refuses it more than `limit` bytes.
#[derive(Debug)]
pub struct QueryMemoryPool {
    database: Arc<dyn MemoryPool>,
    limit: usize,
    used: AtomicUsize,
}

impl QueryMemoryPool {
    pub fn new(database: Arc<dyn MemoryPool>, limit: usize) -> Self {
        Self { database, limit, used: AtomicUsize::new(0) }
    }
}

impl std::fmt::Display for QueryMemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "query pool of {} MiB over {}", self.limit >> 20, self.database)
    }
}

impl MemoryPool for QueryMemoryPool {
    fn name(&self) -> &str {
        "sluice query pool"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.database.register(consumer)
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.database.unregister(consumer)
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        if exempt(reservation) {
            return;
        }
        self.database.grow(reservation, additional);
        self.used.fetch_add(additional, Ordering::Relaxed);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        if exempt(reservation) {
            return;
        }
        self.database.shrink(reservation, shrink);
        // Saturating: a shrink never exceeds what grew, but a wrapped counter would refuse all.
        let _ = self.used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| Some(u.saturating_sub(shrink)));
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> DataFusionResult<()> {
        if exempt(reservation) {
            return Ok(());
        }
        let used = self.used.load(Ordering::Relaxed);
        if used.saturating_add(additional) > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "a query may use {} MiB (query_memory_limit) and {} needed {} MiB more with {} MiB in use",
                self.limit >> 20,
                reservation.consumer().name(),
                additional.div_ceil(1 << 20),
                used >> 20
            )));
        }
        self.database.try_grow(reservation, additional).map_err(|e| match e {
            DataFusionError::ResourcesExhausted(message) => {
                DataFusionError::ResourcesExhausted(format!("the server's memory limit is reached: {message}"))
            }
            other => other,
        })?;
        self.used.fetch_add(additional, Ordering::Relaxed);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

/// Collects a query's result, accounting its batches in `pool`: a result larger than the query's
/// limit fails with 53200 instead of growing without bound.
pub async fn collect_limited(
    mut stream: SendableRecordBatchStream,
    pool: &Arc<dyn MemoryPool>,
) -> Result<Vec<RecordBatch>> {
    let reservation = MemoryConsumer::new("query result").register(pool);
    let mut batches = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        reservation.try_grow(batch.get_array_memory_size()).map_err(Error::from)?;
        batches.push(batch);
    }
    // The caller holds the rows from here; the reservation ends with this function.
    reservation.free();
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_held_to_its_limit_and_the_database_to_its_own() {
        let database = database_pool(1000);
        let query: Arc<dyn MemoryPool> = Arc::new(QueryMemoryPool::new(database.clone(), 600));
        let first = MemoryConsumer::new("a").register(&query);
        first.try_grow(500).unwrap();
        let err = first.try_grow(200).unwrap_err();
        assert!(err.to_string().contains("query_memory_limit"), "{err}");
        let other: Arc<dyn MemoryPool> = Arc::new(QueryMemoryPool::new(database.clone(), 600));
        let second = MemoryConsumer::new("b").register(&other);
        let err = second.try_grow(600).unwrap_err();
        assert!(err.to_string().contains("server's memory limit"), "{err}");
        first.free();
        second.try_grow(600).unwrap();
        let exempt = MemoryConsumer::new("AggregateStream[0]").register(&query);
        exempt.try_grow(1 << 40).unwrap();
        assert_eq!(query.reserved(), 0);
        assert_eq!(Error::from(err).sqlstate(), "53200");
    }
}
