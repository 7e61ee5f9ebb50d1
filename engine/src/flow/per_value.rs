//! `PUSH INTO TABLE PER expr [NAMED 'template'] [WHERE p] [EXPAND JSON c]`: one route that makes
//! a table per distinct value of `expr` (a Kafka topic, a landing subfolder) and feeds it.
//!
//! The route is kept in the catalog ([`ValueRoute`]) with the last source version whose values
//! it has looked at. After each commit of the source (before the source's flows run), and on the
//! worker's catch-up passes, the versions since are read, their distinct values computed, and each
//! value seen for the first time gets its target, named from the template and sanitised (lower
//! case; characters other than letters, digits and `_` become `_`; at most 63 bytes), created from
//! the route's output shape, and an ordinary push route `<source>_to_<target>` whose query is the
//! route's rows with that value. The new flows, the new values and the version looked at are one
//! catalog change; the new target starts with the flow's txn at the version before the value's
//! first, so it is fed from the commit that brought it, exactly once, by the flow runtime like any
//! route (and shows in `sluice.lineage` and `sluice.flows` as one).
//!
//! Ordinary routes of the source take their rows first: the per-value route takes the rows none
//! of their predicates took (as an ELSE route would; the two cannot be combined). Rows whose value
//! is NULL stay in the source only. A value whose name is taken (by another value that sanitises
//! to the same name, or by a table the route did not make) is refused: the error is recorded as
//! an event of the route and the value's rows are not routed.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;

use super::query::quoted_key;
use super::{lock, FlowEvent, FlowRuntime};
use crate::catalog::{FlowEntry, FlowMode, FlowSyntax, ValueRoute};
use crate::error::{Error, Result};
use crate::sql::context::QueryContext;
use crate::syntax::parser::{parse_statement_text, SluiceStatement};

/// The longest table name (PostgreSQL's NAMEDATALEN - 1).
const NAME_BYTES_MAX: usize = 63;

/// A value as part of a table name.
pub fn sanitise(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// The target name for `value`: the template with its `{...}` replaced by the sanitised value.
pub fn target_name(template: &str, value: &str) -> Result<String> {
    let invalid = |why: &str| {
        Error::data("42602", format!("value '{value}' of a PUSH INTO TABLE PER route cannot name a table: {why}"))
    };
    let (Some(open), Some(close)) = (template.find('{'), template.find('}')) else {
        return Err(Error::Plan(format!("the template '{template}' has no {{...}} for the value")));
    };
    let (Some(before), Some(after)) = (template.get(..open), template.get(close + 1..)) else {
        return Err(Error::Plan(format!("the template '{template}' has no {{...}} for the value")));
    };
    let part = sanitise(value);
    if part.is_empty() {
        return Err(invalid("it has no letter or digit"));
    }
    let name = format!("{before}{part}{after}");
    if name.len() > NAME_BYTES_MAX {
        return Err(invalid(&format!("'{name}' is longer than {NAME_BYTES_MAX} bytes")));
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(invalid(&format!("'{name}' starts with a digit")));
    }
    Ok(name)
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The query of the route of one value.
pub fn value_query(route: &ValueRoute, value: &str) -> String {
    let mut conditions = Vec::new();
    if let Some(predicate) = &route.predicate {
        conditions.push(format!("({predicate})"));
    }
    conditions.push(format!("CAST(({}) AS TEXT) = {}", route.expr, literal(value)));
    format!("SELECT * FROM {} WHERE {}", quoted_key(&route.source), conditions.join(" AND "))
}

/// The rows a per-value route takes: its own predicate and the rows no ordinary route took.
pub fn route_predicate(own: Option<String>, ordinary: &[Option<String>]) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(own) = own {
        parts.push(format!("coalesce(({own}), false)"));
    }
    if !ordinary.is_empty() {
        if ordinary.iter().any(Option::is_none) {
            parts.push("false".to_string());
        } else {
            let taken: Vec<String> = ordinary.iter().flatten().map(|p| format!("coalesce(({p}), false)")).collect();
            parts.push(format!("NOT ({})", taken.join(" OR ")));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" AND "))
}

/// Checks a new route's expression and predicate against the source (by planning them) and
/// stores it, replacing the source's previous one (its template was checked by the caller).
pub(crate) async fn define(cx: &QueryContext, route: ValueRoute) -> Result<()> {
    let probe = format!(
        "SELECT CAST(({}) AS TEXT) FROM {} WHERE {}",
        route.expr,
        quoted_key(&route.source),
        route.predicate.as_deref().unwrap_or("true")
    );
    cx.run_sql_text(&format!("{probe} LIMIT 0")).await?;
    cx.clear_statement_state();
    cx.db
        .catalog
        .update(|state| {
            state.value_routes.insert(route.source.clone(), route.clone());
            Ok(())
        })
        .await?;
    Ok(())
}

/// The name a per-value route's events and runner go by.
fn route_name(source_key: &str) -> String {
    format!("{}_per_value", source_key.rsplit('.').next().unwrap_or(source_key))
}

/// How many source versions a route may look at without a new value before the version it has
/// looked at is written to the catalog (until then it is kept in memory, and a restart looks at
/// those versions again).
const SCANNED_UNSAVED_MAX: i64 = 100;

/// Makes the tables and flows of the values first seen in the versions of `source_key` since the
/// route last looked; `known` are the rows a commit just inserted (its version and rows), which
/// spare reading them back. Returns whether it made any.
pub(crate) async fn discover(
    flows_rt: &Arc<FlowRuntime>,
    source_key: &str,
    known: Option<(u64, &[RecordBatch])>,
) -> Result<bool> {
    let db = &flows_rt.db;
    let name = route_name(source_key);
    // One discovery of a source at a time (a writer's and the worker's), in a session kept for it.
    let runner = flows_rt.runner(&name);
    let mut session = runner.lock().await;
    let cx = session.get_or_insert_with(|| QueryContext::new(db.clone()));
    let state = db.catalog.current();
    let (Some(route), Some(entry)) = (state.value_routes.get(source_key).cloned(), state.tables.get(source_key)) else {
        return Ok(false);
    };
    // What this process remembers holds for this route of this table only (not one redefined, or
    // a table of the same name made again).
    let identity = format!("{}\u{0}{}\u{0}{}\u{0}{:?}", entry.id, route.expr, route.template, route.predicate);
    let remembered = match lock(&flows_rt.scanned).get(source_key) {
        Some((of, version)) if *of == identity => *version,
        _ => -1,
    };
    let scanned = route.scanned_version.max(remembered);
    let table = db.open_table(entry).await?;
    let (end, schema, rows) = match known {
        Some((version, rows)) if version as i64 == scanned + 1 => {
            let schema = match rows.first() {
                Some(batch) => batch.schema(),
                None => table.cached_snapshot().arrow_schema(),
            };
            (version as i64, schema, rows.to_vec())
        }
        _ => {
            let snapshot = table.snapshot().await?;
            let end = snapshot.version() as i64;
            if scanned >= end {
                return Ok(false);
            }
            let rows = super::inserted_rows(&table, (scanned + 1).max(0) as u64, end as u64).await?;
            (end, snapshot.arrow_schema(), rows)
        }
    };
    let values =
        if rows.iter().all(|b| b.num_rows() == 0) { vec![] } else { distinct_values(cx, &route, schema, rows).await? };
    let mut made: BTreeMap<String, String> = BTreeMap::new();
    let mut flows = Vec::new();
    for value in values.into_iter().filter(|v| !route.tables.contains_key(v)) {
        match make_target(cx, &route, &value, &made).await {
            Ok((target, flow)) => {
                made.insert(value, target);
                flows.push(flow);
            }
            Err(e) => db.events.record(FlowEvent {
                at_ms: super::now_ms(),
                flow: name.clone(),
                kind: "failed",
                source_from: Some(scanned + 1),
                source_to: Some(end),
                rows_in: 0,
                rows_out: 0,
                violations: BTreeMap::new(),
                message: Some(e.to_string()),
                ..Default::default()
            }),
        }
    }
    lock(&flows_rt.scanned).insert(source_key.to_string(), (identity, end));
    // Versions without a new value cost no catalog change (but for one in a while).
    if made.is_empty() && end - route.scanned_version < SCANNED_UNSAVED_MAX {
        return Ok(false);
    }
    let added = !flows.is_empty();
    db.catalog
        .update(|state| {
            let Some(stored) = state.value_routes.get_mut(source_key) else { return Ok(()) };
            // Another process looked further meanwhile: its catalog change stands.
            if stored.scanned_version >= end || stored.expr != route.expr {
                return Ok(());
            }
            stored.scanned_version = end;
            for (value, target) in &made {
                stored.tables.insert(value.clone(), target.clone());
            }
            for flow in &flows {
                state.flows.entry(flow.name.clone()).or_insert_with(|| flow.clone());
            }
            Ok(())
        })
        .await?;
    Ok(added)
}

/// The distinct non-null values of the route's expression over `rows` of its source.
async fn distinct_values(
    cx: &QueryContext,
    route: &ValueRoute,
    schema: arrow::datatypes::SchemaRef,
    rows: Vec<RecordBatch>,
) -> Result<Vec<String>> {
    let probe = FlowEntry {
        name: "__per_value".into(),
        source: route.source.clone(),
        target: route.source.clone(),
        query: format!(
            "SELECT DISTINCT CAST(({}) AS TEXT) AS value FROM {} WHERE {}",
            route.expr,
            quoted_key(&route.source),
            route.predicate.as_deref().unwrap_or("true")
        ),
        syntax: FlowSyntax::Push,
        mode: FlowMode::Sync,
        by_name: true,
        else_route: false,
        predicate: None,
        expand_json: None,
        cdc: None,
        changes: false,
        evolve: false,
        created_ms: 0,
    };
    let output = super::apply::flow_output(cx, &probe, schema, rows).await?;
    let mut values = Vec::new();
    for batch in output {
        let column = arrow::compute::cast(batch.column(0), &DataType::Utf8)?;
        let column = column.as_string::<i32>();
        values.extend((0..column.len()).filter(|&i| column.is_valid(i)).map(|i| column.value(i).to_string()));
    }
    values.sort();
    values.dedup();
    Ok(values)
}

/// A flow's output fitted to a target that evolves: output columns the target lacks become new
/// columns (one `ADD COLUMNS` commit) when some row has a value for them, and are left out when
/// none has.
pub(crate) async fn fit_output(
    cx: &QueryContext,
    target_key: &str,
    output: Vec<arrow::array::RecordBatch>,
) -> Result<Vec<arrow::array::RecordBatch>> {
    let Some(first) = output.first() else { return Ok(output) };
    let schema = first.schema();
    let name = crate::names::parse_table_name(target_key)?;
    let target = cx.target(&crate::names::object_name(&name.schema, &name.name)).await;
    cx.clear_statement_state();
    let target_schema = target?.snapshot.arrow_schema();
    let has = |field: &str| target_schema.fields().iter().any(|f| f.name().eq_ignore_ascii_case(field));
    let valued = |index: usize| output.iter().any(|b| b.column(index).null_count() < b.num_rows());
    let mut keep = Vec::new();
    let mut missing = Vec::new();
    for (index, field) in schema.fields().iter().enumerate() {
        if has(field.name()) {
            keep.push(index);
        } else if valued(index) {
            keep.push(index);
            missing.push(field.as_ref().clone());
        }
    }
    if !missing.is_empty() {
        crate::sql::evolve::add_columns(cx, target_key, &arrow::datatypes::Fields::from(missing)).await?;
    }
    if keep.len() == schema.fields().len() {
        return Ok(output);
    }
    Ok(output.iter().map(|b| b.project(&keep)).collect::<std::result::Result<_, _>>()?)
}

/// Creates the target of `value` (or adopts an empty one the route made before a crash) and
/// returns it with its flow, whose txn on the target starts at the route's last looked version.
async fn make_target(
    cx: &QueryContext,
    route: &ValueRoute,
    value: &str,
    made: &BTreeMap<String, String>,
) -> Result<(String, FlowEntry)> {
    let source = crate::names::parse_table_name(&route.source)?;
    let name = target_name(&route.template, value)?;
    let key = crate::catalog::key(&source.schema, &name);
    let taken_by = route.tables.iter().chain(made.iter()).find(|(_, t)| **t == key).map(|(v, _)| v.clone());
    if let Some(other) = taken_by {
        return Err(Error::DuplicateObject {
            kind: "table",
            name: format!(
                "{name} (values '{other}' and '{value}' of the PUSH INTO TABLE PER route of {} both name it)",
                route.source
            ),
        });
    }
    let state = cx.db.catalog.current();
    let flow_name = format!("{}_to_{name}", source.name);
    if state.flows.contains_key(&flow_name) {
        return Err(Error::DuplicateObject { kind: "flow", name: flow_name });
    }
    let query_text = value_query(route, value);
    let object = crate::names::object_name(&source.schema, &name);
    if let Some(existing) = state.tables.get(&key) {
        let empty = cx.db.open_table(existing).await?.snapshot().await?.files().next().is_none();
        let fed = state.flows.values().any(|f| f.target == key);
        if !empty || fed {
            return Err(Error::DuplicateObject {
                kind: "table",
                name: format!(
                    "{name} (value '{value}' of the PUSH INTO TABLE PER route of {} names a table it did not make)",
                    route.source
                ),
            });
        }
    } else if let Some(column) = &route.expand_json {
        let shape = super::expand::expanded_shape(cx, &query_text, column).await?;
        let SluiceStatement::Standard(statement) = parse_statement_text(&shape)? else {
            return Err(Error::Internal("a route needs a query".into()));
        };
        let datafusion::sql::sqlparser::ast::Statement::Query(query) = *statement else {
            return Err(Error::Internal("a route needs a query".into()));
        };
        super::ddl::create_for_output(cx, &object, &query).await?;
        cx.clear_statement_state();
    } else {
        // Its columns come with its rows (see [`fit_output`]): those its own rows have values for.
        super::ddl::create_empty_streaming(cx, &object).await?;
        cx.clear_statement_state();
    }
    // The flow starts after the versions the route looked at before (the value was not in them).
    if route.scanned_version >= 0 {
        let target = cx.target(&object).await;
        cx.clear_statement_state();
        let target = target?;
        let txn = sluice_storage::actions::Txn {
            app_id: flow_name.clone(),
            version: route.scanned_version,
            last_updated: Some(super::now_ms()),
        };
        let context = crate::change::WriteContext { txns: vec![txn], source_version: None, commit_empty: true };
        let written = cx
            .write_rows_with(
                &target,
                vec![],
                crate::change::ColumnMatch::ByName,
                sluice_storage::write::SaveMode::Append,
                context,
            )
            .await;
        cx.clear_statement_state();
        written?;
    }
    let flow = FlowEntry {
        name: flow_name,
        source: route.source.clone(),
        target: key.clone(),
        predicate: Some(format!("CAST(({}) AS TEXT) = {}", route.expr, literal(value))),
        query: query_text,
        syntax: FlowSyntax::Push,
        mode: route.mode,
        by_name: true,
        else_route: false,
        expand_json: route.expand_json.clone(),
        cdc: None,
        changes: false,
        evolve: route.expand_json.is_none(),
        created_ms: super::now_ms(),
    };
    Ok((key, flow))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_make_safe_names() {
        assert_eq!(target_name("silver_{topic}", "Orders.EU-West").unwrap(), "silver_orders_eu_west");
        assert_eq!(target_name("{}_raw", "a  b").unwrap(), "a_b_raw");
        assert!(target_name("silver_{topic}", "---").is_err());
        assert!(target_name("{t}", "42abc").is_err());
        assert!(target_name("silver_{t}", &"x".repeat(80)).is_err());
        assert!(target_name("silver", "x").is_err());
        assert_eq!(
            route_predicate(Some("a > 1".into()), &[Some("b = 2".into())]).as_deref(),
            Some("coalesce((a > 1), false) AND NOT (coalesce((b = 2), false))")
        );
        assert_eq!(route_predicate(None, &[]), None);
    }
}
