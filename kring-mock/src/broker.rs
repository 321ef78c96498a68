//! [`MockBroker`]: one scriptable broker on a loopback socket (Sarama's `MockBroker`).
//!
//! Each request is answered by the first of these that has an opinion:
//! 1. a pending fault: [`MockBroker::close_after`] closes the connection, an error set by
//!    [`MockBroker::set_error`] answers with that code;
//! 2. the oldest pending expectation for the request's API ([`MockBroker::expect`]),
//!    which is then used up;
//! 3. the handler set for the API ([`MockBroker::set_handler`]);
//! 4. the default ApiVersions answer (every API and version kring speaks).
//!
//! A handler may [`Reply::pass`] to the next layer. A request nothing answers is
//! recorded as unhandled and its connection is closed, so the client fails fast instead
//! of waiting for a timeout. Every request, with what was done about it, goes into the
//! history. [`MockBroker::close`] reports expectations left unused, unhandled requests
//! and handler panics.

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kring::protocol::messages::ApiVersionsResponse;
use kring::protocol::{ApiKey, KafkaCode, Request, RequestKind, ResponseKind};

use super::responses::MockApiVersionsResponse;
use super::server::{ConnCtx, Outcome, Server, Service, lock, resolve};
use super::{MockError, MockResponse, ReceivedRequest, Reply};

/// One request a [`MockBroker`] received and what it did about it (Sarama's
/// `RequestResponse`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RequestResponse {
    /// The request.
    pub request: ReceivedRequest,
    /// The response sent, if one was (`None`: ignored, closed, unhandled, or a
    /// Produce with `acks = 0`).
    pub response: Option<ResponseKind>,
    /// Whether the connection was closed instead of answering.
    pub closed: bool,
}

struct Expectation {
    api: Option<ApiKey>,
    remaining: usize,
    response: Arc<dyn MockResponse>,
}

#[derive(Default)]
struct State {
    handlers: BTreeMap<ApiKey, Arc<dyn MockResponse>>,
    expectations: VecDeque<Expectation>,
    errors: BTreeMap<ApiKey, KafkaCode>,
    latency: Duration,
    /// Requests (ApiVersions aside) still to answer before closing a connection.
    close_after: Option<usize>,
    history: Vec<RequestResponse>,
    unhandled: Vec<String>,
    failures: Vec<String>,
    malformed: Vec<String>,
}

struct Inner {
    id: i32,
    state: Mutex<State>,
}

impl Inner {
    fn record(&self, request: &ReceivedRequest, outcome: &Outcome) {
        let acks_zero = matches!(&request.request, RequestKind::Produce(p) if p.acks == 0);
        let entry = RequestResponse {
            request: request.clone(),
            response: match outcome {
                Outcome::Respond(r) if !acks_zero => Some(ResponseKind::clone(r)),
                _ => None,
            },
            closed: matches!(outcome, Outcome::Close),
        };
        lock(&self.state).history.push(entry);
    }

    /// Picks the reply, in the documented order, without holding the lock while a
    /// handler runs. Returns what to do and how long to wait first.
    fn choose(&self, request: &ReceivedRequest) -> (Outcome, Duration) {
        let api = request.api_key;
        let (layers, latency) = {
            let mut st = lock(&self.state);
            let mut fault: Option<Arc<dyn MockResponse>> = None;
            if api != ApiKey::ApiVersions {
                match st.close_after {
                    Some(0) => {
                        st.close_after = None;
                        fault = Some(Arc::new(Reply::close()));
                    }
                    Some(n) => st.close_after = Some(n - 1),
                    None => {}
                }
            }
            if fault.is_none() {
                if let Some(&code) = st.errors.get(&api) {
                    fault = Some(Arc::new(Reply::error(code)));
                }
            }
            let mut expectation = None;
            if fault.is_none() {
                let matching = st.expectations.iter().position(|e| match e.api {
                    Some(a) => a == api,
                    None => api != ApiKey::ApiVersions,
                });
                if let Some(i) = matching {
                    let e = &mut st.expectations[i];
                    e.remaining -= 1;
                    expectation = Some(e.response.clone());
                    if e.remaining == 0 {
                        st.expectations.remove(i);
                    }
                }
            }
            let handler = st.handlers.get(&api).cloned();
            ([fault, expectation, handler], st.latency)
        };
        let mut delay = latency;
        for layer in layers.into_iter().flatten() {
            let reply = layer.respond(request);
            delay = delay.saturating_add(reply.delay());
            match resolve(&reply, request) {
                Ok(Some(outcome)) => return (outcome, delay),
                Ok(None) => {}
                Err(what) => {
                    lock(&self.state).failures.push(what);
                    return (Outcome::Close, delay);
                }
            }
        }
        if api == ApiKey::ApiVersions {
            let answer = MockApiVersionsResponse::new().build();
            let answer = Box::new(ResponseKind::ApiVersions(answer));
            return (Outcome::Respond(answer), delay);
        }
        lock(&self.state).unhandled.push(request.describe());
        (Outcome::Close, delay)
    }
}

struct BrokerService(Arc<Inner>);

impl Service for BrokerService {
    fn handle(&self, ctx: &ConnCtx<'_>, request: &ReceivedRequest) -> Outcome {
        let (outcome, delay) = self.0.choose(request);
        self.0.record(request, &outcome);
        if !ctx.signal.sleep(delay) {
            return Outcome::Close;
        }
        outcome
    }

    fn api_versions(&self) -> ApiVersionsResponse {
        MockApiVersionsResponse::new().build()
    }

    fn malformed(&self, _broker_id: i32, what: String) {
        lock(&self.0.state).malformed.push(what);
    }

    fn failure(&self, what: String) {
        lock(&self.0.state).failures.push(what);
    }
}

/// A scriptable Kafka broker on a loopback socket, for tests.
///
/// ```
/// use kring::producer::{Producer, ProducerRecord};
/// use kring::protocol::messages::ProduceRequest;
/// use kring::protocol::{ApiKey, KafkaCode};
/// use kring::{Client, Config};
/// use kring_mock::{MockBroker, MockMetadataResponse, MockProduceResponse};
///
/// let broker = MockBroker::new(1)?;
/// broker.set_handler(
///     ApiKey::Metadata,
///     MockMetadataResponse::new().broker_of(&broker).leader("events", 0, broker.id()),
/// );
/// // The first produce fails with a retriable error; the retry lands at offset 42.
/// broker.expect(
///     ApiKey::Produce,
///     MockProduceResponse::new().error("events", 0, KafkaCode::NOT_ENOUGH_REPLICAS),
/// );
/// broker.set_handler(ApiKey::Produce, MockProduceResponse::new().offset("events", 0, 42));
///
/// // The code under test: kring's own producer, bootstrapped from the mock.
/// let mut config = Config::new([broker.address()]);
/// config.producer.enable_idempotence = false; // no InitProducerId to script
/// let producer = Producer::new_blocking(Client::connect_blocking(config)?)?;
/// let record = ProducerRecord::new("events").with_partition(0).with_value("hello");
/// let delivered = producer.send_blocking(record)?.wait()?;
/// assert_eq!((delivered.partition, delivered.offset), (0, 42));
/// producer.close_blocking()?;
///
/// // The failed Produce and its retry, each decoded in the history.
/// let produced = broker.requests::<ProduceRequest>();
/// assert_eq!(produced.len(), 2);
/// assert_eq!(produced[1].topic_data[0].name, "events");
/// broker.close()?; // fails if an expectation was left unused
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MockBroker {
    inner: Arc<Inner>,
    server: Server,
}

impl std::fmt::Debug for MockBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockBroker")
            .field("id", &self.inner.id)
            .field("addr", &self.server.addr())
            .finish_non_exhaustive()
    }
}

impl MockBroker {
    /// A mock broker with id `id` on an ephemeral loopback port.
    pub fn new(id: i32) -> Result<MockBroker, MockError> {
        Self::bind("127.0.0.1:0", id)
    }

    /// A mock broker with id `id` listening on `addr` (e.g. to restart a broker at the
    /// address a client already knows).
    pub fn bind(addr: impl ToSocketAddrs, id: i32) -> Result<MockBroker, MockError> {
        let addr: SocketAddr = addr
            .to_socket_addrs()
            .map_err(|source| MockError::Bind {
                addr: "(unresolved)".into(),
                source,
            })?
            .next()
            .ok_or_else(|| MockError::Bind {
                addr: "(unresolved)".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AddrNotAvailable,
                    "resolved to nothing",
                ),
            })?;
        let inner = Arc::new(Inner {
            id,
            state: Mutex::new(State::default()),
        });
        let server = Server::bind(addr, id, Arc::new(BrokerService(inner.clone())))?;
        Ok(MockBroker { inner, server })
    }

    /// The broker id.
    pub fn id(&self) -> i32 {
        self.inner.id
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The address as `host:port`, as kring's connection calls take it.
    pub fn address(&self) -> String {
        self.server.addr().to_string()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.server.addr().port()
    }

    /// Answers every request of `api` with `handler` (replacing any earlier one).
    pub fn set_handler(&self, api: ApiKey, handler: impl MockResponse) {
        lock(&self.inner.state)
            .handlers
            .insert(api, Arc::new(handler));
    }

    /// Removes the handler of `api`.
    pub fn remove_handler(&self, api: ApiKey) {
        lock(&self.inner.state).handlers.remove(&api);
    }

    /// Expects one request of `api`, answered by `response`. Expectations are used
    /// oldest first, ahead of handlers; [`MockBroker::close`] reports those unused.
    pub fn expect(&self, api: ApiKey, response: impl MockResponse) {
        self.push_expectation(Some(api), 1, Arc::new(response));
    }

    /// Expects `times` requests of `api`, each answered by `response`.
    pub fn expect_times(&self, api: ApiKey, times: usize, response: impl MockResponse) {
        if times > 0 {
            self.push_expectation(Some(api), times, Arc::new(response));
        }
    }

    /// Expects one request of any API except ApiVersions, answered by `response`
    /// (Sarama's `Returns`).
    pub fn expect_any(&self, response: impl MockResponse) {
        self.push_expectation(None, 1, Arc::new(response));
    }

    fn push_expectation(&self, api: Option<ApiKey>, times: usize, response: Arc<dyn MockResponse>) {
        lock(&self.inner.state).expectations.push_back(Expectation {
            api,
            remaining: times,
            response,
        });
    }

    /// Answers every request of `api` with an error response carrying `code` (see
    /// [`super::error_response`]), ahead of expectations and handlers.
    pub fn set_error(&self, api: ApiKey, code: KafkaCode) {
        lock(&self.inner.state).errors.insert(api, code);
    }

    /// Stops answering `api` with an error.
    pub fn clear_error(&self, api: ApiKey) {
        lock(&self.inner.state).errors.remove(&api);
    }

    /// Delays every answer by `latency` (on top of any delay a reply carries).
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.inner.state).latency = latency;
    }

    /// Answers the next `n` requests (ApiVersions handshakes not counted), then closes
    /// the connection that carries the one after, without answering it. Requests
    /// pipelined behind it on that connection fail with it. Fires once.
    pub fn close_after(&self, n: usize) {
        lock(&self.inner.state).close_after = Some(n);
    }

    /// Closes every open connection now (the broker keeps listening).
    pub fn disconnect_all(&self) {
        self.server.disconnect_all();
    }

    /// Every request so far, oldest first, with what was answered (kept in full until
    /// [`MockBroker::clear_history`]).
    pub fn history(&self) -> Vec<RequestResponse> {
        lock(&self.inner.state).history.clone()
    }

    /// The requests of type `R` received so far, decoded.
    pub fn requests<R: Request>(&self) -> Vec<R> {
        lock(&self.inner.state)
            .history
            .iter()
            .filter_map(|e| e.request.decode::<R>())
            .collect()
    }

    /// Forgets the history.
    pub fn clear_history(&self) {
        lock(&self.inner.state).history.clear();
    }

    /// Request frames that did not decode (their connections were closed).
    pub fn protocol_errors(&self) -> Vec<String> {
        lock(&self.inner.state).malformed.clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.server.connections()
    }

    /// Checks that every expectation was used, every request answered and no
    /// handler failed, without closing.
    pub fn verify(&self) -> Result<(), MockError> {
        let st = lock(&self.inner.state);
        let unused: Vec<String> = st
            .expectations
            .iter()
            .map(|e| format!("{} x{}", e.api.map_or("any API", |a| a.name()), e.remaining))
            .collect();
        if unused.is_empty() && st.unhandled.is_empty() && st.failures.is_empty() {
            return Ok(());
        }
        Err(MockError::Unverified {
            broker_id: self.inner.id,
            unused,
            unhandled: st.unhandled.clone(),
            failures: st.failures.clone(),
        })
    }

    /// Stops the broker (its port is released and connections closed) and reports
    /// expectations left unused, requests nothing answered and handler failures.
    pub fn close(mut self) -> Result<(), MockError> {
        self.server.stop();
        self.verify()
    }
}
