//! The group member's driver: one task on a worker runs the member engine
//! ([`crate::engine::group`]) — it finds the coordinator and opens a connection of its
//! own to it (a JoinGroup waits for the whole group and Kafka answers a connection in
//! order, so the shared connection's fetches and commits must not queue behind it),
//! sends what the engine asks, feeds back answers, fetches the partition counts the
//! leader needs, refreshes metadata every `metadata.refresh_interval` (new partitions,
//! topics a pattern now matches), ticks auto-commit, and passes the engine's events to
//! the group consumer. Requests run as tasks of their own on the same worker, their
//! answers coming back over a channel, so heartbeats go on while a leader waits for
//! metadata and commands are taken at any time.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::consumer::Topics;
use crate::client::{Client, CoordinatorKind};
use crate::engine::group::{AnyMember, Generation, Member, MemberEvent, Outgoing, counts_of};
use crate::error::Result;
use crate::group::assignor::PartitionCounts;
use crate::io::Broker;
use crate::protocol::messages::{
    ConsumerGroupHeartbeatResponse, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse,
    SyncGroupResponse,
};
use crate::protocol::{ApiKey, KafkaCode, Uuid};
use crate::runtime::sleep_until;

/// The feature whose finalized level 1 enables KIP-848's consumer group protocol.
const GROUP_VERSION_FEATURE: &str = "group.version";

/// What the driver tells the group consumer.
#[derive(Debug, Clone)]
pub(crate) enum ToConsumer {
    Member(MemberEvent),
    /// `auto.commit.interval.ms` passed.
    CommitDue,
}

/// What the group consumer tells the driver.
#[derive(Debug)]
pub(crate) enum FromConsumer {
    /// The application asked for records.
    Polled,
    /// The partitions of the last revoke are stopped and committed.
    Revoked,
    /// A commit made with this generation id found the generation over.
    CommitFenced(KafkaCode, i32),
    /// Leave the group (the consumer is closing).
    Leave,
}

/// State the group consumer reads without asking the driver.
#[derive(Debug, Default)]
pub(crate) struct GroupShared {
    /// The member's generation while it has one: what commits carry.
    pub generation: Mutex<Option<Generation>>,
    /// The application is inside a call that waits for records: it is polling, however
    /// long the wait (as a Java `poll(timeout)` is), so `max.poll.interval.ms` does not
    /// run out meanwhile.
    pub in_call: std::sync::atomic::AtomicBool,
}

/// Answers of the tasks the driver started.
enum Answer {
    Coordinator(Result<Broker>),
    Join(std::result::Result<JoinGroupResponse, crate::IoError>),
    Sync(std::result::Result<SyncGroupResponse, crate::IoError>),
    Heartbeat(std::result::Result<HeartbeatResponse, crate::IoError>),
    Leave(std::result::Result<LeaveGroupResponse, crate::IoError>),
    ConsumerHeartbeat(std::result::Result<ConsumerGroupHeartbeatResponse, crate::IoError>),
    /// Names of topic ids (KIP-848 assignments).
    TopicNames(std::collections::HashMap<Uuid, String>),
    /// Partition counts for the leader's assignment.
    Counts(PartitionCounts),
    /// A periodic refresh: the topics the subscription matches, and their counts.
    Refreshed(BTreeSet<String>, PartitionCounts),
}

/// The driver's state beside the engine.
struct Driver {
    client: Client,
    member: AnyMember,
    topics: Topics,
    to_consumer: mpsc::UnboundedSender<ToConsumer>,
    shared: Arc<GroupShared>,
    answers: mpsc::UnboundedSender<Answer>,
    coordinator: Option<Broker>,
    finding: bool,
    find_after: Instant,
    auto_commit: Option<Duration>,
    next_commit: Option<Instant>,
    refresh_interval: Duration,
    next_refresh: Instant,
    refreshing: bool,
}

/// Runs `member` until it leaves or fails.
pub(crate) async fn run(
    client: Client,
    member: AnyMember,
    topics: Topics,
    mut commands: mpsc::UnboundedReceiver<FromConsumer>,
    to_consumer: mpsc::UnboundedSender<ToConsumer>,
    shared: Arc<GroupShared>,
    auto_commit: Option<Duration>,
) {
    let (answers_tx, mut answers) = mpsc::unbounded_channel();
    let now = Instant::now();
    let refresh_interval = client.config().metadata.refresh_interval;
    let mut driver = Driver {
        client,
        member,
        topics,
        to_consumer,
        shared,
        answers: answers_tx,
        coordinator: None,
        finding: false,
        find_after: now,
        auto_commit,
        next_commit: auto_commit.map(|i| now + i),
        refresh_interval,
        next_refresh: now + refresh_interval,
        refreshing: false,
    };
    let mut consumer_gone = false;
    loop {
        let now = Instant::now();
        if driver.step(now) {
            break;
        }
        let wake = driver.next_wake(now);
        tokio::select! {
            Some(answer) = answers.recv() => driver.on_answer(answer, Instant::now()),
            command = commands.recv(), if !consumer_gone => match command {
                Some(c) => driver.on_command(c, Instant::now()),
                None => {
                    // Dropped without close: leave (a static member just stops).
                    consumer_gone = true;
                    driver.member.leave(Instant::now());
                }
            },
            _ = sleep_until(Some(wake)) => driver.on_timer(Instant::now()),
        }
    }
    if let Some(c) = driver.coordinator.take() {
        c.close();
    }
}

impl Driver {
    /// Moves events and requests out of the engine. Returns whether the member ended.
    fn step(&mut self, now: Instant) -> bool {
        while let Some(event) = self.member.poll_event() {
            match event {
                MemberEvent::NeedMetadata(topics) => self.fetch_counts(topics),
                MemberEvent::NeedTopicNames(ids) => self.fetch_topic_names(ids),
                MemberEvent::CoordinatorLost => self.lose_coordinator(now),
                MemberEvent::Left | MemberEvent::Failed(_) => {
                    self.publish_generation();
                    let _ = self.to_consumer.send(ToConsumer::Member(event));
                    return true;
                }
                other => {
                    self.publish_generation();
                    let _ = self.to_consumer.send(ToConsumer::Member(other));
                }
            }
        }
        self.publish_generation();
        if self.member.is_done() {
            return true;
        }
        if self.coordinator.is_none() && !self.finding && now >= self.find_after {
            self.find_coordinator();
        }
        while let Some(request) = self.member.poll_request() {
            self.send(request, now);
        }
        false
    }

    fn publish_generation(&self) {
        if let Ok(mut g) = self.shared.generation.lock() {
            *g = self.member.generation();
        }
    }

    fn next_wake(&self, now: Instant) -> Instant {
        let find = (self.coordinator.is_none() && !self.finding).then_some(self.find_after);
        [
            self.member.poll_timeout(),
            self.next_commit,
            Some(self.next_refresh),
            find,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now + Duration::from_secs(1))
    }

    fn on_timer(&mut self, now: Instant) {
        if self
            .shared
            .in_call
            .load(std::sync::atomic::Ordering::Acquire)
        {
            self.member.handle_poll(now);
        }
        self.member.handle_timeout(now);
        if self.member.session_expired(now) {
            tracing::info!(group = %self.member.settings().group_id, "no heartbeat answer within the session: looking for the coordinator again");
            self.member.handle_request_failed(now);
        }
        if let (Some(at), Some(interval)) = (self.next_commit, self.auto_commit)
            && now >= at
        {
            let _ = self.to_consumer.send(ToConsumer::CommitDue);
            self.next_commit = Some(now + interval);
        }
        if now >= self.next_refresh && !self.refreshing {
            self.next_refresh = now + self.refresh_interval;
            self.refresh();
        }
    }

    fn on_command(&mut self, command: FromConsumer, now: Instant) {
        match command {
            FromConsumer::Polled => self.member.handle_poll(now),
            FromConsumer::Revoked => self.member.handle_revoked(now),
            FromConsumer::CommitFenced(code, generation_id) => {
                self.member.handle_commit_fenced(code, generation_id, now)
            }
            FromConsumer::Leave => self.member.leave(now),
        }
    }

    fn on_answer(&mut self, answer: Answer, now: Instant) {
        match answer {
            Answer::Coordinator(found) => {
                self.finding = false;
                match found {
                    Ok(broker) => {
                        self.fall_back_to_classic_if_needed(&broker, now);
                        self.coordinator = Some(broker);
                        self.member.handle_coordinator_found(now);
                    }
                    Err(e) => {
                        tracing::debug!(group = %self.member.settings().group_id, error = %e, "no coordinator yet");
                        self.find_after = now + self.member.settings().retry_backoff;
                    }
                }
            }
            Answer::Join(Ok(r)) => self.member.handle_join(r, now),
            Answer::Sync(Ok(r)) => self.member.handle_sync(r, now),
            Answer::Heartbeat(Ok(r)) => self.member.handle_heartbeat(r, now),
            Answer::Leave(Ok(r)) => self.member.handle_leave(r),
            Answer::ConsumerHeartbeat(Ok(r)) => self.member.handle_consumer_heartbeat(r, now),
            Answer::TopicNames(names) => self.member.handle_topic_names(names, now),
            Answer::ConsumerHeartbeat(Err(e))
            | Answer::Join(Err(e))
            | Answer::Sync(Err(e))
            | Answer::Heartbeat(Err(e))
            | Answer::Leave(Err(e)) => {
                tracing::debug!(group = %self.member.settings().group_id, error = %e, "group request failed");
                self.member.handle_request_failed(now);
            }
            Answer::Counts(counts) => self.member.handle_metadata(counts, now),
            Answer::Refreshed(topics, counts) => {
                self.refreshing = false;
                if matches!(self.topics, Topics::Pattern(_)) {
                    self.member.subscribe(topics, now);
                }
                self.member.handle_metadata_changed(&counts, now);
            }
        }
    }

    fn lose_coordinator(&mut self, now: Instant) {
        if let Some(c) = self.coordinator.take() {
            c.close();
        }
        self.client
            .invalidate_coordinator(CoordinatorKind::Group, &self.member.settings().group_id);
        self.find_after = now + self.member.settings().retry_backoff;
    }

    fn find_coordinator(&mut self) {
        self.finding = true;
        let client = self.client.clone();
        let group = self.member.settings().group_id.clone();
        let answers = self.answers.clone();
        tokio::task::spawn_local(async move {
            let found = async {
                let broker = client.coordinator(&group).await?;
                let own = client.open_dedicated_connection(broker.id())?;
                // Connected, so its API versions are known (the protocol choice needs them).
                if let Err(e) = own.connect().await {
                    own.close();
                    return Err(e.into());
                }
                Ok(own)
            }
            .await;
            let _ = answers.send(Answer::Coordinator(found));
        });
    }

    fn send(&mut self, request: Outgoing, now: Instant) {
        let Some(broker) = self.coordinator.clone() else {
            self.member.handle_request_failed(now);
            return;
        };
        let timeout = request
            .response_timeout(self.member.settings())
            .unwrap_or(self.client.config().net.request_timeout);
        let answers = self.answers.clone();
        tokio::task::spawn_local(async move {
            let answer = match request {
                Outgoing::Join(r) => Answer::Join(broker.send_with_timeout(r, timeout).await),
                Outgoing::Sync(r) => Answer::Sync(broker.send_with_timeout(r, timeout).await),
                Outgoing::Heartbeat(r) => {
                    Answer::Heartbeat(broker.send_with_timeout(r, timeout).await)
                }
                Outgoing::Leave(r) => Answer::Leave(broker.send_with_timeout(r, timeout).await),
                Outgoing::ConsumerHeartbeat(r) => {
                    Answer::ConsumerHeartbeat(broker.send_with_timeout(r, timeout).await)
                }
            };
            let _ = answers.send(answer);
        });
    }

    /// A KIP-848 member whose coordinator does not offer the new protocol becomes a
    /// classic member, before it ever joined: a broker before 3.7 has no
    /// ConsumerGroupHeartbeat; 3.7 to 3.9 advertise it but answer UNSUPPORTED_VERSION
    /// unless the cluster finalized `group.version` 1 (4.0's default), which is what
    /// tells.
    fn fall_back_to_classic_if_needed(&mut self, broker: &Broker, now: Instant) {
        let AnyMember::Consumer(m) = &self.member else {
            return;
        };
        let offered = broker.api_versions().is_some_and(|v| {
            v.version_for(ApiKey::ConsumerGroupHeartbeat).is_some()
                && v.feature_level(GROUP_VERSION_FEATURE) >= 1
        });
        if offered {
            return;
        }
        tracing::warn!(
            group = %m.settings().group_id,
            broker = broker.id(),
            "group.protocol=consumer, but the coordinator does not offer it (no ConsumerGroupHeartbeat, or group.version not finalized at 1): using the classic protocol"
        );
        let settings = m.settings().clone();
        let topics = m.subscription().clone();
        self.member = AnyMember::Classic(Member::new(settings, topics, now));
    }

    /// Names of topic ids, from metadata (refreshed for every topic when one is not
    /// known yet: a topic just created).
    fn fetch_topic_names(&mut self, ids: Vec<Uuid>) {
        let client = self.client.clone();
        let answers = self.answers.clone();
        tokio::task::spawn_local(async move {
            let names = |client: &Client| {
                let snapshot = client.metadata();
                snapshot
                    .topics
                    .values()
                    .filter(|t| ids.contains(&t.id))
                    .map(|t| (t.id, t.name.clone()))
                    .collect::<std::collections::HashMap<_, _>>()
            };
            let mut found = names(&client);
            if found.len() < ids.len() {
                if let Err(e) = client.refresh_all_metadata().await {
                    tracing::warn!(error = %e, "metadata for topic ids failed");
                }
                found = names(&client);
            }
            let _ = answers.send(Answer::TopicNames(found));
        });
    }

    /// Partition counts of `topics` for the leader (what metadata knows after a
    /// refresh; topics it does not know are left out of the assignment).
    fn fetch_counts(&mut self, topics: Vec<String>) {
        let client = self.client.clone();
        let answers = self.answers.clone();
        tokio::task::spawn_local(async move {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            if let Err(e) = client.refresh_metadata(&names).await {
                tracing::warn!(error = %e, "metadata for the assignment failed; assigning with what is known");
            }
            let _ = answers.send(Answer::Counts(counts_known(&client, &topics)));
        });
    }

    /// A periodic refresh: the subscription's topics and their partition counts.
    fn refresh(&mut self) {
        self.refreshing = true;
        let client = self.client.clone();
        let answers = self.answers.clone();
        let topics = self.topics.clone();
        let subscribed: Vec<String> = self.member.subscription().iter().cloned().collect();
        tokio::task::spawn_local(async move {
            let matched = match topics.resolve(&client).await {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "metadata refresh failed");
                    subscribed.iter().cloned().collect()
                }
            };
            let counts = counts_known(&client, &matched.iter().cloned().collect::<Vec<_>>());
            let _ = answers.send(Answer::Refreshed(matched, counts));
        });
    }
}

/// Partition counts of `topics` from the client's metadata, leaving out topics it does
/// not know or that reported an error.
fn counts_known(client: &Client, topics: &[String]) -> PartitionCounts {
    let snapshot = client.metadata();
    counts_of(topics, |t| {
        snapshot
            .topics
            .get(t)
            .filter(|info| info.error.is_ok() && !info.partitions.is_empty())
            .and_then(|info| i32::try_from(info.partitions.len()).ok())
    })
}
