//! The catalog: the schemas and tables of a warehouse (and, as the engine grows, its flows, views
//! and sources), persisted in the warehouse folder.
//!
//! Every change writes the *whole* catalog as the next version file,
//! `_sluice/catalog/<version>.json`, with put-if-absent: the same atomic step the Delta log uses.
//! A crash in the middle of DDL therefore leaves either the old or the new catalog, never a mix.
//! DDL that also creates or deletes data (CREATE TABLE, DROP TABLE) orders its steps so that a
//! crash leaves at worst an unreferenced folder: a new table's folder (with a unique name) is
//! created before the catalog names it, and a dropped table's folder is deleted after the catalog
//! stops naming it. Old versions are pruned, keeping the last [`CATALOG_VERSIONS_KEPT`].
//!
//! Temporary schemas (`pg_temp_<n>`, one per session that made a temporary table: see
//! [`crate::sql::temporary`]) and what is in them are never written: the catalog keeps them in an
//! overlay of this process, merged into every state it hands out. A change is split when it
//! commits: its temporary part goes to the overlay, the rest (if any changed) to the next version
//! file.

pub mod changes;
pub mod enums;
pub mod references;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sluice_storage::store::{PutOutcome, TableStore};

use self::changes::CatalogChanges;
pub use self::enums::EnumEntry;
use crate::error::{Error, Result};

/// The schema every warehouse starts with.
pub const DEFAULT_SCHEMA: &str = "public";
/// Catalog versions kept on disk.
pub const CATALOG_VERSIONS_KEPT: u64 = 50;
/// Attempts to commit a catalog change against concurrent writers.
const CATALOG_RETRY_MAX: usize = 100;
/// The prefix of the sessions' temporary schemas (`pg_temp_3`), as PostgreSQL names them.
pub const TEMPORARY_SCHEMA_PREFIX: &str = "pg_temp_";

/// Whether a schema is a session's temporary schema (never persisted).
pub fn is_temporary_schema(schema: &str) -> bool {
    schema.starts_with(TEMPORARY_SCHEMA_PREFIX)
}

/// The whole catalog at one version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CatalogState {
    pub version: u64,
    pub schemas: BTreeMap<String, SchemaEntry>,
    /// Tables by `schema.name`.
    pub tables: BTreeMap<String, TableEntry>,
    /// Login roles created with `CREATE ROLE ... PASSWORD` (the server authenticates them).
    #[serde(default)]
    pub roles: BTreeMap<String, RoleEntry>,
    /// Flows (push routes, pull flows, CREATE FLOW) by name.
    #[serde(default)]
    pub flows: BTreeMap<String, FlowEntry>,
    /// External sources (`CREATE SOURCE ... FROM KAFKA`) by name.
    #[serde(default)]
    pub sources: BTreeMap<String, SourceEntry>,
    /// Per-value routes (`PUSH INTO TABLE PER expr`) by their source table's key (see
    /// [`crate::flow::per_value`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub value_routes: BTreeMap<String, ValueRoute>,
    /// Durable subscriptions (`CREATE SUBSCRIPTION s FROM t`) by name (see
    /// [`crate::subscribe::durable`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subscriptions: BTreeMap<String, SubscriptionEntry>,
    /// Views (`CREATE VIEW`) by `schema.name` (see [`crate::sql::views`]).
    #[serde(default)]
    pub views: BTreeMap<String, ViewEntry>,
    /// Standalone sequences (`CREATE SEQUENCE`) by `schema.name` (see [`crate::sequence`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sequences: BTreeMap<String, SequenceEntry>,
    /// How far each standalone sequence (by id) has handed out values. Not transactional, as a
    /// PostgreSQL sequence's values are not: a transaction block never holds or checks it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sequence_marks: BTreeMap<String, SequenceMark>,
    /// The transaction block whose COMMIT made this version, when it also wrote tables: the
    /// version is that transaction's commit point (see [`crate::staging`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<String>,
    /// Alerts (`CREATE ALERT`) by name (see [`crate::alerts`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alerts: BTreeMap<String, AlertEntry>,
    /// Enum types (`CREATE TYPE ... AS ENUM`) by `schema.name` (see [`enums`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enums: BTreeMap<String, EnumEntry>,
}

/// What an alert watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AlertCondition {
    /// A flow or source failing: one flow, one source, or any (both `None`).
    Failure { flow: Option<String>, source: Option<String> },
    /// A SQL condition (over the system tables) that fires the alert while it is true.
    When(String),
}

/// An alert, as the catalog keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertEntry {
    pub name: String,
    pub condition: AlertCondition,
    pub webhook: String,
    pub cooldown_seconds: u64,
    pub retries: u32,
    pub created_ms: i64,
}

impl AlertEntry {
    /// The webhook as `sluice.alerts` shows it to every role: scheme, host and port only (a
    /// webhook's path is often its secret, as Slack's are), as PostgreSQL keeps a subscription's
    /// connection string from other roles.
    pub fn webhook_shown(&self) -> String {
        match url::Url::parse(&self.webhook) {
            Ok(url) => match (url.host_str(), url.port()) {
                (Some(host), Some(port)) => format!("{}://{host}:{port}/...", url.scheme()),
                (Some(host), None) => format!("{}://{host}/...", url.scheme()),
                _ => "...".to_string(),
            },
            Err(_) => "...".to_string(),
        }
    }

    /// The condition as `sluice.alerts` shows it.
    pub fn describe(&self) -> String {
        match &self.condition {
            AlertCondition::Failure { flow: Some(flow), .. } => format!("ON FAILURE OF FLOW {flow}"),
            AlertCondition::Failure { source: Some(source), .. } => format!("ON FAILURE OF SOURCE {source}"),
            AlertCondition::Failure { .. } => "ON FAILURE".to_string(),
            AlertCondition::When(condition) => format!("WHEN {condition}"),
        }
    }
}

/// A `PUSH INTO TABLE PER expr NAMED 'template'` route of a streaming table: each distinct value
/// of `expr` gets its own target table and an ordinary push route into it, made when the value is
/// first seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueRoute {
    /// The source table's key.
    pub source: String,
    /// The value, as SQL over the source's columns.
    pub expr: String,
    /// The targets' name, `{...}` standing for the value.
    pub template: String,
    /// The rows the route takes, as SQL over the source's columns (the route's own WHERE and
    /// the rows no ordinary route of the source took).
    pub predicate: Option<String>,
    pub expand_json: Option<String>,
    pub mode: FlowMode,
    /// The last source version whose values have their tables and flows (-1: none).
    pub scanned_version: i64,
    /// The tables made so far: value -> target key.
    #[serde(default)]
    pub tables: BTreeMap<String, String>,
}

/// A view: a stored query that statements read as a relation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewEntry {
    pub schema: String,
    pub name: String,
    /// The query, as SQL text.
    pub query: String,
    /// The column names the definition gave (empty: the query's own).
    #[serde(default)]
    pub columns: Vec<String>,
    /// The relations (`schema.name`) the query reads, for DROP's dependency check.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// The view's columns (names and types as CREATE VIEW planned them), as a Delta schema
    /// string, for the catalogs that list a view's columns (`pg_attribute`,
    /// `information_schema.columns`). None: not recorded (or a type Delta cannot name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default)]
    pub created_ms: i64,
    /// `COMMENT ON VIEW` (kept by CREATE OR REPLACE VIEW, as PostgreSQL keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A standalone sequence's definition (`CREATE SEQUENCE`); what it has handed out is its
/// [`SequenceMark`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceEntry {
    /// Stays the same through a rename; keys the sequence's mark.
    pub id: String,
    pub schema: String,
    pub name: String,
    pub data_type: SequenceType,
    pub increment: i64,
    pub min_value: i64,
    pub max_value: i64,
    pub start: i64,
    pub cache: i64,
    pub cycle: bool,
    /// `OWNED BY table.column`: dropping the table drops the sequence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<SequenceOwner>,
    #[serde(default)]
    pub created_ms: i64,
}

impl SequenceEntry {
    /// A sequence with no options given yet (bounds 0: [`crate::sequence::define`] fills them
    /// from its type), as CREATE SEQUENCE starts one.
    pub fn blank(id: String, schema: String, name: String, created_ms: i64) -> Self {
        SequenceEntry {
            id,
            schema,
            name,
            data_type: SequenceType::Bigint,
            increment: 1,
            min_value: 0,
            max_value: 0,
            start: 0,
            cache: 1,
            cycle: false,
            owned_by: None,
            created_ms,
        }
    }

    /// `schema.name`.
    pub fn qualified_name(&self) -> String {
        key(&self.schema, &self.name)
    }
}

/// The column a sequence belongs to (`OWNED BY`), by the table's id (a rename keeps it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceOwner {
    pub table_id: String,
    pub column: String,
}

/// The integer type of a sequence's values (`AS smallint | integer | bigint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SequenceType {
    Smallint,
    Integer,
    #[default]
    Bigint,
}

impl SequenceType {
    /// The type's name as PostgreSQL's catalogs print it.
    pub fn name(self) -> &'static str {
        match self {
            SequenceType::Smallint => "smallint",
            SequenceType::Integer => "integer",
            SequenceType::Bigint => "bigint",
        }
    }

    /// The least and greatest value of the type.
    pub fn range(self) -> (i64, i64) {
        match self {
            SequenceType::Smallint => (i64::from(i16::MIN), i64::from(i16::MAX)),
            SequenceType::Integer => (i64::from(i32::MIN), i64::from(i32::MAX)),
            SequenceType::Bigint => (i64::MIN, i64::MAX),
        }
    }

    /// PostgreSQL's MINVALUE and MAXVALUE when none are given: 1 to the type's greatest value
    /// for an ascending sequence, the type's least value to -1 for a descending one.
    pub fn default_bounds(self, ascending: bool) -> (i64, i64) {
        let (least, greatest) = self.range();
        if ascending {
            (1, greatest)
        } else {
            (least, -1)
        }
    }
}

/// A sequence's state as last written: PostgreSQL's `last_value` and `is_called`. Values up to
/// `last_value` (when called) may have been handed out, so a restart continues after it; a
/// process hands out values ahead of it only after writing a mark past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceMark {
    pub last_value: i64,
    pub is_called: bool,
}

/// An external source of records that streaming tables ingest (`CREATE SOURCE`). Its progress is
/// not here but in each ingesting table's log, as one txn per partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceEntry {
    pub name: String,
    /// The connector: `kafka`.
    pub kind: String,
    /// The options as given (connection, topics, format, batching, client properties).
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    pub created_ms: i64,
}

/// A durable subscription: a consumer's position in one table's changes, kept across restarts
/// (see [`crate::subscribe::durable`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionEntry {
    pub name: String,
    /// The followed table's id (it follows the table through renames).
    pub table_id: String,
    /// The table's version when the subscription was made.
    pub created_version: u64,
    /// Whether the consumer reads the table's rows as of `created_version` first.
    pub snapshot: bool,
    /// The newest version the consumer acknowledged (None: none yet).
    pub acknowledged: Option<u64>,
    pub created_ms: i64,
    #[serde(default)]
    pub acknowledged_ms: Option<i64>,
}

impl SubscriptionEntry {
    /// Whether the consumer still has the snapshot to read.
    pub fn snapshot_pending(&self) -> bool {
        self.snapshot && self.acknowledged.is_none()
    }

    /// The oldest version the consumer still reads: the snapshot's, or the first change not
    /// acknowledged.
    pub fn needed_from(&self) -> u64 {
        match self.acknowledged {
            Some(version) => version.saturating_add(1),
            None if self.snapshot => self.created_version,
            None => self.created_version.saturating_add(1),
        }
    }
}

/// Which syntax made a flow (push and pull are two syntaxes for one kind of object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowSyntax {
    /// `PUSH INTO` on the upstream table.
    Push,
    /// `STREAM(src)` in a streaming table's query.
    Pull,
    /// `CREATE FLOW`.
    Flow,
}

/// Whether the writer of the source waits for the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FlowMode {
    #[default]
    Sync,
    Async,
}

/// A flow: `source -> query -> target`. Its progress is not here but in the target's log, as
/// `txn(appId = name, version = last source version applied)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowEntry {
    pub name: String,
    /// The source table's key (`schema.name`).
    pub source: String,
    /// The target table's key.
    pub target: String,
    /// The query over the source, as SQL; the source is named by its key.
    pub query: String,
    pub syntax: FlowSyntax,
    pub mode: FlowMode,
    /// Whether output columns go to the target by name (else by position).
    pub by_name: bool,
    /// An `ELSE PUSH INTO` route: its query is derived from the other routes of its source.
    #[serde(default)]
    pub else_route: bool,
    /// A push route's predicate, as SQL (for the ELSE route of its source).
    #[serde(default)]
    pub predicate: Option<String>,
    /// `EXPAND JSON column`: the output's JSON text column expanded into typed columns of the
    /// target, which gains new fields as they appear.
    #[serde(default)]
    pub expand_json: Option<String>,
    /// `AUTO CDC`: the flow's query yields change events that [`CdcSpec`] applies to the target
    /// (see `flow::cdc`), rather than rows to append.
    #[serde(default)]
    pub cdc: Option<CdcSpec>,
    /// The flow reads its source's change feed (`STREAM(table_changes('src'))`: every inserted,
    /// updated and deleted row, with `_change_type`, `_commit_version`, `_commit_timestamp`)
    /// rather than its appended rows.
    #[serde(default)]
    pub changes: bool,
    /// The target takes the output's columns as they come (new ones with a value are added,
    /// columns without any value left out): the routes a per-value route makes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evolve: bool,
    #[serde(default)]
    pub created_ms: i64,
}

/// Which source columns an AUTO CDC clause names: all, all but some, or a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CdcColumns {
    All,
    Except(Vec<String>),
    Only(Vec<String>),
}

/// An AUTO CDC flow's clauses (expressions as SQL over the source's columns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdcSpec {
    pub keys: Vec<String>,
    pub sequence_by: String,
    pub delete_when: Option<String>,
    pub truncate_when: Option<String>,
    pub ignore_null_updates: bool,
    /// `COLUMNS`: the source columns the target gets.
    pub columns: CdcColumns,
    /// 1 or 2.
    pub scd_type: u8,
    /// `TRACK HISTORY ON` (SCD 2): the columns whose change opens a new version (default all).
    pub track_history: Option<CdcColumns>,
}

/// What happens to a row that violates an expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationAction {
    /// Keep the row and count the violation.
    Keep,
    DropRow,
    /// Fail the write.
    Fail,
    /// Write the row (with the constraint name and source version) to this table instead.
    Quarantine(String),
}

/// `CONSTRAINT name EXPECT (expr) [ON VIOLATION ...]` on a streaming table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub name: String,
    pub expr: String,
    pub action: ViolationAction,
}

/// A login role. The password is kept only as a SCRAM-SHA-256 verifier, in PostgreSQL's
/// `pg_authid` form: enough to check a password, not to log in with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoleEntry {
    pub name: String,
    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64 parts).
    #[serde(default)]
    pub verifier: String,
    /// A read-only role may read but not write data or change the catalog.
    pub read_only: bool,
    /// Catalogs written before verifiers kept the salt and the SCRAM SaltedPassword (hex); the
    /// server turns them into a verifier when it starts, and these are then dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salted_password: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaEntry {
    pub name: String,
    pub created_ms: i64,
}

/// What kind of relation a table entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    #[default]
    Table,
    StreamingTable,
    MaterializedView,
}

/// A table: where its Delta log lives and what SQL adds to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableEntry {
    pub id: String,
    pub schema: String,
    pub name: String,
    /// A path relative to the warehouse root, or an absolute URI / path for external tables.
    pub location: String,
    /// Whether Sluice owns the folder (DROP deletes it).
    pub managed: bool,
    #[serde(default)]
    pub kind: TableKind,
    /// Column defaults as SQL expressions.
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    #[serde(default)]
    pub created_ms: i64,
    /// Data quality expectations (streaming tables).
    #[serde(default)]
    pub expectations: Vec<Expectation>,
    /// Streaming table options (`mode = 'async'` for the flows it feeds).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The source a streaming table ingests (`CREATE STREAMING TABLE t FROM SOURCE s`).
    #[serde(default)]
    pub source: Option<String>,
    /// A materialized view's definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ViewDefinition>,
    /// Its FOREIGN KEY constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<references::ForeignKey>,
}

/// What defines a materialized view (its state and progress are in its own table's folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewDefinition {
    /// The query, as SQL.
    pub query: String,
    /// `sync` (maintained by the writers of its inputs) or `async` (by the background worker).
    #[serde(default)]
    pub refresh: FlowMode,
    #[serde(default)]
    pub refresh_interval_ms: Option<u64>,
    /// The tables it reads, with the views it reads expanded into theirs (keys).
    pub inputs: Vec<String>,
    /// The materialized views its query names (keys).
    #[serde(default)]
    pub views: Vec<String>,
}

impl TableEntry {
    /// `schema.name`.
    pub fn qualified_name(&self) -> String {
        key(&self.schema, &self.name)
    }

    /// A plain managed table at `location`, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests(schema: &str, name: &str, id: &str, location: &str) -> Self {
        TableEntry {
            id: id.into(),
            schema: schema.into(),
            name: name.into(),
            location: location.into(),
            managed: true,
            kind: TableKind::Table,
            defaults: BTreeMap::new(),
            created_ms: 0,
            expectations: vec![],
            options: BTreeMap::new(),
            source: None,
            view: None,
            foreign_keys: vec![],
        }
    }
}

/// The catalog key of a table.
pub fn key(schema: &str, name: &str) -> String {
    format!("{schema}.{name}")
}

impl CatalogState {
    fn initial() -> Self {
        let mut state = CatalogState::default();
        state.schemas.insert(DEFAULT_SCHEMA.into(), SchemaEntry { name: DEFAULT_SCHEMA.into(), created_ms: now_ms() });
        state
    }

    pub fn table(&self, schema: &str, name: &str) -> Option<&TableEntry> {
        self.tables.get(&key(schema, name))
    }

    pub fn sequence(&self, schema: &str, name: &str) -> Option<&SequenceEntry> {
        self.sequences.get(&key(schema, name))
    }

    /// The flows that read `table_key`.
    pub fn flows_from<'a>(&'a self, table_key: &'a str) -> impl Iterator<Item = &'a FlowEntry> + 'a {
        self.flows.values().filter(move |f| f.source == table_key)
    }

    /// The flows that write `table_key`.
    pub fn flows_into<'a>(&'a self, table_key: &'a str) -> impl Iterator<Item = &'a FlowEntry> + 'a {
        self.flows.values().filter(move |f| f.target == table_key)
    }

    /// Whether a flow `source -> target` would close a cycle.
    pub fn would_cycle(&self, source: &str, target: &str) -> bool {
        // A cycle exists if `source` is reachable from `target` (or they are the same table).
        let mut stack = vec![target.to_string()];
        let mut seen = std::collections::HashSet::new();
        while let Some(table) = stack.pop() {
            if table == source {
                return true;
            }
            if seen.insert(table.clone()) {
                stack.extend(self.flows_from(&table).map(|f| f.target.clone()));
            }
        }
        false
    }

    /// The tables that ingest source `name`.
    pub fn tables_ingesting<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a TableEntry> + 'a {
        self.tables.values().filter(move |t| t.source.as_deref() == Some(name))
    }

    /// The oldest version whose changes a durable subscription on the table `table_id` still
    /// reads, if any subscribes to it.
    pub fn changes_needed_from(&self, table_id: &str) -> Option<u64> {
        self.subscriptions.values().filter(|s| s.table_id == table_id).map(SubscriptionEntry::needed_from).min()
    }

    pub fn tables_in(&self, schema: &str) -> impl Iterator<Item = &TableEntry> + '_ {
        let schema = schema.to_string();
        self.tables.values().filter(move |t| t.schema == schema)
    }
}

/// The persisted catalog and the newest state this process has seen.
#[derive(Debug)]
pub struct Catalog {
    store: TableStore,
    /// The newest persisted state seen.
    state: RwLock<Arc<CatalogState>>,
    /// The temporary schemas and their relations (never persisted).
    temporary: Mutex<Temporary>,
    /// `state` with `temporary` merged in: what [`Catalog::current`] hands out.
    merged: RwLock<Arc<CatalogState>>,
}

/// The part of a catalog state that lives in temporary schemas.
#[derive(Debug, Clone, Default, PartialEq)]
struct Temporary {
    schemas: BTreeMap<String, SchemaEntry>,
    tables: BTreeMap<String, TableEntry>,
    views: BTreeMap<String, ViewEntry>,
}

impl Temporary {
    fn is_empty(&self) -> bool {
        self.schemas.is_empty() && self.tables.is_empty() && self.views.is_empty()
    }

    /// `persisted` with the temporary relations in it.
    fn merged_into(&self, persisted: &Arc<CatalogState>) -> Arc<CatalogState> {
        if self.is_empty() {
            return persisted.clone();
        }
        let mut state = (**persisted).clone();
        state.schemas.extend(self.schemas.clone());
        state.tables.extend(self.tables.clone());
        state.views.extend(self.views.clone());
        Arc::new(state)
    }

    /// Takes the temporary part out of `state`.
    fn split_off(state: &mut CatalogState) -> Self {
        fn take<V>(map: &mut BTreeMap<String, V>, temporary: impl Fn(&V) -> bool) -> BTreeMap<String, V> {
            let (taken, kept) = std::mem::take(map).into_iter().partition(|(_, value)| temporary(value));
            *map = kept;
            taken
        }
        Self {
            schemas: take(&mut state.schemas, |s| is_temporary_schema(&s.name)),
            tables: take(&mut state.tables, |t| is_temporary_schema(&t.schema)),
            views: take(&mut state.views, |v| is_temporary_schema(&v.schema)),
        }
    }

    /// Applies what changed from `before` to `after` (other sessions change only their own
    /// schemas, so applying differences keeps their changes).
    fn apply(&mut self, before: &Temporary, after: Temporary) {
        fn apply_map<V: PartialEq>(
            map: &mut BTreeMap<String, V>,
            before: &BTreeMap<String, V>,
            after: BTreeMap<String, V>,
        ) {
            for key in before.keys().filter(|k| !after.contains_key(*k)) {
                map.remove(key);
            }
            for (key, value) in after {
                if before.get(&key) != Some(&value) {
                    map.insert(key, value);
                }
            }
        }
        apply_map(&mut self.schemas, &before.schemas, after.schemas);
        apply_map(&mut self.tables, &before.tables, after.tables);
        apply_map(&mut self.views, &before.views, after.views);
    }
}

fn version_name(version: u64) -> String {
    format!("_sluice/catalog/{version:020}.json")
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Catalog {
    /// Opens the catalog of the warehouse at `store`, creating it on first use.
    pub async fn open(store: TableStore) -> Result<Self> {
        let latest = Self::latest_version(&store).await?;
        let state = match latest {
            Some(version) => Self::read_version(&store, version).await?,
            None => {
                let initial = CatalogState::initial();
                match store.put_if_absent(&store.path(&version_name(0)), encode(&initial)?).await? {
                    PutOutcome::Created => initial,
                    PutOutcome::AlreadyExists => Self::read_version(&store, 0).await?,
                }
            }
        };
        let state = Arc::new(state);
        let catalog = Self {
            store,
            state: RwLock::new(state.clone()),
            temporary: Mutex::new(Temporary::default()),
            merged: RwLock::new(state),
        };
        catalog.refresh().await?;
        Ok(catalog)
    }

    async fn latest_version(store: &TableStore) -> Result<Option<u64>> {
        let prefix = store.path("_sluice/catalog");
        let listed = store.list(&prefix, None).await?;
        Ok(listed
            .iter()
            .filter_map(|meta| {
                meta.location.filename().and_then(|n| n.strip_suffix(".json")).and_then(|n| n.parse::<u64>().ok())
            })
            .max())
    }

    async fn read_version(store: &TableStore, version: u64) -> Result<CatalogState> {
        let path = store.path(&version_name(version));
        let bytes = store.get(&path).await?;
        let state: CatalogState = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Internal(format!("catalog version {version} ({path}) is unreadable: {e}")))?;
        if state.version != version {
            return Err(Error::Internal(format!("catalog file {path} holds version {}", state.version)));
        }
        Ok(state)
    }

    /// The newest state seen (with this process's temporary schemas), without touching storage.
    pub fn current(&self) -> Arc<CatalogState> {
        self.merged.read().map(|s| s.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The newest persisted state seen.
    fn persisted(&self) -> Arc<CatalogState> {
        self.state.read().map(|s| s.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    fn lock_temporary(&self) -> std::sync::MutexGuard<'_, Temporary> {
        self.temporary.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Recomputes the merged state; the caller holds the overlay's lock, so that a concurrent
    /// change of either part cannot leave a merge of stale parts.
    fn remerge(&self, temporary: &Temporary) {
        let merged = temporary.merged_into(&self.persisted());
        *self.merged.write().unwrap_or_else(|p| p.into_inner()) = merged;
    }

    fn store_state(&self, state: Arc<CatalogState>) {
        {
            let mut guard = self.state.write().unwrap_or_else(|p| p.into_inner());
            if state.version <= guard.version {
                return;
            }
            *guard = state;
        }
        let temporary = self.lock_temporary();
        self.remerge(&temporary);
    }

    /// Reads versions other processes committed since the one we hold.
    pub async fn refresh(&self) -> Result<Arc<CatalogState>> {
        self.refresh_persisted().await?;
        Ok(self.current())
    }

    async fn refresh_persisted(&self) -> Result<Arc<CatalogState>> {
        let mut current = self.persisted();
        loop {
            match Self::read_version(&self.store, current.version + 1).await {
                Ok(next) => {
                    current = Arc::new(next);
                    self.store_state(current.clone());
                }
                Err(Error::Storage(e)) if e.is_not_found() => return Ok(self.persisted()),
                Err(e) => return Err(e),
            }
        }
    }

    fn apply_temporary(&self, before: &Temporary, after: Temporary) {
        if *before == after {
            return;
        }
        let mut temporary = self.lock_temporary();
        temporary.apply(before, after);
        self.remerge(&temporary);
    }

    /// Applies a change and commits it as the next version, re-applying it on the newer state when
    /// another writer committed first. `change` must be deterministic and may fail (e.g. "already
    /// exists"), which aborts without writing.
    ///
    /// The change sees the temporary schemas too; what it changes in them goes to the overlay
    /// (see the module docs), and a change of nothing else writes no version.
    pub async fn update<T>(&self, change: impl Fn(&mut CatalogState) -> Result<T>) -> Result<(Arc<CatalogState>, T)> {
        for _ in 0..CATALOG_RETRY_MAX {
            let base = self.refresh_persisted().await?;
            let temporary = self.lock_temporary().clone();
            let mut next = (*temporary.merged_into(&base)).clone();
            let value = change(&mut next)?;
            let next_temporary = Temporary::split_off(&mut next);
            crate::control::check_commit()?;
            if next == *base {
                self.apply_temporary(&temporary, next_temporary);
                return Ok((self.current(), value));
            }
            next.version = base.version + 1;
            if next.transaction == base.transaction {
                // Only the commit of a transaction block names it (Catalog::commit_staged).
                next.transaction = None;
            }
            let path = self.store.path(&version_name(next.version));
            match self.store.put_if_absent(&path, encode(&next)?).await? {
                PutOutcome::Created => {
                    let version = next.version;
                    self.store_state(Arc::new(next));
                    self.apply_temporary(&temporary, next_temporary);
                    self.prune(version).await;
                    return Ok((self.current(), value));
                }
                PutOutcome::AlreadyExists => continue,
            }
        }
        Err(Error::SerializationFailure("the catalog changed too often concurrently".into()))
    }

    /// The newest state seen with a transaction block's changes laid over it: what the block's
    /// statements see (see [`crate::catalog::changes`]).
    pub fn current_with(&self, changes: &CatalogChanges) -> Arc<CatalogState> {
        let current = self.current();
        if !changes.changes_catalog() {
            return current;
        }
        let mut state = (*current).clone();
        changes.apply_to(&mut state);
        Arc::new(state)
    }

    /// [`Catalog::update`] inside a transaction block: the change is made on the block's view
    /// and recorded in `changes`, and nothing is written, unless `only_created` and the change
    /// touches more than the tables the block created: then it is committed as
    /// [`Catalog::update`] commits it (the statement is one that commits at once). What it
    /// changes in temporary schemas goes to the overlay at once, as with [`Catalog::update`].
    /// Returns whether the block holds a change (false: it changed nothing outside temporary
    /// schemas, or was committed), and the change's value.
    pub async fn update_staged<T>(
        &self,
        changes: &Mutex<CatalogChanges>,
        only_created: bool,
        change: impl Fn(&mut CatalogState) -> Result<T>,
    ) -> Result<(bool, T)> {
        let base = self.refresh_persisted().await?;
        let temporary = self.lock_temporary().clone();
        let mut view = (*base).clone();
        changes.lock().unwrap_or_else(|p| p.into_inner()).apply_to(&mut view);
        let view = Arc::new(view);
        let mut next = (*temporary.merged_into(&view)).clone();
        let value = change(&mut next)?;
        let next_temporary = Temporary::split_off(&mut next);
        crate::control::check_commit()?;
        // Some(held), or None: the change is not the block's to hold.
        let held = {
            let mut changes = changes.lock().unwrap_or_else(|p| p.into_inner());
            let step = CatalogChanges::between(&view, &next);
            if !step.changes_catalog() {
                Some(false)
            } else if only_created && !changes.only_created_objects(&step) {
                None
            } else {
                changes.merge(step);
                Some(true)
            }
        };
        let Some(held) = held else {
            return self.update(change).await.map(|(_, value)| (false, value));
        };
        self.apply_temporary(&temporary, next_temporary);
        Ok((held, value))
    }

    /// Commits a transaction block's catalog changes as one version naming `transaction`
    /// (COMMIT): 40001 if an object it changed was changed by another since.
    pub async fn commit_staged(&self, changes: &CatalogChanges, transaction: &str) -> Result<()> {
        self.update(|state| {
            changes.check(state)?;
            changes.apply_to(state);
            state.transaction = Some(transaction.to_string());
            Ok(())
        })
        .await
        .map(|_| ())
    }

    /// The persisted version this process last saw.
    pub fn persisted_version(&self) -> u64 {
        self.persisted().version
    }

    /// Whether a version after `since` was committed by `transaction` (recovery of a transaction
    /// block cut short: its catalog version is its commit point). Versions pruned since are not
    /// looked at.
    pub async fn committed_by(&self, since: u64, transaction: &str) -> Result<bool> {
        let latest = self.refresh_persisted().await?.version;
        for version in since + 1..=latest {
            match Self::read_version(&self.store, version).await {
                Ok(state) if state.transaction.as_deref() == Some(transaction) => return Ok(true),
                Ok(_) => {}
                Err(Error::Storage(e)) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    async fn prune(&self, version: u64) {
        if !version.is_multiple_of(CATALOG_VERSIONS_KEPT) || version < 2 * CATALOG_VERSIONS_KEPT {
            return;
        }
        for old in version - 2 * CATALOG_VERSIONS_KEPT..version - CATALOG_VERSIONS_KEPT {
            let _ = self.store.delete(&self.store.path(&version_name(old))).await;
        }
    }
}

fn encode(state: &CatalogState) -> Result<Bytes> {
    serde_json::to_vec_pretty(state).map(Bytes::from).map_err(|e| Error::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> TableEntry {
        TableEntry::for_tests(DEFAULT_SCHEMA, name, name, name)
    }

    #[tokio::test]
    async fn two_catalog_handles_see_each_others_changes() {
        let store = TableStore::memory();
        let a = Catalog::open(store.clone()).await.unwrap();
        let b = Catalog::open(store.clone()).await.unwrap();
        a.update(|s| {
            s.tables.insert(key("public", "t"), entry("t"));
            Ok(())
        })
        .await
        .unwrap();
        // b's change is applied on top of a's, not over it.
        b.update(|s| {
            s.tables.insert(key("public", "u"), entry("u"));
            Ok(())
        })
        .await
        .unwrap();
        let state = a.refresh().await.unwrap();
        assert_eq!(state.version, 2);
        assert_eq!(state.tables.len(), 2);
        let failed = a.update(|_| -> Result<()> { Err(Error::DuplicateTable("t".into())) }).await;
        assert!(failed.is_err());
        assert_eq!(Catalog::open(store).await.unwrap().current().version, 2);
    }
}
