//! The `sluice` system schema: `tables`, `flows`, `lineage`, `events`, `expectations`, `sources`,
//! `kafka_offsets`, `views` and `indexes`, built
//! from the catalog and the flow runtime each time a statement reads them.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{SchemaProvider, TableProvider};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::Result as DfResult;

use crate::catalog::{FlowMode, FlowSyntax, TableKind};
use crate::flow::FlowRuntime;
use crate::ivm::ViewRuntime;
use crate::source::SourceRuntime;
use crate::warehouse::Warehouse;

/// The name of the system schema.
pub const SYSTEM_SCHEMA: &str = "sluice";
const TABLES: [&str; 11] = [
    "tables",
    "flows",
    "lineage",
    "events",
    "expectations",
    "sources",
    "kafka_offsets",
    "views",
    "indexes",
    "subscriptions",
    "alerts",
];

#[derive(Debug)]
pub struct SystemSchema {
    db: Arc<Warehouse>,
    flows: Arc<FlowRuntime>,
    views: Arc<ViewRuntime>,
    sources: Arc<SourceRuntime>,
    alerts: Arc<crate::alerts::AlertRuntime>,
}

impl SystemSchema {
    pub fn new(
        db: Arc<Warehouse>,
        flows: Arc<FlowRuntime>,
        views: Arc<ViewRuntime>,
        sources: Arc<SourceRuntime>,
        alerts: Arc<crate::alerts::AlertRuntime>,
    ) -> Self {
        Self { db, flows, views, sources, alerts }
    }
}

fn text(values: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}

fn int(values: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from(values))
}

fn time(values: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(values).with_timezone("UTC"))
}

fn table(fields: Vec<(&str, DataType)>, columns: Vec<ArrayRef>) -> DfResult<Arc<dyn TableProvider>> {
    let schema = Arc::new(Schema::new(fields.into_iter().map(|(n, t)| Field::new(n, t, true)).collect::<Vec<_>>()));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(Arc::new(SystemView(MemTable::try_new(schema, vec![vec![batch]])?)))
}

/// A system table: rows computed when read, shown to clients as a view (as Postgres shows its
/// system views), so `\dt` lists only the user's tables.
#[derive(Debug)]
struct SystemView(MemTable);

#[async_trait]
impl TableProvider for SystemView {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn datafusion::catalog::Session,
        projection: Option<&Vec<usize>>,
        filters: &[datafusion::logical_expr::Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        self.0.scan(state, projection, filters, limit).await
    }
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

impl SystemSchema {
    fn tables(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let entries: Vec<_> = state.tables.values().collect();
        let kind = |k: TableKind| match k {
            TableKind::Table => "table",
            TableKind::StreamingTable => "streaming table",
            TableKind::MaterializedView => "materialized view",
        };
        table(
            vec![
                ("schema", DataType::Utf8),
                ("name", DataType::Utf8),
                ("kind", DataType::Utf8),
                ("location", DataType::Utf8),
                ("flows_in", DataType::Int64),
                ("flows_out", DataType::Int64),
                ("expectations", DataType::Int64),
            ],
            vec![
                text(entries.iter().map(|t| Some(t.schema.clone())).collect()),
                text(entries.iter().map(|t| Some(t.name.clone())).collect()),
                text(entries.iter().map(|t| Some(kind(t.kind).to_string())).collect()),
                text(entries.iter().map(|t| Some(t.location.clone())).collect()),
                int(entries.iter().map(|t| Some(state.flows_into(&t.qualified_name()).count() as i64)).collect()),
                int(entries.iter().map(|t| Some(state.flows_from(&t.qualified_name()).count() as i64)).collect()),
                int(entries.iter().map(|t| Some(t.expectations.len() as i64)).collect()),
            ],
        )
    }

    /// Keys and indexes: kind, columns, and PostgreSQL's definition.
    async fn indexes(&self) -> DfResult<Arc<dyn TableProvider>> {
        let indexes = all_indexes(&self.db).await;
        table(
            vec![
                ("schema", DataType::Utf8),
                ("table", DataType::Utf8),
                ("name", DataType::Utf8),
                ("kind", DataType::Utf8),
                ("columns", DataType::Utf8),
                ("definition", DataType::Utf8),
            ],
            vec![
                text(indexes.iter().map(|i| Some(i.schema.clone())).collect()),
                text(indexes.iter().map(|i| Some(i.table.clone())).collect()),
                text(indexes.iter().map(|i| Some(i.def.name.clone())).collect()),
                text(indexes.iter().map(|i| Some(i.kind().to_string())).collect()),
                text(indexes.iter().map(|i| Some(i.def.columns.join(", "))).collect()),
                text(indexes.iter().map(|i| Some(i.definition())).collect()),
            ],
        )
    }

    /// Materialized views: strategy, the input versions the live rows reflect, maintenance and
    /// checkpoint figures (views are loaded, and caught up, to be shown).
    /// Durable subscriptions: where each consumer is, and how far behind its table.
    async fn subscriptions(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let mut rows = Vec::new();
        for subscription in state.subscriptions.values() {
            let table = state.table_by_id(&subscription.table_id);
            let latest = match table {
                Some(entry) => match self.db.open_table(entry).await {
                    Ok(handle) => handle.snapshot().await.ok().map(|s| s.version()),
                    Err(_) => None,
                },
                None => None,
            };
            rows.push((subscription, table.map(|t| t.qualified_name()), latest));
        }
        let u = |v: u64| i64::try_from(v).ok();
        table(
            vec![
                ("name", DataType::Utf8),
                ("table", DataType::Utf8),
                ("created_version", DataType::Int64),
                ("snapshot", DataType::Boolean),
                ("acknowledged_version", DataType::Int64),
                ("acknowledged_at", timestamp()),
                ("latest_version", DataType::Int64),
                ("pending_versions", DataType::Int64),
                ("created_at", timestamp()),
            ],
            vec![
                text(rows.iter().map(|(s, _, _)| Some(s.name.clone())).collect()),
                text(rows.iter().map(|(_, t, _)| t.clone()).collect()),
                int(rows.iter().map(|(s, _, _)| u(s.created_version)).collect()),
                Arc::new(arrow::array::BooleanArray::from(
                    rows.iter().map(|(s, _, _)| Some(s.snapshot)).collect::<Vec<_>>(),
                )),
                int(rows.iter().map(|(s, _, _)| s.acknowledged.and_then(u)).collect()),
                time(rows.iter().map(|(s, _, _)| s.acknowledged_ms).collect()),
                int(rows.iter().map(|(_, _, latest)| latest.and_then(u)).collect()),
                int(rows
                    .iter()
                    .map(|(s, _, latest)| latest.and_then(|l| u((l + 1).saturating_sub(s.needed_from()))))
                    .collect()),
                time(rows.iter().map(|(s, _, _)| Some(s.created_ms)).collect()),
            ],
        )
    }

    async fn views(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let entries: Vec<_> = state.tables.values().filter(|t| t.kind == TableKind::MaterializedView).collect();
        let mut rows = Vec::new();
        for entry in &entries {
            let status = crate::ivm::status(&self.views, entry).await;
            rows.push((entry, status));
        }
        let refresh = |e: &crate::catalog::TableEntry| {
            e.view.as_ref().map(|v| if v.refresh == crate::catalog::FlowMode::Async { "async" } else { "sync" })
        };
        let u = |v: Option<u64>| v.map(|v| v as i64);
        table(
            vec![
                ("schema", DataType::Utf8),
                ("name", DataType::Utf8),
                ("strategy", DataType::Utf8),
                ("reason", DataType::Utf8),
                ("refresh", DataType::Utf8),
                ("state", DataType::Utf8),
                ("inputs", DataType::Utf8),
                ("rows", DataType::Int64),
                ("maintenance_runs", DataType::Int64),
                ("last_maintenance_us", DataType::Int64),
                ("last_rows_in", DataType::Int64),
                ("maintained_at", timestamp()),
                ("checkpoint_version", DataType::Int64),
                ("checkpoint_inputs", DataType::Utf8),
                ("checkpoint_at", timestamp()),
                ("error", DataType::Utf8),
                ("query", DataType::Utf8),
            ],
            vec![
                text(rows.iter().map(|(e, _)| Some(e.schema.clone())).collect()),
                text(rows.iter().map(|(e, _)| Some(e.name.clone())).collect()),
                text(rows.iter().map(|(_, s)| Some(s.strategy.to_string()).filter(|s| !s.is_empty())).collect()),
                text(rows.iter().map(|(_, s)| s.reason.clone()).collect()),
                text(rows.iter().map(|(e, _)| refresh(e).map(str::to_string)).collect()),
                text(rows.iter().map(|(_, s)| Some(s.state.to_string())).collect()),
                text(rows.iter().map(|(_, s)| Some(s.inputs.clone())).collect()),
                int(rows.iter().map(|(_, s)| Some(s.rows as i64)).collect()),
                int(rows.iter().map(|(_, s)| Some(s.runs as i64)).collect()),
                int(rows.iter().map(|(_, s)| u(s.last_maintenance_us)).collect()),
                int(rows.iter().map(|(_, s)| Some(s.last_rows_in as i64)).collect()),
                time(rows.iter().map(|(_, s)| s.maintained_at_ms).collect()),
                int(rows.iter().map(|(_, s)| u(s.checkpoint_version)).collect()),
                text(rows.iter().map(|(_, s)| s.checkpoint_inputs.clone()).collect()),
                time(rows.iter().map(|(_, s)| s.checkpoint_at_ms).collect()),
                text(rows.iter().map(|(_, s)| s.error.clone()).collect()),
                text(rows.iter().map(|(e, _)| e.view.as_ref().map(|v| v.query.clone())).collect()),
            ],
        )
    }

    async fn flows(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let statuses = self.flows.statuses();
        let flows: Vec<_> = state.flows.values().collect();
        let mut source_versions = Vec::with_capacity(flows.len());
        let mut source_times = Vec::with_capacity(flows.len());
        for flow in &flows {
            let latest = match state.tables.get(&flow.source) {
                Some(entry) => match self.db.open_table(entry).await {
                    Ok(t) => Some(t.cached_snapshot()),
                    Err(_) => None,
                },
                None => None,
            };
            source_versions.push(latest.as_ref().map(|s| s.version() as i64));
            source_times.push(latest.as_ref().map(|s| s.timestamp_ms()));
        }
        let now = crate::util::now_ms();
        let mut applied = Vec::new();
        let mut lag_versions = Vec::new();
        let mut lag_seconds = Vec::new();
        let mut states = Vec::new();
        let mut errors = Vec::new();
        let mut failures = Vec::new();
        let mut rows_out = Vec::new();
        let (mut runs, mut rows_in, mut failures_total, mut durations) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((flow, source_version), source_time) in flows.iter().zip(&source_versions).zip(&source_times) {
            let status = statuses.get(&flow.name).cloned().unwrap_or_default();
            let done = status.applied_version;
            applied.push(done);
            let behind = source_version.map(|v| (v - done.unwrap_or(-1)).max(0));
            lag_versions.push(behind);
            lag_seconds.push(match (behind, *source_time) {
                (Some(0), _) => Some(0),
                (Some(_), Some(at)) => Some(((now - at) / 1000).max(0)),
                _ => None,
            });
            states.push(Some(status.state.as_str().to_string()));
            errors.push(status.error.clone());
            failures.push(Some(i64::from(status.failures)));
            rows_out.push(Some(status.rows_out_total as i64));
            runs.push(Some(status.runs as i64));
            rows_in.push(Some(status.rows_in_total as i64));
            failures_total.push(Some(status.failures_total as i64));
            durations.push(status.last_duration_ms);
        }
        table(
            vec![
                ("name", DataType::Utf8),
                ("source", DataType::Utf8),
                ("target", DataType::Utf8),
                ("syntax", DataType::Utf8),
                ("mode", DataType::Utf8),
                ("state", DataType::Utf8),
                ("last_source_version", DataType::Int64),
                ("source_version", DataType::Int64),
                ("lag_versions", DataType::Int64),
                ("lag_seconds", DataType::Int64),
                ("rows_out", DataType::Int64),
                ("failures", DataType::Int64),
                ("error", DataType::Utf8),
                ("query", DataType::Utf8),
                ("runs", DataType::Int64),
                ("rows_in", DataType::Int64),
                ("failures_total", DataType::Int64),
                ("last_run_duration_ms", DataType::Int64),
            ],
            vec![
                text(flows.iter().map(|f| Some(f.name.clone())).collect()),
                text(flows.iter().map(|f| Some(f.source.clone())).collect()),
                text(flows.iter().map(|f| Some(f.target.clone())).collect()),
                text(flows.iter().map(|f| Some(syntax(f.syntax, f.else_route).to_string())).collect()),
                text(
                    flows
                        .iter()
                        .map(|f| Some(if f.mode == FlowMode::Async { "async" } else { "sync" }.to_string()))
                        .collect(),
                ),
                text(states),
                int(applied),
                int(source_versions),
                int(lag_versions),
                int(lag_seconds),
                int(rows_out),
                int(failures),
                text(errors),
                text(
                    flows
                        .iter()
                        .map(|f| {
                            Some(match crate::flow::expand::describe(f) {
                                Some(shape) => format!("{} {shape}", f.query),
                                None => f.query.clone(),
                            })
                        })
                        .collect(),
                ),
                int(runs),
                int(rows_in),
                int(failures_total),
                int(durations),
            ],
        )
    }

    fn sources(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let statuses = self.sources.statuses();
        // One row per (source, ingesting table); a source nobody ingests has one row without a table.
        // The options are parsed once per source (they were checked when it was created).
        type SourceRow<'a> = (&'a crate::catalog::SourceEntry, Option<SourceOptions>, Option<String>);
        let mut rows: Vec<SourceRow> = Vec::new();
        for source in state.sources.values() {
            let options = SourceOptions::parse(source);
            let tables: Vec<String> = state.tables_ingesting(&source.name).map(|t| t.qualified_name()).collect();
            if tables.is_empty() {
                rows.push((source, options.clone(), None));
            }
            rows.extend(tables.into_iter().map(|t| (source, options.clone(), Some(t))));
        }
        let status = |table: &Option<String>| table.as_ref().and_then(|t| statuses.get(t)).cloned();
        let files = |table: &Option<String>| status(table).and_then(|s| s.files);
        let now = crate::util::now_ms();
        table(
            vec![
                ("name", DataType::Utf8),
                ("kind", DataType::Utf8),
                ("table", DataType::Utf8),
                ("brokers", DataType::Utf8),
                ("topics", DataType::Utf8),
                ("format", DataType::Utf8),
                ("state", DataType::Utf8),
                ("messages", DataType::Int64),
                ("dead_letters", DataType::Int64),
                ("batches", DataType::Int64),
                ("bytes", DataType::Int64),
                ("failures", DataType::Int64),
                ("last_batch_at", timestamp()),
                ("error", DataType::Utf8),
                ("options", DataType::Utf8),
                ("path", DataType::Utf8),
                ("files_seen", DataType::Int64),
                ("files_done", DataType::Int64),
                ("files_failed", DataType::Int64),
                ("files_pending", DataType::Int64),
                ("last_file", DataType::Utf8),
                ("lag_ms", DataType::Int64),
            ],
            vec![
                text(rows.iter().map(|(s, _, _)| Some(s.name.clone())).collect()),
                text(rows.iter().map(|(s, _, _)| Some(s.kind.clone())).collect()),
                text(rows.iter().map(|(_, _, t)| t.clone()).collect()),
                text(rows.iter().map(|(_, o, _)| o.as_ref().and_then(SourceOptions::brokers)).collect()),
                text(rows.iter().map(|(_, o, _)| o.as_ref().and_then(SourceOptions::topics)).collect()),
                text(rows.iter().map(|(_, o, _)| o.as_ref().map(SourceOptions::format)).collect()),
                text(
                    rows.iter()
                        .map(|(_, _, t)| {
                            Some(match (t, status(t)) {
                                (None, _) => "unused".to_string(),
                                (Some(_), Some(s)) => s.state.as_str().to_string(),
                                (Some(_), None) => "stopped".to_string(),
                            })
                        })
                        .collect(),
                ),
                int(rows.iter().map(|(_, _, t)| Some(status(t).map_or(0, |s| s.messages as i64))).collect()),
                int(rows.iter().map(|(_, _, t)| Some(status(t).map_or(0, |s| s.dead_letters as i64))).collect()),
                int(rows.iter().map(|(_, _, t)| Some(status(t).map_or(0, |s| s.batches as i64))).collect()),
                int(rows.iter().map(|(_, _, t)| Some(status(t).map_or(0, |s| s.bytes as i64))).collect()),
                int(rows.iter().map(|(_, _, t)| Some(status(t).map_or(0, |s| i64::from(s.failures)))).collect()),
                time(rows.iter().map(|(_, _, t)| status(t).and_then(|s| s.last_batch_ms)).collect()),
                text(rows.iter().map(|(_, _, t)| status(t).and_then(|s| s.error)).collect()),
                text(
                    rows.iter()
                        .map(|(s, _, _)| {
                            Some(
                                serde_json::to_string(&crate::source::options::shown_options(&s.options))
                                    .unwrap_or_default(),
                            )
                        })
                        .collect(),
                ),
                text(rows.iter().map(|(_, o, _)| o.as_ref().and_then(SourceOptions::path)).collect()),
                int(rows.iter().map(|(_, _, t)| files(t).map(|f| f.seen as i64)).collect()),
                int(rows.iter().map(|(_, _, t)| files(t).map(|f| f.done as i64)).collect()),
                int(rows.iter().map(|(_, _, t)| files(t).map(|f| f.failed as i64)).collect()),
                int(rows.iter().map(|(_, _, t)| files(t).map(|f| f.pending as i64)).collect()),
                text(rows.iter().map(|(_, _, t)| files(t).and_then(|f| f.last_file)).collect()),
                int(rows
                    .iter()
                    .map(|(_, _, t)| files(t).map(|f| f.oldest_pending_ms.map_or(0, |oldest| (now - oldest).max(0))))
                    .collect()),
            ],
        )
    }

    /// Per source partition: the offset each ingesting table committed (from its log) and the
    /// partition's high watermark (as the client last saw it).
    async fn kafka_offsets(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let statuses = self.sources.statuses();
        // (source, table, topic, partition, committed offset, high watermark)
        type OffsetRow = (String, String, String, i64, Option<i64>, Option<i64>);
        let mut rows: Vec<OffsetRow> = Vec::new();
        for entry in state.tables.values() {
            let Some(source) = &entry.source else { continue };
            let Ok(table) = self.db.open_table(entry).await else { continue };
            let snapshot = table.cached_snapshot();
            let mut offsets: BTreeMap<(String, i32), Option<i64>> = BTreeMap::new();
            for txn in snapshot.txns().values() {
                if let Some((topic, partition)) = crate::source::parse_txn_app_id(source, &txn.app_id) {
                    offsets.insert((topic.to_string(), partition), Some(txn.version));
                }
            }
            let status = statuses.get(&entry.qualified_name());
            if let Some(status) = status {
                for key in status.high_watermarks.keys() {
                    offsets.entry(key.clone()).or_insert(None);
                }
            }
            for ((topic, partition), offset) in offsets {
                let mark = status.and_then(|s| s.high_watermarks.get(&(topic.clone(), partition)).copied());
                rows.push((source.clone(), entry.qualified_name(), topic, i64::from(partition), offset, mark));
            }
        }
        table(
            vec![
                ("source", DataType::Utf8),
                ("table", DataType::Utf8),
                ("topic", DataType::Utf8),
                ("partition", DataType::Int64),
                ("offset", DataType::Int64),
                ("high_watermark", DataType::Int64),
                ("lag", DataType::Int64),
            ],
            vec![
                text(rows.iter().map(|r| Some(r.0.clone())).collect()),
                text(rows.iter().map(|r| Some(r.1.clone())).collect()),
                text(rows.iter().map(|r| Some(r.2.clone())).collect()),
                int(rows.iter().map(|r| Some(r.3)).collect()),
                int(rows.iter().map(|r| r.4).collect()),
                int(rows.iter().map(|r| r.5).collect()),
                int(rows.iter().map(|r| r.5.map(|mark| (mark - r.4.map_or(0, |o| o + 1)).max(0))).collect()),
            ],
        )
    }

    fn lineage(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        // (source, target, flow, syntax): flows, then materialized views from what they read.
        let mut edges: Vec<(String, String, String, String)> = state
            .flows
            .values()
            .map(|f| (f.source.clone(), f.target.clone(), f.name.clone(), syntax(f.syntax, f.else_route).to_string()))
            .collect();
        for view in state.tables.values() {
            let Some(definition) = &view.view else { continue };
            // Tables read through a named view are that view's edges, not this one's.
            let through: Vec<&String> = definition
                .views
                .iter()
                .filter_map(|v| state.tables.get(v))
                .filter_map(|v| v.view.as_ref())
                .flat_map(|v| v.inputs.iter())
                .collect();
            let direct = definition.inputs.iter().filter(|i| !through.contains(i)).chain(&definition.views);
            for source in direct {
                edges.push((source.clone(), view.qualified_name(), view.name.clone(), "materialized view".into()));
            }
        }
        table(
            vec![
                ("source", DataType::Utf8),
                ("target", DataType::Utf8),
                ("flow", DataType::Utf8),
                ("syntax", DataType::Utf8),
            ],
            vec![
                text(edges.iter().map(|e| Some(e.0.clone())).collect()),
                text(edges.iter().map(|e| Some(e.1.clone())).collect()),
                text(edges.iter().map(|e| Some(e.2.clone())).collect()),
                text(edges.iter().map(|e| Some(e.3.clone())).collect()),
            ],
        )
    }

    /// The event log's table, after writing the events recorded so far (a reader sees every
    /// event recorded before its statement).
    async fn events(&self) -> DfResult<Arc<dyn TableProvider>> {
        let log = &self.db.events;
        if let Err(e) = log.flush().await {
            tracing::warn!("event log: recorded events not written yet: {e}");
        }
        let table = log.table().await?;
        let snapshot = table.snapshot().await.map_err(crate::error::Error::from)?;
        Ok(Arc::new(crate::provider::SluiceTable::new(table, snapshot, self.db.scan_options())))
    }

    /// The alerts, with what the watcher knows of each (see [`crate::alerts`]).
    fn alerts(&self) -> DfResult<Arc<dyn TableProvider>> {
        let alerts: Vec<_> = self.db.catalog.current().alerts.values().cloned().collect();
        let states = self.alerts.states();
        let state = |name: &str| states.get(name).cloned().unwrap_or_default();
        let texts = |f: &dyn Fn(&crate::alerts::AlertEntry) -> Option<String>| text(alerts.iter().map(f).collect());
        let ints = |f: &dyn Fn(&crate::alerts::AlertEntry) -> Option<i64>| int(alerts.iter().map(f).collect());
        let times = |f: &dyn Fn(&crate::alerts::AlertEntry) -> Option<i64>| time(alerts.iter().map(f).collect());
        table(
            vec![
                ("name", DataType::Utf8),
                ("condition", DataType::Utf8),
                ("webhook", DataType::Utf8),
                ("state", DataType::Utf8),
                ("last_fired_at", timestamp()),
                ("last_cleared_at", timestamp()),
                ("last_message", DataType::Utf8),
                ("deliveries", DataType::Int64),
                ("delivery_failures", DataType::Int64),
                ("last_delivery_error", DataType::Utf8),
                ("last_delivered_at", timestamp()),
                ("check_error", DataType::Utf8),
                ("cooldown_seconds", DataType::Int64),
                ("retries", DataType::Int64),
                ("created_at", timestamp()),
            ],
            vec![
                texts(&|a| Some(a.name.clone())),
                texts(&|a| Some(a.describe())),
                texts(&|a| Some(a.webhook_shown())),
                texts(&|a| Some(if state(&a.name).firing { "firing" } else { "ok" }.to_string())),
                times(&|a| state(&a.name).last_fired_ms),
                times(&|a| state(&a.name).last_cleared_ms),
                texts(&|a| state(&a.name).last_message),
                ints(&|a| i64::try_from(state(&a.name).deliveries).ok()),
                ints(&|a| i64::try_from(state(&a.name).delivery_failures).ok()),
                texts(&|a| state(&a.name).last_delivery_error),
                times(&|a| state(&a.name).last_delivered_ms),
                texts(&|a| state(&a.name).check_error),
                ints(&|a| i64::try_from(a.cooldown_seconds).ok()),
                ints(&|a| Some(i64::from(a.retries))),
                times(&|a| Some(a.created_ms)),
            ],
        )
    }

    fn expectations(&self) -> DfResult<Arc<dyn TableProvider>> {
        let state = self.db.catalog.current();
        let counts = self.db.events.violations();
        let checked = self.db.events.checked();
        let mut rows: Vec<(String, String, String, String, i64, i64)> = Vec::new();
        for entry in state.tables.values() {
            for e in &entry.expectations {
                let action = match &e.action {
                    crate::catalog::ViolationAction::Keep => "keep".to_string(),
                    crate::catalog::ViolationAction::DropRow => "drop row".to_string(),
                    crate::catalog::ViolationAction::Fail => "fail update".to_string(),
                    crate::catalog::ViolationAction::Quarantine(t) => format!("quarantine into {t}"),
                };
                let key = (entry.qualified_name(), e.name.clone());
                let count = counts.get(&key).copied().unwrap_or(0);
                let rows_checked = checked.get(&key).copied().unwrap_or(0).max(count);
                rows.push((key.0, key.1, e.expr.clone(), action, count as i64, rows_checked as i64));
            }
        }
        table(
            vec![
                ("table", DataType::Utf8),
                ("name", DataType::Utf8),
                ("expression", DataType::Utf8),
                ("on_violation", DataType::Utf8),
                ("violations", DataType::Int64),
                ("rows_checked", DataType::Int64),
                ("passed", DataType::Int64),
            ],
            vec![
                text(rows.iter().map(|r| Some(r.0.clone())).collect()),
                text(rows.iter().map(|r| Some(r.1.clone())).collect()),
                text(rows.iter().map(|r| Some(r.2.clone())).collect()),
                text(rows.iter().map(|r| Some(r.3.clone())).collect()),
                int(rows.iter().map(|r| Some(r.4)).collect()),
                int(rows.iter().map(|r| Some(r.5)).collect()),
                int(rows.iter().map(|r| Some(r.5 - r.4)).collect()),
            ],
        )
    }
}

fn syntax(syntax: FlowSyntax, else_route: bool) -> &'static str {
    match (syntax, else_route) {
        (FlowSyntax::Push, true) => "push (else)",
        (FlowSyntax::Push, false) => "push",
        (FlowSyntax::Pull, _) => "pull",
        (FlowSyntax::Flow, _) => "flow",
    }
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(Some(match name {
            "tables" => self.tables()?,
            "flows" => self.flows().await?,
            "lineage" => self.lineage()?,
            "events" => self.events().await?,
            "expectations" => self.expectations()?,
            "sources" => self.sources()?,
            "kafka_offsets" => self.kafka_offsets().await?,
            "views" => self.views().await?,
            "indexes" => self.indexes().await?,
            "subscriptions" => self.subscriptions().await?,
            "alerts" => self.alerts()?,
            _ => return Ok(None),
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }

    async fn table_type(&self, name: &str) -> DfResult<Option<TableType>> {
        Ok(TABLES.contains(&name).then_some(TableType::View))
    }
}

/// The keys and indexes of every table of the warehouse (a table that does not open is left out,
/// and said so in the log).
pub async fn all_indexes(db: &Warehouse) -> Vec<crate::keys::IndexInfo> {
    let mut out: Vec<crate::keys::IndexInfo> = all_relations(db)
        .await
        .into_iter()
        .flat_map(|r| {
            let (schema, table) = (r.schema, r.table);
            r.indexes.into_iter().map(move |def| crate::keys::IndexInfo {
                schema: schema.clone(),
                table: table.clone(),
                def,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.schema, &a.table, &a.def.name).cmp(&(&b.schema, &b.table, &b.def.name)));
    out
}

/// A table's columns and keys as the Postgres catalogs describe them (`pg_attribute`,
/// `pg_attrdef`, `pg_index`, `pg_constraint`).
#[derive(Debug, Clone, PartialEq)]
pub struct RelationInfo {
    pub schema: String,
    pub table: String,
    pub columns: Vec<ColumnInfo>,
    pub indexes: Vec<crate::keys::KeyDef>,
    /// The CHECK constraints the engine enforces (`delta.constraints.<name>` and column
    /// invariants): name and SQL expression, by name.
    pub checks: Vec<(String, String)>,
    /// The bytes of the table's current data files (what `pg_table_size` reports).
    pub size_bytes: i64,
    /// Its FOREIGN KEY constraints, by name.
    pub foreign_keys: Vec<ForeignKeyInfo>,
    /// Its comment (the Delta description; see [`crate::sql::comments`]).
    pub description: Option<String>,
    /// The comments on its constraints, by constraint name.
    pub constraint_comments: Vec<(String, String)>,
}

/// A FOREIGN KEY constraint with the table it references, as the catalogs show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignKeyInfo {
    pub name: String,
    pub columns: Vec<String>,
    pub parent_schema: String,
    pub parent_table: String,
    pub parent_columns: Vec<String>,
    /// The parent's unique key or unique index that the constraint uses (its name).
    pub parent_key: Option<String>,
    pub on_delete: crate::catalog::references::RefAction,
    pub on_update: crate::catalog::references::RefAction,
    pub match_full: bool,
    /// Added NOT VALID and not validated since (`pg_constraint.convalidated` false).
    pub not_valid: bool,
}

impl ForeignKeyInfo {
    /// As `pg_get_constraintdef` shows it, the parent's name qualified unless it is in `public`
    /// (PostgreSQL qualifies it when it is not on the search path).
    pub fn definition(&self) -> String {
        let parent = if self.parent_schema == crate::catalog::DEFAULT_SCHEMA {
            crate::names::quoted_if_needed(&self.parent_table)
        } else {
            format!(
                "{}.{}",
                crate::names::quoted_if_needed(&self.parent_schema),
                crate::names::quoted_if_needed(&self.parent_table)
            )
        };
        let list = |columns: &[String]| -> String {
            columns.iter().map(|c| crate::names::quoted_if_needed(c)).collect::<Vec<_>>().join(", ")
        };
        let mut text =
            format!("FOREIGN KEY ({}) REFERENCES {parent}({})", list(&self.columns), list(&self.parent_columns));
        if self.match_full {
            text.push_str(" MATCH FULL");
        }
        if self.on_update != crate::catalog::references::RefAction::NoAction {
            text.push_str(&format!(" ON UPDATE {}", self.on_update.words()));
        }
        if self.on_delete != crate::catalog::references::RefAction::NoAction {
            text.push_str(&format!(" ON DELETE {}", self.on_delete.words()));
        }
        if self.not_valid {
            text.push_str(" NOT VALID");
        }
        text
    }
}

/// A column's default and identity, as PostgreSQL shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    /// The DEFAULT expression (a SERIAL's is `nextval('<table>_<column>_seq'::regclass)`).
    pub default: Option<String>,
    /// `a` (GENERATED ALWAYS AS IDENTITY), `d` (BY DEFAULT) or None, as `pg_attribute.attidentity`.
    pub identity: Option<char>,
    /// The declared type's PostgreSQL name (`integer`, `uuid`, `varchar(20)`, `numeric(10,2)`).
    pub type_name: String,
    pub nullable: bool,
    /// Its comment (the `comment` of its Delta field metadata).
    pub comment: Option<String>,
    /// A generated column (`GENERATED ALWAYS AS (expr) STORED`): its expression is `default`,
    /// as PostgreSQL keeps it in `pg_attrdef` with `attgenerated` = `s`.
    pub generated: bool,
    /// The collation its definition named (`COLLATE "C"`), None for the default one.
    pub collation: Option<String>,
}

/// The columns and keys of every table of the warehouse (and materialized view), sorted by
/// schema and name; a table that does not open is left out, and said so in the log.
pub async fn all_relations(db: &Warehouse) -> Vec<RelationInfo> {
    relations_in(db, db.catalog.current(), None).await
}

/// Every table's columns and keys in `state`, a catalog as one session sees it (with the tables
/// its transaction block created).
/// With `staging`, a transaction block's: a table it changed (ALTER TABLE, an index) is shown
/// as the block sees it.
pub async fn relations_in(
    db: &Warehouse,
    state: Arc<crate::catalog::CatalogState>,
    staging: Option<&crate::staging::Staging>,
) -> Vec<RelationInfo> {
    let mut out = Vec::new();
    // Materialized views too: their indexes (CREATE INDEX on a view) are listed as PostgreSQL's.
    for entry in state.tables.values() {
        let table = match staging.and_then(|s| s.staged_handle(&entry.id)) {
            Some(staged) => Ok(staged),
            None => db.open_table(entry).await,
        };
        let snapshot = match table {
            Ok(table) => table.snapshot().await.map_err(crate::error::Error::from),
            Err(e) => Err(e),
        };
        let snapshot = match snapshot {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::warn!(table = %entry.qualified_name(), "it is left out of the catalogs: {e}");
                continue;
            }
        };
        let columns = snapshot
            .schema()
            .fields
            .iter()
            .map(|field| {
                let identity = crate::identity::Identity::of(field);
                let serial = identity.is_some() && crate::identity::is_serial(field);
                let generation = crate::sql::generated::expression_of(field);
                let default = if let Some(expression) = generation {
                    Some(expression.to_string())
                } else if serial {
                    let sequence = crate::identity::sequence_name(&entry.name, &field.name);
                    Some(format!("nextval('{}'::regclass)", sequence.replace('\'', "''")))
                } else {
                    entry.defaults.get(&field.name).cloned()
                };
                let identity = match identity {
                    Some(identity) if !serial => Some(if identity.allow_explicit_insert { 'd' } else { 'a' }),
                    _ => None,
                };
                let type_name = crate::types::pg_type_name(field);
                let comment = field
                    .metadata
                    .get(crate::sql::comments::COLUMN_COMMENT_KEY)
                    .and_then(|c| c.as_str())
                    .map(str::to_string);
                ColumnInfo {
                    name: field.name.clone(),
                    default,
                    identity,
                    type_name,
                    nullable: field.nullable,
                    comment,
                    generated: generation.is_some(),
                    collation: field
                        .metadata
                        .get(crate::sql::collations::COLLATION_KEY)
                        .and_then(|c| c.as_str())
                        .map(str::to_string),
                }
            })
            .collect();
        out.push(RelationInfo {
            schema: entry.schema.clone(),
            table: entry.name.clone(),
            columns,
            indexes: crate::keys::key_defs(snapshot.configuration()),
            checks: snapshot.constraints(),
            size_bytes: snapshot.files().map(|f| f.size).sum(),
            foreign_keys: Vec::new(),
            description: snapshot.metadata().description.clone(),
            constraint_comments: crate::sql::comments::constraint_comments(snapshot.configuration()),
        });
    }
    // Each foreign key with its parent's name and the parent's key it uses.
    let mut foreign_keys = Vec::new();
    for (at, relation) in out.iter().enumerate() {
        let Some(entry) = state.table(&relation.schema, &relation.table) else { continue };
        for key in &entry.foreign_keys {
            let Some(parent) = state.table_by_id(&key.parent) else { continue };
            let parent_key = out
                .iter()
                .find(|r| r.schema == parent.schema && r.table == parent.name)
                .and_then(|r| r.indexes.iter().find(|k| k.unique && k.is_on(&key.parent_columns)))
                .map(|k| k.name.clone());
            foreign_keys.push((
                at,
                ForeignKeyInfo {
                    name: key.name.clone(),
                    columns: key.columns.clone(),
                    parent_schema: parent.schema.clone(),
                    parent_table: parent.name.clone(),
                    parent_columns: key.parent_columns.clone(),
                    parent_key,
                    on_delete: key.on_delete,
                    on_update: key.on_update,
                    match_full: key.match_full,
                    not_valid: key.not_valid,
                },
            ));
        }
    }
    for (at, key) in foreign_keys {
        if let Some(relation) = out.get_mut(at) {
            relation.foreign_keys.push(key);
        }
    }
    for relation in &mut out {
        relation.foreign_keys.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out.sort_by(|a, b| (&a.schema, &a.table).cmp(&(&b.schema, &b.table)));
    out
}

/// A source's options as `sluice.sources` shows them, by kind.
#[derive(Clone)]
enum SourceOptions {
    Kafka(crate::source::options::KafkaOptions),
    Files(crate::files::options::FileOptions),
}

impl SourceOptions {
    /// The options of a source (checked when it was created).
    fn parse(source: &crate::catalog::SourceEntry) -> Option<Self> {
        match source.kind.as_str() {
            "files" => crate::files::options::FileOptions::parse(&source.options).ok().map(Self::Files),
            _ => crate::source::options::KafkaOptions::parse(&source.options).ok().map(Self::Kafka),
        }
    }

    fn brokers(&self) -> Option<String> {
        match self {
            Self::Kafka(o) => Some(o.brokers.clone()),
            Self::Files(_) => None,
        }
    }

    fn topics(&self) -> Option<String> {
        match self {
            Self::Kafka(o) => Some(o.topics_text()),
            Self::Files(_) => None,
        }
    }

    fn format(&self) -> String {
        match self {
            Self::Kafka(o) => o.format.as_str().to_string(),
            Self::Files(o) => o.format.as_str().to_string(),
        }
    }

    fn path(&self) -> Option<String> {
        match self {
            Self::Kafka(_) => None,
            Self::Files(o) => Some(match &o.pattern {
                Some(pattern) => format!("{}/{pattern}", o.path),
                None => o.path.clone(),
            }),
        }
    }
}
