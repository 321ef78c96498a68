//! The io_uring backend, through tokio-uring. This is the only file that names
//! tokio-uring, so another io_uring crate could replace it here alone.
//!
//! Reads and writes are submitted with owned buffers that the kernel holds until the
//! completion arrives; a read lands directly in the spare capacity of the caller's
//! `BytesMut`, and a batch of request frames goes out as one `writev` submission.
//!
//! An operation dropped before its completion keeps its buffer and the socket in
//! tokio-uring's driver until the completion comes, which for a silent peer is never,
//! and tokio-uring 0.5 frees such buffers when its driver drops, before the kernel has
//! confirmed their cancellation. So no operation is abandoned here: the TCP connect
//! (the one step a timeout cuts short) is made by tokio's readiness-based connect and
//! the connected socket handed to io_uring, and the connection driver ends reads and
//! writes by shutting the socket down and awaiting them (`DROP_SAFE` is false).

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::TcpStream;

use crate::io::transport::{
    Connector, MAX_IOVECS, ShutdownHandle, TransportRead, TransportWrite, advance_bufs,
};

/// Connects with tokio-uring.
#[derive(Debug)]
pub struct UringConnector;

/// Read half of an io_uring connection (the stream is shared by both halves: io_uring
/// operations take `&self`), with the read wake threshold last set on its socket.
pub struct UringRead(Rc<TcpStream>, usize);

/// Write half of an io_uring connection.
pub struct UringWrite(Rc<TcpStream>);

impl Connector for UringConnector {
    type Read = UringRead;
    type Write = UringWrite;

    async fn connect(addr: SocketAddr) -> io::Result<(UringRead, UringWrite)> {
        // A connect cut short by its timeout closes its socket at once this way; an
        // io_uring connect op would keep it until the kernel gave up on the handshake.
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let stream = Rc::new(TcpStream::from_std(stream.into_std()?));
        Ok((UringRead(stream.clone(), 1), UringWrite(stream)))
    }
}

impl TransportRead for UringRead {
    async fn read(&mut self, buf: BytesMut) -> (io::Result<usize>, BytesMut) {
        let (len, cap) = (buf.len(), buf.capacity());
        if len == cap {
            return (
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "no spare capacity",
                )),
                buf,
            );
        }
        // Read into [len, capacity): the completion sets the buffer's length.
        let (result, slice) = self.0.read(buf.slice(len..cap)).await;
        (result, slice.into_inner())
    }

    fn set_wake_threshold(&mut self, bytes: usize) {
        let bytes = bytes.max(1);
        if bytes != self.1 && crate::io::sockopt::set_recv_lowat(&*self.0, bytes).is_ok() {
            self.1 = bytes;
        }
    }
}

/// Shuts an io_uring connection down beside a pending operation.
pub struct UringShutdown(Rc<TcpStream>);

impl ShutdownHandle for UringShutdown {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

impl TransportWrite for UringWrite {
    const DROP_SAFE: bool = false;
    type Shutdown = UringShutdown;

    fn shutdown_handle(&self) -> UringShutdown {
        UringShutdown(self.0.clone())
    }

    async fn write_all(&mut self, mut bufs: Vec<Bytes>) -> (io::Result<()>, Vec<Bytes>) {
        bufs.retain(|b| !b.is_empty());
        while !bufs.is_empty() {
            let rest = if bufs.len() > MAX_IOVECS {
                bufs.split_off(MAX_IOVECS)
            } else {
                Vec::new()
            };
            let (result, mut sent) = self.0.writev(bufs).await;
            sent.extend(rest);
            bufs = sent;
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
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Whether io_uring works here: a ring can be created and a no-op completes. Runs on a
/// scratch thread, since a tokio-uring runtime is bound to the thread that made it.
pub fn probe() -> Result<(), String> {
    std::thread::Builder::new()
        .name("kring-uring-probe".into())
        .spawn(|| {
            let runtime = tokio_uring::Runtime::new(tokio_uring::builder().entries(8))
                .map_err(|e| format!("io_uring setup failed: {e}"))?;
            runtime
                .block_on(tokio_uring::no_op())
                .map_err(|e| format!("io_uring no-op failed: {e}"))
        })
        .map_err(|e| format!("spawning the probe thread: {e}"))?
        .join()
        .map_err(|_| "the io_uring probe panicked".to_string())?
}

/// Runs `future` to completion on a new tokio-uring runtime on this thread.
pub fn block_on<F: std::future::Future>(future: F) -> io::Result<F::Output> {
    let runtime = tokio_uring::Runtime::new(tokio_uring::builder().entries(256))?;
    Ok(runtime.block_on(future))
}
