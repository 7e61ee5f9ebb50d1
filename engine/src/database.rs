//! [`Database`]: the in-process API: one handle on a warehouse with its runtimes (see
//! [`crate::runtimes`]), and a session that runs the handle's statements.

use std::sync::Arc;

use arrow::array::RecordBatch;
use sluice_storage::table::Table;

use crate::error::{Error, Result};
use crate::runtimes::Runtimes;
use crate::session::{PreparedStatement, Session, StatementResult};
use crate::warehouse::Warehouse;
pub use crate::warehouse::{warehouse_store, DatabaseOptions};

/// An open warehouse. Cheap to clone; safe to use from many tasks at once.
#[derive(Debug, Clone)]
pub struct Database {
    inner: Arc<Runtimes>,
    session: Arc<Session>,
}

impl Drop for Database {
    /// The last handle stops the database's ingest tasks and lets go of the flow runners' and the
    /// views' sessions, which hold the shared state: once no other session holds it, it is freed
    /// and the background worker (which holds it only weakly) stops.
    fn drop(&mut self) {
        if Arc::strong_count(&self.session) == 1 {
            crate::source::stop_all(&self.inner.sources);
            self.inner.flows.release();
            self.inner.views.release();
        }
    }
}

impl Database {
    /// The rows of a query as JSON objects (column name to value; a NULL column is absent), for
    /// readers of the system tables that go by column name (the lineage graph, `/metrics`).
    pub async fn query_json(&self, sql: &str) -> Result<Vec<serde_json::Map<String, serde_json::Value>>> {
        let batches = self.query(sql).await?;
        let mut writer = arrow::json::ArrayWriter::new(Vec::new());
        for batch in &batches {
            writer.write(batch)?;
        }
        writer.finish()?;
        let bytes = writer.into_inner();
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| crate::error::Error::Internal(format!("rows of {sql:?} as JSON: {e}")))
    }

    /// What the commits and the event log did since the process started (for `/metrics`).
    pub fn write_stats(&self) -> WriteStats {
        use std::sync::atomic::Ordering::Relaxed;
        let warehouse = &self.inner.warehouse;
        let stats = &warehouse.writer.stats;
        let (events_written, events_dropped, events_pending, event_log_error) = warehouse.events.stats();
        WriteStats {
            commits: stats.commits.load(Relaxed),
            conflicts: stats.conflicts.load(Relaxed),
            files_written: stats.files_written.load(Relaxed),
            bytes_written: stats.bytes_written.load(Relaxed),
            events_written,
            events_dropped,
            events_pending,
            event_log_error,
        }
    }

    /// Whether the database is ready: its background worker ran a pass within the last
    /// [`crate::runtimes::WORKER_STALL_MS`] (it drives async flows, views, and the sources'
    /// supervision). `Err` says what is wrong.
    pub fn health(&self) -> std::result::Result<(), String> {
        self.inner.worker_alive()
    }

    /// Makes every file written so far durable and empties the warehouse's journal (see
    /// [`sluice_storage::journal`]; the server does before it exits, after its last write).
    pub async fn checkpoint_journal(&self) -> Result<()> {
        Ok(self.inner.warehouse.root.checkpoint_journal().await?)
    }

    /// Writes the events recorded so far to the event log (the server does before it exits).
    pub async fn flush_events(&self) -> Result<()> {
        self.inner.warehouse.events.flush().await
    }

    /// Opens (creating if needed) the warehouse at `url`.
    pub async fn open(url: &str) -> Result<Self> {
        Self::open_with(url, DatabaseOptions::default()).await
    }

    pub async fn open_with(url: &str, options: DatabaseOptions) -> Result<Self> {
        let warehouse = Warehouse::open(url, options).await?;
        crate::staging::recover(&warehouse).await?;
        let inner = Runtimes::start(warehouse);
        let session = Arc::new(Session::new(inner.clone()));
        Ok(Self { inner, session })
    }

    /// A new session (its own settings and prepared statements), as a client connection gets.
    pub fn session(&self) -> Session {
        Session::new(self.inner.clone())
    }

    /// The warehouse and its runtimes.
    pub fn inner(&self) -> &Arc<Runtimes> {
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

    /// Follows a table's committed changes (see [`crate::subscribe`]): from version `from` on,
    /// or from the next commit when None. `table` is `name` or `schema.name`.
    pub async fn subscribe(&self, table: &str, from: Option<u64>) -> Result<crate::subscribe::Subscription> {
        let name = crate::names::parse_table_name(table)?;
        crate::subscribe::Subscription::start(self.inner.warehouse.clone(), &self.inner.commits, name, from).await
    }

    /// Resumes the durable subscription `name` (`CREATE SUBSCRIPTION name FROM t`) after the
    /// newest version its consumer acknowledged (see [`crate::subscribe::durable`]).
    pub async fn resume_subscription(&self, name: &str) -> Result<crate::subscribe::Subscription> {
        crate::subscribe::Subscription::resume(self.inner.warehouse.clone(), &self.inner.commits, name).await
    }

    /// Records that the consumer of the durable subscription `name` has processed every change up
    /// to `version` (`ALTER SUBSCRIPTION name ACKNOWLEDGE version`).
    pub async fn acknowledge_subscription(&self, name: &str, version: u64) -> Result<()> {
        let name = crate::sql::names::quoted(name);
        self.session.execute(&format!("ALTER SUBSCRIPTION {name} ACKNOWLEDGE VERSION {version}")).await.map(|_| ())
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
        self.inner.warehouse.writer.subscribe(listener);
    }

    /// Lets clients name server paths (COPY files, table locations) in these folders too, besides
    /// the data folder (`sluice serve --allow-path`).
    pub fn allow_paths(&self, folders: &[std::path::PathBuf]) {
        self.inner.warehouse.paths.allow_paths(folders);
    }

    /// A server-side file a client names, checked against the role's rights and the allowed
    /// folders (see [`crate::paths`]).
    pub fn client_file(
        &self,
        text: &str,
        privileges: crate::Privileges,
        purpose: crate::paths::PathUse,
    ) -> Result<std::path::PathBuf> {
        self.inner.warehouse.client_file(text, privileges, purpose)
    }

    /// The open handle of a table, by name.
    pub async fn table(&self, name: &crate::names::TableName) -> Result<Arc<Table>> {
        let entry = self
            .inner
            .warehouse
            .catalog
            .current()
            .table(&name.schema, &name.name)
            .cloned()
            .ok_or_else(|| Error::UndefinedTable(name.to_string()))?;
        self.inner.warehouse.open_table(&entry).await
    }

    /// Sets the roles the operator configures (a server's users file); they keep their rights and
    /// reserve their names.
    pub fn configure_roles(&self, roles: &[crate::roles::RoleConfig]) {
        self.inner.warehouse.roles.configure(roles);
    }

    /// Whether any login role exists (a server with none trusts loopback clients).
    pub async fn has_roles(&self) -> bool {
        self.inner.warehouse.roles.any(&self.inner.warehouse.catalog).await
    }

    /// A role's verifier and rights, for a login (`None`: no such role).
    pub async fn login(&self, name: &str) -> Option<crate::roles::Login> {
        self.inner.warehouse.roles.login(&self.inner.warehouse.catalog, name).await
    }

    /// The rights of a role (`None`: no such role).
    pub fn role_privileges(&self, name: &str) -> Option<crate::Privileges> {
        self.inner.warehouse.roles.privileges(&self.inner.warehouse.catalog, name)
    }

    /// The keys and indexes of every table, by schema, table and name.
    pub async fn indexes(&self) -> Vec<crate::keys::IndexInfo> {
        crate::system::all_indexes(&self.inner.warehouse).await
    }

    /// The warehouse's catalog as it is now (schemas, tables, views), for name resolution.
    pub fn catalog_state(&self) -> Arc<crate::catalog::CatalogState> {
        self.inner.warehouse.catalog.current()
    }

    /// The views of the warehouse (CREATE VIEW), for the Postgres catalogs.
    pub fn views(&self) -> Vec<crate::catalog::ViewEntry> {
        self.inner.warehouse.catalog.current().views.values().cloned().collect()
    }

    /// Every table's columns (defaults, identity) and keys, for the Postgres catalogs.
    pub async fn relations(&self) -> Vec<crate::system::RelationInfo> {
        crate::system::all_relations(&self.inner.warehouse).await
    }

    /// Every login role's name, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.inner.warehouse.roles.names(&self.inner.warehouse.catalog)
    }

    /// Replaces the stored passwords older catalogs kept with verifiers (see [`crate::roles`]).
    pub async fn upgrade_stored_passwords(&self) -> Result<()> {
        self.inner.warehouse.roles.upgrade_stored_passwords(&self.inner.warehouse.catalog).await
    }

    /// Where the warehouse is.
    pub fn location(&self) -> &str {
        self.inner.warehouse.root.location()
    }
}

/// Counters of [`Database::write_stats`].
#[derive(Debug, Clone, Default)]
pub struct WriteStats {
    pub commits: u64,
    pub conflicts: u64,
    pub files_written: u64,
    pub bytes_written: u64,
    pub events_written: u64,
    pub events_dropped: u64,
    pub events_pending: u64,
    /// The last error writing the event log, if the last write failed.
    pub event_log_error: Option<String>,
}
