//! A cooperative (KIP-429) rebalance against the real broker while records flow and
//! auto-commit runs every 20 ms, so commits are in flight whenever a generation ends:
//! members that keep partitions never lose them (no `on_lost`), each kept partition is
//! assigned once, and every record produced is read by some member. perf/rebalance
//! once found every member's partitions lost in each such rebalance, because a commit
//! refused for the generation that had just ended made the member drop everything.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client, config, create_topic, unique};
use kring::config::OffsetReset;
use kring::consumer::Consumer;
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config};

const PARTITIONS: i32 = 6;

fn cooperative_config(group: &str) -> Config {
    let mut c = config();
    c.group.group_id = Some(group.to_string());
    c.group.assignment_strategies = vec!["cooperative-sticky".to_string()];
    c.group.heartbeat_interval = Duration::from_millis(300);
    c.group.session_timeout = Duration::from_secs(10);
    c.group.rebalance_timeout = Duration::from_secs(30);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    // Commits all the time, so some are in flight when a generation ends.
    c.consumer.enable_auto_commit = true;
    c.consumer.auto_commit_interval = Duration::from_millis(20);
    c
}

/// What a member's listener saw.
#[derive(Default)]
struct Callbacks {
    assigned: Vec<TopicPartition>,
    lost: Vec<TopicPartition>,
}

struct Recorder(Arc<Mutex<Callbacks>>);

impl RebalanceListener for Recorder {
    fn on_assigned<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let mut c = self.0.lock().unwrap();
        c.assigned.extend(partitions.iter().cloned());
        Box::pin(async {})
    }

    fn on_lost<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.0
            .lock()
            .unwrap()
            .lost
            .extend(partitions.iter().cloned());
        Box::pin(async {})
    }
}

/// Every (partition, offset) any member read.
type Seen = Arc<Mutex<BTreeSet<(i32, i64)>>>;

/// One member on its own thread until `stop`, publishing its assignment.
struct Member {
    callbacks: Arc<Mutex<Callbacks>>,
    assignment: Arc<Mutex<Vec<TopicPartition>>>,
    thread: std::thread::JoinHandle<()>,
}

fn spawn_member(config: Config, topic: String, seen: Seen, stop: Arc<AtomicBool>) -> Member {
    let callbacks = Arc::new(Mutex::new(Callbacks::default()));
    let assignment = Arc::new(Mutex::new(Vec::new()));
    let (c, a) = (callbacks.clone(), assignment.clone());
    let thread = std::thread::spawn(move || {
        let client = client(config);
        kring::client::block_on(async {
            let mut gc = GroupConsumer::with_listener(
                client.clone(),
                Topics::names([topic]),
                Box::new(Recorder(c)),
            )
            .await
            .unwrap();
            while !stop.load(Ordering::Acquire) {
                // Calls cut short by a timer, as applications polling with a timeout do.
                let timer = client.sleep(Duration::from_millis(100));
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
        callbacks,
        assignment,
        thread,
    }
}

/// Sends a record to every partition every few ms until `stop`, then flushes.
fn spawn_producer(
    client: Client,
    topic: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let producer = Producer::new_blocking(client).unwrap();
        while !stop.load(Ordering::Acquire) {
            for p in 0..PARTITIONS {
                let record = ProducerRecord::new(&topic)
                    .with_partition(p)
                    .with_value("x");
                // Failures show in the flush at the end.
                drop(producer.send_blocking(record).unwrap());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        producer.flush_blocking().unwrap();
        producer.close_blocking().unwrap();
    })
}

fn wait_for(what: &str, show: &dyn Fn() -> String, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            show()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// Each partition's (earliest, next) offset.
fn log_ends(client: &Client, topic: &str) -> BTreeMap<i32, (i64, i64)> {
    let consumer = Consumer::new(client.clone()).unwrap();
    (0..PARTITIONS)
        .map(|p| {
            let ends = kring::client::block_on(consumer.offsets(topic, p)).unwrap();
            (p, ends)
        })
        .collect()
}

/// The offsets in the logs that no member read.
fn unread(seen: &Seen, ends: &BTreeMap<i32, (i64, i64)>) -> Vec<(i32, i64)> {
    let seen = seen.lock().unwrap();
    ends.iter()
        .flat_map(|(&p, &(first, next))| (first..next).map(move |o| (p, o)))
        .filter(|r| !seen.contains(r))
        .collect()
}

#[test]
fn cooperative_rebalance_with_auto_commit_loses_nothing() {
    let admin = client(config());
    let topic = unique("group-coop-commit");
    create_topic(&admin, &topic, PARTITIONS, 1, &[]);
    let group = unique("g");
    let seen: Seen = Arc::default();
    let stop_producer = Arc::new(AtomicBool::new(false));
    let producer = spawn_producer(admin.clone(), topic.clone(), stop_producer.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let spawn = || {
        spawn_member(
            cooperative_config(&group),
            topic.clone(),
            seen.clone(),
            stop.clone(),
        )
    };
    let mut members: Vec<Member> = (0..2).map(|_| spawn()).collect();
    let show = |m: &[Member]| format!("{:?}", assignments(m));
    wait_for(
        "two members with 3 partitions each",
        &|| show(&members),
        || balanced(&members, 3),
    );
    let before = assignments(&members);
    members.push(spawn());
    wait_for(
        "three members with 2 partitions each",
        &|| show(&members),
        || balanced(&members, 2),
    );
    let after = assignments(&members);
    stop_producer.store(true, Ordering::Release);
    producer.join().unwrap();
    let ends = log_ends(&admin, &topic);
    wait_for(
        "every record produced read by some member",
        &|| {
            let missing = unread(&seen, &ends);
            format!("{} unread, first {:?}", missing.len(), missing.first())
        },
        || unread(&seen, &ends).is_empty(),
    );
    stop.store(true, Ordering::Release);
    let callbacks: Vec<Arc<Mutex<Callbacks>>> =
        members.iter().map(|m| m.callbacks.clone()).collect();
    for m in members {
        m.thread.join().unwrap();
    }
    let lost: Vec<(usize, Vec<TopicPartition>)> = callbacks
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.lock().unwrap().lost.clone()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    assert_eq!(
        lost.iter().map(|(_, l)| l.len()).sum::<usize>(),
        0,
        "lost: {lost:?}"
    );
    let produced: i64 = ends.values().map(|(first, next)| next - first).sum();
    assert!(produced > 0, "nothing was produced");
    assert_eq!(unread(&seen, &ends), Vec::new());
    // Sticky: each first member kept two of its three partitions and was never handed
    // them again.
    for i in 0..2 {
        let kept: Vec<_> = before[i]
            .iter()
            .filter(|tp| after[i].contains(tp))
            .collect();
        assert_eq!(
            kept.len(),
            2,
            "member {i}: before {:?}, after {:?}",
            before[i],
            after[i]
        );
        let c = callbacks[i].lock().unwrap();
        for tp in kept {
            let times = c.assigned.iter().filter(|a| *a == tp).count();
            assert_eq!(times, 1, "member {i} was assigned {tp} {times} times");
        }
    }
    admin.close();
}
