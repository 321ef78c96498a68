//! Metrics through the [`metrics`](https://docs.rs/metrics) crate's facade: kring
//! records, the application decides where they go (Prometheus, StatsD, OpenTelemetry,
//! logs) by installing a recorder, e.g. `metrics-exporter-prometheus`.
//!
//! Install the recorder **before** [`Client::connect`](crate::Client::connect): kring
//! registers each metric once, when the connection, producer, consumer or group that
//! records it is created, and then updates the handle (an atomic operation with a real
//! recorder, a branch without one). Everything is recorded per request, per batch or per
//! fetch, never per record, so an installed recorder costs little per record.
//!
//! Every name, with its labels:
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `kring_broker_requests_total` | counter | `broker`, `api` | requests answered (or written, for acks=0) |
//! | `kring_broker_request_latency_seconds` | histogram | `broker`, `api` | from writing a request to reading its answer |
//! | `kring_broker_request_errors_total` | counter | `broker`, `kind` | requests that failed in the connection (`timeout`, `disconnected`, ...) |
//! | `kring_broker_requests_in_flight` | gauge | `broker` | requests written and awaiting their answer |
//! | `kring_broker_sent_bytes_total` | counter | `broker` | bytes written to the socket (after TLS) |
//! | `kring_broker_received_bytes_total` | counter | `broker` | bytes read from the socket (before TLS) |
//! | `kring_broker_connects_total` | counter | `broker` | connections made ready (handshake and authentication done) |
//! | `kring_broker_disconnects_total` | counter | `broker` | connections lost or failed while being set up |
//! | `kring_producer_records_total` | counter | `topic` | records acknowledged |
//! | `kring_producer_batches_total` | counter | `topic` | batches acknowledged |
//! | `kring_producer_batch_records` | histogram | — | records per acknowledged batch (batch fill) |
//! | `kring_producer_batch_bytes` | histogram | — | bytes per acknowledged batch, as sent |
//! | `kring_producer_compression_ratio` | histogram | — | sent ÷ uncompressed bytes, per compressed batch |
//! | `kring_producer_delivery_latency_seconds` | histogram | — | from a batch's first record to its acknowledgement |
//! | `kring_producer_retries_total` | counter | `topic` | batch attempts answered with a retriable error |
//! | `kring_producer_errors_total` | counter | `topic`, `error` | batches answered with a non-retriable error |
//! | `kring_producer_queued_records` | gauge | `broker` | records waiting in a broker's sink or on the wire |
//! | `kring_producer_buffer_bytes` | gauge | — | `buffer.memory` in use |
//! | `kring_consumer_records_total` | counter | `topic` | records handed to the application |
//! | `kring_consumer_bytes_total` | counter | `topic` | batch bytes handed to the application |
//! | `kring_consumer_lag` | gauge | `topic`, `partition` | high watermark − position, at each fetched chunk |
//! | `kring_consumer_errors_total` | counter | `topic`, `error` | errors reported to a partition consumer |
//! | `kring_consumer_prefetch_bytes` | gauge | — | fetched bytes not yet consumed (`kring.fetch.buffer.memory` in use) |
//! | `kring_group_rebalances_total` | counter | `group` | assignments received (each generation, each KIP-848 epoch change) |
//! | `kring_group_assigned_partitions` | gauge | `group` | partitions this member owns |
//! | `kring_group_commits_total` | counter | `group` | offset commits that succeeded |
//! | `kring_group_commit_errors_total` | counter | `group` | offset commits that failed |
//!
//! A broker's label is its node id, or its address while it has none (bootstrap
//! connections). Fetch latency is `kring_broker_request_latency_seconds{api="Fetch"}`,
//! produce request latency the same with `api="Produce"`.

use std::cell::RefCell;
use std::sync::Once;

use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

use crate::protocol::ApiKey;

/// The names, for applications that look metrics up.
pub mod names {
    #![allow(missing_docs)]
    pub const BROKER_REQUESTS: &str = "kring_broker_requests_total";
    pub const BROKER_REQUEST_LATENCY: &str = "kring_broker_request_latency_seconds";
    pub const BROKER_REQUEST_ERRORS: &str = "kring_broker_request_errors_total";
    pub const BROKER_IN_FLIGHT: &str = "kring_broker_requests_in_flight";
    pub const BROKER_SENT_BYTES: &str = "kring_broker_sent_bytes_total";
    pub const BROKER_RECEIVED_BYTES: &str = "kring_broker_received_bytes_total";
    pub const BROKER_CONNECTS: &str = "kring_broker_connects_total";
    pub const BROKER_DISCONNECTS: &str = "kring_broker_disconnects_total";
    pub const PRODUCER_RECORDS: &str = "kring_producer_records_total";
    pub const PRODUCER_BATCHES: &str = "kring_producer_batches_total";
    pub const PRODUCER_BATCH_RECORDS: &str = "kring_producer_batch_records";
    pub const PRODUCER_BATCH_BYTES: &str = "kring_producer_batch_bytes";
    pub const PRODUCER_COMPRESSION_RATIO: &str = "kring_producer_compression_ratio";
    pub const PRODUCER_DELIVERY_LATENCY: &str = "kring_producer_delivery_latency_seconds";
    pub const PRODUCER_RETRIES: &str = "kring_producer_retries_total";
    pub const PRODUCER_ERRORS: &str = "kring_producer_errors_total";
    pub const PRODUCER_QUEUED_RECORDS: &str = "kring_producer_queued_records";
    pub const PRODUCER_BUFFER_BYTES: &str = "kring_producer_buffer_bytes";
    pub const CONSUMER_RECORDS: &str = "kring_consumer_records_total";
    pub const CONSUMER_BYTES: &str = "kring_consumer_bytes_total";
    pub const CONSUMER_LAG: &str = "kring_consumer_lag";
    pub const CONSUMER_ERRORS: &str = "kring_consumer_errors_total";
    pub const CONSUMER_PREFETCH_BYTES: &str = "kring_consumer_prefetch_bytes";
    pub const GROUP_REBALANCES: &str = "kring_group_rebalances_total";
    pub const GROUP_ASSIGNED_PARTITIONS: &str = "kring_group_assigned_partitions";
    pub const GROUP_COMMITS: &str = "kring_group_commits_total";
    pub const GROUP_COMMIT_ERRORS: &str = "kring_group_commit_errors_total";
}

use names::*;

/// Describes every metric to the installed recorder (units and help texts), once per
/// process; called when a client connects.
pub(crate) fn describe() {
    static ONCE: Once = Once::new();
    ONCE.call_once(describe_all);
}

fn describe_all() {
    use metrics::{describe_counter as c, describe_gauge as g, describe_histogram as h};
    c!(
        BROKER_REQUESTS,
        Unit::Count,
        "Requests answered (or written, for acks=0)"
    );
    h!(
        BROKER_REQUEST_LATENCY,
        Unit::Seconds,
        "From writing a request to reading its answer"
    );
    c!(
        BROKER_REQUEST_ERRORS,
        Unit::Count,
        "Requests that failed in the connection, by kind"
    );
    g!(
        BROKER_IN_FLIGHT,
        Unit::Count,
        "Requests awaiting their answer"
    );
    c!(
        BROKER_SENT_BYTES,
        Unit::Bytes,
        "Bytes written to the socket"
    );
    c!(
        BROKER_RECEIVED_BYTES,
        Unit::Bytes,
        "Bytes read from the socket"
    );
    c!(BROKER_CONNECTS, Unit::Count, "Connections made ready");
    c!(
        BROKER_DISCONNECTS,
        Unit::Count,
        "Connections lost or failed in setup"
    );
    c!(PRODUCER_RECORDS, Unit::Count, "Records acknowledged");
    c!(PRODUCER_BATCHES, Unit::Count, "Batches acknowledged");
    h!(PRODUCER_BATCH_RECORDS, Unit::Count, "Records per batch");
    h!(
        PRODUCER_BATCH_BYTES,
        Unit::Bytes,
        "Bytes per batch, as sent"
    );
    h!(
        PRODUCER_COMPRESSION_RATIO,
        "Sent over uncompressed bytes, per compressed batch"
    );
    h!(
        PRODUCER_DELIVERY_LATENCY,
        Unit::Seconds,
        "From a batch's first record to its acknowledgement"
    );
    c!(
        PRODUCER_RETRIES,
        Unit::Count,
        "Batch attempts to be retried"
    );
    c!(
        PRODUCER_ERRORS,
        Unit::Count,
        "Batches refused for good, by error"
    );
    g!(
        PRODUCER_QUEUED_RECORDS,
        Unit::Count,
        "Records not yet acknowledged"
    );
    g!(PRODUCER_BUFFER_BYTES, Unit::Bytes, "buffer.memory in use");
    c!(
        CONSUMER_RECORDS,
        Unit::Count,
        "Records handed to the application"
    );
    c!(
        CONSUMER_BYTES,
        Unit::Bytes,
        "Batch bytes handed to the application"
    );
    g!(CONSUMER_LAG, Unit::Count, "High watermark minus position");
    c!(
        CONSUMER_ERRORS,
        Unit::Count,
        "Errors reported to partition consumers"
    );
    g!(
        CONSUMER_PREFETCH_BYTES,
        Unit::Bytes,
        "Fetched bytes not yet consumed"
    );
    c!(GROUP_REBALANCES, Unit::Count, "Assignments received");
    g!(GROUP_ASSIGNED_PARTITIONS, Unit::Count, "Partitions owned");
    c!(GROUP_COMMITS, Unit::Count, "Offset commits that succeeded");
    c!(
        GROUP_COMMIT_ERRORS,
        Unit::Count,
        "Offset commits that failed"
    );
}

/// The label of broker `id` at `addr`.
pub(crate) fn broker_label(id: i32, addr: &str) -> SharedString {
    if id >= 0 {
        SharedString::from(id.to_string())
    } else {
        SharedString::from(addr.to_string())
    }
}

/// One metric's counters by the value of a label known only as events come (an error's
/// name): each registered on its first event, then found again.
pub(crate) struct CountersBy {
    name: &'static str,
    /// The label every counter has (the broker, the topic).
    fixed: (&'static str, SharedString),
    label: &'static str,
    counters: Vec<(&'static str, Counter)>,
}

impl CountersBy {
    pub fn new(
        name: &'static str,
        fixed: (&'static str, SharedString),
        label: &'static str,
    ) -> Self {
        CountersBy {
            name,
            fixed,
            label,
            counters: Vec::new(),
        }
    }

    /// Counts one event whose label is `value`.
    pub fn increment(&mut self, value: &'static str) {
        if let Some((_, c)) = self.counters.iter().find(|(v, _)| *v == value) {
            c.increment(1);
            return;
        }
        let labels = [
            self.fixed.clone(),
            (self.label, SharedString::const_str(value)),
        ];
        let c = metrics::counter!(self.name, &labels);
        c.increment(1);
        self.counters.push((value, c));
    }
}

/// One API's handles on one connection.
struct ApiMetrics {
    api: ApiKey,
    requests: Counter,
    latency: Histogram,
}

/// A connection's handles, owned by its task (single-threaded: the per-API handles are
/// registered on first use).
pub(crate) struct BrokerMetrics {
    broker: SharedString,
    apis: RefCell<Vec<ApiMetrics>>,
    errors: RefCell<CountersBy>,
    pub sent_bytes: Counter,
    pub received_bytes: Counter,
    pub in_flight: Gauge,
    pub connects: Counter,
    pub disconnects: Counter,
}

impl BrokerMetrics {
    pub fn new(broker: SharedString) -> Self {
        let b = || [("broker", broker.clone())];
        BrokerMetrics {
            sent_bytes: metrics::counter!(BROKER_SENT_BYTES, &b()),
            received_bytes: metrics::counter!(BROKER_RECEIVED_BYTES, &b()),
            in_flight: metrics::gauge!(BROKER_IN_FLIGHT, &b()),
            connects: metrics::counter!(BROKER_CONNECTS, &b()),
            disconnects: metrics::counter!(BROKER_DISCONNECTS, &b()),
            apis: RefCell::new(Vec::new()),
            errors: RefCell::new(CountersBy::new(
                BROKER_REQUEST_ERRORS,
                ("broker", broker.clone()),
                "kind",
            )),
            broker,
        }
    }

    /// A request of `api` was answered after `latency`.
    pub fn answered(&self, api: ApiKey, latency: std::time::Duration) {
        let mut apis = self.apis.borrow_mut();
        let i = match apis.iter().position(|a| a.api == api) {
            Some(i) => i,
            None => {
                let labels = [
                    ("broker", self.broker.clone()),
                    ("api", SharedString::const_str(api.name())),
                ];
                apis.push(ApiMetrics {
                    api,
                    requests: metrics::counter!(BROKER_REQUESTS, &labels),
                    latency: metrics::histogram!(BROKER_REQUEST_LATENCY, &labels),
                });
                apis.len() - 1
            }
        };
        apis[i].requests.increment(1);
        apis[i].latency.record(latency.as_secs_f64());
    }

    /// A request failed in the connection with an error of `kind`.
    pub fn failed(&self, kind: &'static str) {
        self.errors.borrow_mut().increment(kind);
    }
}
