//! `pg_stat_activity`: one row per connection of this server, as PostgreSQL shows them: its pid
//! (the one the client was given at startup, also `pg_backend_pid()`), user, database,
//! application, client address, when it connected, began its transaction and its last statement,
//! its state (`active`, `idle`, `idle in transaction`, `idle in transaction (aborted)`) and the
//! text of that statement. SQLAlchemy's test teardown and monitoring tools read it.
//!
//! Every connection registers when it is made and is removed when it closes; the handler notes
//! each statement's start and end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// The longest statement text kept for a connection (PostgreSQL's `track_activity_query_size`
/// default), so that a client's huge statement does not stay in memory.
const QUERY_TEXT_LIMIT: usize = 1024;

/// What `pg_stat_activity` shows of one connection.
#[derive(Debug, Clone, Default)]
pub struct Backend {
    pub pid: i32,
    pub user: String,
    pub database: String,
    pub application_name: String,
    pub client_addr: Option<String>,
    pub client_port: Option<i32>,
    /// Microseconds since the Unix epoch.
    pub backend_start: i64,
    pub xact_start: Option<i64>,
    pub query_start: Option<i64>,
    pub state_change: Option<i64>,
    pub state: &'static str,
    pub query: String,
    /// Whether the connection's role owns the warehouse: it sees every connection whole.
    pub owner: bool,
    /// Shown to a role that may not see it: only who and where it is.
    pub hidden: bool,
}

/// The server's connections.
#[derive(Debug, Default)]
pub struct Activity {
    next: AtomicU64,
    backends: Mutex<BTreeMap<u64, Backend>>,
}

/// A connection's place in [`Activity`], removed when dropped (when the connection closes).
#[derive(Debug)]
pub struct Registration {
    id: u64,
    activity: Arc<Activity>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.activity.backends.lock().remove(&self.id);
        if let Some(metrics) = crate::metrics::global() {
            metrics.connections.dec();
        }
    }
}

/// Now, in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_micros()).unwrap_or(i64::MAX)
}

impl Activity {
    /// Registers a new connection.
    pub fn register(self: &Arc<Self>) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let backend = Backend { backend_start: now_micros(), state: "idle", ..Backend::default() };
        self.backends.lock().insert(id, backend);
        if let Some(metrics) = crate::metrics::global() {
            metrics.connections.inc();
            metrics.connections_total.inc();
        }
        Registration { id, activity: self.clone() }
    }

    /// Every connection as the connection `viewer` may see it, in the order they connected. As in
    /// PostgreSQL, a role sees all of its own connections, the owner (PostgreSQL's superuser)
    /// everyone's; of another role's connection only who and where it is, with its statement
    /// shown as `<insufficient privilege>` and its times, client and state as NULL.
    pub fn backends(&self, viewer: u64) -> Vec<Backend> {
        let backends = self.backends.lock();
        let (viewer_user, owner) = match backends.get(&viewer) {
            Some(backend) => (backend.user.clone(), backend.owner),
            None => (String::new(), false),
        };
        backends
            .iter()
            .map(|(id, backend)| {
                if owner || *id == viewer || backend.user == viewer_user {
                    return backend.clone();
                }
                Backend {
                    pid: backend.pid,
                    user: backend.user.clone(),
                    database: backend.database.clone(),
                    application_name: backend.application_name.clone(),
                    query: "<insufficient privilege>".into(),
                    hidden: true,
                    ..Backend::default()
                }
            })
            .collect()
    }
}

impl Registration {
    /// The connection's number in [`Activity`].
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Changes what is shown of this connection.
    pub fn update(&self, change: impl FnOnce(&mut Backend)) {
        if let Some(backend) = self.activity.backends.lock().get_mut(&self.id) {
            change(backend);
        }
    }

    /// A statement begins: the connection is `active` with `text`; a transaction begins with it
    /// unless one is open.
    pub fn started(&self, text: &str, in_block: bool) {
        let now = now_micros();
        let mut end = text.len().min(QUERY_TEXT_LIMIT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let query = text.get(..end).unwrap_or_default().trim().to_string();
        self.update(|backend| {
            backend.state = "active";
            backend.query = query;
            backend.query_start = Some(now);
            backend.state_change = Some(now);
            if !in_block || backend.xact_start.is_none() {
                backend.xact_start = Some(now);
            }
        });
    }

    /// The statement ended: the connection is idle, inside its transaction block or not, the
    /// block aborted when the statement failed in it.
    pub fn finished(&self, in_block: bool, failed: bool) {
        let now = now_micros();
        self.update(|backend| {
            backend.state = match (in_block, failed) {
                (false, _) => "idle",
                (true, false) => "idle in transaction",
                (true, true) => "idle in transaction (aborted)",
            };
            backend.state_change = Some(now);
            if !in_block {
                backend.xact_start = None;
            }
        });
    }
}

/// `pg_stat_activity`'s columns, as PostgreSQL 15 has them (`client_addr` as text: Sluice has no
/// `inet`; the ids of objects Sluice has none of are NULL).
pub fn schema() -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, TimeUnit};
    let zoned = || DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    Arc::new(arrow::datatypes::Schema::new(vec![
        Field::new("datid", DataType::Int32, true),
        Field::new("datname", DataType::Utf8, true),
        Field::new("pid", DataType::Int32, false),
        Field::new("leader_pid", DataType::Int32, true),
        Field::new("usesysid", DataType::Int32, true),
        Field::new("usename", DataType::Utf8, true),
        Field::new("application_name", DataType::Utf8, true),
        Field::new("client_addr", DataType::Utf8, true),
        Field::new("client_hostname", DataType::Utf8, true),
        Field::new("client_port", DataType::Int32, true),
        Field::new("backend_start", zoned(), true),
        Field::new("xact_start", zoned(), true),
        Field::new("query_start", zoned(), true),
        Field::new("state_change", zoned(), true),
        Field::new("wait_event_type", DataType::Utf8, true),
        Field::new("wait_event", DataType::Utf8, true),
        Field::new("state", DataType::Utf8, true),
        Field::new("backend_xid", DataType::Int32, true),
        Field::new("backend_xmin", DataType::Int32, true),
        Field::new("query_id", DataType::Int64, true),
        Field::new("query", DataType::Utf8, true),
        Field::new("backend_type", DataType::Utf8, true),
    ]))
}

/// The rows of `pg_stat_activity` in `schema` (from [`schema`]): the connections that finished
/// their startup.
pub fn rows(
    schema: &arrow::datatypes::SchemaRef,
    activity: &Activity,
    viewer: u64,
) -> datafusion::common::Result<arrow::array::RecordBatch> {
    use arrow::array::{ArrayRef, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray};
    let backends: Vec<Backend> = activity.backends(viewer).into_iter().filter(|b| b.pid != 0).collect();
    let text = |f: &dyn Fn(&Backend) -> Option<String>| -> ArrayRef {
        Arc::new(backends.iter().map(f).collect::<StringArray>())
    };
    let time = |f: &dyn Fn(&Backend) -> Option<i64>| -> ArrayRef {
        Arc::new(backends.iter().map(f).collect::<TimestampMicrosecondArray>().with_timezone("UTC"))
    };
    let nulls_int32 = || -> ArrayRef { Arc::new(Int32Array::new_null(backends.len())) };
    let columns: Vec<ArrayRef> = vec![
        nulls_int32(),
        text(&|b| Some(b.database.clone())),
        Arc::new(backends.iter().map(|b| b.pid).collect::<Int32Array>()),
        nulls_int32(),
        nulls_int32(),
        text(&|b| Some(b.user.clone())),
        text(&|b| Some(b.application_name.clone())),
        text(&|b| b.client_addr.clone()),
        text(&|_| None),
        Arc::new(backends.iter().map(|b| b.client_port).collect::<Int32Array>()),
        time(&|b| (!b.hidden).then_some(b.backend_start)),
        time(&|b| b.xact_start),
        time(&|b| b.query_start),
        time(&|b| b.state_change),
        text(&|_| None),
        text(&|_| None),
        text(&|b| (!b.hidden).then(|| b.state.to_string())),
        nulls_int32(),
        nulls_int32(),
        Arc::new(Int64Array::new_null(backends.len())),
        text(&|b| Some(b.query.clone())),
        text(&|_| Some("client backend".to_string())),
    ];
    Ok(arrow::array::RecordBatch::try_new(schema.clone(), columns)?)
}
