//! One client connection: TLS negotiation and message dispatch (both pgwire's), with a limit on
//! the size of every message the client sends.
//!
//! pgwire's own limit is fixed at 1 GiB per message. Sluice enforces `message_bytes_max` itself,
//! before a message is buffered: [`MessageLimit`] wraps the (decrypted) byte stream, follows the
//! protocol's framing (untyped startup packets, then a type byte and a 4-byte length per
//! message), and fails the read as soon as a header announces a message over the limit. The
//! connection then gets a FATAL error with SQLSTATE 54000 and is closed; other connections are not
//! affected.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::{ClientInfo, ErrorHandler, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::ErrorInfo;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, FramedParts};

/// The default largest message a client may send (a query, a Bind with its parameters, one
/// CopyData chunk).
pub const MESSAGE_BYTES_MAX_DEFAULT: usize = 256 * 1024 * 1024;
/// A client must finish TLS negotiation and authentication within this time.
const STARTUP_TIMEOUT_MS: u64 = 60_000;
/// Protocol codes carried by untyped packets that are followed by another untyped packet.
const SSL_REQUEST_CODE: u32 = 80_877_103;
const GSSENC_REQUEST_CODE: u32 = 80_877_104;

/// Serves one TCP connection until the client leaves or breaks the protocol.
pub async fn serve_connection<H>(
    tcp: TcpStream,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: H,
    message_bytes_max: usize,
) -> io::Result<()>
where
    H: PgWireServerHandlers,
{
    let startup_timeout = tokio::time::sleep(Duration::from_millis(STARTUP_TIMEOUT_MS));
    tokio::pin!(startup_timeout);
    let negotiated = tokio::select! {
        _ = &mut startup_timeout => return Ok(()),
        socket = negotiate_tls(tcp, tls) => socket?,
    };
    // A client asking for direct TLS when TLS is off.
    let Some(socket) = negotiated else { return Ok(()) };
    let oversized = Arc::new(AtomicUsize::new(0));
    let old = socket.into_parts();
    let mut limit = MessageLimit::new(old.io, message_bytes_max, oversized.clone());
    // Bytes pgwire already read while looking for an SSLRequest belong to the first packet.
    limit.observe(&old.read_buf)?;
    let mut parts = FramedParts::new(limit, old.codec);
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
        let message = if starting {
            tokio::select! {
                _ = &mut startup_timeout => None,
                message = socket.next() => message,
            }
        } else {
            socket.next().await
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(_)) if oversized.load(Ordering::Relaxed) > 0 => {
                let length = oversized.load(Ordering::Relaxed);
                let text = format!(
                    "message of {length} bytes exceeds the server's maximum message size of {message_bytes_max} bytes"
                );
                let error = ErrorInfo::new("FATAL".into(), "54000".into(), text);
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
        if let Err(mut error) = outcome {
            errors.on_error(&socket, &mut error);
            process_error(&mut socket, error, extended_protocol).await?;
        }
    }
    Ok(())
}

/// A byte stream that follows Postgres message framing on the way in and fails a read when a
/// message header announces more than `limit` bytes.
pub struct MessageLimit<S> {
    inner: S,
    limit: usize,
    /// Whether the startup packet has passed (after it, every message has a type byte).
    typed: bool,
    header: [u8; 8],
    header_length: usize,
    /// Body bytes of the current message still to come.
    remaining: usize,
    /// The announced length of the message that broke the limit (0 while none has).
    oversized: Arc<AtomicUsize>,
}

impl<S> MessageLimit<S> {
    pub fn new(inner: S, limit: usize, oversized: Arc<AtomicUsize>) -> Self {
        Self { inner, limit, typed: false, header: [0; 8], header_length: 0, remaining: 0, oversized }
    }

    /// Follows the framing over bytes the client sent.
    pub fn observe(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let skipped = self.remaining.min(bytes.len());
                self.remaining -= skipped;
                bytes = &bytes[skipped..];
                continue;
            }
            // Typed: type byte + length. Untyped: length + protocol code.
            let wanted = if self.typed { 5 } else { 8 };
            let taken = (wanted - self.header_length).min(bytes.len());
            self.header[self.header_length..self.header_length + taken].copy_from_slice(&bytes[..taken]);
            self.header_length += taken;
            bytes = &bytes[taken..];
            if self.header_length == wanted {
                self.header_length = 0;
                self.message_started()?;
            }
        }
        Ok(())
    }

    fn message_started(&mut self) -> io::Result<()> {
        let at = usize::from(self.typed);
        let length =
            u32::from_be_bytes([self.header[at], self.header[at + 1], self.header[at + 2], self.header[at + 3]]);
        let length = length as usize;
        if length > self.limit {
            self.oversized.store(length, Ordering::Relaxed);
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("message of {length} bytes is too large")));
        }
        if self.typed {
            // The length counts itself.
            self.remaining = length.saturating_sub(4);
        } else {
            let code = u32::from_be_bytes([self.header[4], self.header[5], self.header[6], self.header[7]]);
            self.remaining = length.saturating_sub(8);
            self.typed = code != SSL_REQUEST_CODE && code != GSSENC_REQUEST_CODE;
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for MessageLimit<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => Poll::Ready(this.observe(&buf.filled()[before..])),
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for MessageLimit<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(max: usize) -> MessageLimit<()> {
        MessageLimit::new((), max, Arc::new(AtomicUsize::new(0)))
    }

    #[test]
    fn follows_startup_then_typed_messages_across_chunks() {
        let mut stream = limit(100);
        let mut startup = 16u32.to_be_bytes().to_vec();
        startup.extend(196_608u32.to_be_bytes());
        startup.extend(b"user\0\0\0\0");
        let mut query = vec![b'Q'];
        query.extend(13u32.to_be_bytes());
        query.extend(b"select 1\0");
        let all = [startup, query].concat();
        for chunk in all.chunks(3) {
            stream.observe(chunk).unwrap();
        }
        assert!(stream.typed);
        assert_eq!(stream.remaining, 0);
        assert_eq!(stream.header_length, 0);
    }

    #[test]
    fn refuses_a_message_over_the_limit_from_its_header() {
        let mut stream = limit(1000);
        let mut startup = 8u32.to_be_bytes().to_vec();
        startup.extend(196_608u32.to_be_bytes());
        stream.observe(&startup).unwrap();
        let mut query = vec![b'Q'];
        query.extend(5000u32.to_be_bytes());
        assert!(stream.observe(&query).is_err());
        assert_eq!(stream.oversized.load(Ordering::Relaxed), 5000);
    }

    #[test]
    fn ssl_request_keeps_the_next_packet_untyped() {
        let mut stream = limit(1000);
        let mut ssl = 8u32.to_be_bytes().to_vec();
        ssl.extend(SSL_REQUEST_CODE.to_be_bytes());
        stream.observe(&ssl).unwrap();
        assert!(!stream.typed);
    }
}
