//! The event log: what flows, sources and views did (`sluice.events`), and the expectation
//! violations counted since the process started (`sluice.expectations`). In memory, the newest
//! [`EVENTS_KEPT_MAX`] events.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use crate::util::{lock, now_ms};

/// Events kept in memory (the oldest are dropped).
pub const EVENTS_KEPT_MAX: usize = 10_000;

/// One row of `sluice.events`.
#[derive(Debug, Clone)]
pub struct FlowEvent {
    pub at_ms: i64,
    pub flow: String,
    /// `run`, `failure`, `retry`, `resume`, `refresh`.
    pub kind: &'static str,
    pub source_from: Option<i64>,
    pub source_to: Option<i64>,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Violations per constraint in this run.
    pub violations: BTreeMap<String, u64>,
    pub message: Option<String>,
}

/// The events of one database.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<VecDeque<FlowEvent>>,
    /// Violations per (table key, constraint) since the process started.
    violations: Mutex<BTreeMap<(String, String), u64>>,
}

impl EventLog {
    /// The kept events, oldest first.
    pub fn events(&self) -> Vec<FlowEvent> {
        lock(&self.events).iter().cloned().collect()
    }

    pub fn record(&self, event: FlowEvent) {
        let mut events = lock(&self.events);
        if events.len() >= EVENTS_KEPT_MAX {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// Records an event of a source's ingest into a table (shown in `sluice.events` with
    /// `flow = 'source -> table'`).
    pub fn record_source_event(
        &self,
        source: &str,
        table: &str,
        kind: &'static str,
        rows_in: u64,
        rows_out: u64,
        message: Option<String>,
    ) {
        self.record(FlowEvent {
            at_ms: now_ms(),
            flow: format!("{source} -> {table}"),
            kind,
            source_from: None,
            source_to: None,
            rows_in,
            rows_out,
            violations: BTreeMap::new(),
            message,
        });
    }

    /// Records an event of a materialized view (`flow` is the view's name).
    pub fn record_view_event(&self, view: &str, kind: &'static str, rows_in: u64, message: Option<String>) {
        self.record(FlowEvent {
            at_ms: now_ms(),
            flow: view.to_string(),
            kind,
            source_from: None,
            source_to: None,
            rows_in,
            rows_out: 0,
            violations: BTreeMap::new(),
            message,
        });
    }

    /// Adds violations of a table's constraint.
    pub fn count_violations(&self, table: &str, constraint: &str, rows: u64) {
        *lock(&self.violations).entry((table.to_string(), constraint.to_string())).or_default() += rows;
    }

    /// Violations per (table key, constraint).
    pub fn violations(&self) -> BTreeMap<(String, String), u64> {
        lock(&self.violations).clone()
    }
}
