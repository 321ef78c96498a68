//! [`GroupConsumer`]: a member of a consumer group (Sarama's `ConsumerGroup`, the Java
//! client's `KafkaConsumer` with `subscribe`) as one stream of records over every
//! partition the group assigns it.
//!
//! The user-facing description is on [`GroupConsumer`] itself (this module is private).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::TopicPartition;
use super::assignor::Assignor;
use super::builder::GroupConsumerBuilder;
use super::driver::{self, FromConsumer, GroupShared, ToConsumer};
use super::offsets::{self, CommitRefusal, OffsetAndMetadata};
use crate::client::Client;
use crate::config::GroupProtocol;
use crate::config::{Config, ConfigurationError, OffsetReset};
use crate::consumer::{Consumer, FetchedBatch, Message, Offset, PartitionConsumer};
use crate::engine::group::{
    AnyMember, ConsumerMember, Generation, Member, MemberEvent, MemberSettings,
};
use crate::error::{Error, Result};

/// What a group consumer subscribes to.
#[derive(Debug, Clone)]
pub enum Topics {
    /// These topics.
    Names(Vec<String>),
    /// Every topic whose whole name matches this regular expression (internal topics
    /// left out), checked again at every metadata refresh.
    Pattern(Pattern),
}

/// A compiled topic pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: regex_lite::Regex,
}

impl Topics {
    /// A subscription to `topics`.
    pub fn names<S: Into<String>>(topics: impl IntoIterator<Item = S>) -> Topics {
        Topics::Names(topics.into_iter().map(Into::into).collect())
    }

    /// A subscription to every topic whose whole name matches `pattern`.
    pub fn pattern(pattern: &str) -> Result<Topics> {
        let anchored = format!("^(?:{pattern})$");
        let regex = regex_lite::Regex::new(&anchored).map_err(|e| {
            Error::InvalidArgument(format!("topic pattern {pattern:?} does not compile: {e}"))
        })?;
        Ok(Topics::Pattern(Pattern {
            source: pattern.to_string(),
            regex,
        }))
    }

    fn validate(&self) -> Result<()> {
        match self {
            Topics::Names(names) if names.is_empty() => Err(Error::InvalidArgument(
                "a group consumer needs at least one topic".into(),
            )),
            Topics::Names(names) => match names.iter().find(|n| n.is_empty()) {
                Some(_) => Err(Error::InvalidArgument("an empty topic name".into())),
                None => Ok(()),
            },
            Topics::Pattern(_) => Ok(()),
        }
    }

    /// The topics subscribed to now (a pattern is matched against the cluster's
    /// current topics).
    pub(crate) async fn resolve(&self, client: &Client) -> Result<BTreeSet<String>> {
        match self {
            Topics::Names(names) => {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                client.refresh_metadata(&refs).await?;
                Ok(names.iter().cloned().collect())
            }
            Topics::Pattern(p) => {
                client.refresh_all_metadata().await?;
                let snapshot = client.metadata();
                Ok(snapshot
                    .topics
                    .values()
                    .filter(|t| !t.internal && t.error.is_ok() && p.regex.is_match(&t.name))
                    .map(|t| t.name.clone())
                    .collect())
            }
        }
    }
}

impl std::fmt::Display for Topics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Topics::Names(n) => write!(f, "{}", n.join(",")),
            Topics::Pattern(p) => write!(f, "/{}/", p.source),
        }
    }
}

/// A boxed future borrowed for `'a` (what [`RebalanceListener`]'s methods return).
pub type ListenerFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Callbacks around rebalances. They run on the application's task, inside the
/// group consumer's calls, and get the consumer itself, so they may commit, seek or
/// read positions. Each has a default that does nothing.
pub trait RebalanceListener: Send {
    /// Partitions were added (their consumers start at the committed offset, else at
    /// `auto.offset.reset`; a seek here moves them).
    fn on_assigned<'a>(
        &'a mut self,
        consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (consumer, partitions);
        Box::pin(async {})
    }

    /// Partitions are being taken away: the member still owns them, so what was
    /// consumed from them can be committed here (auto-commit commits them right after).
    fn on_revoked<'a>(
        &'a mut self,
        consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (consumer, partitions);
        Box::pin(async {})
    }

    /// Partitions were lost (the member was fenced, or stayed away too long): they may
    /// already be someone else's, so commits would be refused.
    fn on_lost<'a>(
        &'a mut self,
        consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (consumer, partitions);
        Box::pin(async {})
    }
}

/// The listener used when none is given.
#[derive(Debug, Default)]
pub(super) struct NoListener;

impl RebalanceListener for NoListener {}

/// One assigned partition.
#[derive(Debug)]
struct Slot {
    tp: TopicPartition,
    consumer: PartitionConsumer,
    /// The next offset after what the application consumed.
    consumed: i64,
    /// The leader epoch of the batch the last consumed record came in (KIP-320), if
    /// known: committed with `consumed`.
    consumed_epoch: Option<i32>,
    /// What the member last committed (or found committed).
    committed: Option<i64>,
}

/// A partition consumer started for an assignment, with the offset found committed.
type Started = (TopicPartition, PartitionConsumer, Option<i64>);

/// What was handed out last, settled on the next call.
#[derive(Debug, Clone, Copy)]
enum Handed {
    /// A borrowed batch of slot `.0`: consumed up to the consumer's position.
    Batch(usize),
    /// An owned message: consumed up to `.1`.
    Message(usize, i64),
}

/// What polling the partitions and the driver found.
enum Next {
    Event(ToConsumer),
    Ready(usize),
    Failed(crate::consumer::ConsumerError),
    /// The driver is gone (the member left or failed).
    DriverGone,
}

/// A member of a consumer group (Sarama's `ConsumerGroup`, the Java client's
/// `KafkaConsumer` with `subscribe`) as one stream of records over every partition the
/// group assigns it.
///
/// - Records come as borrowed batches ([`GroupConsumer::next_batch`]) or owned
///   messages ([`GroupConsumer::next_message`], [`GroupConsumer::next_messages`]), from
///   one partition consumer per assigned partition (so fetching is the per-broker
///   fetchers' work, as for partition consumers), taken in turn so no partition starves.
/// - Rebalances run inside those calls, on the application's task: a
///   [`RebalanceListener`]'s async callbacks see the partitions assigned, revoked or
///   lost and may commit (the consumer is handed to them), unlike callbacks that must
///   return at once.
/// - **Consumed** means handed out and then followed by another call: a batch counts as
///   consumed when the application asks for the next one (it has stopped borrowing it),
///   a message when it was returned. Auto-commit (`enable.auto.commit`) commits
///   consumed positions every `auto.commit.interval.ms` (checked on each call), on
///   revocation and on close — at-least-once: after a crash, what was consumed since
///   the last commit is read again by the partition's next owner.
/// - `max.poll.interval.ms` is the longest the application may go between two calls
///   (of `next_*`, `commit*` or `poll_group`); past it a dynamic member leaves the
///   group, its partitions are lost, and it joins again on the next call. Heartbeats
///   (`heartbeat.interval.ms`, within `session.timeout.ms`) run on a worker meanwhile,
///   whatever the application does.
///
/// ```no_run
/// use kring::config::OffsetReset;
/// use kring::group::{GroupConsumer, Topics};
/// use kring::{Client, Config};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// let mut member = GroupConsumer::builder(&client)
///     .group_id("billing")
///     .auto_offset_reset(OffsetReset::Earliest)
///     .subscribe(Topics::names(["orders", "refunds"]))
///     .await?;
/// while let Some(batch) = member.next_batch().await {
///     let batch = batch?;
///     for record in batch.batch.records() {
///         let record = record?; // key and value borrow the fetch buffer
///         println!("{}/{}@{}: {:?}", batch.topic, batch.partition, record.offset(), record.value());
///     }
/// }
/// member.close().await?; // commits what was consumed, leaves the group
/// # Ok(()) }
/// ```
pub struct GroupConsumer {
    client: Client,
    consumer: Consumer,
    group: String,
    instance_id: Option<String>,
    topics: Topics,
    slots: Vec<Slot>,
    turn: usize,
    handed: Option<Handed>,
    /// Owned messages of the last batch not handed out yet, and their slot.
    pending: VecDeque<(usize, Message)>,
    events: mpsc::UnboundedReceiver<ToConsumer>,
    /// The event being handled (kept until done: see `finish_event`).
    in_progress: Option<ToConsumer>,
    commands: mpsc::UnboundedSender<FromConsumer>,
    shared: Arc<GroupShared>,
    /// Behind an async mutex so that a callback cut short (the caller's future dropped
    /// mid-await) drops only its lock, never the listener; a callback running already
    /// (one that calls back into the consumer) makes nested ones skip.
    listener: Arc<tokio::sync::Mutex<Box<dyn RebalanceListener>>>,
    auto_commit: bool,
    reset: OffsetReset,
    failed: Option<Error>,
    /// The commit on revoke, once started: a call cut short waits for it next time.
    revoke_commit: Option<CommitFuture>,
    /// The auto-commit under way and what it commits (marked committed once it
    /// succeeds): a call cut short waits for this same commit next time.
    auto_commit_sent: Option<(CommitFuture, BTreeMap<TopicPartition, OffsetAndMetadata>)>,
    /// Assigned partitions starting on a worker (kept until answered: a call cut short
    /// goes on with the same start next time).
    starting: Option<Starting>,
    /// Assigned partitions whose start failed: started again after a backoff.
    unstarted: Option<Unstarted>,
    /// The wait for `unstarted`'s backoff (kept across calls, so that a call cut short
    /// leaves no timer behind).
    retry_sleep: Option<(Instant, RetrySleep)>,
    left: bool,
    last_poll_note: Instant,
}

impl std::fmt::Debug for GroupConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("group", &self.group)
            .field("topics", &self.topics)
            .field("assigned", &self.slots.len())
            .finish_non_exhaustive()
    }
}

/// Assigned partitions starting on a worker.
struct Starting {
    generation: Generation,
    /// The partitions the listener hears of once started (those already started are
    /// not started again).
    partitions: Vec<TopicPartition>,
    rx: oneshot::Receiver<Result<Vec<Started>>>,
}

/// The wait for the backoff of partitions whose start failed.
type RetrySleep = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// What woke a call waiting for records.
enum Wake {
    /// The backoff of partitions whose start failed is over (or the wait failed).
    Retry(Result<()>),
    Next(Next),
}

/// Assigned partitions whose start failed (see [`GroupConsumer::start_unstarted`]).
#[derive(Debug)]
struct Unstarted {
    generation: Generation,
    partitions: Vec<TopicPartition>,
    /// Failed starts in a row.
    failures: u32,
    /// When to start them again.
    retry_at: Instant,
}

/// The member engine's settings from the client's configuration.
fn member_settings(config: &Config, group: &str) -> Result<MemberSettings> {
    let g = &config.group;
    let mut assignors = Vec::with_capacity(g.assignment_strategies.len());
    for name in &g.assignment_strategies {
        assignors.push(Assignor::from_name(name).ok_or_else(|| {
            Error::Configuration(ConfigurationError::Inconsistent {
                field: "group.assignment_strategies",
                reason: format!("unknown assignor {name:?}"),
            })
        })?);
    }
    if assignors.iter().any(|a| a.is_cooperative()) && !assignors.iter().all(|a| a.is_cooperative())
    {
        // The Java client joins with the protocol the first assignor speaks; kring
        // keeps one protocol per member so its rules stay simple, and says so.
        let offered: Vec<&str> = assignors.iter().map(|a| a.name()).collect();
        tracing::info!(
            ?offered,
            "eager and cooperative assignors mixed: the member uses the first one's protocol"
        );
        let first_cooperative = assignors[0].is_cooperative();
        assignors.retain(|a| a.is_cooperative() == first_cooperative);
    }
    Ok(MemberSettings {
        group_id: group.to_string(),
        instance_id: g.group_instance_id.clone(),
        session_timeout: g.session_timeout,
        rebalance_timeout: g.rebalance_timeout,
        heartbeat_interval: g.heartbeat_interval,
        assignors,
        retry_backoff: config.admin.retry_backoff,
        rack: None,
        server_assignor: g.remote_assignor.clone(),
    })
}

impl GroupConsumer {
    /// Joins the group named by `group.id` in `client`'s configuration, subscribed to
    /// `topics`. Returns at once; the first call of `next_*` waits for the first
    /// assignment.
    pub async fn subscribe(client: Client, topics: Topics) -> Result<GroupConsumer> {
        Self::with_listener(client, topics, Box::new(NoListener)).await
    }

    /// [`GroupConsumer::subscribe`] with rebalance callbacks.
    pub async fn with_listener(
        client: Client,
        topics: Topics,
        listener: Box<dyn RebalanceListener>,
    ) -> Result<GroupConsumer> {
        let config = client.config().clone();
        Self::start(client, config, topics, listener).await
    }

    /// A group consumer with settings of its own (group and consumer) over `client`'s
    /// connections and workers: starts from the client's; see [`GroupConsumerBuilder`].
    pub fn builder(client: &Client) -> GroupConsumerBuilder {
        GroupConsumerBuilder::new(client)
    }

    /// Joins with `config`: the client's configuration with this member's own `group`
    /// and `consumer` sections (validated here). The member engine, its partition
    /// consumers (through [`Consumer::start`]), auto-commit and the reset policy all
    /// read those sections, never `client.config()`'s.
    pub(crate) async fn start(
        client: Client,
        config: Config,
        topics: Topics,
        listener: Box<dyn RebalanceListener>,
    ) -> Result<GroupConsumer> {
        topics.validate()?;
        config.validate()?;
        let group = config.group.group_id.clone().ok_or_else(|| {
            Error::Configuration(ConfigurationError::Inconsistent {
                field: "group.group_id",
                reason: "a group consumer needs group.id".into(),
            })
        })?;
        let settings = member_settings(&config, &group)?;
        let subscribed = topics.resolve(&client).await?;
        let consumer = Consumer::start(client.clone(), config.consumer.clone())?;
        let (to_consumer, events) = mpsc::unbounded_channel();
        let (commands, from_consumer) = mpsc::unbounded_channel();
        let shared = Arc::new(GroupShared::default());
        let auto_commit = config
            .consumer
            .enable_auto_commit
            .then_some(config.consumer.auto_commit_interval);
        let now = Instant::now();
        let member = match config.group.protocol {
            GroupProtocol::Classic => AnyMember::Classic(Member::new(settings, subscribed, now)),
            GroupProtocol::Consumer => AnyMember::Consumer(ConsumerMember::new(
                settings,
                crate::io::security::random_member_id(),
                subscribed,
                now,
            )),
        };
        let runtime = client.runtime();
        let (c, t, s) = (client.clone(), topics.clone(), shared.clone());
        runtime.spawn_on(runtime.worker_for(-1), move |_| {
            driver::run(c, member, t, from_consumer, to_consumer, s, auto_commit)
        })?;
        Ok(GroupConsumer {
            client,
            consumer,
            instance_id: config.group.group_instance_id.clone(),
            group,
            topics,
            slots: Vec::new(),
            turn: 0,
            handed: None,
            pending: VecDeque::new(),
            events,
            in_progress: None,
            commands,
            shared,
            listener: Arc::new(tokio::sync::Mutex::new(listener)),
            auto_commit: config.consumer.enable_auto_commit,
            reset: config.consumer.auto_offset_reset,
            failed: None,
            revoke_commit: None,
            auto_commit_sent: None,
            starting: None,
            unstarted: None,
            retry_sleep: None,
            left: false,
            last_poll_note: Instant::now(),
        })
    }

    /// The group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The member's generation id and member id, while it is in the group.
    pub fn generation(&self) -> Option<(i32, String)> {
        self.current_generation()
            .map(|g| (g.generation_id, g.member_id))
    }

    /// The member's identity for offsets sent to a transaction
    /// ([`crate::producer::Producer::send_offsets_to_transaction`], KIP-447): the group
    /// coordinator takes them only while this generation lasts, so a member that lost
    /// its partitions cannot commit their offsets in a transaction.
    pub fn group_metadata(&self) -> crate::producer::GroupMetadata {
        let generation = self.current_generation();
        crate::producer::GroupMetadata {
            group_id: self.group.clone(),
            generation_id: generation.as_ref().map_or(-1, |g| g.generation_id),
            member_id: generation.map(|g| g.member_id).unwrap_or_default(),
            group_instance_id: self.instance_id.clone(),
        }
    }

    /// The next offset to consume of every assigned partition (the batch or message
    /// handed out last counts as consumed), sorted: what a consume-transform-produce loop
    /// sends to its transaction. Run with `enable.auto.commit=false` then, so offsets are
    /// committed only with the transaction.
    pub fn consumed_offsets(&mut self) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.settle_handed();
        let mut out: Vec<_> = self
            .slots
            .iter()
            .map(|s| {
                let offset = OffsetAndMetadata::new(s.consumed).with_leader_epoch(s.consumed_epoch);
                (s.tp.clone(), offset)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn current_generation(&self) -> Option<Generation> {
        self.shared.generation.lock().ok().and_then(|g| g.clone())
    }

    /// The partitions assigned now, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        let mut out: Vec<_> = self.slots.iter().map(|s| s.tp.clone()).collect();
        out.sort();
        out
    }

    fn slot_of(&self, topic: &str, partition: i32) -> Result<usize> {
        self.slots
            .iter()
            .position(|s| s.tp.topic == topic && s.tp.partition == partition)
            .ok_or_else(|| Error::NotAssigned {
                topic: topic.to_string(),
                partition,
            })
    }

    /// The next offset the application will get from a partition.
    pub fn position(&self, topic: &str, partition: i32) -> Result<i64> {
        let i = self.slot_of(topic, partition)?;
        Ok(self.position_of(i))
    }

    fn position_of(&self, i: usize) -> i64 {
        match self.pending.iter().find(|(s, _)| *s == i) {
            Some((_, m)) => m.offset,
            None => self.slots[i].consumer.position(),
        }
    }

    /// The offset the member last committed for a partition (or found committed when
    /// it was assigned), if any.
    pub fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>> {
        Ok(self.slots[self.slot_of(topic, partition)?].committed)
    }

    /// Records between a partition's position and its high watermark (as of its
    /// latest fetch; 0 before the first).
    pub fn lag(&self, topic: &str, partition: i32) -> Result<i64> {
        let i = self.slot_of(topic, partition)?;
        let hw = self.slots[i].consumer.high_watermark();
        Ok(if hw < 0 {
            0
        } else {
            (hw - self.position_of(i)).max(0)
        })
    }

    /// The broker whose fetcher serves an assigned partition (see
    /// [`PartitionConsumer::fetching_from`]): its leader, or with `client.rack` set the
    /// replica in that rack the leader named (KIP-392).
    pub fn fetching_from(&self, topic: &str, partition: i32) -> Result<Option<i32>> {
        Ok(self.slots[self.slot_of(topic, partition)?]
            .consumer
            .fetching_from())
    }

    /// Stops a partition (it stays assigned): nothing more is fetched for it and
    /// nothing it already fetched is handed out until [`GroupConsumer::resume`].
    pub fn pause(&self, topic: &str, partition: i32) -> Result<()> {
        self.slots[self.slot_of(topic, partition)?].consumer.pause();
        Ok(())
    }

    /// Resumes fetching a paused partition.
    pub fn resume(&self, topic: &str, partition: i32) -> Result<()> {
        self.slots[self.slot_of(topic, partition)?]
            .consumer
            .resume();
        Ok(())
    }

    /// Moves a partition's position: the next record it gives is at `offset` (what is
    /// already fetched is dropped). A seek is consumed-up-to for commits.
    pub async fn seek(&mut self, topic: &str, partition: i32, offset: Offset) -> Result<()> {
        let i = self.slot_of(topic, partition)?;
        self.settle_handed();
        self.pending.retain(|(s, _)| *s != i);
        // The old consumer gives up its claim on the partition before the new one starts.
        let old = self.slots.remove(i);
        let previous = old.consumer.position();
        let (tp, committed) = (old.tp, old.committed);
        drop(old.consumer);
        let (consumer, result) = match self.start_partition(&tp, offset).await {
            Ok(c) => (c, Ok(())),
            Err(e) => (
                self.start_partition(&tp, Offset::Exact(previous)).await?,
                Err(e),
            ),
        };
        self.pending = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(s, m)| (if s > i { s - 1 } else { s }, m))
            .collect();
        self.slots.push(Slot {
            tp,
            consumed: consumer.position(),
            consumed_epoch: None,
            consumer,
            committed,
        });
        result
    }

    async fn start_partition(
        &self,
        tp: &TopicPartition,
        start: Offset,
    ) -> Result<PartitionConsumer> {
        self.consumer
            .consume_partition(&tp.topic, tp.partition, start)
            .await
    }

    /// Tells the driver the application is here (at most every 100 ms).
    fn note_poll(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_poll_note) >= Duration::from_millis(100) {
            self.last_poll_note = now;
            let _ = self.commands.send(FromConsumer::Polled);
        }
    }

    /// What was handed out last is consumed now.
    fn settle_handed(&mut self) {
        match self.handed.take() {
            Some(Handed::Batch(i)) => {
                if let Some(s) = self.slots.get_mut(i) {
                    s.consumed = s.consumer.position();
                    s.consumed_epoch = s.consumer.position_leader_epoch();
                }
            }
            // The messages waiting are those of the batch the partition's consumer
            // took last (it takes no other until they are handed out), so its epoch is
            // theirs.
            Some(Handed::Message(i, next)) => {
                if let Some(s) = self.slots.get_mut(i) {
                    s.consumed = next;
                    s.consumed_epoch = s.consumer.position_leader_epoch();
                }
            }
            None => {}
        }
    }

    /// Runs group events until a partition has a batch ready.
    async fn until_ready(&mut self) -> Option<Result<usize>> {
        self.settle_handed();
        self.note_poll();
        let _in_call = InCall::enter(&self.shared);
        loop {
            if let Some(e) = &self.failed {
                return Some(Err(e.clone()));
            }
            if self.left {
                return None;
            }
            if let Err(e) = self.finish_event().await {
                return Some(Err(e));
            }
            if let Err(e) = self.start_unstarted().await {
                return Some(Err(e));
            }
            self.arm_retry_sleep();
            let next = match std::future::poll_fn(|cx| self.poll_wake(cx)).await {
                Wake::Retry(Ok(())) => continue,
                Wake::Retry(Err(e)) => return Some(Err(e)),
                Wake::Next(next) => next,
            };
            match next {
                Next::Ready(i) => return Some(Ok(i)),
                Next::Failed(e) => return Some(Err(Error::Partition(Box::new(e)))),
                Next::Event(event) => self.in_progress = Some(event),
                Next::DriverGone => {
                    self.left = true;
                }
            }
        }
    }

    /// The next thing to do: what [`GroupConsumer::poll_next`] gives, or the end of the
    /// backoff of partitions whose start failed.
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        if let Some((_, sleep)) = self.retry_sleep.as_mut()
            && let Poll::Ready(slept) = sleep.as_mut().poll(cx)
        {
            self.retry_sleep = None;
            return Poll::Ready(Wake::Retry(slept));
        }
        self.poll_next(cx).map(Wake::Next)
    }

    /// Makes sure a wait for the backoff of the partitions whose start failed is under
    /// way (one at a time, kept across calls), and none once there are none.
    fn arm_retry_sleep(&mut self) {
        let Some(at) = self.unstarted.as_ref().map(|u| u.retry_at) else {
            self.retry_sleep = None;
            return;
        };
        if self
            .retry_sleep
            .as_ref()
            .is_some_and(|(armed, _)| *armed == at)
        {
            return;
        }
        let client = self.client.clone();
        let wait = at.saturating_duration_since(Instant::now());
        self.retry_sleep = Some((at, Box::pin(async move { client.sleep(wait).await })));
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => return Poll::Ready(Next::Event(event)),
            Poll::Ready(None) => return Poll::Ready(Next::DriverGone),
            Poll::Pending => {}
        }
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            if self.slots[i].consumer.is_paused() {
                // As in Java, a paused partition gives nothing, fetched or not.
                continue;
            }
            match self.slots[i].consumer.poll_ready(cx) {
                Poll::Ready(Some(Ok(()))) => {
                    self.turn = i + 1;
                    return Poll::Ready(Next::Ready(i));
                }
                Poll::Ready(Some(Err(e))) => {
                    self.turn = i + 1;
                    return Poll::Ready(Next::Failed(e));
                }
                // The client is closing: the driver's channel ends next.
                Poll::Ready(None) | Poll::Pending => {}
            }
        }
        Poll::Pending
    }

    /// The next batch with records, borrowed from the fetch buffer, from whichever
    /// assigned partition has one; rebalances and auto-commits happen inside. `None`
    /// once the member has left the group (after [`GroupConsumer::close`]).
    pub async fn next_batch(&mut self) -> Option<Result<GroupBatch<'_>>> {
        let i = match self.until_ready().await? {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        self.handed = Some(Handed::Batch(i));
        let slot = &mut self.slots[i];
        let tp = &slot.tp;
        Some(
            slot.consumer
                .take_ready_batch()?
                .map(|batch| GroupBatch {
                    topic: &tp.topic,
                    partition: tp.partition,
                    batch,
                })
                .map_err(|e| Error::Partition(Box::new(e))),
        )
    }

    /// Every record of the next batch as owned messages.
    pub async fn next_messages(&mut self) -> Option<Result<Vec<Message>>> {
        let i = match self.until_ready().await? {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        self.handed = Some(Handed::Batch(i));
        Some(
            self.slots[i]
                .consumer
                .take_ready_messages()?
                .map_err(|e| Error::Partition(Box::new(e))),
        )
    }

    /// The next owned message.
    pub async fn next_message(&mut self) -> Option<Result<Message>> {
        loop {
            if let Some((i, m)) = self.take_pending() {
                self.settle_handed();
                self.note_poll();
                self.handed = Some(Handed::Message(i, m.offset + 1));
                return Some(Ok(m));
            }
            let i = match self.until_ready().await? {
                Ok(i) => i,
                Err(e) => return Some(Err(e)),
            };
            match self.slots[i].consumer.take_ready_messages()? {
                Ok(batch) => self.pending.extend(batch.into_iter().map(|m| (i, m))),
                Err(e) => return Some(Err(Error::Partition(Box::new(e)))),
            }
        }
    }

    /// The first owned message waiting whose partition is not paused.
    fn take_pending(&mut self) -> Option<(usize, Message)> {
        let at = self
            .pending
            .iter()
            .position(|(i, _)| !self.slots[*i].consumer.is_paused())?;
        self.pending.remove(at)
    }

    /// Handles pending group events (a rebalance, an auto-commit) without waiting for
    /// records: for applications that pause every partition for a while.
    pub async fn poll_group(&mut self) -> Result<()> {
        self.note_poll();
        self.finish_event().await?;
        while let Ok(event) = self.events.try_recv() {
            self.in_progress = Some(event);
            self.finish_event().await?;
        }
        self.start_unstarted().await?;
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Handles the event taken last. Cancel-safe: the event stays until its handling
    /// has finished, so a call dropped midway (a `select!` with a timer) resumes it on
    /// the next call; each step is idempotent (partitions already started are not
    /// started again, commits send only what moved), though a listener callback that
    /// was interrupted runs again.
    async fn finish_event(&mut self) -> Result<()> {
        while let Some(event) = self.in_progress.clone() {
            let result = self.on_event(event).await;
            self.in_progress = None;
            result?;
        }
        Ok(())
    }

    async fn on_event(&mut self, event: ToConsumer) -> Result<()> {
        match event {
            ToConsumer::CommitDue => {
                if self.auto_commit {
                    self.auto_commit_once().await;
                }
                Ok(())
            }
            ToConsumer::Member(MemberEvent::Assigned { generation, added }) => {
                self.assign(generation, added).await
            }
            ToConsumer::Member(MemberEvent::Revoke(partitions)) => {
                let started = self.let_go_of(&partitions).await;
                self.revoke(&started).await;
                let _ = self.commands.send(FromConsumer::Revoked);
                Ok(())
            }
            ToConsumer::Member(MemberEvent::Lost(partitions)) => {
                let started = self.let_go_of(&partitions).await;
                self.call_listener(Callback::Lost, &started).await;
                self.drop_slots(&started);
                Ok(())
            }
            ToConsumer::Member(MemberEvent::Failed(e)) => {
                self.settle_start_under_way().await;
                self.unstarted = None;
                let all = self.assignment();
                self.call_listener(Callback::Lost, &all).await;
                self.drop_slots(&all);
                let error = Error::Group(e);
                self.failed = Some(error.clone());
                Err(error)
            }
            ToConsumer::Member(MemberEvent::Left) => {
                self.left = true;
                Ok(())
            }
            ToConsumer::Member(
                MemberEvent::NeedMetadata(_)
                | MemberEvent::NeedTopicNames(_)
                | MemberEvent::CoordinatorLost,
            ) => Ok(()),
        }
    }

    /// Starts consumers for newly assigned partitions at their committed offsets (or
    /// the reset policy's), then tells the listener. A start that fails leaves the
    /// partitions to be started again after a backoff (see
    /// [`GroupConsumer::start_unstarted`]).
    async fn assign(&mut self, generation: Generation, added: Vec<TopicPartition>) -> Result<()> {
        let same = |s: &Starting| s.generation == generation && s.partitions == added;
        if !self.starting.as_ref().is_some_and(same) {
            // A start of partitions whose start had failed, left under way by a call
            // cut short: finished first, so that no partition starts twice.
            self.settle_start_under_way().await;
            tracing::debug!(group = %self.group, generation = generation.generation_id, added = added.len(), "assigned");
            self.begin_start(generation, added)?;
        }
        self.finish_start().await
    }

    /// Starts `partitions` (those of them not started yet) on a worker.
    fn begin_start(
        &mut self,
        generation: Generation,
        partitions: Vec<TopicPartition>,
    ) -> Result<()> {
        let missing: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| !self.slots.iter().any(|s| &s.tp == *tp))
            .cloned()
            .collect();
        let rx = self.start_partitions(missing)?;
        self.starting = Some(Starting {
            generation,
            partitions,
            rx,
        });
        Ok(())
    }

    /// Waits for the start under way, if any: its consumers join the assignment and the
    /// listener hears of its partitions; a failure leaves them to be started again
    /// after a backoff, and is returned.
    async fn finish_start(&mut self) -> Result<()> {
        let Some(starting) = self.starting.as_mut() else {
            return Ok(());
        };
        let result = (&mut starting.rx).await.unwrap_or(Err(Error::ShuttingDown));
        let Some(Starting {
            generation,
            partitions,
            ..
        }) = self.starting.take()
        else {
            return Ok(());
        };
        let started = match result {
            Ok(started) => started,
            Err(e) => {
                // The partitions stay this member's in the group: dropped with the
                // error, they would go unread until the next rebalance.
                tracing::warn!(group = %self.group, error = %e, partitions = partitions.len(), "starting assigned partitions failed: trying again after a backoff");
                self.note_unstarted(generation, partitions);
                return Err(e);
            }
        };
        for (tp, consumer, committed) in started {
            self.slots.push(Slot {
                tp,
                consumed: consumer.position(),
                consumed_epoch: None,
                consumer,
                committed,
            });
        }
        self.forget_unstarted(&partitions);
        let group = self.group.clone();
        metrics::counter!(crate::metrics::names::GROUP_REBALANCES, "group" => group).increment(1);
        self.publish_assignment_size();
        self.call_listener(Callback::Assigned, &partitions).await;
        Ok(())
    }

    /// Finishes a start left under way, before the assignment changes otherwise; its
    /// failure leaves its partitions to be started again (and is said then).
    async fn settle_start_under_way(&mut self) {
        if let Err(e) = self.finish_start().await {
            tracing::debug!(group = %self.group, error = %e, "a start left under way failed");
        }
    }

    /// `partitions` are no longer this member's: a start under way is finished first,
    /// those not started are dropped from the ones to start. Returns those of them that
    /// were started (the only ones the listener heard of).
    async fn let_go_of(&mut self, partitions: &[TopicPartition]) -> Vec<TopicPartition> {
        self.settle_start_under_way().await;
        self.forget_unstarted(partitions);
        partitions
            .iter()
            .filter(|tp| self.slots.iter().any(|s| &s.tp == *tp))
            .cloned()
            .collect()
    }

    /// The assigned-partitions gauge, after the assignment changed.
    fn publish_assignment_size(&self) {
        let group = self.group.clone();
        metrics::gauge!(crate::metrics::names::GROUP_ASSIGNED_PARTITIONS, "group" => group)
            .set(self.slots.len() as f64);
    }

    /// Starts the assigned partitions whose start failed, once their backoff is over (or
    /// goes on with a start already under way: a call cut short resumes it). Each
    /// failure returns its error and doubles the backoff, up to `retry.backoff.max.ms`.
    async fn start_unstarted(&mut self) -> Result<()> {
        if self.starting.is_some() {
            return self.finish_start().await;
        }
        let Some(u) = &self.unstarted else {
            return Ok(());
        };
        if Instant::now() < u.retry_at {
            return Ok(());
        }
        let (generation, partitions) = (u.generation.clone(), u.partitions.clone());
        self.begin_start(generation, partitions)?;
        self.finish_start().await
    }

    /// Notes `partitions` (of `generation`) as assigned but not started, beside any
    /// noted before, with the next backoff.
    fn note_unstarted(&mut self, generation: Generation, partitions: Vec<TopicPartition>) {
        let config = self.client.config();
        let (base, max) = (
            config.metadata.refresh_backoff,
            config.producer.retry_backoff_max,
        );
        let mut u = self.unstarted.take().unwrap_or(Unstarted {
            generation: generation.clone(),
            partitions: Vec::new(),
            failures: 0,
            retry_at: Instant::now(),
        });
        u.generation = generation;
        for tp in partitions {
            if !u.partitions.contains(&tp) {
                u.partitions.push(tp);
            }
        }
        let backoff = base
            .saturating_mul(1 << u.failures.min(16))
            .min(max.max(base));
        u.failures += 1;
        u.retry_at = Instant::now() + backoff;
        self.unstarted = Some(u);
    }

    /// `partitions` are no longer this member's: not to be started.
    fn forget_unstarted(&mut self, partitions: &[TopicPartition]) {
        if let Some(u) = &mut self.unstarted {
            u.partitions.retain(|tp| !partitions.contains(tp));
            if u.partitions.is_empty() {
                self.unstarted = None;
            }
        }
    }

    /// Starts consumers for `partitions` on a worker, at their committed offsets or the
    /// reset policy's.
    fn start_partitions(
        &self,
        partitions: Vec<TopicPartition>,
    ) -> Result<oneshot::Receiver<Result<Vec<Started>>>> {
        let (tx, rx) = oneshot::channel();
        let (client, consumer) = (self.client.clone(), self.consumer.clone());
        let (group, reset) = (self.group.clone(), self.reset);
        let runtime = self.client.runtime();
        runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
            let result = async {
                let committed = offsets::fetch_committed(&client, &group, &partitions).await?;
                let mut starts = Vec::with_capacity(partitions.len());
                for tp in partitions {
                    let known = committed.get(&tp).copied().flatten();
                    let start = match (known, reset) {
                        (Some(o), _) => Offset::Exact(o),
                        (None, OffsetReset::Earliest) => Offset::Oldest,
                        (None, OffsetReset::Latest) => Offset::Newest,
                        (None, OffsetReset::None) => {
                            return Err(Error::InvalidArgument(format!(
                                "group {group}: {tp} has no committed offset and auto.offset.reset is none"
                            )));
                        }
                    };
                    starts.push((tp, start, known));
                }
                start_together(&consumer, starts).await
            }
            .await;
            let _ = tx.send(result);
        })?;
        Ok(rx)
    }

    /// Commits what was consumed (`auto.commit.interval.ms` passed). The commit runs on
    /// a worker and is kept until it answers, so a call cut short (a `select!` with a
    /// timer shorter than the commit's round trip) waits for the same commit next time
    /// instead of sending it again: sent anew on every call, a commit slower than the
    /// caller's timeout never finished, and the group events queued behind it (the
    /// revocation of a cooperative rebalance) were never handled, so the rebalance never
    /// completed (issue 15).
    async fn auto_commit_once(&mut self) {
        if self.auto_commit_sent.is_none() {
            self.settle_handed();
            let offsets = self.consumed_since_commit(None);
            if offsets.is_empty() {
                return;
            }
            let commit = self.send_commit(offsets.clone());
            self.auto_commit_sent = Some((commit, offsets));
        }
        let Some((commit, _)) = self.auto_commit_sent.as_mut() else {
            return;
        };
        let result = commit.await;
        let Some((_, offsets)) = self.auto_commit_sent.take() else {
            return;
        };
        match result {
            Ok(()) => self.mark_committed(&offsets),
            Err(e) => tracing::warn!(group = %self.group, error = %e, "auto-commit failed"),
        }
    }

    /// These offsets are committed now.
    fn mark_committed(&mut self, offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>) {
        for (tp, o) in offsets {
            if let Some(s) = self.slots.iter_mut().find(|s| &s.tp == tp) {
                s.committed = Some(o.offset);
            }
        }
    }

    /// Revokes `partitions`: the listener first (it may commit), then auto-commit of
    /// what was consumed, then their consumers stop.
    async fn revoke(&mut self, partitions: &[TopicPartition]) {
        self.settle_handed();
        if self.revoke_commit.is_none() {
            self.call_listener(Callback::Revoked, partitions).await;
            if self.auto_commit {
                // Started once and kept: a call cut short (a `select!` with a timer
                // shorter than the commit's round trip) waits for this same commit
                // next time instead of sending it again, so the revoke ends.
                self.revoke_commit = Some(self.start_commit(Some(partitions)));
            }
        }
        if let Some(commit) = self.revoke_commit.as_mut() {
            let result = commit.await;
            self.revoke_commit = None;
            if let Err(e) = result {
                tracing::warn!(group = %self.group, error = %e, "commit on revoke failed");
            }
        }
        self.drop_slots(partitions);
    }

    fn drop_slots(&mut self, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        self.settle_handed();
        let gone: BTreeSet<&TopicPartition> = partitions.iter().collect();
        let mut kept = Vec::with_capacity(self.slots.len());
        let mut renumber = BTreeMap::new();
        for (old, slot) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            if gone.contains(&slot.tp) {
                slot.consumer.close();
            } else {
                renumber.insert(old, kept.len());
                kept.push(slot);
            }
        }
        self.slots = kept;
        self.pending = std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|(i, m)| renumber.get(&i).map(|&j| (j, m)))
            .collect();
        self.turn = 0;
        self.publish_assignment_size();
    }

    async fn call_listener(&mut self, callback: Callback, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        let Ok(mut listener) = self.listener.clone().try_lock_owned() else {
            return;
        };
        match callback {
            Callback::Assigned => listener.on_assigned(self, partitions).await,
            Callback::Revoked => listener.on_revoked(self, partitions).await,
            Callback::Lost => listener.on_lost(self, partitions).await,
        }
    }

    /// Commits what the application consumed from every assigned partition (where it
    /// moved since the last commit), and waits for the answer.
    pub async fn commit(&mut self) -> Result<()> {
        self.commit_partitions(None).await
    }

    /// What the application consumed since the last commit, of `only` these partitions
    /// (`None`: of all).
    fn consumed_since_commit(
        &self,
        only: Option<&[TopicPartition]>,
    ) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.slots
            .iter()
            .filter(|s| only.is_none_or(|o| o.contains(&s.tp)))
            .filter(|s| s.committed != Some(s.consumed))
            .map(|s| {
                let offset = OffsetAndMetadata::new(s.consumed).with_leader_epoch(s.consumed_epoch);
                (s.tp.clone(), offset)
            })
            .collect()
    }

    async fn commit_partitions(&mut self, only: Option<&[TopicPartition]>) -> Result<()> {
        self.settle_handed();
        let offsets = self.consumed_since_commit(only);
        self.commit_offsets_now(offsets).await
    }

    /// Commits these offsets (each the next offset to consume) with their metadata.
    /// Every partition must be assigned to this member.
    pub async fn commit_offsets(
        &mut self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<()> {
        self.check_offsets_to_commit(offsets)?;
        self.commit_offsets_now(offsets.iter().cloned().collect())
            .await
    }

    /// Every partition assigned to this member, every offset not negative.
    fn check_offsets_to_commit(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> Result<()> {
        for (tp, o) in offsets {
            self.slot_of(&tp.topic, tp.partition)?;
            if o.offset < 0 {
                return Err(Error::InvalidArgument(format!(
                    "offset {} for {tp} is negative",
                    o.offset
                )));
            }
        }
        Ok(())
    }

    async fn commit_offsets_now(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        self.note_poll();
        let Some(generation) = self.current_generation() else {
            return Err(Error::CommitFenced {
                group: self.group.clone(),
                code: crate::protocol::KafkaCode::REBALANCE_IN_PROGRESS,
            });
        };
        let result = offsets::commit(
            &self.client,
            &self.group,
            &generation,
            self.instance_id.as_deref(),
            &offsets,
        )
        .await;
        match result {
            Ok(()) => {
                self.mark_committed(&offsets);
                Ok(())
            }
            Err(CommitRefusal::Fenced(code)) => {
                let _ = self
                    .commands
                    .send(FromConsumer::CommitFenced(code, generation.generation_id));
                Err(Error::CommitFenced {
                    group: self.group.clone(),
                    code,
                })
            }
            Err(CommitRefusal::Failed(e)) => Err(e),
        }
    }

    /// Starts committing what was consumed and returns at once; the returned future
    /// gives the outcome (drop it to ignore it). Commits started later are sent after
    /// this one.
    pub fn commit_async(&mut self) -> CommitFuture {
        self.start_commit(None)
    }

    /// [`GroupConsumer::commit_offsets`] without waiting: starts committing these
    /// offsets and returns at once; the future gives the outcome. A partition not
    /// assigned to this member ([`Error::NotAssigned`]) or a negative offset fails the
    /// future, and nothing is sent.
    pub fn commit_offsets_async(
        &mut self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
    ) -> CommitFuture {
        if let Err(e) = self.check_offsets_to_commit(offsets) {
            return CommitFuture::failed(e);
        }
        for (tp, o) in offsets {
            if let Some(s) = self.slots.iter_mut().find(|s| &s.tp == tp) {
                s.committed = Some(o.offset);
            }
        }
        self.send_commit(offsets.iter().cloned().collect())
    }

    /// Starts committing what was consumed from `only` (every assigned partition when
    /// `None`) on a worker.
    fn start_commit(&mut self, only: Option<&[TopicPartition]>) -> CommitFuture {
        self.settle_handed();
        let offsets = self.consumed_since_commit(only);
        for s in &mut self.slots {
            if only.is_none_or(|o| o.contains(&s.tp)) {
                s.committed = Some(s.consumed);
            }
        }
        self.send_commit(offsets)
    }

    /// Sends these offsets in a commit on a worker, with the current generation.
    fn send_commit(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> CommitFuture {
        let (tx, rx) = oneshot::channel();
        let client = self.client.clone();
        let group = self.group.clone();
        let instance = self.instance_id.clone();
        let generation = self.current_generation();
        let commands = self.commands.clone();
        let runtime = self.client.runtime();
        let spawned = runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
            let result = match generation {
                None => Err(Error::CommitFenced {
                    group: group.clone(),
                    code: crate::protocol::KafkaCode::REBALANCE_IN_PROGRESS,
                }),
                Some(g) => {
                    match offsets::commit(&client, &group, &g, instance.as_deref(), &offsets).await
                    {
                        Ok(()) => Ok(()),
                        Err(CommitRefusal::Fenced(code)) => {
                            let _ =
                                commands.send(FromConsumer::CommitFenced(code, g.generation_id));
                            Err(Error::CommitFenced { group, code })
                        }
                        Err(CommitRefusal::Failed(e)) => Err(e),
                    }
                }
            };
            let _ = tx.send(result);
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "async commit not started");
        }
        CommitFuture { rx }
    }

    /// Leaves the group: revokes every partition (the listener, then auto-commit), then
    /// sends LeaveGroup (a static member does not: its partitions wait for it until
    /// its session times out) and waits for the answer, up to the request timeout.
    pub async fn close(mut self) -> Result<()> {
        if let Err(e) = self.finish_event().await {
            tracing::debug!(group = %self.group, error = %e, "closing after a failed event");
        }
        // A start still under way is dropped with what it started (those consumers close
        // on the worker); partitions not started have nothing to revoke.
        self.starting = None;
        self.unstarted = None;
        self.retry_sleep = None;
        let all = self.assignment();
        if self.failed.is_none() {
            self.revoke(&all).await;
        }
        let _ = self.commands.send(FromConsumer::Leave);
        let wait = self.client.config().net.request_timeout;
        let deadline = Instant::now() + wait;
        while !self.left {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            let next = self.recv_event(remaining).await;
            match next {
                Some(ToConsumer::Member(MemberEvent::Left | MemberEvent::Failed(_))) | None => {
                    self.left = true;
                }
                Some(_) => {}
            }
        }
        match self.failed.take() {
            Some(Error::Group(e)) => Err(Error::Group(e)),
            _ => Ok(()),
        }
    }

    /// The next event, or `None` after `within` (or once the runtime shuts down). The
    /// worker's timer goes with the call: a detached one kept the runtime's shutdown,
    /// and so the drop of the last client handle, waiting for up to `within` after a
    /// `close` that had long returned.
    async fn recv_event(&mut self, within: Duration) -> Option<ToConsumer> {
        let runtime = self.client.runtime().clone();
        tokio::select! {
            e = self.events.recv() => e,
            _ = runtime.sleep(within) => None,
        }
    }
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        if !self.left {
            let _ = self.commands.send(FromConsumer::Leave);
        }
    }
}

/// Marks the application as inside a waiting call for as long as it lives (dropped
/// too when the call's future is).
struct InCall(Arc<GroupShared>);

impl InCall {
    fn enter(shared: &Arc<GroupShared>) -> InCall {
        shared
            .in_call
            .store(true, std::sync::atomic::Ordering::Release);
        InCall(shared.clone())
    }
}

impl Drop for InCall {
    fn drop(&mut self) {
        self.0
            .in_call
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

#[derive(Debug, Clone, Copy)]
enum Callback {
    Assigned,
    Revoked,
    Lost,
}

/// A batch from a group consumer: the partition it came from and the borrowed batch.
#[derive(Debug)]
pub struct GroupBatch<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition.
    pub partition: i32,
    /// The records.
    pub batch: FetchedBatch<'a>,
}

/// The outcome of a [`GroupConsumer::commit_async`].
#[derive(Debug)]
pub struct CommitFuture {
    rx: oneshot::Receiver<Result<()>>,
}

impl CommitFuture {
    /// A future that gives `error` at once.
    fn failed(error: Error) -> CommitFuture {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(Err(error));
        CommitFuture { rx }
    }
}

impl Future for CommitFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(Error::ShuttingDown)))
    }
}

/// Starts a partition consumer for each of `starts` at once, on tasks of the worker
/// this runs on: their start offsets are looked up together (one ListOffsets per
/// leader) instead of one round trip after another. At the first failure (in partition
/// order) the starts left are cancelled, and the consumers started are closed, before
/// the error is returned; a panic in a start is resumed here.
async fn start_together(
    consumer: &Consumer,
    starts: Vec<(TopicPartition, Offset, Option<i64>)>,
) -> Result<Vec<Started>> {
    let tasks: Vec<_> = starts
        .into_iter()
        .map(|(tp, start, known)| {
            let consumer = consumer.clone();
            tokio::task::spawn_local(async move {
                let pc = consumer
                    .consume_partition(&tp.topic, tp.partition, start)
                    .await;
                pc.map(|pc| (tp, pc, known))
            })
        })
        .collect();
    let mut started = Vec::with_capacity(tasks.len());
    let mut tasks = tasks.into_iter();
    while let Some(task) = tasks.next() {
        let failure = match task.await {
            Ok(Ok(s)) => {
                started.push(s);
                continue;
            }
            Ok(Err(e)) => e,
            Err(e) if e.is_panic() => {
                cancel(tasks).await;
                std::panic::resume_unwind(e.into_panic());
            }
            Err(_) => Error::ShuttingDown,
        };
        cancel(tasks).await;
        return Err(failure);
    }
    Ok(started)
}

/// Cancels the partition starts `tasks` and waits until they are gone (so that their
/// partitions are free to be started again).
async fn cancel(tasks: impl Iterator<Item = tokio::task::JoinHandle<Result<Started>>>) {
    let tasks: Vec<_> = tasks.collect();
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
}
