//! Consumer groups against the real broker, beyond kring members among themselves
//! (`tests/group.rs`): a mixed group of kring members and the Java console consumer
//! (classic protocol, range and cooperative-sticky) splits a topic and reads every
//! record once; a static member restarted within its session gets its partitions back
//! without a rebalance; a member whose application stopped polling has its commit
//! refused with `Error::CommitFenced`; a pattern subscription picks up new matching
//! topics and new partitions; bad input is refused with a clear error; pause, resume,
//! seek, position, lag and committed per partition; `close()` leaves at once.
//!
//! Members run on threads of their own (as in `tests/group.rs`) and publish what they
//! see; the group's view comes from DescribeGroups through `kring::admin`. The Java
//! console consumer runs through `scripts/kafka run-class` and is killed when its test
//! ends.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{bootstrap, client, config, create_topic, unique};
use kring::admin::{Admin, GroupDescription};
use kring::client::block_on;
use kring::config::{ConfigurationError, OffsetReset};
use kring::consumer::{Message, Offset};
use kring::group::{GroupConsumer, OffsetAndMetadata, TopicPartition, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config, Error};

/// How long any one condition of these tests may take to come true.
const LIMIT: Duration = Duration::from_secs(90);

/// Produces `per_partition` records to each of `partitions`; values are "p/i".
fn produce(client: &Client, topic: &str, partitions: &[i32], per_partition: usize) {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..per_partition {
        for &p in partitions {
            let record = ProducerRecord::new(topic)
                .with_partition(p)
                .with_value(format!("{p}/{i}"));
            deliveries.push(producer.send_blocking(record).unwrap());
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
    c.group.assignment_strategies = vec![assignor.to_string()];
    c.group.heartbeat_interval = Duration::from_millis(300);
    c.group.session_timeout = Duration::from_secs(10);
    c.group.rebalance_timeout = Duration::from_secs(30);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.auto_commit_interval = Duration::from_millis(500);
    c
}

fn wait_for(what: &str, show: &dyn Fn() -> String, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    let deadline = start + LIMIT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            show()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("{what}: {:?}", start.elapsed());
}

/// The group as DescribeGroups shows it (`None` while the coordinator can't answer).
fn describe(admin: &Admin, group: &str) -> Option<GroupDescription> {
    block_on(admin.describe_group(group)).ok()
}

/// The committed offsets of a group: (topic, partition) → (offset, metadata).
fn committed_offsets(admin: &Admin, group: &str) -> BTreeMap<(String, i32), (i64, String)> {
    block_on(admin.list_group_offsets(group))
        .unwrap()
        .into_iter()
        .filter(|c| c.offset >= 0)
        .map(|c| {
            (
                (c.topic, c.partition),
                (c.offset, c.metadata.unwrap_or_default()),
            )
        })
        .collect()
}

fn tps(topic: &str, partitions: impl IntoIterator<Item = i32>) -> Vec<TopicPartition> {
    partitions
        .into_iter()
        .map(|p| TopicPartition::new(topic, p))
        .collect()
}

/// The next message, or `None` after `within` without one.
async fn next_within(
    gc: &mut GroupConsumer,
    client: &Client,
    within: Duration,
) -> Option<kring::Result<Message>> {
    let timer = client.sleep(within);
    tokio::select! {
        m = gc.next_message() => m,
        _ = timer => None,
    }
}

// ------------------------------------------------------------------ member threads

/// What a member thread publishes.
#[derive(Debug, Default)]
struct View {
    assignment: Vec<TopicPartition>,
    /// Every distinct (generation id, member id) the member had, in order.
    generations: Vec<(i32, String)>,
    /// (topic, partition, offset) → how many times it was read.
    seen: BTreeMap<(String, i32, i64), usize>,
    failure: Option<String>,
}

impl View {
    fn generation(&self) -> Option<(i32, String)> {
        self.generations.last().cloned()
    }
}

/// A kring member reading on a thread of its own until stopped, then closing.
struct Member {
    view: Arc<Mutex<View>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    fn spawn(config: Config, topics: Topics) -> Member {
        let view = Arc::new(Mutex::new(View::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, s) = (view.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let client = client(config);
            if let Err(e) = block_on(member_loop(&client, topics, &v, &s)) {
                v.lock().unwrap().failure = Some(e.to_string());
            }
            client.close();
        });
        Member {
            view,
            stop,
            thread: Some(thread),
        }
    }

    fn assignment(&self) -> Vec<TopicPartition> {
        self.view.lock().unwrap().assignment.clone()
    }

    fn generation(&self) -> Option<(i32, String)> {
        self.view.lock().unwrap().generation()
    }

    fn show(&self) -> String {
        let v = self.view.lock().unwrap();
        let assignment: Vec<String> = v.assignment.iter().map(|tp| tp.to_string()).collect();
        format!(
            "assignment {assignment:?}, generations {:?}, {} read, failure {:?}",
            v.generations,
            v.seen.len(),
            v.failure
        )
    }

    /// Stops the member (it closes its consumer: revoke, commit, leave) and waits.
    fn stop(mut self) -> Arc<Mutex<View>> {
        let start = Instant::now();
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        eprintln!("member stopped: {:?}", start.elapsed());
        let failure = self.view.lock().unwrap().failure.clone();
        assert_eq!(failure, None, "member failed");
        self.view.clone()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

async fn member_loop(
    client: &Client,
    topics: Topics,
    view: &Mutex<View>,
    stop: &AtomicBool,
) -> kring::Result<()> {
    let mut gc = GroupConsumer::subscribe(client.clone(), topics).await?;
    while !stop.load(Ordering::Acquire) {
        let next = next_within(&mut gc, client, Duration::from_millis(200)).await;
        let mut v = view.lock().unwrap();
        v.assignment = gc.assignment();
        if let Some(g) = gc.generation()
            && v.generation().as_ref() != Some(&g)
        {
            v.generations.push(g);
        }
        match next {
            Some(Ok(m)) => {
                *v.seen
                    .entry((m.topic.to_string(), m.partition, m.offset))
                    .or_default() += 1;
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    gc.close().await
}

// ------------------------------------------------------------------ the Java member

/// The Java console consumer as a member of a group; killed when dropped.
struct JavaMember {
    child: Child,
    /// (partition, offset) of every record it printed.
    read: Arc<Mutex<Vec<(i32, i64)>>>,
    /// Lines of stdout that are not records, and stderr.
    other: Arc<Mutex<Vec<String>>>,
}

impl JavaMember {
    fn spawn(topic: &str, group: &str, client_id: &str, assignor_class: &str) -> JavaMember {
        let mut command = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"));
        command
            .arg("run-class")
            .arg("org.apache.kafka.tools.consumer.ConsoleConsumer")
            .args(["--bootstrap-server", &bootstrap(), "--topic", topic])
            .args(["--group", group]);
        for property in [
            "group.protocol=classic".to_string(),
            format!("partition.assignment.strategy={assignor_class}"),
            format!("client.id={client_id}"),
            "auto.offset.reset=earliest".to_string(),
            "session.timeout.ms=10000".to_string(),
            "heartbeat.interval.ms=300".to_string(),
        ] {
            command.args([common::java_tools().consumer_property, &property]);
        }
        for property in ["print.partition=true", "print.offset=true"] {
            command.args([common::java_tools().formatter_property, property]);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("scripts/kafka run-class");
        let read = Arc::new(Mutex::new(Vec::new()));
        let other = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let (r, o) = (read.clone(), other.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match parse_console_line(&line) {
                    Some(record) => r.lock().unwrap().push(record),
                    None => o.lock().unwrap().push(line),
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let o = other.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            o.lock().unwrap().extend(text.lines().map(str::to_string));
        });
        JavaMember { child, read, other }
    }

    fn read(&self) -> Vec<(i32, i64)> {
        self.read.lock().unwrap().clone()
    }

    fn show(&self) -> String {
        let other = self.other.lock().unwrap();
        let tail: Vec<&String> = other.iter().rev().take(10).collect();
        format!("{} read; last other lines {tail:?}", self.read().len())
    }
}

impl Drop for JavaMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Partition:3\tOffset:17\t3/17` → (3, 17); the value must name the same partition.
fn parse_console_line(line: &str) -> Option<(i32, i64)> {
    let mut fields = line.split('\t');
    let partition: i32 = fields.next()?.strip_prefix("Partition:")?.parse().ok()?;
    let offset: i64 = fields.next()?.strip_prefix("Offset:")?.parse().ok()?;
    let value = fields.next()?;
    assert_eq!(
        value.split('/').next(),
        Some(partition.to_string().as_str()),
        "{line}"
    );
    Some((partition, offset))
}

// ------------------------------------------------------------------ 1. mixed group

/// Two kring members and one Java console consumer in one group on 12 partitions: the
/// group settles with 4 partitions each (the Java member among them, as DescribeGroups
/// shows), then 600 records are produced and read exactly once between them.
fn mixed_group(kring_assignor: &str, java_assignor: &str) {
    let admin = Admin::new(client(config()));
    let topic = unique(&format!("mixed-{kring_assignor}"));
    create_topic(admin.client(), &topic, 12, 1, &[]);
    let group = unique("mixed");
    let java_id = unique("java-member");
    let java = JavaMember::spawn(&topic, &group, &java_id, java_assignor);
    let members: Vec<Member> = (0..2)
        .map(|_| {
            Member::spawn(
                group_config(&group, kring_assignor),
                Topics::names([topic.clone()]),
            )
        })
        .collect();
    let show = || {
        format!(
            "java: {}; kring: {:?}; group: {:?}",
            java.show(),
            members.iter().map(Member::show).collect::<Vec<_>>(),
            describe(&admin, &group)
        )
    };
    wait_for(
        "the mixed group to settle, 4 partitions each",
        &show,
        || settled(&describe(&admin, &group), &members, &java_id),
    );
    let description = describe(&admin, &group).unwrap();
    assert_eq!(description.protocol, kring_assignor);
    let java_assignment: BTreeSet<i32> = description
        .members
        .iter()
        .find(|m| m.client_id == java_id)
        .unwrap()
        .assignment
        .iter()
        .map(|(_, p)| *p)
        .collect();
    assert_eq!(java_assignment.len(), 4, "{description:?}");

    produce(admin.client(), &topic, &(0..12).collect::<Vec<_>>(), 50);
    let total = || {
        java.read().len()
            + members
                .iter()
                .map(|m| m.view.lock().unwrap().seen.values().sum::<usize>())
                .sum::<usize>()
    };
    wait_for("600 records read between the members", &show, || {
        total() >= 600
    });

    let java_read = java.read();
    drop(java);
    let views: Vec<_> = members.into_iter().map(Member::stop).collect();
    let mut all: BTreeMap<(i32, i64), Vec<String>> = BTreeMap::new();
    for &(p, o) in &java_read {
        assert!(
            java_assignment.contains(&p),
            "the Java member read {p}, not one of its partitions {java_assignment:?}"
        );
        all.entry((p, o)).or_default().push("java".into());
    }
    for (i, view) in views.iter().enumerate() {
        for ((t, p, o), n) in &view.lock().unwrap().seen {
            assert_eq!(t, &topic);
            for _ in 0..*n {
                all.entry((*p, *o)).or_default().push(format!("kring {i}"));
            }
        }
    }
    let twice: Vec<_> = all.iter().filter(|(_, who)| who.len() > 1).collect();
    assert!(twice.is_empty(), "read more than once: {twice:?}");
    let expected: BTreeSet<(i32, i64)> =
        (0..12).flat_map(|p| (0..50).map(move |o| (p, o))).collect();
    assert_eq!(all.keys().copied().collect::<BTreeSet<_>>(), expected);
    assert_eq!(java_read.len(), 200, "the Java member's 4 partitions");
    admin.client().close();
}

/// Whether DescribeGroups shows the group stable with three members of 4 partitions
/// each covering all 12, one of them the Java member, and each kring member's own view
/// of its assignment agrees.
fn settled(description: &Option<GroupDescription>, members: &[Member], java_id: &str) -> bool {
    let Some(d) = description else { return false };
    if d.state != "Stable" || d.members.len() != 3 {
        return false;
    }
    let all: BTreeSet<i32> = d
        .members
        .iter()
        .flat_map(|m| m.assignment.iter().map(|(_, p)| *p))
        .collect();
    let java_in = d.members.iter().any(|m| m.client_id == java_id);
    let kring_agree = members.iter().all(|k| {
        let (Some((_, id)), assignment) = (k.generation(), k.assignment()) else {
            return false;
        };
        d.members.iter().any(|m| {
            m.member_id == id
                && m.assignment.len() == assignment.len()
                && assignment
                    .iter()
                    .all(|tp| m.assignment.contains(&(tp.topic.clone(), tp.partition)))
        })
    });
    java_in && all.len() == 12 && d.members.iter().all(|m| m.assignment.len() == 4) && kring_agree
}

#[test]
fn mixed_group_with_java_range() {
    mixed_group("range", "org.apache.kafka.clients.consumer.RangeAssignor");
}

#[test]
fn mixed_group_with_java_cooperative_sticky() {
    mixed_group(
        "cooperative-sticky",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    );
}

// ------------------------------------------------------------------ 2. static membership

/// A static member closed (no LeaveGroup) and started again with the same
/// `group.instance.id` within the session timeout gets its partitions back in the same
/// generation, and the other member's generation never moves.
#[test]
fn static_member_restarted_within_session_keeps_partitions_without_rebalance() {
    let admin = Admin::new(client(config()));
    let topic = unique("static");
    create_topic(admin.client(), &topic, 6, 1, &[]);
    let group = unique("static");
    let instance = unique("instance");
    let static_config = || {
        let mut c = group_config(&group, "range");
        c.group.group_instance_id = Some(instance.clone());
        c.group.session_timeout = Duration::from_secs(30);
        c
    };
    let a = Member::spawn(static_config(), Topics::names([topic.clone()]));
    let b = Member::spawn(
        group_config(&group, "range"),
        Topics::names([topic.clone()]),
    );
    let show = |a: &Member, b: &Member| {
        format!(
            "a: {}; b: {}; group {:?}",
            a.show(),
            b.show(),
            describe(&admin, &group)
        )
    };
    wait_for("3 partitions each", &|| show(&a, &b), || {
        a.assignment().len() == 3
            && b.assignment().len() == 3
            && a.generation().map(|g| g.0) == b.generation().map(|g| g.0)
    });
    let a_before = a.assignment();
    let (generation, a_member) = a.generation().unwrap();
    let b_before = b.generation().unwrap();
    // What b saw so far: one generation, or two when it joined before a did and the
    // group rebalanced once more for a (the two members start independently).
    let b_seen_before = b.view.lock().unwrap().generations.clone();
    assert_eq!(b_seen_before.last(), Some(&b_before));

    a.stop();
    // No LeaveGroup: the static member is still in the group, and nothing rebalanced.
    let d = describe(&admin, &group).unwrap();
    assert_eq!(d.state, "Stable", "{d:?}");
    assert_eq!(d.members.len(), 2, "{d:?}");
    assert!(
        d.members
            .iter()
            .any(|m| m.member_id == a_member && m.instance_id.as_deref() == Some(&instance)),
        "{d:?}"
    );

    let a = Member::spawn(static_config(), Topics::names([topic.clone()]));
    wait_for(
        "the static member back with partitions",
        &|| show(&a, &b),
        || !a.assignment().is_empty(),
    );
    assert_eq!(a.assignment(), a_before, "the same partitions back");
    let (a_generation, a_new_member) = a.generation().unwrap();
    assert_eq!(a_generation, generation, "no new generation");
    assert_ne!(
        a_new_member, a_member,
        "the broker gave the instance a new member id"
    );
    assert_eq!(
        b.view.lock().unwrap().generations,
        b_seen_before,
        "the other member saw no rebalance"
    );
    let d = describe(&admin, &group).unwrap();
    assert_eq!(d.state, "Stable", "{d:?}");
    let ids: BTreeSet<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(
        ids,
        BTreeSet::from([a_new_member.as_str(), b_before.1.as_str()]),
        "{d:?}"
    );
    a.stop();
    b.stop();
    admin.client().close();
}

// ------------------------------------------------------------------ 3. fenced commits

/// A member whose application stops polling past `max.poll.interval.ms` is out of the
/// group; the other member takes every partition in a new generation; the first
/// member's commit then fails with `Error::CommitFenced` and nothing of it lands. When
/// its application comes back it joins again and commits with the new generation.
#[test]
fn commit_after_the_member_was_put_out_is_fenced() {
    let admin = Admin::new(client(config()));
    let topic = unique("fenced");
    create_topic(admin.client(), &topic, 4, 1, &[]);
    produce(admin.client(), &topic, &[0, 1, 2, 3], 20);
    let group = unique("fenced");
    let mut a_config = group_config(&group, "range");
    a_config.consumer.enable_auto_commit = false;
    a_config.group.rebalance_timeout = Duration::from_secs(3);
    let a_client = client(a_config);
    let mut gc = block_on(GroupConsumer::subscribe(
        a_client.clone(),
        Topics::names([topic.clone()]),
    ))
    .unwrap();
    let mut read = 0;
    while read < 10 {
        if let Some(m) = block_on(next_within(&mut gc, &a_client, Duration::from_millis(200))) {
            m.unwrap();
            read += 1;
        }
    }
    assert_eq!(gc.assignment().len(), 4);
    let (old_generation, _) = gc.generation().unwrap();

    // The application stops polling; another member joins.
    let mut b_config = group_config(&group, "range");
    b_config.consumer.enable_auto_commit = false;
    let b = Member::spawn(b_config, Topics::names([topic.clone()]));
    wait_for(
        "the other member alone in the group with every partition",
        &|| format!("b: {}; group {:?}", b.show(), describe(&admin, &group)),
        || {
            let alone = describe(&admin, &group).is_some_and(|d| {
                d.state == "Stable"
                    && d.members.len() == 1
                    && b.generation()
                        .is_some_and(|(_, id)| d.members[0].member_id == id)
            });
            alone && b.assignment().len() == 4
        },
    );
    assert!(b.generation().unwrap().0 > old_generation);

    let refused = block_on(gc.commit());
    assert!(
        matches!(&refused, Err(Error::CommitFenced { group: g, .. }) if g == &group),
        "{refused:?}"
    );
    let manual = block_on(gc.commit_offsets(&[(
        TopicPartition::new(&topic, 0),
        OffsetAndMetadata {
            offset: 1,
            metadata: "stale".into(),
            leader_epoch: None,
        },
    )]));
    assert!(
        matches!(&manual, Err(Error::CommitFenced { .. })),
        "{manual:?}"
    );
    assert_eq!(committed_offsets(&admin, &group), BTreeMap::new());

    // Back: the member rejoins, gets a share in a newer generation, and commits.
    let deadline = Instant::now() + LIMIT;
    while !(gc.assignment().len() == 2 && b.assignment().len() == 2) {
        assert!(
            Instant::now() < deadline,
            "the first member not back: a {:?}; b: {}",
            gc.assignment(),
            b.show()
        );
        if let Some(Err(e)) = block_on(next_within(&mut gc, &a_client, Duration::from_millis(200)))
        {
            panic!("{e}");
        }
    }
    let (new_generation, _) = gc.generation().unwrap();
    assert!(new_generation > old_generation);
    let tp = gc.assignment()[0].clone();
    block_on(gc.commit_offsets(&[(
        tp.clone(),
        OffsetAndMetadata {
            offset: 5,
            metadata: "fresh".into(),
            leader_epoch: None,
        },
    )]))
    .unwrap();
    assert_eq!(
        committed_offsets(&admin, &group).get(&(tp.topic.clone(), tp.partition)),
        Some(&(5, "fresh".to_string()))
    );
    block_on(gc.close()).unwrap();
    b.stop();
    a_client.close();
    admin.client().close();
}

// ------------------------------------------------------------------ 4. pattern subscription

/// `Topics::pattern`: a topic created later that matches is assigned after a metadata
/// refresh (one that does not match is not), and so is a partition added to a
/// subscribed topic.
#[test]
fn pattern_subscription_picks_up_new_topics_and_partitions() {
    let admin = Admin::new(client(config()));
    let prefix = unique("pattern");
    let first = format!("{prefix}-a");
    create_topic(admin.client(), &first, 2, 1, &[]);
    let group = unique("pattern");
    let mut c = group_config(&group, "range");
    c.metadata.refresh_interval = Duration::from_millis(500);
    let member = Member::spawn(c, Topics::pattern(&format!("{prefix}-.*")).unwrap());
    let show = || member.show();
    wait_for("the matching topic assigned", &show, || {
        member.assignment() == tps(&first, 0..2)
    });

    let second = format!("{prefix}-b");
    let other = format!("{prefix}x-c");
    create_topic(admin.client(), &other, 1, 1, &[]);
    create_topic(admin.client(), &second, 2, 1, &[]);
    let both: Vec<TopicPartition> = tps(&first, 0..2)
        .into_iter()
        .chain(tps(&second, 0..2))
        .collect();
    wait_for("the new matching topic assigned", &show, || {
        member.assignment() == both
    });
    produce(admin.client(), &second, &[1], 3);
    wait_for("records of the new topic read", &show, || {
        (0..3).all(|o| {
            member
                .view
                .lock()
                .unwrap()
                .seen
                .contains_key(&(second.clone(), 1, o))
        })
    });

    block_on(admin.create_partitions(&first, 4, false)).unwrap();
    let grown: Vec<TopicPartition> = tps(&first, 0..4)
        .into_iter()
        .chain(tps(&second, 0..2))
        .collect();
    wait_for("the added partitions assigned", &show, || {
        member.assignment() == grown
    });
    let view = member.stop();
    assert!(
        !view
            .lock()
            .unwrap()
            .seen
            .keys()
            .any(|(t, _, _)| t == &other),
        "read a topic the pattern does not match"
    );
    admin.client().close();
}

// ------------------------------------------------------------------ 5. bad input

fn inconsistent_field(result: kring::Result<Client>) -> (&'static str, String) {
    match result {
        Err(Error::Configuration(ConfigurationError::Inconsistent { field, reason })) => {
            (field, reason)
        }
        other => panic!("expected an inconsistent configuration, got {other:?}"),
    }
}

/// Each bad setting or argument is refused with an error that names it.
#[test]
fn bad_group_input_is_refused_clearly() {
    // An empty group id.
    let mut c = group_config("g", "range");
    c.group.group_id = Some(String::new());
    let (field, reason) = inconsistent_field(Client::connect_blocking(c));
    assert_eq!(field, "group.group_id");
    assert!(reason.contains("empty"), "{reason}");

    // An unknown assignor name, as a field and as a Java property.
    let mut c = group_config("g", "fair");
    let (field, reason) = inconsistent_field(Client::connect_blocking(c.clone()));
    assert_eq!(field, "group.assignment_strategies");
    assert!(reason.contains("\"fair\""), "{reason}");
    let bad_class = c.set("partition.assignment.strategy", "org.example.FairAssignor");
    c.group.assignment_strategies = vec!["range".into()];
    match bad_class {
        Err(e) => assert!(e.to_string().contains("FairAssignor"), "{e}"),
        Ok(()) => {
            let (field, reason) = inconsistent_field(Client::connect_blocking(c.clone()));
            assert_eq!(field, "group.assignment_strategies");
            assert!(reason.contains("FairAssignor"), "{reason}");
        }
    }

    // A pattern that does not compile.
    match Topics::pattern("orders-(") {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("orders-(") && m.contains("does not compile"),
                "{m}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }

    // A group consumer without group.id (also when the property is given empty).
    let no_group = client(config());
    match block_on(GroupConsumer::subscribe(
        no_group.clone(),
        Topics::names(["t"]),
    )) {
        Err(Error::Configuration(ConfigurationError::Inconsistent { field, reason })) => {
            assert_eq!(field, "group.group_id");
            assert!(reason.contains("group.id"), "{reason}");
        }
        other => panic!("expected a missing group.id, got {other:?}"),
    }
    no_group.close();
    let mut c = config();
    c.set("group.id", "").unwrap();
    let empty_property = client(c);
    assert!(matches!(
        block_on(GroupConsumer::subscribe(
            empty_property.clone(),
            Topics::names(["t"])
        )),
        Err(Error::Configuration(ConfigurationError::Inconsistent {
            field: "group.group_id",
            ..
        }))
    ));
    empty_property.close();

    // No topics, or an empty topic name.
    let gc_client = client(group_config(&unique("bad"), "range"));
    for topics in [Topics::names(Vec::<String>::new()), Topics::names([""])] {
        match block_on(GroupConsumer::subscribe(gc_client.clone(), topics)) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("topic"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    gc_client.close();
}

/// Asking a member about, or committing for, a partition it is not assigned is
/// `Error::NotAssigned`, and nothing is committed.
#[test]
fn operations_on_partitions_not_assigned_are_refused() {
    let admin = Admin::new(client(config()));
    let topic = unique("unassigned");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    let group = unique("unassigned");
    let c = client(group_config(&group, "range"));
    let mut gc = block_on(GroupConsumer::subscribe(
        c.clone(),
        Topics::names([topic.clone()]),
    ))
    .unwrap();
    let deadline = Instant::now() + LIMIT;
    while gc.assignment().len() != 2 {
        assert!(Instant::now() < deadline, "never assigned");
        if let Some(Err(e)) = block_on(next_within(&mut gc, &c, Duration::from_millis(200))) {
            panic!("{e}");
        }
    }
    let not_assigned = |r: kring::Result<()>, partition: i32| match r {
        Err(Error::NotAssigned {
            topic: t,
            partition: p,
        }) => {
            assert_eq!((t.as_str(), p), (topic.as_str(), partition))
        }
        other => panic!("expected NotAssigned, got {other:?}"),
    };
    let other_topic = unique("elsewhere");
    let commit = block_on(gc.commit_offsets(&[
        (
            TopicPartition::new(&topic, 0),
            OffsetAndMetadata {
                offset: 0,
                metadata: String::new(),
                leader_epoch: None,
            },
        ),
        (
            TopicPartition::new(&topic, 7),
            OffsetAndMetadata {
                offset: 1,
                metadata: String::new(),
                leader_epoch: None,
            },
        ),
    ]));
    not_assigned(commit, 7);
    match block_on(gc.commit_offsets(&[(
        TopicPartition::new(&other_topic, 0),
        OffsetAndMetadata {
            offset: 1,
            metadata: String::new(),
            leader_epoch: None,
        },
    )])) {
        Err(Error::NotAssigned { topic: t, .. }) => assert_eq!(t, other_topic),
        other => panic!("expected NotAssigned, got {other:?}"),
    }
    not_assigned(gc.position(&topic, 2).map(drop), 2);
    not_assigned(gc.lag(&topic, 2).map(drop), 2);
    not_assigned(gc.committed(&topic, 2).map(drop), 2);
    not_assigned(gc.pause(&topic, 2), 2);
    not_assigned(gc.resume(&topic, 2), 2);
    not_assigned(block_on(gc.seek(&topic, -1, Offset::Oldest)), -1);
    let negative = block_on(gc.commit_offsets(&[(
        TopicPartition::new(&topic, 0),
        OffsetAndMetadata {
            offset: -5,
            metadata: String::new(),
            leader_epoch: None,
        },
    )]));
    assert!(
        matches!(&negative, Err(Error::InvalidArgument(m)) if m.contains("-5")),
        "{negative:?}"
    );
    assert_eq!(
        committed_offsets(&admin, &group),
        BTreeMap::new(),
        "nothing committed"
    );
    block_on(gc.close()).unwrap();
    c.close();
    admin.client().close();
}

// ------------------------------------------------------------------ 6. per partition, close

/// Reads messages until `done` says so, collecting (partition, offset).
fn read_until(
    gc: &mut GroupConsumer,
    client: &Client,
    what: &str,
    mut done: impl FnMut(&[(i32, i64)]) -> bool,
) -> Vec<(i32, i64)> {
    let mut read = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while !done(&read) {
        assert!(Instant::now() < deadline, "{what}: read {read:?}");
        match block_on(next_within(gc, client, Duration::from_millis(200))) {
            Some(Ok(m)) => read.push((m.partition, m.offset)),
            Some(Err(e)) => panic!("{what}: {e}"),
            None => {}
        }
    }
    read
}

fn offsets_of(read: &[(i32, i64)], partition: i32) -> Vec<i64> {
    read.iter()
        .filter(|(p, _)| *p == partition)
        .map(|(_, o)| *o)
        .collect()
}

/// position, lag and committed per partition; commit and commit_offsets; pause holds a
/// partition back while the other goes on, resume lets it go on from where it was;
/// seek moves a position; and close() leaves at once: DescribeGroups shows the other
/// member alone as soon as it returns, and that member gets every partition.
#[test]
fn per_partition_controls_and_prompt_close() {
    let admin = Admin::new(client(config()));
    let topic = unique("controls");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    produce(admin.client(), &topic, &[0, 1], 10);
    let group = unique("controls");
    let mut a_config = group_config(&group, "range");
    a_config.consumer.enable_auto_commit = false;
    // Far longer than the test: only a LeaveGroup can move partitions quickly.
    a_config.group.session_timeout = Duration::from_secs(120);
    let c = client(a_config);
    let mut gc = block_on(GroupConsumer::subscribe(
        c.clone(),
        Topics::names([topic.clone()]),
    ))
    .unwrap();

    let read = read_until(&mut gc, &c, "the first 20 records", |r| r.len() == 20);
    assert_eq!(offsets_of(&read, 0), (0..10).collect::<Vec<_>>());
    assert_eq!(offsets_of(&read, 1), (0..10).collect::<Vec<_>>());
    for p in 0..2 {
        assert_eq!(gc.position(&topic, p).unwrap(), 10);
        assert_eq!(gc.lag(&topic, p).unwrap(), 0);
        assert_eq!(gc.committed(&topic, p).unwrap(), None);
    }

    block_on(gc.commit()).unwrap();
    for p in 0..2 {
        assert_eq!(gc.committed(&topic, p).unwrap(), Some(10));
    }
    block_on(gc.commit_offsets(&[(
        TopicPartition::new(&topic, 0),
        OffsetAndMetadata {
            offset: 7,
            metadata: "manual".into(),
            leader_epoch: None,
        },
    )]))
    .unwrap();
    assert_eq!(gc.committed(&topic, 0).unwrap(), Some(7));
    let committed = committed_offsets(&admin, &group);
    assert_eq!(
        committed.get(&(topic.clone(), 0)),
        Some(&(7, "manual".to_string()))
    );
    assert_eq!(committed.get(&(topic.clone(), 1)).map(|c| c.0), Some(10));

    // Pause partition 0: partition 1 goes on, 0 stays where it was.
    gc.pause(&topic, 0).unwrap();
    produce(admin.client(), &topic, &[1], 10);
    let read = read_until(&mut gc, &c, "partition 1 while 0 is paused", |r| {
        r.len() == 10
    });
    assert_eq!(offsets_of(&read, 1), (10..20).collect::<Vec<_>>());
    produce(admin.client(), &topic, &[0, 1], 10);
    let read = read_until(&mut gc, &c, "more of partition 1 while 0 is paused", |r| {
        offsets_of(r, 1).len() == 10
    });
    assert_eq!(
        offsets_of(&read, 0),
        Vec::<i64>::new(),
        "read a paused partition"
    );
    assert_eq!(offsets_of(&read, 1), (20..30).collect::<Vec<_>>());
    assert_eq!(gc.position(&topic, 0).unwrap(), 10);
    assert_eq!(gc.position(&topic, 1).unwrap(), 30);

    // Resume: partition 0 goes on from offset 10.
    gc.resume(&topic, 0).unwrap();
    let read = read_until(&mut gc, &c, "partition 0 after resume", |r| r.len() == 10);
    assert_eq!(offsets_of(&read, 0), (10..20).collect::<Vec<_>>());
    assert_eq!(gc.lag(&topic, 0).unwrap(), 0);

    // Seek partition 1 back to 3: the next record is offset 3, then the lag shows the rest.
    block_on(gc.seek(&topic, 1, Offset::Exact(3))).unwrap();
    assert_eq!(gc.position(&topic, 1).unwrap(), 3);
    let read = read_until(&mut gc, &c, "partition 1 after seek", |r| !r.is_empty());
    assert_eq!(read, vec![(1, 3)]);
    assert_eq!(gc.position(&topic, 1).unwrap(), 4);
    assert_eq!(gc.lag(&topic, 1).unwrap(), 26);
    block_on(gc.commit()).unwrap();
    assert_eq!(
        gc.committed(&topic, 1).unwrap(),
        Some(4),
        "a seek is consumed-up-to"
    );

    // Another member joins; the first one reads on until they share the topic.
    let b = Member::spawn(
        group_config(&group, "range"),
        Topics::names([topic.clone()]),
    );
    let deadline = Instant::now() + LIMIT;
    while !(gc.assignment().len() == 1 && b.assignment().len() == 1) {
        assert!(
            Instant::now() < deadline,
            "never shared: a {:?}, b {}",
            gc.assignment(),
            b.show()
        );
        if let Some(Err(e)) = block_on(next_within(&mut gc, &c, Duration::from_millis(200))) {
            panic!("{e}");
        }
    }
    let (_, b_member) = b.generation().unwrap();
    block_on(gc.close()).unwrap();
    let d = describe(&admin, &group).unwrap();
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(
        ids,
        vec![b_member.as_str()],
        "the closed member left: {d:?}"
    );
    wait_for(
        "the remaining member with both partitions",
        &|| b.show(),
        || b.assignment().len() == 2,
    );
    b.stop();
    c.close();
    admin.client().close();
}

// ------------------------------------------------------------------ cancelled calls

/// An application that cuts every call short (a `select!` with a 100 ms timer) while
/// the commit on revoke waits behind a fetch's long poll on the same connection (3 s):
/// the rebalance must still complete, each call taking the commit further instead of
/// starting it again.
#[test]
fn rebalance_completes_when_every_call_is_cut_short() {
    let admin = Admin::new(client(config()));
    let topic = unique("cut-short");
    create_topic(admin.client(), &topic, 2, 1, &[]);
    produce(admin.client(), &topic, &[0, 1], 5);
    let group = unique("cut-short");
    let mut a_config = group_config(&group, "range");
    a_config.consumer.fetch_max_wait = Duration::from_secs(3);
    let c = client(a_config);
    let mut gc = block_on(GroupConsumer::subscribe(
        c.clone(),
        Topics::names([topic.clone()]),
    ))
    .unwrap();
    let cut = Duration::from_millis(100);
    let mut read = 0;
    let deadline = Instant::now() + LIMIT;
    while read < 10 {
        assert!(Instant::now() < deadline, "read {read} of 10");
        if let Some(m) = block_on(next_within(&mut gc, &c, cut)) {
            m.unwrap();
            read += 1;
        }
    }
    let b = Member::spawn(
        group_config(&group, "range"),
        Topics::names([topic.clone()]),
    );
    let deadline = Instant::now() + LIMIT;
    while !(gc.assignment().len() == 1 && b.assignment().len() == 1) {
        assert!(
            Instant::now() < deadline,
            "the rebalance never completed: a {:?}, b {}, group {:?}",
            gc.assignment(),
            b.show(),
            describe(&admin, &group)
        );
        if let Some(Err(e)) = block_on(next_within(&mut gc, &c, cut)) {
            panic!("{e}");
        }
    }
    let committed = committed_offsets(&admin, &group);
    assert_eq!(
        committed.values().map(|(o, _)| *o).collect::<Vec<_>>(),
        vec![5, 5],
        "the commit on revoke landed"
    );
    block_on(gc.close()).unwrap();
    b.stop();
    c.close();
    admin.client().close();
}
