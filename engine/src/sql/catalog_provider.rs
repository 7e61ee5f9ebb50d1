//! The catalog as DataFusion sees it: the warehouse's schemas and tables (each resolved to a
//! [`SluiceTable`] at the statement's snapshot), and a session-local `__temp` schema for the
//! relations one statement registers (time-travel snapshots, DML views).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::{DataFusionError, Result as DfResult};
use sluice_storage::snapshot::Snapshot;
use sluice_storage::table::Table;

use crate::catalog::TableEntry;
use crate::provider::SluiceTable;
use crate::staging::Staging;
use crate::warehouse::Warehouse;

/// The schema name of statement-local relations.
pub use crate::names::TEMP_SCHEMA;

#[derive(Debug)]
pub struct SluiceCatalogProvider {
    db: Arc<Warehouse>,
    temp: Arc<TempSchema>,
    snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
    staging: Arc<Staging>,
    /// Schemas a session adds for itself (Sluice's `sluice` system schema, the server's
    /// `pg_catalog`); never persisted.
    system: Mutex<std::collections::BTreeMap<String, Arc<dyn SchemaProvider>>>,
}

impl SluiceCatalogProvider {
    pub fn new(
        db: Arc<Warehouse>,
        temp: Arc<TempSchema>,
        snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
        staging: Arc<Staging>,
    ) -> Self {
        Self { db, temp, snapshots, staging, system: Mutex::new(Default::default()) }
    }

    /// Adds a schema of the session's own (the layers above planning add theirs: the `sluice`
    /// system schema).
    pub fn with_schema(self, name: &str, schema: Arc<dyn SchemaProvider>) -> Self {
        if let Ok(mut system) = self.system.lock() {
            system.insert(name.to_string(), schema);
        }
        self
    }
}

impl CatalogProvider for SluiceCatalogProvider {
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.staging.catalog_view(&self.db.catalog).schemas.keys().cloned().collect();
        names.extend(self.system.lock().map(|s| s.keys().cloned().collect::<Vec<_>>()).unwrap_or_default());
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == TEMP_SCHEMA {
            return Some(self.temp.clone());
        }
        if let Some(system) = self.system.lock().ok().and_then(|s| s.get(name).cloned()) {
            return Some(system);
        }
        let state = self.staging.catalog_view(&self.db.catalog);
        state.schemas.contains_key(name).then(|| {
            Arc::new(SluiceSchema {
                db: self.db.clone(),
                name: name.to_string(),
                snapshots: self.snapshots.clone(),
                staging: self.staging.clone(),
            }) as Arc<dyn SchemaProvider>
        })
    }

    /// Only system schemas (`pg_catalog`, `information_schema`) can be registered this way;
    /// user schemas are made with CREATE SCHEMA so that they are committed to the catalog.
    fn register_schema(
        &self,
        name: &str,
        schema: Arc<dyn SchemaProvider>,
    ) -> DfResult<Option<Arc<dyn SchemaProvider>>> {
        if !matches!(name, "pg_catalog" | "information_schema") {
            return Err(DataFusionError::Plan(format!("use CREATE SCHEMA to create schema {name}")));
        }
        let mut system = self.system.lock().map_err(|_| DataFusionError::Internal("catalog lock poisoned".into()))?;
        Ok(system.insert(name.to_string(), schema))
    }
}

/// A schema of the warehouse.
#[derive(Debug)]
pub struct SluiceSchema {
    db: Arc<Warehouse>,
    name: String,
    snapshots: Arc<Mutex<HashMap<String, Arc<Snapshot>>>>,
    staging: Arc<Staging>,
}

/// The table handle and its snapshot for the running statement (in a transaction block, the
/// block's staged handle: see [`crate::staging`]).
pub async fn statement_snapshot(
    db: &Warehouse,
    snapshots: &Mutex<HashMap<String, Arc<Snapshot>>>,
    staging: &Staging,
    entry: &TableEntry,
) -> crate::error::Result<(Arc<Table>, Arc<Snapshot>)> {
    let taken = snapshots.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&entry.id);
    // A new snapshot is not taken while a transaction commits to several tables (crate::staging).
    let _gate = if taken { None } else { Some(db.commit_gate.read().await) };
    load_snapshot(db, snapshots, staging, entry).await
}

/// What finds rows of `table` (the handle a statement reads) by key: a staged handle's versions
/// are its own, so the shared index finds rows only at a version of the log (nothing staged
/// yet), the block's copy at the staged ones (none before the block made it).
pub fn locator_for(
    db: &Warehouse,
    staging: &Staging,
    id: &str,
    table: &Table,
) -> Option<Arc<dyn crate::provider::RowLocator>> {
    match staging.existing_keys(id) {
        Some(cell) if table.is_staged() => Some(crate::keys::locator_of(cell)),
        None if table.is_staged() && table.has_staged_commits() => None,
        _ => Some(db.keys.locator(id)),
    }
}

/// The relation a statement reads `table` (table `id`, at `snapshot`) through: finding rows by
/// key where [`locator_for`] gives a locator.
pub fn statement_provider(
    db: &Warehouse,
    staging: &Staging,
    id: &str,
    table: Arc<Table>,
    snapshot: Arc<Snapshot>,
) -> SluiceTable {
    let locator = locator_for(db, staging, id, &table);
    let provider = SluiceTable::new(table, snapshot, db.scan_options());
    match locator {
        Some(locator) => provider.with_locator(locator),
        None => provider,
    }
}

/// [`statement_snapshot`] under the commit gate the caller holds (or with the snapshot taken).
pub async fn load_snapshot(
    db: &Warehouse,
    snapshots: &Mutex<HashMap<String, Arc<Snapshot>>>,
    staging: &Staging,
    entry: &TableEntry,
) -> crate::error::Result<(Arc<Table>, Arc<Snapshot>)> {
    let table = staging.table_for(db, entry, db.open_table(entry).await?).await?;
    let cached = snapshots.lock().unwrap_or_else(|p| p.into_inner()).get(&entry.id).cloned();
    let snapshot = match cached {
        Some(snapshot) => snapshot,
        None => {
            let snapshot = table.snapshot().await?;
            snapshots.lock().unwrap_or_else(|p| p.into_inner()).entry(entry.id.clone()).or_insert(snapshot).clone()
        }
    };
    Ok((table, snapshot))
}

#[async_trait]
impl SchemaProvider for SluiceSchema {
    /// The schema's tables and the views whose columns are known (see [`ViewRelation`]).
    fn table_names(&self) -> Vec<String> {
        let state = self.staging.catalog_view(&self.db.catalog);
        let mut names: Vec<String> = state.tables_in(&self.name).map(|t| t.name.clone()).collect();
        names.extend(
            state.views.values().filter(|v| v.schema == self.name && v.output.is_some()).map(|v| v.name.clone()),
        );
        names
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let state = self.staging.catalog_view(&self.db.catalog);
        let Some(entry) = state.table(&self.name, name) else {
            if let Some(sequence) = state.sequence(&self.name, name) {
                let relation = super::sequences::sequence_relation(&self.db, sequence).await?;
                return Ok(Some(Arc::new(relation)));
            }
            let view = state.views.get(&crate::catalog::key(&self.name, name));
            return Ok(view.and_then(ViewRelation::new).map(|v| Arc::new(v) as Arc<dyn TableProvider>));
        };
        if entry.kind == crate::catalog::TableKind::MaterializedView {
            if self.staging.created_position(&entry.id).is_some() {
                // Created by this block and built at COMMIT: statements read it as its query
                // (`crate::sql::views::pending_views`); catalogs see its columns here.
                let schema = self.db.open_table(entry).await?.cached_snapshot().arrow_schema();
                return Ok(Some(Arc::new(datafusion::datasource::empty::EmptyTable::new(schema))));
            }
            let (schema, batches) = self.db.hooks.view_rows(entry).await?;
            let table = datafusion::datasource::MemTable::try_new(schema, vec![batches.as_ref().clone()])?;
            return Ok(Some(Arc::new(table)));
        }
        let (table, snapshot) = statement_snapshot(&self.db, &self.snapshots, &self.staging, entry).await?;
        Ok(Some(Arc::new(statement_provider(&self.db, &self.staging, &entry.id, table, snapshot))))
    }

    fn table_exist(&self, name: &str) -> bool {
        let state = self.staging.catalog_view(&self.db.catalog);
        state.table(&self.name, name).is_some()
            || state.views.get(&crate::catalog::key(&self.name, name)).is_some_and(|v| v.output.is_some())
    }

    /// From the catalog, without opening the table: a session's temporary tables are `LOCAL
    /// TEMPORARY` in `information_schema.tables`, as in PostgreSQL.
    async fn table_type(&self, name: &str) -> DfResult<Option<datafusion::datasource::TableType>> {
        use datafusion::datasource::TableType;
        let state = self.staging.catalog_view(&self.db.catalog);
        let Some(entry) = state.table(&self.name, name) else {
            let view = state.views.get(&crate::catalog::key(&self.name, name)).filter(|v| v.output.is_some());
            return Ok(view.map(|_| TableType::View));
        };
        Ok(Some(if crate::catalog::is_temporary_schema(&entry.schema) {
            TableType::Temporary
        } else {
            TableType::Base
        }))
    }
}

/// A view as the catalogs see it (`information_schema`, `pg_class` with relkind `v`,
/// `pg_attribute`): its columns, as CREATE VIEW planned them, and its definition. Statements never
/// scan it: a view is read as its query, put in its place before planning
/// ([`crate::sql::views::expand`]).
#[derive(Debug)]
pub struct ViewRelation {
    schema: arrow::datatypes::SchemaRef,
    definition: String,
}

impl ViewRelation {
    /// The view's relation, if its columns were recorded (views made before Sluice recorded them
    /// are listed only in `pg_views`).
    fn new(view: &crate::catalog::ViewEntry) -> Option<Self> {
        let output = view.output.as_deref()?;
        let schema = sluice_storage::schema::StructType::parse(output).ok()?.to_arrow();
        Some(Self { schema: Arc::new(schema), definition: view.query.clone() })
    }
}

#[async_trait]
impl TableProvider for ViewRelation {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> datafusion::datasource::TableType {
        datafusion::datasource::TableType::View
    }

    fn get_table_definition(&self) -> Option<&str> {
        Some(&self.definition)
    }

    async fn scan(
        &self,
        _state: &dyn datafusion::catalog::Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[datafusion::prelude::Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
        Err(DataFusionError::Internal("a view is read through its query, not scanned".into()))
    }
}

/// Relations registered for the running statement only.
#[derive(Debug, Default)]
pub struct TempSchema {
    tables: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
}

impl TempSchema {
    pub fn clear(&self) {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    pub fn insert(&self, name: &str, table: Arc<dyn TableProvider>) {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), table);
    }
}

#[async_trait]
impl SchemaProvider for TempSchema {
    fn table_names(&self) -> Vec<String> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(self.tables.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned())
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).contains_key(name)
    }
}
