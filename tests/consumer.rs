//! The consumer against the real broker (`scripts/kafka up`): reads back exactly what was
//! produced for every codec, every start position, reset policies after DeleteRecords,
//! read_committed over an aborted transaction (made at the raw protocol level), pause and
//! resume, and an offset commit/fetch round trip.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{client, config, create_topic, together, unique};
use kring::config::{Compression, IsolationLevel, OffsetReset};
use kring::consumer::{Consumer, Offset, OffsetManager, PartitionConsumer};
use kring::producer::{Producer, ProducerRecord};
use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    AddPartitionsToTxnRequest, DeleteRecordsRequest, EndTxnRequest, InitProducerIdRequest,
    ProduceRequest,
    add_partitions_to_txn::AddPartitionsToTxnTopic,
    delete_records::{DeleteRecordsPartition, DeleteRecordsTopic},
    produce::{PartitionProduceData, TopicProduceData},
};
use kring::record::{BatchBuilder, BatchOptions};
use kring::{Client, Config};

/// Produces `values` to partition 0 with the client's producer settings (its
/// compression included) and returns their offsets.
fn produce(client: &Client, topic: &str, values: &[String]) -> Vec<i64> {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(0)
                        .with_key(format!("k{i}"))
                        .with_value(v.clone())
                        .with_header("n", b"1"),
                )
                .unwrap()
        })
        .collect();
    producer.flush_blocking().unwrap();
    let offsets = deliveries
        .into_iter()
        .map(|d| d.wait().unwrap().offset)
        .collect();
    producer.close_blocking().unwrap();
    offsets
}

/// Reads `count` records from `pc` with the borrowed API.
fn read(pc: &mut PartitionConsumer, count: usize) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while out.len() < count {
        let batch = pc
            .next_batch_blocking()
            .expect("consumer alive")
            .expect("no error");
        for r in batch.records() {
            let r = r.unwrap();
            out.push((
                r.offset(),
                r.key().unwrap().to_vec(),
                r.value().unwrap().to_vec(),
            ));
            let h: Vec<_> = r.headers().map(|h| h.unwrap()).collect();
            assert_eq!(h.len(), 1);
        }
    }
    out
}

fn consumer_for(config: Config) -> (Client, Consumer) {
    let client = client(config);
    let consumer = Consumer::new(client.clone()).unwrap();
    (client, consumer)
}

#[test]
fn reads_back_exactly_what_was_produced_for_every_codec() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut c = config();
        c.producer.compression = codec;
        let (client, consumer) = consumer_for(c);
        let topic = unique("kring-cons");
        create_topic(&client, &topic, 1, 1, &[]);
        let values: Vec<String> = (0..3000)
            .map(|i| format!("v{i}-{}", "y".repeat(i % 90)))
            .collect();
        let offsets = produce(&client, &topic, &values);
        assert_eq!(offsets, (0..3000).collect::<Vec<i64>>());
        let mut pc = consumer
            .consume_partition_blocking(&topic, 0, Offset::Oldest)
            .unwrap();
        let got = read(&mut pc, values.len());
        assert_eq!(got.len(), values.len(), "{codec:?}");
        for (i, (offset, key, value)) in got.iter().enumerate() {
            assert_eq!(*offset, i as i64, "{codec:?} contiguous offsets");
            assert_eq!(key, format!("k{i}").as_bytes());
            assert_eq!(value, values[i].as_bytes(), "{codec:?} record {i}");
        }
        assert_eq!(pc.position(), 3000);
        assert_eq!(pc.high_watermark(), 3000);
        assert_eq!(pc.lag(), 0);
        pc.close();

        // The owned path: Bytes slices of the same fetch buffer.
        let mut pc = consumer
            .consume_partition_blocking(&topic, 0, Offset::Exact(2990))
            .unwrap();
        let mut messages = Vec::new();
        while messages.len() < 10 {
            messages.extend(pc.next_messages_blocking().unwrap().unwrap());
        }
        assert_eq!(messages[0].offset, 2990);
        assert_eq!(messages[9].value.as_deref(), Some(values[2999].as_bytes()));
        assert_eq!(messages[9].headers[0].1.as_deref(), Some(&b"1"[..]));
        pc.close();
        // One message at a time.
        let mut pc = consumer
            .consume_partition_blocking(&topic, 0, Offset::Exact(2995))
            .unwrap();
        for want in 2995..3000 {
            let m = pc.next_message_blocking().unwrap().unwrap();
            assert_eq!(m.offset, want);
            assert_eq!(m.key.as_deref(), Some(format!("k{want}").as_bytes()));
        }
        client.close();
    }
}

#[test]
fn every_start_position() {
    let (client, consumer) = consumer_for(config());
    let topic = unique("kring-start");
    // Fixed timestamps from 2023 below: keep the broker's retention from deleting them.
    create_topic(&client, &topic, 1, 1, &[("retention.ms", "-1")]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let base_ts = 1_700_000_000_000i64;
    for i in 0..100 {
        let _delivery = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_key(format!("k{i}"))
                    .with_value(format!("v{i}"))
                    .with_header("n", b"1")
                    .with_timestamp(base_ts + i * 1000),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();

    let mut oldest = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    assert_eq!(read(&mut oldest, 100)[0].0, 0);
    // One consumer per partition at a time, as in Sarama.
    let again = consumer.consume_partition_blocking(&topic, 0, Offset::Oldest);
    assert!(
        matches!(again, Err(kring::Error::AlreadyConsumed { .. })),
        "{again:?}"
    );
    oldest.close();
    let mut exact = consumer
        .consume_partition_blocking(&topic, 0, Offset::Exact(42))
        .unwrap();
    assert_eq!(
        read(&mut exact, 1)[0].0,
        42,
        "starts inside a batch at the exact offset"
    );
    exact.close();
    let mut by_time = consumer
        .consume_partition_blocking(&topic, 0, Offset::Timestamp(base_ts + 70_500))
        .unwrap();
    assert_eq!(
        read(&mut by_time, 1)[0].0,
        71,
        "first record at or after the timestamp"
    );
    by_time.close();
    let mut newest = consumer
        .consume_partition_blocking(&topic, 0, Offset::Newest)
        .unwrap();
    assert_eq!(newest.position(), 100);
    let d = producer
        .send_blocking(
            ProducerRecord::new(&topic)
                .with_partition(0)
                .with_key("new")
                .with_value("after")
                .with_header("n", b"1"),
        )
        .unwrap();
    producer.flush_blocking().unwrap();
    assert_eq!(d.wait().unwrap().offset, 100);
    let got = read(&mut newest, 1);
    assert_eq!(got[0].0, 100);
    assert_eq!(got[0].2, b"after");
    producer.close_blocking().unwrap();

    // Pause: nothing more arrives; resume: it does.
    newest.pause();
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let _delivery = producer
        .send_blocking(
            ProducerRecord::new(&topic)
                .with_partition(0)
                .with_key("p")
                .with_value("paused")
                .with_header("n", b"1"),
        )
        .unwrap();
    producer.flush_blocking().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(newest.position(), 101);
    newest.resume();
    assert_eq!(read(&mut newest, 1)[0].2, b"paused");
    producer.close_blocking().unwrap();
    client.close();
}

#[test]
fn partition_consumers_started_together_start_where_each_partition_says() {
    // Their start offsets are looked up together, one ListOffsets per leader listing
    // every partition it leads: the broker must answer each on its own terms.
    let (client, consumer) = consumer_for(config());
    let topic = unique("kring-together");
    create_topic(&client, &topic, 6, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    for p in 0..6 {
        for i in 0..=p {
            let record = ProducerRecord::new(&topic)
                .with_partition(p)
                .with_value(format!("v{i}"));
            let _delivery = producer.send_blocking(record).unwrap();
        }
    }
    producer.flush_blocking().unwrap();
    producer.close_blocking().unwrap();
    for (start, position) in [
        (Offset::Newest, (|p| p as i64 + 1) as fn(i32) -> i64),
        (Offset::Oldest, |_| 0),
    ] {
        let starts = (0..6).map(|p| consumer.consume_partition(&topic, p, start));
        let started = kring::client::block_on(together(starts.collect()));
        for (p, pc) in (0..6).zip(started) {
            let pc = pc.expect("started");
            assert_eq!(pc.position(), position(p), "{start:?}: partition {p}");
            pc.close();
        }
    }
    client.close();
}

fn delete_records(client: &Client, topic: &str, before: i64) {
    let (leader, _) = kring::client::block_on(client.leader(topic, 0)).unwrap();
    let r = leader
        .send_blocking(
            DeleteRecordsRequest::default()
                .with_topics(vec![
                    DeleteRecordsTopic::default()
                        .with_name(topic.into())
                        .with_partitions(vec![
                            DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(before),
                        ]),
                ])
                .with_timeout_ms(30_000),
        )
        .unwrap();
    let p = &r.topics[0].partitions[0];
    assert_eq!(KafkaCode(p.error_code), KafkaCode::NONE);
    assert_eq!(p.low_watermark, before);
}

#[test]
fn reset_policies_after_delete_records() {
    let topic = unique("kring-reset");
    {
        let client = client(config());
        create_topic(&client, &topic, 1, 1, &[]);
        let values: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
        produce(&client, &topic, &values);
        delete_records(&client, &topic, 50);
        client.close();
    }
    for (policy, expected) in [
        (OffsetReset::Earliest, Some(50)),
        (OffsetReset::Latest, None),
        (OffsetReset::None, None),
    ] {
        let mut c = config();
        c.consumer.auto_offset_reset = policy;
        let (client, consumer) = consumer_for(c);
        let mut pc = consumer
            .consume_partition_blocking(&topic, 0, Offset::Exact(10))
            .unwrap();
        match policy {
            OffsetReset::Earliest => {
                assert_eq!(
                    read(&mut pc, 1)[0].0,
                    expected.unwrap(),
                    "earliest after truncation"
                );
            }
            OffsetReset::Latest => {
                // Jumps to the end: the next record produced is the first seen.
                let producer = Producer::new_blocking(client.clone()).unwrap();
                std::thread::sleep(Duration::from_millis(1500));
                let d = producer
                    .send_blocking(
                        ProducerRecord::new(&topic)
                            .with_partition(0)
                            .with_key("late")
                            .with_value("late")
                            .with_header("n", b"1"),
                    )
                    .unwrap();
                producer.flush_blocking().unwrap();
                let offset = d.wait().unwrap().offset;
                let got = read(&mut pc, 1);
                assert_eq!(got[0].0, offset, "latest after truncation");
                producer.close_blocking().unwrap();
            }
            OffsetReset::None => {
                // Errors on a channel of their own, as the user chose.
                pc.close();
                let (_pc, mut errors) = kring::client::block_on(
                    consumer.consume_partition_with_errors(&topic, 0, Offset::Exact(10), 4),
                )
                .unwrap();
                let err = errors.blocking_recv().expect("an error on the channel");
                assert_eq!(err.partition, 0);
                assert_eq!(
                    err.error.code(),
                    Some(KafkaCode::OFFSET_OUT_OF_RANGE),
                    "{err}"
                );
            }
        }
        client.close();
    }
}

/// An aborted transaction written at the raw protocol level, then committed records.
#[test]
fn read_committed_skips_aborted_records() {
    let client = client(config());
    let topic = unique("kring-txn");
    // The aborted batch below is stamped near 1970: keep the broker's retention (checked
    // every minute) from deleting it once a later append rolls its segment, which left
    // the read_uncommitted read below waiting for records that were gone.
    create_topic(&client, &topic, 1, 1, &[("retention.ms", "-1")]);
    let txn_id = unique("kring-txn-id");
    kring::client::block_on(async {
        // A fresh transaction coordinator may still be loading: retry what is retriable.
        let mut attempt = 0;
        let (coordinator, init) = loop {
            attempt += 1;
            let coordinator = client.transaction_coordinator(&txn_id).await.unwrap();
            let init = coordinator
                .send(
                    InitProducerIdRequest::default()
                        .with_transactional_id(Some(txn_id.clone()))
                        .with_transaction_timeout_ms(60_000)
                        .with_producer_id(-1)
                        .with_producer_epoch(-1),
                )
                .await
                .unwrap();
            let code = KafkaCode(init.error_code);
            if code.is_ok() || !code.is_retriable() || attempt > 50 {
                break (coordinator, init);
            }
            client.invalidate_coordinator(kring::client::CoordinatorKind::Transaction, &txn_id);
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(KafkaCode(init.error_code), KafkaCode::NONE);
        let (pid, epoch) = (init.producer_id, init.producer_epoch);
        let add = coordinator
            .send_version(
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id.clone())
                    .with_v3_and_below_producer_id(pid)
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(vec![
                        AddPartitionsToTxnTopic::default()
                            .with_name(topic.clone())
                            .with_partitions(vec![0]),
                    ]),
                3,
            )
            .await
            .unwrap();
        let code =
            add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
        assert_eq!(KafkaCode(code), KafkaCode::NONE);
        let mut b = BatchBuilder::new(
            Vec::with_capacity(4096),
            BatchOptions::default()
                .with_producer(pid, epoch, 0)
                .with_transactional(true),
        )
        .unwrap();
        for i in 0..5 {
            b.append(
                1,
                Some(format!("k{i}").as_bytes()),
                Some(b"aborted"),
                &[kring::record::Header::new("n", b"1")],
            )
            .unwrap();
        }
        let batch = Bytes::from(b.seal().unwrap().into_inner());
        let (leader, _) = client.leader(&topic, 0).await.unwrap();
        let produced = leader
            .send(
                ProduceRequest::default()
                    .with_transactional_id(Some(txn_id.clone()))
                    .with_acks(-1)
                    .with_timeout_ms(30_000)
                    .with_topic_data(vec![
                        TopicProduceData::default()
                            .with_name(topic.clone())
                            .with_partition_data(vec![
                                PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(batch)),
                            ]),
                    ]),
            )
            .await
            .unwrap();
        assert_eq!(
            KafkaCode(produced.responses[0].partition_responses[0].error_code),
            KafkaCode::NONE
        );
        let end = coordinator
            .send(
                EndTxnRequest::default()
                    .with_transactional_id(txn_id.clone())
                    .with_producer_id(pid)
                    .with_producer_epoch(epoch)
                    .with_committed(false),
            )
            .await
            .unwrap();
        assert_eq!(KafkaCode(end.error_code), KafkaCode::NONE);
    });
    // The coordinator writes the abort marker after answering: wait for it (offset 5).
    let consumer = Consumer::new(client.clone()).unwrap();
    for _ in 0..100 {
        if kring::client::block_on(consumer.offsets(&topic, 0))
            .unwrap()
            .1
            == 6
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Committed (non-transactional) records after the abort marker.
    let values: Vec<String> = (0..5).map(|i| format!("committed-{i}")).collect();
    let offsets = produce(&client, &topic, &values);
    assert_eq!(
        offsets[0], 6,
        "5 aborted records and the abort marker come first"
    );
    client.close();

    let mut c = config();
    c.consumer.isolation_level = IsolationLevel::ReadCommitted;
    let (client, consumer) = consumer_for(c);
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let got = read(&mut pc, 5);
    let seen: Vec<&[u8]> = got.iter().map(|(_, _, v)| v.as_slice()).collect();
    assert!(
        seen.iter().all(|v| v.starts_with(b"committed")),
        "aborted records hidden: {seen:?}"
    );
    assert_eq!(got[0].0, 6);
    client.close();

    let (client, consumer) = consumer_for(config());
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let got = read(&mut pc, 10);
    assert_eq!(&got[0].2, b"aborted", "read_uncommitted sees them");
    assert_eq!(got[5].0, 6, "the control batch is skipped (offset 5)");
    client.close();
}

#[test]
fn offsets_commit_and_fetch_round_trip() {
    let mut c = config();
    c.consumer.enable_auto_commit = false;
    let client = client(c.clone());
    let topic = unique("kring-commit");
    create_topic(&client, &topic, 2, 1, &[]);
    let group = unique("kring-group");
    kring::client::block_on(async {
        let om = OffsetManager::new(client.clone(), group.clone()).unwrap();
        let p0 = om.manage_partition(&topic, 0).await.unwrap();
        assert_eq!(p0.next_offset(), None, "nothing committed yet");
        p0.mark_offset(42, "meta-42");
        let p1 = om.manage_partition(&topic, 1).await.unwrap();
        p1.mark_offset(7, "");
        om.commit().await.unwrap();
        assert_eq!(
            om.committed(&topic, 0).await.unwrap(),
            Some((42, "meta-42".to_string()))
        );
        om.close().await.unwrap();

        // Auto-commit on a second manager.
        let mut auto = c.clone();
        auto.consumer.enable_auto_commit = true;
        auto.consumer.auto_commit_interval = Duration::from_millis(200);
        let client2 = Client::connect(auto).await.unwrap();
        let om2 = OffsetManager::new(client2.clone(), group.clone()).unwrap();
        let p1 = om2.manage_partition(&topic, 1).await.unwrap();
        assert_eq!(p1.next_offset(), Some((7, String::new())));
        p1.mark_offset(8, "auto");
        let mut committed = None;
        for _ in 0..50 {
            committed = om2.committed(&topic, 1).await.unwrap();
            if committed.as_ref().map(|c| c.0) == Some(8) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(committed, Some((8, "auto".to_string())));
        client2.close();
    });
    client.close();
}

/// KIP-74: a record larger than the fetch sizes still comes through, and the records
/// after it too.
#[test]
fn a_record_larger_than_the_fetch_size_makes_progress() {
    let mut c = config();
    c.consumer.max_partition_fetch_bytes = 4096;
    c.consumer.fetch_max_bytes = 8192;
    let (client, consumer) = consumer_for(c);
    let topic = unique("kring-kip74");
    create_topic(&client, &topic, 1, 1, &[]);
    let big = "B".repeat(300_000);
    let values = ["small-0".to_string(), big.clone(), "small-2".to_string()];
    // Separate batches: flush after each record.
    let producer = Producer::new_blocking(client.clone()).unwrap();
    for (i, v) in values.iter().enumerate() {
        let d = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_key(format!("k{i}"))
                    .with_value(v.clone())
                    .with_header("n", b"1"),
            )
            .unwrap();
        producer.flush_blocking().unwrap();
        assert_eq!(d.wait().unwrap().offset, i as i64);
    }
    producer.close_blocking().unwrap();
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let got = read(&mut pc, 3);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1].2.len(), big.len());
    assert_eq!(got[2].2, b"small-2");
    client.close();
}

#[test]
fn a_caught_up_partition_sees_new_data_while_others_stay_full() {
    // Partitions 0 and 1 hold more than their consumers' prefetch (small fetches) and
    // nobody reads them; partition 2 is read and caught up. A record written to
    // partition 2 must still arrive: the fetcher may not wait for room that never comes.
    let mut c = config();
    c.consumer.max_partition_fetch_bytes = 1024;
    c.consumer.fetch_max_bytes = 4096;
    let (client, consumer) = consumer_for(c);
    let topic = unique("kring-caught-up");
    create_topic(&client, &topic, 3, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    // One record per batch (each waited for), so that a 1 KiB fetch brings a few
    // batches at a time and the idle consumers' prefetch (4 chunks) fills up.
    let filler = "x".repeat(200);
    for p in [0, 1] {
        for _ in 0..60 {
            producer
                .send_blocking(
                    ProducerRecord::new(&topic)
                        .with_value(filler.as_str())
                        .with_partition(p),
                )
                .unwrap()
                .wait()
                .unwrap();
        }
    }
    let _full: Vec<PartitionConsumer> = [0, 1]
        .iter()
        .map(|&p| {
            consumer
                .consume_partition_blocking(&topic, p, Offset::Oldest)
                .unwrap()
        })
        .collect();
    let mut live = consumer
        .consume_partition_blocking(&topic, 2, Offset::Oldest)
        .unwrap();
    // Let the fetcher fill the idle consumers and learn partition 2's end.
    std::thread::sleep(Duration::from_secs(1));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for i in 0..3 {
        let value = format!("live {i}");
        producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_value(value.as_str())
                    .with_partition(2),
            )
            .unwrap()
            .wait()
            .unwrap();
        let got = runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(20), live.next_message()).await
            })
            .unwrap_or_else(|_| panic!("record {i} of partition 2 never arrived"))
            .expect("consumer open")
            .expect("no error");
        assert_eq!(got.value.as_deref(), Some(value.as_bytes()));
    }
}

#[test]
fn starting_on_idle_partitions_does_not_wait_behind_the_long_poll() {
    // Kafka answers a connection's requests in order. With the fetch long-polling an
    // empty partition for 20 s, each further consume_partition (its ListOffsets and
    // OffsetForLeaderEpoch) would wait out that poll if they shared its connection:
    // four partitions took over a minute. The fetcher has a connection of its own, so
    // they all start at once, well inside one poll.
    let mut c = config();
    c.consumer.fetch_max_wait = Duration::from_secs(20);
    c.net.request_timeout = Duration::from_secs(60);
    let (client, consumer) = consumer_for(c);
    let topic = unique("kring-idle-start");
    create_topic(&client, &topic, 4, 1, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(15), async {
            let mut pcs = Vec::new();
            for p in 0..4 {
                pcs.push(consumer.consume_partition(&topic, p, Offset::Oldest).await);
                // Let the fetcher send its long poll before the next partition starts.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            pcs
        })
        .await
    });
    let pcs = started.expect("the partitions started behind the fetcher's long poll");
    assert!(pcs.iter().all(Result::is_ok), "{pcs:?}");
}

/// A raw Fetch of `topic`-0 from `offset` at the leader, with `current` as the current
/// leader epoch and `last_fetched` as the last fetched epoch: the partition's error code.
fn fetch_code(
    client: &Client,
    topic: &str,
    offset: i64,
    current: i32,
    last_fetched: i32,
) -> KafkaCode {
    use kring::protocol::messages::FetchRequest;
    use kring::protocol::messages::fetch::{FetchPartition, FetchTopic};
    let topic_id = client.metadata().topics[topic].id;
    let (leader, _) = kring::client::block_on(client.leader(topic, 0)).unwrap();
    let request = FetchRequest::default()
        .with_replica_id(-1)
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic.into())
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current)
                        .with_last_fetched_epoch(last_fetched)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let response = leader.send_blocking(request).unwrap();
    KafkaCode(response.responses[0].partitions[0].error_code)
}

/// KIP-320 at the real broker: every batch the consumer reads carries the partition's
/// leader epoch as metadata gives it (the epoch the consumer keeps for its position and
/// sends as the current leader epoch); the broker serves a Fetch with those epochs,
/// answers UNKNOWN_LEADER_EPOCH to a newer one, and OffsetForLeaderEpoch for the
/// position's epoch (what the consumer asks after a leader change) ends at the log end,
/// so nothing counts as truncated.
#[test]
fn the_broker_accepts_the_leader_epochs_the_consumer_uses() {
    use kring::protocol::messages::OffsetForLeaderEpochRequest;
    use kring::protocol::messages::offset_for_leader_epoch::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let (client, consumer) = consumer_for(config());
    let topic = unique("kring-epochs");
    create_topic(&client, &topic, 1, 1, &[]);
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    produce(&client, &topic, &values);
    let (leader, epoch) = kring::client::block_on(client.leader(&topic, 0)).unwrap();
    assert!(epoch >= 0, "metadata names the leader epoch");
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let mut read_count = 0;
    while read_count < 20 {
        let batch = pc.next_batch_blocking().expect("alive").expect("no error");
        let header = batch.header().expect("a v2 batch");
        assert_eq!(header.partition_leader_epoch(), epoch);
        read_count += batch.records().count();
    }
    assert_eq!(
        fetch_code(&client, &topic, 20, epoch, epoch),
        KafkaCode::NONE
    );
    assert_eq!(
        fetch_code(&client, &topic, 20, epoch + 1, epoch),
        KafkaCode::UNKNOWN_LEADER_EPOCH
    );
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(-1)
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic.clone())
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(epoch)
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let answer = leader.send_blocking(request).unwrap();
    let end = &answer.topics[0].partitions[0];
    assert_eq!(KafkaCode(end.error_code), KafkaCode::NONE);
    assert_eq!((end.leader_epoch, end.end_offset), (epoch, 20));
    // The consumer, fetching with these epochs all along, still reads new records.
    produce(&client, &topic, &["late".to_string()]);
    let batch = pc.next_batch_blocking().expect("alive").expect("no error");
    assert_eq!(batch.records().next().unwrap().unwrap().offset(), 20);
    client.close();
}
