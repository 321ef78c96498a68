//! The completion-style transport every backend implements: owned buffers go in and come
//! back with the result, as io_uring requires (the kernel owns a buffer until the
//! operation completes), and readiness-based epoll adapts to it at no cost.
//!
//! A connection is split into a read half and a write half so one task can wait for a
//! response while another writes the next batch of requests. TLS and SASL will sit
//! between framing and socket as wrappers implementing these same traits, so the
//! connection code above does not change.
//!
//! Abandoning an operation: with a completion backend the kernel owns an operation's
//! buffer (and keeps the socket open) until its completion arrives, so an unfinished
//! read or write must not simply be dropped: the driver shuts the socket down (which
//! ends every pending operation on it) and awaits the operation to its end.
//! [`TransportWrite::DROP_SAFE`] says whether a backend may skip that.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};

/// The largest number of buffers handed to one vectored write (Linux's IOV_MAX).
pub const MAX_IOVECS: usize = 1024;

/// The read half of a connection.
pub trait TransportRead: 'static {
    /// Reads into the spare capacity of `buf`, after its current length, and returns it
    /// with the number of bytes read (`0` at end of stream). `buf` must have spare capacity.
    fn read(&mut self, buf: BytesMut) -> impl Future<Output = (io::Result<usize>, BytesMut)>;

    /// Asks the kernel not to wake the next reads before `bytes` are there (or the peer
    /// closes): the engine knows how many the frame being read still needs, for sure,
    /// so it is woken once for the lot instead of for every segment. A hint: a backend
    /// may ignore it.
    fn set_wake_threshold(&mut self, bytes: usize) {
        let _ = bytes;
    }
}

/// The write half of a connection.
pub trait TransportWrite: 'static {
    /// Whether an unfinished read or write of this backend may be dropped: true for a
    /// readiness backend (nothing is in the kernel's hands between polls), false for a
    /// completion backend, whose operations must be ended by [`ShutdownHandle::shutdown`]
    /// and awaited.
    const DROP_SAFE: bool;

    /// What shuts the socket down while a write borrows this half.
    type Shutdown: ShutdownHandle;

    /// Writes every byte of `bufs`, in order, as few vectored writes as the kernel
    /// allows; returns the (emptied) vector so its allocation can be reused.
    fn write_all(&mut self, bufs: Vec<Bytes>)
    -> impl Future<Output = (io::Result<()>, Vec<Bytes>)>;

    /// A handle that shuts this connection down from beside a pending write.
    fn shutdown_handle(&self) -> Self::Shutdown;

    /// Shuts the connection down: in both directions where the backend can (so a
    /// pending read ends; required when [`Self::DROP_SAFE`] is false).
    fn close(&mut self);
}

/// Shuts a connection down in both directions, so every pending read and write on it
/// completes (with end of stream or an error).
pub trait ShutdownHandle: 'static {
    /// Shuts down; errors (already closed, reset) are ignored: the point is that
    /// nothing stays pending.
    fn shutdown(&self);
}

/// For backends whose unfinished operations may be dropped: shutting down is closing
/// the write half (see [`TransportWrite::close`]).
impl ShutdownHandle for () {
    fn shutdown(&self) {}
}

/// Opens connections for one backend.
pub trait Connector: 'static {
    /// The read half.
    type Read: TransportRead;
    /// The write half.
    type Write: TransportWrite;

    /// Connects to `addr` with TCP_NODELAY set.
    fn connect(addr: SocketAddr) -> impl Future<Output = io::Result<(Self::Read, Self::Write)>>;
}

/// Drops the first `written` bytes from the front of `bufs` after a partial vectored
/// write: whole buffers are removed, a partly written one is sliced (no copy).
pub fn advance_bufs(bufs: &mut Vec<Bytes>, mut written: usize) {
    let mut done = 0;
    for b in bufs.iter_mut() {
        if written >= b.len() {
            written -= b.len();
            done += 1;
        } else {
            b.advance(written);
            break;
        }
    }
    bufs.drain(..done);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_drops_whole_buffers_and_slices_the_partial_one() {
        let mut bufs = vec![
            Bytes::from_static(b"abc"),
            Bytes::from_static(b"defg"),
            Bytes::from_static(b"hi"),
        ];
        advance_bufs(&mut bufs, 5);
        assert_eq!(
            bufs,
            vec![Bytes::from_static(b"fg"), Bytes::from_static(b"hi")]
        );
        advance_bufs(&mut bufs, 4);
        assert!(bufs.is_empty());
    }
}
