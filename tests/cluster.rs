//! The client and producer against a three-node KRaft cluster (`scripts/kafka up --brokers 3`, as
//! `scripts/test` does for this binary): leaders spread over brokers, and metadata that
//! follows a leader when its broker stops and comes back. Run only when named (`cargo
//! test --test cluster`; `test = false` in Cargo.toml), since it needs the three-node
//! cluster and stops nodes of it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    CreateTopicsRequest, ListOffsetsRequest,
    create_topics::CreatableTopic,
    list_offsets::{ListOffsetsPartition, ListOffsetsTopic},
};
use kring::{Client, Config};

#[path = "common/mod.rs"]
mod common;

const SERVERS: [&str; 3] = ["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"];

fn unique(prefix: &str) -> String {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{n}")
}

fn client() -> Client {
    let mut c = Config::new(SERVERS);
    c.net.workers = 2;
    c.metadata.refresh_backoff = Duration::from_millis(50);
    Client::connect_blocking(c).expect("bootstrap the cluster")
}

fn eventually<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sends ListOffsets for `partition` to the client's idea of its leader; true when the
/// leader answers without error.
fn leader_answers(client: &Client, topic: &str, partition: i32) -> bool {
    kring::client::block_on(async {
        let Ok((leader, _)) = client.leader(topic, partition).await else {
            return false;
        };
        let request = ListOffsetsRequest::default()
            .with_replica_id(-1)
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic.into())
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(partition)
                            .with_timestamp(-1),
                    ]),
            ]);
        match leader.send(request).await {
            Ok(r) => KafkaCode(r.topics[0].partitions[0].error_code).is_ok(),
            Err(_) => false,
        }
    })
}

fn create(client: &Client, topic: &str, partitions: i32) {
    let r = kring::client::block_on(
        client.send_any(
            CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(topic.into())
                        .with_num_partitions(partitions)
                        .with_replication_factor(3),
                ])
                .with_timeout_ms(30_000),
        ),
    )
    .unwrap();
    assert_eq!(KafkaCode(r.topics[0].error_code), KafkaCode::NONE);
}

#[test]
fn cluster_leaders_follow_a_stopped_broker() {
    let client = client();
    assert_eq!(client.metadata().brokers.len(), 3, "three brokers");
    let topic = unique("kring-cluster");
    create(&client, &topic, 6);

    // Every partition has a leader, leaders spread over the brokers, and each answers.
    let leaders: Vec<i32> = eventually("leaders for all partitions", 60, || {
        kring::client::block_on(client.refresh_metadata(&[&topic])).ok()?;
        let t = client.metadata().topics.get(&topic).cloned()?;
        let l: Vec<i32> = t.partitions.iter().map(|p| p.leader).collect();
        (l.len() == 6 && l.iter().all(|&x| x > 0)).then_some(l)
    });
    let distinct: std::collections::BTreeSet<i32> = leaders.iter().copied().collect();
    assert!(distinct.len() >= 2, "leaders spread: {leaders:?}");
    for p in 0..6 {
        eventually("leader answers", 30, || {
            leader_answers(&client, &topic, p).then_some(())
        });
        let replicas = kring::client::block_on(client.replicas(&topic, p)).unwrap();
        assert_eq!(replicas.len(), 3);
    }

    // Stop partition 0's leader: metadata moves the leadership elsewhere.
    let old = leaders[0];
    common::kafka_script(&["stop-node", &old.to_string()]);
    let new = eventually("a new leader for partition 0", 60, || {
        kring::client::block_on(client.refresh_after_error(&[&topic])).ok()?;
        let p = client.metadata().partition(&topic, 0).cloned()?;
        (p.leader > 0 && p.leader != old).then_some(p)
    });
    assert!(
        !new.isr.contains(&old),
        "stopped broker left the ISR: {:?}",
        new.isr
    );
    eventually("broker leaves metadata", 30, || {
        kring::client::block_on(client.refresh_metadata(&[])).ok()?;
        client.broker(old).is_none().then_some(())
    });
    eventually("new leader answers", 30, || {
        leader_answers(&client, &topic, 0).then_some(())
    });

    // Start it again: it comes back into metadata and the ISR.
    common::kafka_script(&["start-node", &old.to_string()]);
    eventually("restarted broker rejoins the ISR", 90, || {
        kring::client::block_on(client.refresh_metadata(&[&topic])).ok()?;
        let p = client.metadata().partition(&topic, 0).cloned()?;
        (client.broker(old).is_some() && p.isr.contains(&old)).then_some(())
    });
    client.close();
}

#[test]
fn cluster_coordinator_lookup() {
    let client = client();
    let group = unique("kring-cluster-group");
    let coordinator = kring::client::block_on(client.coordinator(&group)).unwrap();
    assert!((1..=3).contains(&coordinator.id()));
    client.close();
}

/// A consumer across a leader kill: every offset exactly once, in order.
#[test]
fn cluster_consumer_survives_a_leader_kill() {
    use kring::consumer::{Consumer, Offset};
    use kring::producer::{Producer, ProducerRecord};
    let mut config = Config::new(SERVERS);
    config.net.workers = 2;
    config.metadata.refresh_backoff = Duration::from_millis(50);
    let client = Client::connect_blocking(config).expect("bootstrap");
    let topic = unique("kring-cons-kill");
    common::create_topic(&client, &topic, 1, 3, &[("min.insync.replicas", "2")]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let total = 30_000u64;
    for i in 0..total {
        let _queued = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_value(&i.to_be_bytes()),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();
    producer.close_blocking().unwrap();

    let victim = client.metadata().partition(&topic, 0).unwrap().leader;
    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let mut seen: Vec<(i64, u64)> = Vec::with_capacity(total as usize);
    let mut killed = false;
    while (seen.len() as u64) < total {
        let batch = pc.next_batch_blocking().expect("alive").expect("no error");
        for r in batch.records() {
            let r = r.unwrap();
            let v = u64::from_be_bytes(r.value().unwrap().try_into().unwrap());
            seen.push((r.offset(), v));
        }
        if !killed && seen.len() > 5_000 {
            common::kafka_script(&["stop-node", &victim.to_string(), "--kill"]);
            killed = true;
        }
    }
    common::kafka_script(&["start-node", &victim.to_string()]);
    assert!(killed);
    for (i, (offset, value)) in seen.iter().enumerate() {
        assert_eq!(*offset, i as i64, "no offset skipped or repeated");
        assert_eq!(*value, i as u64);
    }
    client.close();
}

/// Admin on three nodes: a partition moves to other replicas (AlterPartitionReassignments,
/// followed until ListPartitionReassignments shows nothing and metadata has the new
/// replicas, as the Java TopicCommand then reports), and a preferred election moves its
/// leader to the first of them.
#[test]
fn cluster_admin_reassigns_and_elects_leaders() {
    use kring::admin::{Admin, Election};
    let client = client();
    let admin = Admin::new(client.clone());
    let topic = unique("kring-cluster-admin");
    create(&client, &topic, 1);
    let partition = (topic.clone(), 0);
    // A fresh answer may leave the topic out for a moment (LEADER_NOT_AVAILABLE while a
    // node learns of it: the client then keeps what it knew, here nothing): asked again.
    let refreshed = |client: &Client| {
        eventually("the topic in metadata", 60, || {
            kring::client::block_on(client.refresh_metadata(&[topic.as_str()])).unwrap();
            let t = client.metadata().topics.get(&topic).cloned()?;
            t.partitions.first().cloned()
        })
    };
    let before = eventually("the new partition's leader", 60, || {
        let p = refreshed(&client);
        (p.leader >= 0 && p.replicas.len() == 3).then_some(p)
    });
    // Two of the three replicas, the current leader second: the leader stays (it is
    // still a replica) and the first one becomes the preferred leader.
    let others: Vec<i32> = before
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != before.leader)
        .collect();
    let target = vec![others[0], before.leader];
    kring::client::block_on(
        admin.alter_partition_reassignments(&[(partition.clone(), Some(target.clone()))]),
    )
    .unwrap();
    eventually("the reassignment to finish", 120, || {
        let running = kring::client::block_on(
            admin.list_partition_reassignments(Some(std::slice::from_ref(&partition))),
        )
        .unwrap();
        (running.is_empty() && refreshed(&client).replicas == target).then_some(())
    });
    // The Java tool asks any broker, whose metadata may lag the controller's a moment.
    let replicas = format!("Replicas: {},{}", target[0], target[1]);
    eventually("TopicCommand to report the new replicas", 60, || {
        let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
            .args([
                "run-class",
                "org.apache.kafka.tools.TopicCommand",
                "--bootstrap-server",
                SERVERS[0],
                "--describe",
                "--topic",
                &topic,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains(&replicas)
            .then_some(())
    });

    // The preferred election: the partition is elected, or needed none (the controller
    // may already have moved the leader when the reassignment completed; metadata read
    // just before can lag either way).
    let elected = kring::client::block_on(
        admin.elect_leaders(Election::Preferred, Some(std::slice::from_ref(&partition))),
    )
    .unwrap();
    assert!(
        elected.is_empty() || elected == vec![partition.clone()],
        "{elected:?}"
    );
    eventually("the preferred replica to lead", 60, || {
        (refreshed(&client).leader == target[0]).then_some(())
    });
}

/// One consume-transform-produce transaction of the exactly-once test: the batch's
/// results and offsets, committed (a commit that failed with its outcome unknown is
/// retried, as it must be), or aborted and the batch's partition rewound. Whether it
/// committed.
async fn eos_transaction(
    producer: &kring::producer::Producer,
    consumer: &mut kring::group::GroupConsumer,
    output: &str,
    messages: &[kring::consumer::Message],
) -> bool {
    let committed = match eos_stage(producer, consumer, output, messages).await {
        Ok(()) => eos_commit(producer).await,
        Err(e) => {
            eprintln!("transaction failed before its commit: {e}");
            false
        }
    };
    if committed {
        return true;
    }
    let mut aborted = false;
    for attempt in 0..20 {
        match producer.abort_transaction().await {
            Ok(()) => {
                aborted = true;
                break;
            }
            Err(e) => eprintln!("abort attempt {attempt} failed: {e}"),
        }
    }
    assert!(aborted, "the transaction could not be aborted");
    if let Some(first) = messages.first() {
        let to = kring::consumer::Offset::Exact(first.offset);
        consumer
            .seek(&first.topic, first.partition, to)
            .await
            .expect("rewind the aborted batch");
    }
    false
}

/// Begins a transaction with the batch's results and offsets.
async fn eos_stage(
    producer: &kring::producer::Producer,
    consumer: &mut kring::group::GroupConsumer,
    output: &str,
    messages: &[kring::consumer::Message],
) -> kring::Result<()> {
    producer.begin_transaction()?;
    for m in messages {
        let value = m.value.as_deref().unwrap_or_default();
        let record = kring::producer::ProducerRecord::new(output).with_value(value);
        let _delivery = producer.send(record).await?;
    }
    let offsets = consumer.consumed_offsets();
    producer
        .send_offsets_to_transaction(&offsets, &consumer.group_metadata())
        .await
}

/// Commits, retrying a commit whose outcome is unknown; false when it must be aborted.
async fn eos_commit(producer: &kring::producer::Producer) -> bool {
    use kring::Error;
    use kring::producer::TransactionError;
    for attempt in 0..20 {
        match producer.commit_transaction().await {
            Ok(()) => return true,
            Err(Error::Transaction(TransactionError::Fatal { cause, .. })) => {
                panic!("the transactional producer failed for good: {cause}")
            }
            Err(e @ Error::Transaction(_)) => {
                eprintln!("commit refused, aborting: {e}");
                return false;
            }
            Err(e) => eprintln!("commit attempt {attempt} failed, retrying: {e}"),
        }
    }
    false
}

/// Exactly once across broker kills (issue 16): a consume-transform-produce loop copies
/// 100,000 records from one topic to another in transactions (offsets included) while
/// the transaction coordinator's broker and then a partition leader are SIGKILLed and
/// restarted; a read_committed reader (kring, and the Java console consumer) sees every
/// input record exactly once in the output, and a read_uncommitted one sees the
/// aborted attempts too (if any were made).
#[test]
fn cluster_transactions_copy_exactly_once_across_broker_kills() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let setup = client();
    let input = unique("kring-eos-in");
    let output = unique("kring-eos-out");
    let group = unique("kring-eos-group");
    let txn_id = unique("kring-eos-txn");
    for t in [&input, &output] {
        common::create_topic(&setup, t, 3, 3, &[("min.insync.replicas", "2")]);
    }
    let total = 100_000u64;
    let filler = kring::producer::Producer::new_blocking(setup.clone()).unwrap();
    for i in 0..total {
        let r = kring::producer::ProducerRecord::new(&input).with_value(i.to_string());
        let _delivery = filler.send_blocking(r).unwrap();
    }
    filler.close_blocking().unwrap();
    let coordinator = kring::client::block_on(setup.transaction_coordinator(&txn_id))
        .unwrap()
        .id();

    let committed = Arc::new(AtomicU64::new(0));
    let aborted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (committed, aborted, stop) = (committed.clone(), aborted.clone(), stop.clone());
        let (input, output, group, txn_id) =
            (input.clone(), output.clone(), group.clone(), txn_id.clone());
        std::thread::spawn(move || {
            let mut c = Config::new(SERVERS);
            c.net.workers = 2;
            c.metadata.refresh_backoff = Duration::from_millis(50);
            c.group.group_id = Some(group);
            c.consumer.enable_auto_commit = false;
            c.consumer.isolation_level = kring::config::IsolationLevel::ReadCommitted;
            c.consumer.auto_offset_reset = kring::config::OffsetReset::Earliest;
            c.producer.transactional_id = Some(txn_id);
            c.producer.linger = Duration::from_millis(5);
            let client = Client::connect_blocking(c).expect("bootstrap");
            kring::client::block_on(async {
                let producer = kring::producer::Producer::new(client.clone())
                    .await
                    .unwrap();
                producer.init_transactions().await.unwrap();
                let topics = kring::group::Topics::names([input]);
                let mut consumer = kring::group::GroupConsumer::subscribe(client.clone(), topics)
                    .await
                    .unwrap();
                while committed.load(Ordering::Acquire) < total && !stop.load(Ordering::Acquire) {
                    let timer = client.sleep(Duration::from_millis(500));
                    let next = tokio::select! {
                        b = consumer.next_messages() => b,
                        _ = timer => continue,
                    };
                    let messages = match next {
                        Some(Ok(m)) => m,
                        Some(Err(e)) => panic!("the group consumer failed: {e}"),
                        None => break,
                    };
                    if eos_transaction(&producer, &mut consumer, &output, &messages).await {
                        committed.fetch_add(messages.len() as u64, Ordering::AcqRel);
                    } else {
                        aborted.fetch_add(1, Ordering::AcqRel);
                    }
                }
                consumer.close().await.unwrap();
                producer.close().await.unwrap();
            });
            client.close();
        })
    };
    let wait_for = |n: u64| {
        eventually(&format!("{n} records copied"), 300, || {
            (committed.load(Ordering::Acquire) >= n).then_some(())
        })
    };
    wait_for(20_000);
    common::kafka_script(&["stop-node", &coordinator.to_string(), "--kill"]);
    wait_for(40_000);
    common::kafka_script(&["start-node", &coordinator.to_string()]);
    let leader = eventually("a leader of the output", 60, || {
        setup
            .metadata()
            .partition(&output, 0)
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
    });
    wait_for(60_000);
    common::kafka_script(&["stop-node", &leader.to_string(), "--kill"]);
    wait_for(80_000);
    common::kafka_script(&["start-node", &leader.to_string()]);
    eventually("every record copied", 300, || {
        (committed.load(Ordering::Acquire) >= total || worker.is_finished()).then_some(())
    });
    stop.store(true, Ordering::Release);
    worker.join().expect("the copying thread");
    assert_eq!(
        committed.load(Ordering::Acquire),
        total,
        "records committed"
    );
    eprintln!("aborted transactions: {}", aborted.load(Ordering::Acquire));

    let mut read_committed = Config::new(SERVERS);
    read_committed.consumer.isolation_level = kring::config::IsolationLevel::ReadCommitted;
    let reader = Client::connect_blocking(read_committed).unwrap();
    let consumer = kring::consumer::Consumer::new(reader.clone()).unwrap();
    let mut seen = vec![0u32; total as usize];
    let mut count = 0u64;
    for p in 0..3 {
        let (_, end) = kring::client::block_on(consumer.offsets(&output, p)).unwrap();
        let mut pc = consumer
            .consume_partition_blocking(&output, p, kring::consumer::Offset::Oldest)
            .unwrap();
        while pc.position() < end {
            let timer = reader.sleep(Duration::from_secs(10));
            let batch = kring::client::block_on(async {
                tokio::select! {
                    b = pc.next_batch() => b.map(|b| b.map(|b| {
                        b.records()
                            .map(|r| String::from_utf8(r.unwrap().value().unwrap().to_vec()).unwrap())
                            .collect::<Vec<_>>()
                    })),
                    _ = timer => None,
                }
            });
            let Some(batch) = batch else { break };
            for v in batch.expect("read") {
                seen[v.parse::<usize>().expect("a number")] += 1;
                count += 1;
            }
        }
    }
    let missing = seen.iter().filter(|n| **n == 0).count();
    let twice = seen.iter().filter(|n| **n > 1).count();
    assert_eq!(
        (count, missing, twice),
        (total, 0, 0),
        "read_committed: records, missing, duplicated"
    );
    reader.close();

    // The Java console consumer agrees.
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka"))
        .args([
            "run-class",
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
        ])
        .args([
            "--bootstrap-server",
            SERVERS[0],
            "--topic",
            &output,
            "--from-beginning",
        ])
        .args([
            "--isolation-level",
            "read_committed",
            "--timeout-ms",
            "20000",
        ])
        .output()
        .expect("console consumer");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut java_seen = std::collections::HashSet::new();
    let mut java_count = 0u64;
    for line in text.lines() {
        java_count += 1;
        java_seen.insert(line.to_string());
    }
    assert_eq!(
        (java_count, java_seen.len() as u64),
        (total, total),
        "the Java console consumer, read_committed: records, distinct"
    );
    setup.close();
}

/// Fetch requests answered per broker label since the previous call, read from the
/// `metrics` crate's debugging recorder (installed on first use; only connections made
/// after that record into it, and only [`cluster_consumer_fetches_from_the_replica_in_its_rack`]
/// reads it).
fn fetches_by_broker() -> std::collections::BTreeMap<String, u64> {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    static SNAPSHOTTER: std::sync::OnceLock<Snapshotter> = std::sync::OnceLock::new();
    let snapshotter = SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    });
    let mut fetches = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (_, key) = key.into_parts();
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_string())
        };
        if key.name() != kring::metrics::names::BROKER_REQUESTS
            || label("api").as_deref() != Some("Fetch")
        {
            continue;
        }
        if let (Some(broker), DebugValue::Counter(n)) = (label("broker"), value) {
            *fetches.entry(broker).or_insert(0) += n;
        }
    }
    fetches
}

/// Follower fetching (KIP-392) on the three racks (node N in rack rN, the rack-aware
/// replica selector on): a consumer in the rack of a follower of the partition, not the
/// leader's, is sent to that follower by the leader and reads every record from it once,
/// in order, its Fetch requests going to that follower (per-broker request counts in the
/// metrics); so is a group member in that rack.
#[test]
fn cluster_consumer_fetches_from_the_replica_in_its_rack() {
    use kring::consumer::{Consumer, Offset};
    use kring::producer::{Producer, ProducerRecord};
    // The recorder goes in before the rack clients connect, so their connections record.
    fetches_by_broker();
    let client = client();
    let topic = unique("kring-rack");
    common::create_topic(&client, &topic, 1, 3, &[]);
    let partition = eventually("the partition in sync on three replicas", 60, || {
        kring::client::block_on(client.refresh_metadata(&[&topic])).ok()?;
        let p = client.metadata().partition(&topic, 0).cloned()?;
        (p.leader > 0 && p.isr.len() == 3).then_some(p)
    });
    let follower = *partition
        .replicas
        .iter()
        .find(|&&r| r != partition.leader)
        .expect("a follower");
    let metadata = client.metadata();
    let rack_of = |id: i32| metadata.brokers.get(&id).and_then(|b| b.rack.clone());
    let rack = rack_of(follower).expect("the follower's broker has a rack");
    assert_ne!(
        rack_of(partition.leader).as_deref(),
        Some(rack.as_str()),
        "one broker per rack"
    );
    drop(metadata);

    let producer = Producer::new_blocking(client.clone()).unwrap();
    let total = 2_000u64;
    for i in 0..total {
        let _queued = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_value(&i.to_be_bytes()),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();
    producer.close_blocking().unwrap();

    let mut config = Config::new(SERVERS);
    config.net.workers = 2;
    config.set("client.rack", &rack).unwrap();
    let rack_client = Client::connect_blocking(config).expect("bootstrap");
    let consumer = Consumer::new(rack_client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    let mut seen: Vec<(i64, u64)> = Vec::with_capacity(total as usize);
    while (seen.len() as u64) < total {
        let batch = pc.next_batch_blocking().expect("alive").expect("no error");
        for r in batch.records() {
            let r = r.unwrap();
            let v = u64::from_be_bytes(r.value().unwrap().try_into().unwrap());
            seen.push((r.offset(), v));
        }
    }
    assert_eq!(seen.len() as u64, total, "nothing more than was produced");
    for (i, (offset, value)) in seen.iter().enumerate() {
        assert_eq!(*offset, i as i64, "no offset skipped or repeated");
        assert_eq!(*value, i as u64);
    }
    eventually("fetching from the follower in our rack", 30, || {
        (pc.fetching_from() == Some(follower)).then_some(())
    });
    drop(pc);
    rack_client.close();
    assert_fetched_mostly_from(follower, partition.leader, "the partition consumer");

    // A group member in the same rack fetches through the same path.
    let mut config = Config::new(SERVERS);
    config.net.workers = 2;
    config.set("client.rack", &rack).unwrap();
    config.group.group_id = Some(unique("kring-rack-group"));
    config.consumer.auto_offset_reset = kring::config::OffsetReset::Earliest;
    config.consumer.enable_auto_commit = false;
    let group_client = Client::connect_blocking(config).expect("bootstrap");
    kring::client::block_on(async {
        use kring::group::{GroupConsumer, Topics};
        let mut gc = GroupConsumer::subscribe(group_client.clone(), Topics::names([topic.clone()]))
            .await
            .unwrap();
        let mut offsets: Vec<i64> = Vec::with_capacity(total as usize);
        while (offsets.len() as u64) < total {
            let batch = gc.next_messages().await.expect("alive").expect("no error");
            offsets.extend(batch.iter().map(|m| m.offset));
        }
        assert_eq!(
            offsets,
            (0..total as i64).collect::<Vec<_>>(),
            "every record once, in order"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while gc.fetching_from(&topic, 0).unwrap() != Some(follower) {
            assert!(
                Instant::now() < deadline,
                "the member fetches from {:?}, not the follower {follower}",
                gc.fetching_from(&topic, 0)
            );
            group_client
                .sleep(Duration::from_millis(200))
                .await
                .unwrap();
        }
        gc.close().await.unwrap();
    });
    group_client.close();
    assert_fetched_mostly_from(follower, partition.leader, "the group member");
    client.close();
}

/// The Fetch requests since the previous look went to `follower` at least as often as
/// to the leader (which sees the first, naming the preferred replica, and maybe a few
/// after it; a run whose records all came in one fetch from the follower shows 1 and 1),
/// none to the third broker.
fn assert_fetched_mostly_from(follower: i32, leader: i32, who: &str) {
    let fetches = fetches_by_broker();
    let at = |id: i32| fetches.get(&id.to_string()).copied().unwrap_or(0);
    let elsewhere: u64 = fetches
        .iter()
        .filter(|(broker, _)| **broker != follower.to_string() && **broker != leader.to_string())
        .map(|(_, n)| n)
        .sum();
    assert!(
        at(follower) > 0 && at(follower) >= at(leader) && elsewhere == 0,
        "{who}'s Fetch requests by broker: {fetches:?} (follower {follower}, leader {leader})"
    );
}
