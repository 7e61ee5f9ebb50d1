//! `CREATE SOURCE`, `DROP SOURCE`, and the part of `CREATE STREAMING TABLE t FROM SOURCE s` that
//! makes the ingesting table and its dead-letter table (of a Kafka source: its record columns; of
//! a file source: the columns sniffed from the files already there).

use datafusion::sql::sqlparser::ast::ObjectName;

use super::decode::{bronze_columns_sql, ERRORS_COLUMNS_SQL};
use super::errors_table_name;
use super::options::KafkaOptions;
use crate::catalog::{SourceEntry, TableKind};
use crate::error::{Error, Result};
use crate::files::{self, listing::Folder, options::FileOptions};
use crate::names::{object_name, table_name};
use crate::sql::context::{QueryContext, StatementResult};
use crate::syntax::parser::{parse_statement_text, CreateTable, SluiceStatement};
use crate::syntax::streaming::CreateSource;

fn source_not_found(name: &str) -> Error {
    Error::UndefinedObject { kind: "source", name: name.to_string() }
}

pub(crate) async fn create_source(cx: &QueryContext, create: CreateSource) -> Result<StatementResult> {
    let options = create.options.iter().cloned().collect();
    match create.kind.as_str() {
        "kafka" => {
            let parsed = KafkaOptions::parse(&options)?;
            for (property, path) in parsed.files() {
                cx.db
                    .client_file(path, cx.privileges(), crate::paths::PathUse::SourceFile)
                    .map_err(|e| Error::PermissionDenied(format!("Kafka option {property}: {e}")))?;
            }
            super::check_client(&create.name, &parsed)?;
        }
        "files" => {
            let parsed = FileOptions::parse(&options)?;
            Folder::open(&cx.db, &parsed.path, cx.privileges())?;
        }
        other => return Err(Error::NotSupported(format!("sources of kind {other} (Sluice reads KAFKA and FILES)"))),
    }
    let entry = SourceEntry {
        name: create.name.clone(),
        kind: create.kind.clone(),
        options,
        created_ms: crate::util::now_ms(),
    };
    let (_, _created) = cx
        .db
        .catalog
        .update(|state| {
            if state.sources.contains_key(&entry.name) {
                if create.if_not_exists {
                    return Ok(false);
                }
                if !create.or_replace {
                    return Err(Error::DuplicateObject { kind: "source", name: entry.name.clone() });
                }
            }
            state.sources.insert(entry.name.clone(), entry.clone());
            Ok(true)
        })
        .await?;
    // Tables ingesting an old definition restart with the new one (the session supervises
    // the sources after each streaming statement).
    Ok(StatementResult::command("CREATE SOURCE"))
}

/// Drops a source. Tables that ingest it make this fail, unless CASCADE, which detaches them
/// (they keep their rows and become ordinary streaming tables).
pub(crate) async fn drop_source(
    cx: &QueryContext,
    name: &str,
    if_exists: bool,
    cascade: bool,
) -> Result<StatementResult> {
    if if_exists && !cx.db.catalog.current().sources.contains_key(name) {
        cx.notice(format!("source \"{name}\" does not exist, skipping"));
    }
    cx.db
        .catalog
        .update(|state| {
            if !state.sources.contains_key(name) {
                return if if_exists { Ok(()) } else { Err(source_not_found(name)) };
            }
            let users: Vec<String> = state.tables_ingesting(name).map(|t| t.qualified_name()).collect();
            if !users.is_empty() && !cascade {
                return Err(Error::data(
                    "2BP01",
                    format!(
                        "cannot drop source {name} because {} ingest{} it (DROP SOURCE ... CASCADE detaches them)",
                        users.join(", "),
                        if users.len() == 1 { "s" } else { "" }
                    ),
                ));
            }
            for table in users {
                if let Some(entry) = state.tables.get_mut(&table) {
                    entry.source = None;
                }
            }
            state.sources.remove(name);
            Ok(())
        })
        .await?;
    Ok(StatementResult::command("DROP SOURCE"))
}

/// Creates the table that ingests `source` (unless it exists) and its dead-letter table.
pub(crate) async fn create_ingesting_table(
    cx: &QueryContext,
    name: &ObjectName,
    source: &str,
    exists: bool,
) -> Result<()> {
    let entry = cx.db.catalog.current().sources.get(source).cloned().ok_or_else(|| source_not_found(source))?;
    let table = table_name(name)?;
    let errors_columns = if entry.kind == "files" {
        if !exists {
            create_for_files(cx, name, &entry).await?;
        }
        files::rows::ERRORS_COLUMNS_SQL
    } else {
        if !exists {
            let options = KafkaOptions::parse(&entry.options)?;
            create_with_columns(cx, object_name(&table.schema, &table.name), &bronze_columns_sql(options.format))
                .await?;
        }
        ERRORS_COLUMNS_SQL
    };
    let errors = errors_table_name(&table.name);
    if cx.db.catalog.current().table(&table.schema, &errors).is_none() {
        create_with_columns(cx, object_name(&table.schema, &errors), errors_columns).await?;
        let key = crate::catalog::key(&table.schema, &errors);
        cx.db
            .catalog
            .update(|state| {
                if let Some(entry) = state.tables.get_mut(&key) {
                    entry.kind = TableKind::StreamingTable;
                }
                Ok(())
            })
            .await?;
    }
    Ok(())
}

/// How many of the files already in a source's folder the new table's columns are sniffed from.
const SNIFF_FILES_MAX: usize = 20;

/// Makes the table that ingests a file source, with the columns of the files already in the
/// folder (sniffed from the oldest few), `_rescued_data` and `_metadata`; later files add theirs.
async fn create_for_files(cx: &QueryContext, name: &ObjectName, source: &SourceEntry) -> Result<()> {
    let options = FileOptions::parse(&source.options)?;
    let folder = Folder::open(&cx.db, &options.path, cx.privileges())?;
    let mut found = folder.list(&options.matcher()).await?;
    found.truncate(SNIFF_FILES_MAX);
    let sample = files::read_files(&folder, found, &options).await;
    cx.create_table(CreateTable { columns_later: true, ..CreateTable::new(name.clone()) }).await?;
    let fields = files::rows::missing_fields(&arrow::datatypes::Schema::empty(), &sample);
    let table = table_name(name)?;
    let key = crate::catalog::key(&table.schema, &table.name);
    cx.clear_statement_state();
    crate::sql::evolve::add_columns(cx, &key, &arrow::datatypes::Fields::from(fields)).await
}

async fn create_with_columns(cx: &QueryContext, name: ObjectName, columns: &str) -> Result<()> {
    let SluiceStatement::CreateTable(mut create) = parse_statement_text(&format!("CREATE TABLE t ({columns})"))? else {
        return Err(Error::Internal("not a CREATE TABLE".into()));
    };
    create.name = name;
    cx.create_table(*create).await?;
    Ok(())
}

/// Records which source a table ingests.
pub(crate) async fn set_ingested_source(cx: &QueryContext, table_key: &str, source: Option<String>) -> Result<()> {
    cx.db
        .catalog
        .update(|state| {
            let entry = state.tables.get_mut(table_key).ok_or_else(|| Error::UndefinedTable(table_key.into()))?;
            entry.source = source.clone();
            Ok(())
        })
        .await?;
    Ok(())
}
