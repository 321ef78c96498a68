//! The io_uring backend: a ring of the worker's own (the `io-uring` crate), driven from
//! the worker's current-thread tokio runtime, which keeps its timers, channels and
//! `spawn_local`. This is the only file that names the crate.
//!
//! How the ring is driven, and why this way rather than through tokio-uring:
//! - Operations are queued on the submission queue as tasks run and submitted together
//!   when the worker is about to sleep (tokio's park hook), one `io_uring_enter` for
//!   every read and write queued in that loop turn; the hook submits nothing (and makes
//!   no system call) when nothing is queued.
//! - A write is submitted at once and its completion looked for right after: a write
//!   to a TCP socket with room in its send buffer completes inside `io_uring_enter`, so
//!   the writer goes on without sleeping and without a wake-up of its own. With
//!   tokio-uring every write completion was a loop turn more (its ring's readiness, an
//!   `epoll_wait`, then an `io_uring_enter` in the next park, empty or not): against
//!   the broker that was 2.4 turns and about 5 system calls per request, to epoll's 3.
//! - Completions are reaped from the shared completion queue (no system call) in the
//!   park hook and whenever the ring's descriptor, registered with tokio's epoll, turns
//!   readable; the operations' tasks are woken from there. The kernel runs completions
//!   cooperatively (`IORING_SETUP_COOP_TASKRUN`): at the worker's next system call,
//!   without interrupting it while it runs.
//!
//! Buffers lent to the kernel: an operation's future owns its buffers and hands them
//! back with the result. A future dropped before its completion leaves them in the
//! driver until the completion comes. When the driver goes with operations still in
//! the kernel's hands, it asks the kernel to cancel them and waits for their
//! completions; buffers of any it cannot confirm are leaked, never freed, since the
//! kernel may still write them (tokio-uring 0.5 freed them). The connection driver
//! still ends reads and writes by shutting the socket down and awaiting them
//! (`DROP_SAFE` is false), so normally nothing is left in flight.
//!
//! DESIGN.md allows `unsafe` here: handing the kernel pointers into buffers (each block
//! says why they stay valid).
#![allow(unsafe_code)]

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use io_uring::{IoUring, opcode, squeue, types};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::io::transport::{
    Connector, MAX_IOVECS, ShutdownHandle, TransportRead, TransportWrite, advance_bufs,
};

/// Submission queue entries of a worker's ring (the completion queue has twice as
/// many; completions beyond it wait in the kernel's overflow list, never dropped).
const RING_ENTRIES: u32 = 256;

/// The user data of cancellation requests, whose own completions carry nothing.
const CANCEL_TAG: u64 = u64::MAX;

/// How many rounds of waiting the driver gives cancelled operations when it goes.
const DRAIN_ROUNDS: usize = 64;

thread_local! {
    /// The ring of the runtime running on this thread, if any.
    static DRIVER: RefCell<Option<Rc<RefCell<Driver>>>> = const { RefCell::new(None) };
}

/// Where one operation stands.
enum Slot {
    Free,
    /// In the kernel's hands; its future waits (with the waker of its last poll).
    Waiting(Option<Waker>),
    /// Completed: the result waits for the future.
    Done(i32),
    /// The future was dropped first: what it lent the kernel stays here until the
    /// completion.
    Abandoned(Box<dyn Any>),
}

impl Slot {
    /// Whether the kernel still holds the operation.
    fn in_kernel(&self) -> bool {
        matches!(self, Slot::Waiting(_) | Slot::Abandoned(_))
    }
}

/// One thread's ring and the state of its operations, indexed by user data.
struct Driver {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Wakers of operations reaped and not woken yet, woken once the driver is no
    /// longer borrowed (kept to reuse its allocation from one loop turn to the next).
    done: Vec<Waker>,
}

impl Driver {
    fn new(entries: u32) -> io::Result<Driver> {
        // Cooperative task running (Linux 5.19): a completion does not interrupt the
        // worker while it runs; the kernel finishes it at the worker's next system call,
        // which comes soon (a submission or the wait for events). Older kernels refuse
        // the flag, and get a plain ring.
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .setup_coop_taskrun()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 2).build(entries))?;
        Ok(Driver {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            done: Vec::new(),
        })
    }

    /// Queues `entry` as a new operation; `Err` when the ring cannot take it.
    ///
    /// # Safety
    /// Every buffer and descriptor `entry` points to must stay valid until the
    /// operation's completion is reaped (the [`Op`] made from the index holds them, and
    /// hands them to the slot if dropped first).
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<usize> {
        if self.ring.submission().is_full() {
            self.submit()?;
        }
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::Free);
            self.slots.len() - 1
        });
        let entry = entry.user_data(index as u64);
        // SAFETY: the caller keeps what the entry points to alive until its completion.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            self.free.push(index);
            return Err(io::Error::other("the io_uring submission queue is full"));
        }
        self.slots[index] = Slot::Waiting(None);
        Ok(index)
    }

    /// Submits what is queued (no system call when nothing is, unless completions wait
    /// in the kernel's overflow list); a busy ring is reaped and tried again.
    fn submit(&mut self) -> io::Result<()> {
        loop {
            let queued = !self.ring.submission().is_empty();
            if !queued && !self.ring.submission().cq_overflow() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                // Completions first: their wakers are woken by the caller.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => self.reap(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Takes every completion off the queue, keeping the wakers of the operations done
    /// in `done`.
    fn reap(&mut self) {
        for cqe in self.ring.completion() {
            let Ok(index) = usize::try_from(cqe.user_data()) else {
                continue;
            };
            let Some(slot) = self.slots.get_mut(index) else {
                continue;
            };
            match std::mem::replace(slot, Slot::Done(cqe.result())) {
                Slot::Waiting(waker) => self.done.extend(waker),
                Slot::Abandoned(lent) => {
                    drop(lent);
                    *slot = Slot::Free;
                    self.free.push(index);
                }
                // Not ours (a stray user data): leave the slot as it was.
                other => *slot = other,
            }
        }
    }

    /// The outcome of operation `index`, registering `waker` while it is pending.
    fn poll_op(&mut self, index: usize, waker: &Waker) -> Poll<i32> {
        match &mut self.slots[index] {
            Slot::Done(result) => {
                let result = *result;
                self.release(index);
                Poll::Ready(result)
            }
            Slot::Waiting(slot_waker) => {
                match slot_waker {
                    Some(w) if w.will_wake(waker) => {}
                    _ => *slot_waker = Some(waker.clone()),
                }
                Poll::Pending
            }
            Slot::Free | Slot::Abandoned(_) => {
                Poll::Ready(-libc::EBADF) // not reachable through `Op`
            }
        }
    }

    /// Operation `index`'s future is gone: its slot is freed if done, else keeps `lent`.
    fn abandon(&mut self, index: usize, lent: Box<dyn Any>) {
        match self.slots[index] {
            Slot::Waiting(_) => self.slots[index] = Slot::Abandoned(lent),
            _ => self.release(index),
        }
    }

    fn release(&mut self, index: usize) {
        self.slots[index] = Slot::Free;
        self.free.push(index);
    }

    /// Operations still in the kernel's hands.
    fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.in_kernel()).count()
    }

    /// Cancels every operation still in flight and waits (a bounded while) for their
    /// completions; what the kernel has not given back by then is leaked.
    fn cancel_all(&mut self) {
        let pending: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].in_kernel())
            .collect();
        for index in pending {
            let cancel = opcode::AsyncCancel::new(index as u64)
                .build()
                .user_data(CANCEL_TAG);
            if self.ring.submission().is_full() && self.ring.submit().is_err() {
                break;
            }
            // SAFETY: a cancellation points to no memory of ours.
            let _ = unsafe { self.ring.submission().push(&cancel) };
        }
        for _ in 0..DRAIN_ROUNDS {
            if self.in_flight() == 0 {
                return;
            }
            let waited = self.ring.submit_and_wait(1);
            self.reap();
            // The futures are gone by now; their wakers have no one to wake.
            self.done.clear();
            if matches!(&waited, Err(e) if e.kind() != io::ErrorKind::Interrupted) {
                break;
            }
        }
        let stuck = self.in_flight();
        if stuck > 0 {
            tracing::warn!(
                operations = stuck,
                "io_uring operations not confirmed cancelled: their buffers are leaked"
            );
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.in_flight() > 0 {
            self.cancel_all();
        }
        // Whatever the kernel may still write stays allocated.
        for slot in self.slots.drain(..) {
            if let Slot::Abandoned(lent) = slot {
                std::mem::forget(lent);
            }
        }
    }
}

/// This thread's driver; the backend's futures run only inside [`block_on`].
fn current() -> io::Result<Rc<RefCell<Driver>>> {
    DRIVER
        .with(|d| d.borrow().clone())
        .ok_or_else(|| io::Error::other("io_uring operation outside an io_uring worker runtime"))
}

/// Submits what is queued and wakes the operations done: the park hook, and the
/// readiness of the ring's descriptor.
fn submit_and_reap(driver: &RefCell<Driver>) {
    let mut done = match driver.try_borrow_mut() {
        Ok(mut d) => {
            if let Err(e) = d.submit() {
                tracing::warn!(error = %e, "io_uring submission failed");
            }
            d.reap();
            std::mem::take(&mut d.done)
        }
        Err(_) => return,
    };
    // Woken with the driver free: a waker's drop may drop a task and its operations.
    for waker in done.drain(..) {
        waker.wake();
    }
    if let Ok(mut d) = driver.try_borrow_mut() {
        if d.done.is_empty() {
            d.done = done;
        }
    }
}

/// One operation in flight, holding what it lent the kernel (`T`) until it completes.
struct Op<T: 'static> {
    driver: Rc<RefCell<Driver>>,
    index: usize,
    lent: Option<T>,
}

impl<T: 'static> Op<T> {
    /// Queues `entry`, which points into `lent`.
    ///
    /// # Safety
    /// `entry` may point only to memory owned by `lent` (whose heap allocations do not
    /// move when `lent` does) and to descriptors that outlive the operation.
    unsafe fn new(entry: squeue::Entry, lent: T) -> io::Result<Op<T>> {
        let driver = current()?;
        // SAFETY: the Op keeps `lent` until the completion, or gives it to the driver.
        let index = unsafe { driver.borrow_mut().push(entry)? };
        Ok(Op {
            driver,
            index,
            lent: Some(lent),
        })
    }

    /// Submits now and reaps, so that an operation the kernel completes inside the
    /// submission (a write with room in the socket's buffer) is done before the first
    /// poll.
    fn submit_now(self) -> Self {
        submit_and_reap(&self.driver);
        self
    }
}

impl<T: 'static + Unpin> Future for Op<T> {
    type Output = (i32, T);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(i32, T)> {
        // Polled again after it was ready: its slot may serve another operation now.
        if self.lent.is_none() {
            return Poll::Pending;
        }
        let polled = self.driver.borrow_mut().poll_op(self.index, cx.waker());
        match polled {
            Poll::Ready(result) => match self.lent.take() {
                Some(lent) => Poll::Ready((result, lent)),
                None => Poll::Pending,
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: 'static> Drop for Op<T> {
    fn drop(&mut self) {
        let Some(lent) = self.lent.take() else {
            return;
        };
        match self.driver.try_borrow_mut() {
            Ok(mut d) => d.abandon(self.index, Box::new(lent)),
            // Dropped while the driver is borrowed (a waker's drop, say): leak rather
            // than free what the kernel may still write.
            Err(_) => std::mem::forget(lent),
        }
    }
}

/// Converts a completion's result to `io::Result`.
fn result_of(result: i32) -> io::Result<usize> {
    if result < 0 {
        Err(io::Error::from_raw_os_error(-result))
    } else {
        Ok(result as usize)
    }
}

/// Connects with io_uring.
#[derive(Debug)]
pub struct UringConnector;

/// Read half of an io_uring connection, with the read wake threshold last set on its
/// socket.
pub struct UringRead(Rc<std::net::TcpStream>, usize);

/// Write half of an io_uring connection.
pub struct UringWrite(Rc<std::net::TcpStream>);

impl Connector for UringConnector {
    type Read = UringRead;
    type Write = UringWrite;

    async fn connect(addr: SocketAddr) -> io::Result<(UringRead, UringWrite)> {
        // A connect cut short by its timeout closes its socket at once this way; an
        // io_uring connect op would keep it until the kernel gave up on the handshake.
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let stream = Rc::new(stream.into_std()?);
        Ok((UringRead(stream.clone(), 1), UringWrite(stream)))
    }
}

/// A read's buffer, lent to the kernel from its length to its capacity.
struct ReadBuf(BytesMut);

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
        let mut lent = ReadBuf(buf);
        let spare = lent.0.spare_capacity_mut();
        let entry = opcode::Recv::new(
            types::Fd(self.0.as_raw_fd()),
            spare.as_mut_ptr().cast::<u8>(),
            spare.len().min(u32::MAX as usize) as u32,
        )
        .build();
        // SAFETY: the entry points into `lent`'s heap buffer, which the Op owns until
        // the completion, and to the socket, which the read half keeps open.
        let op = match unsafe { Op::new(entry, lent) } {
            Ok(op) => op,
            Err(e) => return (Err(e), BytesMut::new()),
        };
        let (result, ReadBuf(mut buf)) = op.await;
        let read = result_of(result);
        if let Ok(n) = read {
            let filled = (len + n).min(buf.capacity());
            // SAFETY: the kernel wrote `n` bytes into the spare capacity after `len`.
            unsafe { buf.set_len(filled) };
        }
        (read, buf)
    }

    fn set_wake_threshold(&mut self, bytes: usize) {
        let bytes = bytes.max(1);
        if bytes != self.1 && crate::io::sockopt::set_recv_lowat(&*self.0, bytes).is_ok() {
            self.1 = bytes;
        }
    }
}

/// Shuts an io_uring connection down beside a pending operation.
pub struct UringShutdown(Rc<std::net::TcpStream>);

impl ShutdownHandle for UringShutdown {
    fn shutdown(&self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// A vectored write's buffers and the iovecs pointing into them.
struct WriteBufs {
    bufs: Vec<Bytes>,
    /// Read by the kernel alone, through the submitted entry.
    #[allow(dead_code)]
    iovecs: Vec<libc::iovec>,
}

impl UringWrite {
    /// One `writev` of `bufs` (at most [`MAX_IOVECS`] of them), submitted at once.
    async fn writev(&self, bufs: Vec<Bytes>) -> (io::Result<usize>, Vec<Bytes>) {
        let iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect::<Vec<_>>();
        let entry = opcode::Writev::new(
            types::Fd(self.0.as_raw_fd()),
            iovecs.as_ptr(),
            iovecs.len() as u32,
        )
        .build();
        let lent = WriteBufs { bufs, iovecs };
        // SAFETY: the entry points to `lent.iovecs` (a heap array) and through it into
        // `lent.bufs`' heap data, both owned by the Op until the completion; the socket
        // is kept open by the write half.
        let op = match unsafe { Op::new(entry, lent) } {
            Ok(op) => op,
            Err(e) => return (Err(e), Vec::new()),
        };
        let (result, lent) = op.submit_now().await;
        (result_of(result), lent.bufs)
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
            let (result, mut sent) = self.writev(bufs).await;
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

/// Whether io_uring works here: a ring can be created and a no-op completes.
pub fn probe() -> Result<(), String> {
    let mut driver = Driver::new(8).map_err(|e| format!("io_uring setup failed: {e}"))?;
    let nop = opcode::Nop::new().build().user_data(0);
    // SAFETY: a no-op points to no memory.
    unsafe { driver.ring.submission().push(&nop) }
        .map_err(|_| "io_uring submission queue full".to_string())?;
    driver
        .ring
        .submit_and_wait(1)
        .map_err(|e| format!("io_uring no-op failed: {e}"))?;
    match driver.ring.completion().next() {
        Some(cqe) if cqe.result() >= 0 => Ok(()),
        Some(cqe) => Err(format!(
            "io_uring no-op failed: {}",
            io::Error::from_raw_os_error(-cqe.result())
        )),
        None => Err("io_uring no-op did not complete".to_string()),
    }
}

/// The ring's descriptor, as tokio's epoll registers it.
struct RingFd(RawFd);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Reaps completions whenever the ring's descriptor turns readable.
async fn reap_on_readiness(fd: AsyncFd<RingFd>, driver: Rc<RefCell<Driver>>) {
    loop {
        let Ok(mut ready) = fd.readable().await else {
            return;
        };
        submit_and_reap(&driver);
        ready.clear_ready();
    }
}

/// The park hook: submits what the loop turn queued and reaps what completed.
fn on_park() {
    if let Some(driver) = DRIVER.with(|d| d.borrow().clone()) {
        submit_and_reap(&driver);
    }
}

/// Puts `driver` in this thread's slot for as long as it lives, restoring what was
/// there before.
struct Installed(Option<Rc<RefCell<Driver>>>);

impl Installed {
    fn new(driver: Rc<RefCell<Driver>>) -> Installed {
        Installed(DRIVER.with(|d| d.borrow_mut().replace(driver)))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.0.take();
        DRIVER.with(|d| *d.borrow_mut() = previous);
    }
}

/// Runs `future` to completion on this thread, on a current-thread tokio runtime with a
/// `LocalSet` and an io_uring ring of its own.
pub fn block_on<F: Future>(future: F) -> io::Result<F::Output> {
    let driver = Rc::new(RefCell::new(Driver::new(RING_ENTRIES)?));
    let ring_fd = driver.borrow().ring.as_raw_fd();
    let installed = Installed::new(driver.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(on_park)
        .build()?;
    let local = tokio::task::LocalSet::new();
    let output = local.block_on(&runtime, async {
        // SAFETY: the ring's descriptor stays open until the driver goes, after this
        // task and the runtime (below), so the registration never outlives it.
        let fd = unsafe { AsyncFd::register_with_interest(RingFd(ring_fd), Interest::READABLE)? };
        let reaper = tokio::task::spawn_local(reap_on_readiness(fd, driver.clone()));
        let output = future.await;
        reaper.abort();
        Ok::<_, io::Error>(output)
    });
    // The tasks (and any operation futures they hold) go first, then the runtime; the
    // driver goes last, once nothing refers to it.
    drop(local);
    drop(runtime);
    drop(installed);
    drop(driver);
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::net::{TcpListener, TcpStream};

    /// A connected pair on loopback: (the side the ring uses, the peer).
    fn pair() -> (Rc<TcpStream>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        ours.set_nonblocking(true).unwrap();
        let (peer, _) = listener.accept().unwrap();
        (Rc::new(ours), peer)
    }

    fn in_flight() -> usize {
        current().unwrap().borrow().in_flight()
    }

    #[test]
    fn reads_and_writes_complete_and_hand_their_buffers_back() {
        block_on(async {
            let (ours, mut peer) = pair();
            let (mut read, mut write) = (UringRead(ours.clone(), 1), UringWrite(ours));
            let bufs = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
            let (written, emptied) = write.write_all(bufs).await;
            written.unwrap();
            assert!(emptied.is_empty());
            let mut got = [0u8; 7];
            std::io::Read::read_exact(&mut peer, &mut got).unwrap();
            assert_eq!(&got, b"abcdefg");

            peer.write_all(b"xyz").unwrap();
            let mut buf = BytesMut::with_capacity(16);
            buf.extend_from_slice(b">");
            let (n, buf) = read.read(buf).await;
            assert_eq!(n.unwrap(), 3);
            assert_eq!(&buf[..], b">xyz", "appended after the existing length");
            assert_eq!(in_flight(), 0);

            drop(peer);
            let (n, _) = read.read(BytesMut::with_capacity(4)).await;
            assert_eq!(n.unwrap(), 0, "end of stream");
        })
        .unwrap();
    }

    /// A write the kernel completes inside the submission is done before its future is
    /// first polled: the writer never sleeps for it.
    #[test]
    fn a_write_with_room_completes_without_waiting() {
        block_on(async {
            let (ours, mut peer) = pair();
            let write = UringWrite(ours);
            let mut future = std::pin::pin!(write.writev(vec![Bytes::from_static(b"now")]));
            let waker = Waker::noop();
            let mut cx = Context::from_waker(waker);
            match future.as_mut().poll(&mut cx) {
                Poll::Ready((result, _)) => assert_eq!(result.unwrap(), 3),
                Poll::Pending => panic!("the write waited for a wake-up"),
            }
            let mut got = [0u8; 3];
            std::io::Read::read_exact(&mut peer, &mut got).unwrap();
            assert_eq!(&got, b"now");
        })
        .unwrap();
    }

    /// A read whose future is dropped before its completion keeps its buffer in the
    /// driver until the completion comes, then lets it go.
    #[test]
    fn an_abandoned_read_keeps_its_buffer_until_it_completes() {
        block_on(async {
            let (ours, mut peer) = pair();
            let mut read = UringRead(ours, 1);
            {
                let mut future = std::pin::pin!(read.read(BytesMut::with_capacity(64)));
                let waker = Waker::noop();
                assert!(
                    future
                        .as_mut()
                        .poll(&mut Context::from_waker(waker))
                        .is_pending()
                );
                // Submitted, so the kernel holds it.
                submit_and_reap(&current().unwrap());
            }
            let driver = current().unwrap();
            assert!(matches!(
                driver.borrow().slots.as_slice(),
                [Slot::Abandoned(_)]
            ));
            peer.write_all(b"late").unwrap();
            for _ in 0..200 {
                if driver.borrow().in_flight() == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert_eq!(driver.borrow().in_flight(), 0, "the completion freed it");
        })
        .unwrap();
    }

    /// The driver going with a read still in the kernel's hands (a silent peer) cancels
    /// it and waits for the cancellation before anything is freed.
    #[test]
    fn a_driver_going_cancels_what_is_in_flight() {
        let (ours, _peer) = pair();
        let mut driver = Driver::new(8).unwrap();
        let mut lent = BytesMut::with_capacity(64);
        let spare = lent.spare_capacity_mut();
        let entry = opcode::Recv::new(
            types::Fd(ours.as_raw_fd()),
            spare.as_mut_ptr().cast::<u8>(),
            spare.len() as u32,
        )
        .build();
        // SAFETY: `lent` goes to the slot below and stays there until the completion.
        let index = unsafe { driver.push(entry) }.unwrap();
        driver.submit().unwrap();
        driver.abandon(index, Box::new(lent));
        assert_eq!(driver.in_flight(), 1);
        driver.cancel_all();
        assert_eq!(driver.in_flight(), 0, "the cancellation was confirmed");
    }

    #[test]
    fn the_probe_passes_here() {
        probe().unwrap();
    }
}
