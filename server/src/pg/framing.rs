//! Checks on the bytes a client sends, made before pgwire decodes them.
//!
//! [`Framing`] wraps the (decrypted) byte stream and follows the protocol's framing: untyped
//! startup packets, then a type byte and a 4-byte length per message. It fails the read, and so
//! the connection, when:
//!
//! - a header announces a message over the limit (SQLSTATE 54000): pgwire's own limit is fixed at
//!   1 GiB, and Sluice's is checked before a message is buffered;
//! - a Bind message's fields do not fit its length, or a parameter's length is negative other
//!   than -1 (NULL) (08P01, "insufficient data left in message" as PostgreSQL says). pgwire would
//!   read a length of -2 as NULL and panic on a parameter running past the message's end.
//!
//! PostgreSQL answers a malformed Bind with an ERROR and goes on; Sluice ends the connection
//! (FATAL), because after a framing error it cannot trust what follows.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Protocol codes carried by untyped packets that are followed by another untyped packet.
const SSL_REQUEST_CODE: u32 = 80_877_103;
const GSSENC_REQUEST_CODE: u32 = 80_877_104;

/// Why the stream was broken off: the SQLSTATE and message the client gets.
pub type Broken = Arc<Mutex<Option<(&'static str, String)>>>;

/// A byte stream checked as it is read (see the module's documentation).
pub struct Framing<S> {
    inner: S,
    limit: usize,
    /// Whether the startup packet has passed (after it, every message has a type byte).
    typed: bool,
    header: [u8; 8],
    header_length: usize,
    /// Body bytes of the current message still to come.
    remaining: usize,
    /// The current message's Bind check, when it is a Bind.
    bind: Option<BindCheck>,
    broken: Broken,
}

impl<S> Framing<S> {
    pub fn new(inner: S, limit: usize, broken: Broken) -> Self {
        Self { inner, limit, typed: false, header: [0; 8], header_length: 0, remaining: 0, bind: None, broken }
    }

    fn fail(&self, sqlstate: &'static str, message: String) -> io::Error {
        let error = io::Error::new(io::ErrorKind::InvalidData, message.clone());
        *self.broken.lock() = Some((sqlstate, message));
        error
    }

    /// Follows the framing over bytes the client sent.
    pub fn observe(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let (body, rest) = split(bytes, self.remaining);
                if let Some(bind) = &mut self.bind {
                    bind.feed(body).map_err(|m| self.fail("08P01", m))?;
                }
                self.remaining -= body.len();
                bytes = rest;
                if self.remaining == 0 {
                    self.message_ended()?;
                }
                continue;
            }
            // Typed: type byte + length. Untyped: length + protocol code.
            let wanted = if self.typed { 5 } else { 8 };
            let (head, rest) = split(bytes, wanted - self.header_length);
            self.header.iter_mut().skip(self.header_length).zip(head).for_each(|(slot, byte)| *slot = *byte);
            self.header_length += head.len();
            bytes = rest;
            if self.header_length == wanted {
                self.header_length = 0;
                self.message_started()?;
            }
        }
        Ok(())
    }

    fn message_started(&mut self) -> io::Result<()> {
        // Typed: the length follows the type byte. Untyped: it comes first.
        let at = usize::from(self.typed);
        let length = self.header.get(at..).and_then(|h| h.first_chunk::<4>()).map_or(0, |b| u32::from_be_bytes(*b));
        let length = length as usize;
        if length > self.limit {
            return Err(self.fail(
                "54000",
                format!("message of {length} bytes exceeds the server's maximum message size of {} bytes", self.limit),
            ));
        }
        if self.typed {
            // The length counts itself.
            self.remaining = length.saturating_sub(4);
            self.bind = (self.header.first() == Some(&b'B')).then(BindCheck::default);
            if self.remaining == 0 {
                self.message_ended()?;
            }
        } else {
            let code = self.header.last_chunk::<4>().map_or(0, |b| u32::from_be_bytes(*b));
            self.remaining = length.saturating_sub(8);
            self.typed = code != SSL_REQUEST_CODE && code != GSSENC_REQUEST_CODE;
        }
        Ok(())
    }

    fn message_ended(&mut self) -> io::Result<()> {
        match self.bind.take() {
            Some(bind) if !bind.complete() => Err(self.fail("08P01", "insufficient data left in message".into())),
            _ => Ok(()),
        }
    }
}

/// The first `at_most` bytes, and the rest.
fn split(bytes: &[u8], at_most: usize) -> (&[u8], &[u8]) {
    bytes.split_at_checked(at_most.min(bytes.len())).unwrap_or((bytes, &[]))
}

/// Where a Bind message's fields stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum BindField {
    #[default]
    Portal,
    Statement,
    FormatCount,
    Formats(u16),
    ParameterCount,
    ParameterLength(u16),
    ParameterData(u16, u32),
    ResultCount,
    Results(u16),
    Done,
}

/// Follows a Bind message's fields as its bytes arrive: `portal\0 statement\0 int16 n int16[n]
/// int16 m (int32 length, bytes)[m] int16 k int16[k]`.
#[derive(Debug, Default)]
struct BindCheck {
    field: BindField,
    number: [u8; 4],
    have: usize,
}

impl BindCheck {
    fn complete(&self) -> bool {
        self.field == BindField::Done
    }

    /// Collects a big-endian number of `width` bytes; `Some` when it is whole.
    fn number(&mut self, bytes: &mut &[u8], width: usize) -> Option<u32> {
        let (digits, rest) = split(bytes, width - self.have);
        self.number.iter_mut().skip(self.have).zip(digits).for_each(|(slot, byte)| *slot = *byte);
        self.have += digits.len();
        *bytes = rest;
        if self.have < width {
            return None;
        }
        self.have = 0;
        Some(self.number.iter().take(width).fold(0u32, |n, b| (n << 8) | u32::from(*b)))
    }

    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        use BindField::*;
        while !bytes.is_empty() {
            self.field = match self.field {
                Portal | Statement => match bytes.iter().position(|b| *b == 0) {
                    Some(end) => {
                        bytes = bytes.get(end + 1..).unwrap_or_default();
                        if self.field == Portal {
                            Statement
                        } else {
                            FormatCount
                        }
                    }
                    None => return Ok(()),
                },
                FormatCount | Formats(_) | ParameterCount | ResultCount | Results(_) => {
                    let Some(value) = self.number(&mut bytes, 2) else { return Ok(()) };
                    let count = value as u16;
                    match self.field {
                        FormatCount | Formats(1) => match self.field {
                            FormatCount if count > 0 => Formats(count),
                            _ => ParameterCount,
                        },
                        Formats(left) => Formats(left - 1),
                        ParameterCount if count > 0 => ParameterLength(count),
                        ParameterCount => ResultCount,
                        ResultCount if count > 0 => Results(count),
                        ResultCount | Results(1) => Done,
                        Results(left) => Results(left - 1),
                        other => other,
                    }
                }
                ParameterLength(left) => {
                    let Some(value) = self.number(&mut bytes, 4) else { return Ok(()) };
                    let length = value as i32;
                    match length {
                        -1 | 0 if left == 1 => ResultCount,
                        -1 | 0 => ParameterLength(left - 1),
                        length if length < 0 => return Err("insufficient data left in message".into()),
                        length => ParameterData(left, length as u32),
                    }
                }
                ParameterData(left, length) => {
                    let (data, rest) = split(bytes, length as usize);
                    bytes = rest;
                    let length = length - data.len() as u32;
                    match (length, left) {
                        (0, 1) => ResultCount,
                        (0, left) => ParameterLength(left - 1),
                        (length, left) => ParameterData(left, length),
                    }
                }
                Done => return Err("invalid message format".into()),
            };
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Framing<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => Poll::Ready(this.observe(buf.filled().get(before..).unwrap_or_default())),
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Framing<S> {
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

    fn framing(max: usize) -> Framing<()> {
        Framing::new((), max, Arc::new(Mutex::new(None)))
    }

    fn startup() -> Vec<u8> {
        let mut startup = 16u32.to_be_bytes().to_vec();
        startup.extend(196_608u32.to_be_bytes());
        startup.extend(b"user\0\0\0\0");
        startup
    }

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend(((body.len() + 4) as u32).to_be_bytes());
        message.extend(body);
        message
    }

    /// A Bind of the unnamed statement: format codes, parameters (length, bytes), result codes.
    fn bind(formats: &[i16], parameters: &[(i32, &[u8])], results: &[i16]) -> Vec<u8> {
        let mut body = b"\0\0".to_vec();
        body.extend((formats.len() as u16).to_be_bytes());
        formats.iter().for_each(|f| body.extend(f.to_be_bytes()));
        body.extend((parameters.len() as u16).to_be_bytes());
        for (length, bytes) in parameters {
            body.extend(length.to_be_bytes());
            body.extend(*bytes);
        }
        body.extend((results.len() as u16).to_be_bytes());
        results.iter().for_each(|f| body.extend(f.to_be_bytes()));
        message(b'B', &body)
    }

    #[test]
    fn follows_startup_then_typed_messages_across_chunks() {
        let mut stream = framing(100);
        let all = [startup(), message(b'Q', b"select 1\0"), bind(&[1], &[(2, b"ab"), (-1, b"")], &[0])].concat();
        for chunk in all.chunks(3) {
            stream.observe(chunk).unwrap();
        }
        assert!(stream.typed);
        assert_eq!(stream.remaining, 0);
        assert_eq!(stream.header_length, 0);
    }

    #[test]
    fn refuses_a_message_over_the_limit_from_its_header() {
        let mut stream = framing(1000);
        let mut startup = 8u32.to_be_bytes().to_vec();
        startup.extend(196_608u32.to_be_bytes());
        stream.observe(&startup).unwrap();
        let mut query = vec![b'Q'];
        query.extend(5000u32.to_be_bytes());
        assert!(stream.observe(&query).is_err());
        assert_eq!(stream.broken.lock().as_ref().map(|b| b.0), Some("54000"));
    }

    #[test]
    fn ssl_request_keeps_the_next_packet_untyped() {
        let mut stream = framing(1000);
        let mut ssl = 8u32.to_be_bytes().to_vec();
        ssl.extend(SSL_REQUEST_CODE.to_be_bytes());
        stream.observe(&ssl).unwrap();
        assert!(!stream.typed);
    }

    #[test]
    fn malformed_binds_are_refused() {
        let negative = bind(&[], &[(-2, b"")], &[]);
        let mut running_over = bind(&[], &[(100, b"5")], &[]);
        running_over.truncate(running_over.len() - 2);
        let running_over = message(b'B', &running_over[5..]);
        let mut trailing = bind(&[], &[], &[]);
        trailing.push(0);
        let trailing = message(b'B', &trailing[5..]);
        for (name, bad) in [("negative", negative), ("running over", running_over), ("trailing", trailing)] {
            let mut stream = framing(1000);
            stream.observe(&startup()).unwrap();
            assert!(stream.observe(&bad).is_err(), "{name}");
            assert_eq!(stream.broken.lock().as_ref().map(|b| b.0), Some("08P01"), "{name}");
        }
        let mut stream = framing(1000);
        stream.observe(&startup()).unwrap();
        stream.observe(&message(b'B', b"")).unwrap_err();
    }
}
