//! Record batches proven against a real Apache Kafka on loopback (`scripts/kafka up`;
//! `KRING_BOOTSTRAP` overrides 127.0.0.1:9092): batches written by `BatchBuilder`
//! into pooled arenas, one per codec, are produced with a raw ProduceRequest to the
//! partition leader, fetched back with a raw FetchRequest, and read with the lazy
//! reader. The broker must return our bytes unchanged except the two fields it owns
//! (base offset and partition leader epoch, outside the CRC).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kring::client::{BlockingConnection, ConnectionConfig};
use kring::internals::{BufferPool, MemoryBudget};
use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    CreateTopicsRequest, FetchRequest, FetchResponse, InitProducerIdRequest,
    InitProducerIdResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    create_topics::CreatableTopic,
    fetch::{FetchPartition, FetchTopic},
    metadata::MetadataRequestTopic,
    produce::{PartitionProduceData, TopicProduceData},
};
use kring::protocol::primitives::Uuid;
use kring::record::{
    BatchBuilder, BatchOptions, BatchRef, Batches, Compression, Compressor, Decompressor, Header,
    RecordBatchRef,
};

fn bootstrap() -> String {
    std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn connect(addr: &str) -> BlockingConnection {
    BlockingConnection::connect(addr, ConnectionConfig::default())
        .unwrap_or_else(|e| panic!("no broker at {addr}: {e} (start one with `scripts/kafka up`)"))
}

fn unique_topic(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// One record as the test wrote it.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn records_for(codec: Compression, n: usize, now: i64) -> Vec<Written> {
    (0..n)
        .map(|i| {
            let text = format!(
                "{} record {i} of a batch that compresses well, {}",
                codec.name(),
                "lorem ipsum ".repeat(i % 7 + 1)
            );
            Written {
                timestamp: now + i as i64,
                key: (i % 5 != 0).then(|| format!("key-{}", i % 13).into_bytes()),
                value: (i % 11 != 3).then(|| text.into_bytes()),
                headers: match i % 3 {
                    0 => vec![],
                    1 => vec![("trace".into(), Some(format!("{i:08x}").into_bytes()))],
                    _ => vec![
                        ("a".into(), None),
                        ("content-type".into(), Some(b"text/plain".to_vec())),
                    ],
                },
            }
        })
        .collect()
}

struct Cluster {
    leader: BlockingConnection,
    topic: String,
    topic_id: Uuid,
}

/// Creates a one-partition topic and connects to its leader.
fn setup(prefix: &str) -> Cluster {
    let mut conn = connect(&bootstrap());
    let topic = unique_topic(prefix);
    let created = conn
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(topic.clone())
                        .with_num_partitions(1)
                        .with_replication_factor(1)
                        // Tests write fixed timestamps from 2023: without this the
                        // broker's retention check may delete them mid-test.
                        .with_configs(vec![
                            kring::protocol::messages::create_topics::CreatableTopicConfig::default()
                                .with_name("retention.ms".into())
                                .with_value(Some("-1".into())),
                        ]),
                ])
                .with_timeout_ms(30_000),
        )
        .expect("create topics");
    assert_eq!(
        KafkaCode(created.topics[0].error_code),
        KafkaCode::NONE,
        "{:?}",
        created.topics[0].error_message
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let metadata: MetadataResponse = loop {
        let m: MetadataResponse = conn
            .send(
                &MetadataRequest::default()
                    .with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(topic.clone())),
                    ]))
                    .with_allow_auto_topic_creation(false),
            )
            .expect("metadata");
        let ready = m.topics.len() == 1
            && m.topics[0].error_code == 0
            && m.topics[0]
                .partitions
                .first()
                .is_some_and(|p| p.leader_id >= 0);
        if ready {
            break m;
        }
        assert!(Instant::now() < deadline, "no leader for {topic}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let t = &metadata.topics[0];
    let leader_id = t.partitions[0].leader_id;
    let broker = metadata
        .brokers
        .iter()
        .find(|b| b.node_id == leader_id)
        .expect("leader is listed");
    Cluster {
        leader: connect(&format!("{}:{}", broker.host, broker.port)),
        topic,
        topic_id: t.topic_id,
    }
}

impl Cluster {
    /// A ProduceRequest (acks=all) of one batch to partition 0.
    fn produce_request(&self, batch: &[u8]) -> ProduceRequest {
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(self.topic.clone())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::copy_from_slice(batch))),
                    ]),
            ])
    }

    /// Produces one batch; returns the base offset the broker assigned.
    fn produce(&mut self, batch: &[u8]) -> i64 {
        let request = self.produce_request(batch);
        // A new partition's leader may not know it leads yet: retry retriable codes.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let response = self.leader.send(&request).expect("produce");
            let p = &response.responses[0].partition_responses[0];
            let code = KafkaCode(p.error_code);
            if code == KafkaCode::NONE {
                return p.base_offset;
            }
            assert!(
                code.is_retriable() && Instant::now() < deadline,
                "produce failed: {code:?} {:?}",
                p.error_message
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Produces one batch once; the partition's error code.
    fn produce_once(&mut self, batch: &[u8]) -> KafkaCode {
        let response = self
            .leader
            .send(&self.produce_request(batch))
            .expect("produce");
        KafkaCode(response.responses[0].partition_responses[0].error_code)
    }

    /// A producer id from InitProducerId without a transactional id, naming `current`
    /// (retried while a broker that just started loads its coordinator).
    fn init_producer_id(&mut self, current: (i64, i16)) -> (i64, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(current.0)
            .with_producer_epoch(current.1);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let response: InitProducerIdResponse =
                self.leader.send(&request).expect("init producer id");
            let code = KafkaCode(response.error_code);
            if code == KafkaCode::NONE {
                return (response.producer_id, response.producer_epoch);
            }
            assert!(
                code.is_retriable() && Instant::now() < deadline,
                "init producer id: {code:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Fetches from `offset` with a per-partition byte limit; returns the records bytes.
    fn fetch(&mut self, offset: i64, max_bytes: i32) -> Bytes {
        let request = FetchRequest::default()
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(64 << 20)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(self.topic.clone())
                    .with_topic_id(self.topic_id)
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(max_bytes),
                    ]),
            ]);
        let response: FetchResponse = self.leader.send(&request).expect("fetch");
        assert_eq!(KafkaCode(response.error_code), KafkaCode::NONE);
        let p = &response.responses[0].partitions[0];
        assert_eq!(KafkaCode(p.error_code), KafkaCode::NONE);
        p.records.clone().unwrap_or_default()
    }
}

#[test]
fn every_codec_round_trips_through_the_broker_byte_for_byte() {
    let mut cluster = setup("kring-records");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let pool = BufferPool::new(256 << 10, MemoryBudget::new(4 << 20));
    let mut compressor = Compressor::new();

    let mut sent: Vec<(Vec<u8>, Vec<Written>, i64)> = Vec::new();
    for codec in Compression::ALL {
        let records = records_for(codec, 200, now);
        let mut builder =
            BatchBuilder::new(pool.try_get().unwrap(), BatchOptions::default()).unwrap();
        for r in &records {
            let headers: Vec<Header<'_>> = r
                .headers
                .iter()
                .map(|(k, v)| Header {
                    key: k,
                    value: v.as_deref(),
                })
                .collect();
            builder
                .append(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers)
                .unwrap();
        }
        let (sealed, spare) = builder
            .seal_compressed(codec, &mut compressor, pool.try_get().unwrap())
            .unwrap();
        drop(spare);
        assert_eq!(
            sealed.compression(),
            codec,
            "{codec:?} was worth compressing"
        );
        let bytes = sealed.as_bytes().to_vec();
        let base_offset = cluster.produce(&bytes);
        eprintln!(
            "{:>6}: {} records, {} bytes on the wire, base offset {base_offset}",
            codec.name(),
            records.len(),
            bytes.len()
        );
        sent.push((bytes, records, base_offset));
    }

    // Fetch everything back (the broker may split it over several responses).
    let end = sent.last().map(|(_, r, o)| o + r.len() as i64).unwrap();
    let mut decompressor = Decompressor::default();
    let mut scratch = Vec::new();
    let mut offset = 0;
    let mut seen = 0;
    while offset < end {
        let records = cluster.fetch(offset, 8 << 20);
        let mut batches = Batches::new(&records).verify_crc(true);
        for batch in &mut batches {
            let BatchRef::V2(batch) = batch.expect("a valid batch") else {
                panic!("the broker answered with a legacy message set")
            };
            let (wire, written, base_offset) = &sent[seen];
            seen += 1;
            assert_eq!(batch.base_offset(), *base_offset);
            // Byte for byte, except base offset and leader epoch, which the broker sets.
            let got = batch.as_bytes();
            assert_eq!(got.len(), wire.len());
            assert_eq!(&got[8..12], &wire[8..12], "length");
            assert_eq!(
                &got[16..],
                &wire[16..],
                "magic, CRC, attributes and records"
            );
            assert!(batch.partition_leader_epoch() >= 0);
            assert_eq!(batch.compression().unwrap(), Compression::ALL[seen - 1]);

            let read: Vec<Written> = batch
                .decompress_records(&mut decompressor, &mut scratch)
                .unwrap()
                .enumerate()
                .map(|(i, r)| {
                    let r = r.unwrap();
                    assert_eq!(r.offset(), base_offset + i as i64);
                    Written {
                        timestamp: r.timestamp(),
                        key: r.key().map(<[u8]>::to_vec),
                        value: r.value().map(<[u8]>::to_vec),
                        headers: r
                            .headers()
                            .map(|h| {
                                let h = h.unwrap();
                                (h.key_str().unwrap().to_owned(), h.value.map(<[u8]>::to_vec))
                            })
                            .collect(),
                    }
                })
                .collect();
            assert_eq!(&read, written);
            offset = batch.next_offset();
        }
        assert!(batches.remainder().is_empty() || offset < end);
    }
    assert_eq!(seen, sent.len());
}

#[test]
fn a_fetch_cut_mid_batch_stops_cleanly() {
    let mut cluster = setup("kring-partial");
    let mut lens = Vec::new();
    for round in 0..2 {
        let mut b =
            BatchBuilder::new(Vec::with_capacity(64 << 10), BatchOptions::default()).unwrap();
        for i in 0..100 {
            let value = format!("round {round} value {i}");
            b.append(1_700_000_000_000 + i, None, Some(value.as_bytes()), &[])
                .unwrap();
        }
        let sealed = b.seal().unwrap();
        lens.push(sealed.len());
        cluster.produce(sealed.as_bytes());
    }
    // Room for the first batch and part of the second: the broker slices its log at
    // the byte limit, so the second batch arrives cut.
    let limit = lens[0] + lens[1] / 2;
    let records = cluster.fetch(0, limit as i32);
    let mut batches = Batches::new(&records).verify_crc(true);
    let first = batches.next().expect("one whole batch").unwrap();
    assert_eq!(first.base_offset(), 0);
    assert!(batches.next().is_none(), "the cut batch is not yielded");
    assert_eq!(
        batches.remainder().len(),
        records.len() - lens[0],
        "the partial batch is left as the remainder"
    );
    // The whole second batch arrives when fetched from its offset.
    let records = cluster.fetch(100, 1 << 20);
    let (second, _) = RecordBatchRef::parse(&records).unwrap().unwrap();
    second.verify_crc().unwrap();
    assert_eq!(second.base_offset(), 100);
    assert_eq!(second.records().unwrap().count(), 100);
}

/// A one-record idempotent batch of `producer` at `sequence`.
fn idempotent_batch(pool: &BufferPool, producer: (i64, i16), sequence: i32) -> Vec<u8> {
    let mut options = BatchOptions::default();
    options.producer_id = producer.0;
    options.producer_epoch = producer.1;
    options.base_sequence = sequence;
    let mut builder = BatchBuilder::new(pool.try_get().unwrap(), options).unwrap();
    let value = format!("{producer:?} at {sequence}");
    builder
        .append(0, None, Some(value.as_bytes()), &[])
        .unwrap();
    builder.seal().unwrap().as_bytes().to_vec()
}

/// The broker rules the idempotent producer's epoch bump rests on
/// (`ProducerId::next_epoch`): InitProducerId without a transactional id gives a new id
/// whatever id it names; a new id does not fence the old one, whose next sequence is
/// still written; the same id at the next epoch, from sequence 0, is taken and fences
/// the old epoch, so a late request of it cannot be written behind the new one.
#[test]
fn a_higher_epoch_fences_an_idempotent_producers_late_batches_and_a_new_id_does_not() {
    let mut cluster = setup("kring-epoch");
    let pool = BufferPool::new(64 << 10, MemoryBudget::new(1 << 20));
    let old = cluster.init_producer_id((-1, -1));
    let renewed = cluster.init_producer_id(old);
    assert_ne!(renewed.0, old.0, "a new id, not {old:?} bumped");
    assert_eq!(renewed.1, 0);

    // The first write of a partition's leader may wait for it to know it leads.
    cluster.produce(&idempotent_batch(&pool, old, 0));
    assert_eq!(
        cluster.produce_once(&idempotent_batch(&pool, renewed, 0)),
        KafkaCode::NONE
    );
    assert_eq!(
        cluster.produce_once(&idempotent_batch(&pool, old, 1)),
        KafkaCode::NONE,
        "a new producer id leaves the old one writable"
    );

    let bumped = (old.0, old.1 + 1);
    assert_eq!(
        cluster.produce_once(&idempotent_batch(&pool, bumped, 0)),
        KafkaCode::NONE,
        "the next epoch from sequence 0"
    );
    assert_eq!(
        cluster.produce_once(&idempotent_batch(&pool, old, 2)),
        KafkaCode::INVALID_PRODUCER_EPOCH,
        "the old epoch's next batch, arriving late"
    );
    assert_eq!(
        cluster.produce_once(&idempotent_batch(&pool, bumped, 1)),
        KafkaCode::NONE
    );
}
