//! Per-role settings over one client, against the real broker: producers built with
//! different settings on one client each write as they were built (compression read
//! back from the batches), a transactional producer and a read_committed consumer built
//! on a client that is neither, a group consumer with its own `group.id`, and the
//! builders' refusals (another role's or the client's properties, bad combinations).

mod common;

use std::time::Duration;

use common::{client, config, create_topic, unique};
use kring::config::{Acks, Compression, ConfigurationError, IsolationLevel, PropertyScope};
use kring::consumer::{Consumer, Offset, OffsetManager};
use kring::group::{GroupConsumer, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::record::Compression as Codec;
use kring::{Client, Error};

/// Sends `values` to partition 0 and waits for every acknowledgement.
fn send_acked(producer: &Producer, topic: &str, values: &[String]) {
    let deliveries: Vec<_> = values
        .iter()
        .map(|v| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(0)
                        .with_value(v.clone()),
                )
                .unwrap()
        })
        .collect();
    producer.flush_blocking().unwrap();
    for d in deliveries {
        d.wait().unwrap();
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Every (value, batch codec) of partition 0 from the start up to and including
/// `last`, read with `consumer`'s batch API.
fn read_with_codecs(consumer: &Consumer, topic: &str, last: &str) -> Vec<(String, Codec)> {
    let mut pc = consumer
        .consume_partition_blocking(topic, 0, Offset::Oldest)
        .unwrap();
    let mut out: Vec<(String, Codec)> = Vec::new();
    while out.last().map(|(v, _)| v.as_str()) != Some(last) {
        let batch = pc
            .next_batch_blocking()
            .expect("consumer alive")
            .expect("no error");
        let codec = batch
            .header()
            .expect("a v2 batch")
            .compression()
            .expect("a known codec");
        for r in batch.records() {
            let value = r.unwrap().value().unwrap().to_vec();
            out.push((String::from_utf8(value).unwrap(), codec));
        }
        assert!(out.len() < 10_000, "{last} never came");
    }
    pc.close();
    out
}

fn read_values(consumer: &Consumer, topic: &str, last: &str) -> Vec<String> {
    read_with_codecs(consumer, topic, last)
        .into_iter()
        .map(|(v, _)| v)
        .collect()
}

/// Two producers on one client, one built with `compression.type=zstd` (and acks=1
/// without idempotence), one with the client's settings (no compression): each one's
/// batches carry its own codec.
#[test]
fn two_producers_on_one_client_write_with_their_own_settings() {
    let client = client(config());
    let topic = unique("kring-roles-codec");
    create_topic(&client, &topic, 1, 1, &[]);
    let zstd = Producer::builder(&client)
        .set("compression.type", "zstd")
        .unwrap()
        .set("enable.idempotence", "false")
        .unwrap()
        .acks(Acks::Leader)
        .build_blocking()
        .unwrap();
    let plain = Producer::new_blocking(client.clone()).unwrap();
    assert_eq!(client.config().producer.compression, Compression::None);
    assert_eq!(zstd.producer_id(), None, "built without idempotence");
    assert!(plain.producer_id().is_some(), "the client's: idempotent");

    send_acked(&zstd, &topic, &values("zstd", 50));
    send_acked(&plain, &topic, &values("plain", 50));
    send_acked(&zstd, &topic, &values("zstd-again", 50));
    let last = "zstd-again-49";

    let consumer = Consumer::new(client.clone()).unwrap();
    let read = read_with_codecs(&consumer, &topic, last);
    assert_eq!(read.len(), 150);
    for (value, codec) in &read {
        let expected = if value.starts_with("zstd") {
            Codec::Zstd
        } else {
            Codec::None
        };
        assert_eq!(*codec, expected, "{value}");
    }
    zstd.close_blocking().unwrap();
    plain.close_blocking().unwrap();
    client.close();
}

/// On a client whose settings are neither transactional nor read_committed: a
/// transactional producer built on it commits, aborts and commits, and of two consumers
/// on the same client the one built with `isolation.level=read_committed` sees only the
/// committed records while the client's (read_uncommitted) sees the aborted ones too.
#[test]
fn consumers_on_one_client_read_with_their_own_isolation_level() {
    let client = client(config());
    assert_eq!(
        client.config().consumer.isolation_level,
        IsolationLevel::ReadUncommitted
    );
    assert_eq!(client.config().producer.transactional_id, None);
    let topic = unique("kring-roles-isolation");
    create_topic(&client, &topic, 1, 1, &[]);
    let txn = Producer::builder(&client)
        .transactional_id(unique("kring-roles-txn"))
        .build_blocking()
        .unwrap();
    txn.init_transactions_blocking().unwrap();
    txn.begin_transaction().unwrap();
    send_acked(&txn, &topic, &values("committed", 10));
    txn.commit_transaction_blocking().unwrap();
    txn.begin_transaction().unwrap();
    send_acked(&txn, &topic, &values("aborted", 10));
    txn.abort_transaction_blocking().unwrap();
    txn.begin_transaction().unwrap();
    send_acked(&txn, &topic, &["end".to_string()]);
    txn.commit_transaction_blocking().unwrap();
    txn.close_blocking().unwrap();

    let committed_only = Consumer::builder(&client)
        .set("isolation.level", "read_committed")
        .unwrap()
        .build()
        .unwrap();
    let everything = Consumer::new(client.clone()).unwrap();
    assert_eq!(
        committed_only.consumer_config().isolation_level,
        IsolationLevel::ReadCommitted
    );

    let mut expected = values("committed", 10);
    expected.push("end".into());
    assert_eq!(read_values(&committed_only, &topic, "end"), expected);
    let mut all = values("committed", 10);
    all.extend(values("aborted", 10));
    all.push("end".into());
    assert_eq!(read_values(&everything, &topic, "end"), all);
    client.close();
}

/// A group consumer built with its own `group.id` (the client has none) and its own
/// reset policy (earliest; the client's is latest) reads what was there before it
/// joined and commits under that group.
#[test]
fn a_group_consumer_joins_with_its_own_group_id() {
    let client = client(config());
    assert_eq!(client.config().group.group_id, None);
    let topic = unique("kring-roles-group");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    send_acked(&producer, &topic, &values("g", 5));
    producer.close_blocking().unwrap();
    let group = unique("kring-roles-g");
    kring::client::block_on(async {
        let mut gc = GroupConsumer::builder(&client)
            .group_id(group.clone())
            .set("session.timeout.ms", "10000")
            .unwrap()
            .set("auto.offset.reset", "earliest")
            .unwrap()
            .enable_auto_commit(false)
            .subscribe(Topics::names([topic.clone()]))
            .await
            .unwrap();
        assert_eq!(gc.group(), group);
        let mut read = Vec::new();
        while read.len() < 5 {
            // A bound so that a lost setting fails instead of hanging, not a timing claim.
            let timer = client.sleep(Duration::from_secs(60));
            let m = tokio::select! {
                m = gc.next_message() => m,
                _ = timer => None,
            }
            .expect("the records from before the join (auto.offset.reset=earliest)")
            .unwrap();
            read.push(String::from_utf8(m.value.unwrap().to_vec()).unwrap());
        }
        assert_eq!(read, values("g", 5));
        gc.commit().await.unwrap();
        let offsets = OffsetManager::new(client.clone(), group.clone()).unwrap();
        let committed = offsets.committed(&topic, 0).await.unwrap();
        assert_eq!(committed.map(|(o, _)| o), Some(5));
        gc.close().await.unwrap();
    });
    client.close();
}

/// An offset manager made by a consumer built with auto-commit (every 100 ms) commits
/// what is marked by itself, on a client whose own settings have auto-commit off.
#[test]
fn a_consumers_offset_manager_auto_commits_with_the_consumers_settings() {
    let mut c = config();
    c.consumer.enable_auto_commit = false;
    let client = client(c);
    let topic = unique("kring-roles-offsets");
    create_topic(&client, &topic, 1, 1, &[]);
    let consumer = Consumer::builder(&client)
        .set("enable.auto.commit", "true")
        .unwrap()
        .set("auto.commit.interval.ms", "100")
        .unwrap()
        .build()
        .unwrap();
    let group = unique("kring-roles-om");
    let offsets = consumer.offset_manager(group.clone()).unwrap();
    kring::client::block_on(async {
        let pom = offsets.manage_partition(&topic, 0).await.unwrap();
        pom.mark_offset(7, "auto");
        // Nothing here commits: only the auto-commit task can. Polled until it shows,
        // with a bound so that a lost setting fails instead of hanging.
        let reader = OffsetManager::new(client.clone(), group.clone()).unwrap();
        let mut committed = None;
        for _ in 0..600 {
            committed = reader.committed(&topic, 0).await.unwrap();
            if committed.is_some() {
                break;
            }
            client.sleep(Duration::from_millis(100)).await.unwrap();
        }
        assert_eq!(committed, Some((7, "auto".to_string())));
        offsets.close().await.unwrap();
    });
    client.close();
}

fn not_for_role(result: kring::Result<impl std::fmt::Debug>) -> (String, PropertyScope, String) {
    let e = match result {
        Err(Error::Configuration(e)) => e,
        other => panic!("expected NotForRole, got {other:?}"),
    };
    match &e {
        ConfigurationError::NotForRole {
            property,
            belongs_to,
            ..
        } => (property.clone(), *belongs_to, e.to_string()),
        other => panic!("expected NotForRole, got {other:?}"),
    }
}

fn inconsistent_field(result: kring::Result<impl std::fmt::Debug>) -> (&'static str, String) {
    match result {
        Err(Error::Configuration(ConfigurationError::Inconsistent { field, reason })) => {
            (field, reason)
        }
        other => panic!("expected an inconsistent configuration, got {other:?}"),
    }
}

/// Builders take their role's properties only (the error says where another belongs),
/// validate as `Config::validate` does, and leave the client's settings alone.
#[test]
fn builders_refuse_other_roles_properties_and_bad_combinations() {
    let client: Client = client(config());
    let (p, scope, text) = not_for_role(Producer::builder(&client).set("bootstrap.servers", "x:1"));
    assert_eq!(
        (p.as_str(), scope),
        ("bootstrap.servers", PropertyScope::Client)
    );
    assert!(
        text.contains("client setting") && text.contains("a producer"),
        "{text}"
    );
    let (_, scope, text) =
        not_for_role(Producer::builder(&client).set("isolation.level", "read_committed"));
    assert_eq!(scope, PropertyScope::Consumer);
    assert!(text.contains("consumer setting"), "{text}");
    let (_, scope, _) = not_for_role(Consumer::builder(&client).set("security.protocol", "SSL"));
    assert_eq!(scope, PropertyScope::Client);
    let (_, scope, _) = not_for_role(Consumer::builder(&client).set("acks", "1"));
    assert_eq!(scope, PropertyScope::Producer);
    let (_, scope, _) = not_for_role(Consumer::builder(&client).set("group.id", "g"));
    assert_eq!(scope, PropertyScope::Group);
    let (_, scope, text) =
        not_for_role(GroupConsumer::builder(&client).set("compression.type", "zstd"));
    assert_eq!(scope, PropertyScope::Producer);
    assert!(text.contains("a group consumer"), "{text}");
    let (_, scope, _) =
        not_for_role(GroupConsumer::builder(&client).set("sasl.mechanism", "PLAIN"));
    assert_eq!(scope, PropertyScope::Client);
    assert!(matches!(
        Producer::builder(&client).set("linger.msec", "5"),
        Err(Error::Configuration(ConfigurationError::UnknownProperty(_)))
    ));
    assert!(matches!(
        Producer::builder(&client).set("linger.ms", "soon"),
        Err(Error::Configuration(
            ConfigurationError::InvalidValue { .. }
        ))
    ));

    // Combinations, checked by Config::validate's rules.
    let (field, reason) = inconsistent_field(
        Producer::builder(&client)
            .transactional_id("t")
            .acks(Acks::Leader)
            .build_blocking(),
    );
    assert_eq!(field, "producer.acks");
    assert!(
        reason.contains("transactional producer needs acks=all"),
        "{reason}"
    );
    let (field, _) = inconsistent_field(
        Producer::builder(&client)
            .transactional_id("t")
            .enable_idempotence(false)
            .build_blocking(),
    );
    assert_eq!(field, "producer.enable_idempotence");
    let (field, _) = inconsistent_field(
        Consumer::builder(&client)
            .set("kring.fetch.max.decompressed.bytes", "1000")
            .unwrap()
            .build(),
    );
    assert_eq!(field, "consumer.fetch_max_decompressed_bytes");
    let (field, _) = inconsistent_field(kring::client::block_on(
        GroupConsumer::builder(&client)
            .group_id("g")
            .set("session.timeout.ms", "1000")
            .unwrap()
            .subscribe(Topics::names(["t"])),
    ));
    assert_eq!(field, "group.heartbeat_interval");
    let (field, _) = inconsistent_field(kring::client::block_on(
        GroupConsumer::builder(&client).subscribe(Topics::names(["t"])),
    ));
    assert_eq!(field, "group.group_id");

    // `config` replaces the section whole; the client's own settings are untouched.
    let mut own = client.config().producer.clone();
    own.linger = Duration::from_millis(250);
    let builder = Producer::builder(&client)
        .config(own)
        .set("acks", "all")
        .unwrap();
    assert_eq!(builder.producer_config().linger, Duration::from_millis(250));
    assert_eq!(client.config().producer.linger, Duration::from_millis(5));
    client.close();
}
