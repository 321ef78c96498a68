//! A blocking, one-request-at-a-time connection to one broker over `std::net::TcpStream`:
//! the blocking driver of the connection engine ([`crate::engine::connection`]), which
//! does the framing, correlation, frame caps and the ApiVersions handshake (KIP-511
//! fallback included) exactly as the async connection does.
//!
//! Deadlines are the engine's: each read and each write waits at most until the
//! engine's next deadline (the handshake's setup deadline, or the request's), so a
//! broker that trickles bytes, or stops reading, cannot hold a call past its timeout:
//! the timeout is per response, not per socket call.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::engine::connection::TypedRequest;
use crate::engine::connection::{Connection, EncodeRequest, Encoded, Event, RawResponse, Start};
use crate::io::security;
use crate::io::{ConnectionConfig, IoError};
use crate::protocol::negotiation::ApiVersionsTable;
use crate::protocol::{self, ApiKey, Encode, Request};

/// A blocking connection to one broker.
#[derive(Debug)]
pub struct BlockingConnection {
    config: Arc<ConnectionConfig>,
    stream: TcpStream,
    engine: Connection<u64>,
    addr: Arc<str>,
    next_token: u64,
    versions: ApiVersionsTable,
}

impl BlockingConnection {
    /// Connects to `addr` (`host:port`) and performs the ApiVersions handshake.
    pub fn connect(addr: &str, options: ConnectionConfig) -> Result<Self, IoError> {
        let started = Instant::now();
        let start = Self::start_for(&options, addr, options.connect_timeout)?;
        let stream = Self::tcp_connect(addr, &options)?;
        let addr: Arc<str> = Arc::from(addr);
        let engine = Connection::start(
            addr.clone(),
            Arc::new(options.clone()),
            started + options.connect_timeout,
            start,
        );
        let mut conn = BlockingConnection {
            config: Arc::new(options.clone()),
            stream,
            engine,
            addr,
            next_token: 0,
            versions: ApiVersionsTable::default(),
        };
        conn.wait_ready()?;
        Ok(conn)
    }

    /// Resolves credentials (a token provider is awaited on a scratch runtime).
    fn start_for(
        options: &ConnectionConfig,
        addr: &str,
        timeout: Duration,
    ) -> Result<Start, IoError> {
        if options.security.sasl.is_none() {
            return Ok(Start {
                nonce: security::nonce(),
                ..Start::default()
            });
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| IoError::Runtime(format!("a runtime for the token provider: {e}")))?;
        runtime.block_on(security::start_for(&options.security, addr, timeout))
    }

    /// Hands the engine fresh credentials when it asks (KIP-368).
    fn reauthenticate(&mut self) -> Result<(), IoError> {
        let config = self.config.clone();
        let addr = self.addr.clone();
        match Self::start_for(&config, &addr, config.request_timeout) {
            Ok(Start {
                credentials: Some(credentials),
                nonce,
                ..
            }) => self
                .engine
                .reauthenticate(credentials, nonce, Instant::now()),
            Ok(_) => self.engine.reauthentication_failed(Instant::now()),
            Err(error) => {
                tracing::warn!(%addr, %error, "re-authentication: no credentials");
                self.engine.reauthentication_failed(Instant::now());
            }
        }
        Ok(())
    }

    /// Connects without the handshake: `send` then needs explicit versions
    /// ([`BlockingConnection::send_version`]).
    pub fn connect_raw(addr: &str, options: ConnectionConfig) -> Result<Self, IoError> {
        let stream = Self::tcp_connect(addr, &options)?;
        let addr: Arc<str> = Arc::from(addr);
        let config = Arc::new(options);
        let engine = Connection::without_handshake(addr.clone(), config.clone(), Instant::now());
        Ok(BlockingConnection {
            config,
            stream,
            engine,
            addr,
            next_token: 0,
            versions: ApiVersionsTable::default(),
        })
    }

    fn tcp_connect(addr: &str, options: &ConnectionConfig) -> Result<TcpStream, IoError> {
        let io_err = |op: &str, source: std::io::Error| IoError::Connect {
            addr: addr.to_string(),
            message: format!("{op}: {source}"),
        };
        let targets: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| io_err("resolving", e))?
            .collect();
        let mut last = None;
        for target in &targets {
            match TcpStream::connect_timeout(target, options.connect_timeout) {
                Ok(stream) => {
                    stream
                        .set_nodelay(true)
                        .map_err(|e| io_err("configuring", e))?;
                    return Ok(stream);
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    last = Some(IoError::ConnectTimedOut {
                        addr: addr.to_string(),
                        after: options.connect_timeout,
                    });
                }
                Err(e) => last = Some(io_err("connecting to", e)),
            }
        }
        Err(last.unwrap_or_else(|| IoError::Connect {
            addr: addr.to_string(),
            message: "resolved to no address".into(),
        }))
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The versions negotiated with the broker (empty before or without the handshake).
    pub fn api_versions(&self) -> &ApiVersionsTable {
        &self.versions
    }

    /// Drives the engine until the handshake is done.
    fn wait_ready(&mut self) -> Result<(), IoError> {
        loop {
            self.flush()?;
            match self.engine.poll_event() {
                Some(Event::Ready(versions)) => {
                    self.versions = (*versions).clone();
                    return Ok(());
                }
                Some(Event::Broken(e)) => return Err(e),
                Some(_) => {}
                None => self.read_some()?,
            }
        }
    }

    /// Writes whatever the engine has to send, within the engine's next deadline: a
    /// broker that stops reading cannot hold the call past its timeout (each write
    /// waits only for what is left of it). A write cut short leaves a partial frame,
    /// so the connection is done for.
    fn flush(&mut self) -> Result<(), IoError> {
        let mut out = Vec::new();
        if !self.engine.poll_transmit(&mut out) {
            return Ok(());
        }
        let deadline = self.engine.poll_deadline();
        for segment in &out {
            if let Err(e) = write_until(&mut self.stream, segment, deadline) {
                let now = Instant::now();
                if is_timeout(&e) {
                    self.engine.handle_timeout(now);
                }
                self.engine.handle_io_error(&e, now);
                return Ok(());
            }
        }
        self.engine.handle_transmitted(Instant::now());
        Ok(())
    }

    /// One read, bounded by the engine's next deadline.
    fn read_some(&mut self) -> Result<(), IoError> {
        let now = Instant::now();
        let Some(deadline) = self.engine.poll_timeout() else {
            return Err(IoError::Closed {
                addr: self.addr.to_string(),
            });
        };
        if now >= deadline {
            self.engine.handle_timeout(now);
            return Ok(());
        }
        let wait = (deadline - now).max(Duration::from_millis(1));
        let _ = self.stream.set_read_timeout(Some(wait));
        let stream = &mut self.stream;
        let result = self.engine.read_with(|buf| stream.read(buf), now);
        let now = Instant::now();
        match result {
            Ok(0) => self.engine.handle_eof(now),
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                self.engine.handle_timeout(now)
            }
            Err(e) => self.engine.handle_io_error(&e, now),
        }
        Ok(())
    }

    /// Sends one request through the engine and waits for its answer.
    fn round_trip(&mut self, request: Box<dyn EncodeRequest>) -> Result<RawResponse, IoError> {
        let token = self.next_token;
        self.next_token += 1;
        self.engine.send(request, token, Instant::now());
        loop {
            self.flush()?;
            match self.engine.poll_event() {
                Some(Event::Response(t, result)) if t == token => return result,
                Some(Event::Broken(e)) => return Err(e),
                Some(Event::ReauthenticationNeeded) => self.reauthenticate()?,
                Some(_) => {}
                None => self.read_some()?,
            }
        }
    }

    /// Sends `request` at the highest version both sides support and waits for the answer.
    pub fn send<R: Request + Send + Clone + 'static>(
        &mut self,
        request: &R,
    ) -> Result<R::Response, IoError> {
        self.send_typed(request, None)
    }

    /// Sends `request` at an explicit version and waits for the answer.
    pub fn send_version<R: Request + Send + Clone + 'static>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, IoError> {
        self.send_typed(request, Some(version))
    }

    fn send_typed<R: Request + Send + Clone + 'static>(
        &mut self,
        request: &R,
        version: Option<i16>,
    ) -> Result<R::Response, IoError> {
        let raw = self.round_trip(Box::new(TypedRequest {
            request: request.clone(),
            version,
            addr: self.addr.clone(),
            timeout: None,
        }))?;
        protocol::decode_response_body::<R::Response>(raw.body, raw.version).map_err(|source| {
            IoError::Decode {
                api: R::API_KEY,
                addr: self.addr.to_string(),
                source,
            }
        })
    }

    /// Writes a pre-built request frame (size prefix included, any correlation id) and
    /// returns the response frame after its size prefix, header included: for tools and
    /// tests that speak versions the engine would not choose. The frame goes through the
    /// engine like any request, which stamps its own correlation id on it.
    pub fn send_raw_frame(&mut self, frame: &[u8]) -> Result<Bytes, IoError> {
        let raw = RawFrame::parse(frame)?;
        let header_version = raw.api.response_header_version(raw.version);
        let mut response = self.round_trip(Box::new(raw))?;
        // Give the caller the header back, as the raw answer had it.
        let mut with_header = BytesMut::new();
        protocol::ResponseHeader::default()
            .with_correlation_id(i32::from_be_bytes(
                frame[8..12].try_into().unwrap_or_default(),
            ))
            .encode(&mut with_header, header_version)
            .map_err(|source| IoError::Encode {
                api: ApiKey::ApiVersions,
                source,
            })?;
        with_header.extend_from_slice(&std::mem::take(&mut response.body));
        Ok(with_header.freeze())
    }
}

/// Whether a socket call gave up at its timeout.
fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Writes all of `bytes`, giving up (with a `TimedOut` error) at `deadline`.
fn write_until(
    stream: &mut TcpStream,
    mut bytes: &[u8],
    deadline: Option<Instant>,
) -> std::io::Result<()> {
    while !bytes.is_empty() {
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            stream.set_write_timeout(Some(left))?;
        }
        match stream.write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A request frame built by the caller, resent with the engine's correlation id.
struct RawFrame {
    api: ApiKey,
    version: i16,
    frame: Bytes,
}

impl RawFrame {
    fn parse(frame: &[u8]) -> Result<Self, IoError> {
        let bad = |reason: &'static str| IoError::Encode {
            api: ApiKey::ApiVersions,
            source: protocol::EncodeError::Malformed {
                what: "raw request frame",
                reason,
            },
        };
        let Some(head) = frame.get(4..12) else {
            return Err(bad("shorter than a request header"));
        };
        let key = i16::from_be_bytes([head[0], head[1]]);
        let api = ApiKey::from_i16(key).ok_or(bad("unknown API key"))?;
        Ok(RawFrame {
            api,
            version: i16::from_be_bytes([head[2], head[3]]),
            frame: Bytes::copy_from_slice(frame),
        })
    }
}

impl EncodeRequest for RawFrame {
    fn api_key(&self) -> ApiKey {
        self.api
    }

    fn encode(
        &self,
        _versions: &ApiVersionsTable,
        correlation_id: i32,
        _client_id: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<Encoded, IoError> {
        let mut frame = BytesMut::from(&self.frame[..]);
        frame[8..12].copy_from_slice(&correlation_id.to_be_bytes());
        out.push(frame.freeze());
        Ok(Encoded {
            version: self.version,
            expects_response: true,
        })
    }
}
