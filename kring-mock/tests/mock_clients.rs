//! The client mocks (`MockProducer`, `MockSyncProducer`, `MockConsumer`) as users meet
//! them: "user code" generic over kring's producer and consumer traits, tested with the
//! mocks, and the very same code run through the real `Producer`, `SyncProducer` and
//! `Consumer` against a `FakeCluster` (so this suite needs no running Kafka).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kring::consumer::{Consumer, MessageSource, Offset, PartitionSource};
use kring::producer::{
    DeliveredBatch, Producer, ProducerBuilder, ProducerRecord, RecordProducer, SyncProducer,
    SyncRecordProducer,
};
use kring::protocol::{ApiKey, KafkaCode};
use kring::{Error, Result};
use kring_mock::{FakeCluster, MockConsumer, MockError, MockProducer, MockSyncProducer};

// ---------------------------------------------------------------------------------
// "User code": written against the traits only.
// ---------------------------------------------------------------------------------

/// Publishes orders keyed by customer with a `source` header; a record whose delivery
/// fails with a retriable error is sent once more. Returns each order's offset.
struct OrderPublisher<P> {
    producer: P,
    topic: String,
}

impl<P: RecordProducer> OrderPublisher<P> {
    async fn publish(&self, orders: &[(&str, u32)]) -> Result<Vec<i64>> {
        let mut offsets = Vec::new();
        for (customer, total) in orders {
            let value = format!("{{\"total\":{total}}}");
            let record = || {
                ProducerRecord::new(&self.topic)
                    .with_key(*customer)
                    .with_value(value.as_str())
                    .with_header("source", b"web")
            };
            let meta = match self.producer.send(record()).await?.await {
                Err(e) if e.is_retriable() => self.producer.send(record()).await?.await?,
                other => other?,
            };
            offsets.push(meta.offset);
        }
        match self.producer.flush().await {
            // flush reports every record that failed since the previous flush; each
            // delivery was awaited and handled (retried) above.
            Ok(()) | Err(Error::DeliveryFailed { .. }) => Ok(offsets),
            Err(e) => Err(e),
        }
    }
}

/// Reads `topic`/`partition` from the start until `count` orders are seen; returns the
/// sum of their totals. Fetch errors that are retriable are skipped.
async fn sum_orders(
    consumer: &dyn MessageSource,
    topic: &str,
    partition: i32,
    count: usize,
) -> Result<u64> {
    let mut source = consumer
        .consume_partition(topic, partition, Offset::Oldest)
        .await?;
    let (mut seen, mut sum) = (0, 0);
    while seen < count {
        let batch = match source.next_messages().await {
            None => break,
            Some(Err(e)) if e.error.is_retriable() => continue,
            Some(Err(e)) => return Err(e.error),
            Some(Ok(batch)) => batch,
        };
        for m in batch {
            let value = std::str::from_utf8(m.value.as_deref().unwrap_or_default())
                .map_err(|e| Error::Batch(e.to_string()))?;
            let total = value
                .trim_start_matches("{\"total\":")
                .trim_end_matches('}')
                .parse::<u64>()
                .map_err(|e| Error::Batch(format!("{value:?}: {e}")))?;
            sum += total;
            seen += 1;
        }
    }
    Ok(sum)
}

/// A blocking audit log: returns the offset of each line.
fn audit(producer: &dyn SyncRecordProducer, topic: &str, lines: &[&str]) -> Result<Vec<i64>> {
    let records: Vec<_> = lines
        .iter()
        .map(|l| ProducerRecord::new(topic).with_value(*l).with_partition(0))
        .collect();
    producer
        .send_all(&records)
        .into_iter()
        .map(|r| r.map(|m| m.offset))
        .collect()
}

/// An ingest loop that sends each event tagged with its index and learns of the
/// outcomes through the producer's delivery handler ([`Tally::handler`]); returns what
/// `flush` said.
async fn ingest(producer: &impl RecordProducer, topic: &str, events: &[&str]) -> Result<()> {
    for (i, event) in events.iter().enumerate() {
        let record = ProducerRecord::new(topic).with_value(*event);
        producer.send_tagged(record, i as u64).await?;
    }
    producer.flush().await
}

/// What the ingest loop's delivery handler was told: (tag, offset or error text).
#[derive(Default)]
struct Tally(Mutex<Vec<(u64, std::result::Result<i64, String>)>>);

impl Tally {
    fn handler(self: &Arc<Self>) -> impl Fn(&DeliveredBatch<'_>) + Send + Sync + 'static {
        let tally = self.clone();
        move |batch: &DeliveredBatch<'_>| {
            let mut all = tally.0.lock().unwrap();
            for d in batch.iter() {
                all.push((d.tag, d.result.map(|m| m.offset).map_err(|e| e.to_string())));
            }
        }
    }

    fn reports(&self) -> Vec<(u64, std::result::Result<i64, String>)> {
        self.0.lock().unwrap().clone()
    }
}

// ---------------------------------------------------------------------------------
// The user's unit tests, with the mocks.
// ---------------------------------------------------------------------------------

fn not_enough_replicas() -> Error {
    Error::broker(
        KafkaCode::NOT_ENOUGH_REPLICAS,
        ApiKey::Produce,
        Some("orders"),
        Some(0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publisher_with_the_mock_producer_succeeds_retries_and_checks() {
    let mock = MockProducer::new();
    mock.expect_send_with_checker(|r| {
        if r.key_str() != Some("c1") {
            return Err(format!("key {:?}", r.key_str()));
        }
        if r.header("source") != Some(&b"web"[..]) {
            return Err("no source header".into());
        }
        Ok(())
    })
    .and_succeed();
    mock.expect_send_and_fail(not_enough_replicas());
    mock.expect_send_and_succeed();

    let publisher = OrderPublisher {
        producer: mock.clone(),
        topic: "orders".into(),
    };
    let offsets = publisher.publish(&[("c1", 10), ("c2", 20)]).await.unwrap();
    assert_eq!(offsets, [0, 1]);
    let sent = mock.sent();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1], sent[2], "the retry sends the same record");
    assert_eq!(sent[2].value_str(), Some("{\"total\":20}"));
    assert_eq!(mock.flushes(), 1);
    mock.verify().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publisher_reports_a_fatal_failure_and_the_mock_an_unmet_expectation() {
    let mock = MockProducer::new();
    mock.expect_send_and_fail(Error::MessageTooLarge { size: 10, max: 1 });
    mock.expect_send_and_succeed();
    let publisher = OrderPublisher {
        producer: &mock as &dyn RecordProducer,
        topic: "orders".into(),
    };
    let err = publisher.publish(&[("c1", 10)]).await.unwrap_err();
    assert!(matches!(err, Error::MessageTooLarge { .. }), "{err}");
    match mock.verify() {
        Err(MockError::ClientUnverified { mock, unused, .. }) => {
            assert_eq!(mock, "MockProducer");
            assert_eq!(unused.len(), 1, "{unused:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unexpected_send_fails_and_is_reported() {
    let mock = MockProducer::new();
    mock.expect_send_and_succeed();
    let publisher = OrderPublisher {
        producer: mock.clone(),
        topic: "orders".into(),
    };
    let result = kring::client::block_on(publisher.publish(&[("c1", 1), ("c2", 2)]));
    assert!(result.is_err());
    let err = mock.close().unwrap_err().to_string();
    assert!(err.contains("unexpected send: orders-0"), "{err}");
}

#[test]
fn the_mock_producer_is_shared_across_threads_behind_an_arc_dyn() {
    let mock = MockProducer::new().with_partitions(3);
    for _ in 0..300 {
        mock.expect_send_and_succeed();
    }
    let producer: Arc<dyn RecordProducer> = Arc::new(mock.clone());
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let producer = producer.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let record = ProducerRecord::new("t")
                        .with_partition(t)
                        .with_value(format!("{i}"));
                    let meta = producer.send_blocking(record).unwrap().wait().unwrap();
                    assert_eq!((meta.partition, meta.offset), (t, i));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(mock.sent().len(), 300);
    mock.verify().unwrap();
}

#[test]
fn audit_with_the_mock_sync_producer() {
    let mock = MockSyncProducer::new();
    mock.expect_send_and_succeed();
    mock.expect_send_and_fail(not_enough_replicas());
    let err = audit(&mock, "audit", &["a", "b"]).unwrap_err();
    assert_eq!(err.code(), Some(KafkaCode::NOT_ENOUGH_REPLICAS));
    mock.expect_send_and_succeed();
    assert_eq!(audit(&mock, "audit", &["c"]).unwrap(), [1]);
    mock.verify().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sum_orders_with_the_mock_consumer_waits_for_yields_and_skips_retriable_errors() {
    let mock = MockConsumer::new();
    let partition = mock.expect_consume_partition("orders", 2, Offset::Oldest);
    partition
        .yield_message("c1", "{\"total\":5}")
        .expect_drained();
    let consumer = mock.clone();
    let reader = tokio::spawn(async move { sum_orders(&consumer, "orders", 2, 3).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    partition.yield_error(Error::broker(
        KafkaCode::NOT_LEADER_OR_FOLLOWER,
        ApiKey::Fetch,
        Some("orders"),
        Some(2),
    ));
    partition.yield_batch([
        (None, Some("{\"total\":7}".into())),
        (Some("c3".into()), Some("{\"total\":30}".into())),
    ]);
    assert_eq!(reader.await.unwrap().unwrap(), 42);
    assert_eq!(partition.next_offset(), 3);
    mock.verify().unwrap();
}

#[test]
fn sum_orders_surfaces_a_fatal_error_and_an_unexpected_partition() {
    let mock = MockConsumer::new();
    mock.expect_consume_partition("orders", 0, Offset::Oldest)
        .yield_error(Error::broker(
            KafkaCode::TOPIC_AUTHORIZATION_FAILED,
            ApiKey::Fetch,
            Some("orders"),
            Some(0),
        ));
    let err = kring::client::block_on(sum_orders(&mock, "orders", 0, 1)).unwrap_err();
    assert_eq!(err.code(), Some(KafkaCode::TOPIC_AUTHORIZATION_FAILED));
    let err = kring::client::block_on(sum_orders(&mock, "orders", 1, 1)).unwrap_err();
    assert_eq!(err.code(), Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION));
    let err = mock.verify().unwrap_err().to_string();
    assert!(
        err.contains("consume_partition(orders, 1, Oldest)"),
        "{err}"
    );
}

#[test]
fn an_ended_stream_ends_the_reader() {
    let mock = MockConsumer::new();
    mock.expect_consume_partition("orders", 0, Offset::Oldest)
        .yield_value("{\"total\":1}")
        .end();
    assert_eq!(
        kring::client::block_on(sum_orders(&mock, "orders", 0, 10)).unwrap(),
        1
    );
    mock.verify().unwrap();
}

#[test]
fn tagged_sends_reach_the_mocks_delivery_handler() {
    let tally = Arc::new(Tally::default());
    let mock = MockProducer::new().with_delivery_handler(tally.handler());
    mock.expect_send_and_succeed();
    mock.expect_send_and_fail(not_enough_replicas());
    mock.expect_send_with_checker(|r| match r.value_str() {
        Some("c") => Err("no c wanted".into()),
        _ => Ok(()),
    })
    .and_succeed();
    mock.expect_send_and_succeed();
    let flushed = kring::client::block_on(ingest(&mock, "events", &["a", "b", "c", "d"]));
    match flushed {
        Err(Error::DeliveryFailed { records: 2, .. }) => {}
        other => panic!("expected two failed deliveries, got {other:?}"),
    }
    let reports = tally.reports();
    let tags: Vec<u64> = reports.iter().map(|r| r.0).collect();
    assert_eq!(
        tags,
        [0, 1, 2, 3],
        "each tagged send reported once, in order"
    );
    assert_eq!(reports[0].1, Ok(0));
    assert!(
        matches!(&reports[1].1, Err(e) if e.contains("NOT_ENOUGH_REPLICAS")),
        "{reports:?}"
    );
    assert!(
        matches!(&reports[2].1, Err(e) if e.contains("no c wanted")),
        "{reports:?}"
    );
    assert_eq!(reports[3].1, Ok(1), "the next offset after the one success");
    let err = mock.verify().unwrap_err().to_string();
    assert!(err.contains("checker rejected events-0"), "{err}");
}

#[test]
fn a_tagged_send_the_mock_refuses_is_not_reported() {
    let tally = Arc::new(Tally::default());
    let mock = MockProducer::new().with_delivery_handler(tally.handler());
    mock.expect_send()
        .and_reject(Error::MessageTooLarge { size: 10, max: 1 });
    let rejected = mock.send_tagged_blocking(ProducerRecord::new("t").with_value("x"), 1);
    assert!(
        matches!(rejected, Err(Error::MessageTooLarge { .. })),
        "{rejected:?}"
    );
    let unexpected = mock.send_tagged_blocking(ProducerRecord::new("t").with_value("y"), 2);
    assert!(matches!(unexpected, Err(Error::Batch(_))), "{unexpected:?}");
    mock.close().unwrap_err();
    let closed = mock.send_tagged_blocking(ProducerRecord::new("t").with_value("z"), 3);
    assert!(matches!(closed, Err(Error::ShuttingDown)), "{closed:?}");
    assert!(tally.reports().is_empty(), "{:?}", tally.reports());
}

#[test]
fn a_mock_without_a_delivery_handler_refuses_tags_as_the_real_producer_does() {
    let mock = MockProducer::new();
    mock.expect_send_and_succeed();
    let refused = mock.send_tagged_blocking(ProducerRecord::new("t").with_value("v"), 1);
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert!(mock.sent().is_empty(), "refused before it was looked at");
    assert_eq!(mock.remaining_expectations(), 1);
    mock.send_blocking(ProducerRecord::new("t").with_value("v"))
        .unwrap()
        .wait()
        .unwrap();
    mock.verify().unwrap();
}

#[test]
fn the_mocks_delivery_handler_may_send_again() {
    // The handler re-sends every failed record with its tag + 100, through a clone of
    // the mock it holds until the test lets go of it.
    let tally = Arc::new(Tally::default());
    let resender: Arc<Mutex<Option<MockProducer>>> = Arc::default();
    let handler = {
        let (tally_handler, resender) = (tally.handler(), resender.clone());
        move |batch: &DeliveredBatch<'_>| {
            tally_handler(batch);
            let Some(mock) = resender.lock().unwrap().clone() else {
                return;
            };
            for d in batch.iter().filter(|d| d.result.is_err()) {
                let record = ProducerRecord::new(batch.topic()).with_value("again");
                mock.send_tagged_blocking(record, d.tag + 100).unwrap();
            }
        }
    };
    let mock = MockProducer::new().with_delivery_handler(handler);
    *resender.lock().unwrap() = Some(mock.clone());
    mock.expect_send_and_fail(not_enough_replicas());
    mock.expect_send_and_succeed();
    mock.send_tagged_blocking(ProducerRecord::new("t").with_value("first"), 1)
        .unwrap();
    resender.lock().unwrap().take();
    let reports = tally.reports();
    let tags: Vec<u64> = reports.iter().map(|r| r.0).collect();
    assert_eq!(tags, [1, 101]);
    assert_eq!(reports[1].1, Ok(0));
    assert_eq!(mock.sent()[1].value_str(), Some("again"));
    mock.verify().unwrap();
}

// ---------------------------------------------------------------------------------
// The same user code on kring's real producer and consumer (against a fake cluster).
// ---------------------------------------------------------------------------------

/// A fake cluster holding `topic` (one partition), and a client of it (linger 5 ms).
fn fake_cluster_client(topic: &str) -> (FakeCluster, kring::Client) {
    let cluster = FakeCluster::builder().topic(topic, 1).build().unwrap();
    let mut c = kring::Config::new(cluster.bootstrap());
    c.producer.linger = Duration::from_millis(5);
    let client = kring::Client::connect_blocking(c).unwrap();
    (cluster, client)
}

#[test]
fn the_same_user_code_runs_on_the_real_producer_and_consumer() {
    let topic = "kring-mock-clients".to_string();
    let (_cluster, client) = fake_cluster_client(&topic);

    let publisher = OrderPublisher {
        producer: Producer::new_blocking(client.clone()).unwrap(),
        topic: topic.clone(),
    };
    let orders = [("c1", 10), ("c2", 20), ("c1", 12)];
    let offsets = kring::client::block_on(publisher.publish(&orders)).unwrap();
    assert_eq!(offsets, [0, 1, 2]);

    let sync = SyncProducer::new(publisher.producer.clone());
    assert_eq!(
        audit(&sync, &topic, &["{\"total\":100}"]).unwrap(),
        [3],
        "SyncRecordProducer on the real SyncProducer"
    );

    let consumer = Consumer::new(client.clone()).unwrap();
    let sum = kring::client::block_on(sum_orders(&consumer, &topic, 0, 4)).unwrap();
    assert_eq!(sum, 142);

    // The blocking trait methods on the real types.
    // (On the concrete type the inherent method of the same name wins; name the trait.)
    let mut source: Box<dyn PartitionSource> =
        MessageSource::consume_partition_blocking(&consumer, &topic, 0, Offset::Exact(3)).unwrap();
    assert_eq!((source.topic(), source.partition()), (topic.as_str(), 0));
    let batch = loop {
        let batch = source.next_messages_blocking().unwrap().unwrap();
        if !batch.is_empty() {
            break batch;
        }
    };
    assert_eq!(batch[0].offset, 3);
    drop(source);
    let producer: &dyn RecordProducer = &publisher.producer;
    let meta = producer
        .send_blocking(ProducerRecord::new(&topic).with_value("{\"total\":1}"))
        .unwrap();
    producer.flush_blocking().unwrap();
    assert_eq!(meta.wait().unwrap().offset, 4);
    publisher.producer.close_blocking().unwrap();
}

#[test]
fn the_same_tagged_ingest_runs_on_the_real_producer() {
    let topic = "kring-mock-tagged".to_string();
    let (_cluster, client) = fake_cluster_client(&topic);
    let tally = Arc::new(Tally::default());
    let producer = ProducerBuilder::new(&client)
        .delivery_handler(tally.handler())
        .build_blocking()
        .unwrap();
    let events = ["a", "b", "c", "d", "e"];
    kring::client::block_on(ingest(&producer, &topic, &events)).unwrap();
    let mut reports = tally.reports();
    reports.sort_by_key(|r| r.0);
    let expected: Vec<_> = (0..5u64).map(|i| (i, Ok(i as i64))).collect();
    assert_eq!(
        reports, expected,
        "one partition: each event at its index's offset"
    );
    let dyn_producer: &dyn RecordProducer = &producer;
    dyn_producer
        .send_tagged_blocking(ProducerRecord::new(&topic).with_value("f"), 5)
        .unwrap();
    dyn_producer.flush_blocking().unwrap();
    assert_eq!(tally.reports().last(), Some(&(5, Ok(5))));
    producer.close_blocking().unwrap();
}

#[test]
fn the_mock_producers_flush_reports_failed_deliveries_as_the_real_one_does() {
    let mock = MockProducer::new();
    mock.expect_send_and_fail(not_enough_replicas());
    mock.expect_send_and_succeed();
    let failed = mock
        .send_blocking(ProducerRecord::new("orders").with_value("a"))
        .unwrap();
    assert!(failed.wait().is_err());
    match mock.flush_blocking() {
        Err(Error::DeliveryFailed {
            records: 1, first, ..
        }) => {
            assert_eq!(first.code(), Some(KafkaCode::NOT_ENOUGH_REPLICAS))
        }
        other => panic!("expected DeliveryFailed, got {other:?}"),
    }
    mock.send_blocking(ProducerRecord::new("orders").with_value("b"))
        .unwrap()
        .wait()
        .unwrap();
    mock.flush_blocking().unwrap();
    mock.verify().unwrap();
}
