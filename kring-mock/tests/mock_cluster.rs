//! FakeCluster through kring's own clients: records produced to partition leaders come
//! back from Fetch with the offsets the cluster assigned; metadata follows leader moves
//! and brokers going down; the old leader refuses with NOT_LEADER_OR_FOLLOWER;
//! offsets, coordinators, groups, producer ids; control hooks that answer, drop,
//! delay; garbage; and determinism. Requests go through a raw blocking connection
//! (`support::RawConnection`, on kring's public protocol layer) to exactly the broker
//! a test names; kring's Client, Producer and Consumer run against the cluster at the
//! end.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kring::protocol::messages::{
    CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeGroupsRequest,
    FetchRequest, FetchResponse, FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetFetchRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, ProduceResponse, SyncGroupRequest,
    create_topics::CreatableTopic,
    delete_records::{DeleteRecordsPartition, DeleteRecordsTopic},
    delete_topics::DeleteTopicState,
    fetch::{FetchPartition, FetchTopic},
    join_group::JoinGroupRequestProtocol,
    leave_group::MemberIdentity,
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
    metadata::MetadataRequestTopic,
    offset_commit::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_fetch::{OffsetFetchRequestGroup, OffsetFetchRequestTopics},
    offset_for_leader_epoch::{OffsetForLeaderPartition, OffsetForLeaderTopic},
    produce::{PartitionProduceData, TopicProduceData},
    sync_group::SyncGroupRequestAssignment,
};
use kring::protocol::{ApiKey, KafkaCode, Uuid};
use kring::record::{BatchBuilder, BatchOptions, Batches, Compression, Compressor, Decompressor};
use kring_mock::{FakeCluster, Reply, record_batch};
use support::{RawConnection, RawError};

fn connect(addr: &str) -> RawConnection {
    RawConnection::connect(addr).expect("connect")
}

fn connect_to(cluster: &FakeCluster, broker: i32) -> RawConnection {
    connect(&cluster.broker_address(broker).expect("broker"))
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    record_batch(0, 1_000, &records).unwrap()
}

fn produce(topic: &str, partition: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic.into())
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records)),
                ]),
        ])
}

fn fetch(topic: &str, id: Uuid, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(-1)
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic.into())
                .with_topic_id(id)
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

fn produced(r: &ProduceResponse) -> (KafkaCode, i64) {
    let p = &r.responses[0].partition_responses[0];
    (KafkaCode(p.error_code), p.base_offset)
}

fn fetched(r: &FetchResponse) -> (KafkaCode, i64, Vec<(i64, String)>) {
    let p = &r.responses[0].partitions[0];
    let mut out = Vec::new();
    let mut d = Decompressor::default();
    let mut scratch = Vec::new();
    for b in Batches::new(p.records.as_deref().unwrap_or_default()).verify_crc(true) {
        for rec in b.unwrap().records(&mut d, &mut scratch).unwrap() {
            let rec = rec.unwrap();
            out.push((
                rec.offset(),
                String::from_utf8(rec.value().unwrap_or_default().to_vec()).unwrap(),
            ));
        }
    }
    (KafkaCode(p.error_code), p.high_watermark, out)
}

fn metadata(conn: &mut RawConnection) -> MetadataResponse {
    conn.send(&MetadataRequest::default().with_topics(None))
        .expect("metadata")
}

fn retry<T>(what: &str, mut f: impl FnMut() -> Result<T, RawError>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[test]
fn records_round_trip_through_partition_leaders() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic("events", 3)
        .build()
        .unwrap();
    let id = cluster.topic_id("events").unwrap();
    let mut brokers: std::collections::BTreeMap<i32, RawConnection> = cluster
        .addresses()
        .into_iter()
        .map(|(id, addr)| (id, connect(&addr)))
        .collect();

    // The bootstrap broker's metadata names the leaders; every broker agrees.
    let first = *brokers.keys().next().unwrap();
    let m = metadata(brokers.get_mut(&first).unwrap());
    assert_eq!(m.brokers.len(), 3);
    assert_eq!(m.cluster_id.as_deref(), Some("kring-fake-cluster"));
    let topic = &m.topics[0];
    assert_eq!(topic.topic_id, id);
    assert_eq!(topic.partitions.len(), 3);
    let leaders: Vec<i32> = topic.partitions.iter().map(|p| p.leader_id).collect();
    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        3,
        "partitions spread over brokers: {leaders:?}"
    );
    for p in &topic.partitions {
        assert_eq!(p.replica_nodes.len(), 3);
        assert_eq!(p.isr_nodes.len(), 3);
    }

    for (partition, &leader) in leaders.iter().enumerate() {
        let partition = partition as i32;
        let b = brokers.get_mut(&leader).unwrap();
        let first = b
            .send(&produce("events", partition, batch(&["a", "b", "c"])))
            .unwrap();
        assert_eq!(produced(&first), (KafkaCode::NONE, 0));
        let second = b
            .send(&produce("events", partition, batch(&["d"])))
            .unwrap();
        assert_eq!(produced(&second), (KafkaCode::NONE, 3));
        // Fetch v17 by topic id, from the middle of the first batch: the whole batch
        // comes back (as from a broker) and readers skip what they did not ask for.
        let f = b.send(&fetch("events", id, partition, 1, 100)).unwrap();
        let (code, hwm, records) = fetched(&f);
        assert_eq!((code, hwm), (KafkaCode::NONE, 4));
        let values: Vec<&str> = records.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["a", "b", "c", "d"]);
        assert_eq!(records[3].0, 3);
        assert_eq!(cluster.high_watermark("events", partition).unwrap(), 4);
    }
    // Fetch v12 names topics instead of ids.
    let mut conn = connect_to(&cluster, leaders[0]);
    let f = conn
        .send_version(&fetch("events", Uuid::ZERO, 0, 0, 0), 12)
        .unwrap();
    assert_eq!(fetched(&f).2.len(), 4);
    // Stored batches keep the producer's bytes, with the cluster's base offsets.
    let stored = cluster.batches("events", 0).unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(&stored[1][..8], &3i64.to_be_bytes());
    let records = cluster.records("events", 0).unwrap();
    assert_eq!(records.len(), 4);
    assert_eq!(records[3].2.as_deref(), Some(&b"d"[..]));
}

#[test]
fn compressed_batches_are_stored_and_served() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("z", 1)
        .build()
        .unwrap();
    let mut b = BatchBuilder::new(Vec::with_capacity(1 << 16), BatchOptions::default()).unwrap();
    for i in 0..100 {
        b.append(
            i,
            None,
            Some(format!("value {i} ").repeat(10).as_bytes()),
            &[],
        )
        .unwrap();
    }
    let (sealed, _) = b
        .seal_compressed(
            Compression::Zstd,
            &mut Compressor::default(),
            Vec::with_capacity(1 << 16),
        )
        .unwrap();
    let bytes = Bytes::copy_from_slice(sealed.as_bytes());
    let mut conn = connect_to(&cluster, 1);
    let r = conn.send(&produce("z", 0, bytes)).unwrap();
    assert_eq!(produced(&r), (KafkaCode::NONE, 0));
    assert_eq!(cluster.high_watermark("z", 0).unwrap(), 100);
    let id = cluster.topic_id("z").unwrap();
    let f = conn.send(&fetch("z", id, 0, 50, 0)).unwrap();
    let (_, _, records) = fetched(&f);
    assert_eq!(records.len(), 100);
    assert!(records[99].1.starts_with("value 99"));
    // ListOffsets by timestamp looks inside compressed batches.
    let lo = conn
        .send(&ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name("z".into())
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(42)]),
        ]))
        .unwrap();
    assert_eq!(lo.topics[0].partitions[0].offset, 42);
}

#[test]
fn moved_leader_shows_in_metadata_and_the_old_leader_refuses() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic("t", 1)
        .build()
        .unwrap();
    let id = cluster.topic_id("t").unwrap();
    let old = cluster.leader("t", 0).unwrap();
    let new = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != old)
        .unwrap();
    let mut old_conn = connect_to(&cluster, old);
    assert_eq!(
        produced(&old_conn.send(&produce("t", 0, batch(&["x"]))).unwrap()).0,
        KafkaCode::NONE
    );
    let epoch = cluster.leader_epoch("t", 0).unwrap();

    cluster.move_leader("t", 0, new).unwrap();
    assert_eq!(cluster.leader_epoch("t", 0), Some(epoch + 1));
    // Every broker's metadata shows the move.
    for b in cluster.broker_ids() {
        let m = metadata(&mut connect_to(&cluster, b));
        assert_eq!(m.topics[0].partitions[0].leader_id, new, "broker {b}");
        assert_eq!(m.topics[0].partitions[0].leader_epoch, epoch + 1);
    }
    // The old leader refuses Produce, Fetch and ListOffsets, naming the new leader (KIP-951).
    let r = old_conn.send(&produce("t", 0, batch(&["y"]))).unwrap();
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(KafkaCode(p.error_code), KafkaCode::NOT_LEADER_OR_FOLLOWER);
    assert!(KafkaCode(p.error_code).is_retriable());
    assert_eq!(p.current_leader.leader_id, new);
    assert_eq!(r.node_endpoints[0].node_id, new);
    let f = old_conn.send(&fetch("t", id, 0, 0, 0)).unwrap();
    assert_eq!(fetched(&f).0, KafkaCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!(f.responses[0].partitions[0].current_leader.leader_id, new);
    let lo = old_conn
        .send(&ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name("t".into())
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)]),
        ]))
        .unwrap();
    assert_eq!(
        KafkaCode(lo.topics[0].partitions[0].error_code),
        KafkaCode::NOT_LEADER_OR_FOLLOWER
    );
    // The new leader has the log, and fences a client still at the old epoch.
    let mut new_conn = connect_to(&cluster, new);
    let mut stale = fetch("t", id, 0, 0, 0);
    stale.topics[0].partitions[0].current_leader_epoch = epoch;
    let f = new_conn.send(&stale).unwrap();
    assert_eq!(fetched(&f).0, KafkaCode::FENCED_LEADER_EPOCH);
    let r = new_conn.send(&produce("t", 0, batch(&["y"]))).unwrap();
    assert_eq!(produced(&r), (KafkaCode::NONE, 1));
    // The batches say which epoch wrote them (KIP-101).
    let olfe = new_conn
        .send(&OffsetForLeaderEpochRequest::default().with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic("t".into())
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(epoch)]),
        ]))
        .unwrap();
    let e = &olfe.topics[0].partitions[0];
    assert_eq!((e.leader_epoch, e.end_offset), (epoch, 1));
}

#[test]
fn a_broker_taken_down_refuses_connections_and_leaves_metadata() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic("t", 3)
        .build()
        .unwrap();
    let victim = cluster.leader("t", 0).unwrap();
    let addr = cluster.broker_address(victim).unwrap();
    let mut b = connect(&addr);
    metadata(&mut b);

    cluster.take_down(victim).unwrap();
    assert!(!cluster.is_up(victim));
    assert!(TcpStream::connect(&addr).is_err(), "the listener is closed");
    let err = b
        .send(&MetadataRequest::default().with_topics(None))
        .unwrap_err();
    assert!(err.is_retriable(), "{err}");

    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&x| x != victim)
        .unwrap();
    let m = metadata(&mut connect_to(&cluster, other));
    assert!(m.brokers.iter().all(|b| b.node_id != victim));
    assert_eq!(m.brokers.len(), 2);
    for p in &m.topics[0].partitions {
        assert_ne!(p.leader_id, victim, "failed over");
        assert_eq!(p.offline_replicas, [victim]);
        assert!(!p.isr_nodes.contains(&victim));
    }
    assert_ne!(cluster.coordinator("some-group"), Some(victim));

    cluster.bring_up(victim).unwrap();
    let m = retry("back up", || {
        RawConnection::connect(&addr)?.send(&MetadataRequest::default().with_topics(None))
    });
    assert_eq!(m.brokers.len(), 3);
}

#[test]
fn without_failover_partitions_go_leaderless() {
    let cluster = FakeCluster::builder()
        .brokers(2)
        .auto_failover(false)
        .topic("t", 2)
        .build()
        .unwrap();
    let victim = cluster.leader("t", 0).unwrap();
    cluster.take_down(victim).unwrap();
    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&x| x != victim)
        .unwrap();
    let m = metadata(&mut connect_to(&cluster, other));
    let p0 = &m.topics[0].partitions[0];
    assert_eq!(p0.leader_id, -1);
    assert_eq!(KafkaCode(p0.error_code), KafkaCode::LEADER_NOT_AVAILABLE);
    cluster.bring_up(victim).unwrap();
    assert_eq!(cluster.leader("t", 0), Some(victim));
}

#[test]
fn offsets_log_start_and_out_of_range() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("t", 1)
        .build()
        .unwrap();
    for (i, ts) in [100i64, 200, 300].into_iter().enumerate() {
        let b = record_batch(0, ts, &[(None, Some(format!("{i}").as_bytes()))]).unwrap();
        assert_eq!(cluster.append("t", 0, &b).unwrap(), i as i64);
    }
    let mut conn = connect_to(&cluster, 1);
    let list = |conn: &mut RawConnection, ts: i64| {
        let r = conn
            .send(&ListOffsetsRequest::default().with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name("t".into())
                    .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(ts)]),
            ]))
            .unwrap();
        r.topics[0].partitions[0].offset
    };
    assert_eq!(list(&mut conn, -2), 0);
    assert_eq!(list(&mut conn, -1), 3);
    assert_eq!(list(&mut conn, 150), 1);
    assert_eq!(list(&mut conn, -3), 2, "max timestamp (KIP-734)");
    assert_eq!(list(&mut conn, 999), -1);
    // v0 answers in old_style_offsets.
    let v0 = conn
        .send_version(
            &ListOffsetsRequest::default().with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name("t".into())
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_timestamp(-1)
                            .with_max_num_offsets(1),
                    ]),
            ]),
            0,
        )
        .unwrap();
    assert_eq!(v0.topics[0].partitions[0].old_style_offsets, [3]);

    let r = conn
        .send(&DeleteRecordsRequest::default().with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name("t".into())
                .with_partitions(vec![DeleteRecordsPartition::default().with_offset(2)]),
        ]))
        .unwrap();
    assert_eq!(r.topics[0].partitions[0].low_watermark, 2);
    assert_eq!(list(&mut conn, -2), 2);
    let id = cluster.topic_id("t").unwrap();
    for offset in [1, 4] {
        let f = conn.send(&fetch("t", id, 0, offset, 0)).unwrap();
        assert_eq!(
            fetched(&f).0,
            KafkaCode::OFFSET_OUT_OF_RANGE,
            "offset {offset}"
        );
        assert_eq!(f.responses[0].partitions[0].log_start_offset, 2);
    }
    let f = conn.send(&fetch("t", id, 0, 3, 0)).unwrap();
    let (code, hwm, records) = fetched(&f);
    assert_eq!((code, hwm), (KafkaCode::NONE, 3));
    assert!(records.is_empty());
    assert_eq!(cluster.log_start_offset("t", 0).unwrap(), 2);
}

#[test]
fn fetch_waits_for_data_up_to_max_wait() {
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(1)
            .topic("t", 1)
            .build()
            .unwrap(),
    );
    let id = cluster.topic_id("t").unwrap();
    let mut conn = connect_to(&cluster, 1);
    let started = Instant::now();
    let f = conn.send(&fetch("t", id, 0, 0, 200)).unwrap();
    assert!(fetched(&f).2.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(200));

    let writer = {
        let cluster = cluster.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            cluster.append("t", 0, &batch(&["late"])).unwrap();
        })
    };
    let started = Instant::now();
    let f = conn.send(&fetch("t", id, 0, 0, 5_000)).unwrap();
    assert_eq!(fetched(&f).2, [(0, "late".to_string())]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "woken by the append"
    );
    writer.join().unwrap();
}

#[test]
fn topics_are_created_and_deleted_by_request() {
    let cluster = FakeCluster::new(3).unwrap();
    let mut conn = connect_to(&cluster, 2);
    let r = conn
        .send(
            &CreateTopicsRequest::default()
                .with_timeout_ms(1000)
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name("a".into())
                        .with_num_partitions(4)
                        .with_replication_factor(2),
                    CreatableTopic::default()
                        .with_name("b".into())
                        .with_num_partitions(-1)
                        .with_replication_factor(-1),
                    CreatableTopic::default()
                        .with_name("bad name!".into())
                        .with_num_partitions(1)
                        .with_replication_factor(1),
                    CreatableTopic::default()
                        .with_name("c".into())
                        .with_num_partitions(1)
                        .with_replication_factor(4),
                ]),
        )
        .unwrap();
    let codes: Vec<KafkaCode> = r.topics.iter().map(|t| KafkaCode(t.error_code)).collect();
    assert_eq!(
        codes,
        [
            KafkaCode::NONE,
            KafkaCode::NONE,
            KafkaCode::INVALID_TOPIC_EXCEPTION,
            KafkaCode::INVALID_REPLICATION_FACTOR
        ]
    );
    assert_eq!(
        (r.topics[0].num_partitions, r.topics[0].replication_factor),
        (4, 2)
    );
    assert_eq!(
        (r.topics[1].num_partitions, r.topics[1].replication_factor),
        (1, 3)
    );
    assert_eq!(Some(r.topics[0].topic_id), cluster.topic_id("a"));
    assert_eq!(cluster.replicas("a", 3).unwrap().len(), 2);
    let again = conn
        .send(&CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name("a".into())
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]))
        .unwrap();
    assert_eq!(
        KafkaCode(again.topics[0].error_code),
        KafkaCode::TOPIC_ALREADY_EXISTS
    );

    // Metadata for unknown topics, by name and by id.
    let m = conn
        .send(&MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some("a".into())),
            MetadataRequestTopic::default().with_name(Some("nope".into())),
            MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(cluster.topic_id("b").unwrap()),
        ])))
        .unwrap();
    assert_eq!(m.topics[0].partitions.len(), 4);
    assert_eq!(
        KafkaCode(m.topics[1].error_code),
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(m.topics[2].name.as_deref(), Some("b"));

    let d = conn
        .send(&DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_name(Some("a".into())),
            DeleteTopicState::default()
                .with_name(None)
                .with_topic_id(cluster.topic_id("b").unwrap()),
            DeleteTopicState::default().with_name(Some("nope".into())),
        ]))
        .unwrap();
    let codes: Vec<i16> = d.responses.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [0, 0, KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code()]);
    assert!(cluster.topics().is_empty());
}

#[test]
fn auto_created_topics() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .auto_create_topics(true)
        .default_partitions(3)
        .build()
        .unwrap();
    let mut conn = connect_to(&cluster, 1);
    let m = conn
        .send(
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some("fresh".into())),
                ]))
                .with_allow_auto_topic_creation(true),
        )
        .unwrap();
    assert_eq!(m.topics[0].error_code, 0);
    assert_eq!(m.topics[0].partitions.len(), 3);
    assert_eq!(cluster.partition_count("fresh"), Some(3));
}

fn commit_request(group: &str, generation: i32, member: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group.into())
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(member.into())
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name("t".into())
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_metadata(Some("m".into())),
                ]),
        ])
}

#[test]
fn coordinators_commits_and_not_coordinator() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic("t", 1)
        .build()
        .unwrap();
    let mut any = connect_to(&cluster, 1);
    let fc = any
        .send(
            &FindCoordinatorRequest::default().with_coordinator_keys(vec!["g".into(), "h".into()]),
        )
        .unwrap();
    let coordinator = fc.coordinators[0].node_id;
    assert_eq!(Some(coordinator), cluster.coordinator("g"));
    assert_eq!(
        fc.coordinators[0].port.to_string(),
        cluster
            .broker_address(coordinator)
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
    );
    // v3 answers at the top level.
    let v3 = any
        .send_version(&FindCoordinatorRequest::default().with_key("g".into()), 3)
        .unwrap();
    assert_eq!(v3.node_id, coordinator);

    let mut coord = connect_to(&cluster, coordinator);
    let r = coord.send(&commit_request("g", -1, "", 17)).unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(cluster.committed("g", "t", 0), Some(17));
    let f = coord
        .send(&OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id("g".into())
                .with_topics(Some(vec![
                    OffsetFetchRequestTopics::default()
                        .with_name("t".into())
                        .with_partition_indexes(vec![0, 1]),
                ])),
        ]))
        .unwrap();
    let parts = &f.groups[0].topics[0].partitions;
    assert_eq!(parts[0].committed_offset, 17);
    assert_eq!(parts[0].metadata.as_deref(), Some("m"));
    assert_eq!(parts[1].committed_offset, -1);

    // Another broker is not the coordinator.
    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != coordinator)
        .unwrap();
    let mut wrong = connect_to(&cluster, other);
    let r = wrong.send(&commit_request("g", -1, "", 18)).unwrap();
    let code = KafkaCode(r.topics[0].partitions[0].error_code);
    assert_eq!(code, KafkaCode::NOT_COORDINATOR);
    assert!(code.is_retriable());
    // The coordinator moves: the old one now says NOT_COORDINATOR, the new one commits.
    cluster.set_coordinator("g", other).unwrap();
    let r = coord.send(&commit_request("g", -1, "", 19)).unwrap();
    assert_eq!(
        KafkaCode(r.topics[0].partitions[0].error_code),
        KafkaCode::NOT_COORDINATOR
    );
    let r = wrong.send(&commit_request("g", -1, "", 19)).unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(cluster.committed("g", "t", 0), Some(19));
    // OffsetFetch before v8 reports it at the top level.
    let old = coord
        .send_version(
            &OffsetFetchRequest::default()
                .with_group_id("g".into())
                .with_topics(None),
            7,
        )
        .unwrap();
    assert_eq!(KafkaCode(old.error_code), KafkaCode::NOT_COORDINATOR);
}

fn join(conn: &mut RawConnection, member: &str, metadata: &'static [u8]) -> JoinGroupResponse {
    conn.send(
        &JoinGroupRequest::default()
            .with_group_id("g".into())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(5_000)
            .with_member_id(member.into())
            .with_protocol_type("consumer".into())
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name("range".into())
                    .with_metadata(Bytes::from_static(metadata)),
            ]),
    )
    .expect("join")
}

fn sync(
    conn: &mut RawConnection,
    generation: i32,
    member: &str,
    assignments: Vec<(String, &'static [u8])>,
) -> (KafkaCode, Bytes) {
    let r = conn
        .send(
            &SyncGroupRequest::default()
                .with_group_id("g".into())
                .with_generation_id(generation)
                .with_member_id(member.into())
                .with_protocol_type(Some("consumer".into()))
                .with_protocol_name(Some("range".into()))
                .with_assignments(
                    assignments
                        .into_iter()
                        .map(|(m, a)| {
                            SyncGroupRequestAssignment::default()
                                .with_member_id(m)
                                .with_assignment(Bytes::from_static(a))
                        })
                        .collect(),
                ),
        )
        .expect("sync");
    (KafkaCode(r.error_code), r.assignment)
}

fn heartbeat(conn: &mut RawConnection, generation: i32, member: &str) -> KafkaCode {
    KafkaCode(
        conn.send(
            &HeartbeatRequest::default()
                .with_group_id("g".into())
                .with_generation_id(generation)
                .with_member_id(member.into()),
        )
        .expect("heartbeat")
        .error_code,
    )
}

#[test]
fn a_group_of_two_rebalances_and_shares_assignments() {
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(3)
            .topic("t", 2)
            .build()
            .unwrap(),
    );
    let coordinator = cluster.coordinator("g").unwrap();
    let mut one = connect_to(&cluster, coordinator);

    // The first member forms generation 1 alone and leads it.
    let j1 = join(&mut one, "", b"one");
    assert_eq!(j1.error_code, 0);
    assert_eq!(j1.generation_id, 1);
    assert_eq!(j1.leader, j1.member_id);
    assert_eq!(j1.members.len(), 1);
    let m1 = j1.member_id.clone();
    assert_eq!(
        sync(&mut one, 1, &m1, vec![(m1.clone(), b"all")]),
        (KafkaCode::NONE, Bytes::from_static(b"all"))
    );
    assert_eq!(heartbeat(&mut one, 1, &m1), KafkaCode::NONE);
    assert_eq!(cluster.group_state("g"), Some("Stable"));

    // A second member joins; its join waits for the first to rejoin.
    let second = {
        let cluster = cluster.clone();
        std::thread::spawn(move || {
            let mut two = connect_to(&cluster, coordinator);
            let j2 = join(&mut two, "", b"two");
            let m2 = j2.member_id.clone();
            let (code, assignment) = sync(&mut two, j2.generation_id, &m2, vec![]);
            (j2, code, assignment, two)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while heartbeat(&mut one, 1, &m1) != KafkaCode::REBALANCE_IN_PROGRESS {
        assert!(Instant::now() < deadline, "no rebalance");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Commits of the current generation still go through while others rejoin.
    let r = one.send(&commit_request("g", 1, &m1, 5)).unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    let j1 = join(&mut one, &m1, b"one");
    assert_eq!(j1.generation_id, 2);
    assert_eq!(j1.leader, m1, "the leader stays");
    assert_eq!(j1.members.len(), 2);
    let m2 = j1
        .members
        .iter()
        .find(|m| m.member_id != m1)
        .unwrap()
        .member_id
        .clone();
    assert_eq!(
        &j1.members
            .iter()
            .find(|m| m.member_id == m2)
            .unwrap()
            .metadata[..],
        b"two"
    );
    let (code, mine) = sync(
        &mut one,
        2,
        &m1,
        vec![(m1.clone(), b"p0"), (m2.clone(), b"p1")],
    );
    assert_eq!((code, &mine[..]), (KafkaCode::NONE, &b"p0"[..]));
    let (j2, code, theirs, mut two) = second.join().unwrap();
    assert_eq!(j2.generation_id, 2);
    assert!(j2.members.is_empty(), "followers get no member list");
    assert_eq!((code, &theirs[..]), (KafkaCode::NONE, &b"p1"[..]));
    assert_eq!(heartbeat(&mut two, 2, &m2), KafkaCode::NONE);
    assert_eq!(heartbeat(&mut one, 1, &m1), KafkaCode::ILLEGAL_GENERATION);

    let described = one
        .send(&DescribeGroupsRequest::default().with_groups(vec!["g".into()]))
        .unwrap();
    let g = &described.groups[0];
    assert_eq!(
        (g.group_state.as_str(), g.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(g.members.len(), 2);
    let listed = one.send(&ListGroupsRequest::default()).unwrap();
    assert_eq!(listed.groups[0].group_id, "g");

    // Stale commits are refused; current ones accepted.
    let r = one.send(&commit_request("g", 1, &m1, 6)).unwrap();
    assert_eq!(
        KafkaCode(r.topics[0].partitions[0].error_code),
        KafkaCode::ILLEGAL_GENERATION
    );
    let r = one.send(&commit_request("g", 2, &m1, 7)).unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    // The second leaves; the first is told to rebalance and forms generation 3 alone.
    let left = two
        .send(
            &LeaveGroupRequest::default()
                .with_group_id("g".into())
                .with_members(vec![MemberIdentity::default().with_member_id(m2.clone())]),
        )
        .unwrap();
    assert_eq!(left.members[0].error_code, 0);
    assert_eq!(
        heartbeat(&mut one, 2, &m1),
        KafkaCode::REBALANCE_IN_PROGRESS
    );
    let j1 = join(&mut one, &m1, b"one");
    assert_eq!((j1.generation_id, j1.members.len()), (3, 1));
    assert_eq!(cluster.group_members("g"), vec![m1]);
    assert_eq!(heartbeat(&mut two, 2, &m2), KafkaCode::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_member_that_never_rejoins_is_dropped_at_the_rebalance_timeout() {
    let cluster = FakeCluster::builder().brokers(1).build().unwrap();
    let mut one = connect(&cluster.bootstrap()[0]);
    let mut two = connect(&cluster.bootstrap()[0]);
    let rejoin = |conn: &mut RawConnection, member: &str| {
        conn.send(
            &JoinGroupRequest::default()
                .with_group_id("g".into())
                .with_session_timeout_ms(1_000)
                .with_rebalance_timeout_ms(300)
                .with_member_id(member.into())
                .with_protocol_type("consumer".into())
                .with_protocols(vec![
                    JoinGroupRequestProtocol::default().with_name("range".into()),
                ]),
        )
        .unwrap()
    };
    let j1 = rejoin(&mut one, "");
    let _ = sync(&mut one, 1, &j1.member_id, vec![]);
    // The newcomer waits; the first member never comes back.
    let started = Instant::now();
    let j2 = rejoin(&mut two, "");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(j2.generation_id, 2);
    assert_eq!(j2.leader, j2.member_id);
    assert_eq!(cluster.group_members("g"), vec![j2.member_id.clone()]);
    assert_eq!(
        heartbeat(&mut one, 1, &j1.member_id),
        KafkaCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn producer_ids_and_idempotent_retries() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("t", 1)
        .build()
        .unwrap();
    let mut conn = connect_to(&cluster, 1);
    let ip = conn
        .send(&InitProducerIdRequest::default().with_transactional_id(None))
        .unwrap();
    assert_eq!((ip.error_code, ip.producer_epoch), (0, 0));
    let pid = ip.producer_id;
    let next = conn
        .send(&InitProducerIdRequest::default().with_transactional_id(None))
        .unwrap();
    assert_eq!(next.producer_id, pid + 1);
    // As Kafka: naming an id and epoch without a transactional id still gives a new id
    // (an idempotent producer bumps its epoch itself, as below with epoch 1).
    let renewed = conn
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(pid)
                .with_producer_epoch(0),
        )
        .unwrap();
    assert_eq!((renewed.producer_id, renewed.producer_epoch), (pid + 2, 0));

    let idempotent = |seq: i32, values: &[&str]| {
        let mut b = BatchBuilder::new(
            Vec::with_capacity(4096),
            BatchOptions::default().with_producer(pid, 1, seq),
        )
        .unwrap();
        for v in values {
            b.append(0, None, Some(v.as_bytes()), &[]).unwrap();
        }
        Bytes::copy_from_slice(b.seal().unwrap().as_bytes())
    };
    let first = idempotent(0, &["a", "b"]);
    assert_eq!(
        produced(&conn.send(&produce("t", 0, first.clone())).unwrap()),
        (KafkaCode::NONE, 0)
    );
    // A retry of the same batch is acknowledged with its first offset, and not stored twice.
    assert_eq!(
        produced(&conn.send(&produce("t", 0, first)).unwrap()),
        (KafkaCode::NONE, 0)
    );
    assert_eq!(cluster.high_watermark("t", 0).unwrap(), 2);
    let gap = idempotent(5, &["x"]);
    assert_eq!(
        produced(&conn.send(&produce("t", 0, gap)).unwrap()).0,
        KafkaCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    let next = idempotent(2, &["c"]);
    assert_eq!(
        produced(&conn.send(&produce("t", 0, next)).unwrap()),
        (KafkaCode::NONE, 2)
    );

    // Transactional ids live on their coordinator.
    let txn = "tx";
    let coordinator = cluster.coordinator(txn).unwrap();
    let mut coord = connect_to(&cluster, coordinator);
    let init = || {
        InitProducerIdRequest::default()
            .with_transactional_id(Some(txn.into()))
            .with_transaction_timeout_ms(60_000)
    };
    let t1 = coord.send(&init()).unwrap();
    let t2 = coord.send(&init()).unwrap();
    assert_eq!(
        (t2.producer_id, t2.producer_epoch),
        (t1.producer_id, t1.producer_epoch + 1)
    );
    // As Kafka: a transaction timeout of 0 (or above transaction.max.timeout.ms) is
    // refused.
    let bad = coord.send(&init().with_transaction_timeout_ms(0)).unwrap();
    assert_eq!(
        bad.error_code,
        KafkaCode::INVALID_TRANSACTION_TIMEOUT.code()
    );
}

#[test]
fn bad_produce_input_gets_error_codes() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("t", 1)
        .max_message_bytes(200)
        .build()
        .unwrap();
    let mut conn = connect_to(&cluster, 1);
    let mut corrupt = batch(&["x"]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let cases = [
        (
            produce("t", 0, Bytes::from(corrupt)),
            KafkaCode::CORRUPT_MESSAGE,
        ),
        (
            produce("t", 0, Bytes::from_static(&[1, 2, 3])),
            KafkaCode::CORRUPT_MESSAGE,
        ),
        (produce("t", 0, Bytes::new()), KafkaCode::CORRUPT_MESSAGE),
        (
            produce("t", 0, batch(&[&"x".repeat(300)])),
            KafkaCode::MESSAGE_TOO_LARGE,
        ),
        (
            produce("t", 7, batch(&["x"])),
            KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            produce("nope", 0, batch(&["x"])),
            KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            produce("t", 0, batch(&["x"])).with_acks(2),
            KafkaCode::INVALID_REQUIRED_ACKS,
        ),
    ];
    for (request, code) in cases {
        let r = conn.send(&request).unwrap();
        assert_eq!(produced(&r).0, code);
    }
    assert_eq!(cluster.high_watermark("t", 0).unwrap(), 0);
    // acks=0 is stored and not answered.
    let version = conn.version_for::<ProduceRequest>().unwrap();
    conn.write(&produce("t", 0, batch(&["quiet"])).with_acks(0), version)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.high_watermark("t", 0).unwrap() == 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The next request on the connection is answered in turn (an answer to the
    // Produce would come first, with the wrong correlation id).
    let m = metadata(&mut conn);
    assert_eq!(m.brokers.len(), 1);
}

#[test]
fn control_hooks_reply_drop_and_delay() {
    let cluster = FakeCluster::builder()
        .brokers(2)
        .topic("t", 1)
        .build()
        .unwrap();
    let leader = cluster.leader("t", 0).unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    // Observe every Produce and let it through.
    cluster.control(Some(ApiKey::Produce), move |r| {
        assert_eq!(r.api_key, ApiKey::Produce);
        counter.fetch_add(1, Ordering::SeqCst);
        Reply::pass()
    });
    // The first Produce waits 200 ms, then the cluster handles it.
    cluster.control_once(Some(ApiKey::Produce), |_| {
        Reply::pass().after(Duration::from_millis(200))
    });
    let mut conn = connect_to(&cluster, leader);
    let started = Instant::now();
    assert_eq!(
        produced(&conn.send(&produce("t", 0, batch(&["a"]))).unwrap()).1,
        0
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    let started = Instant::now();
    assert_eq!(
        produced(&conn.send(&produce("t", 0, batch(&["b"]))).unwrap()).1,
        1
    );
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "the delay was once"
    );

    // An answer of our own, only on one broker.
    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap();
    let id = cluster.control(Some(ApiKey::Metadata), move |r| {
        if r.broker_id == other {
            Reply::from(MetadataResponse::default().with_cluster_id(Some("hooked".into())))
        } else {
            Reply::pass()
        }
    });
    assert_eq!(
        metadata(&mut connect_to(&cluster, other))
            .cluster_id
            .as_deref(),
        Some("hooked")
    );
    assert_eq!(
        metadata(&mut conn).cluster_id.as_deref(),
        Some("kring-fake-cluster")
    );
    cluster.remove_control(id);
    assert_eq!(
        metadata(&mut connect_to(&cluster, other))
            .cluster_id
            .as_deref(),
        Some("kring-fake-cluster")
    );

    // Drop the connection on the next Fetch.
    cluster.control_once(Some(ApiKey::Fetch), |_| Reply::close());
    let tid = cluster.topic_id("t").unwrap();
    assert!(conn.send(&fetch("t", tid, 0, 0, 0)).is_err());
    let mut conn = connect_to(&cluster, leader);
    assert_eq!(
        fetched(&conn.send(&fetch("t", tid, 0, 0, 0)).unwrap())
            .2
            .len(),
        2
    );
    // An error answer built from the request.
    cluster.control_once(None, |_| Reply::error(KafkaCode::KAFKA_STORAGE_ERROR));
    assert_eq!(
        fetched(&conn.send(&fetch("t", tid, 0, 0, 0)).unwrap()).0,
        KafkaCode::KAFKA_STORAGE_ERROR
    );
    assert!(seen.load(Ordering::SeqCst) >= 2);
    assert!(cluster.failures().is_empty(), "{:?}", cluster.failures());
}

#[test]
fn a_hook_can_move_the_leader_mid_produce() {
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(2)
            .topic("t", 1)
            .build()
            .unwrap(),
    );
    let leader = cluster.leader("t", 0).unwrap();
    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap();
    let hooked = Arc::downgrade(&cluster);
    // The leader moves while the second Produce is on its way.
    let count = AtomicUsize::new(0);
    cluster.control(Some(ApiKey::Produce), move |_| {
        if count.fetch_add(1, Ordering::SeqCst) == 1 {
            if let Some(c) = hooked.upgrade() {
                c.move_leader("t", 0, other).unwrap();
            }
        }
        Reply::pass()
    });
    let mut b = connect_to(&cluster, leader);
    assert_eq!(
        produced(&b.send(&produce("t", 0, batch(&["1"]))).unwrap()),
        (KafkaCode::NONE, 0)
    );
    let r = b.send(&produce("t", 0, batch(&["2"]))).unwrap();
    assert_eq!(produced(&r).0, KafkaCode::NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        r.responses[0].partition_responses[0]
            .current_leader
            .leader_id,
        other
    );
    let mut nb = connect_to(&cluster, other);
    assert_eq!(
        produced(&nb.send(&produce("t", 0, batch(&["2"]))).unwrap()),
        (KafkaCode::NONE, 1)
    );
}

#[test]
fn a_connection_dropped_with_requests_in_flight_fails_them_retriably() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("t", 1)
        .build()
        .unwrap();
    let mut conn = connect(&cluster.bootstrap()[0]);
    let n = AtomicUsize::new(0);
    cluster.control(Some(ApiKey::Metadata), move |_| {
        match n.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::pass().after(Duration::from_millis(100)),
            1 => Reply::close(),
            _ => Reply::pass(),
        }
    });
    // Four requests pipelined on one connection: the first is answered (late), the
    // second closes the connection, the rest are never answered.
    let request = MetadataRequest::default().with_topics(None);
    let results = conn.pipeline(&request, 4).unwrap();
    assert!(results[0].is_ok(), "{:?}", results[0]);
    let errors: Vec<&RawError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 3);
    assert!(errors.iter().all(|e| e.is_retriable()), "{errors:?}");
    retry("after the drop", || {
        RawConnection::connect(&cluster.bootstrap()[0])?.send(&request)
    });
}

#[test]
fn kring_client_routes_by_the_fake_metadata() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic("t", 3)
        .build()
        .unwrap();
    let client = kring::Client::connect_blocking(kring::Config::new(cluster.bootstrap())).unwrap();
    use kring::client::block_on;
    for p in 0..3 {
        let (leader, _) = block_on(client.leader("t", p)).unwrap();
        assert_eq!(Some(leader.id()), cluster.leader("t", p));
    }
    let coordinator = block_on(client.coordinator("g")).unwrap();
    assert_eq!(Some(coordinator.id()), cluster.coordinator("g"));
    let old = cluster.leader("t", 0).unwrap();
    let new = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != old)
        .unwrap();
    cluster.move_leader("t", 0, new).unwrap();
    block_on(client.refresh_metadata(&["t"])).unwrap();
    let (leader, _) = block_on(client.leader("t", 0)).unwrap();
    assert_eq!(leader.id(), new);
    client.close();
}

#[test]
fn garbage_never_takes_the_cluster_down() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic("t", 1)
        .build()
        .unwrap();
    let addr = cluster.bootstrap()[0].clone();
    let garbage: [&[u8]; 5] = [
        &[0xff, 0xff, 0xff, 0xff],
        &[0, 0, 0, 4, 0x7f, 0, 0, 0],
        &[0, 0, 0, 12, 0, 0, 0, 11, 0, 0, 0, 1, 0, 0, 9, 9],
        &[0, 0, 0, 8, 0, 1, 0, 17, 0, 0, 0, 0],
        &[1; 512],
    ];
    for g in garbage {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(g);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        assert!(out.is_empty(), "{g:?} got {out:?}");
    }
    assert!(!cluster.protocol_errors().is_empty());
    metadata(&mut connect(&addr));
    // An API the cluster does not implement closes the connection too.
    let mut conn = connect(&addr);
    assert!(
        conn.send_version(
            &kring::protocol::messages::DescribeAclsRequest::default(),
            3
        )
        .is_err()
    );
    assert_eq!(cluster.unhandled().len(), 1);
}

#[test]
fn the_same_script_gives_the_same_cluster() {
    fn run() -> Vec<String> {
        let cluster = FakeCluster::builder()
            .brokers(3)
            .topic("a", 4)
            .topic_replicated("b", 2, 2)
            .build()
            .unwrap();
        let mut out = vec![format!(
            "{:?} {:?}",
            cluster.topic_id("a"),
            cluster.topic_id("b")
        )];
        for t in ["a", "b"] {
            for p in 0..cluster.partition_count(t).unwrap() {
                out.push(format!("{t}-{p} {:?}", cluster.replicas(t, p)));
            }
        }
        out.push(format!("{:?}", cluster.coordinator("g")));
        let mut conn = connect_to(&cluster, cluster.leader("a", 1).unwrap());
        for v in ["x", "y"] {
            out.push(format!(
                "{:?}",
                produced(&conn.send(&produce("a", 1, batch(&[v]))).unwrap())
            ));
        }
        out.push(format!(
            "{}",
            conn.send(&InitProducerIdRequest::default().with_transactional_id(None))
                .unwrap()
                .producer_id
        ));
        let mut coord = connect_to(&cluster, cluster.coordinator("g").unwrap());
        out.push(join(&mut coord, "", b"m").member_id);
        out
    }
    assert_eq!(run(), run());
}

/// kring's producer (landed after this suite was first written) against the fake
/// cluster: what it acknowledges is in the log, once, at the offsets it was told; with
/// a retriable error on the first Produce and the leader moving mid-stream.
fn producer_round_trip(fault: &str) {
    use kring::producer::{Producer, ProducerRecord};
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(3)
            .topic("p", 3)
            .build()
            .unwrap(),
    );
    let mut config = kring::Config::new(cluster.bootstrap());
    config.producer.linger = Duration::from_millis(5);
    config.producer.retry_backoff = Duration::from_millis(10);
    config.producer.retry_backoff_max = Duration::from_millis(50);
    match fault {
        "error" => {
            cluster.control_once(Some(ApiKey::Produce), |_| {
                Reply::error(KafkaCode::NOT_ENOUGH_REPLICAS)
            });
        }
        "leader-move" => {
            let hooked = Arc::downgrade(&cluster);
            let produces = AtomicUsize::new(0);
            cluster.control(Some(ApiKey::Produce), move |_| {
                if produces.fetch_add(1, Ordering::SeqCst) == 2 {
                    if let Some(c) = hooked.upgrade() {
                        let old = c.leader("p", 0).unwrap();
                        let new = c.broker_ids().into_iter().find(|&b| b != old).unwrap();
                        c.move_leader("p", 0, new).unwrap();
                    }
                }
                Reply::pass()
            });
        }
        _ => {}
    }
    let client = kring::Client::connect_blocking(config).unwrap();
    let producer = Producer::new_blocking(client).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..300 {
        let value = format!("value-{i}");
        let record = ProducerRecord::new("p")
            .with_key(format!("key-{}", i % 11))
            .with_value(value.clone());
        deliveries.push((value, producer.send_blocking(record).unwrap()));
        if i % 50 == 0 {
            producer.flush_blocking().unwrap();
        }
    }
    producer.flush_blocking().unwrap();
    let mut logs = std::collections::HashMap::new();
    for p in 0..3 {
        logs.insert(p, cluster.records("p", p).unwrap());
    }
    for (value, d) in deliveries {
        let meta = d.wait().unwrap_or_else(|e| panic!("{fault}: {value}: {e}"));
        let log = &logs[&meta.partition];
        let at = log
            .iter()
            .find(|(o, _, _)| *o == meta.offset)
            .unwrap_or_else(|| panic!("{fault}: {value} not at {meta:?}"));
        assert_eq!(at.2.as_deref(), Some(value.as_bytes()), "{fault}");
    }
    let stored: usize = logs.values().map(Vec::len).sum();
    assert_eq!(stored, 300, "{fault}: every record stored exactly once");
    producer.close_blocking().unwrap();
    assert!(cluster.failures().is_empty(), "{:?}", cluster.failures());
}

#[test]
fn kring_producer_round_trips_records() {
    producer_round_trip("none");
}

#[test]
fn kring_producer_retries_a_retriable_produce_error() {
    producer_round_trip("error");
}

#[test]
fn kring_producer_follows_a_leader_moved_mid_produce() {
    producer_round_trip("leader-move");
}

#[test]
fn a_preferred_read_replica_is_named_to_a_rack_and_serves_its_fetches() {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic_replicated("t", 1, 3)
        .build()
        .unwrap();
    let id = cluster.topic_id("t").unwrap();
    let leader = cluster.leader("t", 0).unwrap();
    let follower = cluster
        .replicas("t", 0)
        .unwrap()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap();
    let mut to_leader = connect_to(&cluster, leader);
    assert_eq!(
        produced(
            &to_leader
                .send(&produce("t", 0, batch(&["a", "b"])))
                .unwrap()
        ),
        (KafkaCode::NONE, 0)
    );
    assert!(
        cluster
            .set_preferred_read_replica("t", 0, Some(leader))
            .is_err(),
        "the leader is no read replica"
    );
    cluster
        .set_preferred_read_replica("t", 0, Some(follower))
        .unwrap();
    let with_rack = fetch("t", id, 0, 0, 0).with_rack_id("r1".into());
    let expected = vec![(0, "a".to_string()), (1, "b".to_string())];

    // Without a rack the leader serves as before.
    let f = to_leader.send(&fetch("t", id, 0, 0, 0)).unwrap();
    assert_eq!(fetched(&f), (KafkaCode::NONE, 2, expected.clone()));
    assert_eq!(f.responses[0].partitions[0].preferred_read_replica, -1);
    // With one it names the follower, and sends no records.
    let f = to_leader.send(&with_rack).unwrap();
    assert_eq!(
        f.responses[0].partitions[0].preferred_read_replica,
        follower
    );
    assert_eq!(fetched(&f), (KafkaCode::NONE, 2, Vec::new()));
    // The follower serves the partition.
    let mut to_follower = connect_to(&cluster, follower);
    let f = to_follower.send(&with_rack).unwrap();
    assert_eq!(fetched(&f), (KafkaCode::NONE, 2, expected));
    assert_eq!(f.responses[0].partitions[0].preferred_read_replica, -1);
    // Once it is no read replica, it refuses.
    cluster.set_preferred_read_replica("t", 0, None).unwrap();
    let f = to_follower.send(&with_rack).unwrap();
    assert_eq!(fetched(&f).0, KafkaCode::NOT_LEADER_OR_FOLLOWER);
}
