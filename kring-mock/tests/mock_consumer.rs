//! kring's consumer against FakeCluster (crate kring-mock), for faults a real broker will
//! not show on demand: a fetch answered with NOT_LEADER_OR_FOLLOWER and a leader that
//! moves mid-consume. Every record must still be read
//! exactly once, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kring::consumer::{Consumer, Offset};
use kring::producer::{Producer, ProducerRecord};
use kring::protocol::{ApiKey, KafkaCode};
use kring::{Client, Config};
use kring_mock::{FakeCluster, Reply};

fn client(cluster: &FakeCluster) -> Client {
    let mut c = Config::new(cluster.bootstrap());
    c.net.workers = 1;
    c.net.reconnect_backoff = Duration::from_millis(10);
    c.net.reconnect_backoff_max = Duration::from_millis(50);
    c.metadata.refresh_backoff = Duration::from_millis(20);
    c.consumer.fetch_max_wait = Duration::from_millis(20);
    Client::connect_blocking(c).expect("connect to the fake cluster")
}

fn produce(client: &Client, topic: &str, n: usize) {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries: Vec<_> = (0..n)
        .map(|i| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(0)
                        .with_value(format!("v{i}")),
                )
                .unwrap()
        })
        .collect();
    producer.flush_blocking().unwrap();
    for (i, d) in deliveries.into_iter().enumerate() {
        assert_eq!(d.wait().unwrap().offset, i as i64);
    }
    producer.close_blocking().unwrap();
}

fn read_all(
    consumer: &Consumer,
    topic: &str,
    n: usize,
    mut during: impl FnMut(usize),
) -> Vec<(i64, String)> {
    let mut pc = consumer
        .consume_partition_blocking(topic, 0, Offset::Oldest)
        .unwrap();
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
        during(out.len());
    }
    out
}

fn assert_exact(read: &[(i64, String)], n: usize) {
    assert_eq!(read.len(), n);
    for (i, (offset, value)) in read.iter().enumerate() {
        assert_eq!(*offset, i as i64, "offset {i}");
        assert_eq!(value, &format!("v{i}"));
    }
}

#[test]
fn consumes_what_the_producer_wrote() {
    let cluster = FakeCluster::builder()
        .brokers(2)
        .topic("t", 1)
        .build()
        .unwrap();
    let client = client(&cluster);
    produce(&client, "t", 500);
    let consumer = Consumer::new(client.clone()).unwrap();
    assert_exact(&read_all(&consumer, "t", 500, |_| {}), 500);
    client.close();
}

#[test]
fn a_fetch_answered_not_leader_is_retried() {
    let cluster = FakeCluster::builder()
        .brokers(2)
        .topic("t", 1)
        .build()
        .unwrap();
    let client = client(&cluster);
    produce(&client, "t", 300);
    // The first Fetch is answered NOT_LEADER_OR_FOLLOWER.
    let fired = Arc::new(AtomicUsize::new(0));
    let seen = fired.clone();
    cluster.control_once(Some(ApiKey::Fetch), move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
        Reply::error(KafkaCode::NOT_LEADER_OR_FOLLOWER)
    });
    let consumer = Consumer::new(client.clone()).unwrap();
    assert_exact(&read_all(&consumer, "t", 300, |_| {}), 300);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "the fault was hit");
    client.close();
}

#[test]
fn follows_a_leader_that_moves_mid_consume() {
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(3)
            .topic("t", 1)
            .build()
            .unwrap(),
    );
    let client = client(&cluster);
    produce(&client, "t", 400);
    let mut c = client.config().clone();
    c.consumer.max_partition_fetch_bytes = 1024;
    let small = Client::connect_blocking(c).unwrap();
    let consumer = Consumer::new(small.clone()).unwrap();
    let leader = cluster.leader("t", 0).unwrap();
    let other = cluster
        .broker_ids()
        .into_iter()
        .find(|&b| b != leader)
        .unwrap();
    let mut moved = false;
    let read = read_all(&consumer, "t", 400, |n| {
        if !moved && n >= 100 {
            cluster.move_leader("t", 0, other).unwrap();
            moved = true;
        }
    });
    assert!(moved);
    assert_exact(&read, 400);
    small.close();
    client.close();
}
