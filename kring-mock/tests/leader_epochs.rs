//! Leader epochs (KIP-320) and new-leader hints (KIP-951), kring's consumer and producer
//! against FakeCluster (a real broker cannot be made to elect an out-of-sync replica or
//! to fail every Metadata request on demand):
//! - after an unclean election truncated the log below the consumer's position, the
//!   consumer moves back to the first offset known to diverge (reset policy set), or
//!   reports the truncation on every read (reset `none`), found by OffsetForLeaderEpoch
//!   and, when that says nothing, by the Fetch's `diverging_epoch`;
//! - a consumer and a producer follow a leader that moved, as the old leader names it,
//!   while every Metadata request fails.
//!
//! Each test runs under a watchdog: without the behaviour under test some of them would
//! wait forever, and a hung test says nothing.

use std::sync::Arc;
use std::time::Duration;

use kring::config::OffsetReset;
use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::producer::{Producer, ProducerRecord};
use kring::protocol::ApiKey;
use kring::protocol::messages::OffsetForLeaderEpochResponse;
use kring::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kring::{Client, Config, Error};
use kring_mock::{FakeCluster, Reply};
use support::watchdog::watchdog;

mod support;

fn cluster() -> Arc<FakeCluster> {
    Arc::new(
        FakeCluster::builder()
            .brokers(2)
            .topic("t", 1)
            .build()
            .unwrap(),
    )
}

fn client(cluster: &FakeCluster, reset: OffsetReset) -> Client {
    let mut c = Config::new(cluster.bootstrap());
    c.net.workers = 1;
    c.net.reconnect_backoff = Duration::from_millis(10);
    c.net.reconnect_backoff_max = Duration::from_millis(50);
    c.metadata.refresh_backoff = Duration::from_millis(20);
    c.consumer.fetch_max_wait = Duration::from_millis(20);
    c.consumer.auto_offset_reset = reset;
    Client::connect_blocking(c).expect("connect to the fake cluster")
}

/// A record's key and value.
type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Appends `n` records `{prefix}{i}` to t-0 in batches of 10, in the current leader
/// epoch.
fn append(cluster: &FakeCluster, prefix: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10) {
        let values: Vec<String> = chunk.iter().map(|i| format!("{prefix}{i}")).collect();
        let records: Vec<KeyValue<'_>> =
            values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
        cluster.append_records("t", 0, 1, &records).unwrap();
    }
}

fn other_broker(cluster: &FakeCluster) -> i32 {
    let leader = cluster.leader("t", 0).unwrap();
    cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap()
}

/// The next `n` records of `pc` as (offset, value).
fn read(pc: &mut PartitionConsumer, n: usize) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let batch = pc.next_batch_blocking().expect("alive").expect("no error");
        for r in batch.records() {
            let r = r.unwrap();
            out.push((
                r.offset(),
                String::from_utf8(r.value().unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

fn expected(from: i64, prefix: &str, n: usize) -> Vec<(i64, String)> {
    (0..n)
        .map(|i| (from + i as i64, format!("{prefix}{i}")))
        .collect()
}

/// A consumer that has read the 100 records of t-0 (epoch 0), then an unclean election
/// that keeps the first 60 on the other broker, which takes 20 new ones (epoch 1).
fn read_then_truncate(cluster: &FakeCluster, consumer: &Consumer) -> PartitionConsumer {
    append(cluster, "old", 100);
    let mut pc = consumer
        .consume_partition_blocking("t", 0, Offset::Oldest)
        .unwrap();
    assert_eq!(read(&mut pc, 100), expected(0, "old", 100));
    let other = other_broker(cluster);
    assert_eq!(cluster.unclean_election("t", 0, other, 60).unwrap(), 60);
    append(cluster, "new", 20);
    pc
}

#[test]
fn a_log_truncated_by_an_unclean_election_is_read_again_from_the_divergence() {
    watchdog("truncation with reset earliest", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::Earliest);
        let consumer = Consumer::new(client.clone()).unwrap();
        let mut pc = read_then_truncate(&cluster, &consumer);
        // Not the old records again from 0 (the reset policy after OFFSET_OUT_OF_RANGE),
        // nor nothing until offset 80: the new leader's records from 60.
        assert_eq!(read(&mut pc, 20), expected(60, "new", 20));
        assert!(
            cluster
                .history()
                .iter()
                .any(|r| r.api_key == ApiKey::OffsetForLeaderEpoch),
            "the position was validated at the new leader"
        );
        client.close();
    });
}

#[test]
fn a_truncated_log_with_reset_none_is_reported_on_every_read() {
    watchdog("truncation with reset none", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::None);
        let consumer = Consumer::new(client.clone()).unwrap();
        let mut pc = read_then_truncate(&cluster, &consumer);
        for round in 0..2 {
            let error = match pc.next_batch_blocking() {
                Some(Err(e)) => e.error,
                Some(Ok(b)) => panic!("round {round}: read offset {:?}", b.batch().base_offset()),
                None => panic!("round {round}: the consumer ended"),
            };
            match error {
                Error::LogTruncation {
                    position,
                    divergent_offset,
                    ..
                } => assert_eq!(
                    (position, divergent_offset),
                    (100, Some(60)),
                    "round {round}"
                ),
                other => panic!("round {round}: expected a log truncation, got {other}"),
            }
        }
        client.close();
    });
}

#[test]
fn a_diverging_epoch_in_a_fetch_answer_moves_the_position_back() {
    watchdog("diverging epoch", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::Earliest);
        let consumer = Consumer::new(client.clone()).unwrap();
        // A leader whose OffsetForLeaderEpoch says the position is fine: only the
        // Fetch's diverging_epoch can tell the consumer.
        cluster.control(Some(ApiKey::OffsetForLeaderEpoch), |_| {
            Reply::respond(OffsetForLeaderEpochResponse::default().with_topics(vec![
                OffsetForLeaderTopicResult::default()
                    .with_topic("t".into())
                    .with_partitions(vec![
                        EpochEndOffset::default()
                            .with_partition(0)
                            .with_leader_epoch(1)
                            .with_end_offset(1000),
                    ]),
            ]))
        });
        let mut pc = read_then_truncate(&cluster, &consumer);
        assert_eq!(read(&mut pc, 20), expected(60, "new", 20));
        client.close();
    });
}

/// Makes every Metadata request from now on fail (the connection closes), so only what
/// the brokers say in Fetch and Produce answers can move a partition.
fn fail_metadata(cluster: &FakeCluster) {
    cluster.control(Some(ApiKey::Metadata), |_| Reply::close());
}

#[test]
fn a_consumer_follows_the_leader_the_old_one_names_without_metadata() {
    watchdog("consumer leader hint", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::None);
        let consumer = Consumer::new(client.clone()).unwrap();
        append(&cluster, "v", 50);
        let mut pc = consumer
            .consume_partition_blocking("t", 0, Offset::Oldest)
            .unwrap();
        assert_eq!(read(&mut pc, 50), expected(0, "v", 50));
        fail_metadata(&cluster);
        let other = other_broker(&cluster);
        cluster.move_leader("t", 0, other).unwrap();
        append(&cluster, "w", 50);
        assert_eq!(read(&mut pc, 50), expected(50, "w", 50));
        let p = client.metadata().partition("t", 0).cloned().unwrap();
        assert_eq!((p.leader, p.leader_epoch), (other, 1));
        client.close();
    });
}

#[test]
fn a_producer_follows_the_leader_the_old_one_names_without_metadata() {
    watchdog("producer leader hint", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::None);
        let producer = Producer::new_blocking(client.clone()).unwrap();
        let send = |from: usize| {
            let deliveries: Vec<_> = (from..from + 10)
                .map(|i| {
                    producer
                        .send_blocking(
                            ProducerRecord::new("t")
                                .with_partition(0)
                                .with_value(format!("v{i}")),
                        )
                        .unwrap()
                })
                .collect();
            producer.flush_blocking().unwrap();
            for (i, d) in deliveries.into_iter().enumerate() {
                assert_eq!(d.wait().unwrap().offset, (from + i) as i64);
            }
        };
        send(0);
        fail_metadata(&cluster);
        let other = other_broker(&cluster);
        cluster.move_leader("t", 0, other).unwrap();
        send(10);
        let produced_at_new_leader = cluster
            .history()
            .iter()
            .any(|r| r.api_key == ApiKey::Produce && r.broker_id == other);
        assert!(produced_at_new_leader);
        producer.close_blocking().unwrap();
        client.close();
    });
}

/// (current leader epoch, last fetched epoch) of every Fetch for t-0 the cluster got.
fn fetch_epochs(cluster: &FakeCluster) -> Vec<(i32, i32)> {
    use kring::protocol::messages::FetchRequest;
    cluster
        .history()
        .iter()
        .filter_map(|r| r.decode::<FetchRequest>())
        .flat_map(|f| f.topics.into_iter().flat_map(|t| t.partitions))
        .filter(|p| p.partition == 0)
        .map(|p| (p.current_leader_epoch, p.last_fetched_epoch))
        .collect()
}

#[test]
fn a_fenced_leader_epoch_is_followed_by_fetches_at_the_new_one() {
    watchdog("fenced epoch", || {
        let cluster = cluster();
        let client = client(&cluster, OffsetReset::None);
        let consumer = Consumer::new(client.clone()).unwrap();
        append(&cluster, "v", 50);
        let mut pc = consumer
            .consume_partition_blocking("t", 0, Offset::Oldest)
            .unwrap();
        assert_eq!(read(&mut pc, 50), expected(0, "v", 50));
        // A new epoch on the same leader: our Fetches at epoch 0 are fenced.
        let leader = cluster.leader("t", 0).unwrap();
        cluster.move_leader("t", 0, leader).unwrap();
        assert_eq!(cluster.leader_epoch("t", 0), Some(1));
        append(&cluster, "w", 50);
        assert_eq!(read(&mut pc, 50), expected(50, "w", 50));
        let sent = fetch_epochs(&cluster);
        assert_eq!(sent.first(), Some(&(0, -1)), "the first fetch: {sent:?}");
        assert!(
            sent.contains(&(0, 0)),
            "epoch 0 with what it fetched: {sent:?}"
        );
        assert!(
            sent.iter().any(|&(current, _)| current == 1),
            "after the fence, the new epoch: {sent:?}"
        );
        assert!(
            !sent.iter().any(|&(current, _)| current < 0),
            "the epoch is always sent: {sent:?}"
        );
        client.close();
    });
}
