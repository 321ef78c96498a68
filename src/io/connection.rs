//! One broker connection, driven by a task on the worker that owns it: framing,
//! correlation ids, pipelining, batching, timeouts, the ApiVersions handshake and
//! reconnection with backoff.
//!
//! Invariants:
//! - Responses on a connection come back in request order (Kafka guarantees it), so the
//!   in-flight requests are a FIFO and each response must carry the correlation id of the
//!   oldest one; anything else breaks the connection.
//! - Every request queued to the connection during one loop turn goes out in a single
//!   vectored write, up to `max_in_flight` requests awaiting responses.
//! - A frame's length is checked against `max_response_size` before any buffer is sized
//!   for it. Frames are split off the read buffer without copying (`BytesMut::split_to`);
//!   when every frame cut from a buffer has been dropped, the buffer's memory is reused.
//! - When the connection breaks, every request in flight on it fails with a retriable
//!   `Disconnected`; the connection is re-established on the next request, after an
//!   exponential backoff with jitter.
//! - A request that times out fails, and the connection is closed: a pipelined
//!   connection cannot skip an answer that may still come.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::io::backoff::{Backoff, SplitMix64};
use crate::io::error::IoError;
use crate::io::transport::{Connector, TransportRead, TransportWrite};
use crate::protocol::negotiation::{self, ApiVersionsTable};
use crate::protocol::{
    self, ApiKey, Decode, DecodeError, KafkaCode, Request, ResponseHeader,
    messages::{ApiVersionsRequest, ProduceRequest},
};

/// Settings of a broker connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// The request header's client id (Java's `client.id`).
    pub client_id: String,
    /// Sent in ApiVersions v3+ (KIP-511) so brokers can tell clients apart.
    pub client_software_name: String,
    /// Sent in ApiVersions v3+ (KIP-511).
    pub client_software_version: String,
    /// How long a TCP connect plus handshake may take (Java's
    /// `socket.connection.setup.timeout.ms`, 10 s).
    pub connect_timeout: Duration,
    /// How long a response may take (Java's `request.timeout.ms`, 30 s).
    pub request_timeout: Duration,
    /// Requests awaiting a response per connection (Java's
    /// `max.in.flight.requests.per.connection`, 5).
    pub max_in_flight: usize,
    /// The largest response frame accepted (librdkafka's `receive.message.max.bytes`, 100 MiB).
    pub max_response_size: usize,
    /// First reconnect delay (Java's `reconnect.backoff.ms`, 50 ms).
    pub reconnect_backoff: Duration,
    /// Reconnect delay cap (Java's `reconnect.backoff.max.ms`, 1 s).
    pub reconnect_backoff_max: Duration,
    /// Requests that may wait in a connection's queue before senders wait.
    pub queue_capacity: usize,
    /// Size of each read buffer chunk; responses larger than it get a buffer of their own size.
    pub read_chunk_size: usize,
    /// How long a closing connection waits for in-flight responses before giving up.
    pub drain_timeout: Duration,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: "kring".into(),
            client_software_name: "kring".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_in_flight: 5,
            max_response_size: 100 * 1024 * 1024,
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            queue_capacity: 1024,
            read_chunk_size: 64 * 1024,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// A response body as read off the wire: the frame after the response header.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The API.
    pub api: ApiKey,
    /// The version the request was sent at (the response has the same version).
    pub version: i16,
    /// The body; empty for requests that expect no response (acks=0 produce).
    pub body: Bytes,
}

/// What a request encoder reports about the frame it wrote.
#[derive(Debug, Clone, Copy)]
pub struct Encoded {
    /// The version it was encoded at.
    pub version: i16,
    /// Whether the broker will answer (false only for acks=0 produce).
    pub expects_response: bool,
}

/// Encodes one request frame once the connection knows the broker's versions. It runs
/// on the worker, so it must be cheap: hot-path encoders push pre-encoded buffers (record
/// batches) as segments of their own instead of copying them.
pub trait EncodeRequest: Send + 'static {
    /// The API of the request.
    fn api_key(&self) -> ApiKey;

    /// Appends the whole frame (size prefix, header with `correlation_id`, body) to
    /// `out` as one or more segments. On error nothing may have been appended.
    fn encode(
        &self,
        versions: &ApiVersionsTable,
        correlation_id: i32,
        client_id: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<Encoded, IoError>;
}

/// A typed request, encoded at the negotiated version or an explicit one.
#[derive(Debug)]
pub struct TypedRequest<R> {
    /// The request.
    pub request: R,
    /// An explicit version; `None` negotiates.
    pub version: Option<i16>,
    /// The broker's address, for error messages.
    pub addr: Arc<str>,
}

impl<R: Request + Send + 'static> EncodeRequest for TypedRequest<R> {
    fn api_key(&self) -> ApiKey {
        R::API_KEY
    }

    fn encode(
        &self,
        versions: &ApiVersionsTable,
        correlation_id: i32,
        client_id: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<Encoded, IoError> {
        let version = match self.version {
            Some(v) => v,
            None => versions
                .version_for(R::API_KEY)
                .ok_or_else(|| IoError::UnsupportedApi {
                    api: R::API_KEY,
                    addr: self.addr.to_string(),
                })?,
        };
        let mut buf = BytesMut::with_capacity(128);
        protocol::encode_request_frame(
            &mut buf,
            &self.request,
            version,
            correlation_id,
            Some(client_id),
        )
        .map_err(|source| IoError::Encode {
            api: R::API_KEY,
            source,
        })?;
        out.push(buf.freeze());
        Ok(Encoded {
            version,
            expects_response: expects_response(&self.request),
        })
    }
}

/// Only a Produce request with acks=0 goes unanswered.
fn expects_response<R: Request + 'static>(request: &R) -> bool {
    (request as &dyn std::any::Any)
        .downcast_ref::<ProduceRequest>()
        .is_none_or(|p| p.acks != 0)
}

/// Where a request's outcome goes.
type Reply = oneshot::Sender<Result<RawResponse, IoError>>;

/// A request on its way to a connection.
pub(crate) struct Outbound {
    pub request: Box<dyn EncodeRequest>,
    pub reply: oneshot::Sender<Result<RawResponse, IoError>>,
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

/// Why reading a frame stopped.
#[derive(Debug)]
enum FrameError {
    Io(std::io::Error),
    Eof { partial: usize },
    Malformed(DecodeError),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "read failed: {e}"),
            FrameError::Eof { partial: 0 } => f.write_str("closed by the broker"),
            FrameError::Eof { partial } => {
                write!(
                    f,
                    "closed by the broker mid-response ({partial} bytes unread)"
                )
            }
            FrameError::Malformed(e) => write!(f, "malformed frame: {e}"),
        }
    }
}

/// Cuts size-prefixed frames out of what the transport reads.
struct FrameReader<R> {
    read: R,
    buf: BytesMut,
    max_frame: usize,
    chunk: usize,
}

impl<R: TransportRead> FrameReader<R> {
    fn new(read: R, max_frame: usize, chunk: usize) -> Self {
        FrameReader {
            read,
            buf: BytesMut::new(),
            max_frame,
            chunk: chunk.max(protocol::FRAME_PREFIX),
        }
    }

    /// The next frame, after its size prefix.
    async fn next_frame(&mut self) -> Result<Bytes, FrameError> {
        loop {
            let wanted = match protocol::frame_length(&self.buf, self.max_frame)
                .map_err(FrameError::Malformed)?
            {
                Some(len) => {
                    let total = protocol::FRAME_PREFIX + len;
                    if self.buf.len() >= total {
                        let mut frame = self.buf.split_to(total);
                        frame.advance(protocol::FRAME_PREFIX);
                        return Ok(frame.freeze());
                    }
                    // Room for the whole frame at once, so it is read straight into
                    // its final place; only the bytes already read move, if any.
                    total
                }
                None => protocol::FRAME_PREFIX,
            };
            let spare = self.buf.capacity() - self.buf.len();
            if self.buf.capacity() < wanted || spare == 0 {
                self.buf.reserve((wanted - self.buf.len()).max(self.chunk));
            }
            let buf = std::mem::take(&mut self.buf);
            let (result, buf) = self.read.read(buf).await;
            self.buf = buf;
            match result {
                Ok(0) => {
                    return Err(FrameError::Eof {
                        partial: self.buf.len(),
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FrameError::Io(e)),
            }
        }
    }
}

struct InFlight {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    deadline: Instant,
    reply: oneshot::Sender<Result<RawResponse, IoError>>,
}

struct Established<C: Connector> {
    reader: FrameReader<C::Read>,
    write: C::Write,
    versions: Arc<ApiVersionsTable>,
}

enum Outcome {
    /// Closed on purpose (handles gone, `close()`, runtime shutdown).
    Closed,
    /// Broke; reconnect on demand after backoff.
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
) {
    let mut backoff = Backoff::new(
        config.reconnect_backoff,
        config.reconnect_backoff_max,
        SplitMix64::new(seed),
    );
    let mut retry_at: Option<Instant> = None;
    'demand: loop {
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
            break 'demand;
        }
        let Some(command) = command else {
            break 'demand;
        };
        let mut pending = VecDeque::new();
        let mut waiters = Vec::new();
        let mut push = |c: Command| match c {
            Command::Send(o) => pending.push_back(o),
            Command::Connect(tx) => waiters.push(tx),
        };
        push(command);
        while let Ok(c) = rx.try_recv() {
            push(c);
        }

        let now = Instant::now();
        if let Some(at) = retry_at
            && now < at
        {
            let err = IoError::NotConnected {
                addr: shared.addr.to_string(),
                retry_in: at - now,
            };
            fail_all(pending, waiters, &err);
            continue 'demand;
        }

        shared.set_state(ConnectionState::Connecting);
        let established = tokio::time::timeout(
            config.connect_timeout,
            connect_and_handshake::<C>(&shared, &config),
        )
        .await
        .unwrap_or_else(|_| {
            Err(IoError::ConnectTimedOut {
                addr: shared.addr.to_string(),
                after: config.connect_timeout,
            })
        });
        let established = match established {
            Ok(e) => e,
            Err(err) => {
                shared.set_state(ConnectionState::Disconnected);
                let delay = backoff.next_delay();
                tracing::debug!(addr = %shared.addr, error = %err, ?delay, "connect failed");
                retry_at = Some(Instant::now() + delay);
                fail_all(pending, waiters, &err);
                continue 'demand;
            }
        };
        backoff.reset();
        shared.connects.fetch_add(1, Ordering::Relaxed);
        shared.set_versions(established.versions.clone());
        shared.set_state(ConnectionState::Connected);
        tracing::debug!(addr = %shared.addr, "connected");
        for w in waiters {
            let _ = w.send(Ok(()));
        }
        let outcome = run_connected::<C>(
            established,
            &shared,
            &config,
            &mut rx,
            pending,
            &mut shutdown,
        )
        .await;
        shared.set_state(ConnectionState::Disconnected);
        shared.in_flight.store(0, Ordering::Relaxed);
        match outcome {
            Outcome::Closed => break 'demand,
            Outcome::Broken => {
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

fn fail_all(
    pending: VecDeque<Outbound>,
    waiters: Vec<oneshot::Sender<Result<(), IoError>>>,
    err: &IoError,
) {
    for o in pending {
        let _ = o.reply.send(Err(err.clone()));
    }
    for w in waiters {
        let _ = w.send(Err(err.clone()));
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

async fn connect_and_handshake<C: Connector>(
    shared: &ConnectionShared,
    config: &ConnectionConfig,
) -> Result<Established<C>, IoError> {
    let addrs = resolve(&shared.addr).await?;
    let mut last = None;
    let mut halves = None;
    for a in addrs {
        match C::connect(a).await {
            Ok(h) => {
                halves = Some(h);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let (read, mut write) = halves.ok_or_else(|| IoError::Connect {
        addr: shared.addr.to_string(),
        message: last.map_or("no address".into(), |e| e.to_string()),
    })?;
    let mut reader = FrameReader::new(read, config.max_response_size, config.read_chunk_size);
    let versions = handshake(&mut reader, &mut write, shared, config).await?;
    Ok(Established {
        reader,
        write,
        versions: Arc::new(versions),
    })
}

/// ApiVersions at our newest version; on UNSUPPORTED_VERSION, again at the version the
/// broker says it supports (KIP-511).
async fn handshake<R: TransportRead, W: TransportWrite>(
    reader: &mut FrameReader<R>,
    write: &mut W,
    shared: &ConnectionShared,
    config: &ConnectionConfig,
) -> Result<ApiVersionsTable, IoError> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(config.client_software_name.clone())
        .with_client_software_version(config.client_software_version.clone());
    let mut version = ApiKey::ApiVersions.max_stable_version();
    let addr = || shared.addr.to_string();
    let disconnected = |reason: String| IoError::Disconnected {
        addr: addr(),
        reason,
    };
    for correlation_id in 0..2 {
        let mut buf = BytesMut::new();
        protocol::encode_request_frame(
            &mut buf,
            &request,
            version,
            correlation_id,
            Some(&config.client_id),
        )
        .map_err(|source| IoError::Encode {
            api: ApiKey::ApiVersions,
            source,
        })?;
        let (result, _) = write.write_all(vec![buf.freeze()]).await;
        result.map_err(|e| disconnected(format!("write: {e}")))?;
        let mut frame = reader
            .next_frame()
            .await
            .map_err(|e| disconnected(e.to_string()))?;
        let decode_err = |source| IoError::Decode {
            api: ApiKey::ApiVersions,
            addr: addr(),
            source,
        };
        let header = ResponseHeader::decode(&mut frame, 0).map_err(decode_err)?;
        if header.correlation_id != correlation_id {
            return Err(disconnected(format!(
                "correlation id {} in answer to {correlation_id}",
                header.correlation_id
            )));
        }
        let response =
            negotiation::decode_api_versions_response(frame, version).map_err(decode_err)?;
        let code = KafkaCode(response.error_code);
        if code.is_ok() {
            return Ok(ApiVersionsTable::from_response(&response));
        }
        match negotiation::api_versions_fallback(&response) {
            Some(v) if v < version => version = v,
            _ => {
                return Err(IoError::Handshake { addr: addr(), code });
            }
        }
    }
    Err(IoError::Handshake {
        addr: addr(),
        code: KafkaCode::UNSUPPORTED_VERSION,
    })
}

/// Shared between the writer loop and the reader task of one connected socket.
struct Live {
    in_flight: RefCell<VecDeque<InFlight>>,
    /// Signalled when a response frees a slot or the reader stops.
    wake: Notify,
    broken: RefCell<Option<String>>,
}

async fn reader_loop<R: TransportRead>(
    mut reader: FrameReader<R>,
    live: Rc<Live>,
    shared: Arc<ConnectionShared>,
) {
    let addr = shared.addr.clone();
    let reason = loop {
        let mut frame = match reader.next_frame().await {
            Ok(f) => f,
            Err(e) => break e.to_string(),
        };
        let Some(entry) = live.in_flight.borrow_mut().pop_front() else {
            break "a response arrived with no request in flight".to_string();
        };
        shared
            .in_flight
            .store(live.in_flight.borrow().len(), Ordering::Relaxed);
        let header_version = entry.api.response_header_version(entry.version);
        match ResponseHeader::decode(&mut frame, header_version) {
            Err(source) => {
                let _ = entry.reply.send(Err(IoError::Decode {
                    api: entry.api,
                    addr: addr.to_string(),
                    source,
                }));
                break "malformed response header".to_string();
            }
            Ok(h) if h.correlation_id != entry.correlation_id => {
                let reason = format!(
                    "correlation id {} where {} was expected",
                    h.correlation_id, entry.correlation_id
                );
                let _ = entry.reply.send(Err(IoError::Disconnected {
                    addr: addr.to_string(),
                    reason: reason.clone(),
                }));
                break reason;
            }
            Ok(_) => {
                let _ = entry.reply.send(Ok(RawResponse {
                    api: entry.api,
                    version: entry.version,
                    body: frame,
                }));
                live.wake.notify_one();
            }
        }
    };
    *live.broken.borrow_mut() = Some(reason);
    live.wake.notify_one();
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn run_connected<C: Connector>(
    established: Established<C>,
    shared: &Arc<ConnectionShared>,
    config: &ConnectionConfig,
    rx: &mut mpsc::Receiver<Command>,
    pending: VecDeque<Outbound>,
    shutdown: &mut watch::Receiver<bool>,
) -> Outcome {
    let Established {
        reader,
        mut write,
        versions,
    } = established;
    let live = Rc::new(Live {
        in_flight: RefCell::new(VecDeque::new()),
        wake: Notify::new(),
        broken: RefCell::new(None),
    });
    let reader_task = tokio::task::spawn_local(reader_loop(reader, live.clone(), shared.clone()));
    let max_in_flight = config.max_in_flight.max(1);
    let mut batch: VecDeque<Outbound> = pending;
    let mut segments: Vec<Bytes> = Vec::new();
    let mut no_response: Vec<(Reply, ApiKey, i16)> = Vec::new();
    let mut correlation_id: i32 = 2;
    let mut closing_deadline: Option<Instant> = None;
    let mut closed_on_purpose = false;

    let (outcome, reason) = loop {
        if let Some(reason) = live.broken.borrow().clone() {
            break (Outcome::Broken, reason);
        }
        let now = Instant::now();
        let front_deadline = live.in_flight.borrow().front().map(|f| f.deadline);
        if front_deadline.is_some_and(|d| d <= now) {
            let entry = live
                .in_flight
                .borrow_mut()
                .pop_front()
                .expect("front exists");
            let _ = entry.reply.send(Err(IoError::RequestTimedOut {
                api: entry.api,
                addr: shared.addr.to_string(),
                after: config.request_timeout,
            }));
            break (
                Outcome::Broken,
                format!("{:?} request timed out", entry.api),
            );
        }
        if let Some(d) = closing_deadline {
            if batch.is_empty() && live.in_flight.borrow().is_empty() {
                break (Outcome::Closed, "closed".into());
            }
            if now >= d {
                break (
                    Outcome::Closed,
                    "closed before every response arrived".into(),
                );
            }
        }
        let room = max_in_flight.saturating_sub(live.in_flight.borrow().len());
        let next_deadline = match (front_deadline, closing_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if batch.is_empty() || room == 0 {
            let accepting = closing_deadline.is_none() && room > 0;
            tokio::select! {
                biased;
                _ = live.wake.notified() => {}
                _ = shutdown.changed(), if closing_deadline.is_none() => {
                    closing_deadline = Some(Instant::now() + config.drain_timeout);
                    closed_on_purpose = true;
                }
                _ = shared.close_notify.notified(), if closing_deadline.is_none() => {
                    closing_deadline = Some(Instant::now() + config.drain_timeout);
                    closed_on_purpose = true;
                }
                command = rx.recv(), if accepting => match command {
                    Some(Command::Send(o)) => batch.push_back(o),
                    Some(Command::Connect(tx)) => { let _ = tx.send(Ok(())); }
                    None => {
                        closing_deadline = Some(Instant::now() + config.drain_timeout);
                        closed_on_purpose = true;
                    }
                },
                _ = sleep_until_opt(next_deadline) => {}
            }
            if closing_deadline.is_some() && closed_on_purpose {
                // Nothing new is accepted: queued requests fail now.
                let err = closing_error(shared, shutdown);
                rx.close();
                while let Ok(c) = rx.try_recv() {
                    fail_command(c, err.clone());
                }
            }
            if batch.is_empty() || room == 0 {
                continue;
            }
        }
        // Everything queued this turn joins the batch, up to the free slots.
        if closing_deadline.is_none() {
            while batch.len() < room {
                match rx.try_recv() {
                    Ok(Command::Send(o)) => batch.push_back(o),
                    Ok(Command::Connect(tx)) => {
                        let _ = tx.send(Ok(()));
                    }
                    Err(_) => break,
                }
            }
        }
        let deadline = Instant::now() + config.request_timeout;
        let mut taken = 0;
        while taken < room {
            let Some(o) = batch.pop_front() else { break };
            let api = o.request.api_key();
            let id = correlation_id;
            correlation_id = correlation_id.wrapping_add(1).max(0);
            match o
                .request
                .encode(&versions, id, &config.client_id, &mut segments)
            {
                Err(e) => {
                    let _ = o.reply.send(Err(e));
                }
                Ok(encoded) if encoded.expects_response => {
                    taken += 1;
                    live.in_flight.borrow_mut().push_back(InFlight {
                        correlation_id: id,
                        api,
                        version: encoded.version,
                        deadline,
                        reply: o.reply,
                    });
                }
                Ok(encoded) => no_response.push((o.reply, api, encoded.version)),
            }
        }
        shared
            .in_flight
            .store(live.in_flight.borrow().len(), Ordering::Relaxed);
        if !segments.is_empty() {
            // A broker that stops reading must not wedge the connection: the write
            // shares the request timeout.
            let write_all = write.write_all(std::mem::take(&mut segments));
            match tokio::time::timeout(config.request_timeout, write_all).await {
                Ok((result, returned)) => {
                    segments = returned;
                    segments.clear();
                    if let Err(e) = result {
                        break (Outcome::Broken, format!("write failed: {e}"));
                    }
                }
                Err(_) => {
                    break (
                        Outcome::Broken,
                        format!("write stalled for {:?}", config.request_timeout),
                    );
                }
            }
        }
        for (reply, api, version) in no_response.drain(..) {
            let _ = reply.send(Ok(RawResponse {
                api,
                version,
                body: Bytes::new(),
            }));
        }
    };

    write.close();
    reader_task.abort();
    let _ = reader_task.await;
    let err = IoError::Disconnected {
        addr: shared.addr.to_string(),
        reason: reason.clone(),
    };
    if matches!(outcome, Outcome::Broken) {
        tracing::info!(addr = %shared.addr, %reason, "connection lost");
    }
    shared.in_flight.store(0, Ordering::Relaxed);
    for entry in live.in_flight.borrow_mut().drain(..) {
        let _ = entry.reply.send(Err(err.clone()));
    }
    for o in batch {
        let _ = o.reply.send(Err(err.clone()));
    }
    for (reply, _, _) in no_response {
        let _ = reply.send(Err(err.clone()));
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    /// A transport that hands out scripted chunks, one per read.
    struct Scripted(VecDeque<Vec<u8>>);

    impl TransportRead for Scripted {
        async fn read(&mut self, mut buf: BytesMut) -> (std::io::Result<usize>, BytesMut) {
            match self.0.pop_front() {
                None => (Ok(0), buf),
                Some(chunk) => {
                    let room = buf.capacity() - buf.len();
                    let n = chunk.len().min(room);
                    buf.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        self.0.push_front(chunk[n..].to_vec());
                    }
                    (Ok(n), buf)
                }
            }
        }
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn frames_split_across_and_within_reads() {
        let mut all = frame(b"first");
        all.extend(frame(b"second!"));
        all.extend(frame(&[7u8; 300]));
        // Byte-at-a-time, then everything at once: same frames.
        for chunks in [
            all.iter().map(|b| vec![*b]).collect::<VecDeque<_>>(),
            VecDeque::from(vec![all.clone()]),
        ] {
            let mut r = FrameReader::new(Scripted(chunks), 1024, 16);
            run(async {
                assert_eq!(&r.next_frame().await.unwrap()[..], b"first");
                assert_eq!(&r.next_frame().await.unwrap()[..], b"second!");
                assert_eq!(&r.next_frame().await.unwrap()[..], &[7u8; 300][..]);
                assert!(matches!(
                    r.next_frame().await,
                    Err(FrameError::Eof { partial: 0 })
                ));
            });
        }
    }

    #[test]
    fn hostile_frames_are_errors_before_allocation() {
        for (bytes, what) in [
            (vec![0x7f, 0xff, 0xff, 0xff], "oversized"),
            (vec![0xff, 0xff, 0xff, 0x00], "negative"),
        ] {
            let mut r = FrameReader::new(Scripted(VecDeque::from(vec![bytes])), 1 << 20, 16);
            let err = run(r.next_frame()).unwrap_err();
            assert!(matches!(err, FrameError::Malformed(_)), "{what}: {err}");
            assert!(
                r.buf.capacity() < 1024,
                "{what}: nothing sized from the length"
            );
        }
        let mut r = FrameReader::new(
            Scripted(VecDeque::from(vec![vec![0, 0, 0, 9, 1, 2]])),
            64,
            16,
        );
        assert!(matches!(
            run(r.next_frame()),
            Err(FrameError::Eof { partial: 6 })
        ));
    }
}
