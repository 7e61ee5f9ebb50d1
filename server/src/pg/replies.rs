//! Replies held back until the client asks for them, as PostgreSQL holds them.
//!
//! pgwire flushes the socket after each reply of the extended protocol (ParseComplete,
//! BindComplete, CommandComplete, ReadyForQuery), so a prepared statement's Bind, Execute and
//! Sync cost three writes, and three wake-ups of the client, where PostgreSQL makes one: it sends
//! what those messages answer when the client's Sync or Flush asks for it, or when its output
//! buffer fills. [`Replies`] does the same: while the connection answers a Parse, Bind, Describe,
//! Close or Execute ([`Replies::hold`]), a flush keeps the bytes, and the next flush outside
//! those (the Sync's ReadyForQuery, a Flush) writes them all at once.
//!
//! Held never: a reply the client may wait for before it sends more (the start of a COPY either
//! way, a COPY's or a SUBSCRIBE's rows, an error, a notice, a notification) writes out at once
//! with everything before it; and at most [`HELD_BYTES_MAX`] bytes wait (a large result goes out
//! as it is made, with the socket's back-pressure).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes held back; past it they are written (PostgreSQL's output buffer is 8 KiB).
pub const HELD_BYTES_MAX: usize = 64 * 1024;

/// Backend messages a client may wait for before it sends anything else: CopyData, CopyDone,
/// CopyInResponse, CopyOutResponse, CopyBothResponse, NotificationResponse, NoticeResponse,
/// ErrorResponse, ReadyForQuery.
const URGENT: &[u8] = b"dcGHWANEZ";

/// A byte stream whose writes can be held back (see the module's documentation).
pub struct Replies<S> {
    inner: S,
    holding: bool,
    /// Bytes accepted and not yet written, from `written` on.
    held: Vec<u8>,
    written: usize,
    /// An urgent message is among the held bytes: they go out at the next chance.
    urgent: bool,
    /// Where the scan of the outgoing messages stands: header bytes seen of the current one,
    /// and its body bytes still to come.
    header: [u8; 5],
    header_length: usize,
    remaining: usize,
}

impl<S> Replies<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            holding: false,
            held: Vec::new(),
            written: 0,
            urgent: false,
            header: [0; 5],
            header_length: 0,
            remaining: 0,
        }
    }

    /// Whether flushes keep the bytes written so far (they are written by the next flush after
    /// this is turned off).
    pub fn hold(&mut self, holding: bool) {
        self.holding = holding;
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Follows the messages in outgoing bytes, noting an urgent one.
    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let skipped = self.remaining.min(bytes.len());
                self.remaining -= skipped;
                bytes = bytes.get(skipped..).unwrap_or_default();
                continue;
            }
            let taken = (self.header.len() - self.header_length).min(bytes.len());
            let (head, rest) = bytes.split_at(taken);
            if let Some(slot) = self.header.get_mut(self.header_length..self.header_length + taken) {
                slot.copy_from_slice(head);
            }
            self.header_length += taken;
            bytes = rest;
            if self.header_length == self.header.len() {
                let [kind, a, b, c, d] = self.header;
                if URGENT.contains(&kind) {
                    self.urgent = true;
                }
                self.remaining = (u32::from_be_bytes([a, b, c, d]) as usize).saturating_sub(4);
                self.header_length = 0;
            }
        }
    }

    fn keeps(&self) -> bool {
        self.holding && !self.urgent && self.held.len() - self.written < HELD_BYTES_MAX
    }
}

impl<S: AsyncWrite + Unpin> Replies<S> {
    /// Writes the held bytes; ready when none are left.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(rest) = self.held.get(self.written..).filter(|rest| !rest.is_empty()) {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.held.clear();
        self.written = 0;
        self.urgent = false;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replies<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replies<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.held.is_empty() && !this.holding {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
            this.scan(buf.get(..n).unwrap_or_default());
            // Nothing is held, so nothing held is urgent (the scan only follows the framing).
            this.urgent = false;
            return Poll::Ready(Ok(n));
        }
        if this.held.len() - this.written >= HELD_BYTES_MAX {
            ready!(this.poll_drain(cx))?;
        }
        let room = HELD_BYTES_MAX - (this.held.len() - this.written);
        let accepted = buf.get(..room.min(buf.len())).unwrap_or_default();
        this.scan(accepted);
        this.held.extend_from_slice(accepted);
        Poll::Ready(Ok(accepted.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.keeps() {
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    #[tokio::test]
    async fn held_replies_go_out_with_the_next_flush_outside_the_hold() {
        let mut replies = Replies::new(Vec::new());
        replies.hold(true);
        replies.write_all(&message(b'2', b"")).await.unwrap();
        replies.flush().await.unwrap();
        replies.write_all(&message(b'C', b"UPDATE 1\0")).await.unwrap();
        replies.flush().await.unwrap();
        assert!(replies.get_mut().is_empty(), "flushes while holding keep the bytes");
        replies.hold(false);
        replies.write_all(&message(b'Z', b"T")).await.unwrap();
        replies.flush().await.unwrap();
        let mut expected = message(b'2', b"");
        expected.extend(message(b'C', b"UPDATE 1\0"));
        expected.extend(message(b'Z', b"T"));
        assert_eq!(*replies.get_mut(), expected);
    }

    #[tokio::test]
    async fn an_urgent_reply_written_through_does_not_end_a_later_hold() {
        let mut replies = Replies::new(Vec::new());
        replies.write_all(&message(b'Z', b"I")).await.unwrap();
        replies.flush().await.unwrap();
        replies.hold(true);
        replies.write_all(&message(b'2', b"")).await.unwrap();
        replies.flush().await.unwrap();
        assert_eq!(*replies.get_mut(), message(b'Z', b"I"), "BindComplete waits for the Sync");
    }

    #[tokio::test]
    async fn urgent_replies_are_not_held() {
        // The start of COPY FROM STDIN: the client waits for it before it sends the rows.
        let mut replies = Replies::new(Vec::new());
        replies.hold(true);
        replies.write_all(&message(b'2', b"")).await.unwrap();
        // Written in pieces that cut the header, as a socket's writer may.
        let copy_in = message(b'G', &[0, 0, 0]);
        for piece in copy_in.chunks(2) {
            replies.write_all(piece).await.unwrap();
        }
        replies.flush().await.unwrap();
        let mut expected = message(b'2', b"");
        expected.extend(copy_in);
        assert_eq!(*replies.get_mut(), expected);
    }

    #[tokio::test]
    async fn at_most_the_limit_is_held() {
        let mut replies = Replies::new(Vec::new());
        replies.hold(true);
        let row = message(b'D', &[7; 1000]);
        for _ in 0..100 {
            replies.write_all(&row).await.unwrap();
            replies.flush().await.unwrap();
        }
        let written = replies.get_mut().len();
        assert!(written >= 100 * row.len() - HELD_BYTES_MAX, "{written} bytes written");
    }
}
