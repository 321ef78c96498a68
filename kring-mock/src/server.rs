//! The socket side shared by [`super::MockBroker`] and [`super::FakeCluster`]: a
//! loopback listener on its own thread, one thread per accepted connection, frame
//! reading with a size cap (kring's [`FrameCutter`]), request decoding, response
//! encoding and ordered writes.
//!
//! Invariants: nothing read from a socket can panic here; a frame that does not decode
//! closes its connection; a service's panic is caught, reported and closes only the
//! connection it happened on; [`Server::stop`] refuses new connections (the listening
//! socket is closed), closes every open one and joins every thread it started (except
//! the caller's own, when a service stops its own broker).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kring::protocol::messages::ApiVersionsResponse;
use kring::protocol::{
    ApiKey, Decode, Encode, EncodeError, FrameCutter, KafkaCode, RequestHeader, RequestKind,
    ResponseKind, encode_response_frame_with,
};

use super::{Action, MockError, ReceivedRequest, Reply, error_response};

/// The largest request frame accepted (Kafka's `socket.request.max.bytes`, 100 MiB).
const MAX_REQUEST_SIZE: usize = 100 * 1024 * 1024;

/// Locks a mutex, ignoring poisoning: a panicking handler must not take the mock
/// down with it (its panic is reported separately).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A stop flag that sleeping threads can be woken from.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    pub(crate) fn stop(&self) {
        *lock(&self.stopped) = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        *lock(&self.stopped)
    }

    /// Sleeps for `d` unless stopped first; false if stopped.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        if d.is_zero() {
            return !self.is_stopped();
        }
        let deadline = Instant::now() + d;
        let mut stopped = lock(&self.stopped);
        while !*stopped {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            stopped = self
                .cv
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        false
    }
}

/// Where a request came from, for the service.
pub(crate) struct ConnCtx<'a> {
    /// Set when the broker is stopping; services sleep on it.
    pub(crate) signal: &'a Signal,
}

/// What the connection does with a request after the service is done with it.
#[derive(Debug)]
pub(crate) enum Outcome {
    Respond(Box<ResponseKind>),
    Ignore,
    Close,
}

/// The broker logic behind a listener.
pub(crate) trait Service: Send + Sync + 'static {
    /// Handles one decoded request. Runs on the connection's thread; may sleep (on
    /// `ctx.signal`) or wait.
    fn handle(&self, ctx: &ConnCtx<'_>, request: &ReceivedRequest) -> Outcome;
    /// The versions advertised, for the KIP-511 answer to an unknown ApiVersions version.
    fn api_versions(&self) -> ApiVersionsResponse;
    /// A request frame that did not decode (its connection is closed).
    fn malformed(&self, broker_id: i32, what: String);
    /// Something went wrong on the broker's side: a handler panicked, a response did
    /// not fit its request, a response failed to encode.
    fn failure(&self, what: String);
    /// Wakes threads the service has waiting (the broker is stopping).
    fn wake(&self) {}
}

/// Turns a reply into what the connection does, building error responses from the
/// request. `Pass` is the caller's business and becomes `None`.
pub(crate) fn resolve(reply: &Reply, request: &ReceivedRequest) -> Result<Option<Outcome>, String> {
    Ok(Some(match reply.action() {
        Action::Respond(r) => Outcome::Respond(r.clone()),
        Action::Error(code) => match error_response(&request.request, request.version, *code) {
            Some(r) => Outcome::Respond(Box::new(r)),
            None => {
                return Err(format!(
                    "no error response is defined for {}",
                    request.describe()
                ));
            }
        },
        Action::Ignore => Outcome::Ignore,
        Action::Close => Outcome::Close,
        Action::Pass => return Ok(None),
    }))
}

struct Conn {
    stream: TcpStream,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    broker_id: i32,
    service: Arc<dyn Service>,
    signal: Signal,
    conns: Mutex<Vec<Conn>>,
    next_conn: AtomicU64,
}

/// One listening broker.
pub(crate) struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("broker_id", &self.shared.broker_id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds `addr` and starts accepting.
    pub(crate) fn bind(
        addr: SocketAddr,
        broker_id: i32,
        service: Arc<dyn Service>,
    ) -> Result<Server, MockError> {
        let listener = TcpListener::bind(addr).map_err(|source| MockError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        Self::start(listener, broker_id, service)
    }

    /// Starts accepting on a listener already bound.
    pub(crate) fn start(
        listener: TcpListener,
        broker_id: i32,
        service: Arc<dyn Service>,
    ) -> Result<Server, MockError> {
        let addr = listener.local_addr().map_err(|source| MockError::Bind {
            addr: "(bound listener)".into(),
            source,
        })?;
        let shared = Arc::new(Shared {
            broker_id,
            service,
            signal: Signal::default(),
            conns: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
        });
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name(format!("kmock-{broker_id}-accept"))
            .spawn(move || accept_loop(listener, accept_shared))
            .map_err(MockError::Thread)?;
        Ok(Server {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The bound address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> u64 {
        self.shared.next_conn.load(Ordering::Relaxed)
    }

    /// Closes every open connection; the listener keeps accepting.
    pub(crate) fn disconnect_all(&self) {
        for conn in lock(&self.shared.conns).iter() {
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
    }

    /// Stops accepting (the port is released), closes every connection and joins the
    /// threads.
    pub(crate) fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.signal.stop();
        self.shared.service.wake();
        // Wake the blocking accept with a connection of our own; it sees the flag and
        // drops the listener. If that connect fails the thread is left to exit on
        // its next accept rather than hanging this call.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(2)).is_ok() {
            let _ = accept.join();
        }
        let threads: Vec<JoinHandle<()>> = {
            let mut conns = lock(&self.shared.conns);
            conns
                .drain(..)
                .filter_map(|mut c| {
                    let _ = c.stream.shutdown(Shutdown::Both);
                    c.thread.take()
                })
                .collect()
        };
        let me = std::thread::current().id();
        for t in threads {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.signal.is_stopped() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                if !shared.signal.sleep(Duration::from_millis(10)) {
                    break;
                }
                continue;
            }
        };
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let conn_shared = shared.clone();
        let mut conns = lock(&shared.conns);
        // Forget connections whose threads are done.
        conns.retain(|c| c.thread.as_ref().is_some_and(|t| !t.is_finished()));
        let thread = std::thread::Builder::new()
            .name(format!("kmock-{}-{id}", shared.broker_id))
            .spawn(move || serve(stream, id, conn_shared));
        match thread {
            Ok(t) => conns.push(Conn {
                stream: registered,
                thread: Some(t),
            }),
            Err(e) => {
                let _ = registered.shutdown(Shutdown::Both);
                shared
                    .service
                    .failure(format!("spawning a connection thread: {e}"));
            }
        }
    }
}

/// A request frame that could not become a [`ReceivedRequest`].
enum Bad {
    /// ApiVersions at a version this crate does not know: answer per KIP-511.
    ApiVersionsUnsupported { correlation_id: i32 },
    /// Anything else: close the connection.
    Malformed(String),
}

/// How much a read asks for at least (the cutter asks for a whole frame when it knows
/// the frame's length and that is more).
const READ_CHUNK: usize = 64 * 1024;

/// Reads the next request frame through kring's [`FrameCutter`] (the same frame reader
/// kring's connections use). `Ok(None)` when the peer closed the connection or the read
/// failed, also in the middle of a frame; an error for a frame length that is negative
/// or above [`MAX_REQUEST_SIZE`] (checked before anything is reserved for it).
fn read_frame(stream: &mut TcpStream, cutter: &mut FrameCutter) -> Result<Option<Bytes>, String> {
    loop {
        match cutter.next_frame() {
            Ok(Some(frame)) => return Ok(Some(frame)),
            Ok(None) => {}
            Err(e) => {
                let seen = cutter.buffered();
                return Err(format!(
                    "request frame: {e} (first bytes {:02x?})",
                    &seen[..seen.len().min(16)]
                ));
            }
        }
        match cutter.fill_with(|buf| stream.read(buf)) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(None),
        }
    }
}

fn decode(frame: Bytes, broker_id: i32, connection: u64) -> Result<ReceivedRequest, Bad> {
    let Some(fixed) = frame.first_chunk::<8>() else {
        return Err(Bad::Malformed(format!(
            "a {}-byte frame is too short for a request header",
            frame.len()
        )));
    };
    let key = i16::from_be_bytes([fixed[0], fixed[1]]);
    let version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let api =
        ApiKey::from_i16(key).ok_or_else(|| Bad::Malformed(format!("unknown API key {key}")))?;
    if !api.versions().contains(version) {
        if api == ApiKey::ApiVersions && version > api.versions().max {
            return Err(Bad::ApiVersionsUnsupported { correlation_id });
        }
        return Err(Bad::Malformed(format!(
            "{} v{version} is not a version kring knows",
            api.name()
        )));
    }
    let mut rest = frame;
    let header = RequestHeader::decode(&mut rest, api.request_header_version(version))
        .map_err(|e| Bad::Malformed(format!("{} v{version} header: {e}", api.name())))?;
    let body = rest.clone();
    let request = RequestKind::decode(api, &mut rest, version)
        .map_err(|e| Bad::Malformed(format!("{} v{version} body: {e}", api.name())))?;
    if !rest.is_empty() {
        return Err(Bad::Malformed(format!(
            "{} v{version}: {} bytes after the body",
            api.name(),
            rest.len()
        )));
    }
    Ok(ReceivedRequest {
        broker_id,
        connection,
        header,
        api_key: api,
        version,
        request,
        body,
    })
}

/// Encodes a whole response frame: size, header (at the API's header version), body —
/// kring's own server-side framing.
pub(crate) fn encode_response(
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    body: &dyn Fn(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<BytesMut, EncodeError> {
    let mut buf = BytesMut::with_capacity(128);
    encode_response_frame_with(&mut buf, api, version, correlation_id, body)?;
    Ok(buf)
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

fn serve(mut stream: TcpStream, connection: u64, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let ctx = ConnCtx {
        signal: &shared.signal,
    };
    let mut cutter = FrameCutter::new(MAX_REQUEST_SIZE, READ_CHUNK);
    loop {
        if shared.signal.is_stopped() {
            break;
        }
        let frame = match read_frame(&mut stream, &mut cutter) {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(what) => {
                shared.service.malformed(shared.broker_id, what);
                break;
            }
        };
        let request = match decode(frame, shared.broker_id, connection) {
            Ok(r) => r,
            Err(Bad::ApiVersionsUnsupported { correlation_id }) => {
                // KIP-511: answer in the v0 format, saying what is supported.
                let advertised = shared.service.api_versions();
                let body = ApiVersionsResponse::default()
                    .with_error_code(KafkaCode::UNSUPPORTED_VERSION.code())
                    .with_api_keys(advertised.api_keys);
                let frame = encode_response(correlation_id, ApiKey::ApiVersions, 0, &|buf| {
                    body.encode(buf, 0)
                });
                match frame {
                    Ok(f) if stream.write_all(&f).is_ok() => continue,
                    _ => break,
                }
            }
            Err(Bad::Malformed(what)) => {
                shared.service.malformed(shared.broker_id, what);
                break;
            }
        };
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| shared.service.handle(&ctx, &request)));
        let outcome = match outcome {
            Ok(o) => o,
            Err(payload) => {
                shared.service.failure(format!(
                    "handler panicked on {}: {}",
                    request.describe(),
                    panic_message(payload.as_ref())
                ));
                break;
            }
        };
        match outcome {
            Outcome::Respond(response) => {
                if response.api_key() != request.api_key {
                    shared.service.failure(format!(
                        "a {} response was scripted for {}",
                        response.api_key().name(),
                        request.describe()
                    ));
                    break;
                }
                if matches!(&request.request, RequestKind::Produce(p) if p.acks == 0) {
                    continue;
                }
                let frame = encode_response(
                    request.correlation_id(),
                    request.api_key,
                    request.version,
                    &|buf| response.encode(buf, request.version),
                );
                match frame {
                    Ok(f) => {
                        if stream.write_all(&f).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        shared.service.failure(format!(
                            "encoding the response to {}: {e}",
                            request.describe()
                        ));
                        break;
                    }
                }
            }
            Outcome::Ignore => {}
            Outcome::Close => break,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}
