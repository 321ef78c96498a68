//! The async driver of one broker connection, run as a task on the worker that owns it:
//! it connects the socket, then moves bytes and time between the transport (io_uring or
//! epoll) and the connection engine ([`crate::engine::connection`]), which holds every
//! protocol rule (handshake, framing, correlation, deadlines). What the driver adds:
//! resolving and TCP-connecting with a timeout, reconnecting on demand after a seeded
//! exponential backoff, batching every request queued during a loop turn into one
//! vectored write, and publishing the connection's state to the `Send + Sync` handles.
//!
//! Invariants:
//! - One task per connection owns the write half and the engine's command side; a
//!   second task on the same worker owns the read half. The engine sits in a `RefCell`
//!   shared by the two, borrowed only between awaits.
//! - Every request queued to the connection gets exactly one answer (the engine's rule);
//!   requests that arrive while it is in reconnect backoff fail at once with a retriable
//!   `NotConnected`.
//! - A write never outlives its connection: when the engine ends (timeout, broken read)
//!   while a write is pending, the socket is shut down and the write ends.
//! - Every path that gives a connected socket up shuts it down: the session's end (done,
//!   broken, a handshake, TLS or SASL step timed out, closed, runtime shutdown). With a
//!   completion backend (io_uring) no read or write is dropped unfinished (the kernel
//!   would keep its buffer and the socket until a completion that a silent peer never
//!   causes): the shutdown ends them and the driver awaits them, so when a worker's
//!   tasks have ended, nothing is in flight on its ring. (Should anything be, the ring
//!   cancels it and leaks, never frees, a buffer the kernel has not given back.)

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::engine::backoff::{Backoff, SplitMix64};
use crate::engine::connection::{Connection, Event};
use crate::engine::error::IoError;
use crate::io::security;
use crate::io::transport::{Connector, ShutdownHandle, TransportRead, TransportWrite};
use crate::metrics::BrokerMetrics;
use crate::protocol::negotiation::ApiVersionsTable;
use crate::runtime::LazyDeadline;

pub use crate::engine::connection::{ConnectionConfig, EncodeRequest, RawResponse, TypedRequest};

/// Where a request's outcome goes.
type Reply = oneshot::Sender<Result<RawResponse, IoError>>;

/// A request on its way to a connection.
pub(crate) struct Outbound {
    pub request: Box<dyn EncodeRequest>,
    pub reply: Reply,
}

/// Messages from handles to a connection task.
pub(crate) enum Command {
    Send(Outbound),
    Connect(oneshot::Sender<Result<(), IoError>>),
}

/// Connection states, as seen by handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnectionState {
    /// No socket; the next request connects.
    Disconnected = 0,
    /// Connecting or handshaking.
    Connecting = 1,
    /// Ready for requests.
    Connected = 2,
    /// Closed for good.
    Closed = 3,
}

/// State shared between a connection task and its handles (any thread). The connection
/// task writes it rarely (on state changes); handles read it.
#[derive(Debug)]
pub(crate) struct ConnectionShared {
    pub addr: Arc<str>,
    state: AtomicU8,
    versions: RwLock<Option<Arc<ApiVersionsTable>>>,
    pub in_flight: AtomicUsize,
    pub connects: AtomicU64,
    pub closed: AtomicBool,
    pub close_notify: Notify,
}

impl ConnectionShared {
    pub fn new(addr: &str) -> Self {
        ConnectionShared {
            addr: addr.into(),
            state: AtomicU8::new(ConnectionState::Disconnected as u8),
            versions: RwLock::new(None),
            in_flight: AtomicUsize::new(0),
            connects: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            close_notify: Notify::new(),
        }
    }

    pub fn state(&self) -> ConnectionState {
        match self.state.load(Ordering::Acquire) {
            0 => ConnectionState::Disconnected,
            1 => ConnectionState::Connecting,
            2 => ConnectionState::Connected,
            _ => ConnectionState::Closed,
        }
    }

    fn set_state(&self, s: ConnectionState) {
        self.state.store(s as u8, Ordering::Release);
    }

    pub fn versions(&self) -> Option<Arc<ApiVersionsTable>> {
        self.versions.read().ok().and_then(|v| v.clone())
    }

    fn set_versions(&self, table: Arc<ApiVersionsTable>) {
        if let Ok(mut v) = self.versions.write() {
            *v = Some(table);
        }
    }
}

/// How a connected session ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Closed on purpose (handles gone, `close()`, runtime shutdown).
    Closed,
    /// Broke (or never finished its handshake); reconnect on demand after backoff.
    Broken,
}

/// The connection task. Runs on its worker until every handle is gone, the broker is
/// closed, or the runtime shuts down.
pub(crate) async fn run_connection<C: Connector>(
    shared: Arc<ConnectionShared>,
    config: Arc<ConnectionConfig>,
    mut rx: mpsc::Receiver<Command>,
    mut shutdown: watch::Receiver<bool>,
    seed: u64,
    broker: i32,
) {
    let metrics = Rc::new(BrokerMetrics::new(crate::metrics::broker_label(
        broker,
        &shared.addr,
    )));
    let mut backoff = Backoff::new(
        config.reconnect_backoff,
        config.reconnect_backoff_max,
        SplitMix64::new(seed),
    );
    let mut retry_at: Option<Instant> = None;
    loop {
        // Wait for demand: a request or an explicit connect.
        let command = tokio::select! {
            biased;
            _ = shutdown.changed() => None,
            _ = shared.close_notify.notified() => None,
            c = rx.recv() => c,
        };
        if *shutdown.borrow() || shared.closed.load(Ordering::Acquire) {
            if let Some(c) = command {
                fail_command(c, closing_error(&shared, &shutdown));
            }
            break;
        }
        let Some(command) = command else {
            break;
        };
        if let Some(at) = retry_at
            && Instant::now() < at
        {
            let err = IoError::NotConnected {
                addr: shared.addr.to_string(),
                retry_in: at - Instant::now(),
            };
            metrics.failed(err.kind());
            fail_command(command, err.clone());
            while let Ok(c) = rx.try_recv() {
                metrics.failed(err.kind());
                fail_command(c, err.clone());
            }
            continue;
        }
        shared.set_state(ConnectionState::Connecting);
        let setup_deadline = Instant::now() + config.connect_timeout;
        let connected =
            match security::start_for(&config.security, &shared.addr, config.connect_timeout).await
            {
                Ok(start) => connect::<C>(&shared.addr, &config)
                    .await
                    .map(|halves| (halves, start)),
                Err(e) => Err(e),
            };
        let session = match connected {
            Ok(((read, write), start)) => {
                let engine = Connection::start(
                    shared.addr.clone(),
                    config.clone(),
                    setup_deadline.into_std(),
                    start,
                );
                let session = Session::new(engine, shared.clone(), config.clone(), metrics.clone());
                session.accept(command);
                session.run::<C>(read, write, &mut rx, &mut shutdown).await
            }
            Err(err) => {
                tracing::debug!(addr = %shared.addr, error = %err, "connect failed");
                metrics.disconnects.increment(1);
                metrics.failed(err.kind());
                fail_command(command, err);
                (Outcome::Broken, false)
            }
        };
        shared.set_state(ConnectionState::Disconnected);
        shared.in_flight.store(0, Ordering::Relaxed);
        match session {
            (Outcome::Closed, _) => break,
            (Outcome::Broken, was_ready) => {
                if was_ready {
                    backoff.reset();
                }
                retry_at = Some(Instant::now() + backoff.next_delay());
            }
        }
    }
    // Closed: whatever is still queued fails.
    shared.set_state(ConnectionState::Closed);
    rx.close();
    let err = closing_error(&shared, &shutdown);
    while let Ok(c) = rx.try_recv() {
        fail_command(c, err.clone());
    }
    tracing::debug!(addr = %shared.addr, "connection task finished");
}

fn closing_error(shared: &ConnectionShared, shutdown: &watch::Receiver<bool>) -> IoError {
    if *shutdown.borrow() {
        IoError::ShuttingDown
    } else {
        IoError::Closed {
            addr: shared.addr.to_string(),
        }
    }
}

fn fail_command(c: Command, err: IoError) {
    match c {
        Command::Send(o) => {
            let _ = o.reply.send(Err(err));
        }
        Command::Connect(tx) => {
            let _ = tx.send(Err(err));
        }
    }
}

async fn resolve(addr: &str) -> Result<Vec<SocketAddr>, IoError> {
    let connect_err = |message: String| IoError::Connect {
        addr: addr.to_string(),
        message,
    };
    if let Ok(sa) = addr.parse::<SocketAddr>() {
        return Ok(vec![sa]);
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| connect_err(format!("resolving: {e}")))?
        .collect();
    if found.is_empty() {
        return Err(connect_err("resolved to no address".into()));
    }
    Ok(found)
}

/// Resolves and TCP-connects, trying each address in turn, within the connect timeout.
async fn connect<C: Connector>(
    addr: &str,
    config: &ConnectionConfig,
) -> Result<(C::Read, C::Write), IoError> {
    let attempt = async {
        let mut last = None;
        for a in resolve(addr).await? {
            match C::connect(a).await {
                Ok(halves) => return Ok(halves),
                Err(e) => last = Some(e),
            }
        }
        Err(IoError::Connect {
            addr: addr.to_string(),
            message: last.map_or("no address".into(), |e| e.to_string()),
        })
    };
    tokio::time::timeout(config.connect_timeout, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(IoError::ConnectTimedOut {
                addr: addr.to_string(),
                after: config.connect_timeout,
            })
        })
}

/// One connected socket's life: the engine, and what the driver keeps beside it.
struct Session {
    engine: RefCell<Connection<Reply>>,
    shared: Arc<ConnectionShared>,
    config: Arc<ConnectionConfig>,
    /// The engine asked for re-authentication (KIP-368); the run loop gets credentials.
    reauth_requested: std::cell::Cell<bool>,
    /// `connect()` callers waiting for the handshake.
    waiters: RefCell<Vec<oneshot::Sender<Result<(), IoError>>>>,
    /// The engine's end, once it came: (closed on purpose?).
    ended: RefCell<Option<Outcome>>,
    was_ready: std::cell::Cell<bool>,
    /// Wakes the writer loop: the reader changed the engine.
    wake: Notify,
    metrics: Rc<BrokerMetrics>,
}

impl Session {
    fn new(
        engine: Connection<Reply>,
        shared: Arc<ConnectionShared>,
        config: Arc<ConnectionConfig>,
        metrics: Rc<BrokerMetrics>,
    ) -> Self {
        Session {
            metrics,
            engine: RefCell::new(engine),
            shared,
            config,
            reauth_requested: std::cell::Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            ended: RefCell::new(None),
            was_ready: std::cell::Cell::new(false),
            wake: Notify::new(),
        }
    }

    fn now() -> std::time::Instant {
        Instant::now().into_std()
    }

    /// Hands a command to the engine.
    fn accept(&self, command: Command) {
        match command {
            Command::Send(o) => self
                .engine
                .borrow_mut()
                .send(o.request, o.reply, Self::now()),
            Command::Connect(tx) => {
                if self.engine.borrow().is_ready() {
                    let _ = tx.send(Ok(()));
                } else {
                    self.waiters.borrow_mut().push(tx);
                }
            }
        }
    }

    /// Delivers the engine's events: answers to their callers, state to the handles.
    fn dispatch(&self) {
        // Published before the answers go out, so a caller holding its answer sees it.
        let in_flight = self.engine.borrow().in_flight();
        self.shared.in_flight.store(in_flight, Ordering::Relaxed);
        self.metrics.in_flight.set(in_flight as f64);
        loop {
            let event = self.engine.borrow_mut().poll_event();
            let Some(event) = event else { break };
            match event {
                Event::Response(reply, result) => {
                    match &result {
                        Ok(raw) => self.metrics.answered(raw.api, raw.round_trip),
                        Err(e) => self.metrics.failed(e.kind()),
                    }
                    let _ = reply.send(result);
                }
                Event::Ready(versions) => {
                    self.metrics.connects.increment(1);
                    self.was_ready.set(true);
                    self.shared.connects.fetch_add(1, Ordering::Relaxed);
                    self.shared.set_versions(versions);
                    self.shared.set_state(ConnectionState::Connected);
                    tracing::debug!(addr = %self.shared.addr, "connected");
                    for w in self.waiters.borrow_mut().drain(..) {
                        let _ = w.send(Ok(()));
                    }
                }
                Event::Closed => {
                    *self.ended.borrow_mut() = Some(Outcome::Closed);
                }
                Event::ReauthenticationNeeded => self.reauth_requested.set(true),
                Event::Broken(error) => {
                    self.metrics.disconnects.increment(1);
                    if self.was_ready.get() {
                        tracing::info!(addr = %self.shared.addr, %error, "connection lost");
                    } else {
                        tracing::debug!(addr = %self.shared.addr, %error, "connection setup failed");
                    }
                    for w in self.waiters.borrow_mut().drain(..) {
                        let _ = w.send(Err(error.clone()));
                    }
                    *self.ended.borrow_mut() = Some(Outcome::Broken);
                }
            }
        }
    }

    fn ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// Runs the session until the engine ends. Returns how, and whether the handshake
    /// had succeeded (a broken ready connection resets the reconnect backoff).
    async fn run<C: Connector>(
        self,
        read: C::Read,
        mut write: C::Write,
        rx: &mut mpsc::Receiver<Command>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> (Outcome, bool) {
        let session = Rc::new(self);
        let closer = write.shutdown_handle();
        let reader = tokio::task::spawn_local(read_loop(read, session.clone()));
        let mut segments: Vec<Bytes> = Vec::new();
        let mut closing = false;
        let mut timer = LazyDeadline::new();
        loop {
            session.dispatch();
            if session.ended() {
                break;
            }
            if session.reauth_requested.replace(false) {
                tokio::task::spawn_local(reauthenticate(session.clone()));
            }
            if session.engine.borrow_mut().poll_transmit(&mut segments) {
                if !session
                    .write(&mut write, &mut segments, &closer, &mut timer)
                    .await
                {
                    break;
                }
                continue;
            }
            let accepting = {
                let engine = session.engine.borrow();
                timer.aim(engine.poll_timeout());
                engine.can_accept()
            };
            tokio::select! {
                biased;
                _ = session.wake.notified() => {}
                _ = shutdown.changed(), if !closing => {
                    closing = true;
                    session.close(rx, IoError::ShuttingDown);
                }
                _ = session.shared.close_notify.notified(), if !closing => {
                    closing = true;
                    let error = IoError::Closed { addr: session.shared.addr.to_string() };
                    session.close(rx, error);
                }
                command = rx.recv(), if accepting => match command {
                    Some(c) => session.accept_batch(c, rx),
                    None => {
                        closing = true;
                        let error = IoError::Closed { addr: session.shared.addr.to_string() };
                        session.close(rx, error);
                    }
                },
                _ = timer.fired() => {
                    session.engine.borrow_mut().handle_timeout(Self::now());
                }
            }
        }
        // Shut down, so the reader's pending read ends; a readiness backend's read half
        // does not see the shutdown of the write half, but may be dropped.
        write.close();
        closer.shutdown();
        if <C::Write as TransportWrite>::DROP_SAFE {
            reader.abort();
        }
        let _ = reader.await;
        session.dispatch();
        let outcome = session.ended.borrow_mut().take().unwrap_or(Outcome::Broken);
        (outcome, session.was_ready.get())
    }

    /// This command and every other already queued, while the engine takes them: all
    /// go out in this turn's one write.
    fn accept_batch(&self, first: Command, rx: &mut mpsc::Receiver<Command>) {
        self.accept(first);
        while self.engine.borrow().can_accept() {
            match rx.try_recv() {
                Ok(c) => self.accept(c),
                Err(_) => break,
            }
        }
    }

    /// Closes on purpose: the engine drains what is in flight; queued commands fail.
    fn close(&self, rx: &mut mpsc::Receiver<Command>, error: IoError) {
        self.engine.borrow_mut().close(error.clone(), Self::now());
        rx.close();
        while let Ok(c) = rx.try_recv() {
            fail_command(c, error.clone());
        }
        for w in self.waiters.borrow_mut().drain(..) {
            let _ = w.send(Err(error.clone()));
        }
    }

    /// Writes `segments` (emptied on return); false if the session ended meanwhile (the
    /// write is then dropped where that is safe, or ended by shutting the socket down
    /// through `closer` and awaited).
    async fn write<W: TransportWrite>(
        &self,
        write: &mut W,
        segments: &mut Vec<Bytes>,
        closer: &W::Shutdown,
        timer: &mut LazyDeadline,
    ) -> bool {
        let bytes: usize = segments.iter().map(Bytes::len).sum();
        self.metrics.sent_bytes.increment(bytes as u64);
        let pending = write.write_all(std::mem::take(segments));
        tokio::pin!(pending);
        loop {
            timer.aim(self.engine.borrow().poll_timeout());
            tokio::select! {
                biased;
                (result, returned) = &mut pending => {
                    *segments = returned;
                    segments.clear();
                    let mut engine = self.engine.borrow_mut();
                    match result {
                        Ok(()) => engine.handle_transmitted(Self::now()),
                        Err(e) => engine.handle_io_error(&e, Self::now()),
                    }
                    return true;
                }
                _ = self.wake.notified() => {
                    self.dispatch();
                }
                _ = timer.fired() => {
                    self.engine.borrow_mut().handle_timeout(Self::now());
                    self.dispatch();
                }
            }
            if self.ended() {
                if !W::DROP_SAFE {
                    closer.shutdown();
                    let _ = pending.await;
                }
                return false;
            }
        }
    }
}

/// Obtains fresh credentials for a KIP-368 re-authentication and hands them to the
/// engine. If that fails, the broker closes the connection when the session expires and
/// the next request reconnects (authenticating afresh).
async fn reauthenticate(session: Rc<Session>) {
    let config = &session.config;
    match security::start_for(
        &config.security,
        &session.shared.addr,
        config.request_timeout,
    )
    .await
    {
        Ok(start) => {
            let mut engine = session.engine.borrow_mut();
            match start.credentials {
                Some(credentials) => {
                    engine.reauthenticate(credentials, start.nonce, Session::now())
                }
                None => engine.reauthentication_failed(Session::now()),
            }
            drop(engine);
            session.wake.notify_one();
        }
        Err(error) => {
            tracing::warn!(addr = %session.shared.addr, %error, "re-authentication: no credentials");
            session
                .engine
                .borrow_mut()
                .reauthentication_failed(Session::now());
            session.wake.notify_one();
        }
    }
}

/// The read side: reads into the engine's buffer and feeds what arrives back to it.
async fn read_loop<R: TransportRead>(mut read: R, session: Rc<Session>) {
    loop {
        let (buf, threshold) = {
            let mut engine = session.engine.borrow_mut();
            (engine.lend_read_buffer(), engine.read_wake_threshold())
        };
        read.set_wake_threshold(threshold);
        let (result, buf) = read.read(buf).await;
        let now = Session::now();
        {
            let mut engine = session.engine.borrow_mut();
            engine.handle_read(buf, now);
            match result {
                Ok(0) => engine.handle_eof(now),
                Ok(n) => session.metrics.received_bytes.increment(n as u64),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => engine.handle_io_error(&e, now),
            }
        }
        session.dispatch();
        session.wake.notify_one();
        if session.ended() || session.engine.borrow().is_done() {
            break;
        }
    }
}
