//! The producer against the real broker (`scripts/kafka up`): what is produced is read
//! back exactly (raw Fetch + the batch reader), for every codec and partitioner; a record
//! over the size limit fails alone; flush, close, the sync producer and the channels.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{bootstrap, client, config, create_topic, read_partition, unique};
use kring::Error;
use kring::config::{Acks, Compression, PartitionerKind};
use kring::producer::partitioner::{fnv1a_partition, murmur2_partition};
use kring::producer::{OwnedRecord, Producer, ProducerRecord, SyncProducer};
use kring::protocol::KafkaCode;

fn produce_and_check(
    compression: Compression,
    partitioner: PartitionerKind,
    acks: Acks,
    idempotent: bool,
) {
    let mut c = config();
    c.producer.compression = compression;
    c.producer.partitioner = partitioner;
    c.producer.acks = acks;
    c.producer.enable_idempotence = idempotent;
    c.producer.linger = Duration::from_millis(10);
    let client = client(c);
    let topic = unique(&format!("kring-prod-{compression:?}-{partitioner:?}").to_lowercase());
    let partitions = 4;
    create_topic(&client, &topic, partitions, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    assert_eq!(producer.producer_id().is_some(), idempotent);

    let n = 2000;
    let mut deliveries = Vec::new();
    for i in 0..n {
        let key = format!("key-{}", i % 37);
        let value = format!("value-{i}-{}", "x".repeat(i % 50));
        let mut record = ProducerRecord::new(&topic)
            .with_key(key.clone())
            .with_value(value.clone())
            .with_header("i", b"h");
        if partitioner == PartitionerKind::Manual {
            record = record.with_partition((i % partitions as usize) as i32);
        }
        deliveries.push((key, value, producer.send_blocking(record).unwrap()));
    }
    producer.flush_blocking().unwrap();
    let mut expected: HashMap<i32, Vec<(String, String, i64)>> = HashMap::new();
    for (i, (key, value, d)) in deliveries.into_iter().enumerate() {
        let meta = d.wait().unwrap_or_else(|e| panic!("record {i}: {e}"));
        let want = match partitioner {
            PartitionerKind::Default => {
                Some(murmur2_partition(key.as_bytes(), partitions as usize))
            }
            PartitionerKind::Fnv1a => Some(fnv1a_partition(key.as_bytes(), partitions as usize)),
            PartitionerKind::Manual => Some((i % partitions as usize) as i32),
            PartitionerKind::RoundRobin => Some((i % partitions as usize) as i32),
            PartitionerKind::Random => None,
        };
        if let Some(want) = want {
            assert_eq!(
                meta.partition, want,
                "record {i} ({key}) under {partitioner:?}"
            );
        }
        expected
            .entry(meta.partition)
            .or_default()
            .push((key, value, meta.offset));
    }
    if partitioner == PartitionerKind::Random {
        assert!(expected.len() > 1, "random spreads records");
    }
    for (partition, records) in expected {
        let read = read_partition(&client, &topic, partition, records.len());
        assert_eq!(read.len(), records.len(), "partition {partition}");
        for ((key, value, offset), got) in records.iter().zip(&read) {
            if acks != Acks::None {
                assert_eq!(*offset, got.offset, "offset in partition {partition}");
            }
            assert_eq!(got.key.as_deref(), Some(key.as_bytes()));
            assert_eq!(got.value.as_deref(), Some(value.as_bytes()));
            assert_eq!(got.headers, vec![("i".to_string(), Some(b"h".to_vec()))]);
        }
        // Offsets are contiguous and in send order.
        for w in read.windows(2) {
            assert_eq!(w[1].offset, w[0].offset + 1);
        }
    }
    producer.close_blocking().unwrap();
    client.close();
}

#[test]
fn every_codec_round_trips() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        produce_and_check(codec, PartitionerKind::Default, Acks::All, true);
    }
}

#[test]
fn every_partitioner_places_records_as_specified() {
    for partitioner in [
        PartitionerKind::Fnv1a,
        PartitionerKind::RoundRobin,
        PartitionerKind::Random,
        PartitionerKind::Manual,
    ] {
        produce_and_check(Compression::Lz4, partitioner, Acks::All, true);
    }
}

#[test]
fn acks_one_and_zero_without_idempotence() {
    produce_and_check(
        Compression::None,
        PartitionerKind::Default,
        Acks::Leader,
        false,
    );
    produce_and_check(
        Compression::Zstd,
        PartitionerKind::Default,
        Acks::None,
        false,
    );
}

#[test]
fn a_record_over_the_limit_fails_alone() {
    let mut c = config();
    c.producer.linger = Duration::from_millis(200);
    let client = client(c);
    let topic = unique("kring-too-large");
    create_topic(&client, &topic, 1, 1, &[("max.message.bytes", "3000")]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let small: Vec<_> = (0..40)
        .map(|i| {
            producer
                .send_blocking(ProducerRecord::new(&topic).with_value(format!("small-{i}")))
                .unwrap()
        })
        .collect();
    let big_value = vec![7u8; 8000];
    let big = producer
        .send_blocking(ProducerRecord::new(&topic).with_value(&big_value))
        .unwrap();
    let more: Vec<_> = (40..60)
        .map(|i| {
            producer
                .send_blocking(ProducerRecord::new(&topic).with_value(format!("small-{i}")))
                .unwrap()
        })
        .collect();
    // flush reports the failure: one record, with the broker's error.
    match producer.flush_blocking() {
        Err(Error::DeliveryFailed {
            records: 1,
            batches: 1,
            first,
        }) => assert_eq!(first.code(), Some(KafkaCode::MESSAGE_TOO_LARGE), "{first}"),
        other => panic!("expected DeliveryFailed for the big record, got {other:?}"),
    }
    let err = big.wait().expect_err("the big record fails");
    assert_eq!(err.code(), Some(KafkaCode::MESSAGE_TOO_LARGE), "{err}");
    let offsets: Vec<i64> = small
        .into_iter()
        .chain(more)
        .map(|d| d.wait().expect("small records succeed").offset)
        .collect();
    assert_eq!(offsets.len(), 60);
    for w in offsets.windows(2) {
        assert!(w[1] > w[0], "in order: {offsets:?}");
    }
    let read = read_partition(&client, &topic, 0, 60);
    let values: Vec<String> = read
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    let want: Vec<String> = (0..60).map(|i| format!("small-{i}")).collect();
    assert_eq!(values, want, "every small record, once, in order");

    // A record over max.request.size is refused before it is queued (send says so;
    // flush does not count it again), and the failure above was reported once.
    let huge = vec![0u8; 2 << 20];
    match producer.send_blocking(ProducerRecord::new(&topic).with_value(&huge)) {
        Err(Error::MessageTooLarge { .. }) => {}
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    producer.flush_blocking().unwrap();
    producer.close_blocking().unwrap();
}

#[test]
fn a_closed_client_fails_the_producers_records_clearly() {
    let mut c = config();
    // Nothing goes out before the client is closed, and a retried record would only
    // fail when delivery.timeout.ms runs out.
    c.producer.linger = Duration::from_secs(5);
    c.producer.delivery_timeout = Duration::from_secs(8);
    c.net.request_timeout = Duration::from_secs(2);
    let client = client(c);
    let topic = unique("kring-closed-client");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let pending = producer
        .send_blocking(ProducerRecord::new(&topic).with_value("never sent"))
        .unwrap();
    client.close();
    match producer.flush_blocking() {
        Err(Error::DeliveryFailed {
            records: 1, first, ..
        }) => assert!(matches!(*first, Error::ClosedClient), "{first}"),
        other => panic!("expected DeliveryFailed (client closed), got {other:?}"),
    }
    match pending.wait() {
        Err(Error::ClosedClient) => {}
        other => panic!("expected ClosedClient, got {other:?}"),
    }
    match producer.send_blocking(ProducerRecord::new(&topic).with_value("late")) {
        Err(Error::ClosedClient) => {}
        other => panic!("expected ClosedClient, got {other:?}"),
    }
    producer.close_blocking().unwrap();
}

#[test]
fn flush_close_and_errors() {
    let mut c = config();
    c.producer.linger = Duration::from_secs(30);
    c.metadata.topic_propagation_max = Duration::from_millis(300);
    let client = client(c);
    let topic = unique("kring-flush");
    create_topic(&client, &topic, 2, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let d = producer
        .send_blocking(ProducerRecord::new(&topic).with_value("lingering"))
        .unwrap();
    // A 30 s linger: only flush sends it now.
    producer.flush_blocking().unwrap();
    let meta = d.wait().unwrap();
    assert!(meta.offset >= 0);

    // Explicit partition out of range.
    match producer.send_blocking(
        ProducerRecord::new(&topic)
            .with_partition(9)
            .with_value("x"),
    ) {
        Err(Error::InvalidPartition {
            partition: 9,
            count: 2,
            ..
        }) => {}
        other => panic!("expected InvalidPartition, got {other:?}"),
    }
    // Unknown topic: asked for again within topic.metadata.propagation.max.ms, then failed.
    let asked = client.metadata_requests();
    let err = producer
        .send_blocking(ProducerRecord::new(&unique("kring-nope")).with_value("x"))
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION),
        "{err}"
    );
    assert!(client.metadata_requests() >= asked + 2, "asked again");

    // Close delivers what is pending, then refuses more.
    let pending = producer
        .send_blocking(ProducerRecord::new(&topic).with_value("at close"))
        .unwrap();
    producer.close_blocking().unwrap();
    assert!(pending.wait().unwrap().offset >= 0);
    assert!(matches!(
        producer.send_blocking(ProducerRecord::new(&topic).with_value("late")),
        Err(Error::ShuttingDown)
    ));
}

#[test]
fn sync_producer_and_channels() {
    let mut c = config();
    c.metadata.topic_propagation_max = Duration::ZERO;
    let client = client(c);
    let topic = unique("kring-sync");
    create_topic(&client, &topic, 1, 1, &[]);
    let sync = SyncProducer::connect(client.clone()).unwrap();
    let first = sync
        .send(ProducerRecord::new(&topic).with_key("k").with_value("one"))
        .unwrap();
    assert_eq!(first.offset, 0);
    let records: Vec<ProducerRecord<'_>> = (0..10)
        .map(|i| ProducerRecord::new(&topic).with_value(format!("batch-{i}")))
        .collect();
    let results = sync.send_all(&records);
    let offsets: Vec<i64> = results.into_iter().map(|r| r.unwrap().offset).collect();
    assert_eq!(offsets, (1..=10).collect::<Vec<_>>());

    let mut channels = sync.producer().channels(16).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..5 {
            channels
                .input
                .send(OwnedRecord::new(topic.clone(), format!("chan-{i}")))
                .await
                .unwrap();
        }
        for _ in 0..5 {
            let (record, meta) = channels.successes.recv().await.unwrap();
            assert!(record.value.is_some());
            assert!(meta.offset >= 11);
        }
        channels
            .input
            .send(OwnedRecord::new(unique("kring-chan-missing"), "lost"))
            .await
            .unwrap();
        let (_, err) = channels.errors.recv().await.unwrap();
        assert_eq!(err.code(), Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION));
    });
    sync.close().unwrap();
    let read = read_partition(&client, &topic, 0, 16);
    assert_eq!(read.len(), 16);
    let _ = bootstrap();
}

/// A topic created elsewhere while `send` waits for it is produced to: the producer
/// asks again for a topic missing from metadata, up to
/// `topic.metadata.propagation.max.ms` (30 s by default). The topic is created only
/// after the producer has been told twice that it is missing, so the send cannot have
/// found it at its first look.
#[test]
fn a_send_waits_for_a_topic_created_while_it_waits() {
    let producing = client(config());
    assert_eq!(
        producing.config().metadata.topic_propagation_max,
        Duration::from_secs(30)
    );
    let topic = unique("kring-appears");
    let producer = Producer::new_blocking(producing.clone()).unwrap();
    let asked = producing.metadata_requests();
    let creator = {
        let (producing, topic) = (producing.clone(), topic.clone());
        std::thread::spawn(move || {
            while producing.metadata_requests() < asked + 2 {
                std::thread::sleep(Duration::from_millis(10));
            }
            let creating = client(config());
            create_topic(&creating, &topic, 2, 1, &[]);
        })
    };
    let delivery = producer
        .send_blocking(
            ProducerRecord::new(&topic)
                .with_key("k")
                .with_value("early"),
        )
        .unwrap();
    creator.join().unwrap();
    let meta = delivery.wait().unwrap();
    assert_eq!(meta.offset, 0);
    let read = read_partition(&producing, &topic, meta.partition, 1);
    assert_eq!(read.len(), 1);
    producer.close_blocking().unwrap();
}

/// A user's own partitioner: every record to the last partition.
#[derive(Debug)]
struct LastPartition;

impl kring::producer::Partitioner for LastPartition {
    fn partition(
        &self,
        _topic: &str,
        _key: Option<&[u8]>,
        _size: usize,
        partitions: kring::producer::TopicPartitions<'_>,
    ) -> i32 {
        partitions.count as i32 - 1
    }
}

#[test]
fn a_custom_partitioner() {
    let client = client(config());
    let topic = unique("kring-custom");
    create_topic(&client, &topic, 3, 1, &[]);
    let producer = kring::client::block_on(Producer::with_partitioner(
        client.clone(),
        Some(Box::new(LastPartition)),
    ))
    .unwrap();
    let d = producer
        .send_blocking(ProducerRecord::new(&topic).with_key("any").with_value("v"))
        .unwrap();
    producer.flush_blocking().unwrap();
    assert_eq!(d.wait().unwrap().partition, 2);
    producer.close_blocking().unwrap();
}

#[test]
fn many_partitions_share_buffer_memory() {
    // 8 MiB of buffer.memory and 1 MiB batches: were every open batch a whole batch.size,
    // the ninth partition's record would find no memory. Batches start in small arenas,
    // so one open batch in each of 64 partitions fits, and try_send (which never waits)
    // takes every record.
    let mut c = config();
    c.producer.batch_size = 1 << 20;
    c.producer.buffer_memory = 8 << 20;
    c.producer.linger = Duration::from_secs(30);
    c.producer.acks = Acks::Leader;
    c.producer.enable_idempotence = false;
    let client = client(c);
    let topic = unique("kring-many-partitions");
    let partitions = 64;
    create_topic(&client, &topic, partitions, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let mut deliveries = Vec::new();
    for round in 0..3 {
        for p in 0..partitions {
            let value = format!("round {round} partition {p}");
            let record = ProducerRecord::new(&topic)
                .with_value(value.clone())
                .with_partition(p);
            let delivery = producer
                .try_send(record)
                .unwrap_or_else(|e| panic!("partition {p}, round {round}: {e}"));
            deliveries.push((p, value, delivery));
        }
    }
    producer.flush_blocking().unwrap();
    let mut offsets = HashMap::new();
    for (p, value, d) in deliveries {
        let meta = d.wait().unwrap();
        assert_eq!(meta.partition, p, "{value}");
        *offsets.entry(p).or_insert(0) += 1;
    }
    assert_eq!(offsets.len(), partitions as usize);
    for p in [0, 31, 63] {
        let got = read_partition(&client, &topic, p, 3);
        let values: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
            .collect();
        assert_eq!(
            values,
            (0..3)
                .map(|round| format!("round {round} partition {p}"))
                .collect::<Vec<_>>()
        );
    }
}

/// `send`'s future queues its record when first polled, not when made (as an `async fn`
/// would): a record whose future is polled later is written after one sent meanwhile,
/// though its topic's routes are known (the first send, which had to wait for them,
/// made them so) and it could have been appended at once. The send that waited resolved
/// through the same kind of future.
#[test]
fn a_send_queues_its_record_when_first_polled() {
    let client = client(config());
    let topic = unique("kring-lazy-send");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    kring::client::block_on(async {
        let waited = producer
            .send(ProducerRecord::new(&topic).with_value("zeroth"))
            .await
            .unwrap();
        assert_eq!(waited.await.unwrap().offset, 0);
        let later = producer.send(ProducerRecord::new(&topic).with_value("second"));
        let first = producer
            .send(ProducerRecord::new(&topic).with_value("first"))
            .await
            .unwrap();
        let second = later.await.unwrap();
        assert_eq!(first.await.unwrap().offset, 1);
        assert_eq!(second.await.unwrap().offset, 2);
    });
    let read = read_partition(&client, &topic, 0, 3);
    let values: Vec<Vec<u8>> = read.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(
        values,
        vec![b"zeroth".to_vec(), b"first".to_vec(), b"second".to_vec()]
    );
    producer.close_blocking().unwrap();
}

/// Records sent with a tag are reported to the producer's delivery handler, each once,
/// by the time flush returns, at the offsets the broker holds them at; records sent
/// with a future in between keep theirs; after close, nothing more is reported.
#[test]
fn tagged_records_reach_the_delivery_handler() {
    use kring::producer::{DeliveredBatch, ProducerBuilder, RecordProducer};
    use std::sync::{Arc, Mutex};

    let mut c = config();
    c.producer.linger = Duration::from_millis(5);
    c.producer.batch_size = 4096;
    let client = client(c);
    let topic = unique("kring-prod-tagged");
    let partitions = 3;
    create_topic(&client, &topic, partitions, 1, &[]);
    type Reports = Vec<(u64, i32, Result<i64, String>)>;
    let reports: Arc<Mutex<Reports>> = Arc::default();
    let batches = Arc::new(Mutex::new(0usize));
    let handler = {
        let (reports, batches) = (reports.clone(), batches.clone());
        move |batch: &DeliveredBatch<'_>| {
            *batches.lock().unwrap() += 1;
            let mut all = reports.lock().unwrap();
            for d in batch.iter() {
                let result = d.result.map(|m| m.offset).map_err(|e| e.to_string());
                all.push((d.tag, batch.partition(), result));
            }
        }
    };
    let producer = ProducerBuilder::new(&client)
        .delivery_handler(handler)
        .build_blocking()
        .unwrap();
    let n = 3000u64;
    let mut futures = Vec::new();
    for i in 0..n {
        let value = format!("value-{i}");
        let record = ProducerRecord::new(&topic)
            .with_key(format!("key-{}", i % 101))
            .with_value(value);
        if i % 10 == 0 {
            futures.push((i, producer.send_blocking(record).unwrap()));
        } else if i % 10 == 1 {
            producer.try_send_tagged(record, i).unwrap();
        } else if i % 10 == 2 {
            // Through the trait, as code tested with kring-mock's MockProducer sends.
            let as_trait: &dyn RecordProducer = &producer;
            kring::client::block_on(as_trait.send_tagged(record, i)).unwrap();
        } else {
            producer.send_tagged_blocking(record, i).unwrap();
        }
    }
    producer.flush_blocking().unwrap();
    let mut by_partition: HashMap<i32, Vec<(i64, u64)>> = HashMap::new();
    {
        let all = reports.lock().unwrap();
        assert_eq!(all.len() as u64, n - n / 10, "every tagged record, once");
        let mut tags: Vec<u64> = all.iter().map(|r| r.0).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), all.len(), "no tag twice");
        assert!(
            tags.iter().all(|t| t % 10 != 0),
            "no untagged record reported"
        );
        for (tag, partition, result) in all.iter() {
            let offset = result
                .clone()
                .unwrap_or_else(|e| panic!("record {tag}: {e}"));
            by_partition
                .entry(*partition)
                .or_default()
                .push((offset, *tag));
        }
        assert!(
            *batches.lock().unwrap() < all.len(),
            "reported a batch at a time"
        );
    }
    for (i, f) in futures {
        let meta = f.wait().unwrap_or_else(|e| panic!("record {i}: {e}"));
        by_partition
            .entry(meta.partition)
            .or_default()
            .push((meta.offset, i));
    }
    for (partition, mut records) in by_partition {
        records.sort_unstable();
        let read = read_partition(&client, &topic, partition, records.len());
        for ((offset, i), got) in records.iter().zip(&read) {
            assert_eq!(*offset, got.offset, "partition {partition}");
            assert_eq!(
                got.value.as_deref(),
                Some(format!("value-{i}").as_bytes()),
                "{partition}-{offset}"
            );
        }
    }
    producer.close_blocking().unwrap();
    client.close();
}

/// A producer without a delivery handler refuses tagged records.
#[test]
fn a_tagged_record_needs_a_delivery_handler() {
    let client = client(config());
    let topic = unique("kring-prod-untagged");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let refused = producer.send_tagged_blocking(ProducerRecord::new(&topic).with_value("v"), 1);
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    producer.close_blocking().unwrap();
    client.close();
}

/// The blocking sends append at once when they can and wait only when they must: with
/// 64 KiB of `buffer.memory` and 2 MB of records, most of them must wait for memory (not
/// counted here: with that path made to fail, this test fails), and every record, tagged
/// or not, still arrives once, in order, at the offset reported.
#[test]
fn blocking_sends_wait_for_buffer_memory() {
    use kring::producer::ProducerBuilder;
    use std::sync::{Arc, Mutex};

    let mut c = config();
    c.producer.buffer_memory = 64 << 10;
    c.producer.batch_size = 16 << 10;
    c.producer.linger = Duration::from_millis(5);
    let client = client(c);
    let topic = unique("kring-prod-blocking-memory");
    create_topic(&client, &topic, 1, 1, &[]);
    let reported: Arc<Mutex<Vec<(u64, i64)>>> = Arc::default();
    let handler = {
        let reported = reported.clone();
        move |batch: &kring::producer::DeliveredBatch<'_>| {
            let mut all = reported.lock().unwrap();
            for d in batch.iter() {
                all.push((d.tag, d.result.as_ref().map(|m| m.offset).unwrap_or(-1)));
            }
        }
    };
    let producer = ProducerBuilder::new(&client)
        .delivery_handler(handler)
        .build_blocking()
        .unwrap();
    let n = 2_000u64;
    let value = |i: u64| format!("{i:0>1000}");
    let mut futures = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(&topic).with_value(value(i));
        if i % 2 == 0 {
            producer.send_tagged_blocking(record, i).unwrap();
        } else {
            futures.push((i, producer.send_blocking(record).unwrap()));
        }
    }
    producer.flush_blocking().unwrap();
    let mut offsets: Vec<(u64, i64)> = reported.lock().unwrap().clone();
    assert_eq!(offsets.len() as u64, n / 2, "every tagged record, once");
    for (i, f) in futures {
        offsets.push((
            i,
            f.wait()
                .unwrap_or_else(|e| panic!("record {i}: {e}"))
                .offset,
        ));
    }
    offsets.sort_unstable();
    let in_order: Vec<(u64, i64)> = (0..n).map(|i| (i, i as i64)).collect();
    assert_eq!(
        offsets, in_order,
        "each record once, at the offset of its place"
    );
    let read = read_partition(&client, &topic, 0, n as usize);
    assert_eq!(read.len() as u64, n);
    for (i, got) in read.iter().enumerate() {
        assert_eq!(
            got.value.as_deref(),
            Some(value(i as u64).as_bytes()),
            "{i}"
        );
    }
    producer.close_blocking().unwrap();
    client.close();
}

/// With `queue.buffering.max.messages` at 50, a producer never holds more than 50
/// unsettled records: `try_send` past them fails with an error naming the setting,
/// `send` waits for room, and every record still arrives, in order.
#[test]
fn queued_records_are_limited_and_sends_wait_for_room() {
    let mut c = config();
    c.producer.max_queued_records = 50;
    // Long enough that records wait in their batch while the test looks.
    c.producer.linger = Duration::from_millis(200);
    let client = client(c);
    let topic = unique("kring-prod-queued");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let record = |i: usize| ProducerRecord::new(&topic).with_value(format!("v{i}"));
    let mut futures: Vec<_> = (0..50)
        .map(|i| producer.try_send(record(i)).unwrap())
        .collect();
    match producer.try_send(record(50)) {
        Err(Error::Batch(e)) => assert!(e.contains("queue.buffering.max.messages"), "{e}"),
        other => panic!("the 51st record was taken: {other:?}"),
    }
    // send waits for the first 50 to be acknowledged, then goes on.
    for i in 50..3000 {
        futures.push(producer.send_blocking(record(i)).unwrap());
    }
    producer.flush_blocking().unwrap();
    for (i, f) in futures.into_iter().enumerate() {
        assert_eq!(f.wait().unwrap().offset, i as i64, "record {i}");
    }
    let read = read_partition(&client, &topic, 0, 3000);
    assert_eq!(read.len(), 3000);
    assert_eq!(read[2999].value.as_deref(), Some(&b"v2999"[..]));
    producer.close_blocking().unwrap();
    client.close();
}
