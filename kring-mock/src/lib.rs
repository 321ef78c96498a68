//! kring-mock: test doubles for code that uses kring. Add it as a dev-dependency
//! (`kring-mock = { path = ".../kring-mock" }`); it builds only on kring's public API.
//!
//! - [`MockBroker`] (Sarama's `MockBroker`): one scriptable broker. Requests are decoded
//!   with the generated protocol types, recorded in a history, and answered by
//!   expectations, per-API handlers ([`MockResponse`]: closures, the `Mock*Response`
//!   builders, [`MockSequence`], or a fixed [`Reply`]), with injectable latency, error
//!   codes and dropped connections. ApiVersions is answered by default with every
//!   version kring speaks, so kring's handshake works without setup.
//! - [`FakeCluster`] (modelled on franz-go's kfake): an in-memory multi-broker cluster
//!   with topics, partition leaders, an append-only log per partition, offsets,
//!   coordinators and simple consumer groups, good enough for a producer and a consumer
//!   to round-trip records. A control hook intercepts any request; calls move leaders
//!   and take brokers down.
//!
//! - [`MockProducer`], [`MockSyncProducer`] and [`MockConsumer`] (Sarama's `mocks`
//!   package): no sockets at all, for unit tests of code written against the traits
//!   [`kring::producer::RecordProducer`], [`kring::producer::SyncRecordProducer`],
//!   [`kring::consumer::MessageSource`] and [`kring::consumer::PartitionSource`], which
//!   kring's real producer and consumer implement. Each call is checked against
//!   expectations the test sets up ("expect a send, then succeed or fail"; "expect
//!   this partition to be consumed, and yield these messages").
//!
//! MockBroker and FakeCluster serve each broker from a `std::net::TcpListener` on plain
//! threads (one per connection), so they work under any async runtime or none, and the
//! code under test talks to them exactly as it would to Kafka: a [`kring::Client`] (and
//! the producers and consumers built on it) bootstrapped from [`MockBroker::address`]
//! or [`FakeCluster::bootstrap`].
//!
//! Invariants:
//! - Nothing a client sends makes the test process panic. A frame that does not decode
//!   closes its connection (as a Kafka broker does) and is noted in the history of
//!   protocol errors; an ApiVersions request at a version this crate does not know gets
//!   the KIP-511 answer (v0 body, UNSUPPORTED_VERSION, the supported range).
//! - Responses on a connection go out in request order, each encoded at its request's
//!   version with the header version that API and version call for.
//! - A Produce request with `acks = 0` is never answered, whatever the script says.
//! - [`FakeCluster`] is deterministic: topic ids, partition placement, offsets,
//!   producer ids, member ids and coordinators are functions of the calls and requests
//!   it has seen, never of a clock or a random number generator. Only waits (Fetch
//!   `max_wait_ms`, a rebalance's timeout, injected delays) use the clock.

mod broker;
mod cluster;
mod consumer;
mod generated;
mod producer;
mod responses;
mod server;

use std::time::Duration;

use bytes::Bytes;

pub use broker::{MockBroker, RequestResponse};
pub use cluster::{
    ControlId, EndedTxn, FakeCluster, FakeClusterBuilder, Handed, request_group,
    request_transactional_id,
};
pub use consumer::{MockConsumer, MockPartitionConsumer, MockPartitionHandle};
pub use generated::error_response::error_response;
pub use producer::{ExpectSend, MockProducer, MockSyncProducer, SentRecord};
pub use responses::{
    MockApiVersionsResponse, MockFetchResponse, MockFindCoordinatorResponse, MockHeartbeatResponse,
    MockInitProducerIdResponse, MockJoinGroupResponse, MockLeaveGroupResponse,
    MockListOffsetsResponse, MockMetadataResponse, MockOffsetCommitResponse,
    MockOffsetFetchResponse, MockProduceResponse, MockResponse, MockSequence,
    MockSyncGroupResponse, record_batch, topic_id,
};

use kring::protocol::{
    ApiKey, KafkaCode, Request, RequestHeader, RequestKind, Response, ResponseKind,
};

/// Errors of the mock broker and the fake cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    /// The listening socket could not be opened.
    #[error("binding a mock broker to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A listener thread could not be started.
    #[error("starting a mock broker thread: {0}")]
    Thread(#[source] std::io::Error),
    /// [`MockBroker::close`] or [`MockBroker::verify`] found expectations left unused,
    /// requests nothing was set up to answer, or handlers that panicked.
    #[error("mock broker {broker_id}: {}", report(.unused, .unhandled, .failures))]
    Unverified {
        /// The broker.
        broker_id: i32,
        /// Expectations never met.
        unused: Vec<String>,
        /// Requests that no expectation, handler or default answered.
        unhandled: Vec<String>,
        /// Handlers that panicked, responses that did not fit their request, frames
        /// that failed to encode.
        failures: Vec<String>,
    },
    /// A client mock ([`MockProducer`], [`MockSyncProducer`], [`MockConsumer`]) found
    /// expectations left unmet, calls nothing was set up for, or records a checker
    /// rejected (see [`MockProducer::verify`], [`MockConsumer::verify`]).
    #[error("{mock}: {}", report(.unused, .unexpected, .failures))]
    ClientUnverified {
        /// Which mock.
        mock: &'static str,
        /// Expectations never met.
        unused: Vec<String>,
        /// Calls that no expectation was set up for.
        unexpected: Vec<String>,
        /// Other problems: records a checker rejected, sends with no expectation left,
        /// messages yielded but never consumed.
        failures: Vec<String>,
    },
    /// No topic of that name.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The topic exists but not that partition.
    #[error("unknown partition {topic}-{partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// A topic of that name exists already.
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    /// No broker with that id.
    #[error("unknown broker {0}")]
    UnknownBroker(i32),
    /// The broker is down.
    #[error("broker {0} is down")]
    BrokerDown(i32),
    /// An argument out of range (a partition count, a replication factor, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A record batch given to the fake cluster does not parse or fails its CRC.
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),
}

fn report(unused: &[String], unhandled: &[String], failures: &[String]) -> String {
    let mut parts = Vec::new();
    if !unused.is_empty() {
        parts.push(format!(
            "{} expectation(s) unused: {}",
            unused.len(),
            unused.join("; ")
        ));
    }
    if !unhandled.is_empty() {
        parts.push(format!(
            "{} request(s) unhandled: {}",
            unhandled.len(),
            unhandled.join("; ")
        ));
    }
    if !failures.is_empty() {
        parts.push(format!(
            "{} failure(s): {}",
            failures.len(),
            failures.join("; ")
        ));
    }
    parts.join(", ")
}

/// A record as `(key, value)`, for the test-data helpers ([`record_batch`],
/// [`FakeCluster::append_records`]).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// A request as a mock broker or the fake cluster received it: the decoded header and
/// body, the raw body bytes, and where it came from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReceivedRequest {
    /// The id of the broker that received it.
    pub broker_id: i32,
    /// Which of that broker's connections carried it (0 for the first accepted).
    pub connection: u64,
    /// The request header.
    pub header: RequestHeader,
    /// The API.
    pub api_key: ApiKey,
    /// The request version (the response is encoded at the same version).
    pub version: i16,
    /// The decoded body.
    pub request: RequestKind,
    body: Bytes,
}

impl ReceivedRequest {
    /// The correlation id from the header.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }

    /// The client id from the header.
    pub fn client_id(&self) -> Option<&str> {
        self.header.client_id.as_deref()
    }

    /// The body as it arrived, after the header.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body as the typed request `R`, if this request is of `R`'s API.
    ///
    /// ```
    /// # use kring_mock::ReceivedRequest;
    /// use kring::protocol::messages::ProduceRequest;
    /// fn acks(request: &ReceivedRequest) -> Option<i16> {
    ///     request.decode::<ProduceRequest>().map(|p| p.acks)
    /// }
    /// ```
    pub fn decode<R: Request>(&self) -> Option<R> {
        if R::API_KEY != self.api_key {
            return None;
        }
        R::decode(&mut self.body.clone(), self.version).ok()
    }

    /// A short description for reports: `Produce v11 (correlation 4, connection 0)`.
    pub fn describe(&self) -> String {
        format!(
            "{} v{} (broker {}, connection {}, correlation {})",
            self.api_key.name(),
            self.version,
            self.broker_id,
            self.connection,
            self.header.correlation_id
        )
    }
}

/// What to do with one request: answer it (now or after a delay), answer it with an
/// error response built from the request, never answer it, close its connection, or
/// pass it on to whatever comes next (the next handler of a [`MockBroker`], the fake
/// cluster's own logic behind a control hook).
///
/// Any `Reply` is also a [`MockResponse`] that answers every request the same way: a
/// fixed response.
///
/// ```
/// use std::time::Duration;
/// use kring_mock::Reply;
/// use kring::protocol::KafkaCode;
/// use kring::protocol::messages::HeartbeatResponse;
///
/// let ok = Reply::from(HeartbeatResponse::default());
/// let slow_error =
///     Reply::error(KafkaCode::REBALANCE_IN_PROGRESS).after(Duration::from_millis(50));
/// let drop_it = Reply::close();
/// # let _ = (ok, slow_error, drop_it);
/// ```
#[derive(Debug, Clone)]
pub struct Reply {
    delay: Duration,
    action: Action,
}

/// The action of a [`Reply`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Action {
    /// Send this response (it must be of the request's API).
    Respond(Box<ResponseKind>),
    /// Send the request's error response with this code in every error field
    /// (see [`error_response`]).
    Error(KafkaCode),
    /// Read the request and never answer it.
    Ignore,
    /// Close the connection without answering.
    Close,
    /// Let the next layer decide (after the delay, if any).
    Pass,
}

impl Reply {
    /// Answer with `response`.
    pub fn respond<R: Response>(response: R) -> Reply {
        Reply::respond_kind(response.into_kind())
    }

    /// Answer with `response`, given as the run-time [`ResponseKind`].
    pub fn respond_kind(response: ResponseKind) -> Reply {
        Reply {
            delay: Duration::ZERO,
            action: Action::Respond(Box::new(response)),
        }
    }

    /// Answer with the request's error response carrying `code` (see [`error_response`]).
    pub fn error(code: KafkaCode) -> Reply {
        Reply {
            delay: Duration::ZERO,
            action: Action::Error(code),
        }
    }

    /// Never answer: the client's request times out (and, on a pipelined connection,
    /// the answer to the next request arrives with an unexpected correlation id).
    pub fn ignore() -> Reply {
        Reply {
            delay: Duration::ZERO,
            action: Action::Ignore,
        }
    }

    /// Close the connection without answering.
    pub fn close() -> Reply {
        Reply {
            delay: Duration::ZERO,
            action: Action::Close,
        }
    }

    /// No opinion: the next layer handles the request. With [`Reply::after`], a delay
    /// and then normal handling.
    pub fn pass() -> Reply {
        Reply {
            delay: Duration::ZERO,
            action: Action::Pass,
        }
    }

    /// Delays the action by `delay` (added to any delay already set).
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = self.delay.saturating_add(delay);
        self
    }

    /// The delay before the action.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// The action.
    pub fn action(&self) -> &Action {
        &self.action
    }

    /// Whether this reply leaves the request to the next layer.
    pub fn is_pass(&self) -> bool {
        matches!(self.action, Action::Pass)
    }
}

impl<R: Response> From<R> for Reply {
    fn from(response: R) -> Reply {
        Reply::respond(response)
    }
}

// No `From<ResponseKind>`: outside kring, coherence cannot rule out that ResponseKind
// implements `Response` one day, so it would overlap the impl above. Use
// `Reply::respond_kind`.
