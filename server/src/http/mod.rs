//! HTTP beside pgwire (`sluice serve --http ADDR`): `/metrics` (Prometheus' text format, see
//! [`crate::metrics`]), `/health` (200 when the warehouse is open and its background worker
//! runs, 503 with the reason otherwise), `/` (the status page, [`page::STATUS_PAGE`]),
//! `/api/status` (its JSON, [`sluice::lineage::status`]) and `/lineage.svg` (the lineage graph).
//!
//! Off unless asked. On loopback it is open to every local client, as pgwire is without users;
//! beyond loopback it asks for HTTP basic authentication with the same users (a users file's or
//! the catalog's roles, checked against their SCRAM verifiers), and refuses to start without any.
//! Connections are bounded ([`CONNECTIONS_MAX`]), a request must arrive within
//! [`HEADER_TIMEOUT`], and only GET and HEAD are served.

pub mod page;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use sluice::Database;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// HTTP connections served at once; more wait in the listen backlog.
pub const CONNECTIONS_MAX: usize = 64;
/// How long a client has to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The wait before a wrong password is answered (as pgwire's first failure delay).
const FAILURE_DELAY: Duration = Duration::from_millis(250);

/// A running HTTP server.
pub struct HttpServer {
    pub local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Stops accepting requests.
    pub fn stop(self) {
        self.task.abort();
    }
}

struct State {
    db: Database,
    /// Whether requests must authenticate (listening beyond loopback).
    authenticate: bool,
}

/// Starts serving `db` over HTTP on `listen`.
pub async fn serve(db: Database, listen: SocketAddr) -> Result<HttpServer, String> {
    let authenticate = !listen.ip().is_loopback();
    if authenticate && !db.has_roles().await {
        return Err(format!(
            "refusing to serve HTTP on {listen} without authentication: configure users (--users) or listen on 127.0.0.1"
        ));
    }
    let listener = TcpListener::bind(listen).await.map_err(|e| format!("cannot listen for HTTP on {listen}: {e}"))?;
    let local_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state = Arc::new(State { db, authenticate });
    let slots = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let task = tokio::spawn(async move {
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            let Ok((socket, _)) = listener.accept().await else { continue };
            let _ = socket.set_nodelay(true);
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(&state, request).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .max_buf_size(64 * 1024)
                    .serve_connection(TokioIo::new(socket), service);
                if let Err(e) = connection.await {
                    tracing::debug!("http connection: {e}");
                }
                drop(slot);
            });
        }
    });
    Ok(HttpServer { local_addr, task })
}

fn reply(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Full<Bytes>> {
    reply(status, "text/plain; charset=utf-8", body.into())
}

async fn handle(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD are served\n");
        response.headers_mut().insert("allow", HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if state.authenticate && !authenticated(state, &request).await {
        let mut response = text(StatusCode::UNAUTHORIZED, "authentication required\n");
        response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"sluice\""));
        return response;
    }
    let db = &state.db;
    match request.uri().path() {
        "/health" => match db.health() {
            Ok(()) => reply(StatusCode::OK, "application/json", "{\"status\":\"ready\"}\n"),
            Err(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "application/json",
                format!("{}\n", serde_json::json!({ "status": "not ready", "reason": reason })),
            ),
        },
        "/metrics" => match crate::metrics::render(db).await {
            Ok(body) => reply(StatusCode::OK, crate::metrics::CONTENT_TYPE, body),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("metrics: {e}\n")),
        },
        "/" | "/index.html" => reply(StatusCode::OK, "text/html; charset=utf-8", page::STATUS_PAGE),
        "/api/status" => match sluice::lineage::status(db).await {
            Ok(status) => reply(StatusCode::OK, "application/json", status.to_string()),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("status: {e}\n")),
        },
        "/lineage.svg" => match sluice::lineage::lineage_graph(db).await {
            Ok(graph) => reply(StatusCode::OK, "image/svg+xml", sluice::lineage::to_svg(&graph)),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("lineage: {e}\n")),
        },
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Whether the request carries the name and password of a role that may log in.
async fn authenticated(state: &State, request: &Request<Incoming>) -> bool {
    let credentials = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v.trim()).ok())
        .and_then(|v| String::from_utf8(v).ok());
    let Some((name, password)) = credentials.as_deref().and_then(|c| c.split_once(':')) else { return false };
    let ok = match state.db.login(name).await {
        Some(login) => login.verifier.verify_password(password),
        None => false,
    };
    if !ok {
        tokio::time::sleep(FAILURE_DELAY).await;
    }
    ok
}
