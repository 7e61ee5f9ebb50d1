//! CREATE [OR REPLACE], REFRESH, EXPLAIN and DROP MATERIALIZED VIEW.
//!
//! CREATE builds the view completely beside anything it replaces (a new table folder, its rows and
//! state checkpointed) and only then names it in one catalog commit: readers see the old view or
//! the new one, never a half-built one. In a transaction block, CREATE (without OR REPLACE) and
//! DROP join the block's catalog changes instead: the block reads a view it created as its query,
//! and the views' runtime builds it once COMMIT names it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::sql::sqlparser::ast::ObjectName;
use sluice_storage::schema::StructType;
use sluice_storage::table::{CreateTable as CreateDelta, Table};

use super::view::{plan_view_naming, scanned_tables, LiveView};
use super::ViewRuntime;
use crate::catalog::{key, FlowMode, TableEntry, TableKind, ViewDefinition};
use crate::error::{Error, Result};
use crate::names::table_name;
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::streaming::CreateMaterializedView;

/// The options of `CREATE MATERIALIZED VIEW ... WITH (...)`.
fn view_options(options: &[(String, String)]) -> Result<(FlowMode, Option<u64>)> {
    let mut mode = FlowMode::Sync;
    let mut interval = None;
    for (name, value) in options {
        match name.to_ascii_lowercase().as_str() {
            "refresh" => {
                mode = match value.to_ascii_lowercase().as_str() {
                    "sync" => FlowMode::Sync,
                    "async" => FlowMode::Async,
                    other => {
                        return Err(Error::data("22023", format!("refresh must be 'sync' or 'async', not '{other}'")))
                    }
                }
            }
            "refresh_interval_ms" => {
                interval = Some(value.parse::<u64>().map_err(|_| {
                    Error::data("22023", format!("refresh_interval_ms must be a number of milliseconds, not '{value}'"))
                })?)
            }
            other => return Err(Error::data("22023", format!("unknown materialized view option \"{other}\""))),
        }
    }
    Ok((mode, interval))
}

pub(crate) async fn create_materialized_view(
    cx: &QueryContext,
    runtime: &Arc<ViewRuntime>,
    create: CreateMaterializedView,
) -> Result<StatementResult> {
    let name = table_name(&create.name)?;
    let view_key = key(&name.schema, &name.name);
    let state = cx.db.catalog.current();
    if !state.schemas.contains_key(&name.schema) {
        return Err(Error::UndefinedSchema(name.schema.clone()));
    }
    let replaced = state.tables.get(&view_key).cloned();
    if let Some(existing) = &replaced {
        if create.if_not_exists {
            return Ok(StatementResult::command("CREATE MATERIALIZED VIEW"));
        }
        if !create.or_replace {
            return Err(Error::DuplicateTable(name.to_string()));
        }
        if existing.kind != TableKind::MaterializedView {
            return Err(Error::data("42809", format!("\"{name}\" is not a materialized view")));
        }
    }
    let (refresh, refresh_interval_ms) = view_options(&create.options)?;
    let query = create.query.to_string();
    let (plan, views) = plan_view_naming(cx, &query).await?;
    let inputs = scanned_tables(&plan);
    // In a transaction block (CREATE without OR REPLACE) the view joins the block's catalog
    // changes and is built once the block commits (`create_in_block`). Otherwise it is built
    // and committed outside the block, where the tables the block created are not (a table the
    // block wrote is refused when the view reads it, see `crate::staging`).
    let in_block = cx.staging.holds_catalog();
    let block = cx.catalog_state();
    if in_block {
        if let Some(pending) = crate::names::relations_in(&*create.query)
            .iter()
            .filter_map(|n| block.table(&n.schema, &n.name))
            .find(|entry| entry.kind == TableKind::MaterializedView && cx.staging.created_position(&entry.id).is_some())
        {
            return Err(in_block_refusal(
                &name.to_string(),
                &format!("materialized view {}", pending.qualified_name()),
            ));
        }
    } else if let Some(entry) = inputs
        .iter()
        .filter_map(|key| block.tables.get(key))
        .find(|entry| cx.staging.created_position(&entry.id).is_some())
    {
        return Err(in_block_refusal(&name.to_string(), &entry.qualified_name()));
    }
    if inputs.contains(&view_key) {
        return Err(Error::Plan(format!("materialized view {name} cannot read itself")));
    }
    let mut seen = std::collections::HashSet::new();
    let mut fields = Vec::new();
    for field in plan.schema().as_arrow().fields() {
        if !seen.insert(field.name().clone()) {
            return Err(Error::data("42701", format!("column \"{}\" specified more than once", field.name())));
        }
        fields.push(Field::new(field.name(), delta_type(field.data_type()), true));
    }
    let schema = StructType::from_arrow(&Schema::new(fields)).map_err(|e| Error::Plan(e.to_string()))?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let entry = TableEntry {
        id: id.clone(),
        schema: name.schema.clone(),
        name: name.name.clone(),
        location: crate::paths::managed_location(&name.schema, &name.name, &id),
        managed: true,
        kind: TableKind::MaterializedView,
        defaults: BTreeMap::new(),
        created_ms: chrono::Utc::now().timestamp_millis(),
        expectations: vec![],
        options: create.options.iter().cloned().collect(),
        source: None,
        view: Some(ViewDefinition { query, refresh, refresh_interval_ms, inputs, views }),
        foreign_keys: vec![],
    };
    let store = cx.db.store_for(&entry)?;
    let delta = CreateDelta {
        schema,
        partition_columns: vec![],
        properties: Default::default(),
        name: Some(name.name.clone()),
        description: None,
    };
    let table = Arc::new(Table::create(store, delta).await?);
    cx.db.remember_table(&id, table.clone());
    if in_block {
        return create_in_block(cx, entry).await;
    }
    // Build and checkpoint before the catalog names the view.
    let session = QueryContext::new(cx.db.clone());
    let mut live = LiveView::new(&session, &entry, table.cached_snapshot().arrow_schema()).await?;
    live.build(&cx.db, &session).await?;
    live.output.batches()?;
    let checkpoint = super::state::checkpoint(&cx.db, &mut live).await?;
    live.dirty = false;
    let replaced_id = replaced.as_ref().map(|r| r.id.clone());
    let committed = cx
        .db
        .catalog
        .update(|state| {
            let current = state.tables.get(&view_key).map(|t| t.id.clone());
            if current != replaced_id {
                return Err(Error::SerializationFailure(format!("{name} was changed concurrently")));
            }
            // Views over this one read its new inputs too (kept: the old ones may still be
            // read directly; an extra input only costs a catch-up).
            let new_inputs = entry.view.as_ref().map(|v| v.inputs.clone()).unwrap_or_default();
            for dependent in state.tables.values_mut() {
                if let Some(definition) = dependent.view.as_mut().filter(|v| v.views.contains(&view_key)) {
                    for input in &new_inputs {
                        if !definition.inputs.contains(input) {
                            definition.inputs.push(input.clone());
                        }
                    }
                }
            }
            state.tables.insert(view_key.clone(), entry.clone());
            Ok(())
        })
        .await;
    if let Err(e) = committed {
        cx.delete_folder(&entry).await?;
        return Err(e);
    }
    runtime.install(live, session, checkpoint);
    if let Some(old) = replaced {
        // Views over the replaced one inlined its old query: they plan again when next used.
        for dependent in cx.db.catalog.current().tables.values() {
            if dependent.view.as_ref().is_some_and(|v| v.views.contains(&view_key)) {
                runtime.forget(&dependent.id);
            }
        }
        runtime.forget(&old.id);
        cx.db.forget_table(&old.id);
        cx.delete_folder(&old).await?;
    }
    Ok(StatementResult::command("CREATE MATERIALIZED VIEW"))
}

/// CREATE MATERIALIZED VIEW in a transaction block: the view (its empty table made) joins the
/// block's catalog changes, so ROLLBACK drops it and nobody sees it before COMMIT. Until then the
/// block reads it as its query, over the block's own rows ([`crate::sql::views::pending_views`]); the COMMIT that
/// names it has the views' runtime build it from its inputs as committed (a view with no state
/// checkpoint is built when first loaded, also after a crash right after the COMMIT).
async fn create_in_block(cx: &QueryContext, entry: TableEntry) -> Result<StatementResult> {
    let view_key = entry.qualified_name();
    let new_entry = entry.clone();
    let held = cx
        .update_catalog(|state| {
            if state.tables.contains_key(&view_key) || state.views.contains_key(&view_key) {
                return Err(Error::DuplicateTable(view_key.clone()));
            }
            state.tables.insert(view_key.clone(), new_entry.clone());
            Ok(())
        })
        .await;
    match held {
        Ok((true, ())) => cx.staging.table_created(entry),
        // Committed at once (not the block's to hold): built when first read.
        Ok((false, ())) => {}
        Err(e) => {
            cx.delete_folder(&entry).await?;
            return Err(e);
        }
    }
    Ok(StatementResult::command("CREATE MATERIALIZED VIEW"))
}

async fn view_entry(cx: &QueryContext, name: &ObjectName) -> Result<TableEntry> {
    let name = table_name(name)?;
    let entry = cx
        .catalog_state()
        .table(&name.schema, &name.name)
        .cloned()
        .ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
    if entry.kind != TableKind::MaterializedView {
        return Err(Error::data("42809", format!("\"{name}\" is not a materialized view")));
    }
    Ok(entry)
}

pub(crate) async fn refresh_materialized_view(
    cx: &QueryContext,
    runtime: &Arc<ViewRuntime>,
    name: &ObjectName,
    full: bool,
) -> Result<StatementResult> {
    let entry = view_entry(cx, name).await?;
    // One the block created is read as its query until COMMIT builds it: always fresh.
    if cx.staging.created_position(&entry.id).is_some() {
        return Ok(StatementResult::command("REFRESH MATERIALIZED VIEW"));
    }
    super::refresh(runtime, &entry, full).await?;
    Ok(StatementResult::command("REFRESH MATERIALIZED VIEW"))
}

pub(crate) async fn explain_materialized_view(
    cx: &QueryContext,
    runtime: &Arc<ViewRuntime>,
    name: &ObjectName,
) -> Result<StatementResult> {
    let entry = view_entry(cx, name).await?;
    if cx.staging.created_position(&entry.id).is_some() {
        return Err(Error::NotSupported(format!(
            "EXPLAIN MATERIALIZED VIEW {} in the transaction block that created it: it is planned and built at COMMIT",
            entry.qualified_name()
        )));
    }
    let lines = super::explain(runtime, &entry).await?;
    let schema = Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(lines))])?;
    Ok(StatementResult::Rows { schema, batches: vec![batch] })
}

pub(crate) async fn drop_materialized_view(
    cx: &QueryContext,
    runtime: &Arc<ViewRuntime>,
    name: &ObjectName,
    if_exists: bool,
    cascade: bool,
) -> Result<StatementResult> {
    let name = table_name(name)?;
    let view_key = key(&name.schema, &name.name);
    if if_exists && !cx.catalog_state().tables.contains_key(&view_key) {
        cx.notice(format!("materialized view \"{}\" does not exist, skipping", name.name));
    }
    let (held, dropped) = cx
        .update_catalog(|state| {
            let Some(entry) = state.tables.get(&view_key) else {
                return if if_exists { Ok(vec![]) } else { Err(Error::UndefinedTable(name.to_string())) };
            };
            if entry.kind != TableKind::MaterializedView {
                return Err(Error::data("42809", format!("\"{name}\" is not a materialized view")));
            }
            let mut dropped = vec![view_key.clone()];
            // Views over the dropped ones, transitively.
            let mut grew = true;
            while grew {
                grew = false;
                for table in state.tables.values() {
                    let reads = table.view.as_ref().is_some_and(|v| v.views.iter().any(|d| dropped.contains(d)));
                    if reads && !dropped.contains(&table.qualified_name()) {
                        if !cascade {
                            return Err(Error::data(
                                "2BP01",
                                format!(
                                    "cannot drop materialized view {name} because materialized view {} reads it (use DROP ... CASCADE)",
                                    table.qualified_name()
                                ),
                            ));
                        }
                        dropped.push(table.qualified_name());
                        grew = true;
                    }
                }
            }
            Ok(dropped.iter().filter_map(|k| state.tables.remove(k)).collect::<Vec<_>>())
        })
        .await?;
    if held {
        // The block's drop: the views stay for others (and maintained) until COMMIT, which
        // deletes their folders; the runtime forgets them once the catalog no longer names them.
        for entry in dropped {
            cx.staging.table_dropped(entry);
        }
        return Ok(StatementResult::command("DROP MATERIALIZED VIEW"));
    }
    for entry in dropped {
        runtime.forget(&entry.id);
        cx.db.forget_table(&entry.id);
        cx.delete_folder(&entry).await?;
    }
    Ok(StatementResult::command("DROP MATERIALIZED VIEW"))
}

/// The type a view column is stored as (Delta has no unsigned or nanosecond types).
fn delta_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::UInt8 | DataType::UInt16 => DataType::Int32,
        DataType::UInt32 | DataType::UInt64 => DataType::Int64,
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::Timestamp(_, zone) => DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, zone.clone()),
        DataType::Float16 => DataType::Float32,
        other => other.clone(),
    }
}

/// CREATE MATERIALIZED VIEW in a transaction block over a table the block created: the view is
/// built and committed when the statement runs, outside the block, where the table is not yet.
fn in_block_refusal(view: &str, what: &str) -> Error {
    Error::NotSupported(format!(
        "CREATE MATERIALIZED VIEW {view} in the transaction block that created {what}: a materialized \
         view is created outside the block; COMMIT first"
    ))
}
