//! The PostgreSQL wire protocol server.
//!
//! - [`serve`] listens (TLS optional), limits connections, and runs one [`handler::Connection`]
//!   per client: a Sluice session behind pgwire's handlers.
//! - [`auth`]: users, their rights, and authentication ([`scram`] against stored verifiers); with
//!   no users, loopback clients are trusted (and the server refuses to listen beyond loopback).
//! - [`catalog`]: `pg_catalog`, `version()`, `current_setting()`.
//! - [`encode`], [`copy`], [`copy_binary`], [`copy_out`]: results, errors and COPY data.
//! - [`socket`]: one connection's message loop, its time to authenticate; [`framing`]: checks of
//!   the bytes a client sends (message sizes, Bind framing).
//! - [`settings`], [`statements`]: SET/SHOW/RESET and the statements the server answers itself.
//!
//! A client that sends garbage or vanishes costs only its own connection: each connection is
//! its own task, [`socket`] bounds message sizes, and nothing here panics on input.

pub mod activity;
pub mod auth;
pub mod catalog;
pub mod compat;
pub mod copy;
pub mod copy_binary;
pub mod copy_out;
mod correlation;
pub mod deparse;
pub mod descriptions;
pub mod encode;
pub mod enums;
pub mod framing;
pub mod handler;
pub mod procs;
pub mod relations;
pub mod replies;
pub mod scram;
pub mod search_path;
pub mod sequences;
pub mod settings;
pub mod socket;
pub mod statements;
pub mod text;
pub mod wire_types;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pgwire::api::auth::{ServerParameterProvider, StartupHandler};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{ClientInfo, ConnectionManager, PgWireServerHandlers, RandomPidSecretKeyGenerator};
use sluice::Database;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use self::auth::UserConfig;
use self::auth::{Startup, Users};
use self::handler::Connection;
use self::settings::SERVER_VERSION;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Connections served at once; a client beyond them is refused with SQLSTATE 53300.
    pub connections_max: usize,
    pub users: Vec<UserConfig>,
    /// Certificate and key (PEM) for TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Folders clients may read and write with COPY ... 'file' (the data folder by default).
    pub allowed_paths: Vec<PathBuf>,
    /// The largest message a client may send ([`socket::MESSAGE_BYTES_MAX_DEFAULT`] by default);
    /// a larger one ends its connection with SQLSTATE 54000.
    pub message_bytes_max: usize,
    /// Connections still authenticating, at once (their own slots, apart from
    /// `connections_max`); a client beyond them is refused with SQLSTATE 53300.
    pub startup_connections_max: usize,
    /// A client must finish TLS negotiation and authentication within this time.
    pub authentication_timeout_ms: u64,
    /// Refuse clients that do not use TLS (PostgreSQL's `hostssl`).
    pub require_tls: bool,
}

/// The default number of connections that may be authenticating at once.
pub const STARTUP_CONNECTIONS_MAX_DEFAULT: usize = 32;
/// How long a new connection waits for a startup slot before it is refused.
const STARTUP_SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// The default time a client has to authenticate (PostgreSQL's `authentication_timeout` is 60 s;
/// Sluice's clients are on a LAN or loopback).
pub const AUTHENTICATION_TIMEOUT_MS_DEFAULT: u64 = 10_000;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 5433)),
            connections_max: 100,
            users: Vec::new(),
            tls: None,
            allowed_paths: Vec::new(),
            message_bytes_max: socket::MESSAGE_BYTES_MAX_DEFAULT,
            startup_connections_max: STARTUP_CONNECTIONS_MAX_DEFAULT,
            authentication_timeout_ms: AUTHENTICATION_TIMEOUT_MS_DEFAULT,
            require_tls: false,
        }
    }
}

/// What all connections share.
pub struct ServerState {
    pub db: Database,
    pub users: Arc<Users>,
    pub manager: Arc<ConnectionManager>,
    pub pids: RandomPidSecretKeyGenerator,
    pub parameters: Arc<SluiceParameters>,
    pub require_tls: bool,
    /// One per authenticated connection (`connections_max`).
    pub connection_slots: Arc<Semaphore>,
    /// The connections, for `pg_stat_activity`.
    pub activity: Arc<activity::Activity>,
}

/// A connection's cancel handle, kept under Sluice's own type: pgwire finds its own
/// `Arc<ConnectionHandle>` and races each statement against CancelRequests, dropping a statement
/// that may have begun to commit. The handler orders cancellation with the commit instead
/// (`sluice::control`).
pub struct CancelHandle(pub Arc<pgwire::api::ConnectionHandle>);

/// Arms the connection's cancel handle for one statement: the receiver fires on a CancelRequest.
pub async fn cancel_receiver<C: ClientInfo>(client: &C) -> Option<futures::channel::oneshot::Receiver<()>> {
    let handle = client.session_extensions().get::<CancelHandle>()?;
    Some(handle.0.start_query().await)
}

/// Completes when the client asks to cancel through `receiver` (from [`cancel_receiver`]); never
/// without one.
pub async fn cancel_requested(receiver: Option<futures::channel::oneshot::Receiver<()>>) {
    match receiver {
        Some(receiver) => {
            let _ = receiver.await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// The parameters reported at startup.
#[derive(Debug, Default)]
pub struct SluiceParameters;

impl ServerParameterProvider for SluiceParameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let user = client.metadata().get("user").cloned().unwrap_or_else(|| "sluice".into());
        let settings = settings::Settings::from_startup(client.metadata());
        let setting = |name: &str, default: &str| settings.get(name).unwrap_or(default).to_string();
        Some(HashMap::from([
            ("server_version".into(), SERVER_VERSION.into()),
            ("server_encoding".into(), "UTF8".into()),
            ("client_encoding".into(), "UTF8".into()),
            ("DateStyle".into(), setting("DateStyle", "ISO, MDY")),
            ("IntervalStyle".into(), setting("IntervalStyle", "postgres")),
            ("TimeZone".into(), setting("TimeZone", "UTC")),
            ("integer_datetimes".into(), "on".into()),
            ("standard_conforming_strings".into(), "on".into()),
            ("is_superuser".into(), "on".into()),
            ("session_authorization".into(), user),
            ("application_name".into(), setting("application_name", "")),
            ("default_transaction_read_only".into(), "off".into()),
            ("in_hot_standby".into(), "off".into()),
        ]))
    }
}

/// The handlers of one connection.
pub struct ConnectionHandlers {
    connection: Arc<Connection>,
    startup: Arc<Startup>,
    cancel: Arc<DefaultCancelHandler>,
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl pgwire::api::query::SimpleQueryHandler> {
        self.connection.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        self.connection.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        self.connection.clone()
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        self.cancel.clone()
    }
}

/// A running server.
pub struct Server {
    pub local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Stops accepting connections.
    pub fn stop(self) {
        self.task.abort();
    }
}

fn tls_acceptor(cert: &Path, key: &Path) -> Result<pgwire::tokio::TlsAcceptor, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate {}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("cannot read key {}: {e}", key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("bad certificate or key: {e}"))?;
    Ok(pgwire::tokio::TlsAcceptor::from(Arc::new(config)))
}

/// Writes a self-signed certificate and key for localhost into `dir`; returns their paths.
pub fn self_signed(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    std::fs::write(&cert, certified.cert.pem()).map_err(|e| e.to_string())?;
    write_private(&key, certified.key_pair.serialize_pem().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", key.display()))?;
    Ok((cert, key))
}

/// Writes a file only its owner may read (mode 0600), whatever it was before.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
        // An existing file keeps its mode through open(): set it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)
    }
    #[cfg(not(unix))]
    {
        std::fs::File::create(path)?.write_all(bytes)
    }
}

/// Answers a client beyond the connection limit as Postgres does: after its startup packet
/// (declining TLS if asked), a FATAL "too many clients" error, then the connection closes.
async fn refuse(mut socket: tokio::net::TcpStream) {
    if let Some(metrics) = crate::metrics::global() {
        metrics.connections_refused.inc();
    }
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SSL_REQUEST: i32 = 80_877_103;
    let work = async {
        for _ in 0..2 {
            let length = socket.read_i32().await? as usize;
            if !(8..=10_000).contains(&length) {
                return Ok(());
            }
            let mut body = vec![0u8; length - 4];
            socket.read_exact(&mut body).await?;
            if body.get(..4) == Some(&SSL_REQUEST.to_be_bytes()[..]) {
                socket.write_all(b"N").await?;
                continue;
            }
            break;
        }
        let mut fields = Vec::new();
        for (code, value) in
            [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', "53300"), (b'M', "sorry, too many clients already")]
        {
            fields.push(code);
            fields.extend_from_slice(value.as_bytes());
            fields.push(0);
        }
        fields.push(0);
        let mut message = vec![b'E'];
        message.extend_from_slice(&((fields.len() + 4) as i32).to_be_bytes());
        message.extend(fields);
        socket.write_all(&message).await?;
        socket.shutdown().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), work).await;
}

/// Starts the server; returns once it listens.
pub async fn serve(db: Database, config: ServerConfig) -> Result<Server, String> {
    let users = Arc::new(Users::new(db.clone(), &config.users));
    if !config.listen.ip().is_loopback() && !users.any().await {
        return Err(format!(
            "refusing to listen on {} without authentication: configure users (--users) or listen on 127.0.0.1",
            config.listen
        ));
    }
    let tls = match &config.tls {
        Some((cert, key)) => Some(tls_acceptor(cert, key)?),
        None => None,
    };
    if config.require_tls && tls.is_none() {
        return Err("--require-tls needs a certificate (--tls-cert and --tls-key, or --tls-self-signed)".into());
    }
    db.upgrade_stored_passwords()
        .await
        .map_err(|e| format!("cannot upgrade the stored passwords of the catalog's roles: {e}"))?;
    db.allow_paths(&config.allowed_paths);
    let manager = Arc::new(ConnectionManager::new());
    let state = Arc::new(ServerState {
        db,
        users,
        manager: manager.clone(),
        pids: RandomPidSecretKeyGenerator::default(),
        parameters: Arc::new(SluiceParameters),
        require_tls: config.require_tls,
        connection_slots: Arc::new(Semaphore::new(config.connections_max.max(1))),
        activity: Arc::new(activity::Activity::default()),
    });
    let listener =
        TcpListener::bind(config.listen).await.map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let local_addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Connections that have not authenticated yet hold a startup slot, not a connection slot:
    // clients that connect and say nothing cannot lock out the users (each also has only
    // `authentication_timeout_ms`).
    // A burst of clients (a pool opening) waits a little for a startup slot; the queue is bounded.
    let startup_slots = Arc::new(Semaphore::new(config.startup_connections_max.max(1)));
    let queue = Arc::new(Semaphore::new(config.startup_connections_max.max(1) + config.connections_max.max(1)));
    let cancel = Arc::new(DefaultCancelHandler::new(manager));
    let limits = socket::Limits {
        message_bytes_max: config.message_bytes_max,
        authentication_timeout: std::time::Duration::from_millis(config.authentication_timeout_ms),
    };
    let task = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let Ok(place) = queue.clone().try_acquire_owned() else {
                tokio::spawn(refuse(socket));
                continue;
            };
            let state = state.clone();
            let tls = tls.clone();
            let cancel = cancel.clone();
            let startup_slots = startup_slots.clone();
            tokio::spawn(async move {
                let waited = tokio::time::timeout(STARTUP_SLOT_WAIT, startup_slots.acquire_owned()).await;
                let Ok(Ok(startup_slot)) = waited else {
                    refuse(socket).await;
                    return;
                };
                drop(place);
                let _ = socket.set_nodelay(true);
                let scram = state.users.any().await;
                let handlers = ConnectionHandlers {
                    connection: Connection::new(state.clone()),
                    startup: Arc::new(Startup::new(state.clone(), scram)),
                    cancel,
                };
                let connection = handlers.connection.clone();
                let idle_limit = move || connection.idle_limit();
                let _ = socket::serve_connection(socket, tls, handlers, limits, idle_limit, startup_slot).await;
            });
        }
    });
    Ok(Server { local_addr, task })
}
