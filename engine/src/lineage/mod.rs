//! The lineage graph of a warehouse and its status, for people to look at: sources, tables,
//! streaming tables, materialized views and views as nodes (with their row counts, states and
//! lags), flows as edges, drawn as SVG ([`to_svg`]), Graphviz DOT ([`to_dot`]) or Mermaid
//! ([`to_mermaid`]), and [`status`], the JSON the status page of `sluice serve --http` shows.
//!
//! It is built only from what the public API shows: statements on the `sluice` system tables
//! (`tables`, `lineage`, `flows`, `views`, `sources`, `kafka_offsets`, `events`,
//! `expectations`), the catalog's views and the tables' snapshots. It does not own any state, and
//! no runtime knows about it.

mod draw;
mod layout;
mod text;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::database::Database;
use crate::error::Result;

pub use draw::to_svg;
pub use layout::{layout, Layout};
pub use text::{to_dot, to_mermaid};

/// The failures [`status`] lists, newest first.
pub const STATUS_ERRORS_MAX: usize = 20;

/// The tables whose rows are counted for one graph (their snapshots' statistics, no scan); the
/// rest show no count.
pub const ROW_COUNTED_TABLES_MAX: usize = 1_000;

/// The warehouse as a graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LineageGraph {
    pub nodes: Vec<LineageNode>,
    pub edges: Vec<LineageEdge>,
}

/// A source, table, streaming table, materialized view or view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageNode {
    /// Unique in the graph: `schema.name` for relations, the source's name for a source
    /// (`source:name` when a relation has that key).
    pub id: String,
    /// `source`, `table`, `streaming table`, `materialized view` or `view`.
    pub kind: String,
    pub rows: Option<i64>,
    /// From the system tables: a source's or a materialized view's own state; a table's is the
    /// worst state of the flows and sources that write it (`failed`, `retrying`, `running`,
    /// `starting`, `idle`); `idle` when nothing writes it.
    pub state: String,
    /// The most versions a flow writing it is behind its source.
    pub lag_versions: Option<i64>,
    /// The most seconds a flow writing it is behind its source (a file source: how long its
    /// oldest pending file has waited).
    pub lag_seconds: Option<f64>,
    /// A source's records not ingested yet: Kafka messages past the committed offsets, or files
    /// pending.
    pub lag_records: Option<i64>,
    /// The error of the failing flow, source or view.
    pub error: Option<String>,
}

/// A flow (push or pull), a materialized view's or a view's input, or a source's ingest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageEdge {
    pub from: String,
    pub to: String,
    /// The flow's name (a materialized view's or a view's own name; `source -> table` for a
    /// source's ingest, as `sluice.events` names it).
    pub flow: String,
    /// As `sluice.lineage` says it (`push`, `push (else)`, `pull`, `flow`, `materialized view`),
    /// or `source`, or `view`.
    pub syntax: String,
    pub state: String,
    pub lag_versions: Option<i64>,
    pub error: Option<String>,
}

impl LineageNode {
    fn new(id: String, kind: &str) -> Self {
        Self {
            id,
            kind: kind.to_string(),
            rows: None,
            state: IDLE.to_string(),
            lag_versions: None,
            lag_seconds: None,
            lag_records: None,
            error: None,
        }
    }

    /// Whether it is drawn as failing.
    pub fn failed(&self) -> bool {
        self.state == FAILED
    }
}

impl LineageEdge {
    /// Whether it is drawn as failing.
    pub fn failed(&self) -> bool {
        self.state == FAILED
    }
}

const IDLE: &str = "idle";
const FAILED: &str = "failed";

/// How bad a state is, to show a table the worst of the flows that write it.
fn severity(state: &str) -> u8 {
    match state {
        FAILED => 6,
        "retrying" => 5,
        "running" => 4,
        "starting" => 3,
        "stopped" => 2,
        IDLE => 1,
        _ => 0,
    }
}

/// One row of a system table as JSON (a NULL column is absent).
type Row = Map<String, Value>;

fn text<'a>(row: &'a Row, column: &str) -> Option<&'a str> {
    row.get(column).and_then(Value::as_str)
}

fn int(row: &Row, column: &str) -> Option<i64> {
    row.get(column).and_then(Value::as_i64)
}

/// The rows of a query, as JSON objects.
async fn rows(db: &Database, sql: &str) -> Result<Vec<Row>> {
    db.query_json(sql).await
}

/// What the graph is built from: the system tables' rows, read once.
#[derive(Debug, Default)]
struct Inputs {
    /// `sluice.tables`.
    tables: Vec<Row>,
    /// `sluice.lineage`.
    lineage: Vec<Row>,
    /// `sluice.flows`.
    flows: Vec<Row>,
    /// `sluice.views` (materialized views).
    materialized: Vec<Row>,
    /// `sluice.sources`.
    sources: Vec<Row>,
    /// The Kafka messages not ingested yet, per (source, table).
    kafka_lag: BTreeMap<(String, String), i64>,
    /// Views (CREATE VIEW): key and the relations they read.
    views: Vec<(String, Vec<String>)>,
    /// Rows per table key.
    rows: BTreeMap<String, i64>,
}

impl Inputs {
    async fn read(db: &Database) -> Result<Self> {
        let tables = rows(db, "SELECT schema, name, kind FROM sluice.tables ORDER BY schema, name").await?;
        let kafka_lag = rows(db, "SELECT source, \"table\", sum(lag) AS lag FROM sluice.kafka_offsets GROUP BY 1, 2")
            .await?
            .iter()
            .filter_map(|r| Some(((text(r, "source")?.to_string(), text(r, "table")?.to_string()), int(r, "lag")?)))
            .collect();
        let mut views: Vec<(String, Vec<String>)> =
            db.views().into_iter().map(|v| (format!("{}.{}", v.schema, v.name), v.inputs)).collect();
        views.sort();
        let mut inputs = Self {
            lineage: rows(db, "SELECT source, target, flow, syntax FROM sluice.lineage").await?,
            flows: rows(db, "SELECT * FROM sluice.flows ORDER BY name").await?,
            materialized: rows(db, "SELECT * FROM sluice.views ORDER BY schema, name").await?,
            sources: rows(db, "SELECT * FROM sluice.sources ORDER BY name, \"table\"").await?,
            kafka_lag,
            views,
            rows: BTreeMap::new(),
            tables,
        };
        inputs.rows = row_counts(db, &inputs.tables).await;
        Ok(inputs)
    }
}

/// The rows of each table (not materialized views: `sluice.views` counts theirs), from its
/// cached snapshot's file statistics less deleted rows; a table without statistics or that does
/// not open has no count.
async fn row_counts(db: &Database, tables: &[Row]) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for table in tables.iter().take(ROW_COUNTED_TABLES_MAX) {
        let (Some(schema), Some(name)) = (text(table, "schema"), text(table, "name")) else { continue };
        if text(table, "kind") == Some("materialized view") {
            continue;
        }
        let name = crate::names::TableName { schema: schema.to_string(), name: name.to_string() };
        let Ok(handle) = db.table(&name).await else { continue };
        // The newest snapshot the handle has seen: every write of this process goes through it,
        // and the page asks every 2 s, so no listing of the table's log for it.
        let snapshot = handle.cached_snapshot();
        let mut rows = Some(0i64);
        for file in snapshot.files() {
            let deleted = file.deletion_vector.as_ref().map_or(0, |d| d.cardinality.max(0));
            rows = match (rows, file.num_records()) {
                (Some(sum), Some(n)) => Some(sum.saturating_add(n.max(0).saturating_sub(deleted))),
                _ => None,
            };
        }
        if let Some(rows) = rows {
            counts.insert(format!("{schema}.{name}", name = name.name), rows);
        }
    }
    counts
}

/// The warehouse's lineage graph: its sources, tables, streaming tables, materialized views and
/// views, and the flows between them, with their states as the system tables show them now.
pub async fn lineage_graph(db: &Database) -> Result<LineageGraph> {
    Ok(build(&Inputs::read(db).await?))
}

/// The nodes and edges being built, nodes by id in the order they were first named.
#[derive(Default)]
struct Builder {
    nodes: Vec<LineageNode>,
    at: BTreeMap<String, usize>,
    edges: Vec<LineageEdge>,
}

impl Builder {
    /// The node `id`, made with `kind` if it is not there yet.
    fn node(&mut self, id: &str, kind: &str) -> Option<&mut LineageNode> {
        let at = match self.at.get(id) {
            Some(at) => *at,
            None => {
                self.nodes.push(LineageNode::new(id.to_string(), kind));
                self.at.insert(id.to_string(), self.nodes.len() - 1);
                self.nodes.len() - 1
            }
        };
        self.nodes.get_mut(at)
    }

    fn edge(&mut self, edge: LineageEdge) {
        // An edge names nodes that exist (a relation a view reads that is not a table: a
        // system table, say).
        self.node(&edge.from, "table");
        self.node(&edge.to, "table");
        self.edges.push(edge);
    }
}

fn build(inputs: &Inputs) -> LineageGraph {
    let mut graph = Builder::default();
    relations(&mut graph, inputs);
    flows(&mut graph, inputs);
    sources(&mut graph, inputs);
    writers_state(&mut graph);
    let Builder { mut nodes, mut edges, .. } = graph;
    // Sources first and views' inputs last, as data goes (the layout starts from this order).
    nodes.sort_by_key(|n| n.kind != "source");
    edges.sort_by_key(|e| match e.syntax.as_str() {
        "source" => 0,
        "view" => 2,
        _ => 1,
    });
    LineageGraph { nodes, edges }
}

/// Tables, materialized views and views, and what views read.
fn relations(graph: &mut Builder, inputs: &Inputs) {
    for table in &inputs.tables {
        let (Some(schema), Some(name)) = (text(table, "schema"), text(table, "name")) else { continue };
        let id = format!("{schema}.{name}");
        let rows = inputs.rows.get(&id).copied();
        if let Some(node) = graph.node(&id, text(table, "kind").unwrap_or("table")) {
            node.rows = rows;
        }
    }
    for view in &inputs.materialized {
        let (Some(schema), Some(name)) = (text(view, "schema"), text(view, "name")) else { continue };
        if let Some(node) = graph.node(&format!("{schema}.{name}"), "materialized view") {
            node.rows = int(view, "rows");
            node.state = text(view, "state").unwrap_or(IDLE).to_string();
            node.error = text(view, "error").map(str::to_string);
        }
    }
    for (view, reads) in &inputs.views {
        graph.node(view, "view");
        for input in reads {
            graph.edge(LineageEdge {
                from: input.clone(),
                to: view.clone(),
                flow: view.clone(),
                syntax: "view".to_string(),
                state: IDLE.to_string(),
                lag_versions: None,
                error: None,
            });
        }
    }
}

/// The edges of `sluice.lineage`, with their flows' (or materialized views') states.
fn flows(graph: &mut Builder, inputs: &Inputs) {
    let flows: BTreeMap<&str, &Row> = inputs.flows.iter().filter_map(|f| Some((text(f, "name")?, f))).collect();
    let views: BTreeMap<String, &Row> = inputs
        .materialized
        .iter()
        .filter_map(|v| Some((format!("{}.{}", text(v, "schema")?, text(v, "name")?), v)))
        .collect();
    for edge in &inputs.lineage {
        let (Some(from), Some(to), Some(name)) = (text(edge, "source"), text(edge, "target"), text(edge, "flow"))
        else {
            continue;
        };
        let syntax = text(edge, "syntax").unwrap_or("flow");
        // A materialized view's edges share the view's state; a flow's are its own.
        let status = match flows.get(name) {
            Some(flow) if syntax != "materialized view" => Some(*flow),
            _ => views.get(to).copied(),
        };
        let lag_seconds = status.and_then(|s| int(s, "lag_seconds")).map(|s| s as f64);
        if let Some(target) = graph.node(to, "table") {
            target.lag_seconds = max_f64(target.lag_seconds, lag_seconds);
        }
        graph.edge(LineageEdge {
            from: from.to_string(),
            to: to.to_string(),
            flow: name.to_string(),
            syntax: syntax.to_string(),
            state: status.and_then(|s| text(s, "state")).unwrap_or(IDLE).to_string(),
            lag_versions: status.and_then(|s| int(s, "lag_versions")),
            error: status.and_then(|s| text(s, "error")).map(str::to_string),
        });
    }
}

/// Sources, each with an edge to the tables that ingest it.
fn sources(graph: &mut Builder, inputs: &Inputs) {
    let relations: std::collections::BTreeSet<String> = graph.at.keys().cloned().collect();
    for source in &inputs.sources {
        let Some(name) = text(source, "name") else { continue };
        let id = if relations.contains(name) { format!("source:{name}") } else { name.to_string() };
        let state = text(source, "state").unwrap_or(IDLE);
        let table = text(source, "table");
        let kafka_lag = table.and_then(|t| inputs.kafka_lag.get(&(name.to_string(), t.to_string())).copied());
        let pending = int(source, "files_pending").or(kafka_lag);
        let lag_ms = int(source, "lag_ms");
        let error = text(source, "error").map(str::to_string);
        if let Some(node) = graph.node(&id, "source") {
            // A source read by several tables shows the worst of its ingests.
            if severity(state) > severity(&node.state) || node.state == IDLE {
                node.state = state.to_string();
                node.error = error.clone().or(node.error.take());
            }
            node.lag_records = max(node.lag_records, pending);
            node.lag_seconds = max_f64(node.lag_seconds, lag_ms.map(|ms| ms as f64 / 1000.0));
        }
        if let Some(table) = table {
            graph.edge(LineageEdge {
                from: id.clone(),
                to: table.to_string(),
                flow: format!("{name} -> {table}"),
                syntax: "source".to_string(),
                state: state.to_string(),
                lag_versions: None,
                error,
            });
        }
    }
}

/// A table's (or streaming table's) state is the worst of the flows and sources that write it,
/// and its lag the most of theirs.
fn writers_state(graph: &mut Builder) {
    for node in &mut graph.nodes {
        if !matches!(node.kind.as_str(), "table" | "streaming table") {
            continue;
        }
        for edge in graph.edges.iter().filter(|e| e.to == node.id && e.from != node.id) {
            if severity(&edge.state) > severity(&node.state) {
                node.state = edge.state.clone();
                node.error = edge.error.clone();
            }
            node.lag_versions = max(node.lag_versions, edge.lag_versions);
        }
    }
}

fn max(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn max_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// What the status page shows, as JSON: `graph` (the lineage graph), `flows`, `sources` and
/// `views` (the rows of their system tables, each source with `lag_records`), `errors` (the
/// newest [`STATUS_ERRORS_MAX`] failures of `sluice.events`), `expectations` (each with
/// `pass_rate`), `summary` (counts of nodes, edges, flows, sources, and failing flows, sources
/// and materialized views) and `generated_at_ms`.
pub async fn status(db: &Database) -> Result<Value> {
    let inputs = Inputs::read(db).await?;
    let graph = build(&inputs);
    let errors = rows(
        db,
        &format!(
            "SELECT at, flow, kind, message FROM sluice.events \
             WHERE kind LIKE '%fail%' OR kind LIKE '%error%' OR kind = 'rejected' \
             ORDER BY at DESC LIMIT {STATUS_ERRORS_MAX}"
        ),
    )
    .await?;
    let expectations = expectations(&rows(db, "SELECT * FROM sluice.expectations ORDER BY 1, 2").await?, &graph);
    let sources: Vec<Row> = inputs
        .sources
        .iter()
        .map(|source| {
            let mut source = source.clone();
            let key = (
                text(&source, "name").unwrap_or_default().to_string(),
                text(&source, "table").unwrap_or_default().to_string(),
            );
            if let Some(lag) = inputs.kafka_lag.get(&key) {
                source.insert("lag_records".to_string(), json!(lag));
            } else if let Some(pending) = int(&source, "files_pending") {
                source.insert("lag_records".to_string(), json!(pending));
            }
            source
        })
        .collect();
    let failed = |rows: &[Row]| rows.iter().filter(|r| text(r, "state") == Some(FAILED)).count();
    Ok(json!({
        "generated_at_ms": crate::util::now_ms(),
        "summary": {
            "nodes": graph.nodes.len(),
            "edges": graph.edges.len(),
            "flows": inputs.flows.len(),
            "sources": sources.len(),
            "failed": failed(&inputs.flows) + failed(&sources) + failed(&inputs.materialized),
        },
        "graph": graph,
        "flows": inputs.flows,
        "sources": sources,
        "views": inputs.materialized,
        "errors": errors,
        "expectations": expectations,
    }))
}

/// `sluice.expectations` with each expectation's `pass_rate` (0 to 1; null before any row was
/// checked): counted (`passed` rows of `rows_checked`) when the system table counts passes, else
/// estimated from the table's rows (`pass_rate_estimated`: true).
fn expectations(expectations: &[Row], graph: &LineageGraph) -> Vec<Row> {
    expectations
        .iter()
        .map(|row| {
            let mut row = row.clone();
            let violations = int(&row, "violations").unwrap_or(0).max(0);
            let rate = match int(&row, "passed") {
                Some(passed) => {
                    let checked = passed.max(0).saturating_add(violations);
                    (checked > 0).then(|| passed.max(0) as f64 / checked as f64)
                }
                None => {
                    // Rows kept with their violation are in the table; others are not.
                    let stored = text(&row, "table")
                        .and_then(|t| graph.nodes.iter().find(|n| n.id == t))
                        .and_then(|n| n.rows)
                        .unwrap_or(0);
                    let kept = text(&row, "on_violation") == Some("keep");
                    let checked = if kept { stored.max(violations) } else { stored.saturating_add(violations) };
                    row.insert("pass_rate_estimated".to_string(), Value::Bool(true));
                    (checked > 0).then(|| (checked - violations) as f64 / checked as f64)
                }
            };
            row.insert("pass_rate".to_string(), rate.map_or(Value::Null, |r| json!(r)));
            row
        })
        .collect()
}

/// The name a drawing shows: the key without the default schema.
fn short_name(id: &str) -> &str {
    id.strip_prefix("public.").filter(|rest| !rest.is_empty()).unwrap_or(id)
}

/// `1234567` as `1,234,567`.
fn grouped(number: i64) -> String {
    let digits = number.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if number < 0 {
        out.push('-');
    }
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A node's rows and state: `1,234 rows · running`.
fn rows_and_state(node: &LineageNode) -> String {
    match node.rows {
        Some(rows) => format!("{} row{} · {}", grouped(rows), if rows == 1 { "" } else { "s" }, node.state),
        None => node.state.clone(),
    }
}

/// A node's lag (`lag 3 versions · 12 s · 40 pending`, or `caught up`), empty when nothing is
/// known.
fn lag(node: &LineageNode) -> String {
    let mut parts = Vec::new();
    if let Some(versions) = node.lag_versions.filter(|v| *v > 0) {
        parts.push(format!("{} version{}", grouped(versions), if versions == 1 { "" } else { "s" }));
    }
    if let Some(seconds) = node.lag_seconds.filter(|s| *s > 0.0) {
        parts.push(if seconds < 10.0 { format!("{seconds:.1} s") } else { format!("{seconds:.0} s") });
    }
    if let Some(records) = node.lag_records.filter(|r| *r > 0) {
        parts.push(format!("{} pending", grouped(records)));
    }
    let known = node.lag_versions.is_some() || node.lag_seconds.is_some() || node.lag_records.is_some();
    match (parts.is_empty(), known) {
        (false, _) => format!("lag {}", parts.join(" · ")),
        (true, true) => "caught up".to_string(),
        (true, false) => String::new(),
    }
}

/// An edge's label: its syntax, and its lag when it is behind.
fn edge_label(edge: &LineageEdge) -> String {
    match edge.lag_versions {
        Some(lag) if lag > 0 => format!("{} · lag {}", edge.syntax, grouped(lag)),
        _ => edge.syntax.clone(),
    }
}

/// At most `max` characters of `text`, with `…` when it was cut.
fn clipped(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: Value) -> Row {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    /// A Kafka source into bronze, three push routes (one failing), a pull flow, a materialized
    /// view and a view.
    fn pipeline() -> Inputs {
        let table = |name: &str, kind: &str| row(json!({"schema": "public", "name": name, "kind": kind}));
        let lineage = |source: &str, target: &str, flow: &str, syntax: &str| {
            row(json!({"source": source, "target": target, "flow": flow, "syntax": syntax}))
        };
        let flow = |name: &str, target: &str, state: &str, lag: i64| {
            row(
                json!({"name": name, "source": "public.bronze", "target": target, "state": state, "lag_versions": lag, "lag_seconds": lag * 2}),
            )
        };
        Inputs {
            tables: vec![
                table("bronze", "streaming table"),
                table("orders", "streaming table"),
                table("payments", "streaming table"),
                table("clicks", "streaming table"),
                table("gold", "streaming table"),
                table("revenue", "materialized view"),
                table("bronze_errors", "table"),
            ],
            lineage: vec![
                lineage("public.bronze", "public.orders", "bronze_to_orders", "push"),
                lineage("public.bronze", "public.payments", "bronze_to_payments", "push"),
                lineage("public.bronze", "public.clicks", "bronze_to_clicks", "push"),
                lineage("public.orders", "public.gold", "gold", "pull"),
                lineage("public.orders", "public.revenue", "revenue", "materialized view"),
            ],
            flows: vec![
                flow("bronze_to_orders", "public.orders", "idle", 0),
                flow("bronze_to_payments", "public.payments", "failed", 3),
                flow("bronze_to_clicks", "public.clicks", "running", 1),
                flow("gold", "public.gold", "idle", 0),
            ],
            materialized: vec![row(json!({"schema": "public", "name": "revenue", "state": "idle", "rows": 4}))],
            sources: vec![row(json!({"name": "shop", "kind": "kafka", "table": "public.bronze", "state": "running"}))],
            kafka_lag: [(("shop".to_string(), "public.bronze".to_string()), 7)].into_iter().collect(),
            views: vec![("public.big_orders".to_string(), vec!["public.orders".to_string()])],
            rows: [("public.bronze".to_string(), 100), ("public.orders".to_string(), 30)].into_iter().collect(),
        }
    }

    #[test]
    fn the_graph_has_sources_flows_views_and_their_states() {
        let graph = build(&pipeline());
        let node = |id: &str| graph.nodes.iter().find(|n| n.id == id).unwrap_or_else(|| panic!("no node {id}"));
        assert_eq!(graph.nodes.len(), 9, "{:#?}", graph.nodes);
        assert_eq!(node("shop").kind, "source");
        assert_eq!(node("shop").lag_records, Some(7));
        assert_eq!(node("public.bronze").rows, Some(100));
        assert_eq!(node("public.bronze").state, "running");
        assert_eq!(node("public.payments").state, "failed");
        assert_eq!(node("public.payments").lag_versions, Some(3));
        assert_eq!(node("public.clicks").state, "running");
        assert_eq!(node("public.orders").state, "idle");
        assert_eq!(node("public.revenue").rows, Some(4));
        assert_eq!(node("public.big_orders").kind, "view");
        assert_eq!(graph.edges.len(), 7, "{:#?}", graph.edges);
        let edge = |from: &str, to: &str| graph.edges.iter().find(|e| e.from == from && e.to == to).unwrap();
        assert_eq!(edge("shop", "public.bronze").syntax, "source");
        assert!(edge("public.bronze", "public.payments").failed());
        assert!(!edge("public.bronze", "public.orders").failed());
        assert_eq!(edge("public.orders", "public.gold").syntax, "pull");
        assert_eq!(edge("public.orders", "public.big_orders").syntax, "view");
    }

    #[test]
    fn a_source_named_as_a_table_gets_its_own_node() {
        let mut inputs = pipeline();
        inputs.sources.push(row(json!({"name": "public.orders", "kind": "files", "table": "public.bronze", "state": "failed", "error": "boom"})));
        let graph = build(&inputs);
        let source = graph.nodes.iter().find(|n| n.id == "source:public.orders").unwrap();
        assert_eq!(
            (source.kind.as_str(), source.state.as_str(), source.error.as_deref()),
            ("source", "failed", Some("boom"))
        );
        let bronze = graph.nodes.iter().find(|n| n.id == "public.bronze").unwrap();
        assert_eq!((bronze.state.as_str(), bronze.error.as_deref()), ("failed", Some("boom")));
    }

    #[test]
    fn pass_rates_are_counted_or_estimated() {
        let graph = build(&pipeline());
        let rows = expectations(
            &[
                row(
                    json!({"table": "public.orders", "name": "a", "on_violation": "keep", "violations": 3, "passed": 27}),
                ),
                row(json!({"table": "public.orders", "name": "b", "on_violation": "drop row", "violations": 10})),
                row(json!({"table": "public.gold", "name": "c", "on_violation": "keep", "violations": 0})),
            ],
            &graph,
        );
        let rate = |i: usize| rows.get(i).and_then(|r| r.get("pass_rate")).cloned().unwrap();
        assert_eq!(rate(0), json!(0.9));
        assert_eq!(rate(1), json!(0.75));
        assert_eq!(rate(2), Value::Null);
        assert!(rows.first().unwrap().get("pass_rate_estimated").is_none());
        assert_eq!(rows.get(1).unwrap().get("pass_rate_estimated"), Some(&Value::Bool(true)));
    }
}
