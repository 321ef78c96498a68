//! A cooperative (KIP-429) rebalance while every OffsetCommit is answered later than
//! the application waits in one call (issue 15): members read with a 100 ms timeout, as
//! applications polling with a timeout do, auto-commit runs every 20 ms, and the
//! FakeCluster holds each OffsetCommit answer 150 ms. A real broker shows such commits
//! only now and then (a loaded machine, or a commit queued behind a Fetch long poll on
//! the shared connection), hence the fake. The rebalance must still complete: the
//! members that give up partitions revoke them and rejoin, the new member gets its
//! share, nothing is reported lost, and every record is read. Before the fix each call
//! sent the auto-commit anew and was cut short before its answer, so the revocation
//! queued behind it never ran and the group stayed unbalanced.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kring::config::OffsetReset;
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::protocol::ApiKey;
use kring::{Client, Config};
use kring_mock::{FakeCluster, Reply};

const TOPIC: &str = "t";
const PARTITIONS: i32 = 6;
/// How long the fake holds every OffsetCommit answer: longer than one read call.
const COMMIT_DELAY: Duration = Duration::from_millis(150);
/// How long one read call waits.
const CALL: Duration = Duration::from_millis(100);
/// How many 50 ms looks a wait takes before it gives up (a guard against hanging, not
/// a timing assertion).
const PATIENCE: usize = 1_200;

fn config(cluster: &FakeCluster, group: &str) -> Config {
    let mut c = Config::new(cluster.bootstrap());
    c.group.group_id = Some(group.to_string());
    c.group.assignment_strategies = vec!["cooperative-sticky".to_string()];
    c.group.heartbeat_interval = Duration::from_millis(100);
    c.group.session_timeout = Duration::from_secs(10);
    c.group.rebalance_timeout = Duration::from_secs(30);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.enable_auto_commit = true;
    c.consumer.auto_commit_interval = Duration::from_millis(20);
    c
}

/// Partitions the listener was told were lost.
#[derive(Clone, Default)]
struct LostRecorder(Arc<Mutex<Vec<TopicPartition>>>);

impl RebalanceListener for LostRecorder {
    fn on_lost<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.0.lock().unwrap().extend(partitions.iter().cloned());
        Box::pin(async {})
    }
}

type Seen = Arc<Mutex<BTreeSet<(i32, i64)>>>;

struct Member {
    lost: LostRecorder,
    assignment: Arc<Mutex<Vec<TopicPartition>>>,
    thread: std::thread::JoinHandle<()>,
}

fn spawn_member(config: Config, seen: Seen, stop: Arc<AtomicBool>) -> Member {
    let lost = LostRecorder::default();
    let assignment = Arc::new(Mutex::new(Vec::new()));
    let (l, a) = (lost.clone(), assignment.clone());
    let thread = std::thread::spawn(move || {
        let client = Client::connect_blocking(config).unwrap();
        kring::client::block_on(async {
            let mut gc =
                GroupConsumer::with_listener(client.clone(), Topics::names([TOPIC]), Box::new(l))
                    .await
                    .unwrap();
            while !stop.load(Ordering::Acquire) {
                let timer = client.sleep(CALL);
                let next = tokio::select! {
                    m = gc.next_message() => m,
                    _ = timer => None,
                };
                *a.lock().unwrap() = gc.assignment();
                match next {
                    Some(Ok(m)) => {
                        seen.lock().unwrap().insert((m.partition, m.offset));
                    }
                    Some(Err(e)) => panic!("member failed: {e}"),
                    None => {}
                }
            }
            gc.close().await.unwrap();
        });
        client.close();
    });
    Member {
        lost,
        assignment,
        thread,
    }
}

/// Appends a record to every partition every few ms until `stop`.
fn spawn_producer(cluster: Arc<FakeCluster>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop.load(Ordering::Acquire) {
            for p in 0..PARTITIONS {
                let value = format!("{p}/{i}");
                cluster
                    .append_records(TOPIC, p, 1_000, &[(None, Some(value.as_bytes()))])
                    .unwrap();
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

fn wait_for(what: &str, show: &dyn Fn() -> String, mut done: impl FnMut() -> bool) {
    for _ in 0..PATIENCE {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("gave up waiting for {what}: {}", show());
}

fn assignments(members: &[Member]) -> Vec<Vec<TopicPartition>> {
    members
        .iter()
        .map(|m| m.assignment.lock().unwrap().clone())
        .collect()
}

fn balanced(members: &[Member], each: usize) -> bool {
    let lists = assignments(members);
    let all: BTreeSet<&TopicPartition> = lists.iter().flatten().collect();
    lists.iter().all(|l| l.len() == each) && all.len() == PARTITIONS as usize
}

#[test]
fn cooperative_rebalance_completes_when_commits_outlast_each_call() {
    let cluster = Arc::new(
        FakeCluster::builder()
            .brokers(1)
            .topic(TOPIC, PARTITIONS)
            .build()
            .unwrap(),
    );
    cluster.control(Some(ApiKey::OffsetCommit), |_| {
        Reply::pass().after(COMMIT_DELAY)
    });
    let seen: Seen = Arc::default();
    let stop_producer = Arc::new(AtomicBool::new(false));
    let producer = spawn_producer(cluster.clone(), stop_producer.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let spawn = || spawn_member(config(&cluster, "g"), seen.clone(), stop.clone());
    let mut members: Vec<Member> = (0..2).map(|_| spawn()).collect();
    let show = |m: &[Member]| format!("{:?}", assignments(m));
    wait_for(
        "two members with 3 partitions each",
        &|| show(&members),
        || balanced(&members, 3),
    );
    members.push(spawn());
    wait_for(
        "three members with 2 partitions each",
        &|| show(&members),
        || balanced(&members, 2),
    );
    stop_producer.store(true, Ordering::Release);
    producer.join().unwrap();
    let ends: Vec<(i32, i64)> = (0..PARTITIONS)
        .map(|p| (p, cluster.high_watermark(TOPIC, p).unwrap()))
        .collect();
    let unread = || -> Vec<(i32, i64)> {
        let seen = seen.lock().unwrap();
        ends.iter()
            .flat_map(|&(p, end)| (0..end).map(move |o| (p, o)))
            .filter(|r| !seen.contains(r))
            .collect()
    };
    wait_for(
        "every record read",
        &|| format!("{} unread", unread().len()),
        || unread().is_empty(),
    );
    stop.store(true, Ordering::Release);
    let lost: Vec<Vec<TopicPartition>> = members
        .iter()
        .map(|m| m.lost.0.lock().unwrap().clone())
        .collect();
    for m in members {
        m.thread.join().unwrap();
    }
    assert!(lost.iter().all(|l| l.is_empty()), "lost: {lost:?}");
    assert!(ends.iter().all(|&(_, end)| end > 0));
}
