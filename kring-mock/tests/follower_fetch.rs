//! Follower fetching (KIP-392), kring's partition consumer against FakeCluster: a
//! consumer that names its rack reads from the replica the leader names, and goes back
//! to the leader when that replica refuses the partition or drops the connection, or
//! when its age (`metadata.max.age.ms`) runs out, without losing or repeating a record. (The three-node cluster test shows the real
//! broker's choice; a real follower can't be made to refuse or disconnect on demand
//! without stopping nodes.)
//!
//! Each test runs under a watchdog: without the fallback the consumer would keep
//! asking the replica forever, and a hung test says nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kring::config::OffsetReset;
use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::protocol::ApiKey;
use kring::{Client, Config};
use kring_mock::{FakeCluster, Reply};
use support::watchdog::watchdog;

mod support;

/// Three brokers, t-0 on all of them, its first follower the preferred read replica:
/// the cluster, the leader and that follower.
fn cluster() -> (Arc<FakeCluster>, i32, i32) {
    let cluster = FakeCluster::builder()
        .brokers(3)
        .topic_replicated("t", 1, 3)
        .build()
        .unwrap();
    let leader = cluster.leader("t", 0).unwrap();
    let follower = cluster
        .replicas("t", 0)
        .unwrap()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap();
    cluster
        .set_preferred_read_replica("t", 0, Some(follower))
        .unwrap();
    (Arc::new(cluster), leader, follower)
}

fn consumer(cluster: &FakeCluster) -> Consumer {
    consumer_with(cluster, |_| {})
}

fn consumer_with(cluster: &FakeCluster, change: impl FnOnce(&mut Config)) -> Consumer {
    let mut c = Config::new(cluster.bootstrap());
    c.net.workers = 1;
    c.net.reconnect_backoff = Duration::from_millis(10);
    c.net.reconnect_backoff_max = Duration::from_millis(50);
    c.metadata.refresh_backoff = Duration::from_millis(20);
    c.consumer.fetch_max_wait = Duration::from_millis(20);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.set("client.rack", "r1").unwrap();
    change(&mut c);
    let client = Client::connect_blocking(c).expect("connect to the fake cluster");
    Consumer::new(client).unwrap()
}

/// A record's key and value.
type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Appends `n` records `v{from + i}` to t-0 in batches of 10.
fn append(cluster: &FakeCluster, from: usize, n: usize) {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(10) {
        let values: Vec<String> = chunk.iter().map(|i| format!("v{i}")).collect();
        let records: Vec<KeyValue<'_>> =
            values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
        cluster.append_records("t", 0, 1, &records).unwrap();
    }
}

/// The next `n` records of `pc` (at least), as (offset, value).
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

fn expected(n: usize) -> Vec<(i64, String)> {
    (0..n).map(|i| (i as i64, format!("v{i}"))).collect()
}

/// Waits until `pc` is fetched from `broker`.
fn until_fetching_from(pc: &PartitionConsumer, broker: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while pc.fetching_from() != Some(broker) {
        assert!(
            Instant::now() < deadline,
            "still fetching from {:?}, not {broker}",
            pc.fetching_from()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads the first 50 records, all from the follower (the leader sends none once it
/// names it).
fn read_from_the_follower(
    cluster: &FakeCluster,
    follower: i32,
) -> (Consumer, PartitionConsumer, Vec<(i64, String)>) {
    read_from_the_follower_with(cluster, follower, consumer(cluster))
}

fn read_from_the_follower_with(
    cluster: &FakeCluster,
    follower: i32,
    consumer: Consumer,
) -> (Consumer, PartitionConsumer, Vec<(i64, String)>) {
    append(cluster, 0, 50);
    let mut pc = consumer
        .consume_partition_blocking("t", 0, Offset::Oldest)
        .unwrap();
    let seen = read(&mut pc, 50);
    assert_eq!(pc.fetching_from(), Some(follower), "read from the follower");
    (consumer, pc, seen)
}

#[test]
fn a_replica_that_stops_serving_sends_the_consumer_back_to_the_leader() {
    watchdog("refused", || {
        let (cluster, leader, follower) = cluster();
        let (_consumer, mut pc, mut seen) = read_from_the_follower(&cluster, follower);
        // The follower is no read replica any more: it answers NOT_LEADER_OR_FOLLOWER.
        cluster.set_preferred_read_replica("t", 0, None).unwrap();
        append(&cluster, 50, 50);
        seen.extend(read(&mut pc, 50));
        assert_eq!(seen, expected(100), "every record once, in order");
        until_fetching_from(&pc, leader);
    });
}

#[test]
fn a_replica_that_drops_the_connection_sends_the_consumer_back_to_the_leader() {
    watchdog("disconnected", || {
        let (cluster, leader, follower) = cluster();
        let (_consumer, mut pc, mut seen) = read_from_the_follower(&cluster, follower);
        // The follower drops the connection of its next Fetch; the leader must be asked
        // again (it names the follower anew, which then serves).
        let dropped = Arc::new(AtomicBool::new(false));
        let leader_asked = Arc::new(AtomicBool::new(false));
        let (d, asked) = (dropped.clone(), leader_asked.clone());
        cluster.control(Some(ApiKey::Fetch), move |r| {
            if r.broker_id == leader && d.load(Ordering::SeqCst) {
                asked.store(true, Ordering::SeqCst);
            }
            Reply::pass()
        });
        let d = dropped.clone();
        cluster.control_once(Some(ApiKey::Fetch), move |r| {
            if r.broker_id == follower {
                d.store(true, Ordering::SeqCst);
                return Reply::close();
            }
            Reply::pass()
        });
        // The Fetch in flight when the hooks came passed already: wait for the next.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dropped.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "no Fetch reached the follower");
            std::thread::sleep(Duration::from_millis(5));
        }
        append(&cluster, 50, 50);
        seen.extend(read(&mut pc, 50));
        assert_eq!(seen, expected(100), "every record once, in order");
        assert!(
            leader_asked.load(Ordering::SeqCst),
            "back to the leader after the replica failed"
        );
        until_fetching_from(&pc, follower);
    });
}

#[test]
fn the_leader_is_asked_again_when_the_read_replica_ages_out() {
    watchdog("aged out", || {
        let (cluster, leader, follower) = cluster();
        let leader_fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = leader_fetches.clone();
        cluster.control(Some(ApiKey::Fetch), move |r| {
            if r.broker_id == leader {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            Reply::pass()
        });
        // metadata.max.age.ms: how long the replica is used before the leader is asked.
        let consumer = consumer_with(&cluster, |c| {
            c.metadata.refresh_interval = Duration::from_millis(300);
        });
        let (_consumer, mut pc, mut seen) =
            read_from_the_follower_with(&cluster, follower, consumer);
        let asked = leader_fetches.load(Ordering::SeqCst);
        assert!(asked >= 1, "the leader named the follower");
        // The leader is asked again (and names the follower again), more than once.
        let deadline = Instant::now() + Duration::from_secs(30);
        while leader_fetches.load(Ordering::SeqCst) < asked + 2 {
            assert!(
                Instant::now() < deadline,
                "the leader was never asked again"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        append(&cluster, 50, 50);
        seen.extend(read(&mut pc, 50));
        assert_eq!(seen, expected(100), "every record once, in order");
        until_fetching_from(&pc, follower);
    });
}
