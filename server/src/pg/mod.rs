//! The PostgreSQL wire protocol server.
//!
//! - [`serve`] listens (TLS optional), limits connections, and runs one [`handler::Connection`]
//!   per client: a Sluice session behind pgwire's handlers.
//! - [`auth`]: users and SCRAM-SHA-256; with no users, loopback clients are trusted (and the
//!   server refuses to listen beyond loopback).
//! - [`catalog`]: `pg_catalog`, `version()`, `current_setting()`.
//! - [`encode`], [`copy`], [`copy_binary`], [`copy_out`]: results, errors and COPY data.
//! - [`socket`]: one connection's message loop and its message-size limit.
//! - [`settings`], [`statements`]: SET/SHOW/RESET and the statements the server answers itself.
//!
//! A client that sends garbage or vanishes costs only its own connection: each connection is
//! its own task, [`socket`] bounds message sizes, and nothing here panics on input.

pub mod auth;
pub mod catalog;
pub mod compat;
pub mod copy;
pub mod copy_binary;
pub mod copy_out;
pub mod encode;
pub mod handler;
pub mod settings;
pub mod socket;
pub mod statements;

use std::collections::HashMap;
use std::fmt::Debug;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::sink::Sink;
use futures::SinkExt;
use parking_lot::Mutex;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, ServerParameterProvider,
    StartupHandler,
};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{
    ClientInfo, ConnectionManager, PgWireServerHandlers, PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::response::ErrorResponse;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use sluice::Database;
use tokio::net::TcpListener;

pub use self::auth::UserConfig;
use self::auth::{ScramSource, Users};
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
}

/// What all connections share.
pub struct ServerState {
    pub db: Database,
    pub users: Arc<Users>,
    pub manager: Arc<ConnectionManager>,
    pub parameters: Arc<SluiceParameters>,
    /// Read-only flag by user name (filled from the users file and CREATE ROLE).
    pub read_only_users: Mutex<HashMap<String, bool>>,
    pub allowed_paths: Vec<PathBuf>,
    pub tls: bool,
    /// The warehouse owner: the first user of the users file (None: no users file, every
    /// loopback user is trusted as the owner).
    pub owner: Option<String>,
}

impl ServerState {
    /// The rights of an authenticated user, for the engine to check.
    pub fn privileges(&self, user: &str) -> sluice::Privileges {
        if self.read_only_users.lock().get(user).copied().unwrap_or(false) {
            sluice::Privileges::READ_ONLY
        } else if self.owner.as_ref().is_none_or(|owner| owner == user) {
            sluice::Privileges::OWNER
        } else {
            sluice::Privileges::NORMAL
        }
    }
}

/// A connection's cancel handle, kept under Sluice's own type: pgwire finds its own
/// `Arc<ConnectionHandle>` and races each statement against CancelRequests, dropping a statement
/// that may have begun to commit. The handler orders cancellation with the commit instead
/// (`sluice::control`).
pub struct CancelHandle(pub Arc<pgwire::api::ConnectionHandle>);

/// Arms the connection's cancel handle for one statement: the receiver fires on a CancelRequest.
pub async fn cancel_receiver<C: ClientInfo>(client: &C) -> Option<futures::channel::oneshot::Receiver<()>> {
    // Where pgwire registered the handle itself it races the statement already; a second
    // receiver would replace (and so fire) pgwire's.
    if client.session_extensions().get::<Arc<pgwire::api::ConnectionHandle>>().is_some() {
        return None;
    }
    let handle = client.session_extensions().get::<CancelHandle>()?;
    Some(handle.0.start_query().await)
}

/// The parameters reported at startup.
#[derive(Debug, Default)]
pub struct SluiceParameters;

impl ServerParameterProvider for SluiceParameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let user = client.metadata().get("user").cloned().unwrap_or_else(|| "sluice".into());
        let application = client.metadata().get("application_name").cloned().unwrap_or_default();
        Some(HashMap::from([
            ("server_version".into(), SERVER_VERSION.into()),
            ("server_encoding".into(), "UTF8".into()),
            ("client_encoding".into(), "UTF8".into()),
            ("DateStyle".into(), "ISO, MDY".into()),
            ("IntervalStyle".into(), "postgres".into()),
            ("TimeZone".into(), "UTC".into()),
            ("integer_datetimes".into(), "on".into()),
            ("standard_conforming_strings".into(), "on".into()),
            ("is_superuser".into(), "on".into()),
            ("session_authorization".into(), user),
            ("application_name".into(), application),
            ("default_transaction_read_only".into(), "off".into()),
            ("in_hot_standby".into(), "off".into()),
        ]))
    }
}

/// Authentication: SCRAM when users exist, else trust for loopback clients only.
pub struct Startup {
    state: Arc<ServerState>,
    scram: Option<SASLAuthStartupHandler<SluiceParameters>>,
}

fn fatal(sqlstate: &str, message: &str) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), sqlstate.into(), message.into())))
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(scram) = &self.scram {
            return scram.on_startup(client, message).await;
        }
        let PgWireFrontendMessage::Startup(startup) = &message else { return Ok(()) };
        protocol_negotiation(client, startup).await?;
        save_startup_parameters_to_metadata(client, startup);
        if !client.socket_addr().ip().is_loopback() {
            let message = "no users are configured, so only loopback clients may connect";
            let info = ErrorInfo::new("FATAL".into(), "28000".into(), message.into());
            client.send(PgWireBackendMessage::ErrorResponse(ErrorResponse::from(info))).await?;
            return Err(fatal("28000", message));
        }
        let (pid, secret) = RandomPidSecretKeyGenerator::default().generate(client);
        client.set_pid_and_secret_key(pid, secret.clone());
        let (handle, guard) = self.state.manager.register(pid, secret);
        client.session_extensions().insert(CancelHandle(handle));
        client.session_extensions().insert(guard);
        finish_authentication(client, self.state.parameters.as_ref()).await
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
    std::fs::write(&key, certified.key_pair.serialize_pem()).map_err(|e| e.to_string())?;
    Ok((cert, key))
}

/// Answers a client beyond the connection limit as Postgres does: after its startup packet
/// (declining TLS if asked), a FATAL "too many clients" error, then the connection closes.
async fn refuse(mut socket: tokio::net::TcpStream) {
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
            if body[..4] == SSL_REQUEST.to_be_bytes() {
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
    let mut read_only: HashMap<String, bool> = config.users.iter().map(|u| (u.name.clone(), u.read_only)).collect();
    for role in db.inner().catalog.current().roles.values() {
        read_only.insert(role.name.clone(), role.read_only);
    }
    db.allow_paths(&config.allowed_paths);
    let manager = Arc::new(ConnectionManager::new());
    let state = Arc::new(ServerState {
        db,
        users,
        manager: manager.clone(),
        parameters: Arc::new(SluiceParameters),
        read_only_users: Mutex::new(read_only),
        allowed_paths: config.allowed_paths.clone(),
        tls: tls.is_some(),
        owner: config.users.first().map(|u| u.name.clone()),
    });
    let listener =
        TcpListener::bind(config.listen).await.map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let local_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let limit = Arc::new(tokio::sync::Semaphore::new(config.connections_max.max(1)));
    let cancel = Arc::new(DefaultCancelHandler::new(manager));
    let message_bytes_max = config.message_bytes_max;
    let task = tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let Ok(permit) = limit.clone().try_acquire_owned() else {
                tokio::spawn(refuse(socket));
                continue;
            };
            let state = state.clone();
            let tls = tls.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let _ = socket.set_nodelay(true);
                let scram = if state.users.any().await {
                    let mut scram = ScramAuth::new(Arc::new(ScramSource { users: state.users.clone() }));
                    scram.set_iterations(auth::SCRAM_ITERATIONS as usize);
                    Some(
                        SASLAuthStartupHandler::new(state.parameters.clone())
                            .with_scram(scram)
                            .with_connection_manager(state.manager.clone()),
                    )
                } else {
                    None
                };
                let handlers = ConnectionHandlers {
                    connection: Connection::new(state.clone()),
                    startup: Arc::new(Startup { state: state.clone(), scram }),
                    cancel,
                };
                let _ = socket::serve_connection(socket, tls, handlers, message_bytes_max).await;
            });
        }
    });
    Ok(Server { local_addr, task })
}
