//! The transactional producer against the real broker: committed transactions are seen
//! by read_committed readers and aborted ones only by read_uncommitted readers; records
//! not sent when an abort comes fail with `Aborted`; a second producer with the same
//! transactional id fences the first; offsets sent to a transaction are committed with
//! it and only then; calls out of order and bad settings are refused with clear errors
//! and write nothing; on this 4.x broker (transaction.version 2 finalized) the producer
//! speaks KIP-890's transactions v2, each EndTxn bumping its epoch.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{client, config, create_topic, unique};
use kring::config::{Acks, IsolationLevel, OffsetReset};
use kring::consumer::{Consumer, Offset, OffsetManager};
use kring::group::{GroupConsumer, Topics};
use kring::producer::{GroupMetadata, Producer, ProducerRecord, TransactionError};
use kring::{Client, Config, Error};

fn txn_config(id: &str) -> Config {
    let mut c = config();
    c.producer.transactional_id = Some(id.to_string());
    c
}

fn txn_producer(id: &str) -> (Client, Producer) {
    let client = client(txn_config(id));
    let producer = Producer::new_blocking(client.clone()).unwrap();
    producer.init_transactions_blocking().unwrap();
    (client, producer)
}

/// Sends `values` to `partition` in the open transaction; the delivery futures.
fn send_all(
    producer: &Producer,
    topic: &str,
    partition: i32,
    values: &[String],
) -> Vec<kring::producer::DeliveryFuture> {
    values
        .iter()
        .map(|v| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(partition)
                        .with_value(v.clone()),
                )
                .unwrap()
        })
        .collect()
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The values of `topic`-`partition` from the start up to and including `last`, read
/// with `isolation`.
fn read_until(topic: &str, partition: i32, isolation: IsolationLevel, last: &str) -> Vec<String> {
    let mut c = config();
    c.consumer.isolation_level = isolation;
    let client = client(c);
    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(topic, partition, Offset::Oldest)
        .unwrap();
    let mut out = Vec::new();
    while out.last().map(String::as_str) != Some(last) {
        let batch = pc
            .next_batch_blocking()
            .expect("consumer alive")
            .expect("no error");
        for r in batch.records() {
            let r = r.unwrap();
            out.push(String::from_utf8(r.value().unwrap().to_vec()).unwrap());
        }
        assert!(out.len() < 10_000, "{last} never came: {out:?}");
    }
    client.close();
    out
}

#[test]
fn committed_transactions_are_seen_by_read_committed_and_aborted_ones_are_not() {
    let topic = unique("kring-txn-vis");
    let admin = client(config());
    create_topic(&admin, &topic, 2, 1, &[]);
    let (client, producer) = txn_producer(&unique("kring-txn-vis-id"));

    producer.begin_transaction().unwrap();
    let first: Vec<_> = (0..2)
        .flat_map(|p| send_all(&producer, &topic, p, &values(&format!("c1-p{p}"), 20)))
        .collect();
    producer.commit_transaction_blocking().unwrap();
    for d in first {
        d.wait().expect("committed records were acknowledged");
    }

    producer.begin_transaction().unwrap();
    for p in 0..2 {
        send_all(&producer, &topic, p, &values(&format!("ab-p{p}"), 10));
    }
    producer.flush_blocking().unwrap();
    producer.abort_transaction_blocking().unwrap();

    producer.begin_transaction().unwrap();
    for p in 0..2 {
        send_all(&producer, &topic, p, &values(&format!("c2-p{p}"), 5));
        send_all(&producer, &topic, p, &[format!("end-p{p}")]);
    }
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();

    for p in 0..2 {
        let end = format!("end-p{p}");
        let mut expected = values(&format!("c1-p{p}"), 20);
        expected.extend(values(&format!("c2-p{p}"), 5));
        expected.push(end.clone());
        let committed = read_until(&topic, p, IsolationLevel::ReadCommitted, &end);
        assert_eq!(committed, expected, "read_committed of partition {p}");
        let all = read_until(&topic, p, IsolationLevel::ReadUncommitted, &end);
        let aborted: Vec<_> = all
            .iter()
            .filter(|v| v.starts_with("ab-"))
            .cloned()
            .collect();
        assert_eq!(
            aborted,
            values(&format!("ab-p{p}"), 10),
            "read_uncommitted sees the aborted records of partition {p}"
        );
        assert_eq!(all.len(), expected.len() + 10);
    }
    admin.close();
}

#[test]
fn records_not_sent_when_the_abort_comes_fail_and_the_next_transaction_works() {
    let topic = unique("kring-txn-unsent");
    let admin = client(config());
    create_topic(&admin, &topic, 1, 1, &[]);
    let mut c = txn_config(&unique("kring-txn-unsent-id"));
    // The records linger: the abort finds them unsent.
    c.producer.linger = Duration::from_secs(30);
    c.producer.delivery_timeout = Duration::from_secs(120);
    let client = client(c);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    producer.init_transactions_blocking().unwrap();
    producer.begin_transaction().unwrap();
    let lingering = send_all(&producer, &topic, 0, &values("never", 5));
    producer.abort_transaction_blocking().unwrap();
    for d in lingering {
        match d.wait() {
            Err(Error::Transaction(TransactionError::Aborted { .. })) => {}
            other => panic!("an unsent record of an aborted transaction: {other:?}"),
        }
    }
    producer.begin_transaction().unwrap();
    let kept = send_all(&producer, &topic, 0, &values("kept", 3));
    producer.commit_transaction_blocking().unwrap();
    let offsets: Vec<i64> = kept.into_iter().map(|d| d.wait().unwrap().offset).collect();
    assert_eq!(offsets.len(), 3);
    producer.close_blocking().unwrap();
    client.close();
    let seen = read_until(&topic, 0, IsolationLevel::ReadUncommitted, "kept-2");
    assert_eq!(
        seen,
        values("kept", 3),
        "nothing of the aborted records was written"
    );
    admin.close();
}

#[test]
fn a_second_producer_with_the_same_id_fences_the_first() {
    let topic = unique("kring-txn-fence");
    let admin = client(config());
    create_topic(&admin, &topic, 1, 1, &[]);
    let id = unique("kring-txn-fence-id");
    let (c1, old) = txn_producer(&id);
    old.begin_transaction().unwrap();
    send_all(&old, &topic, 0, &values("old", 3));
    old.commit_transaction_blocking().unwrap();

    let (c2, new) = txn_producer(&id);
    assert!(new.producer_id().unwrap().1 > old.producer_id().unwrap().1);

    old.begin_transaction().unwrap();
    // The first send adds the partition to the transaction; the coordinator's
    // PRODUCER_FENCED may come back before the later sends, which are then refused at
    // once (seen in CI): a refused send is not acknowledged either.
    let zombie: Vec<_> = values("zombie", 3)
        .into_iter()
        .map(|v| old.send_blocking(ProducerRecord::new(&topic).with_partition(0).with_value(v)))
        .collect();
    let e = old.commit_transaction_blocking().unwrap_err();
    assert!(
        matches!(e, Error::Transaction(TransactionError::Fatal { .. })),
        "the fenced producer's commit: {e:?}"
    );
    assert!(
        e.to_string().contains(&id),
        "names the transactional id: {e}"
    );
    for d in zombie {
        assert!(
            d.and_then(|d| d.wait()).is_err(),
            "a fenced producer's record was not acknowledged"
        );
    }
    let again = old.begin_transaction().unwrap_err();
    assert!(
        matches!(again, Error::Transaction(TransactionError::Fatal { .. })),
        "{again:?}"
    );

    new.begin_transaction().unwrap();
    send_all(&new, &topic, 0, &values("new", 2));
    new.commit_transaction_blocking().unwrap();
    let _ = old.close_blocking();
    new.close_blocking().unwrap();
    c1.close();
    c2.close();
    let seen = read_until(&topic, 0, IsolationLevel::ReadCommitted, "new-1");
    let mut expected = values("old", 3);
    expected.extend(values("new", 2));
    assert_eq!(
        seen, expected,
        "nothing of the fenced producer's last transaction"
    );
    admin.close();
}

#[test]
fn calls_out_of_order_and_bad_settings_are_refused_and_write_nothing() {
    let topic = unique("kring-txn-bad");
    let admin = client(config());
    create_topic(&admin, &topic, 1, 1, &[]);
    let id = unique("kring-txn-bad-id");

    let c = client(txn_config(&id));
    let producer = Producer::new_blocking(c.clone()).unwrap();
    let record = || {
        ProducerRecord::new(&topic)
            .with_partition(0)
            .with_value("x")
    };
    let e = producer.send_blocking(record()).unwrap_err();
    assert!(e.to_string().contains("before init_transactions"), "{e}");
    let e = producer.begin_transaction().unwrap_err();
    assert!(e.to_string().contains("before init_transactions"), "{e}");
    producer.init_transactions_blocking().unwrap();
    let e = producer.init_transactions_blocking().unwrap_err();
    assert!(
        matches!(e, Error::Transaction(TransactionError::InvalidState { .. })),
        "{e:?}"
    );
    let e = producer.commit_transaction_blocking().unwrap_err();
    assert!(e.to_string().contains("no transaction open"), "{e}");
    let e = producer.send_blocking(record()).unwrap_err();
    assert!(e.to_string().contains("no transaction open"), "{e}");
    let e = producer.abort_transaction_blocking().unwrap_err();
    assert!(e.to_string().contains("no transaction open"), "{e}");
    producer.close_blocking().unwrap();
    c.close();

    // acks other than all with a transactional id: refused before anything is sent.
    let mut bad = txn_config(&id);
    bad.producer.acks = Acks::Leader;
    let e = Client::connect_blocking(bad).unwrap_err();
    assert!(e.to_string().contains("acks=all"), "{e}");

    // A producer without a transactional id has no transactions.
    let c = client(config());
    let plain = Producer::new_blocking(c.clone()).unwrap();
    let e = plain.init_transactions_blocking().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transaction(TransactionError::NotTransactional { .. })
        ),
        "{e:?}"
    );
    assert!(plain.begin_transaction().is_err());
    plain.close_blocking().unwrap();

    let consumer = Consumer::new(c.clone()).unwrap();
    let (_, end) = kring::client::block_on(consumer.offsets(&topic, 0)).unwrap();
    assert_eq!(end, 0, "nothing was written");
    c.close();
    admin.close();
}

#[test]
fn offsets_sent_to_a_transaction_are_committed_with_it_and_not_on_abort() {
    let input = unique("kring-txn-in");
    let output = unique("kring-txn-out");
    let group = unique("kring-txn-group");
    let admin = client(config());
    create_topic(&admin, &input, 1, 1, &[]);
    create_topic(&admin, &output, 1, 1, &[]);
    let seed = Producer::new_blocking(admin.clone()).unwrap();
    for v in values("in", 20) {
        let _delivery = seed
            .send_blocking(ProducerRecord::new(&input).with_partition(0).with_value(v))
            .unwrap();
    }
    seed.close_blocking().unwrap();

    let mut gc_config = config();
    gc_config.group.group_id = Some(group.clone());
    gc_config.consumer.enable_auto_commit = false;
    gc_config.consumer.auto_offset_reset = OffsetReset::Earliest;
    gc_config.consumer.isolation_level = IsolationLevel::ReadCommitted;
    let gc_client = client(gc_config);
    let (client, producer) = txn_producer(&unique("kring-txn-ctp-id"));

    let committed_in_group = || {
        let om = OffsetManager::new(admin.clone(), group.clone()).unwrap();
        kring::client::block_on(om.committed(&input, 0))
            .unwrap()
            .map(|(o, _)| o)
    };
    // The coordinator applies a transaction's offsets when it writes the markers, just
    // after EndTxn is answered: `group_commits` waits for them to show.
    kring::client::block_on(async {
        let mut gc = GroupConsumer::subscribe(gc_client.clone(), Topics::names([input.clone()]))
            .await
            .unwrap();
        // Transaction 1: the first 10 records, transformed, and their offsets: committed.
        let mut read = BTreeMap::new();
        while read.len() < 10 {
            let m = gc.next_message().await.unwrap().unwrap();
            if m.offset < 10 {
                read.insert(m.offset, m);
            }
        }
        producer.begin_transaction().unwrap();
        for m in read.values() {
            let v = format!(
                "out-{}",
                String::from_utf8_lossy(m.value.as_deref().unwrap())
            );
            let _delivery = producer
                .send(ProducerRecord::new(&output).with_partition(0).with_value(v))
                .await
                .unwrap();
        }
        let meta = gc.group_metadata();
        assert!(
            meta.generation_id > 0 && !meta.member_id.is_empty(),
            "{meta:?}"
        );
        let tp = kring::group::TopicPartition::new(&input, 0);
        let offsets = vec![(
            tp.clone(),
            kring::group::OffsetAndMetadata {
                offset: 10,
                metadata: "t1".into(),
                leader_epoch: None,
            },
        )];
        producer
            .send_offsets_to_transaction(&offsets, &meta)
            .await
            .unwrap();
        producer.commit_transaction().await.unwrap();
        group_commits(&admin, &group, &input, 10);

        // Transaction 2: offsets sent, then aborted: the group's offset stays.
        producer.begin_transaction().unwrap();
        let _delivery = producer
            .send(
                ProducerRecord::new(&output)
                    .with_partition(0)
                    .with_value("out-aborted"),
            )
            .await
            .unwrap();
        let offsets = vec![(
            tp.clone(),
            kring::group::OffsetAndMetadata {
                offset: 20,
                metadata: "t2".into(),
                leader_epoch: None,
            },
        )];
        producer
            .send_offsets_to_transaction(&offsets, &gc.group_metadata())
            .await
            .unwrap();
        producer.abort_transaction().await.unwrap();
        // Were the abort to commit them, they would show as soon as a commit's do.
        for _ in 0..30 {
            assert_eq!(committed_in_group(), Some(10), "not committed by the abort");
            std::thread::sleep(Duration::from_millis(100));
        }

        // Offsets of a generation that is not the member's: the coordinator refuses
        // them and the transaction must be aborted.
        producer.begin_transaction().unwrap();
        let stale = GroupMetadata {
            generation_id: meta.generation_id + 100,
            ..meta.clone()
        };
        let e = producer
            .send_offsets_to_transaction(&offsets, &stale)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Transaction(TransactionError::Abortable { .. })),
            "{e:?}"
        );
        assert!(producer.commit_transaction().await.is_err());
        producer.abort_transaction().await.unwrap();

        // And the producer goes on: offsets of the member's own generation commit.
        producer.begin_transaction().unwrap();
        let offsets = vec![(
            tp,
            kring::group::OffsetAndMetadata {
                offset: 12,
                metadata: "t4".into(),
                leader_epoch: None,
            },
        )];
        producer
            .send_offsets_to_transaction(&offsets, &gc.group_metadata())
            .await
            .unwrap();
        producer.commit_transaction().await.unwrap();
        group_commits(&admin, &group, &input, 12);
        gc.close().await.unwrap();
    });
    producer.close_blocking().unwrap();
    client.close();
    gc_client.close();
    let out = read_until(&output, 0, IsolationLevel::ReadCommitted, "out-in-9");
    assert_eq!(out, values("out-in", 10));
    admin.close();
}

#[test]
fn a_failed_record_fails_the_commit_even_after_a_flush_reported_it() {
    let topic = unique("kring-txn-fail");
    let admin = client(config());
    create_topic(&admin, &topic, 1, 1, &[("max.message.bytes", "2000")]);
    let (client, producer) = txn_producer(&unique("kring-txn-fail-id"));
    producer.begin_transaction().unwrap();
    let small = send_all(&producer, &topic, 0, &values("small", 3));
    let big = producer
        .send_blocking(
            ProducerRecord::new(&topic)
                .with_partition(0)
                .with_value(vec![b'x'; 10_000]),
        )
        .unwrap();
    // The flush reports the refused record (and takes the report)...
    assert!(producer.flush_blocking().is_err());
    assert!(big.wait().is_err(), "the broker refused the large record");
    // ...yet the commit still knows: nothing of this transaction may be committed.
    let e = producer.commit_transaction_blocking().unwrap_err();
    assert!(
        matches!(e, Error::Transaction(TransactionError::Abortable { .. })),
        "{e:?}"
    );
    producer.abort_transaction_blocking().unwrap();
    drop(small);
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &values("after", 2));
    producer.commit_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();
    let seen = read_until(&topic, 0, IsolationLevel::ReadCommitted, "after-1");
    assert_eq!(
        seen,
        values("after", 2),
        "nothing of the failed transaction"
    );
    admin.close();
}

/// Sets the cluster's finalized `transaction.version` with the Java feature tool.
fn set_transaction_version(level: i16) {
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .args([
            "run-class",
            "org.apache.kafka.tools.FeatureCommand",
            "--bootstrap-server",
        ])
        .arg(common::bootstrap())
        .arg(if level >= 2 { "upgrade" } else { "downgrade" })
        .args(["--feature", &format!("transaction.version={level}")])
        .output()
        .expect("scripts/kafka run-class FeatureCommand");
    assert!(
        out.status.success(),
        "transaction.version={level}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Puts `transaction.version` back to 2 however the test ends.
struct RestoreTransactionVersion;

impl Drop for RestoreTransactionVersion {
    fn drop(&mut self) {
        set_transaction_version(2);
    }
}

fn finalized_transaction_version(client: &Client) -> i16 {
    kring::client::block_on(kring::admin::Admin::new(client.clone()).describe_features())
        .unwrap()
        .finalized
        .iter()
        .find(|f| f.name == "transaction.version")
        .map_or(0, |f| f.max)
}

/// Runs 4 transactions of 50 records to each of 2 partitions (commits with offsets
/// for `group` in rounds 0 and 2, aborts in 1 and 3) and an empty one; the epoch after
/// each, and the committed values.
fn commit_and_abort_rounds(
    producer: &Producer,
    topic: &str,
    group: &str,
    prefix: &str,
) -> (Vec<i16>, Vec<String>) {
    let epoch = || producer.producer_id().expect("an id").1;
    let mut epochs = vec![epoch()];
    let mut committed = Vec::new();
    for round in 0..4 {
        producer.begin_transaction().unwrap();
        let vals = values(&format!("{prefix}{round}"), 50);
        let futures: Vec<_> = [0, 1]
            .iter()
            .flat_map(|&p| send_all(producer, topic, p, &vals))
            .collect();
        if round % 2 == 0 {
            kring::client::block_on(producer.send_offsets_to_transaction(
                &[(
                    kring::group::TopicPartition::new(topic, 0),
                    kring::group::OffsetAndMetadata {
                        offset: round + 1,
                        metadata: String::new(),
                        leader_epoch: None,
                    },
                )],
                &GroupMetadata::for_group(group),
            ))
            .unwrap();
            producer.commit_transaction_blocking().unwrap();
            for f in futures {
                f.wait().expect("committed records are acknowledged");
            }
            committed.extend(vals.iter().cloned());
        } else {
            producer.abort_transaction_blocking().unwrap();
        }
        epochs.push(epoch());
    }
    producer.begin_transaction().unwrap();
    producer.commit_transaction_blocking().unwrap();
    epochs.push(epoch());
    (epochs, committed)
}

/// Waits until `group` has committed `want` for `topic`-0 (a transaction's offsets are
/// applied as its markers are written).
fn group_commits(client: &Client, group: &str, topic: &str, want: i64) {
    let om = OffsetManager::new(client.clone(), group.to_string()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = kring::client::block_on(om.committed(topic, 0))
            .unwrap()
            .map(|(o, _)| o);
        if got == Some(want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{group} committed {got:?}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Both transaction protocols against the real broker. With `transaction.version` 2
/// finalized (Kafka 4.x's default) the producer speaks KIP-890's v2: every commit and
/// every abort ends with the epoch the EndTxn v5 answer names, one above the last, and
/// an empty transaction sends no EndTxn; sequences start again at 0 under each epoch,
/// which the broker checks, so every transaction's records are accepted; offsets go
/// with TxnOffsetCommit v5 alone. With the feature downgraded to 1 (the Java feature
/// tool; on a 3.x broker, which has no v2, as it is), a new producer speaks v1:
/// AddPartitionsToTxn and AddOffsetsToTxn, and the epoch stays the same across commits.
/// Under both, read_committed sees exactly the committed rounds in order, and the
/// group's offsets are the last committed round's.
#[test]
fn transactions_v2_bump_the_epoch_at_every_end_and_v1_after_a_downgrade_does_not() {
    let setup = client(config());
    let offers_v2 = finalized_transaction_version(&setup) >= 2;
    let mut checked = Vec::new();
    if offers_v2 {
        let topic = unique("kring-txn-v2");
        create_topic(&setup, &topic, 2, 1, &[]);
        let (client2, producer) = txn_producer(&unique("kring-txn-v2-id"));
        assert_eq!(producer.transaction_version(), Some(2));
        let group = unique("kring-txn-v2-group");
        let (epochs, committed) = commit_and_abort_rounds(&producer, &topic, &group, "v2-");
        let e0 = epochs[0];
        assert_eq!(
            epochs,
            vec![e0, e0 + 1, e0 + 2, e0 + 3, e0 + 4, e0 + 4],
            "v2: each EndTxn's epoch taken; the empty transaction sent none"
        );
        producer.close_blocking().unwrap();
        client2.close();
        checked.push((topic, committed, group));
    }

    let restore = offers_v2.then(|| {
        set_transaction_version(1);
        RestoreTransactionVersion
    });
    let v1_topic = unique("kring-txn-v1");
    create_topic(&setup, &v1_topic, 2, 1, &[]);
    let (client1, producer) = txn_producer(&unique("kring-txn-v1-id"));
    assert_eq!(producer.transaction_version(), Some(1));
    let group1 = unique("kring-txn-v1-group");
    let (epochs, committed1) = commit_and_abort_rounds(&producer, &v1_topic, &group1, "v1-");
    // Rounds 0 and 2 commit, 1 and 3 abort; each abort here fails records still
    // lingering, which v1 answers with an InitProducerId bump (KIP-360).
    assert_eq!(
        (epochs[1], epochs[3], epochs[5]),
        (epochs[0], epochs[2], epochs[4]),
        "v1: a commit and an empty transaction keep the epoch: {epochs:?}"
    );
    producer.close_blocking().unwrap();
    client1.close();
    if let Some(restore) = restore {
        drop(restore);
        assert_eq!(finalized_transaction_version(&setup), 2, "restored");
    }
    checked.push((v1_topic, committed1, group1));

    for (topic, committed, group) in &checked {
        let last = committed.last().unwrap().clone();
        for partition in [0, 1] {
            assert_eq!(
                &read_until(topic, partition, IsolationLevel::ReadCommitted, &last),
                committed,
                "{topic}-{partition}: the committed rounds, in order, nothing aborted"
            );
        }
        group_commits(&setup, group, topic, 3);
    }
    setup.close();
}
