//! The connection engine: one broker connection's protocol state, sans-IO. It cuts
//! response frames out of the bytes the driver reads, matches them to requests by
//! correlation id, keeps the in-flight queue and its deadlines, runs the ApiVersions
//! handshake (KIP-511 fallback included) and says precisely which step failed. The
//! drivers — the async connection on a worker (io_uring or epoll), the blocking
//! connection, the simulation — only move bytes and time in and out.
//!
//! ```text
//!  driver ──▶ send(request, token, now)        ──▶ poll_transmit(&mut out)   bytes to write
//!             handle_read(buf, now) / eof / err     poll_timeout()            when to call back
//!             handle_timeout(now), close(now)       poll_event()              ready, responses, broken
//! ```
//!
//! Invariants:
//! - Every request handed to [`Connection::send`] comes back exactly once as an
//!   [`Event::Response`] with its token: answered, or failed with the reason.
//! - Responses come back in request order (Kafka guarantees it per connection), so the
//!   in-flight requests are a FIFO; a response whose correlation id is not the oldest's
//!   breaks the connection.
//! - At most `max_in_flight` requests await answers; the rest wait in the engine's
//!   queue, which the driver keeps short by asking [`Connection::can_accept`].
//! - Until the handshake is done, frames are capped at [`HANDSHAKE_MAX_FRAME`] whatever
//!   `max_response_size` says, so a TLS or HTTP listener's bytes are never read as a
//!   352 MB length; such answers are named ([`IoError::NotKafka`]).
//! - A request past its deadline fails and breaks the connection: a pipelined
//!   connection cannot skip an answer that may still come.
//! - Once broken or closed the engine emits [`Event::Broken`] or [`Event::Closed`] once;
//!   later calls are no-ops (new requests fail at once).
//!
//! Phases: `Handshake` (ApiVersions) → `Sasl` (when SASL is configured:
//! SaslHandshake, then SaslAuthenticate rounds) → `Ready`. TLS sits below the frame
//! cutter ([`crate::engine::tls`]): bytes read are decrypted before they reach the
//! [`FrameCutter`], and what is to be written is encrypted after encoding; the TLS
//! handshake runs under the ApiVersions request, which rustls holds until it is done.
//! The frame cap stays at [`HANDSHAKE_MAX_FRAME`] until authentication succeeds.
//!
//! Re-authentication (KIP-368): when the broker gives the session a lifetime, the
//! engine asks for fresh credentials ([`Event::ReauthenticationNeeded`]) at 85–95% of
//! it; once the driver hands them over ([`Connection::reauthenticate`]) new requests
//! wait until the in-flight ones are answered, the SASL exchange runs again, and the
//! waiting requests go out.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::engine::backoff::SplitMix64;
use crate::engine::error::IoError;
use crate::engine::sasl::{SaslCredentials, SaslExchange, SaslSetup, Step};
use crate::engine::tls::{TlsLayer, TlsSetup};
use crate::protocol::messages::{
    ApiVersionsRequest, ProduceRequest, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use crate::protocol::negotiation::{self, ApiVersionsTable};
use crate::protocol::{self, ApiKey, Decode, DecodeError, FrameCutter, KafkaCode, Request};
use crate::protocol::{ResponseHeader, messages::ApiVersionsResponse};

/// The largest frame accepted before the handshake is done. An ApiVersions answer is
/// well under a kilobyte; this only keeps a stranger's bytes from sizing a buffer.
pub const HANDSHAKE_MAX_FRAME: usize = 1 << 20;

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
    /// TLS and SASL (`security.protocol` and its settings); none for PLAINTEXT.
    pub security: ConnectionSecurity,
}

/// The security layers of a connection.
#[derive(Debug, Clone, Default)]
pub struct ConnectionSecurity {
    /// TLS (SSL, SASL_SSL).
    pub tls: Option<TlsSetup>,
    /// SASL (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslSetup>,
}

/// What a driver hands a new connection besides its settings: the SASL credentials
/// resolved for it (a token obtained from the application's provider, say), the SCRAM
/// nonce, and a seed for the re-authentication jitter.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// Credentials for the SASL exchange; `None` takes the password from the settings.
    pub credentials: Option<SaslCredentials>,
    /// SCRAM's client nonce (printable ASCII without `,`), drawn from a CSPRNG.
    pub nonce: String,
    /// Seeds the jitter of the re-authentication time.
    pub seed: u64,
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
            security: ConnectionSecurity::default(),
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
    /// From encoding the request (it went out in that turn's write) to cutting its
    /// answer; to the end of its write for requests that expect no response.
    pub round_trip: Duration,
    /// The correlation id it was sent with.
    pub correlation_id: i32,
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

    /// How long its response may take, when not the connection's request timeout
    /// (a JoinGroup waits for a whole rebalance).
    fn response_timeout(&self) -> Option<Duration> {
        None
    }
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
    /// How long the response may take; `None` is the connection's request timeout.
    pub timeout: Option<Duration>,
}

impl<R: Request + Send + 'static> EncodeRequest for TypedRequest<R> {
    fn api_key(&self) -> ApiKey {
        R::API_KEY
    }

    fn response_timeout(&self) -> Option<Duration> {
        self.timeout
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

/// What the engine tells its driver.
#[derive(Debug)]
pub enum Event<T> {
    /// The handshake is done; these are the broker's versions.
    Ready(Arc<ApiVersionsTable>),
    /// A request's outcome (exactly one per request).
    Response(T, Result<RawResponse, IoError>),
    /// Closed on purpose and drained (or the drain timed out); the end.
    Closed,
    /// The connection failed; every request already has its outcome. The end.
    Broken(IoError),
    /// The broker's SASL session is about to expire (KIP-368): hand fresh credentials
    /// to [`Connection::reauthenticate`].
    ReauthenticationNeeded,
}

struct Queued<T> {
    request: Box<dyn EncodeRequest>,
    token: T,
}

struct InFlight<T> {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    /// When it was encoded (and so handed to the next write).
    sent: Instant,
    deadline: Instant,
    /// What `deadline` was set from, for the error.
    timeout: Duration,
    token: T,
}

/// An acks=0 request: answered once its bytes are written.
struct Unanswered<T> {
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    sent: Instant,
    token: T,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// ApiVersions was sent at `version` with `correlation_id`; `retried` after a
    /// KIP-511 UNSUPPORTED_VERSION answer.
    Handshake {
        version: i16,
        correlation_id: i32,
        retried: bool,
    },
    /// Authenticating: a SaslHandshake (`authenticating` false) or SaslAuthenticate
    /// request is on the wire with `correlation_id`, at `version`.
    Sasl {
        correlation_id: i32,
        version: i16,
        authenticating: bool,
    },
    Ready,
    /// Broken or closed: every call is a no-op.
    Done,
}

/// Re-authentication (KIP-368) bookkeeping.
#[derive(Debug, Default)]
enum Reauth {
    /// Nothing to do (no session lifetime, or its time has not come).
    #[default]
    Idle,
    /// The driver was asked for credentials.
    Asked,
    /// Credentials are here: the exchange starts once nothing is in flight.
    Pending(SaslCredentials, String),
}

/// One broker connection's protocol state. `T` is the driver's token for a request
/// (where its outcome goes), handed back in [`Event::Response`].
pub struct Connection<T> {
    addr: Arc<str>,
    config: Arc<ConnectionConfig>,
    phase: Phase,
    /// The connection setup deadline (TCP connect and handshake together).
    setup_deadline: Instant,
    /// Set by `close`: when the drain gives up, and the error for refused requests.
    closing: Option<(Instant, IoError)>,
    cutter: FrameCutter,
    next_correlation_id: i32,
    versions: Option<Arc<ApiVersionsTable>>,
    queued: VecDeque<Queued<T>>,
    in_flight: VecDeque<InFlight<T>>,
    transmit: Vec<Bytes>,
    /// acks=0 requests encoded into `transmit`, then handed to the driver with it.
    unanswered: Vec<Unanswered<T>>,
    writing: Vec<Unanswered<T>>,
    events: VecDeque<Event<T>>,
    tls: Option<TlsLayer>,
    /// The ciphertext buffer lent to reads when TLS is on.
    tls_read: BytesMut,
    /// The SASL exchange in progress, and credentials waiting for the SaslHandshake.
    sasl: Option<SaslExchange>,
    sasl_start: Option<(SaslCredentials, String)>,
    /// The first SaslAuthenticate message, sent once the mechanism is accepted.
    sasl_first: Option<Vec<u8>>,
    /// When the SASL exchange in progress must be done.
    sasl_deadline: Instant,
    reauth: Reauth,
    /// When to ask for re-authentication.
    reauth_at: Option<Instant>,
    /// Whether `Ready` was emitted (a re-authentication does not emit it again).
    announced: bool,
    /// Requests answered on this connection.
    answered: u64,
    jitter: SplitMix64,
}

impl<T> std::fmt::Debug for Connection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .field("phase", &self.phase)
            .field("queued", &self.queued.len())
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl<T> Connection<T> {
    /// A connection whose TCP stream was just established: the ApiVersions request is
    /// ready to transmit, and the handshake must finish by `setup_deadline`. SASL, if
    /// configured, takes its password from the settings.
    #[cfg(test)]
    pub fn new(addr: Arc<str>, config: Arc<ConnectionConfig>, setup_deadline: Instant) -> Self {
        Self::start(addr, config, setup_deadline, Start::default())
    }

    /// [`Connection::new`] with what the driver resolved for this connection.
    pub fn start(
        addr: Arc<str>,
        config: Arc<ConnectionConfig>,
        setup_deadline: Instant,
        start: Start,
    ) -> Self {
        let version = ApiKey::ApiVersions.max_stable_version();
        let placeholder = Phase::Handshake {
            version,
            correlation_id: 0,
            retried: false,
        };
        let mut conn = Self::with_phase(addr, config, placeholder, setup_deadline);
        conn.jitter = SplitMix64::new(start.seed);
        if let Some(tls) = &conn.config.security.tls {
            match TlsLayer::new(tls, &conn.addr) {
                Ok(layer) => conn.tls = Some(layer),
                Err(failure) => {
                    let error = conn.tls_error(failure.0);
                    conn.fail(error);
                    return conn;
                }
            }
        }
        if let Some(sasl) = &conn.config.security.sasl {
            match start.credentials.or_else(|| sasl.static_credentials()) {
                Some(credentials) => conn.sasl_start = Some((credentials, start.nonce)),
                None => {
                    let error = IoError::Authentication {
                        addr: conn.addr.to_string(),
                        reason: format!(
                            "{} needs credentials and none were given",
                            sasl.mechanism.name()
                        ),
                    };
                    conn.fail(error);
                    return conn;
                }
            }
        }
        conn.send_api_versions(version, false);
        conn
    }

    /// A connection that skips the handshake (for tools that send explicit versions):
    /// ready at once, with no broker versions known.
    pub fn without_handshake(addr: Arc<str>, config: Arc<ConnectionConfig>, now: Instant) -> Self {
        let mut conn = Self::with_phase(addr, config, Phase::Ready, now);
        conn.cutter.set_max_frame(conn.config.max_response_size);
        conn.versions = Some(Arc::new(ApiVersionsTable::default()));
        conn
    }

    fn with_phase(
        addr: Arc<str>,
        config: Arc<ConnectionConfig>,
        phase: Phase,
        setup_deadline: Instant,
    ) -> Self {
        let cutter = FrameCutter::new(HANDSHAKE_MAX_FRAME, config.read_chunk_size);
        Connection {
            addr,
            config,
            phase,
            setup_deadline,
            closing: None,
            cutter,
            next_correlation_id: 0,
            versions: None,
            queued: VecDeque::new(),
            in_flight: VecDeque::new(),
            transmit: Vec::new(),
            unanswered: Vec::new(),
            writing: Vec::new(),
            events: VecDeque::new(),
            tls: None,
            tls_read: BytesMut::new(),
            sasl: None,
            sasl_start: None,
            sasl_first: None,
            sasl_deadline: setup_deadline,
            reauth: Reauth::Idle,
            reauth_at: None,
            announced: false,
            answered: 0,
            jitter: SplitMix64::new(0),
        }
    }

    /// Whether the handshake (and authentication) is done and the connection neither
    /// broken nor closed; a KIP-368 re-authentication in progress does not change it.
    pub fn is_ready(&self) -> bool {
        self.phase != Phase::Done && (self.announced || self.phase == Phase::Ready)
    }

    /// Whether the engine has ended (broken or closed). Events may still be pending.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Requests written and awaiting their answer.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether the driver should hand over more requests now: false while the engine's
    /// own queue already holds a window's worth, so the rest wait in the driver's
    /// bounded channel (backpressure to senders).
    pub fn can_accept(&self) -> bool {
        self.phase != Phase::Done
            && self.closing.is_none()
            && self.queued.len() < self.config.max_in_flight.max(1)
    }

    fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = id.checked_add(1).unwrap_or(0);
        id
    }

    fn send_api_versions(&mut self, version: i16, retried: bool) {
        let correlation_id = self.take_correlation_id();
        let request = ApiVersionsRequest::default()
            .with_client_software_name(self.config.client_software_name.clone())
            .with_client_software_version(self.config.client_software_version.clone());
        let mut buf = BytesMut::with_capacity(64);
        match protocol::encode_request_frame(
            &mut buf,
            &request,
            version,
            correlation_id,
            Some(&self.config.client_id),
        ) {
            Ok(()) => {
                self.transmit.push(buf.freeze());
                self.phase = Phase::Handshake {
                    version,
                    correlation_id,
                    retried,
                };
            }
            Err(source) => self.fail(IoError::Encode {
                api: ApiKey::ApiVersions,
                source,
            }),
        }
    }

    /// Queues `request`; its outcome comes back as [`Event::Response`] with `token`.
    pub fn send(&mut self, request: Box<dyn EncodeRequest>, token: T, now: Instant) {
        if self.phase == Phase::Done {
            let error = self.refusal();
            self.events.push_back(Event::Response(token, Err(error)));
            return;
        }
        if let Some((_, error)) = &self.closing {
            let error = error.clone();
            self.events.push_back(Event::Response(token, Err(error)));
            return;
        }
        self.queued.push_back(Queued { request, token });
        self.check_reauthentication(now);
        self.encode_queued(now);
    }

    fn refusal(&self) -> IoError {
        match &self.closing {
            Some((_, error)) => error.clone(),
            None => IoError::Closed {
                addr: self.addr.to_string(),
            },
        }
    }

    /// Encodes queued requests while the window has room.
    fn encode_queued(&mut self, now: Instant) {
        if self.phase != Phase::Ready {
            return;
        }
        match self.reauth {
            Reauth::Pending(..) => {
                self.start_reauthentication(now);
                return;
            }
            // Requests sent now could reach the broker after the session expired (it
            // would close the connection): they wait for the credentials.
            Reauth::Asked => return,
            Reauth::Idle => {}
        }
        let Some(versions) = self.versions.clone() else {
            return;
        };
        let max = self.config.max_in_flight.max(1);
        while self.in_flight.len() < max {
            let Some(q) = self.queued.pop_front() else {
                break;
            };
            let api = q.request.api_key();
            let timeout = q
                .request
                .response_timeout()
                .unwrap_or(self.config.request_timeout);
            let correlation_id = self.take_correlation_id();
            let encoded = q.request.encode(
                &versions,
                correlation_id,
                &self.config.client_id,
                &mut self.transmit,
            );
            match encoded {
                Err(e) => self.events.push_back(Event::Response(q.token, Err(e))),
                Ok(e) if e.expects_response => self.in_flight.push_back(InFlight {
                    correlation_id,
                    api,
                    version: e.version,
                    sent: now,
                    deadline: now + timeout,
                    timeout,
                    token: q.token,
                }),
                Ok(e) => self.unanswered.push(Unanswered {
                    correlation_id,
                    api,
                    version: e.version,
                    sent: now,
                    token: q.token,
                }),
            }
        }
    }

    /// Moves every byte waiting to be written into `out` (segments in order, for one
    /// vectored write). Returns whether there was any.
    pub fn poll_transmit(&mut self, out: &mut Vec<Bytes>) -> bool {
        let Some(tls) = self.tls.as_mut() else {
            if self.transmit.is_empty() {
                return false;
            }
            out.append(&mut self.transmit);
            self.writing.append(&mut self.unanswered);
            return true;
        };
        if !self.transmit.is_empty() {
            if let Err(failure) = tls.encrypt(&self.transmit) {
                let error = self.tls_error(failure.0);
                self.fail(error);
                return false;
            }
            self.transmit.clear();
            self.writing.append(&mut self.unanswered);
        }
        tls.poll_ciphertext(out)
    }

    /// The driver wrote everything [`Connection::poll_transmit`] handed it: requests
    /// that expect no answer (acks=0) are done.
    pub fn handle_transmitted(&mut self, now: Instant) {
        for u in self.writing.drain(..) {
            self.events.push_back(Event::Response(
                u.token,
                Ok(RawResponse {
                    api: u.api,
                    version: u.version,
                    body: Bytes::new(),
                    round_trip: now.saturating_duration_since(u.sent),
                    correlation_id: u.correlation_id,
                }),
            ));
        }
        self.finish_close_if_drained();
    }

    /// The read buffer, lent to the driver's read: bytes not yet cut stay at its front
    /// and its spare capacity holds the rest of the frame being read (up to 8 MiB ahead
    /// of what has arrived: see [`FrameCutter::lend`]). Give it back through
    /// [`Connection::handle_read`].
    pub fn lend_read_buffer(&mut self) -> BytesMut {
        if self.tls.is_none() {
            return self.cutter.lend();
        }
        // As much ciphertext as the frame being read still needs (up to 1 MiB), so a
        // large response takes few reads, as it does in plaintext.
        let mut buf = std::mem::take(&mut self.tls_read);
        buf.clear();
        let want = self
            .cutter
            .wanted()
            .clamp(self.config.read_chunk_size.max(TLS_RECORD), 1 << 20);
        buf.reserve(want);
        buf
    }

    /// How many bytes the socket may gather before a read is woken (`SO_RCVLOWAT`, see
    /// `TransportRead::set_wake_threshold`), over TLS: the ciphertext surely owed for
    /// the rest of the frame being read ([`TlsLayer::socket_bytes_needed`]), capped at
    /// `WAKE_THRESHOLD_MAX`. The broker encrypts slower than it sends plaintext, and the
    /// reader was woken every few records (12k context switches for 5M records of
    /// 100 B; 2–3k with the threshold, 15% less CPU). 1 (no threshold) in plaintext,
    /// where reads already come large and holding them back cost 10–20% of records/s
    /// (measured side by side), and before a frame's length is in or during the TLS
    /// handshake, when nothing more is sure to come.
    pub fn read_wake_threshold(&self) -> usize {
        if self.cutter.buffered().len() < crate::protocol::FRAME_PREFIX {
            return 1;
        }
        match &self.tls {
            Some(tls) if !tls.is_handshaking() => tls
                .socket_bytes_needed(self.cutter.wanted())
                .clamp(1, WAKE_THRESHOLD_MAX),
            _ => 1,
        }
    }

    /// The read buffer is back, with the bytes read appended.
    pub fn handle_read(&mut self, buf: BytesMut, now: Instant) {
        if self.tls.is_none() {
            self.cutter.restore(buf);
            self.cut_frames(now);
            return;
        }
        self.handle_ciphertext(&buf, now);
        self.tls_read = buf;
    }

    /// Ciphertext read: decrypted into the frame cutter, then cut.
    fn handle_ciphertext(&mut self, data: &[u8], now: Instant) {
        let Some(tls) = self.tls.as_mut() else {
            return;
        };
        if self.phase == Phase::Done || data.is_empty() {
            return;
        }
        match tls.read_ciphertext(data, &mut self.cutter) {
            Ok(closed) => {
                self.cut_frames(now);
                if closed {
                    self.handle_eof(now);
                }
            }
            Err(failure) => {
                let error = self.tls_error(failure.0);
                self.fail(error);
            }
        }
    }

    /// A TLS failure: during the set-up, [`IoError::Tls`] (the same settings would fail
    /// the same way); once the connection is ready, a broken connection like any other
    /// (requests on it may have been written, and another connection may do).
    fn tls_error(&self, reason: String) -> IoError {
        if self.phase == Phase::Ready {
            return self.disconnected(format!("TLS: {reason}"));
        }
        IoError::Tls {
            addr: self.addr.to_string(),
            reason,
        }
    }

    /// Bytes read into a buffer of the driver's own (one copy): the tests' and the
    /// simulation's way in.
    #[cfg(test)]
    pub fn handle_bytes(&mut self, data: &[u8], now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        if self.tls.is_some() {
            self.handle_ciphertext(data, now);
            return;
        }
        self.cutter.extend(data);
        self.cut_frames(now);
    }

    /// The blocking driver's read: `read` fills a slice (see [`FrameCutter::fill_with`]);
    /// what it read is cut into frames. End of stream and errors are the caller's to
    /// report ([`Connection::handle_eof`], [`Connection::handle_io_error`]).
    pub fn read_with<E>(
        &mut self,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
        now: Instant,
    ) -> Result<usize, E> {
        if self.tls.is_some() {
            let mut buf = std::mem::take(&mut self.tls_read);
            buf.resize(self.config.read_chunk_size.max(TLS_RECORD), 0);
            let result = read(&mut buf);
            let n = *result.as_ref().unwrap_or(&0);
            self.handle_ciphertext(&buf[..n.min(buf.len())], now);
            buf.clear();
            self.tls_read = buf;
            return result;
        }
        let result = self.cutter.fill_with(read);
        if matches!(result, Ok(n) if n > 0) {
            self.cut_frames(now);
        }
        result
    }

    /// The peer closed its end.
    pub fn handle_eof(&mut self, _now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        let pending = self.cutter.buffered().len();
        let tls_handshaking = self.tls.as_ref().is_some_and(TlsLayer::is_handshaking);
        let error = match self.phase {
            Phase::Handshake { .. } if tls_handshaking => self.disconnected(
                "closed by the peer during the TLS handshake: the listener may not expect TLS \
                 (a PLAINTEXT or SASL_PLAINTEXT listener?), or it refused this client"
                    .into(),
            ),
            Phase::Sasl { .. } => IoError::Authentication {
                addr: self.addr.to_string(),
                reason: format!(
                    "the broker closed the connection during SASL authentication ({}): \
                     the listener may not expect SASL, or it refused the credentials",
                    self.sasl_mechanism_name()
                ),
            },
            Phase::Handshake { .. } => self.foreign_protocol().unwrap_or_else(|| {
                self.disconnected(if pending == 0 {
                    "closed by the peer during the Kafka handshake (ApiVersions): the port may \
                     not be a Kafka listener, or it may expect TLS"
                        .to_string()
                } else {
                    format!("closed by the peer mid-answer to the handshake ({pending} bytes)")
                })
            }),
            _ if pending > 0 => self.disconnected(format!(
                "closed by the broker mid-response ({pending} bytes unread)"
            )),
            Phase::Ready
                if self.answered == 0
                    && !self.in_flight.is_empty()
                    && self.config.security.sasl.is_none() =>
            {
                self.disconnected(
                    "closed by the broker before answering the first request: the listener \
                     may require SASL authentication (security.protocol SASL_PLAINTEXT or \
                     SASL_SSL)"
                        .into(),
                )
            }
            _ => self.disconnected("closed by the broker".into()),
        };
        self.fail(error);
    }

    /// A read or write failed.
    pub fn handle_io_error(&mut self, error: &std::io::Error, _now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        let step = match self.phase {
            Phase::Handshake { .. } if self.tls.as_ref().is_some_and(TlsLayer::is_handshaking) => {
                " during the TLS handshake"
            }
            Phase::Handshake { .. } => " during the Kafka handshake",
            Phase::Sasl { .. } => " during SASL authentication",
            _ => "",
        };
        let error = self.disconnected(format!("{}{step}: {error}", error.kind()));
        self.fail(error);
    }

    /// Time passed: fails what is past its deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.phase {
            Phase::Done => {}
            Phase::Handshake { .. } if now >= self.setup_deadline => {
                let error = if self.tls.as_ref().is_some_and(TlsLayer::is_handshaking) {
                    IoError::SetupTimedOut {
                        addr: self.addr.to_string(),
                        step: "the TLS handshake".into(),
                        after: self.config.connect_timeout,
                    }
                } else {
                    IoError::HandshakeTimedOut {
                        addr: self.addr.to_string(),
                        after: self.config.connect_timeout,
                    }
                };
                self.fail(error);
            }
            Phase::Handshake { .. } => {}
            Phase::Sasl { .. } if now >= self.sasl_deadline => {
                let error = IoError::SetupTimedOut {
                    addr: self.addr.to_string(),
                    step: format!("SASL authentication ({})", self.sasl_mechanism_name()),
                    after: self.config.connect_timeout,
                };
                self.fail(error);
            }
            Phase::Sasl { .. } => {}
            Phase::Ready => {
                self.check_reauthentication(now);
                if let Some((deadline, _)) = &self.closing
                    && now >= *deadline
                {
                    let error = self.disconnected("closed before every response arrived".into());
                    self.fail(error);
                    return;
                }
                if self.in_flight.front().is_some_and(|f| now >= f.deadline) {
                    let Some(front) = self.in_flight.pop_front() else {
                        return;
                    };
                    self.events.push_back(Event::Response(
                        front.token,
                        Err(IoError::RequestTimedOut {
                            api: front.api,
                            addr: self.addr.to_string(),
                            after: front.timeout,
                        }),
                    ));
                    let error = self.disconnected(format!("{:?} request timed out", front.api));
                    self.fail(error);
                }
            }
        }
    }

    /// When the driver must call [`Connection::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let reauth = if self.phase == Phase::Ready {
            self.reauth_at
        } else {
            None
        };
        [self.poll_deadline(), reauth].into_iter().flatten().min()
    }

    /// The next deadline whose passing ends the connection (setup, a response, the
    /// drain): how long a blocking write may wait. Unlike [`Connection::poll_timeout`]
    /// it leaves out the re-authentication time, which only asks for credentials.
    pub fn poll_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Done => None,
            Phase::Handshake { .. } => Some(self.setup_deadline),
            Phase::Sasl { .. } => Some(self.sasl_deadline),
            Phase::Ready => {
                let front = self.in_flight.front().map(|f| f.deadline);
                let drain = self.closing.as_ref().map(|(d, _)| *d);
                [front, drain].into_iter().flatten().min()
            }
        }
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event<T>> {
        self.events.pop_front()
    }

    /// Closes on purpose: new and queued requests fail with `error`, requests in
    /// flight get their answers until `now + drain_timeout`, then [`Event::Closed`].
    pub fn close(&mut self, error: IoError, now: Instant) {
        if self.phase == Phase::Done || self.closing.is_some() {
            return;
        }
        for q in self.queued.drain(..) {
            self.events
                .push_back(Event::Response(q.token, Err(error.clone())));
        }
        self.closing = Some((now + self.config.drain_timeout, error));
        self.finish_close_if_drained();
    }

    fn finish_close_if_drained(&mut self) {
        let closing = self.closing.is_some();
        let handshaking = matches!(self.phase, Phase::Handshake { .. } | Phase::Sasl { .. });
        if closing && (handshaking || (self.in_flight.is_empty() && self.writing.is_empty())) {
            if let Some((_, error)) = self.closing.clone() {
                self.fail_requests(&error);
            }
            self.transmit.clear();
            self.phase = Phase::Done;
            self.events.push_back(Event::Closed);
        }
    }

    fn disconnected(&self, reason: String) -> IoError {
        IoError::Disconnected {
            addr: self.addr.to_string(),
            reason,
        }
    }

    /// Fails every request still without an outcome with `error`.
    fn fail_requests(&mut self, error: &IoError) {
        let in_flight = self.in_flight.drain(..).map(|f| f.token);
        let queued = self.queued.drain(..).map(|q| q.token);
        let unanswered = self.unanswered.drain(..).chain(self.writing.drain(..));
        let tokens: Vec<T> = in_flight
            .chain(queued)
            .chain(unanswered.map(|u| u.token))
            .collect();
        for token in tokens {
            self.events
                .push_back(Event::Response(token, Err(error.clone())));
        }
    }

    /// Ends the connection: every request fails with `error`, then [`Event::Broken`].
    fn fail(&mut self, error: IoError) {
        if self.phase == Phase::Done {
            return;
        }
        self.fail_requests(&error);
        self.transmit.clear();
        self.phase = Phase::Done;
        self.events.push_back(Event::Broken(error));
    }

    fn cut_frames(&mut self, now: Instant) {
        self.check_reauthentication(now);
        while self.phase != Phase::Done {
            match self.cutter.next_frame() {
                Ok(Some(frame)) => self.handle_frame(frame, now),
                Ok(None) => break,
                Err(e) => {
                    let error = self.frame_error(e);
                    self.fail(error);
                }
            }
        }
        self.finish_close_if_drained();
    }

    fn frame_error(&self, e: DecodeError) -> IoError {
        if let Phase::Handshake { .. } = self.phase {
            if let Some(foreign) = self.foreign_protocol() {
                return foreign;
            }
            return IoError::Decode {
                api: ApiKey::ApiVersions,
                addr: self.addr.to_string(),
                source: e,
            };
        }
        self.disconnected(format!("malformed frame: {e}"))
    }

    /// Names the protocol of an answer to the handshake that is not Kafka's.
    fn foreign_protocol(&self) -> Option<IoError> {
        let reason = describe_foreign(self.cutter.buffered())?;
        Some(IoError::NotKafka {
            addr: self.addr.to_string(),
            reason,
        })
    }

    fn handle_frame(&mut self, frame: Bytes, now: Instant) {
        match self.phase {
            Phase::Handshake {
                version,
                correlation_id,
                retried,
            } => self.handle_api_versions(frame, version, correlation_id, retried, now),
            Phase::Sasl {
                correlation_id,
                version,
                authenticating,
            } => self.handle_sasl_frame(frame, correlation_id, version, authenticating, now),
            Phase::Ready => self.handle_response(frame, now),
            Phase::Done => {}
        }
    }

    fn handle_api_versions(
        &mut self,
        mut frame: Bytes,
        version: i16,
        correlation_id: i32,
        retried: bool,
        now: Instant,
    ) {
        let decode_error = |addr: &str, source| IoError::Decode {
            api: ApiKey::ApiVersions,
            addr: addr.to_string(),
            source,
        };
        let response = ResponseHeader::decode(&mut frame, 0)
            .map_err(|e| decode_error(&self.addr, e))
            .and_then(|header| {
                if header.correlation_id == correlation_id {
                    Ok(())
                } else {
                    Err(self.disconnected(format!(
                        "handshake answered with correlation id {} instead of {correlation_id}",
                        header.correlation_id
                    )))
                }
            })
            .and_then(|()| {
                negotiation::decode_api_versions_response(frame, version)
                    .map_err(|e| decode_error(&self.addr, e))
            });
        match response {
            Err(e) => self.fail(e),
            Ok(r) => self.apply_api_versions(&r, version, retried, now),
        }
    }

    fn apply_api_versions(
        &mut self,
        response: &ApiVersionsResponse,
        version: i16,
        retried: bool,
        now: Instant,
    ) {
        let code = KafkaCode(response.error_code);
        if code.is_ok() {
            self.versions = Some(Arc::new(ApiVersionsTable::from_response(response)));
            match self.sasl_start.take() {
                Some((credentials, nonce)) => {
                    self.sasl_deadline = self.setup_deadline;
                    self.send_sasl_handshake(credentials, nonce);
                }
                None => self.become_ready(now),
            }
            return;
        }
        match negotiation::api_versions_fallback(response) {
            Some(v) if v < version && !retried => self.send_api_versions(v, true),
            _ => self.fail(IoError::Handshake {
                addr: self.addr.to_string(),
                code,
            }),
        }
    }

    fn handle_response(&mut self, mut frame: Bytes, now: Instant) {
        let Some(entry) = self.in_flight.pop_front() else {
            let error = self.disconnected("a response arrived with no request in flight".into());
            self.fail(error);
            return;
        };
        let header_version = entry.api.response_header_version(entry.version);
        match ResponseHeader::decode(&mut frame, header_version) {
            Err(source) => {
                let error = IoError::Decode {
                    api: entry.api,
                    addr: self.addr.to_string(),
                    source,
                };
                self.events
                    .push_back(Event::Response(entry.token, Err(error)));
                let error = self.disconnected("malformed response header".into());
                self.fail(error);
            }
            Ok(h) if h.correlation_id != entry.correlation_id => {
                let error = self.disconnected(format!(
                    "correlation id {} where {} was expected",
                    h.correlation_id, entry.correlation_id
                ));
                self.events
                    .push_back(Event::Response(entry.token, Err(error.clone())));
                self.fail(error);
            }
            Ok(_) => {
                self.answered += 1;
                self.events.push_back(Event::Response(
                    entry.token,
                    Ok(RawResponse {
                        api: entry.api,
                        version: entry.version,
                        body: frame,
                        round_trip: now.saturating_duration_since(entry.sent),
                        correlation_id: entry.correlation_id,
                    }),
                ));
                self.encode_queued(now);
            }
        }
    }

    /// Authenticated (or no SASL): frames may be large now, and requests go out.
    fn become_ready(&mut self, now: Instant) {
        self.cutter.set_max_frame(self.config.max_response_size);
        self.phase = Phase::Ready;
        if !self.announced {
            self.announced = true;
            if let Some(table) = self.versions.clone() {
                self.events.push_back(Event::Ready(table));
            }
        }
        self.encode_queued(now);
    }

    fn sasl_mechanism_name(&self) -> &'static str {
        self.config
            .security
            .sasl
            .as_ref()
            .map_or("SASL", |s| s.mechanism.name())
    }

    fn auth_error(&self, reason: String) -> IoError {
        IoError::Authentication {
            addr: self.addr.to_string(),
            reason,
        }
    }

    /// The broker's session expires soon (see [`Event::ReauthenticationNeeded`]): the
    /// exchange runs again with `credentials` once the requests in flight are answered.
    pub fn reauthenticate(&mut self, credentials: SaslCredentials, nonce: String, now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        self.reauth = Reauth::Pending(credentials, nonce);
        self.encode_queued(now);
    }

    /// The driver could not get credentials for a re-authentication: requests flow
    /// again, and when the session expires the broker closes the connection (the next
    /// request reconnects and authenticates afresh).
    pub fn reauthentication_failed(&mut self, now: Instant) {
        if let Reauth::Asked = self.reauth {
            self.reauth = Reauth::Idle;
            self.encode_queued(now);
        }
    }

    fn start_reauthentication(&mut self, now: Instant) {
        if !self.in_flight.is_empty() || self.phase != Phase::Ready {
            return;
        }
        if let Reauth::Pending(credentials, nonce) = std::mem::take(&mut self.reauth) {
            self.sasl_deadline = now + self.config.request_timeout;
            self.send_sasl_handshake(credentials, nonce);
        }
    }

    /// Encodes one of the engine's own requests (SASL) at `version` into `transmit`.
    fn send_own<R: Request>(&mut self, request: &R, version: i16) -> Option<i32> {
        let correlation_id = self.take_correlation_id();
        let mut buf = BytesMut::with_capacity(64);
        match protocol::encode_request_frame(
            &mut buf,
            request,
            version,
            correlation_id,
            Some(&self.config.client_id),
        ) {
            Ok(()) => {
                self.transmit.push(buf.freeze());
                Some(correlation_id)
            }
            Err(source) => {
                self.fail(IoError::Encode {
                    api: R::API_KEY,
                    source,
                });
                None
            }
        }
    }

    fn negotiated(&self, api: ApiKey) -> Option<i16> {
        self.versions.as_ref().and_then(|v| v.version_for(api))
    }

    fn send_sasl_handshake(&mut self, credentials: SaslCredentials, nonce: String) {
        let Some(mechanism) = self.config.security.sasl.as_ref().map(|s| s.mechanism) else {
            return;
        };
        let Some(version) = self.negotiated(ApiKey::SaslHandshake).filter(|&v| v >= 1) else {
            let error = self.auth_error(
                "the broker does not offer SaslHandshake v1 (Kafka 1.0 or later), so it \
                 cannot authenticate this client"
                    .into(),
            );
            self.fail(error);
            return;
        };
        let (exchange, first) = match SaslExchange::start(mechanism, &credentials, nonce) {
            Ok(started) => started,
            Err(e) => {
                let error = self.auth_error(e.to_string());
                self.fail(error);
                return;
            }
        };
        self.sasl = Some(exchange);
        let request = SaslHandshakeRequest::default().with_mechanism(mechanism.name().into());
        if let Some(correlation_id) = self.send_own(&request, version) {
            self.phase = Phase::Sasl {
                correlation_id,
                version,
                authenticating: false,
            };
            // The first SaslAuthenticate message waits for the mechanism to be accepted.
            self.sasl_first = Some(first);
        }
    }

    fn send_sasl_authenticate(&mut self, auth_bytes: Vec<u8>) {
        let Some(version) = self.negotiated(ApiKey::SaslAuthenticate) else {
            let error =
                self.auth_error("the broker does not offer SaslAuthenticate (KIP-152)".into());
            self.fail(error);
            return;
        };
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(auth_bytes));
        if let Some(correlation_id) = self.send_own(&request, version) {
            self.phase = Phase::Sasl {
                correlation_id,
                version,
                authenticating: true,
            };
        }
    }

    fn handle_sasl_frame(
        &mut self,
        mut frame: Bytes,
        correlation_id: i32,
        version: i16,
        authenticating: bool,
        now: Instant,
    ) {
        let api = if authenticating {
            ApiKey::SaslAuthenticate
        } else {
            ApiKey::SaslHandshake
        };
        let header = ResponseHeader::decode(&mut frame, api.response_header_version(version));
        match header {
            Ok(h) if h.correlation_id == correlation_id => {}
            Ok(h) => {
                let error = self.disconnected(format!(
                    "SASL answered with correlation id {} instead of {correlation_id}",
                    h.correlation_id
                ));
                self.fail(error);
                return;
            }
            Err(source) => {
                self.fail(IoError::Decode {
                    api,
                    addr: self.addr.to_string(),
                    source,
                });
                return;
            }
        }
        if authenticating {
            match protocol::decode_response_body::<SaslAuthenticateResponse>(frame, version) {
                Ok(r) => self.handle_sasl_authenticate(&r, now),
                Err(source) => self.fail(IoError::Decode {
                    api,
                    addr: self.addr.to_string(),
                    source,
                }),
            }
        } else {
            match protocol::decode_response_body::<SaslHandshakeResponse>(frame, version) {
                Ok(r) => self.handle_sasl_handshake(&r),
                Err(source) => self.fail(IoError::Decode {
                    api,
                    addr: self.addr.to_string(),
                    source,
                }),
            }
        }
    }

    fn handle_sasl_handshake(&mut self, response: &SaslHandshakeResponse) {
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            let reason = if code == KafkaCode::UNSUPPORTED_SASL_MECHANISM {
                format!(
                    "the broker does not enable {} on this listener (it offers {:?})",
                    self.sasl_mechanism_name(),
                    response.mechanisms
                )
            } else if code == KafkaCode::ILLEGAL_SASL_STATE {
                "the listener does not expect SASL (security.protocol SSL or PLAINTEXT \
                 rather than SASL_SSL or SASL_PLAINTEXT?)"
                    .to_string()
            } else {
                format!("SaslHandshake refused: {code}")
            };
            let error = self.auth_error(reason);
            self.fail(error);
            return;
        }
        match self.sasl_first.take() {
            Some(first) => self.send_sasl_authenticate(first),
            None => {
                let error = self.auth_error("SASL exchange lost its first message".into());
                self.fail(error);
            }
        }
    }

    fn handle_sasl_authenticate(&mut self, response: &SaslAuthenticateResponse, now: Instant) {
        let Some(exchange) = self.sasl.as_mut() else {
            let error = self.auth_error("a SASL answer with no exchange in progress".into());
            self.fail(error);
            return;
        };
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            let message = response
                .error_message
                .clone()
                .unwrap_or_else(|| code.to_string());
            let reason = exchange.rejected(&message).to_string();
            let error = self.auth_error(reason);
            self.fail(error);
            return;
        }
        match exchange.step(&response.auth_bytes) {
            Ok(Step::Reply(bytes)) => self.send_sasl_authenticate(bytes),
            Ok(Step::Done) => {
                self.sasl = None;
                self.schedule_reauthentication(response.session_lifetime_ms, now);
                self.become_ready(now);
            }
            Err(e) => {
                let error = self.auth_error(e.to_string());
                self.fail(error);
            }
        }
    }

    /// Asks for credentials once the re-authentication time has come. Called wherever
    /// time comes in (a driver that is kept busy may never see a timer fire).
    fn check_reauthentication(&mut self, now: Instant) {
        if self.phase == Phase::Ready && self.reauth_at.is_some_and(|at| now >= at) {
            self.reauth_at = None;
            self.reauth = Reauth::Asked;
            self.events.push_back(Event::ReauthenticationNeeded);
        }
    }

    /// KIP-368: ask for re-authentication at 85–95% of the session's lifetime (as the
    /// Java client does), so it is done before the broker closes the connection.
    fn schedule_reauthentication(&mut self, lifetime_ms: i64, now: Instant) {
        self.reauth = Reauth::Idle;
        if lifetime_ms <= 0 {
            self.reauth_at = None;
            return;
        }
        let fraction = 0.85 + 0.10 * (self.jitter.next_u64() as f64 / u64::MAX as f64);
        let after = Duration::from_millis((lifetime_ms as f64 * fraction) as u64);
        self.reauth_at = Some(now + after);
    }
}

/// The largest TLS record (16 KiB of payload plus overhead): a ciphertext read buffer
/// holds at least one.
const TLS_RECORD: usize = 16 * 1024 + 512;

/// The largest read wake threshold asked for (see `Connection::read_wake_threshold`):
/// big enough that a fetch response wakes its reader a few times, small enough to keep
/// the kernel from holding much that is already there.
const WAKE_THRESHOLD_MAX: usize = 256 * 1024;

/// What a peer that answered a Kafka request in another protocol is, from the first
/// bytes it sent; `None` when they are not recognisably anything.
fn describe_foreign(head: &[u8]) -> Option<String> {
    if head.starts_with(b"HTTP/") {
        let line = head
            .split(|&b| b == b'\r' || b == b'\n')
            .next()
            .unwrap_or(head);
        let line = String::from_utf8_lossy(&line[..line.len().min(60)]);
        return Some(format!(
            "it answered like an HTTP server ({line:?}); check the port"
        ));
    }
    // A TLS record: content type alert (21) or handshake (22), version 3.x.
    if let [kind @ (0x15 | 0x16), 0x03, minor, ..] = head
        && *minor <= 0x04
    {
        let what = if *kind == 0x15 {
            "an alert"
        } else {
            "a handshake"
        };
        return Some(format!(
            "it answered with a TLS record ({what}): the listener expects TLS \
             (security.protocol SSL or SASL_SSL)"
        ));
    }
    if head.starts_with(b"SSH-") {
        return Some("it answered like an SSH server; check the port".into());
    }
    None
}

#[cfg(test)]
mod tests;
