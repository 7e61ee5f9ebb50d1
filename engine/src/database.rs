//! [`Database`]: the in-process API, and the state every session of one warehouse shares.
//!
//! A warehouse is a folder (or object-store prefix) holding the catalog (`_sluice/`) and the
//! managed tables (`<schema>/<table>-<id>/`). `Database::open` takes a local path (the default),
//! `memory://[name]` (in-process; the same name shares one store within a process), or an
//! `s3://`, `gs://`, `az://` URL configured from the environment as object_store does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arrow::array::RecordBatch;
use object_store::memory::InMemory;
use object_store::path::Path;
use sluice_storage::store::TableStore;
use sluice_storage::table::Table;

use crate::catalog::{Catalog, TableEntry};
use crate::error::{Error, Result};
use crate::session::{PreparedStatement, Session, StatementResult};

/// Options of a database handle.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// Parallelism of queries (default: the number of cores).
    pub target_partitions: usize,
    /// The zone of zone-less timestamp partition values in tables other engines wrote.
    pub partition_timezone: Option<String>,
    /// Memory all queries together may hold (default: half of the machine's; see [`crate::memory`]).
    pub memory_limit_bytes: Option<usize>,
    /// Memory one query may hold (default: all of `memory_limit_bytes`).
    pub query_memory_limit_bytes: Option<usize>,
}

impl Default for DatabaseOptions {
    fn default() -> Self {
        Self {
            target_partitions: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            partition_timezone: None,
            memory_limit_bytes: None,
            query_memory_limit_bytes: None,
        }
    }
}

/// What every session of a database shares.
#[derive(Debug)]
pub struct DatabaseInner {
    pub root: TableStore,
    pub catalog: Catalog,
    pub options: DatabaseOptions,
    /// The streaming flows' runtime state.
    pub flows: crate::flow::FlowRuntime,
    /// The ingest tasks of tables that read external sources.
    pub sources: crate::source::SourceRuntime,
    /// The materialized views held in memory.
    pub views: crate::ivm::ViewRuntime,
    tables: Mutex<HashMap<String, Arc<Table>>>,
    /// Where clients may name server paths (see [`crate::paths`]).
    pub(crate) paths: crate::paths::PathPolicy,
    /// The memory pool all queries share, and one query's limit in it.
    pub(crate) memory: Arc<dyn datafusion::execution::memory_pool::MemoryPool>,
    pub(crate) query_memory_limit_bytes: usize,
    /// The login roles (see [`crate::roles`]).
    pub(crate) roles: crate::roles::Roles,
    /// The writer every commit goes through, and the flows and views it tells.
    pub(crate) writer: crate::change::Writer,
    /// What the features plug into planning (see [`crate::hooks`]).
    pub(crate) hooks: crate::hooks::Hooks,
}

/// An open warehouse. Cheap to clone; safe to use from many tasks at once.
#[derive(Debug, Clone)]
pub struct Database {
    inner: Arc<DatabaseInner>,
    session: Arc<Session>,
}

fn memory_stores() -> &'static Mutex<HashMap<String, Arc<InMemory>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

impl Drop for Database {
    /// The last handle stops the database's ingest tasks and lets go of the flow runners' and the
    /// views' sessions, which hold the shared state: once no other session holds it, it is freed
    /// and the background worker (which holds it only weakly) stops.
    fn drop(&mut self) {
        if Arc::strong_count(&self.session) == 1 {
            crate::source::stop_all(&self.inner);
            self.inner.flows.release();
            self.inner.views.release();
        }
    }
}

/// The store of a warehouse URL.
pub fn warehouse_store(url: &str) -> Result<TableStore> {
    if let Some(name) = url.strip_prefix("memory://") {
        let store = if name.is_empty() {
            Arc::new(InMemory::new())
        } else {
            let mut stores = memory_stores().lock().unwrap_or_else(|p| p.into_inner());
            stores.entry(name.to_string()).or_insert_with(|| Arc::new(InMemory::new())).clone()
        };
        return Ok(TableStore::new(store, Path::from("warehouse"), url.to_string()));
    }
    Ok(TableStore::from_uri(url)?)
}

impl Database {
    /// Opens (creating if needed) the warehouse at `url`.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, DatabaseOptions::default()).await
    }

    pub async fn open_with(url: &str, options: DatabaseOptions) -> Result<Self> {
        let root = warehouse_store(url)?;
        let paths = crate::paths::PathPolicy::new(root.location());
        let catalog = Catalog::open(root.clone()).await?;
        let memory_limit = options.memory_limit_bytes.unwrap_or_else(|| {
            (crate::memory::machine_memory_bytes() as f64 * crate::memory::MEMORY_SHARE_DEFAULT) as usize
        });
        let query_memory_limit_bytes = options
            .query_memory_limit_bytes
            .unwrap_or((memory_limit as f64 * crate::memory::QUERY_SHARE_DEFAULT) as usize)
            .min(memory_limit);
        let inner = Arc::new(DatabaseInner {
            root,
            catalog,
            options,
            flows: Default::default(),
            sources: Default::default(),
            views: Default::default(),
            tables: Mutex::new(HashMap::new()),
            paths,
            memory: crate::memory::database_pool(memory_limit),
            query_memory_limit_bytes,
            roles: Default::default(),
            writer: Default::default(),
            hooks: Default::default(),
        });
        let weak = Arc::downgrade(&inner);
        inner.hooks.add_schema(
            crate::system::SYSTEM_SCHEMA,
            Arc::new(move || -> Arc<dyn datafusion::catalog::SchemaProvider> {
                match weak.upgrade() {
                    Some(db) => Arc::new(crate::system::SystemSchema::new(db)),
                    None => Arc::new(datafusion::catalog::MemorySchemaProvider::new()),
                }
            }),
        );
        let weak = Arc::downgrade(&inner);
        inner.hooks.set_view_reader(Arc::new(move |entry| {
            let weak = weak.clone();
            Box::pin(async move {
                let db = weak.upgrade().ok_or_else(|| Error::Internal("the database is closed".into()))?;
                crate::ivm::read(&db, &entry).await
            })
        }));
        // Flows first: a sync flow's target is written before the views over its source are
        // maintained, as the statement's effects are visible in pipeline order.
        inner.writer.subscribe(Arc::new(crate::flow::FlowListener(Arc::downgrade(&inner))));
        inner.writer.subscribe(Arc::new(crate::ivm::ViewListener(Arc::downgrade(&inner))));
        // Flows catch up from their targets' txns and async flows run in the background (on the
        // tokio runtime the database is opened on; without one, flows run only with writes).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(crate::flow::worker(Arc::downgrade(&inner)));
        }
        let session = Arc::new(Session::new(inner.clone()));
        crate::source::supervise(&inner);
        Ok(Self { inner, session })
    }

    /// A new session (its own settings and prepared statements), as a client connection gets.
    pub fn session(&self) -> Session {
        Session::new(self.inner.clone())
    }

    /// The shared state (for the server and the flow runtime).
    pub fn inner(&self) -> &Arc<DatabaseInner> {
        &self.inner
    }

    /// Runs one or more statements separated by `;` and returns each one's result.
    pub async fn execute(&self, sql: &str) -> Result<Vec<StatementResult>> {
        self.session.execute(sql).await
    }

    /// Runs statements and returns the rows of the last one.
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.session.query(sql).await
    }

    /// Appends rows to a table (columns matched by name); returns the rows written.
    pub async fn insert(&self, table: &str, batches: Vec<RecordBatch>) -> Result<u64> {
        self.session.insert(table, batches).await
    }

    /// Prepares a statement with `$1`, `$2`, ... parameters.
    pub async fn prepare(&self, sql: &str) -> Result<PreparedStatement> {
        self.session.prepare(sql).await
    }

    /// Calls `listener` after every later commit of any table, whatever statement made it (see
    /// [`crate::change`]).
    pub fn on_commit(&self, listener: Arc<dyn crate::change::CommitListener>) {
        self.inner.writer.subscribe(listener);
    }

    /// Lets clients name server paths (COPY files, table locations) in these folders too, besides
    /// the data folder (`sluice serve --allow-path`).
    pub fn allow_paths(&self, folders: &[std::path::PathBuf]) {
        self.inner.paths.allow_paths(folders);
    }

    /// A server-side file a client names, checked against the role's rights and the allowed
    /// folders (see [`crate::paths`]).
    pub fn client_file(
        &self,
        text: &str,
        privileges: crate::Privileges,
        purpose: crate::paths::PathUse,
    ) -> Result<std::path::PathBuf> {
        self.inner.client_file(text, privileges, purpose)
    }

    /// The open handle of a table, by name.
    pub async fn table(&self, name: &crate::names::TableName) -> Result<Arc<Table>> {
        let entry = self
            .inner
            .catalog
            .current()
            .table(&name.schema, &name.name)
            .cloned()
            .ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
        self.inner.open_table(&entry).await
    }

    /// Sets the roles the operator configures (a server's users file); they keep their rights and
    /// reserve their names.
    pub fn configure_roles(&self, roles: &[crate::roles::RoleConfig]) {
        self.inner.roles.configure(roles);
    }

    /// Whether any login role exists (a server with none trusts loopback clients).
    pub async fn has_roles(&self) -> bool {
        self.inner.roles.any(&self.inner.catalog).await
    }

    /// A role's verifier and rights, for a login (`None`: no such role).
    pub async fn login(&self, name: &str) -> Option<crate::roles::Login> {
        self.inner.roles.login(&self.inner.catalog, name).await
    }

    /// The rights of a role (`None`: no such role).
    pub fn role_privileges(&self, name: &str) -> Option<crate::Privileges> {
        self.inner.roles.privileges(&self.inner.catalog, name)
    }

    /// Every login role's name, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.inner.roles.names(&self.inner.catalog)
    }

    /// Replaces the stored passwords older catalogs kept with verifiers (see [`crate::roles`]).
    pub async fn upgrade_stored_passwords(&self) -> Result<()> {
        self.inner.roles.upgrade_stored_passwords(&self.inner.catalog).await
    }

    /// Where the warehouse is.
    pub fn location(&self) -> &str {
        self.inner.root.location()
    }
}

impl DatabaseInner {
    /// How this database's scans read tables (the zone of zone-less partition timestamps).
    pub fn scan_options(&self) -> sluice_storage::scan::ScanOptions {
        sluice_storage::scan::ScanOptions {
            partition: sluice_storage::partition::PartitionReadOptions {
                timestamp_zone: self.options.partition_timezone.clone(),
            },
            ..Default::default()
        }
    }

    /// Checks a server-side file a client names (COPY, a source's files) and returns it resolved.
    pub fn client_file(
        &self,
        text: &str,
        privileges: crate::Privileges,
        purpose: crate::paths::PathUse,
    ) -> Result<std::path::PathBuf> {
        self.paths.client_file(&self.catalog, text, privileges, purpose)
    }

    /// Checks the LOCATION of a table a client creates or attaches (see [`crate::paths`]).
    pub fn table_location(&self, text: &str, privileges: crate::Privileges) -> Result<String> {
        self.paths.table_location(&self.catalog, text, privileges)
    }

    /// The local folder of a managed table, checked to lie inside the data folder.
    pub fn managed_folder(&self, entry: &TableEntry) -> Option<std::path::PathBuf> {
        self.paths.managed_folder(entry)
    }

    /// The store of a table, from its catalog entry.
    pub fn store_for(&self, entry: &TableEntry) -> Result<TableStore> {
        let location = &entry.location;
        // A managed table's folder is always inside the warehouse, whatever its location says.
        if !entry.managed && (location.contains("://") || location.starts_with('/')) {
            Ok(warehouse_store(location)?)
        } else {
            Ok(self.root.child(location))
        }
    }

    /// The open handle of a table (opened once per database handle).
    pub async fn open_table(&self, entry: &TableEntry) -> Result<Arc<Table>> {
        if let Some(table) = self.tables.lock().unwrap_or_else(|p| p.into_inner()).get(&entry.id) {
            return Ok(table.clone());
        }
        let table = Arc::new(Table::open(self.store_for(entry)?).await.map_err(|e| match e {
            sluice_storage::Error::NotATable { .. } => Error::Internal(format!(
                "table {} is in the catalog but its log at {} is gone",
                entry.qualified_name(),
                entry.location
            )),
            other => Error::from(other),
        })?);
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        Ok(tables.entry(entry.id.clone()).or_insert(table).clone())
    }

    /// Remembers a handle that was just created.
    pub fn remember_table(&self, id: &str, table: Arc<Table>) {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_string(), table);
    }

    /// Forgets a dropped table's handle.
    pub fn forget_table(&self, id: &str) {
        self.tables.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}
