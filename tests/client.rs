//! `Client` against the real broker on loopback (`scripts/kafka up`; `KRING_BOOTSTRAP`
//! overrides 127.0.0.1:9092): bootstrap (also past a dead address), metadata, leaders,
//! coordinators, coalesced refreshes, close.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::client::CoordinatorKind;
use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, ListOffsetsRequest,
    create_topics::CreatableTopic,
    delete_topics::DeleteTopicState,
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
};
use kring::{Client, Config, Error};

fn bootstrap() -> String {
    std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn unique(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{n}", std::process::id())
}

fn config(servers: &[&str]) -> Config {
    let mut c = Config::new(servers.iter().copied());
    c.net.workers = 2;
    c
}

/// A dead address: a port nothing listens on.
fn dead_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("127.0.0.1:{port}")
}

async fn create_topic(client: &Client, name: &str, partitions: i32) {
    let response = client
        .send_any(
            CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(name.into())
                        .with_num_partitions(partitions)
                        .with_replication_factor(1),
                ])
                .with_timeout_ms(30_000),
        )
        .await
        .expect("create topics");
    assert_eq!(KafkaCode(response.topics[0].error_code), KafkaCode::NONE);
}

async fn delete_topic(client: &Client, name: &str) {
    let broker = client.any_broker().unwrap();
    broker.connect().await.unwrap();
    let version = broker
        .api_versions()
        .unwrap()
        .version_for(ApiKey::DeleteTopics)
        .unwrap();
    let request = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![
            DeleteTopicState::default().with_name(Some(name.into())),
        ])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![name.into()])
    };
    broker.send(request.with_timeout_ms(30_000)).await.unwrap();
}

/// Waits until every partition of `topic` has a leader in metadata.
async fn wait_for_leaders(client: &Client, topic: &str, partitions: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        client.refresh_metadata(&[topic]).await.unwrap();
        if let Some(t) = client.metadata().topics.get(topic)
            && t.partitions.len() == partitions
            && t.partitions.iter().all(|p| p.leader >= 0)
        {
            return;
        }
        assert!(Instant::now() < deadline, "no leaders for {topic}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bootstrap_past_a_dead_address_and_out_of_brokers() {
    let dead = dead_address();
    let client = Client::connect_blocking(config(&[&dead, &bootstrap()])).expect("bootstrap");
    let m = client.metadata();
    assert!(!m.brokers.is_empty());
    assert!(m.cluster_id.is_some());
    assert!(client.controller().is_some());
    client.close();

    let err = Client::connect_blocking(config(&[&dead_address(), &dead_address()]))
        .expect_err("nothing answers");
    match &err {
        Error::OutOfBrokers(attempts) => {
            assert!(attempts.contains("connecting"), "{attempts}");
        }
        other => panic!("expected OutOfBrokers, got {other}"),
    }
    assert!(err.is_retriable());
}

#[test]
fn leaders_partitions_and_topics() {
    let client = Client::connect_blocking(config(&[&bootstrap()])).unwrap();
    let topic = unique("kring-client");
    kring::client::block_on(async {
        create_topic(&client, &topic, 4).await;
        wait_for_leaders(&client, &topic, 4).await;
        assert!(client.topics().await.unwrap().contains(&topic));
        assert_eq!(client.partitions(&topic).await.unwrap(), vec![0, 1, 2, 3]);
        for p in 0..4 {
            let (leader, epoch) = client.leader(&topic, p).await.unwrap();
            assert!(epoch >= 0);
            assert_eq!(client.replicas(&topic, p).await.unwrap(), vec![leader.id()]);
            assert!(
                client
                    .in_sync_replicas(&topic, p)
                    .await
                    .unwrap()
                    .contains(&leader.id())
            );
            // The leader really leads: ListOffsets sent to it succeeds.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let answer = leader
                    .send(
                        ListOffsetsRequest::default()
                            .with_replica_id(-1)
                            .with_topics(vec![
                                ListOffsetsTopic::default()
                                    .with_name(topic.clone())
                                    .with_partitions(vec![
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(-1),
                                    ]),
                            ]),
                    )
                    .await
                    .unwrap();
                let code = KafkaCode(answer.topics[0].partitions[0].error_code);
                if code.is_ok() {
                    break;
                }
                assert!(code.is_retriable() && Instant::now() < deadline, "{code}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        match client.leader(&topic, 9).await {
            Err(Error::InvalidPartition {
                partition: 9,
                count: 4,
                ..
            }) => {}
            other => panic!("expected InvalidPartition, got {other:?}"),
        }
        let missing = unique("kring-missing");
        let err = client.leader(&missing, 0).await.unwrap_err();
        assert_eq!(
            err.code(),
            Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION),
            "{err}"
        );
        assert!(
            !client.topics().await.unwrap().contains(&missing),
            "auto topic creation is off by default"
        );
        delete_topic(&client, &topic).await;
    });
    client.close();
}

#[test]
fn coordinators_are_found_and_cached() {
    let client = Client::connect_blocking(config(&[&bootstrap()])).unwrap();
    kring::client::block_on(async {
        let group = unique("kring-group");
        let coordinator = client.coordinator(&group).await.expect("group coordinator");
        assert!(client.metadata().brokers.contains_key(&coordinator.id()));
        let again = client.coordinator(&group).await.unwrap();
        assert_eq!(again.id(), coordinator.id());
        let batch = client
            .coordinators(CoordinatorKind::Group, &[&unique("g1"), &unique("g2")])
            .await
            .expect("batched lookup");
        assert_eq!(batch.len(), 2);
        let txn = client
            .transaction_coordinator(&unique("kring-txn"))
            .await
            .expect("transaction coordinator");
        assert!(txn.id() >= 0);
    });
    client.close();
}

#[test]
fn a_storm_of_refreshes_coalesces() {
    let client = Client::connect_blocking(config(&[&bootstrap()])).unwrap();
    let before = client.metadata_requests();
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let c = client.clone();
            std::thread::spawn(move || {
                kring::client::block_on(c.refresh_after_error(&["kring-storm"])).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let used = client.metadata_requests() - before;
    assert!(
        (1..=4).contains(&used),
        "32 error-triggered refreshes cost {used} requests"
    );
    client.close();
}

#[test]
fn a_closed_client_refuses_work() {
    let client = Client::connect_blocking(config(&[&bootstrap()])).unwrap();
    client.close();
    assert!(client.is_closed());
    let err = kring::client::block_on(client.topics()).unwrap_err();
    assert!(matches!(err, Error::ClosedClient), "{err}");
    assert!(matches!(client.any_broker(), Err(Error::ClosedClient)));
    assert!(matches!(
        kring::client::block_on(client.coordinator("g")),
        Err(Error::ClosedClient)
    ));
}

#[test]
fn works_from_a_foreign_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = Client::connect(config(&[&bootstrap()])).await.unwrap();
        let joins: Vec<_> = (0..8)
            .map(|_| {
                let c = client.clone();
                tokio::spawn(async move { c.topics().await.map(|t| t.len()) })
            })
            .collect();
        for j in joins {
            j.await.unwrap().unwrap();
        }
        client.close();
    });
}

#[test]
fn bad_configuration_is_refused_up_front() {
    let mut c = config(&[&bootstrap()]);
    c.producer.enable_idempotence = true;
    c.producer.acks = kring::config::Acks::Leader;
    match Client::connect_blocking(c) {
        Err(Error::Configuration(e)) => assert!(e.to_string().contains("producer.acks"), "{e}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}
