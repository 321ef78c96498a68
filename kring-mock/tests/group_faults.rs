//! Group faults on demand in the FakeCluster, against kring's public `GroupConsumer`,
//! for both `group.protocol=classic` and `consumer` (KIP-848): the coordinator moves,
//! REBALANCE_IN_PROGRESS on a heartbeat or a commit, a member fenced by the
//! coordinator, FENCED_INSTANCE_ID. After each fault the consumer recovers and reads
//! every record, or fails naming why. Assertions are on what the cluster saw (requests,
//! commits with which generation or epoch), never on timing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kring::config::{GroupProtocol, OffsetReset};
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::protocol::{ApiKey, KafkaCode, RequestKind};
use kring::{Client, Config, Error};
use kring_mock::{FakeCluster, ReceivedRequest};

const TOPIC: &str = "t";
const PARTITIONS: i32 = 4;
/// How many reads that found nothing (each waits [`STEP`]) a test sits through while
/// waiting for something before it gives up: a guard against hanging, not a timing
/// assertion. Reads that return a record do not count: a wait that has many records to
/// read (everything again after a lost assignment) must not run out of patience while
/// records still flow.
const PATIENCE: usize = 60;
/// Reads that return a record, at most, in one wait (a guard against a consumer that
/// hands out records forever without reaching what the test waits for).
const MAX_READS: usize = 10_000;
/// How long one read waits for a record.
const STEP: Duration = Duration::from_secs(1);

/// Counts a wait's reads; gives up after [`PATIENCE`] reads that found nothing or
/// [`MAX_READS`] that found something.
#[derive(Debug, Default)]
struct Patience {
    empty: usize,
    records: usize,
}

impl Patience {
    /// Notes one read (`got`: it returned a record).
    fn note(&mut self, got: bool) {
        if got {
            self.records += 1;
        } else {
            self.empty += 1;
        }
    }
    fn left(&self) -> bool {
        self.empty < PATIENCE && self.records < MAX_READS
    }
}

fn cluster() -> FakeCluster {
    FakeCluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .consumer_heartbeat_interval(Duration::from_millis(100))
        .history_limit(1_000_000)
        .build()
        .unwrap()
}

/// Appends `n` records to every partition; values are "p/i" from `from` on.
fn fill(cluster: &FakeCluster, from: usize, n: usize) {
    for p in 0..PARTITIONS {
        let values: Vec<String> = (from..from + n).map(|i| format!("{p}/{i}")).collect();
        let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
        cluster.append_records(TOPIC, p, 1_000, &records).unwrap();
    }
}

fn config(cluster: &FakeCluster, group: &str, protocol: GroupProtocol) -> Config {
    let mut c = Config::new(cluster.bootstrap());
    c.group.group_id = Some(group.to_string());
    c.group.protocol = protocol;
    if protocol == GroupProtocol::Classic {
        // KIP-848 members take both from the coordinator (100 ms here, see above).
        c.group.heartbeat_interval = Duration::from_millis(100);
        c.group.session_timeout = Duration::from_secs(10);
    }
    c.group.rebalance_timeout = Duration::from_secs(10);
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    // Auto-commit only on revoke and close: every commit in a test is one it chose.
    c.consumer.enable_auto_commit = true;
    c.consumer.auto_commit_interval = Duration::from_secs(3600);
    c
}

/// What the listener saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    fn events(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
    fn lost(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Seen::Lost(_)))
            .count()
    }
    fn assigned(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Seen::Assigned(_)))
            .count()
    }
}

impl RebalanceListener for Recorder {
    fn on_assigned<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.0
            .lock()
            .unwrap()
            .push(Seen::Assigned(partitions.to_vec()));
        Box::pin(async {})
    }
    fn on_revoked<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.0
            .lock()
            .unwrap()
            .push(Seen::Revoked(partitions.to_vec()));
        Box::pin(async {})
    }
    fn on_lost<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.0.lock().unwrap().push(Seen::Lost(partitions.to_vec()));
        Box::pin(async {})
    }
}

/// One member under test, driven on the test's thread.
struct Member {
    client: Client,
    gc: GroupConsumer,
    /// (partition, offset) → value, of every record read.
    read: BTreeMap<(i32, i64), String>,
    /// Records read again, and reads that found nothing (diagnostics).
    again: usize,
    nothing: usize,
}

impl Member {
    fn start(config: Config, listener: Recorder) -> Member {
        let client = Client::connect_blocking(config).unwrap();
        let gc = kring::client::block_on(GroupConsumer::with_listener(
            client.clone(),
            Topics::names([TOPIC]),
            Box::new(listener),
        ))
        .unwrap();
        Member {
            client,
            gc,
            read: BTreeMap::new(),
            again: 0,
            nothing: 0,
        }
    }

    /// Reads for at most [`STEP`]: a record (`true`), nothing (`false`), or an error.
    fn step(&mut self) -> kring::Result<bool> {
        let timer = self.client.sleep(STEP);
        let gc = &mut self.gc;
        let next = kring::client::block_on(async {
            tokio::select! {
                m = gc.next_message() => m,
                _ = timer => None,
            }
        });
        match next {
            Some(Ok(m)) => {
                if self.read.contains_key(&(m.partition, m.offset)) {
                    self.again += 1;
                }
                let value = String::from_utf8_lossy(m.value.as_deref().unwrap_or_default());
                self.read
                    .insert((m.partition, m.offset), value.into_owned());
                Ok(true)
            }
            Some(Err(e)) => Err(e),
            None => {
                self.nothing += 1;
                Ok(false)
            }
        }
    }

    /// Reads until a read fails, and returns its error (panics when [`Patience`] runs
    /// out first, naming `what` was waited for).
    fn first_error(&mut self, what: &str) -> Error {
        let mut patience = Patience::default();
        loop {
            assert!(patience.left(), "{what} was never reported");
            match self.step() {
                Ok(got) => patience.note(got),
                Err(e) => return e,
            }
        }
    }

    /// Reads until `done` holds (panics on an error, or when [`Patience`] runs out).
    fn read_until(&mut self, what: &str, mut done: impl FnMut(&Member) -> bool) {
        let mut patience = Patience::default();
        while patience.left() {
            if done(self) {
                return;
            }
            match self.step() {
                Ok(got) => patience.note(got),
                Err(e) => panic!("member failed while waiting for {what}: {e}"),
            }
        }
        let per: Vec<String> = (0..PARTITIONS)
            .map(|p| {
                let n = self.read.keys().filter(|(q, _)| *q == p).count();
                let pos = self
                    .gc
                    .position(TOPIC, p)
                    .map_or_else(|e| e.to_string(), |o| o.to_string());
                format!("p{p}: {n} read, position {pos}")
            })
            .collect();
        panic!(
            "gave up waiting for {what} ({patience:?} in this wait): read {} records, {} again, {} empty reads ({}), assigned {:?}",
            self.read.len(),
            self.again,
            self.nothing,
            per.join("; "),
            self.gc.assignment()
        );
    }

    /// Reads until every record `fill` wrote in `0..n` per partition was read.
    fn read_all(&mut self, n: usize) {
        self.read_until(&format!("{n} records per partition"), |m| {
            (0..PARTITIONS).all(|p| (0..n as i64).all(|o| m.read.contains_key(&(p, o))))
        });
        for ((p, o), v) in &self.read {
            assert_eq!(v, &format!("{p}/{o}"), "partition {p} offset {o}");
        }
    }

    fn commit(&mut self) -> kring::Result<()> {
        kring::client::block_on(self.gc.commit())
    }

    fn close(self) {
        kring::client::block_on(self.gc.close()).unwrap();
        self.client.close();
    }
}

/// The harness itself: one wait that reads many more records than [`PATIENCE`] (as the
/// fenced-member tests do, reading everything again after the loss) still reads them
/// all. When every read counted against the patience, such a wait gave up with records
/// left past a partition's position, which looked like a stalled partition.
#[test]
fn a_wait_reads_more_records_than_its_patience() {
    let cluster = cluster();
    let per_partition = PATIENCE;
    fill(&cluster, 0, per_partition);
    let mut m = Member::start(
        config(&cluster, "many-records", GroupProtocol::Classic),
        Recorder::default(),
    );
    m.read_all(per_partition);
    assert_eq!(m.read.len(), PARTITIONS as usize * per_partition);
    m.close();
}

/// The group requests the cluster received, in order, as (index, request).
fn requests(cluster: &FakeCluster, api: ApiKey) -> Vec<(usize, ReceivedRequest)> {
    cluster
        .history()
        .into_iter()
        .enumerate()
        .filter(|(_, r)| r.api_key == api)
        .collect()
}

/// Every OffsetCommit the cluster received: (generation or member epoch, member id,
/// partitions).
fn commits(cluster: &FakeCluster) -> Vec<(i32, String, Vec<i32>)> {
    requests(cluster, ApiKey::OffsetCommit)
        .into_iter()
        .filter_map(|(_, r)| match r.request {
            RequestKind::OffsetCommit(c) => Some((
                c.generation_id_or_member_epoch,
                c.member_id.clone(),
                c.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

fn all_partitions() -> BTreeSet<TopicPartition> {
    (0..PARTITIONS)
        .map(|p| TopicPartition::new(TOPIC, p))
        .collect()
}

fn owns_all(m: &Member) -> bool {
    m.gc.assignment().into_iter().collect::<BTreeSet<_>>() == all_partitions()
}

fn group_api(protocol: GroupProtocol) -> ApiKey {
    match protocol {
        GroupProtocol::Classic => ApiKey::Heartbeat,
        _ => ApiKey::ConsumerGroupHeartbeat,
    }
}

fn coordinator_moved(protocol: GroupProtocol, group: &str) {
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut m = Member::start(config(&cluster, group, protocol), Recorder::default());
    m.read_all(10);
    let old = cluster.coordinator(group).unwrap();
    let new = cluster.move_coordinator(group).unwrap();
    assert_ne!(old, new);
    let before: Vec<String> = cluster
        .history()
        .iter()
        .filter(|r| r.api_key != ApiKey::Fetch)
        .map(|r| r.describe())
        .collect();
    eprintln!("BEFORE {:?}", &before[before.len().saturating_sub(8)..]);
    cluster.clear_history();
    let moved_at = 0;
    fill(&cluster, 10, 10);
    m.read_all(20);
    for r in cluster
        .history()
        .iter()
        .skip(moved_at)
        .filter(|r| r.api_key != ApiKey::Fetch)
        .take(40)
    {
        eprintln!("{} {}", r.broker_id, r.describe());
    }
    // The member found the new coordinator and heartbeats there.
    m.read_until("a heartbeat at the new coordinator", |_| {
        requests(&cluster, group_api(protocol))
            .iter()
            .any(|(i, r)| *i >= moved_at && r.broker_id == new)
    });
    assert!(
        requests(&cluster, ApiKey::FindCoordinator)
            .iter()
            .any(|(i, _)| *i >= moved_at),
        "no FindCoordinator after the move"
    );
    m.read_until("every partition assigned", owns_all);
    m.commit().unwrap();
    for p in 0..PARTITIONS {
        assert_eq!(
            cluster.committed(group, TOPIC, p),
            Some(20),
            "partition {p}"
        );
    }
    let last = requests(&cluster, ApiKey::OffsetCommit).pop().unwrap();
    assert_eq!(
        last.1.broker_id, new,
        "the commit went to the new coordinator"
    );
    m.close();
    assert!(cluster.failures().is_empty(), "{:?}", cluster.failures());
}

#[test]
fn classic_member_follows_a_moved_coordinator() {
    coordinator_moved(GroupProtocol::Classic, "moved-classic");
}

#[test]
fn kip848_member_follows_a_moved_coordinator() {
    coordinator_moved(GroupProtocol::Consumer, "moved-848");
}

#[test]
fn classic_rebalance_in_progress_on_heartbeat_rejoins() {
    let group = "rip-heartbeat";
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut m = Member::start(
        config(&cluster, group, GroupProtocol::Classic),
        Recorder::default(),
    );
    m.read_all(10);
    let generation = cluster.group_generation(group).unwrap();
    cluster.fail_next(group, ApiKey::Heartbeat, KafkaCode::REBALANCE_IN_PROGRESS);
    m.read_until("a new generation", |_| {
        cluster.group_generation(group) > Some(generation)
    });
    m.read_until("every partition assigned", owns_all);
    fill(&cluster, 10, 10);
    m.read_all(20);
    m.close();
    // The close committed with the new generation, from the positions read.
    let (gen_, _, _) = commits(&cluster).pop().unwrap();
    assert!(gen_ > generation, "commit with generation {gen_}");
    for p in 0..PARTITIONS {
        assert_eq!(cluster.committed(group, TOPIC, p), Some(20));
    }
}

#[test]
fn classic_rebalance_in_progress_on_commit_is_commit_fenced_then_rejoins() {
    let group = "rip-commit";
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut m = Member::start(
        config(&cluster, group, GroupProtocol::Classic),
        Recorder::default(),
    );
    m.read_all(10);
    let generation = cluster.group_generation(group).unwrap();
    let joins_before = requests(&cluster, ApiKey::JoinGroup).len();
    cluster.fail_next(
        group,
        ApiKey::OffsetCommit,
        KafkaCode::REBALANCE_IN_PROGRESS,
    );
    match m.commit() {
        Err(Error::CommitFenced { group: g, code }) => {
            assert_eq!(g, group);
            assert_eq!(code, KafkaCode::REBALANCE_IN_PROGRESS);
        }
        other => panic!("expected CommitFenced, got {other:?}"),
    }
    m.read_until("a rejoin", |_| {
        requests(&cluster, ApiKey::JoinGroup).len() > joins_before
            && cluster.group_generation(group) > Some(generation)
    });
    m.read_until("every partition assigned", owns_all);
    fill(&cluster, 10, 10);
    m.read_all(20);
    m.commit().unwrap();
    let (gen_, _, _) = commits(&cluster).pop().unwrap();
    assert_eq!(Some(gen_), cluster.group_generation(group));
    for p in 0..PARTITIONS {
        assert_eq!(cluster.committed(group, TOPIC, p), Some(20));
    }
    m.close();
}

#[test]
fn kip848_stale_member_epoch_on_commit_is_commit_fenced_then_goes_on() {
    let group = "stale-commit";
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut m = Member::start(
        config(&cluster, group, GroupProtocol::Consumer),
        Recorder::default(),
    );
    m.read_all(10);
    cluster.fail_next(group, ApiKey::OffsetCommit, KafkaCode::STALE_MEMBER_EPOCH);
    match m.commit() {
        Err(Error::CommitFenced { code, .. }) => assert_eq!(code, KafkaCode::STALE_MEMBER_EPOCH),
        other => panic!("expected CommitFenced, got {other:?}"),
    }
    fill(&cluster, 10, 10);
    m.read_all(20);
    m.commit().unwrap();
    let (epoch, member, _) = commits(&cluster).pop().unwrap();
    assert!(
        cluster
            .consumer_group_members(group)
            .contains(&(member, epoch)),
        "the commit carries the member's current epoch"
    );
    for p in 0..PARTITIONS {
        assert_eq!(cluster.committed(group, TOPIC, p), Some(20));
    }
    m.close();
}

/// A fenced member: `on_lost` runs, nothing is committed for the lost partitions with
/// the old generation (or epoch), the member joins again and reads on.
fn fenced(protocol: GroupProtocol, group: &str, fence: impl FnOnce(&FakeCluster, &str)) {
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let recorder = Recorder::default();
    let mut m = Member::start(config(&cluster, group, protocol), recorder.clone());
    m.read_all(10);
    let (old_generation, member) = m.gc.generation().unwrap();
    assert!(
        commits(&cluster).is_empty(),
        "nothing committed before the fence"
    );
    fence(&cluster, &member);
    m.read_until("on_lost", |_| recorder.lost() > 0);
    let lost: BTreeSet<TopicPartition> = recorder
        .events()
        .into_iter()
        .find_map(|e| match e {
            Seen::Lost(p) => Some(p.into_iter().collect()),
            _ => None,
        })
        .unwrap();
    assert_eq!(lost, all_partitions());
    m.read_until("assigned again", |m| {
        recorder.assigned() >= 2 && owns_all(m)
    });
    // Nothing committed the lost partitions under the old generation or epoch.
    assert!(
        commits(&cluster)
            .iter()
            .all(|(g, _, _)| *g != old_generation),
        "a commit with the fenced generation {old_generation}: {:?}",
        commits(&cluster)
    );
    assert!(
        !recorder
            .events()
            .iter()
            .any(|e| matches!(e, Seen::Revoked(_))),
        "lost partitions are not revoked: {:?}",
        recorder.events()
    );
    fill(&cluster, 10, 10);
    m.read_all(20);
    let (new_generation, _) = m.gc.generation().unwrap();
    m.close();
    let (g, _, partitions) = commits(&cluster).pop().unwrap();
    assert_eq!(g, new_generation);
    assert_eq!(partitions.len(), PARTITIONS as usize);
    for p in 0..PARTITIONS {
        assert_eq!(cluster.committed(group, TOPIC, p), Some(20));
    }
}

#[test]
fn classic_member_removed_by_the_coordinator_loses_and_rejoins() {
    fenced(
        GroupProtocol::Classic,
        "fenced-unknown",
        |cluster, member| {
            cluster.fence_member("fenced-unknown", member).unwrap();
        },
    );
}

#[test]
fn classic_illegal_generation_on_heartbeat_loses_and_rejoins() {
    fenced(GroupProtocol::Classic, "fenced-generation", |cluster, _| {
        cluster.fail_next(
            "fenced-generation",
            ApiKey::Heartbeat,
            KafkaCode::ILLEGAL_GENERATION,
        );
    });
}

#[test]
fn kip848_fenced_member_epoch_loses_and_rejoins() {
    let group = "fenced-848";
    fenced(GroupProtocol::Consumer, group, |cluster, member| {
        cluster.fence_member(group, member).unwrap();
    });
}

fn fenced_instance(protocol: GroupProtocol, group: &str) {
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut c = config(&cluster, group, protocol);
    c.group.group_instance_id = Some("instance-7".into());
    let mut m = Member::start(c, Recorder::default());
    m.read_all(10);
    cluster.fail_next(group, group_api(protocol), KafkaCode::FENCED_INSTANCE_ID);
    let mut failure = None;
    let mut patience = Patience::default();
    while patience.left() {
        match m.step() {
            Ok(got) => patience.note(got),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let Some(e) = failure else {
        panic!("the member never failed");
    };
    assert!(matches!(e, Error::Group(_)), "{e:?}");
    assert!(e.to_string().contains("instance-7"), "{e}");
    assert!(e.to_string().contains(group), "{e}");
}

#[test]
fn classic_fenced_instance_id_ends_the_consumer() {
    fenced_instance(GroupProtocol::Classic, "instance-classic");
}

#[test]
fn kip848_fenced_instance_id_ends_the_consumer() {
    fenced_instance(GroupProtocol::Consumer, "instance-848");
}

/// Two KIP-848 members share the partitions; when the second joins, a partition
/// reaches it only after the first's heartbeat stopped listing it.
#[test]
fn kip848_partitions_move_only_after_their_owner_let_go() {
    let group = "share-848";
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let mut a = Member::start(
        config(&cluster, group, GroupProtocol::Consumer),
        Recorder::default(),
    );
    a.read_all(10);
    let mut b = Member::start(
        config(&cluster, group, GroupProtocol::Consumer),
        Recorder::default(),
    );
    let mut patience = Patience::default();
    while patience.left() {
        let (na, nb) = (a.gc.assignment().len(), b.gc.assignment().len());
        if na == 2 && nb == 2 {
            break;
        }
        let got = a.step().unwrap() | b.step().unwrap();
        patience.note(got);
    }
    let mine: BTreeSet<_> = a.gc.assignment().into_iter().collect();
    let theirs: BTreeSet<_> = b.gc.assignment().into_iter().collect();
    assert_eq!(mine.len(), 2, "{mine:?} / {theirs:?}");
    assert!(mine.is_disjoint(&theirs));
    // Replay what the coordinator handed out: no partition was ever granted to two
    // members at once.
    let mut holding: BTreeMap<String, BTreeSet<(String, i32)>> = BTreeMap::new();
    for h in cluster.consumer_group_handed(group) {
        holding.insert(h.member_id.clone(), h.partitions.iter().cloned().collect());
        let mut seen = BTreeSet::new();
        for tp in holding.values().flatten() {
            assert!(seen.insert(tp.clone()), "{tp:?} granted twice: {holding:?}");
        }
    }
    fill(&cluster, 10, 10);
    let mut patience = Patience::default();
    while patience.left() {
        let read: BTreeSet<(i32, i64)> = a.read.keys().chain(b.read.keys()).copied().collect();
        if read.len() == (PARTITIONS * 20) as usize {
            break;
        }
        let got = a.step().unwrap() | b.step().unwrap();
        patience.note(got);
    }
    let read: BTreeSet<(i32, i64)> = a.read.keys().chain(b.read.keys()).copied().collect();
    assert_eq!(read.len(), (PARTITIONS * 20) as usize);
    b.close();
    a.close();
}

/// A control hook's answer: ListOffsets refused for good.
fn refuse_list_offsets(_: &ReceivedRequest) -> kring_mock::Reply {
    kring_mock::Reply::error(KafkaCode::TOPIC_AUTHORIZATION_FAILED)
}

/// The member's first start of its assignment is refused (the first ListOffsets, for
/// the reset policy's offsets, fails with TOPIC_AUTHORIZATION_FAILED): the call that
/// handles the assignment fails naming it, and the partitions are started again
/// afterwards, so every record is still read. Before, the assignment was dropped with
/// the error and its partitions stayed unread until the next rebalance.
fn a_refused_start(protocol: GroupProtocol, group: &str) {
    let cluster = cluster();
    fill(&cluster, 0, 10);
    cluster.control_once(Some(ApiKey::ListOffsets), refuse_list_offsets);
    let recorder = Recorder::default();
    let mut m = Member::start(config(&cluster, group, protocol), recorder.clone());
    let error = m.first_error("the refused start");
    assert_eq!(
        error.code(),
        Some(KafkaCode::TOPIC_AUTHORIZATION_FAILED),
        "{error}"
    );
    assert!(
        m.gc.assignment().is_empty(),
        "nothing started, nothing told"
    );
    assert_eq!(
        recorder.assigned(),
        0,
        "the listener hears of started partitions only"
    );
    m.read_all(10);
    assert!(owns_all(&m));
    assert_eq!(recorder.assigned(), 1);
    m.close();
}

#[test]
fn classic_member_starts_its_partitions_again_after_a_refused_start() {
    a_refused_start(GroupProtocol::Classic, "refused-start-classic");
}

#[test]
fn kip848_member_starts_its_partitions_again_after_a_refused_start() {
    a_refused_start(GroupProtocol::Consumer, "refused-start-848");
}

/// Every start is refused for a while, and a second member joins meanwhile: the
/// partitions not started move between the members with the rebalance (a member does
/// not start partitions it no longer owns, nor hold up the rebalance), and once starts
/// succeed again the two read every record between them, each its own partitions.
fn refused_starts_through_a_rebalance(protocol: GroupProtocol, group: &str) {
    let cluster = cluster();
    fill(&cluster, 0, 10);
    let refuse = cluster.control(Some(ApiKey::ListOffsets), refuse_list_offsets);
    let refused = |e: &Error| e.code() == Some(KafkaCode::TOPIC_AUTHORIZATION_FAILED);
    let mut a = Member::start(config(&cluster, group, protocol), Recorder::default());
    let error = a.first_error("the first member's refused start");
    assert!(refused(&error), "{error}");
    let mut b = Member::start(config(&cluster, group, protocol), Recorder::default());
    // Both members go on calling while every start is refused: the rebalance completes
    // (each owns some partitions in the group, started or not).
    for _ in 0..5 {
        for m in [&mut a, &mut b] {
            match m.step() {
                Ok(_) => {}
                Err(e) if refused(&e) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    cluster.remove_control(refuse);
    let mut patience = Patience::default();
    let all_read = |a: &Member, b: &Member| {
        (0..PARTITIONS)
            .all(|p| (0..10).all(|o| a.read.contains_key(&(p, o)) || b.read.contains_key(&(p, o))))
    };
    while !all_read(&a, &b) {
        assert!(
            patience.left(),
            "gave up: a read {:?}, b read {:?}",
            a.read.len(),
            b.read.len()
        );
        for m in [&mut a, &mut b] {
            match m.step() {
                Ok(got) => patience.note(got),
                // A start refused before the refusals ended.
                Err(e) if refused(&e) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    let (mine, theirs): (BTreeSet<_>, BTreeSet<_>) = (
        a.gc.assignment().into_iter().collect(),
        b.gc.assignment().into_iter().collect(),
    );
    assert!(mine.is_disjoint(&theirs), "{mine:?} and {theirs:?}");
    assert!(
        !mine.is_empty() && !theirs.is_empty(),
        "{mine:?} and {theirs:?}"
    );
    for ((p, _), _) in a.read.iter().chain(b.read.iter()) {
        let tp = TopicPartition::new(TOPIC, *p);
        assert!(mine.contains(&tp) || theirs.contains(&tp));
    }
    a.close();
    b.close();
}

#[test]
fn classic_members_start_their_partitions_after_refused_starts_through_a_rebalance() {
    refused_starts_through_a_rebalance(GroupProtocol::Classic, "refused-rebalance-classic");
}

#[test]
fn kip848_members_start_their_partitions_after_refused_starts_through_a_rebalance() {
    refused_starts_through_a_rebalance(GroupProtocol::Consumer, "refused-rebalance-848");
}
