//! Shutdown without ceremony, against the real broker: a producer dropped without
//! `close()` settles every record and ends its tasks; a client (or its runtime) dropped
//! inside async code returns at once and leaves its workers' drain to a reaper thread.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{bootstrap, client, config, create_topic, threads_named, unique};
use kring::internals::{Broker, ConnectionConfig, Runtime, RuntimeConfig, live_tasks};
use kring::producer::{DeliveryFuture, Producer, ProducerRecord, RecordMetadata};
use kring::protocol::messages::{FetchRequest, fetch::FetchPartition, fetch::FetchTopic};
use kring::{Client, Error};

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for every delivery on a helper thread, so a delivery that never resolves fails
/// the test instead of hanging it.
fn outcomes(deliveries: Vec<DeliveryFuture>) -> Vec<Result<RecordMetadata, Error>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let all: Vec<_> = deliveries.into_iter().map(DeliveryFuture::wait).collect();
        let _ = tx.send(all);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("every delivery resolves after the producer is dropped")
}

fn send(producer: &Producer, topic: &str, n: usize) -> Vec<DeliveryFuture> {
    (0..n)
        .map(|i| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(0)
                        .with_value(format!("v{i}")),
                )
                .unwrap()
        })
        .collect()
}

#[test]
fn a_dropped_producer_fails_what_it_had_not_sent_and_ends_its_tasks() {
    let mut c = config();
    c.producer.linger = Duration::from_secs(60);
    let client = client(c);
    let topic = unique("kring-drop-unsent");
    create_topic(&client, &topic, 1, 1, &[]);
    let before = live_tasks(&client);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries = send(&producer, &topic, 20);
    // The sink starts on its worker asynchronously: wait until it runs, so the drop
    // below is seen by a live sink holding unsent records.
    wait_until("the partition's sink to run", || {
        live_tasks(&client) > before
    });
    drop(producer);
    for outcome in outcomes(deliveries) {
        assert!(
            matches!(outcome, Err(Error::ProducerDropped)),
            "a record still lingering fails clearly: {outcome:?}"
        );
    }
    wait_until("the producer's tasks to end", || {
        live_tasks(&client) == before
    });
}

#[test]
fn a_dropped_producer_lets_records_on_the_wire_finish() {
    let client = client(config());
    let topic = unique("kring-drop-inflight");
    create_topic(&client, &topic, 1, 1, &[]);
    let before = live_tasks(&client);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries = send(&producer, &topic, 2000);
    drop(producer);
    let outcomes = outcomes(deliveries);
    let acked: Vec<i64> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().map(|m| m.offset))
        .collect();
    for o in &outcomes {
        assert!(
            matches!(o, Ok(_) | Err(Error::ProducerDropped)),
            "acknowledged or clearly dropped: {o:?}"
        );
    }
    // What was acknowledged is in the log, in order, from the start.
    assert_eq!(acked, (0..acked.len() as i64).collect::<Vec<_>>());
    let stored = common::read_partition(&client, &topic, 0, acked.len());
    assert_eq!(stored.len(), acked.len());
    wait_until("the producer's tasks to end", || {
        live_tasks(&client) == before
    });
}

/// A Fetch the broker holds for `hold`: at the end of an empty partition (v12: by name).
fn held_fetch(topic: &str, hold: Duration) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(-1)
        .with_max_wait_ms(hold.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(topic.into())
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// Until `broker`'s held request is on the wire, not still queued behind the handshake
/// (a close refuses such a request at once, and the workers would end before the check
/// that they drain). Polled: the handshake's answer may take long on a loaded machine (a
/// fixed 300 ms wait here once failed in CI); the bound only guards against a hang.
async fn until_on_the_wire(broker: &Broker) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker.in_flight() == 0 {
        assert!(Instant::now() < deadline, "the held fetch never went out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn dropping_a_runtime_or_client_in_async_code_does_not_wait_for_the_drain() {
    let setup = client(config());
    let topic = unique("kring-drop-async");
    create_topic(&setup, &topic, 1, 1, &[]);
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // The last runtime handle, dropped on the executor while a connection drains a
    // request the broker holds for 20 s (drain timeout 3 s): the drop returns while
    // the workers still run, and they end by themselves.
    let name = "kr-drop-rt";
    let rt = Runtime::new(RuntimeConfig {
        workers: 2,
        thread_name: name.into(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let conn = ConnectionConfig {
        drain_timeout: Duration::from_secs(3),
        ..ConnectionConfig::default()
    };
    let broker = Broker::open(&rt, 1, bootstrap(), conn).unwrap();
    executor.block_on(async {
        let pending = broker
            .enqueue(held_fetch(&topic, Duration::from_secs(20)), Some(12))
            .await
            .unwrap();
        until_on_the_wire(&broker).await;
        assert_eq!(broker.in_flight(), 1, "the broker holds the fetch");
        drop(broker);
        drop(rt);
        assert!(
            threads_named(name) > 0,
            "the drop did not join the workers while they drain"
        );
        drop(pending);
    });
    wait_until("the workers to end", || threads_named(name) == 0);

    // The same through a client: dropped on the executor with a held request.
    let name = "kr-drop-cl";
    let rt = Runtime::new(RuntimeConfig {
        workers: 2,
        thread_name: name.into(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    executor.block_on(async {
        let client = Client::connect_with_runtime(config(), rt).await.unwrap();
        let broker = client.any_broker().unwrap();
        let pending = broker
            .enqueue(held_fetch(&topic, Duration::from_secs(20)), Some(12))
            .await
            .unwrap();
        until_on_the_wire(&broker).await;
        drop(broker);
        drop(client);
        assert!(
            threads_named(name) > 0,
            "the drop did not join the workers while they drain"
        );
        drop(pending);
    });
    wait_until("the workers to end", || threads_named(name) == 0);
}
