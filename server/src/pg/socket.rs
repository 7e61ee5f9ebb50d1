//! One client connection: TLS negotiation and message dispatch (both pgwire's), under Sluice's
//! limits: the time to authenticate, and what [`super::framing`] checks of the bytes the client
//! sends (each message's size, the Bind messages' framing). A client that breaks them gets a
//! FATAL error and its connection is closed; other connections are not affected.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use pgwire::api::{ClientInfo, ErrorHandler, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::ErrorInfo;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, FramedParts};

/// The default largest message a client may send (a query, a Bind with its parameters, one
/// CopyData chunk).
pub const MESSAGE_BYTES_MAX_DEFAULT: usize = 256 * 1024 * 1024;

/// What one connection may send and how long it may take to authenticate.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub message_bytes_max: usize,
    /// TLS negotiation and authentication must end within this time.
    pub authentication_timeout: Duration,
}
use super::framing::{Broken, Framing};
use super::replies::Replies;

/// Serves one TCP connection until the client leaves or breaks the protocol; `idle_limit`
/// says how long the client may stay silent now (`idle_in_transaction_session_timeout` inside a
/// transaction block).
pub async fn serve_connection<H, I>(
    tcp: TcpStream,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: H,
    limits: Limits,
    idle_limit: I,
    startup_slot: tokio::sync::OwnedSemaphorePermit,
) -> io::Result<()>
where
    H: PgWireServerHandlers,
    I: Fn() -> Option<Duration>,
{
    let message_bytes_max = limits.message_bytes_max;
    // Held until the client is authenticated (then it holds a connection slot instead).
    let mut startup_slot = Some(startup_slot);
    let startup_timeout = tokio::time::sleep(limits.authentication_timeout);
    tokio::pin!(startup_timeout);
    let negotiated = tokio::select! {
        _ = &mut startup_timeout => return Ok(()),
        socket = negotiate_tls(tcp, tls) => socket?,
    };
    // A client asking for direct TLS when TLS is off.
    let Some(socket) = negotiated else { return Ok(()) };
    let broken: Broken = Arc::new(Mutex::new(None));
    let old = socket.into_parts();
    let mut limit = Framing::new(old.io, message_bytes_max, broken.clone());
    // Bytes pgwire already read while looking for an SSLRequest belong to the first packet.
    limit.observe(&old.read_buf)?;
    let mut parts = FramedParts::new(Replies::new(limit), old.codec);
    parts.read_buf = old.read_buf;
    parts.write_buf = old.write_buf;
    let mut socket = Framed::from_parts(parts);

    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended_query_handler();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    loop {
        let starting = matches!(
            socket.state(),
            PgWireConnectionState::AwaitingStartup | PgWireConnectionState::AuthenticationInProgress
        );
        if !starting {
            drop(startup_slot.take());
        }
        let message = if starting {
            tokio::select! {
                _ = &mut startup_timeout => {
                    let error = ErrorInfo::new("FATAL".into(), "57014".into(), "canceling authentication due to timeout".into());
                    let _ = socket.send(PgWireBackendMessage::ErrorResponse(error.into())).await;
                    break;
                }
                message = socket.next() => message,
            }
        } else if let Some(limit) = idle_limit() {
            tokio::select! {
                _ = tokio::time::sleep(limit) => {
                    let error = ErrorInfo::new(
                        "FATAL".into(),
                        "25P03".into(),
                        "terminating connection due to idle-in-transaction timeout".into(),
                    );
                    let _ = socket.send(PgWireBackendMessage::ErrorResponse(error.into())).await;
                    break;
                }
                message = socket.next() => message,
            }
        } else {
            socket.next().await
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(_)) if broken.lock().is_some() => {
                let Some((sqlstate, text)) = broken.lock().take() else { break };
                let error = ErrorInfo::new("FATAL".into(), sqlstate.into(), text);
                let _ = socket.send(PgWireBackendMessage::ErrorResponse(error.into())).await;
                break;
            }
            _ => break,
        };
        // Terminate: close the socket (asyncpg waits for that).
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            break;
        }
        let extended_protocol = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        // The replies to the extended protocol's messages before Sync wait for it, as
        // PostgreSQL's do (see `super::replies`).
        let held = matches!(
            message,
            PgWireFrontendMessage::Parse(_)
                | PgWireFrontendMessage::Bind(_)
                | PgWireFrontendMessage::Describe(_)
                | PgWireFrontendMessage::Close(_)
                | PgWireFrontendMessage::Execute(_)
        );
        socket.get_mut().hold(held);
        let outcome = process_message(
            message,
            &mut socket,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        socket.get_mut().hold(false);
        if let Err(mut error) = outcome {
            errors.on_error(&socket, &mut error);
            process_error(&mut socket, error, extended_protocol).await?;
        }
    }
    Ok(())
}
