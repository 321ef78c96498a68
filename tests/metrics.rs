//! Metrics and interceptors against the real broker, read through the `metrics` crate's
//! debugging recorder (installed once for this test binary, before any client): a
//! compressed produce and a consume of the same records show up in the broker,
//! producer and consumer metrics with the right counts, and the interceptors see every
//! record sent, every batch acknowledged and every batch consumed.

mod common;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use common::{client, config, create_topic, unique};
use kring::config::Compression;
use kring::consumer::{ConsumedBatch, Consumer, ConsumerInterceptor, Offset};
use kring::group::{GroupConsumer, Topics};
use kring::metrics::names;
use kring::producer::{Acknowledgement, Producer, ProducerInterceptor, ProducerRecord};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

type Series = (MetricKind, String, Vec<(String, String)>, DebugValue);

/// Every metric since the previous snapshot. The debugging recorder resets counters and
/// gauges and drains histograms at each snapshot, so each phase of the test takes one
/// and asks it everything (and the binary has one test, so nothing else reads them).
struct Snapshot(Vec<Series>);

impl Snapshot {
    fn take() -> Snapshot {
        let series = snapshotter()
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value): (CompositeKey, _, _, DebugValue)| {
                let (kind, key) = key.into_parts();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_string(), l.value().to_string()))
                    .collect();
                (kind, key.name().to_string(), labels, value)
            })
            .collect();
        Snapshot(series)
    }

    fn series<'a>(
        &'a self,
        kind: MetricKind,
        name: &'a str,
        label: Option<(&'a str, &'a str)>,
    ) -> impl Iterator<Item = &'a DebugValue> + 'a {
        self.0
            .iter()
            .filter(move |(k, n, labels, _)| {
                *k == kind
                    && n == name
                    && label.is_none_or(|(key, value)| {
                        labels.iter().any(|(k, v)| k == key && v == value)
                    })
            })
            .map(|(_, _, _, v)| v)
    }

    /// The sum of counter `name` over the series whose labels include `key=value`.
    fn counter(&self, name: &str, key: &str, value: &str) -> u64 {
        self.counters(name, Some((key, value)))
    }

    /// The sum of counter `name` over all its series.
    fn total(&self, name: &str) -> u64 {
        self.counters(name, None)
    }

    fn counters(&self, name: &str, label: Option<(&str, &str)>) -> u64 {
        self.series(MetricKind::Counter, name, label)
            .map(|v| match v {
                DebugValue::Counter(c) => *c,
                _ => 0,
            })
            .sum()
    }

    /// Every value histogram `name` recorded.
    fn histogram(&self, name: &str) -> Vec<f64> {
        self.series(MetricKind::Histogram, name, None)
            .flat_map(|v| match v {
                DebugValue::Histogram(h) => h.iter().map(|x| x.into_inner()).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn gauge(&self, name: &str, key: &str, value: &str) -> Option<f64> {
        self.series(MetricKind::Gauge, name, Some((key, value)))
            .find_map(|v| match v {
                DebugValue::Gauge(g) => Some(g.into_inner()),
                _ => None,
            })
    }
}

#[derive(Default)]
struct Counting {
    sent: AtomicU64,
    acknowledged: AtomicU64,
    batches: AtomicU64,
    first_offset: AtomicI64,
    consumed_offsets: AtomicU64,
}

impl ProducerInterceptor for Counting {
    fn on_send(&self, _: &ProducerRecord<'_>) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    fn on_acknowledgement(&self, ack: &Acknowledgement<'_>) {
        let base = ack
            .result
            .as_ref()
            .copied()
            .expect("every batch acknowledged");
        if base == 0 {
            self.first_offset.store(0, Ordering::Relaxed);
        }
        self.acknowledged
            .fetch_add(ack.records as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }
}

impl ConsumerInterceptor for Counting {
    fn on_consume(&self, batch: &ConsumedBatch<'_>) {
        let n = batch.last_offset - batch.first_offset + 1;
        self.consumed_offsets.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// One test (see [`Snapshot`]): a compressed produce, a consume of the same records,
/// then a group member's rebalance and commit.
#[test]
fn producing_consuming_and_a_group_show_in_the_metrics_and_the_interceptors_see_everything() {
    Snapshot::take(); // installs the recorder before any client, and starts from zero
    const N: u64 = 5_000;
    let topic = unique("metrics");
    let counting = Arc::new(Counting {
        first_offset: AtomicI64::new(-1),
        ..Counting::default()
    });
    let mut c = config();
    c.producer.compression = Compression::Zstd;
    c.producer.interceptors.push(counting.clone());
    c.consumer.interceptors.push(counting.clone());
    let client = client(c);
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    for i in 0..N {
        let value = format!("value {i} of a compressible payload, compressible payload");
        let _delivery = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_value(value),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();
    // The sink hands a batch's outcome to the metrics and then the interceptors just
    // after its delivery futures resolve, so a flush can return a moment before the
    // last of them ran: wait for them (bounded; the counts are what is asserted).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counting.acknowledged.load(Ordering::Relaxed) < N && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    let m = Snapshot::take();
    assert_eq!(counting.sent.load(Ordering::Relaxed), N);
    assert_eq!(counting.acknowledged.load(Ordering::Relaxed), N);
    assert_eq!(counting.first_offset.load(Ordering::Relaxed), 0);
    let batches = counting.batches.load(Ordering::Relaxed);
    assert_eq!(m.counter(names::PRODUCER_RECORDS, "topic", &topic), N);
    assert_eq!(m.counter(names::PRODUCER_BATCHES, "topic", &topic), batches);
    assert!(m.counter(names::BROKER_REQUESTS, "api", "Produce") >= 1);
    assert!(m.counter(names::BROKER_REQUESTS, "api", "Metadata") >= 1);
    assert!(m.total(names::BROKER_SENT_BYTES) > 0 && m.total(names::BROKER_RECEIVED_BYTES) > 0);
    assert!(m.total(names::BROKER_CONNECTS) >= 1);
    let fill = m.histogram(names::PRODUCER_BATCH_RECORDS);
    assert_eq!(
        fill.iter().sum::<f64>() as u64,
        N,
        "batch fill sums to the records"
    );
    let ratios = m.histogram(names::PRODUCER_COMPRESSION_RATIO);
    assert!(
        !ratios.is_empty() && ratios.iter().all(|r| *r > 0.0 && *r < 1.0),
        "zstd shrinks these batches: {ratios:?}"
    );
    assert_eq!(
        m.histogram(names::PRODUCER_DELIVERY_LATENCY).len() as u64,
        batches
    );
    let latencies = m.histogram(names::BROKER_REQUEST_LATENCY);
    assert!(!latencies.is_empty() && latencies.iter().all(|l| *l >= 0.0));
    assert_eq!(m.counter(names::PRODUCER_RETRIES, "topic", &topic), 0);

    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let mut read = 0u64;
    while read < N {
        let batch = pc.next_messages_blocking().unwrap().unwrap();
        read += batch.len() as u64;
    }
    let m = Snapshot::take();
    assert_eq!(read, N);
    assert_eq!(m.counter(names::CONSUMER_RECORDS, "topic", &topic), N);
    assert_eq!(counting.consumed_offsets.load(Ordering::Relaxed), N);
    assert!(m.counter(names::CONSUMER_BYTES, "topic", &topic) > 0);
    assert!(m.counter(names::BROKER_REQUESTS, "api", "Fetch") >= 1);
    let lag = m
        .gauge(names::CONSUMER_LAG, "topic", &topic)
        .expect("a lag gauge");
    assert!((0.0..=N as f64).contains(&lag), "lag {lag}");
    drop(pc);

    let group = unique("metrics-group");
    let mut c = config();
    c.group.group_id = Some(group.clone());
    c.consumer.auto_offset_reset = kring::config::OffsetReset::Earliest;
    let group_client = common::client(c);
    kring::client::block_on(async {
        let mut gc = GroupConsumer::subscribe(group_client.clone(), Topics::names([topic.clone()]))
            .await
            .unwrap();
        let mut seen = 0;
        while seen < 1 {
            seen += gc.next_messages().await.unwrap().unwrap().len();
        }
        gc.commit().await.unwrap();
        gc.close().await.unwrap();
    });
    let m = Snapshot::take();
    assert!(m.counter(names::GROUP_REBALANCES, "group", &group) >= 1);
    assert!(m.counter(names::GROUP_COMMITS, "group", &group) >= 1);
    assert_eq!(m.counter(names::GROUP_COMMIT_ERRORS, "group", &group), 0);
    assert!(
        m.gauge(names::GROUP_ASSIGNED_PARTITIONS, "group", &group)
            .is_some()
    );
    assert!(m.counter(names::BROKER_REQUESTS, "api", "JoinGroup") >= 1);
    group_client.close();
    client.close();
}
