//! The epoll backend: tokio's readiness-based TCP stream behind the completion-style
//! transport traits. Used where io_uring is unavailable (containers whose seccomp
//! profile blocks it, old kernels) or when forced by configuration.

use std::io::{self, IoSlice};
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::io::transport::{Connector, MAX_IOVECS, TransportRead, TransportWrite, advance_bufs};

/// Connects with tokio (epoll).
#[derive(Debug)]
pub struct EpollConnector;

/// Read half of an epoll connection, with the read wake threshold last set on its socket.
#[derive(Debug)]
pub struct EpollRead(OwnedReadHalf, usize);

/// Write half of an epoll connection.
#[derive(Debug)]
pub struct EpollWrite(Option<OwnedWriteHalf>);

impl Connector for EpollConnector {
    type Read = EpollRead;
    type Write = EpollWrite;

    async fn connect(addr: SocketAddr) -> io::Result<(EpollRead, EpollWrite)> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok((EpollRead(r, 1), EpollWrite(Some(w))))
    }
}

impl TransportRead for EpollRead {
    async fn read(&mut self, mut buf: BytesMut) -> (io::Result<usize>, BytesMut) {
        let result = self.0.read_buf(&mut buf).await;
        (result, buf)
    }

    fn set_wake_threshold(&mut self, bytes: usize) {
        let bytes = bytes.max(1);
        let stream: &TcpStream = self.0.as_ref();
        if bytes != self.1 && crate::io::sockopt::set_recv_lowat(stream, bytes).is_ok() {
            self.1 = bytes;
        }
    }
}

impl TransportWrite for EpollWrite {
    // Readiness-based: a dropped read or write leaves nothing with the kernel.
    const DROP_SAFE: bool = true;
    type Shutdown = ();

    fn shutdown_handle(&self) {}

    async fn write_all(&mut self, mut bufs: Vec<Bytes>) -> (io::Result<()>, Vec<Bytes>) {
        let Some(stream) = self.0.as_mut() else {
            return (Err(io::ErrorKind::NotConnected.into()), bufs);
        };
        bufs.retain(|b| !b.is_empty());
        while !bufs.is_empty() {
            let slices: Vec<IoSlice<'_>> = bufs
                .iter()
                .take(MAX_IOVECS)
                .map(|b| IoSlice::new(b))
                .collect();
            let result = stream.write_vectored(&slices).await;
            drop(slices);
            match result {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), bufs),
                Ok(n) => advance_bufs(&mut bufs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), bufs),
            }
        }
        (Ok(()), bufs)
    }

    fn close(&mut self) {
        // Dropping the write half shuts down the write direction; the read half ends
        // when its task is stopped or the peer closes.
        self.0 = None;
    }
}
