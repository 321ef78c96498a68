//! Consumer groups against the real broker: members of one group share a topic's
//! partitions with each assignor, every record is read once across them, commits carry
//! the generation, a member that joins or leaves mid-stream moves partitions without
//! losing records, static members come back without a rebalance, and bad settings are
//! refused.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client, config, create_topic, unique};
use kring::config::OffsetReset;
use kring::group::{GroupConsumer, TopicPartition, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config};

/// Produces `per_partition` records to each of `partitions` partitions; values are
/// "p/i".
fn produce(client: &Client, topic: &str, partitions: i32, per_partition: usize) {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..per_partition {
        for p in 0..partitions {
            deliveries.push(
                producer
                    .send_blocking(
                        ProducerRecord::new(topic)
                            .with_partition(p)
                            .with_value(format!("{p}/{i}")),
                    )
                    .unwrap(),
            );
        }
    }
    producer.flush_blocking().unwrap();
    for d in deliveries {
        d.wait().unwrap();
    }
    producer.close_blocking().unwrap();
}

fn group_config(group: &str, assignor: &str) -> Config {
    let mut c = config();
    c.group.group_id = Some(group.to_string());
    if assignor == "kip848" {
        // The session and the heartbeat interval are the broker's (scripts/kafka: 10 s, 1 s).
        c.group.protocol = kring::config::GroupProtocol::Consumer;
    } else {
        c.group.assignment_strategies = vec![assignor.to_string()];
        c.group.heartbeat_interval = Duration::from_millis(300);
        c.group.session_timeout = Duration::from_secs(10);
    }
    c.group.rebalance_timeout = Duration::from_secs(30);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.auto_commit_interval = Duration::from_millis(500);
    c
}

/// What the members of a test saw.
#[derive(Default)]
struct Seen {
    /// (partition, offset) → how many times it was read.
    records: BTreeMap<(i32, i64), usize>,
}

impl Seen {
    fn distinct(&self) -> usize {
        self.records.len()
    }
    fn duplicates(&self) -> usize {
        self.records.values().map(|n| n - 1).sum()
    }
}

/// Runs a member on its own thread until `stop`: reads messages into `seen` and
/// publishes its assignment; closes the consumer (commit on revoke) at the end.
fn spawn_member(
    config: Config,
    topic: String,
    seen: Arc<Mutex<Seen>>,
    assignment: Arc<Mutex<Vec<TopicPartition>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let client = client(config);
        kring::client::block_on(async {
            let mut gc = GroupConsumer::subscribe(client.clone(), Topics::names([topic]))
                .await
                .unwrap();
            while !stop.load(Ordering::Acquire) {
                let next = next_within(&mut gc, &client, Duration::from_millis(200)).await;
                *assignment.lock().unwrap() = gc.assignment();
                match next {
                    Some(Ok(m)) => {
                        *seen
                            .lock()
                            .unwrap()
                            .records
                            .entry((m.partition, m.offset))
                            .or_default() += 1;
                    }
                    Some(Err(e)) => panic!("member failed: {e}"),
                    None => {}
                }
            }
            gc.close().await.unwrap();
        });
        client.close();
    })
}

/// The next message, or `None` after `within` without one.
async fn next_within(
    gc: &mut GroupConsumer,
    client: &Client,
    within: Duration,
) -> Option<kring::Result<kring::consumer::Message>> {
    let timer = client.sleep(within);
    tokio::select! {
        m = gc.next_message() => m,
        _ = timer => None,
    }
}

fn wait_for(
    what: &str,
    limit: Duration,
    show: &dyn Fn() -> String,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            show()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Three members of one group share 12 partitions: assignments are disjoint and
/// cover the topic, and every record is read exactly once.
fn three_members_share(assignor: &str) {
    let admin = client(config());
    let topic = unique(&format!("group-{assignor}"));
    create_topic(&admin, &topic, 12, 1, &[]);
    produce(&admin, &topic, 12, 50);
    let group = unique("g");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let assignments: Vec<_> = (0..3).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
    let members: Vec<_> = assignments
        .iter()
        .map(|a| {
            spawn_member(
                group_config(&group, assignor),
                topic.clone(),
                seen.clone(),
                a.clone(),
                stop.clone(),
            )
        })
        .collect();
    let show = || {
        let lists: Vec<Vec<String>> = assignments
            .iter()
            .map(|a| a.lock().unwrap().iter().map(|tp| tp.to_string()).collect())
            .collect();
        format!(
            "{} distinct; assignments {lists:?}",
            seen.lock().unwrap().distinct()
        )
    };
    wait_for("every record", Duration::from_secs(60), &show, || {
        seen.lock().unwrap().distinct() == 600
    });
    wait_for(
        "a balanced assignment",
        Duration::from_secs(60),
        &show,
        || {
            let lists: Vec<Vec<TopicPartition>> = assignments
                .iter()
                .map(|a| a.lock().unwrap().clone())
                .collect();
            let all: BTreeSet<&TopicPartition> = lists.iter().flatten().collect();
            lists.iter().all(|l| l.len() == 4) && all.len() == 12
        },
    );
    stop.store(true, Ordering::Release);
    for m in members {
        m.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.distinct(), 600);
    assert_eq!(
        seen.duplicates(),
        0,
        "records read twice by members that stayed alive"
    );
    admin.close();
}

#[test]
fn three_members_share_with_range() {
    three_members_share("range");
}

#[test]
fn three_members_share_with_roundrobin() {
    three_members_share("roundrobin");
}

#[test]
fn three_members_share_with_sticky() {
    three_members_share("sticky");
}

#[test]
fn three_members_share_with_cooperative_sticky() {
    three_members_share("cooperative-sticky");
}

#[test]
fn three_members_share_with_kip848() {
    three_members_share("kip848");
}

/// The committed offsets of `group` as OffsetFetch reports them (admin client, so not
/// the member's own bookkeeping): (partition, offset, metadata).
fn fetched_offsets(client: &Client, group: &str) -> Vec<(i32, i64, Option<String>)> {
    let admin = kring::admin::Admin::new(client.clone());
    kring::client::block_on(admin.list_group_offsets(group))
        .unwrap()
        .into_iter()
        .map(|c| (c.partition, c.offset, c.metadata))
        .collect()
}

/// The leader epochs committed with `group`'s offsets: (partition, epoch, -1 for none).
fn fetched_epochs(client: &Client, group: &str) -> Vec<(i32, i32)> {
    let admin = kring::admin::Admin::new(client.clone());
    kring::client::block_on(admin.list_group_offsets(group))
        .unwrap()
        .into_iter()
        .map(|c| (c.partition, c.leader_epoch))
        .collect()
}

/// `commit_async` and `commit_offsets_async`: the futures resolve, the commits are what
/// OffsetFetch then reports (and `committed()`), with the leader epoch of the last
/// record consumed, and an offset for a partition the member is not assigned fails with
/// `NotAssigned` and commits nothing.
#[test]
fn commit_async_is_visible_through_offset_fetch() {
    let admin = client(config());
    let topic = unique("group-commit-async");
    create_topic(&admin, &topic, 2, 1, &[]);
    produce(&admin, &topic, 2, 5);
    let group = unique("g");
    let mut c = group_config(&group, "range");
    c.consumer.enable_auto_commit = false;
    let member = client(c);
    kring::client::block_on(async {
        let mut gc = GroupConsumer::subscribe(member.clone(), Topics::names([topic.clone()]))
            .await
            .unwrap();
        let mut read = 0;
        while read < 10 {
            let m = next_within(&mut gc, &member, Duration::from_secs(30))
                .await
                .expect("a record within 30 s")
                .unwrap();
            assert!(m.offset < 5, "{m:?}");
            read += 1;
        }
        // Every record was returned; the last one counts as consumed on the next call,
        // which commit_async is.
        gc.commit_async().await.unwrap();
        let mut offsets = fetched_offsets(&admin, &group);
        offsets.sort();
        assert_eq!(
            offsets,
            vec![(0, 5, Some(String::new())), (1, 5, Some(String::new()))]
        );
        assert_eq!(gc.committed(&topic, 0).unwrap(), Some(5));
        // Each commit carries the leader epoch of the batch its last record came in
        // (KIP-320): the partitions' current epochs here, no leader having changed.
        let metadata = member.metadata();
        let epoch_of = |p: i32| {
            metadata
                .partition(&topic, p)
                .expect("metadata")
                .leader_epoch
        };
        let mut epochs = fetched_epochs(&admin, &group);
        epochs.sort();
        assert_eq!(epochs, vec![(0, epoch_of(0)), (1, epoch_of(1))]);
        assert!(epochs.iter().all(|&(_, e)| e >= 0), "{epochs:?}");
        drop(metadata);

        let tp = |p| TopicPartition::new(topic.as_str(), p);
        let with_note = kring::group::OffsetAndMetadata {
            offset: 3,
            metadata: "replay from 3".into(),
            leader_epoch: None,
        };
        gc.commit_offsets_async(&[(tp(1), with_note)])
            .await
            .unwrap();
        let row = fetched_offsets(&admin, &group)
            .into_iter()
            .find(|r| r.0 == 1);
        assert_eq!(row, Some((1, 3, Some("replay from 3".to_string()))));
        assert_eq!(gc.committed(&topic, 1).unwrap(), Some(3));

        let not_ours = kring::group::OffsetAndMetadata {
            offset: 1,
            metadata: String::new(),
            leader_epoch: None,
        };
        let refused = gc.commit_offsets_async(&[(tp(0), not_ours.clone()), (tp(7), not_ours)]);
        match refused.await {
            Err(kring::Error::NotAssigned {
                topic: t,
                partition,
            }) => {
                assert_eq!((t.as_str(), partition), (topic.as_str(), 7));
            }
            other => panic!("expected NotAssigned, got {other:?}"),
        }
        // Nothing of the refused commit was sent: partition 0 still has 5.
        let row = fetched_offsets(&admin, &group)
            .into_iter()
            .find(|r| r.0 == 0);
        assert_eq!(row, Some((0, 5, Some(String::new()))));
        gc.close().await.unwrap();
    });
    member.close();
    admin.close();
}
