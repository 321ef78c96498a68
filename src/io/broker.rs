//! `Broker`: a handle to one broker connection owned by a worker (Sarama's Broker).
//!
//! The handle is `Send + Sync` and cheap to clone; every clone talks to the same
//! connection. Requests are typed (`send::<MetadataRequest>` answers a
//! `MetadataResponse`), encoded on the worker at the version negotiated with the broker,
//! and their responses decoded on the caller's thread, so decoding work spreads over the
//! callers instead of the worker. Calls work from any async runtime (they await tokio
//! channels, which need no particular executor) and from plain threads
//! (`send_blocking`).
//!
//! ```no_run
//! use kring::protocol::messages::MetadataRequest;
//! use kring::{Client, Config};
//!
//! let client = Client::connect_blocking(Config::new(["127.0.0.1:9092"]))?;
//! let broker = client.any_broker()?;
//! let metadata = broker.send_blocking(MetadataRequest::default().with_topics(None))?;
//! println!("{} brokers", metadata.brokers.len());
//! # Ok::<(), kring::Error>(())
//! ```

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot, watch};

use crate::engine::error::IoError;
use crate::io::backend::Backend;
use crate::io::connection::{
    self, Command, ConnectionConfig, ConnectionShared, ConnectionState, EncodeRequest, Outbound,
    RawResponse, TypedRequest,
};
use crate::io::epoll::EpollConnector;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
use crate::io::uring::UringConnector;
use crate::protocol::negotiation::ApiVersionsTable;
use crate::protocol::{Request, decode_response_body};
use crate::runtime::Runtime;

/// A connection to one broker, owned by a worker of a [`Runtime`].
#[derive(Clone)]
pub struct Broker {
    inner: Arc<BrokerInner>,
}

struct BrokerInner {
    id: i32,
    shared: Arc<ConnectionShared>,
    tx: mpsc::Sender<Command>,
    /// Keeps the workers running while a handle to one of their connections exists.
    runtime: Runtime,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("id", &self.inner.id)
            .field("addr", &self.inner.shared.addr)
            .field("state", &self.inner.shared.state())
            .finish()
    }
}

/// A response not yet arrived; resolve it with `.await` or [`PendingResponse::wait`].
#[derive(Debug)]
pub struct PendingResponse<R: Request> {
    rx: oneshot::Receiver<Result<RawResponse, IoError>>,
    addr: Arc<str>,
    /// The request's span: open from queueing to the answer (or to being dropped).
    span: tracing::Span,
    _request: std::marker::PhantomData<fn() -> R>,
}

impl<R: Request> PendingResponse<R> {
    fn finish(
        received: Result<Result<RawResponse, IoError>, oneshot::error::RecvError>,
        addr: &str,
        span: &tracing::Span,
    ) -> Result<R::Response, IoError> {
        let raw = received.map_err(|_| IoError::ShuttingDown)??;
        record_answer(span, &raw);
        if raw.body.is_empty() && raw.api == crate::protocol::ApiKey::Produce {
            // acks=0: the broker sends nothing back.
            return Ok(R::Response::default());
        }
        decode_response_body::<R::Response>(raw.body, raw.version).map_err(|source| {
            IoError::Decode {
                api: raw.api,
                addr: addr.to_string(),
                source,
            }
        })
    }

    /// Blocks this thread until the response arrives. Must not be called from within an
    /// async runtime.
    pub fn wait(self) -> Result<R::Response, IoError> {
        Self::finish(self.rx.blocking_recv(), &self.addr, &self.span)
    }
}

impl<R: Request> std::future::Future for PendingResponse<R> {
    type Output = Result<R::Response, IoError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let (addr, span) = (self.addr.clone(), self.span.clone());
        std::pin::Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| Self::finish(r, &addr, &span))
    }
}

/// A span for one request to broker `broker` (debug level: one per request).
fn request_span(api: crate::protocol::ApiKey, broker: i32) -> tracing::Span {
    tracing::debug_span!(
        "kring_request",
        api = api.name(),
        broker,
        version = tracing::field::Empty,
        correlation_id = tracing::field::Empty,
    )
}

/// What the answer says of the request, recorded on its span.
fn record_answer(span: &tracing::Span, raw: &RawResponse) {
    if !span.is_disabled() {
        span.record("version", raw.version);
        span.record("correlation_id", raw.correlation_id);
    }
}

/// The connection task on the backend its worker runs.
async fn connection_task(
    backend: Backend,
    shared: Arc<ConnectionShared>,
    config: Arc<ConnectionConfig>,
    rx: mpsc::Receiver<Command>,
    shutdown: watch::Receiver<bool>,
    seed: u64,
    id: i32,
) {
    match backend {
        #[cfg(all(target_os = "linux", feature = "io-uring"))]
        Backend::IoUring => {
            connection::run_connection::<UringConnector>(shared, config, rx, shutdown, seed, id)
                .await
        }
        Backend::Epoll => {
            connection::run_connection::<EpollConnector>(shared, config, rx, shutdown, seed, id)
                .await
        }
    }
}

impl Broker {
    /// Opens a broker handle: starts its connection task on the worker that owns broker
    /// `id` (`-1` for a bootstrap address with no id yet). The TCP connection is made on
    /// the first request, or by [`Broker::connect`].
    pub fn open(
        runtime: &Runtime,
        id: i32,
        addr: impl Into<String>,
        config: ConnectionConfig,
    ) -> Result<Broker, IoError> {
        let addr = addr.into();
        let shared = Arc::new(ConnectionShared::new(&addr));
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let config = Arc::new(config);
        let shutdown = runtime.shutdown_signal();
        let task_shared = shared.clone();
        let seed = seed_for(&addr, id);
        // Every event of the connection's task (connects, losses, re-authentication)
        // carries the broker it is about.
        let span = tracing::info_span!("kring_connection", broker = id, addr = %addr);
        runtime.spawn_on(runtime.worker_for(id), move |backend| {
            tracing::Instrument::instrument(
                connection_task(backend, task_shared, config, rx, shutdown, seed, id),
                span,
            )
        })?;
        Ok(Broker {
            inner: Arc::new(BrokerInner {
                id,
                shared,
                tx,
                runtime: runtime.clone(),
            }),
        })
    }

    /// The broker id given at open.
    pub fn id(&self) -> i32 {
        self.inner.id
    }

    /// The runtime whose worker owns the connection (the worker `worker_for(id)`).
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.inner.shared.addr
    }

    /// The connection's state.
    pub fn state(&self) -> ConnectionState {
        self.inner.shared.state()
    }

    /// Whether the connection is up and has finished its handshake.
    pub fn connected(&self) -> bool {
        self.state() == ConnectionState::Connected
    }

    /// How many times the connection has been (re)established.
    pub fn connect_count(&self) -> u64 {
        self.inner.shared.connects.load(Ordering::Relaxed)
    }

    /// Requests written and awaiting their response right now.
    pub fn in_flight(&self) -> usize {
        self.inner.shared.in_flight.load(Ordering::Relaxed)
    }

    /// The versions negotiated on the current (or last) connection.
    pub fn api_versions(&self) -> Option<Arc<ApiVersionsTable>> {
        self.inner.shared.versions()
    }

    /// Connects now (if not connected) and waits for the handshake.
    pub async fn connect(&self) -> Result<(), IoError> {
        let (tx, rx) = oneshot::channel();
        self.check_open()?;
        self.inner
            .tx
            .send(Command::Connect(tx))
            .await
            .map_err(|_| self.closed())?;
        rx.await.map_err(|_| IoError::ShuttingDown)?
    }

    /// [`Broker::connect`] for plain threads.
    pub fn connect_blocking(&self) -> Result<(), IoError> {
        let (tx, rx) = oneshot::channel();
        self.check_open()?;
        self.inner
            .tx
            .blocking_send(Command::Connect(tx))
            .map_err(|_| self.closed())?;
        rx.blocking_recv().map_err(|_| IoError::ShuttingDown)?
    }

    /// Closes the connection: requests in flight get their answers (up to the drain
    /// timeout), queued and later ones fail with `Closed`.
    pub fn close(&self) {
        self.inner.shared.closed.store(true, Ordering::Release);
        self.inner.shared.close_notify.notify_one();
    }

    fn closed(&self) -> IoError {
        IoError::Closed {
            addr: self.addr().to_string(),
        }
    }

    fn check_open(&self) -> Result<(), IoError> {
        if self.inner.shared.closed.load(Ordering::Acquire) {
            Err(self.closed())
        } else {
            Ok(())
        }
    }

    fn outbound<R: Request + Send + 'static>(
        &self,
        request: R,
        version: Option<i16>,
    ) -> (Command, PendingResponse<R>) {
        self.outbound_with_timeout(request, version, None)
    }

    fn outbound_with_timeout<R: Request + Send + 'static>(
        &self,
        request: R,
        version: Option<i16>,
        timeout: Option<std::time::Duration>,
    ) -> (Command, PendingResponse<R>) {
        let (tx, rx) = oneshot::channel();
        let typed = TypedRequest {
            request,
            version,
            addr: self.inner.shared.addr.clone(),
            timeout,
        };
        (
            Command::Send(Outbound {
                request: Box::new(typed),
                reply: tx,
            }),
            PendingResponse {
                rx,
                addr: self.inner.shared.addr.clone(),
                span: request_span(R::API_KEY, self.inner.id),
                _request: std::marker::PhantomData,
            },
        )
    }

    /// Queues `request` (waiting for queue room if needed) and returns its pending
    /// response; the version is the highest both sides support.
    pub async fn enqueue<R: Request + Send + 'static>(
        &self,
        request: R,
        version: Option<i16>,
    ) -> Result<PendingResponse<R>, IoError> {
        self.check_open()?;
        let (command, pending) = self.outbound(request, version);
        self.inner
            .tx
            .send(command)
            .await
            .map_err(|_| self.closed())?;
        Ok(pending)
    }

    /// Sends `request` at the negotiated version and waits for its response.
    pub async fn send<R: Request + Send + 'static>(
        &self,
        request: R,
    ) -> Result<R::Response, IoError> {
        self.enqueue(request, None).await?.await
    }

    /// Sends `request` at the negotiated version, its response allowed `timeout`
    /// instead of the connection's request timeout (a JoinGroup waits for the group).
    pub async fn send_with_timeout<R: Request + Send + 'static>(
        &self,
        request: R,
        timeout: std::time::Duration,
    ) -> Result<R::Response, IoError> {
        self.check_open()?;
        let (command, pending) = self.outbound_with_timeout(request, None, Some(timeout));
        self.inner
            .tx
            .send(command)
            .await
            .map_err(|_| self.closed())?;
        pending.await
    }

    /// Sends `request` at an explicit version.
    pub async fn send_version<R: Request + Send + 'static>(
        &self,
        request: R,
        version: i16,
    ) -> Result<R::Response, IoError> {
        self.enqueue(request, Some(version)).await?.await
    }

    /// Queues `request` without ever waiting: a full queue is [`IoError::QueueFull`].
    pub fn try_send<R: Request + Send + 'static>(
        &self,
        request: R,
    ) -> Result<PendingResponse<R>, IoError> {
        self.check_open()?;
        let (command, pending) = self.outbound(request, None);
        self.inner.tx.try_send(command).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => IoError::QueueFull {
                addr: self.addr().to_string(),
            },
            mpsc::error::TrySendError::Closed(_) => self.closed(),
        })?;
        Ok(pending)
    }

    /// Sends `request` and blocks this thread for the response. Must not be called from
    /// within an async runtime.
    pub fn send_blocking<R: Request + Send + 'static>(
        &self,
        request: R,
    ) -> Result<R::Response, IoError> {
        self.check_open()?;
        let (command, pending) = self.outbound(request, None);
        self.inner
            .tx
            .blocking_send(command)
            .map_err(|_| self.closed())?;
        pending.wait()
    }

    /// Sends a request with a hand-written encoder (for hot paths that gather pre-encoded
    /// buffers, like Produce) and returns the raw response body.
    pub(crate) async fn send_raw(
        &self,
        request: Box<dyn EncodeRequest>,
    ) -> Result<RawResponse, IoError> {
        self.check_open()?;
        let span = request_span(request.api_key(), self.inner.id);
        let (tx, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Command::Send(Outbound { request, reply: tx }))
            .await
            .map_err(|_| self.closed())?;
        let raw = rx.await.map_err(|_| IoError::ShuttingDown)??;
        record_answer(&span, &raw);
        Ok(raw)
    }
}

/// Per-connection jitter seed: distinct per broker and per process, reproducible for
/// a given address and id within one process start.
fn seed_for(addr: &str, id: i32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ std::process::id() as u64;
    for b in addr.bytes().chain(id.to_be_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
