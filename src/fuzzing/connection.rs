//! The connection engine under fuzzing: the ApiVersions handshake (and SASL, when the
//! input asks for it), then requests of several APIs, with the broker's bytes taken
//! from the input and handed over in the input's chunking, through either driver read
//! path (the lent buffer of the async drivers, the filled slice of the blocking one).
//! Timeouts, EOF and a close come in where the input says. Every answered body is
//! decoded as the caller would.
//!
//! Input: `flags, max_in_flight, read_chunk, op_count, op_count × u16 op, stream`.
//! An op's top two bits are its kind, the low 14 its argument:
//! - `00`: hand over the next `arg` bytes of the stream (`arg` 0: the peer closes);
//! - `01`: send a request, `arg` choosing the API and version;
//! - `10`: `arg` × 10 ms pass;
//! - `11`: hand over the next `arg` KiB of the stream.
//!
//! What is left of the stream is handed over at the end, then the peer closes (or, with
//! [`END_WITH_CLOSE`], the client closes and the drain times out).
//!
//! Checked: every request gets exactly one outcome; answers come in request order, for
//! the request's API (and version, when explicit), never before the handshake is done
//! nor after the end; one end event, then nothing but refusals; nothing is written
//! after the end; a lent read buffer always has room.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Cursor, Violation, violation};
use crate::engine::connection::{
    Connection, ConnectionConfig, ConnectionSecurity, EncodeRequest, Event, Start, TypedRequest,
};
use crate::engine::error::IoError;
use crate::engine::sasl::{CredentialSource, SaslMechanism, SaslSetup, Secret};
use crate::protocol::messages::{
    ApiVersionsRequest, FetchRequest, FindCoordinatorRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest,
};
use crate::protocol::{ApiKey, Request, ResponseKind};

/// Flag: skip the handshake (a tool's connection with explicit versions).
pub const NO_HANDSHAKE: u8 = 1;
/// Flag: authenticate with SASL PLAIN (user `fuzz`, password `fuzz`).
pub const SASL_PLAIN: u8 = 2;
/// Flag: authenticate with SCRAM-SHA-256 (user `fuzz`, password `fuzz`, nonce [`NONCE`]).
pub const SASL_SCRAM: u8 = 4;
/// Flag: read through `read_with` (the blocking driver) instead of a lent buffer.
pub const READ_WITH: u8 = 8;
/// Flag: end with a close and its drain timing out instead of the peer closing.
pub const END_WITH_CLOSE: u8 = 16;

/// The SCRAM client nonce the harness uses, so inputs can answer it.
pub const NONCE: &str = "fuzznonce";
/// The largest response frame once the handshake is done: small enough that inputs
/// can carry a frame past it.
pub const MAX_RESPONSE_SIZE: usize = 2 << 20;
/// The broker address in errors.
const ADDR: &str = "fuzz:9092";

/// One step of a [`ConnectionScript`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Hand over the next this many bytes (at most 16383; 0: the peer closes).
    Feed(u16),
    /// Send a request ([`request_kinds`] picks from the argument).
    Send(u16),
    /// Let this many ten-millisecond steps pass.
    Wait(u16),
    /// Hand over the next this many KiB.
    FeedKiB(u16),
}

const ARG: u16 = 0x3fff;

impl Op {
    fn encode(self) -> u16 {
        match self {
            Op::Feed(n) => n & ARG,
            Op::Send(n) => 0x4000 | (n & ARG),
            Op::Wait(n) => 0x8000 | (n & ARG),
            Op::FeedKiB(n) => 0xc000 | (n & ARG),
        }
    }

    fn decode(v: u16) -> Self {
        let arg = v & ARG;
        match v >> 14 {
            0 => Op::Feed(arg),
            1 => Op::Send(arg),
            2 => Op::Wait(arg),
            _ => Op::FeedKiB(arg),
        }
    }
}

/// A connection input, structured (seeds are written from this).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionScript {
    /// [`NO_HANDSHAKE`], [`SASL_PLAIN`], ...
    pub flags: u8,
    /// `max_in_flight` is 1 + this % 8.
    pub max_in_flight: u8,
    /// `read_chunk_size` is 16 << (this % 13): 16 B to 64 KiB.
    pub read_chunk: u8,
    /// At most 255.
    pub ops: Vec<Op>,
    /// The broker's bytes.
    pub stream: Vec<u8>,
}

impl ConnectionScript {
    /// The input bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let ops = &self.ops[..self.ops.len().min(255)];
        let mut out = vec![
            self.flags,
            self.max_in_flight,
            self.read_chunk,
            ops.len() as u8,
        ];
        for op in ops {
            out.extend_from_slice(&op.encode().to_be_bytes());
        }
        out.extend_from_slice(&self.stream);
        out
    }

    /// Any bytes as a script.
    pub fn parse(data: &[u8]) -> Self {
        let mut c = Cursor::new(data);
        let (flags, max_in_flight, read_chunk) = (c.u8(), c.u8(), c.u8());
        let count = c.u8();
        let ops = (0..count).map(|_| Op::decode(c.u16())).collect();
        ConnectionScript {
            flags,
            max_in_flight,
            read_chunk,
            ops,
            stream: c.rest().to_vec(),
        }
    }
}

/// The APIs `Op::Send` picks from: `arg % len` picks the kind; for an explicit version
/// (always without the handshake, else when `arg / len` is odd) `arg / len / 2` picks
/// it within the API's range.
pub fn request_kinds() -> &'static [(ApiKey, &'static str)] {
    &[
        (ApiKey::Metadata, "metadata"),
        (ApiKey::Produce, "produce acks=1"),
        (ApiKey::Produce, "produce acks=0"),
        (ApiKey::Fetch, "fetch"),
        (ApiKey::ListOffsets, "list offsets"),
        (ApiKey::ApiVersions, "api versions"),
        (ApiKey::FindCoordinator, "find coordinator"),
    ]
}

/// What an input reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionReport {
    /// The handshake (and SASL) finished.
    pub ready: bool,
    /// Requests sent.
    pub sent: usize,
    /// Requests answered with a body (or written, for acks=0).
    pub answered: usize,
    /// Answer bodies that decoded as their API's response.
    pub decoded: usize,
    /// How the connection ended (the end event's error, or "closed").
    pub ended: String,
}

struct Sent {
    api: ApiKey,
    version: Option<i16>,
    expects_response: bool,
    outcomes: usize,
}

struct Harness {
    conn: Connection<usize>,
    now: Instant,
    handshake: bool,
    read_with: bool,
    sasl: bool,
    close_at_end: bool,
    stream: Bytes,
    sent: Vec<Sent>,
    /// The last request answered with a body, for the order check.
    last_answered: Option<usize>,
    ready: bool,
    ended: Option<String>,
    report: ConnectionReport,
}

/// Runs one input; see the module docs for the format and what is checked.
pub fn run(data: &[u8]) -> Result<ConnectionReport, Violation> {
    let script = ConnectionScript::parse(data);
    let mut h = Harness::new(&script);
    h.pump()?;
    for &op in &script.ops {
        h.apply(op)?;
    }
    let rest = h.stream.len();
    h.feed(rest)?;
    h.finish()?;
    Ok(h.report)
}

impl Harness {
    fn new(script: &ConnectionScript) -> Self {
        let flags = script.flags;
        let sasl = match flags & (SASL_PLAIN | SASL_SCRAM) {
            SASL_PLAIN => Some(SaslMechanism::Plain),
            SASL_SCRAM => Some(SaslMechanism::ScramSha256),
            _ => None,
        };
        let config = Arc::new(ConnectionConfig {
            max_in_flight: 1 + usize::from(script.max_in_flight % 8),
            read_chunk_size: 16 << (script.read_chunk % 13),
            max_response_size: MAX_RESPONSE_SIZE,
            security: ConnectionSecurity {
                tls: None,
                sasl: sasl.map(|mechanism| SaslSetup {
                    mechanism,
                    source: CredentialSource::Password {
                        username: "fuzz".into(),
                        password: Secret::new("fuzz"),
                    },
                }),
            },
            ..ConnectionConfig::default()
        });
        let now = Instant::now();
        let handshake = flags & NO_HANDSHAKE == 0;
        let conn = if handshake {
            let start = Start {
                credentials: None,
                nonce: NONCE.into(),
                seed: 0,
            };
            Connection::start(
                Arc::from(ADDR),
                config.clone(),
                now + config.connect_timeout,
                start,
            )
        } else {
            Connection::without_handshake(Arc::from(ADDR), config, now)
        };
        Harness {
            conn,
            now,
            handshake,
            read_with: flags & READ_WITH != 0,
            sasl: sasl.is_some(),
            close_at_end: flags & END_WITH_CLOSE != 0,
            stream: Bytes::copy_from_slice(&script.stream),
            sent: Vec::new(),
            last_answered: None,
            ready: !handshake,
            ended: None,
            report: ConnectionReport {
                ready: !handshake,
                ..ConnectionReport::default()
            },
        }
    }

    fn apply(&mut self, op: Op) -> Result<(), Violation> {
        match op {
            Op::Feed(0) => {
                self.conn.handle_eof(self.now);
                self.pump()
            }
            Op::Feed(n) => self.feed(usize::from(n)),
            Op::FeedKiB(n) => self.feed(usize::from(n) << 10),
            Op::Send(arg) => self.send(arg),
            Op::Wait(steps) => {
                self.now += Duration::from_millis(10 * u64::from(steps));
                self.conn.handle_timeout(self.now);
                self.pump()
            }
        }
    }

    fn send(&mut self, arg: u16) -> Result<(), Violation> {
        let kinds = request_kinds();
        let which = usize::from(arg) % kinds.len();
        let (api, _) = kinds[which];
        let rest = usize::from(arg) / kinds.len();
        let explicit = !self.handshake || rest % 2 == 1;
        let version = explicit.then(|| {
            let range = api.versions();
            let span = usize::try_from(range.max - range.min).unwrap_or(0) + 1;
            range.min + ((rest / 2) % span) as i16
        });
        let expects_response = which != 2;
        let request = request_of(which, version);
        let token = self.sent.len();
        self.sent.push(Sent {
            api,
            version,
            expects_response,
            outcomes: 0,
        });
        self.report.sent += 1;
        self.conn.send(request, token, self.now);
        self.pump()
    }

    /// Hands over the next `n` bytes of the stream, in reads no larger than the
    /// driver's buffer offers.
    fn feed(&mut self, n: usize) -> Result<(), Violation> {
        let mut chunk = self.stream.split_to(n.min(self.stream.len()));
        while !chunk.is_empty() && !self.conn.is_done() {
            let taken = if self.read_with {
                self.read_with(&chunk)?
            } else {
                self.read_lent(&chunk)?
            };
            let _ = chunk.split_to(taken);
            self.pump()?;
        }
        Ok(())
    }

    fn read_lent(&mut self, chunk: &[u8]) -> Result<usize, Violation> {
        let mut buf = self.conn.lend_read_buffer();
        let room = buf.capacity() - buf.len();
        if room == 0 {
            return Err(violation("a lent read buffer has no room to read into"));
        }
        let n = room.min(chunk.len());
        buf.extend_from_slice(&chunk[..n]);
        self.conn.handle_read(buf, self.now);
        Ok(n)
    }

    fn read_with(&mut self, chunk: &[u8]) -> Result<usize, Violation> {
        let result = self.conn.read_with(
            |buf: &mut [u8]| {
                let n = buf.len().min(chunk.len());
                buf[..n].copy_from_slice(&chunk[..n]);
                Ok::<usize, std::convert::Infallible>(n)
            },
            self.now,
        );
        match result {
            Ok(0) => Err(violation("read_with offered an empty buffer")),
            Ok(n) => Ok(n),
            Err(never) => match never {},
        }
    }

    /// Writes what the engine wants written and takes its events.
    fn pump(&mut self) -> Result<(), Violation> {
        let mut out = Vec::new();
        let wrote = self.conn.poll_transmit(&mut out);
        if wrote {
            if self.ended.is_some() {
                return Err(violation("bytes to write after the connection ended"));
            }
            self.conn.handle_transmitted(self.now);
        }
        while let Some(event) = self.conn.poll_event() {
            self.event(event)?;
        }
        Ok(())
    }

    fn event(&mut self, event: Event<usize>) -> Result<(), Violation> {
        match event {
            Event::Ready(_) => {
                if self.ended.is_some() {
                    return Err(violation("Ready after the end"));
                }
                if self.ready {
                    return Err(violation("Ready twice (or without a handshake)"));
                }
                self.ready = true;
                self.report.ready = true;
            }
            Event::Response(token, result) => self.outcome(token, result)?,
            Event::Closed | Event::Broken(_) if self.ended.is_some() => {
                return Err(violation("a second end event"));
            }
            Event::Closed => self.ended = Some("closed".into()),
            Event::Broken(e) => self.ended = Some(e.to_string()),
            Event::ReauthenticationNeeded => {
                if !self.sasl {
                    return Err(violation("re-authentication asked for without SASL"));
                }
                let credentials = crate::engine::sasl::SaslCredentials::Password {
                    username: "fuzz".into(),
                    password: Secret::new("fuzz"),
                };
                self.conn
                    .reauthenticate(credentials, NONCE.into(), self.now);
            }
        }
        Ok(())
    }

    fn outcome(
        &mut self,
        token: usize,
        result: Result<crate::engine::connection::RawResponse, IoError>,
    ) -> Result<(), Violation> {
        let Some(sent) = self.sent.get_mut(token) else {
            return Err(violation(format!(
                "an outcome for token {token}, never sent"
            )));
        };
        sent.outcomes += 1;
        if sent.outcomes > 1 {
            return Err(violation(format!("token {token} has two outcomes")));
        }
        let Ok(raw) = result else {
            return Ok(());
        };
        if self.ended.is_some() {
            return Err(violation(format!("token {token} answered after the end")));
        }
        if !self.ready {
            return Err(violation(format!(
                "token {token} answered before the handshake"
            )));
        }
        if raw.api != sent.api || sent.version.is_some_and(|v| v != raw.version) {
            return Err(violation(format!(
                "token {token} ({:?} v{:?}) answered as {:?} v{}",
                sent.api, sent.version, raw.api, raw.version
            )));
        }
        self.report.answered += 1;
        if !sent.expects_response {
            if !raw.body.is_empty() {
                return Err(violation("an acks=0 produce came back with a body"));
            }
            return Ok(());
        }
        if self.last_answered.is_some_and(|last| last >= token) {
            return Err(violation(format!("token {token} answered out of order")));
        }
        self.last_answered = Some(token);
        let mut body = raw.body;
        if ResponseKind::decode(raw.api, &mut body, raw.version).is_ok() {
            self.report.decoded += 1;
        }
        Ok(())
    }

    /// The peer closes (or the client closes and the drain times out); then every
    /// request must have its outcome.
    fn finish(&mut self) -> Result<(), Violation> {
        if self.ended.is_none() {
            if self.close_at_end {
                let error = IoError::Closed {
                    addr: ADDR.to_string(),
                };
                self.conn.close(error, self.now);
                self.pump()?;
                self.now += Duration::from_secs(3600);
                self.conn.handle_timeout(self.now);
            } else {
                self.conn.handle_eof(self.now);
            }
            self.pump()?;
        }
        let Some(ended) = self.ended.clone() else {
            return Err(violation("no end event after the end"));
        };
        if let Some(token) = self.sent.iter().position(|s| s.outcomes == 0) {
            return Err(violation(format!("token {token} never got an outcome")));
        }
        // After the end, a request is refused at once.
        self.send(0)?;
        if self.sent.last().is_some_and(|s| s.outcomes != 1) {
            return Err(violation("a request after the end was not refused"));
        }
        self.report.ended = ended;
        Ok(())
    }
}

/// The request `Op::Send` picked, at `version` (negotiated when `None`).
fn request_of(which: usize, version: Option<i16>) -> Box<dyn EncodeRequest> {
    fn typed<R: Request + Send + 'static>(
        request: R,
        version: Option<i16>,
    ) -> Box<dyn EncodeRequest> {
        Box::new(TypedRequest {
            request,
            version,
            addr: Arc::from(ADDR),
            timeout: None,
        })
    }
    match which {
        0 => typed(MetadataRequest::default().with_topics(None), version),
        1 => typed(ProduceRequest::default().with_acks(1), version),
        2 => typed(ProduceRequest::default().with_acks(0), version),
        3 => typed(FetchRequest::default(), version),
        4 => typed(ListOffsetsRequest::default(), version),
        5 => typed(ApiVersionsRequest::default(), version),
        _ => typed(FindCoordinatorRequest::default(), version),
    }
}
