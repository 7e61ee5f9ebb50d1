//! [`Warehouse`]: the state every session, feature and runtime of one open warehouse shares: the
//! store, the catalog, the table handles, the one writer every commit goes through (with its
//! listeners), the hooks features plug into planning, the event log, roles, paths and memory.
//!
//! A warehouse is a folder (or object-store prefix) holding the catalog (`_sluice/`) and the
//! managed tables (`<schema>/<table>-<id>/`). It opens a local path (the default),
//! `memory://[name]` (in-process; the same name shares one store within a process), or an
//! `s3://`, `gs://`, `az://` URL configured from the environment as object_store does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use object_store::memory::InMemory;
use object_store::path::Path;
use sluice_storage::store::TableStore;
use sluice_storage::table::Table;

use crate::catalog::{Catalog, TableEntry};
use crate::error::{Error, Result};

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
    /// Bytes of data files a transaction block may stage before COMMIT (default
    /// [`TRANSACTION_BYTES_MAX_DEFAULT`]); the statement that goes past it fails with 54000 and
    /// aborts the block.
    pub transaction_bytes_max: u64,
    /// How long the event log keeps events (default [`crate::events::RETENTION_MS_DEFAULT`]).
    pub event_retention_ms: i64,
    /// Whether events are recorded at all (on by default; off only to measure what the event
    /// log costs: `sluice.events` then stays empty).
    pub event_log: bool,
    /// The longest a READ COMMITTED statement waits for another block's row lock before it goes
    /// on without it (default [`crate::row_locks::WAIT_MAX`]; see [`crate::row_locks`]).
    pub row_lock_wait: std::time::Duration,
}

/// The default of [`DatabaseOptions::transaction_bytes_max`]: 4 GiB.
pub const TRANSACTION_BYTES_MAX_DEFAULT: u64 = 4 << 30;

impl Default for DatabaseOptions {
    fn default() -> Self {
        Self {
            target_partitions: sluice_storage::cores(),
            partition_timezone: None,
            memory_limit_bytes: None,
            query_memory_limit_bytes: None,
            transaction_bytes_max: TRANSACTION_BYTES_MAX_DEFAULT,
            event_retention_ms: crate::events::RETENTION_MS_DEFAULT,
            event_log: true,
            row_lock_wait: crate::row_locks::WAIT_MAX,
        }
    }
}

/// The state every session, feature and runtime of one database shares.
#[derive(Debug)]
pub struct Warehouse {
    pub root: TableStore,
    pub catalog: Catalog,
    pub options: DatabaseOptions,
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
    /// The key index of each keyed table, and the lock its writers hold (see [`crate::keys`]).
    pub keys: crate::keys::KeyIndexes,
    /// The identity columns' value allocators (see [`crate::identity`]).
    pub(crate) identity: crate::identity::Allocators,
    /// The standalone sequences' values (see [`crate::sequence`]).
    pub(crate) sequences: crate::sequence::Sequences,
    /// What the features plug into planning (see [`crate::hooks`]).
    pub(crate) hooks: crate::hooks::Hooks,
    /// What flows, sources and views did.
    pub events: crate::events::EventLog,
    /// Wakes the background worker (an async flow's or view's input moved).
    pub(crate) wake: Arc<tokio::sync::Notify>,
    /// Held for writing while a transaction commits to several tables, for reading while a
    /// statement takes the snapshots of the tables it names: a statement sees such a
    /// transaction in all its tables or in none (see [`crate::staging`]).
    pub(crate) commit_gate: tokio::sync::RwLock<()>,
    /// Held by the COMMIT of a serializable transaction from its checks to its last commit
    /// (see `crate::staging::Staging::commit`).
    pub(crate) serializable_commits: tokio::sync::Mutex<()>,
    /// The row locks of READ COMMITTED blocks (see [`crate::row_locks`]).
    pub(crate) row_locks: crate::row_locks::RowLocks,
    /// The files of the records of this process's transactions committing several tables
    /// (see [`crate::staging`]).
    pub(crate) record_files: crate::record_files::RecordFiles,
}

fn memory_stores() -> &'static Mutex<HashMap<String, Arc<InMemory>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
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

impl Warehouse {
    /// Opens (creating if needed) the warehouse at `url`.
    pub async fn open(url: &str, options: DatabaseOptions) -> Result<Arc<Self>> {
        // The journal first: its replay repairs what a machine crash left of the catalog too.
        let root = warehouse_store(url)?.with_journal().await?.with_recent_objects();
        let paths = crate::paths::PathPolicy::new(root.location());
        let catalog = Catalog::open(root.clone()).await?;
        let memory_limit = options.memory_limit_bytes.unwrap_or_else(|| {
            (crate::memory::machine_memory_bytes() as f64 * crate::memory::MEMORY_SHARE_DEFAULT) as usize
        });
        let query_memory_limit_bytes = options
            .query_memory_limit_bytes
            .unwrap_or((memory_limit as f64 * crate::memory::QUERY_SHARE_DEFAULT) as usize)
            .min(memory_limit);
        let events = crate::events::EventLog::new(root.clone(), options.event_retention_ms, options.event_log);
        Ok(Arc::new(Warehouse {
            root,
            catalog,
            options,
            tables: Mutex::new(HashMap::new()),
            paths,
            memory: crate::memory::database_pool(memory_limit),
            query_memory_limit_bytes,
            roles: Default::default(),
            writer: Default::default(),
            keys: Default::default(),
            identity: Default::default(),
            sequences: Default::default(),
            hooks: Default::default(),
            events,
            wake: Default::default(),
            commit_gate: Default::default(),
            serializable_commits: Default::default(),
            row_locks: Default::default(),
            record_files: Default::default(),
        }))
    }

    /// Wakes the background worker now.
    pub(crate) fn wake_worker(&self) {
        self.wake.notify_one();
    }

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

    /// Deletes every file of a managed table (after the catalog forgot it).
    pub async fn delete_table_files(&self, entry: &TableEntry) -> Result<()> {
        let store = self.store_for(entry)?;
        for meta in store.list(store.root(), None).await? {
            store.delete(&meta.location).await?;
        }
        if let Some(dir) = self.managed_folder(entry) {
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(())
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
        // Its VACUUM and log cleanup keep what durable subscriptions still read.
        table.retain_changes_from(self.catalog.current().changes_needed_from(&entry.id));
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
        self.keys.forget(id);
        self.identity.forget(id);
    }
}
