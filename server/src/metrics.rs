//! `/metrics`: Prometheus' text exposition format (0.0.4) of the server's own counters (pgwire
//! connections, statements by kind, errors by SQLSTATE, statement latency) and of the engine's
//! state, read at each scrape from the same system tables a client queries (`sluice.flows`,
//! `sluice.sources`, `sluice.kafka_offsets`, `sluice.views`, `sluice.expectations`), so the two
//! always agree, plus the writer's commit counters and the event log's.
//!
//! The server's counters are one set per process ([`global`]), as Prometheus expects of a target.

use std::sync::OnceLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use sluice::Database;

/// The pgwire counters of this process.
pub struct PgMetrics {
    registry: Registry,
    pub connections: IntGauge,
    pub connections_total: IntCounter,
    pub connections_refused: IntCounter,
    pub statements: IntCounterVec,
    pub errors: IntCounterVec,
    pub latency: HistogramVec,
}

/// Statement latency buckets, in seconds: 0.5 ms to 60 s.
const LATENCY_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0];

fn make() -> Result<PgMetrics, prometheus::Error> {
    let registry = Registry::new();
    let connections = IntGauge::new("sluice_pgwire_connections", "Clients connected now")?;
    let connections_total = IntCounter::new("sluice_pgwire_connections_total", "Clients that connected")?;
    let connections_refused = IntCounter::new(
        "sluice_pgwire_connections_refused_total",
        "Clients refused before startup (too many connections)",
    )?;
    let statements =
        IntCounterVec::new(Opts::new("sluice_pgwire_statements_total", "Statements run, by kind"), &["kind"])?;
    let errors = IntCounterVec::new(
        Opts::new("sluice_pgwire_errors_total", "Statements that failed, by SQLSTATE"),
        &["sqlstate"],
    )?;
    let latency = HistogramVec::new(
        HistogramOpts::new("sluice_pgwire_statement_seconds", "Statement latency, by kind")
            .buckets(LATENCY_BUCKETS.to_vec()),
        &["kind"],
    )?;
    registry.register(Box::new(connections.clone()))?;
    registry.register(Box::new(connections_total.clone()))?;
    registry.register(Box::new(connections_refused.clone()))?;
    registry.register(Box::new(statements.clone()))?;
    registry.register(Box::new(errors.clone()))?;
    registry.register(Box::new(latency.clone()))?;
    Ok(PgMetrics { registry, connections, connections_total, connections_refused, statements, errors, latency })
}

/// This process's pgwire counters (`None` only if the metric definitions were invalid, which
/// the unit test rules out).
pub fn global() -> Option<&'static PgMetrics> {
    static METRICS: OnceLock<Option<PgMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match make() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!("the pgwire metrics could not be defined: {e}");
                None
            }
        })
        .as_ref()
}

impl PgMetrics {
    /// One statement ran: `kind` is its command (`select`, `insert`, `ddl`, ...), `sqlstate` its
    /// error's.
    pub fn statement(&self, kind: &str, seconds: f64, sqlstate: Option<&str>) {
        self.statements.with_label_values(&[kind]).inc();
        self.latency.with_label_values(&[kind]).observe(seconds);
        if let Some(code) = sqlstate {
            self.errors.with_label_values(&[code]).inc();
        }
    }
}

/// The kind a statement is counted under (a small, fixed set of label values).
pub fn statement_kind(statement: &sluice::sql::parser::SluiceStatement) -> &'static str {
    use datafusion::sql::sqlparser::ast::Statement as S;
    use sluice::sql::parser::SluiceStatement as Sluice;
    match statement {
        Sluice::Standard(standard) => match standard.as_ref() {
            S::Query(_) => "select",
            S::Insert(_) => "insert",
            S::Update(_) => "update",
            S::Delete(_) => "delete",
            S::Merge(_) => "merge",
            S::Copy { .. } => "copy",
            S::StartTransaction { .. }
            | S::Commit { .. }
            | S::Rollback { .. }
            | S::Savepoint { .. }
            | S::ReleaseSavepoint { .. } => "transaction",
            S::Set(_) | S::ShowVariable { .. } | S::ShowVariables { .. } => "set",
            S::Explain { .. } => "explain",
            _ if sluice::rights::reads_only(statement) => "other",
            _ => "ddl",
        },
        Sluice::InsertByName { .. } | Sluice::InsertOverriding { .. } => "insert",
        _ if sluice::rights::reads_only(statement) => "other",
        _ => "ddl",
    }
}

/// A metric family of the engine's state at one scrape.
struct Scrape {
    registry: Registry,
}

impl Scrape {
    fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntGaugeVec, prometheus::Error> {
        let gauge = IntGaugeVec::new(Opts::new(name, help), labels)?;
        self.registry.register(Box::new(gauge.clone()))?;
        Ok(gauge)
    }

    fn counter(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, prometheus::Error> {
        let counter = IntCounterVec::new(Opts::new(name, help), labels)?;
        self.registry.register(Box::new(counter.clone()))?;
        Ok(counter)
    }
}

/// A system table's rows by column name (a table that cannot be read counts as empty, and says
/// so in the log: one failing table does not take the others' metrics down).
struct Rows(Vec<serde_json::Map<String, serde_json::Value>>);

impl Rows {
    async fn read(db: &Database, sql: &str) -> Rows {
        match db.query_json(sql).await {
            Ok(rows) => Rows(rows),
            Err(e) => {
                tracing::warn!("metrics: {sql}: {e}");
                Rows(vec![])
            }
        }
    }

    /// Calls `each` with every row.
    fn each(&self, mut each: impl FnMut(&Row)) {
        for row in &self.0 {
            each(&Row(row));
        }
    }
}

struct Row<'a>(&'a serde_json::Map<String, serde_json::Value>);

impl Row<'_> {
    fn text(&self, column: &str) -> String {
        self.0.get(column).and_then(serde_json::Value::as_str).unwrap_or_default().to_string()
    }

    fn int(&self, column: &str) -> Option<i64> {
        self.0.get(column).and_then(serde_json::Value::as_i64)
    }
}

fn unsigned(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

/// The engine's metrics, read now.
async fn engine_registry(db: &Database) -> Result<Registry, prometheus::Error> {
    let scrape = Scrape { registry: Registry::new() };

    let flows = Rows::read(
        db,
        "SELECT name, state, runs, rows_in, rows_out, failures_total, lag_versions, lag_seconds, \
         last_run_duration_ms FROM sluice.flows",
    )
    .await;
    let runs = scrape.counter("sluice_flow_runs_total", "Flow runs that applied source versions", &["flow"])?;
    let rows_in = scrape.counter("sluice_flow_rows_in_total", "Rows flows read", &["flow"])?;
    let rows_out = scrape.counter("sluice_flow_rows_out_total", "Rows flows wrote", &["flow"])?;
    let failures = scrape.counter("sluice_flow_failures_total", "Failed flow runs", &["flow"])?;
    let lag_versions = scrape.gauge("sluice_flow_lag_versions", "Source versions a flow has not applied", &["flow"])?;
    let lag_seconds =
        scrape.gauge("sluice_flow_lag_seconds", "Age of the oldest unapplied source version", &["flow"])?;
    let duration = scrape.gauge("sluice_flow_last_run_milliseconds", "Duration of a flow's last run", &["flow"])?;
    let failed = scrape.gauge("sluice_flow_failed", "1 while a flow is failed", &["flow"])?;
    flows.each(|r| {
        let flow = r.text("name");
        let labels = [flow.as_str()];
        runs.with_label_values(&labels).inc_by(unsigned(r.int("runs")));
        rows_in.with_label_values(&labels).inc_by(unsigned(r.int("rows_in")));
        rows_out.with_label_values(&labels).inc_by(unsigned(r.int("rows_out")));
        failures.with_label_values(&labels).inc_by(unsigned(r.int("failures_total")));
        lag_versions.with_label_values(&labels).set(r.int("lag_versions").unwrap_or(0));
        lag_seconds.with_label_values(&labels).set(r.int("lag_seconds").unwrap_or(0));
        duration.with_label_values(&labels).set(r.int("last_run_duration_ms").unwrap_or(0));
        failed.with_label_values(&labels).set(i64::from(r.text("state") == "failed"));
    });

    let sources = Rows::read(
        db,
        "SELECT name, coalesce(\"table\", '') AS target, state, messages, bytes, dead_letters, batches, failures, \
         files_pending, lag_ms FROM sluice.sources",
    )
    .await;
    let labels = ["source", "table"];
    let messages =
        scrape.counter("sluice_source_messages_total", "Messages (or rows of files) a source ingested", &labels)?;
    let bytes = scrape.counter("sluice_source_bytes_total", "Bytes a source ingested", &labels)?;
    let dead = scrape.counter("sluice_source_dead_letters_total", "Records a source could not decode", &labels)?;
    let batches = scrape.counter("sluice_source_batches_total", "Batches a source committed", &labels)?;
    let source_failures = scrape.counter("sluice_source_failures_total", "Failures of a source's ingest", &labels)?;
    let pending = scrape.gauge("sluice_source_files_pending", "Files a FILES source has yet to ingest", &labels)?;
    let source_lag = scrape.gauge("sluice_source_lag_milliseconds", "How far behind a FILES source is", &labels)?;
    let source_failed = scrape.gauge("sluice_source_failed", "1 while a source's ingest is failed", &labels)?;
    sources.each(|r| {
        let (name, table) = (r.text("name"), r.text("target"));
        let labels = [name.as_str(), table.as_str()];
        messages.with_label_values(&labels).inc_by(unsigned(r.int("messages")));
        bytes.with_label_values(&labels).inc_by(unsigned(r.int("bytes")));
        dead.with_label_values(&labels).inc_by(unsigned(r.int("dead_letters")));
        batches.with_label_values(&labels).inc_by(unsigned(r.int("batches")));
        source_failures.with_label_values(&labels).inc_by(unsigned(r.int("failures")));
        pending.with_label_values(&labels).set(r.int("files_pending").unwrap_or(0));
        source_lag.with_label_values(&labels).set(r.int("lag_ms").unwrap_or(0));
        source_failed.with_label_values(&labels).set(i64::from(r.text("state") == "failed"));
    });

    let offsets =
        Rows::read(db, "SELECT source, topic, \"partition\", lag FROM sluice.kafka_offsets WHERE lag IS NOT NULL")
            .await;
    let partition_lag = scrape.gauge(
        "sluice_source_partition_lag_messages",
        "Messages of a Kafka partition not yet ingested",
        &["source", "topic", "partition"],
    )?;
    offsets.each(|r| {
        let (source, topic, partition) =
            (r.text("source"), r.text("topic"), r.int("partition").unwrap_or(0).to_string());
        partition_lag.with_label_values(&[&source, &topic, &partition]).set(r.int("lag").unwrap_or(0));
    });

    let views = Rows::read(
        db,
        "SELECT schema || '.' || name AS view, strategy, state, rows, maintenance_runs, last_maintenance_us FROM sluice.views",
    )
    .await;
    let view_rows = scrape.gauge("sluice_view_rows", "Rows of a materialized view", &["view", "strategy"])?;
    let view_runs =
        scrape.counter("sluice_view_maintenance_runs_total", "Maintenance runs of a view", &["view", "strategy"])?;
    let view_time = scrape.gauge(
        "sluice_view_last_maintenance_microseconds",
        "Duration of a view's last maintenance",
        &["view", "strategy"],
    )?;
    let view_failed =
        scrape.gauge("sluice_view_failed", "1 while a view's maintenance is failed", &["view", "strategy"])?;
    views.each(|r| {
        let (view, strategy) = (r.text("view"), r.text("strategy"));
        let labels = [view.as_str(), strategy.as_str()];
        view_rows.with_label_values(&labels).set(r.int("rows").unwrap_or(0));
        view_runs.with_label_values(&labels).inc_by(unsigned(r.int("maintenance_runs")));
        view_time.with_label_values(&labels).set(r.int("last_maintenance_us").unwrap_or(0));
        view_failed.with_label_values(&labels).set(i64::from(r.text("state") == "failed"));
    });

    let expectations = Rows::read(db, "SELECT \"table\", name, violations, passed FROM sluice.expectations").await;
    let passed =
        scrape.counter("sluice_expectation_passed_total", "Rows that met an expectation", &["table", "expectation"])?;
    let violated = scrape.counter(
        "sluice_expectation_violated_total",
        "Rows that violated an expectation",
        &["table", "expectation"],
    )?;
    expectations.each(|r| {
        let (table, name) = (r.text("table"), r.text("name"));
        passed.with_label_values(&[&table, &name]).inc_by(unsigned(r.int("passed")));
        violated.with_label_values(&[&table, &name]).inc_by(unsigned(r.int("violations")));
    });

    let stats = db.write_stats();
    let storage = [
        ("sluice_storage_commits_total", "Commits to tables", stats.commits),
        ("sluice_storage_conflicts_total", "Commits that lost to a concurrent one", stats.conflicts),
        ("sluice_storage_files_written_total", "Data files written by commits", stats.files_written),
        ("sluice_storage_bytes_written_total", "Bytes of data files written by commits", stats.bytes_written),
        ("sluice_event_log_events_total", "Events written to the event log", stats.events_written),
        ("sluice_event_log_dropped_total", "Events dropped (the log could not be written)", stats.events_dropped),
    ];
    for (name, help, value) in storage {
        scrape.counter(name, help, &[])?.with_label_values(&[] as &[&str]).inc_by(value);
    }
    scrape
        .gauge("sluice_event_log_pending", "Events recorded, not yet written", &[])?
        .with_label_values(&[] as &[&str])
        .set(i64::try_from(stats.events_pending).unwrap_or(i64::MAX));
    Ok(scrape.registry)
}

/// The text of `/metrics`.
pub async fn render(db: &Database) -> Result<String, String> {
    let mut families = match global() {
        Some(pg) => pg.registry.gather(),
        None => vec![],
    };
    families.extend(engine_registry(db).await.map_err(|e| e.to_string())?.gather());
    let mut out = Vec::new();
    TextEncoder::new().encode(&families, &mut out).map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    #[test]
    fn the_metrics_are_well_defined() {
        assert!(super::make().is_ok());
    }
}
