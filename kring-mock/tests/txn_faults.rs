//! Transaction faults on demand in the FakeCluster, against kring's public
//! transactional producer (`Producer` with `transactional.id`): the transaction
//! coordinator moves before a transaction or in the middle of its commit,
//! CONCURRENT_TRANSACTIONS on InitProducerId, AddPartitionsToTxn and EndTxn, and another
//! producer fencing the id. After each fault the transaction commits (or aborts)
//! correctly: asserted on what the cluster saw (the requests, which coordinator ended
//! the transaction, the offsets it committed) and on what a read_committed kring
//! consumer reads from the fake. No timing assertions.

mod support;

use std::time::Duration;

use kring::config::IsolationLevel;
use kring::consumer::{Consumer, Offset};
use kring::group::{OffsetAndMetadata, TopicPartition};
use kring::producer::{GroupMetadata, Producer, ProducerRecord, TransactionError};
use kring::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kring::protocol::messages::produce::{PartitionProduceData, TopicProduceData};
use kring::protocol::messages::{AddPartitionsToTxnRequest, InitProducerIdRequest, ProduceRequest};
use kring::protocol::{ApiKey, KafkaCode, RequestKind};
use kring::record::RecordBatchRef;
use kring::{Client, Config, Error};
use kring_mock::{EndedTxn, FakeCluster, ReceivedRequest, request_transactional_id};
use support::RawConnection;

const TOPIC: &str = "out";
const PARTITIONS: i32 = 2;
/// How many 1 s reads a reader waits for the record it expects before it gives up (a
/// guard against hanging, not a timing assertion).
const PATIENCE: usize = 30;
const STEP: Duration = Duration::from_secs(1);

fn cluster() -> FakeCluster {
    FakeCluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .topic("in", 1)
        .history_limit(1_000_000)
        .build()
        .unwrap()
}

fn base_config(cluster: &FakeCluster) -> Config {
    let mut c = Config::new(cluster.bootstrap());
    c.net.workers = 2;
    c.producer.retry_backoff = Duration::from_millis(10);
    c.admin.retry_backoff = Duration::from_millis(10);
    c
}

fn txn_producer(cluster: &FakeCluster, id: &str) -> (Client, Producer) {
    txn_producer_with(cluster, id, |_| {})
}

fn txn_producer_with(
    cluster: &FakeCluster,
    id: &str,
    tweak: impl FnOnce(&mut Config),
) -> (Client, Producer) {
    let mut c = base_config(cluster);
    c.producer.transactional_id = Some(id.to_string());
    tweak(&mut c);
    let client = Client::connect_blocking(c).unwrap();
    let producer = Producer::new_blocking(client.clone()).unwrap();
    producer.init_transactions_blocking().unwrap();
    (client, producer)
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Sends `values` to `partition` in the open transaction; the delivery futures.
fn send_all(
    producer: &Producer,
    partition: i32,
    values: &[String],
) -> Vec<kring::producer::DeliveryFuture> {
    values
        .iter()
        .map(|v| {
            producer
                .send_blocking(
                    ProducerRecord::new(TOPIC)
                        .with_partition(partition)
                        .with_value(v.clone()),
                )
                .unwrap()
        })
        .collect()
}

/// The values of `partition` from the start up to and including `last`, read with
/// `isolation` by a kring consumer.
fn read_until(
    cluster: &FakeCluster,
    partition: i32,
    isolation: IsolationLevel,
    last: &str,
) -> Vec<String> {
    let mut c = base_config(cluster);
    c.consumer.isolation_level = isolation;
    let client = Client::connect_blocking(c).unwrap();
    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(TOPIC, partition, Offset::Oldest)
        .unwrap();
    let mut out: Vec<String> = Vec::new();
    let mut idle = 0;
    while out.last().map(String::as_str) != Some(last) {
        let timer = client.sleep(STEP);
        let got = kring::client::block_on(async {
            tokio::select! {
                b = pc.next_batch() => Some(b.expect("consumer alive").expect("no error")
                    .records()
                    .map(|r| String::from_utf8(r.unwrap().value().unwrap().to_vec()).unwrap())
                    .collect::<Vec<_>>()),
                _ = timer => None,
            }
        });
        match got {
            Some(batch) => out.extend(batch),
            None => idle += 1,
        }
        assert!(
            idle < PATIENCE,
            "{last} never came to the {isolation:?} reader of partition {partition}: {out:?}"
        );
    }
    client.close();
    out
}

/// The requests of `api` for transactional id `id`, in the order received.
fn requests_of(cluster: &FakeCluster, api: ApiKey, id: &str) -> Vec<ReceivedRequest> {
    cluster
        .history()
        .into_iter()
        .filter(|r| r.api_key == api && request_transactional_id(r) == Some(id))
        .collect()
}

/// The EndTxn requests for `id`: (broker, committed).
fn end_txns(cluster: &FakeCluster, id: &str) -> Vec<(i32, bool)> {
    requests_of(cluster, ApiKey::EndTxn, id)
        .iter()
        .filter_map(|r| match &r.request {
            RequestKind::EndTxn(e) => Some((r.broker_id, e.committed)),
            _ => None,
        })
        .collect()
}

/// The producer epochs of the batches in a Produce request.
fn produce_epochs(request: &ReceivedRequest) -> Vec<i16> {
    let RequestKind::Produce(p) = &request.request else {
        return Vec::new();
    };
    p.topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|pd| pd.records.as_deref())
        .filter_map(|b| RecordBatchRef::new(b).ok().map(|b| b.producer_epoch()))
        .collect()
}

fn ended(cluster: &FakeCluster, id: &str) -> Vec<(bool, Option<i32>)> {
    cluster
        .ended_transactions(id)
        .iter()
        .map(|e: &EndedTxn| (e.committed, e.coordinator))
        .collect()
}

#[test]
fn committed_transactions_are_read_and_aborted_ones_are_not() {
    let cluster = cluster();
    let id = "txn-basic";
    let (client, producer) = txn_producer(&cluster, id);
    producer.begin_transaction().unwrap();
    for p in 0..PARTITIONS {
        send_all(&producer, p, &values(&format!("c1-p{p}"), 5));
    }
    producer.commit_transaction_blocking().unwrap();
    producer.begin_transaction().unwrap();
    for p in 0..PARTITIONS {
        send_all(&producer, p, &values(&format!("ab-p{p}"), 4));
    }
    producer.flush_blocking().unwrap();
    producer.abort_transaction_blocking().unwrap();
    producer.begin_transaction().unwrap();
    for p in 0..PARTITIONS {
        send_all(&producer, p, &values(&format!("c2-p{p}"), 3));
    }
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();

    let coordinator = cluster.coordinator(id);
    assert_eq!(
        ended(&cluster, id),
        vec![
            (true, coordinator),
            (false, coordinator),
            (true, coordinator)
        ]
    );
    for p in 0..PARTITIONS {
        let mut expected = values(&format!("c1-p{p}"), 5);
        expected.extend(values(&format!("c2-p{p}"), 3));
        let last = format!("c2-p{p}-2");
        assert_eq!(
            read_until(&cluster, p, IsolationLevel::ReadCommitted, &last),
            expected,
            "read_committed, partition {p}"
        );
        let all = read_until(&cluster, p, IsolationLevel::ReadUncommitted, &last);
        assert_eq!(
            all.iter().filter(|v| v.starts_with("ab-")).count(),
            4,
            "read_uncommitted sees the aborted records: {all:?}"
        );
        // Every record plus three markers.
        assert_eq!(
            cluster.high_watermark(TOPIC, p).unwrap(),
            5 + 4 + 3 + 3,
            "partition {p}"
        );
        assert_eq!(
            cluster.last_stable_offset(TOPIC, p).unwrap(),
            cluster.high_watermark(TOPIC, p).unwrap()
        );
    }
    assert!(cluster.failures().is_empty(), "{:?}", cluster.failures());
    assert!(cluster.unhandled().is_empty(), "{:?}", cluster.unhandled());
}

#[test]
fn an_open_transaction_holds_read_committed_readers_back() {
    let cluster = cluster();
    let id = "txn-open";
    let (client, producer) = txn_producer(&cluster, id);
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("first", 2));
    producer.commit_transaction_blocking().unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("open", 2));
    producer.flush_blocking().unwrap();
    // Written but undecided: below the last stable offset is only the first
    // transaction and its marker.
    assert_eq!(cluster.high_watermark(TOPIC, 0).unwrap(), 5);
    assert_eq!(cluster.last_stable_offset(TOPIC, 0).unwrap(), 3);
    let reader = std::thread::scope(|s| {
        let reader = s.spawn(|| read_until(&cluster, 0, IsolationLevel::ReadCommitted, "open-1"));
        // The reader gets there only once the transaction commits.
        producer.commit_transaction_blocking().unwrap();
        reader.join().unwrap()
    });
    assert_eq!(reader, vec!["first-0", "first-1", "open-0", "open-1"]);
    producer.close_blocking().unwrap();
    client.close();
}

#[test]
fn coordinator_moved_before_a_transaction_is_found_again() {
    let cluster = cluster();
    let id = "txn-moved";
    let (client, producer) = txn_producer(&cluster, id);
    let old = cluster.coordinator(id).unwrap();
    let new = cluster.move_coordinator(id).unwrap();
    assert_ne!(old, new);
    cluster.clear_history();

    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("moved", 3));
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();

    let adds = requests_of(&cluster, ApiKey::AddPartitionsToTxn, id);
    assert_eq!(
        adds.first().map(|r| r.broker_id),
        Some(old),
        "the first AddPartitionsToTxn went to the old coordinator (NOT_COORDINATOR)"
    );
    assert_eq!(adds.last().map(|r| r.broker_id), Some(new));
    let finds_between = cluster
        .history()
        .iter()
        .skip_while(|r| r.api_key != ApiKey::AddPartitionsToTxn)
        .any(|r| r.api_key == ApiKey::FindCoordinator);
    assert!(
        finds_between,
        "the coordinator was looked up again after NOT_COORDINATOR"
    );
    assert_eq!(end_txns(&cluster, id), vec![(new, true)]);
    assert_eq!(ended(&cluster, id), vec![(true, Some(new))]);
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "moved-2"),
        values("moved", 3)
    );
}

#[test]
fn coordinator_moved_mid_commit_the_retried_end_txn_commits_at_the_new_one() {
    let cluster = cluster();
    let id = "txn-mid-commit";
    let group = "ctp-group";
    let (client, producer) = txn_producer(&cluster, id);
    let old = cluster.coordinator(id).unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("mid", 4));
    send_all(&producer, 1, &values("mid", 2));
    let offsets = vec![(
        TopicPartition::new("in", 0),
        OffsetAndMetadata {
            offset: 42,
            metadata: "m".into(),
            leader_epoch: None,
        },
    )];
    kring::client::block_on(
        producer.send_offsets_to_transaction(&offsets, &GroupMetadata::for_group(group)),
    )
    .unwrap();
    assert_eq!(
        cluster.committed(group, "in", 0),
        None,
        "offsets wait for the commit"
    );
    cluster.move_coordinator_at_end(id);
    producer.commit_transaction_blocking().unwrap();
    let new = cluster.coordinator(id).unwrap();
    assert_ne!(old, new);
    producer.close_blocking().unwrap();
    client.close();

    assert_eq!(
        end_txns(&cluster, id),
        vec![(old, true), (new, true)],
        "one EndTxn refused by the old coordinator, the retry at the new one"
    );
    let ended = cluster.ended_transactions(id);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].committed);
    assert_eq!(ended[0].coordinator, Some(new));
    assert_eq!(
        ended[0].offsets,
        vec![(group.to_string(), "in".to_string(), 0, 42)],
        "the offsets were committed once, with the transaction"
    );
    assert_eq!(ended[0].markers.len(), 2, "a marker on each partition");
    assert_eq!(cluster.committed(group, "in", 0), Some(42));
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "mid-3"),
        values("mid", 4)
    );
    assert_eq!(
        read_until(&cluster, 1, IsolationLevel::ReadCommitted, "mid-1"),
        values("mid", 2)
    );
}

/// CONCURRENT_TRANSACTIONS on the next three `api` requests: retried, then the
/// transaction commits.
fn concurrent_transactions_on(api: ApiKey) {
    let cluster = cluster();
    let id = format!("txn-concurrent-{api:?}");
    let faulted = 3;
    cluster.concurrent_transactions(&id, api, faulted);
    let (client, producer) = txn_producer(&cluster, &id);
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("busy", 3));
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();

    assert_eq!(
        requests_of(&cluster, api, &id).len(),
        faulted + 1,
        "{api:?}: answered CONCURRENT_TRANSACTIONS {faulted} times, then accepted"
    );
    assert_eq!(ended(&cluster, &id), vec![(true, cluster.coordinator(&id))]);
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "busy-2"),
        values("busy", 3)
    );
}

#[test]
fn concurrent_transactions_on_init_producer_id_are_retried() {
    concurrent_transactions_on(ApiKey::InitProducerId);
}

#[test]
fn concurrent_transactions_on_add_partitions_are_retried() {
    concurrent_transactions_on(ApiKey::AddPartitionsToTxn);
}

#[test]
fn concurrent_transactions_on_end_txn_are_retried() {
    concurrent_transactions_on(ApiKey::EndTxn);
}

#[test]
fn a_fenced_producer_is_fatal_and_sends_nothing_more() {
    let cluster = cluster();
    let id = "txn-fenced";
    let (client, old) = txn_producer(&cluster, id);
    old.begin_transaction().unwrap();
    send_all(&old, 0, &values("before", 2));
    old.commit_transaction_blocking().unwrap();
    let (_, old_epoch) = old.producer_id().unwrap();

    // Another producer initialises the same id.
    let (_, new_epoch) = cluster.fence_transactional_id(id).unwrap();
    assert!(new_epoch > old_epoch);
    let fence_at = cluster.history().len();

    old.begin_transaction().unwrap();
    let zombie = send_all(&old, 0, &values("zombie", 3));
    let e = old.commit_transaction_blocking().unwrap_err();
    assert!(
        matches!(e, Error::Transaction(TransactionError::Fatal { .. })),
        "the fenced producer's commit: {e:?}"
    );
    for d in zombie {
        assert!(
            d.wait().is_err(),
            "a fenced producer's record was acknowledged"
        );
    }
    let again = old.begin_transaction().unwrap_err();
    assert!(
        matches!(again, Error::Transaction(TransactionError::Fatal { .. })),
        "{again:?}"
    );
    let _ = old.close_blocking();
    client.close();
    let after: Vec<_> = cluster.history().into_iter().skip(fence_at).collect();
    let produced: Vec<_> = after
        .iter()
        .filter(|r| r.api_key == ApiKey::Produce)
        .map(|r| (r.broker_id, produce_epochs(r)))
        .collect();
    assert!(
        produced.is_empty(),
        "no Produce from the fenced producer: {produced:?}"
    );
    assert!(
        !after.iter().any(|r| r.api_key == ApiKey::EndTxn),
        "nothing ended by the fenced producer"
    );
    assert_eq!(ended(&cluster, id), vec![(true, cluster.coordinator(id))]);

    // The new owner of the id writes; the zombie's records never show.
    let (client, new) = txn_producer(&cluster, id);
    new.begin_transaction().unwrap();
    send_all(&new, 0, &values("after", 2));
    new.commit_transaction_blocking().unwrap();
    new.close_blocking().unwrap();
    client.close();
    let mut expected = values("before", 2);
    expected.extend(values("after", 2));
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "after-1"),
        expected
    );
}

#[test]
fn a_producer_fenced_mid_transaction_has_it_aborted_by_the_coordinator() {
    let cluster = cluster();
    let id = "txn-fenced-mid";
    let (client, old) = txn_producer(&cluster, id);
    old.begin_transaction().unwrap();
    send_all(&old, 0, &values("doomed", 3));
    old.flush_blocking().unwrap();
    assert_eq!(cluster.last_stable_offset(TOPIC, 0).unwrap(), 0);
    cluster.fence_transactional_id(id).unwrap();
    assert_eq!(
        ended(&cluster, id),
        vec![(false, None)],
        "the coordinator aborted the open transaction"
    );
    let fence_at = cluster.history().len();
    // More records of the open transaction: the partition is in it, so they go out and refuses the fenced epoch.
    // the broker refuses the fenced epoch. As in the Java client (KIP-588), a
    // Produce answered INVALID_PRODUCER_EPOCH makes the transaction abortable; the
    // abort's EndTxn is then refused with PRODUCER_FENCED, which is fatal.
    let late = send_all(&old, 0, &values("late", 2));
    let e = old.commit_transaction_blocking().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transaction(TransactionError::Abortable { .. } | TransactionError::Fatal { .. })
        ),
        "the fenced producer's commit: {e:?}"
    );
    for d in late {
        assert!(d.wait().is_err());
    }
    if matches!(e, Error::Transaction(TransactionError::Abortable { .. })) {
        let e = old.abort_transaction_blocking().unwrap_err();
        assert!(
            matches!(e, Error::Transaction(TransactionError::Fatal { .. })),
            "the fenced producer's abort: {e:?}"
        );
    }
    let again = old.begin_transaction().unwrap_err();
    assert!(
        matches!(again, Error::Transaction(TransactionError::Fatal { .. })),
        "{again:?}"
    );
    let _ = old.close_blocking();
    client.close();
    let (_, fenced_epoch) = old.producer_id().unwrap();
    for r in cluster.history().iter().skip(fence_at) {
        if let RequestKind::EndTxn(e) = &r.request {
            assert_eq!(
                e.producer_epoch, fenced_epoch,
                "only the fenced producer's refused end"
            );
        }
    }
    assert_eq!(
        ended(&cluster, id),
        vec![(false, None)],
        "nothing ended by the fenced producer"
    );

    // Only an abort marker and the aborted records: read_committed sees nothing, even
    // once a later transaction commits after them.
    let (client, new) = txn_producer(&cluster, id);
    new.begin_transaction().unwrap();
    send_all(&new, 0, &values("next", 1));
    new.commit_transaction_blocking().unwrap();
    new.close_blocking().unwrap();
    client.close();
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "next-0"),
        vec!["next-0"]
    );
}

/// A transactional batch of one record.
fn txn_batch(pid: i64, epoch: i16, seq: i32) -> bytes::Bytes {
    let mut b = kring::record::BatchBuilder::new(
        Vec::with_capacity(256),
        kring::record::BatchOptions::default()
            .with_producer(pid, epoch, seq)
            .with_transactional(true),
    )
    .unwrap();
    b.append(0, None, Some(b"x"), &[]).unwrap();
    bytes::Bytes::copy_from_slice(b.seal().unwrap().as_bytes())
}

fn produce_code(conn: &mut RawConnection, id: &str, batch: bytes::Bytes) -> KafkaCode {
    let r = conn
        .send(
            &ProduceRequest::default()
                .with_transactional_id(Some(id.to_string()))
                .with_acks(-1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(TOPIC.to_string())
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(batch)),
                        ]),
                ]),
        )
        .unwrap();
    KafkaCode(r.responses[0].partition_responses[0].error_code)
}

fn add_partition_code(
    conn: &mut RawConnection,
    version: i16,
    id: &str,
    pid: i64,
    epoch: i16,
) -> KafkaCode {
    let topics = vec![
        AddPartitionsToTxnTopic::default()
            .with_name(TOPIC.to_string())
            .with_partitions(vec![0]),
    ];
    let request = if version >= 4 {
        AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(id.to_string())
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_topics(topics),
        ])
    } else {
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(id.to_string())
            .with_v3_and_below_producer_id(pid)
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics)
    };
    let r = conn.send_version(&request, version).unwrap();
    if r.error_code != 0 {
        return KafkaCode(r.error_code);
    }
    KafkaCode(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
}

fn init(conn: &mut RawConnection, id: &str, current: Option<(i64, i16)>) -> (KafkaCode, i64, i16) {
    let (pid, epoch) = current.unwrap_or((-1, -1));
    let r = conn
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(id.to_string()))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(pid)
                .with_producer_epoch(epoch),
        )
        .unwrap();
    (KafkaCode(r.error_code), r.producer_id, r.producer_epoch)
}

/// The broker-side rules, spoken to directly: Produce of a partition not added, of a
/// fenced epoch; AddPartitionsToTxn of a fenced epoch and at a broker's version; the
/// KIP-360 bump with the current and with a stale epoch.
#[test]
fn the_fake_refuses_what_a_verifying_broker_refuses() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic(TOPIC, 1)
        .build()
        .unwrap();
    let id = "txn-raw";
    let addr = cluster.bootstrap()[0].clone();
    let mut conn = RawConnection::connect(&addr).unwrap();
    let (code, pid, epoch) = init(&mut conn, id, None);
    assert_eq!((code, epoch), (KafkaCode::NONE, 0));

    assert_eq!(
        produce_code(&mut conn, id, txn_batch(pid, epoch, 0)),
        KafkaCode::INVALID_TXN_STATE,
        "a partition not added to the transaction"
    );
    assert_eq!(
        add_partition_code(&mut conn, 4, id, pid, epoch),
        KafkaCode::CLUSTER_AUTHORIZATION_FAILED,
        "v4+ are the brokers'"
    );
    assert_eq!(
        add_partition_code(&mut conn, 3, id, pid, epoch),
        KafkaCode::NONE
    );
    assert_eq!(
        produce_code(&mut conn, id, txn_batch(pid, epoch, 0)),
        KafkaCode::NONE
    );
    assert_eq!(cluster.last_stable_offset(TOPIC, 0).unwrap(), 0);
    assert_eq!(cluster.high_watermark(TOPIC, 0).unwrap(), 1);

    // KIP-360: the current id and epoch bump the epoch; the open transaction is
    // aborted first (an abort marker).
    let (code, same, bumped) = init(&mut conn, id, Some((pid, epoch)));
    assert_eq!((code, same, bumped), (KafkaCode::NONE, pid, epoch + 1));
    assert_eq!(cluster.high_watermark(TOPIC, 0).unwrap(), 2);
    assert_eq!(cluster.last_stable_offset(TOPIC, 0).unwrap(), 2);
    let (code, _, _) = init(&mut conn, id, Some((pid, epoch)));
    assert_eq!(
        code,
        KafkaCode::PRODUCER_FENCED,
        "a stale epoch cannot bump"
    );

    assert_eq!(
        add_partition_code(&mut conn, 3, id, pid, epoch),
        KafkaCode::PRODUCER_FENCED
    );
    assert_eq!(
        add_partition_code(&mut conn, 1, id, pid, epoch),
        KafkaCode::INVALID_PRODUCER_EPOCH,
        "older versions get the code they know"
    );
    assert_eq!(
        add_partition_code(&mut conn, 3, id, pid, bumped),
        KafkaCode::NONE
    );
    assert_eq!(
        produce_code(&mut conn, id, txn_batch(pid, epoch, 1)),
        KafkaCode::INVALID_PRODUCER_EPOCH,
        "a fenced epoch"
    );
    assert_eq!(
        produce_code(&mut conn, id, txn_batch(pid, bumped, 0)),
        KafkaCode::NONE
    );
}

/// A consume-transform-produce round against the fake: a group member reads the input,
/// the transaction carries the output and the member's offsets with its generation
/// (KIP-447), the group's committed offset moves only with the commit; offsets of a
/// generation that is over are refused and the transaction must be aborted.
#[test]
fn a_group_members_offsets_commit_with_the_transaction() {
    let cluster = cluster();
    let group = "ctp";
    let records: Vec<String> = values("in", 6);
    let kv: Vec<_> = records.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    cluster.append_records("in", 0, 1_000, &kv).unwrap();
    let mut gc_config = base_config(&cluster);
    gc_config.group.group_id = Some(group.to_string());
    gc_config.consumer.enable_auto_commit = false;
    gc_config.consumer.auto_offset_reset = kring::config::OffsetReset::Earliest;
    gc_config.consumer.isolation_level = IsolationLevel::ReadCommitted;
    let gc_client = Client::connect_blocking(gc_config).unwrap();
    let id = "txn-ctp";
    let (client, producer) = txn_producer(&cluster, id);
    kring::client::block_on(async {
        let mut gc = kring::group::GroupConsumer::subscribe(
            gc_client.clone(),
            kring::group::Topics::names(["in"]),
        )
        .await
        .unwrap();
        producer.begin_transaction().unwrap();
        let mut deliveries = Vec::new();
        for _ in 0..records.len() {
            let m = gc.next_message().await.unwrap().unwrap();
            let v = format!(
                "out-{}",
                String::from_utf8_lossy(m.value.as_deref().unwrap())
            );
            deliveries.push(
                producer
                    .send(ProducerRecord::new(TOPIC).with_partition(0).with_value(v))
                    .await
                    .unwrap(),
            );
        }
        let offsets = gc.consumed_offsets();
        assert_eq!(offsets.len(), 1);
        assert_eq!(offsets[0].1.offset, 6);
        let meta = gc.group_metadata();
        assert_eq!(
            Some(meta.generation_id),
            cluster.group_generation(group),
            "{meta:?}"
        );
        producer
            .send_offsets_to_transaction(&offsets, &meta)
            .await
            .unwrap();
        assert_eq!(cluster.committed(group, "in", 0), None);
        producer.commit_transaction().await.unwrap();
        for d in deliveries {
            d.wait().expect("a committed record was acknowledged");
        }
        assert_eq!(cluster.committed(group, "in", 0), Some(6));

        // A generation that is over: refused, abortable, nothing committed.
        producer.begin_transaction().unwrap();
        let stale = GroupMetadata {
            generation_id: meta.generation_id + 7,
            ..meta.clone()
        };
        let moved = vec![(
            offsets[0].0.clone(),
            OffsetAndMetadata {
                offset: 99,
                metadata: String::new(),
                leader_epoch: None,
            },
        )];
        let e = producer
            .send_offsets_to_transaction(&moved, &stale)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Transaction(TransactionError::Abortable { .. })),
            "{e:?}"
        );
        producer.abort_transaction().await.unwrap();
        gc.close().await.unwrap();
    });
    producer.close_blocking().unwrap();
    client.close();
    gc_client.close();
    let ended = cluster.ended_transactions(id);
    assert_eq!(
        ended.iter().map(|e| e.committed).collect::<Vec<_>>(),
        vec![true, false]
    );
    assert_eq!(
        ended[0].offsets,
        vec![(group.to_string(), "in".to_string(), 0, 6)]
    );
    assert!(ended[1].offsets.is_empty());
    assert_eq!(cluster.committed(group, "in", 0), Some(6));
    let out: Vec<String> = records.iter().map(|v| format!("out-{v}")).collect();
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "out-in-5"),
        out
    );
}

/// The coordinator's broker goes down with a transaction open: the next live broker
/// coordinates the id and the commit ends there, within `default.api.timeout.ms` (a
/// short one here, and no periodic metadata refresh: the client must pass over the
/// broker that went down by itself, not wait for metadata to drop it).
#[test]
fn coordinator_broker_down_the_commit_ends_at_the_next_one() {
    let cluster = cluster();
    let id = "txn-down";
    let (client, producer) = txn_producer_with(&cluster, id, |c| {
        c.admin.timeout = Duration::from_secs(2);
        c.admin.retry_backoff = Duration::from_millis(200);
        c.metadata.refresh_interval = Duration::from_secs(3600);
    });
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("down", 3));
    producer.flush_blocking().unwrap();
    let old = cluster.coordinator(id).unwrap();
    cluster.take_down(old).unwrap();
    let new = cluster.coordinator(id).unwrap();
    assert_ne!(old, new);
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();
    assert_eq!(end_txns(&cluster, id), vec![(new, true)]);
    assert_eq!(ended(&cluster, id), vec![(true, Some(new))]);
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "down-2"),
        values("down", 3)
    );
}

/// The coordinator's broker goes down between transactions: the next transaction's
/// AddPartitionsToTxn finds the next live broker (within a short
/// `default.api.timeout.ms`, no periodic metadata refresh) and commits there.
#[test]
fn coordinator_broker_down_before_a_transaction_its_partitions_are_added_at_the_next_one() {
    let cluster = cluster();
    let id = "txn-down-add";
    let (client, producer) = txn_producer_with(&cluster, id, |c| {
        c.admin.timeout = Duration::from_secs(2);
        c.admin.retry_backoff = Duration::from_millis(200);
        c.metadata.refresh_interval = Duration::from_secs(3600);
    });
    let old = cluster.coordinator(id).unwrap();
    // The partition's leader stays up: only the coordinator goes.
    let leader = (1..=3).find(|&b| b != old).unwrap();
    cluster.move_leader(TOPIC, 0, leader).unwrap();
    cluster.take_down(old).unwrap();
    let new = cluster.coordinator(id).unwrap();
    producer.begin_transaction().unwrap();
    let sent = send_all(&producer, 0, &values("added", 2));
    producer.commit_transaction_blocking().unwrap();
    for d in sent {
        d.wait().unwrap();
    }
    producer.close_blocking().unwrap();
    client.close();
    assert!(
        requests_of(&cluster, ApiKey::AddPartitionsToTxn, id)
            .iter()
            .all(|r| r.broker_id == new)
    );
    assert_eq!(ended(&cluster, id), vec![(true, Some(new))]);
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "added-1"),
        values("added", 2)
    );
}

/// `send_offsets_to_transaction` cut short by the application (its future dropped while
/// the TxnOffsetCommit is held at the group coordinator): the offsets' fate is unknown,
/// so the commit is refused as abortable and says why; the abort bumps the epoch, so the
/// held request, answered late, cannot put its offsets in the next transaction, which
/// commits without them.
#[test]
fn a_cancelled_send_offsets_makes_the_transaction_abortable_and_its_offsets_never_commit() {
    let cluster = cluster();
    let id = "txn-offsets-cancelled";
    let group = "cancelled";
    cluster.control_once(Some(ApiKey::TxnOffsetCommit), |_| {
        kring_mock::Reply::pass().after(Duration::from_secs(2))
    });
    let (client, producer) = txn_producer(&cluster, id);
    let epoch_before = producer.producer_id().unwrap().1;
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("cut", 2));
    let offsets = vec![(
        TopicPartition::new("in", 0),
        OffsetAndMetadata {
            offset: 5,
            metadata: String::new(),
            leader_epoch: None,
        },
    )];
    let meta = GroupMetadata::for_group(group);
    let finished = kring::client::block_on(async {
        tokio::select! {
            r = producer.send_offsets_to_transaction(&offsets, &meta) => Some(r),
            _ = client.sleep(Duration::from_millis(300)) => None,
        }
    });
    assert!(finished.is_none(), "held for 2 s, cut short at 300 ms");
    let e = producer.commit_transaction_blocking().unwrap_err();
    assert!(
        matches!(e, Error::Transaction(TransactionError::Abortable { .. }))
            && e.to_string().contains("cancelled"),
        "{e}"
    );
    producer.abort_transaction_blocking().unwrap();
    assert!(
        producer.producer_id().unwrap().1 > epoch_before,
        "the abort bumped the epoch"
    );
    // The held request is answered meanwhile; the next transaction carries no offsets.
    std::thread::sleep(Duration::from_secs(2));
    producer.begin_transaction().unwrap();
    send_all(&producer, 0, &values("next", 2));
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();
    let ended = cluster.ended_transactions(id);
    assert_eq!(
        ended.iter().map(|e| e.committed).collect::<Vec<_>>(),
        vec![false, true]
    );
    assert!(
        ended.iter().all(|e| e.offsets.is_empty()),
        "no transaction committed the cut-short offsets: {ended:?}"
    );
    assert_eq!(cluster.committed(group, "in", 0), None);
    assert_eq!(
        read_until(&cluster, 0, IsolationLevel::ReadCommitted, "next-1"),
        values("next", 2)
    );
}
