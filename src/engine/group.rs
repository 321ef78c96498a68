//! The classic consumer group member, sans-IO: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup for one member of one group, with the eager and the cooperative
//! (KIP-429) rebalance protocols and static membership (KIP-345).
//!
//! The driver (`group::driver`) finds the coordinator, sends what
//! [`Member::poll_request`] gives on a connection of its own (a JoinGroup may wait a
//! whole rebalance timeout, which must not hold up fetches), feeds the answers back,
//! and passes [`Member::poll_event`]'s events to the consumer. The consumer answers a
//! [`MemberEvent::Revoke`] with [`Member::handle_revoked`] once it has committed what it
//! consumed from those partitions.
//!
//! Rules, kept here alone:
//! - One request in flight at a time (heartbeats pause while a join or sync is out, as
//!   in the Java client).
//! - Eager: every owned partition is revoked before JoinGroup. Cooperative: partitions
//!   stay owned (and consumed) through the rebalance; the ones the new assignment takes
//!   away are revoked after SyncGroup, then the member rejoins at once so the leader can
//!   hand them on.
//! - Cooperative: after every SyncGroup the member heartbeats soon (50 ms, then doubling
//!   up to `heartbeat.interval.ms`) rather than a whole interval later, because a
//!   cooperative rebalance that moved partitions has a second round, started by the
//!   members that revoked rejoining at once; the others learn of it only from a
//!   heartbeat, and waiting the interval for it doubled the time to hand the revoked
//!   partitions on. The few extra heartbeats after a rebalance are its whole cost.
//! - A fencing answer (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) means the partitions may
//!   already be someone else's: they are reported lost (never committed), and the member
//!   joins again. FENCED_INSTANCE_ID, an authorization failure or an inconsistent
//!   protocol end the member.
//! - The application must come back within the rebalance timeout
//!   (`max.poll.interval.ms`) — see [`Member::handle_poll`]; if it does not, a dynamic
//!   member leaves the group (a static one lets its session run out), its partitions are
//!   lost, and it joins again on the next poll.
//! - The leader computes the assignment from the partition counts the driver fetched
//!   for every topic any member subscribed to, and asks for a rejoin when those counts
//!   change later.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::group::TopicPartition;
use crate::group::assignor::{AssignError, Assignor, Member as AssignedMember, PartitionCounts};
use crate::group::protocol::{
    ASSIGNMENT_VERSION, Assignment, GroupProtocolError, SUBSCRIPTION_VERSION, Subscription,
    decode_assignment, decode_subscription, encode_assignment, encode_sticky_user_data,
    encode_subscription,
};
use crate::protocol::messages::join_group::JoinGroupRequestProtocol;
use crate::protocol::messages::leave_group::MemberIdentity;
use crate::protocol::messages::sync_group::SyncGroupRequestAssignment;
use crate::protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use crate::protocol::{ApiKey, KafkaCode};

/// The first follow-up heartbeat after a cooperative SyncGroup comes this soon.
const FOLLOW_UP_FIRST: Duration = Duration::from_millis(50);

#[cfg(test)]
mod commit_fenced_tests;
pub(crate) mod kip848;
#[cfg(test)]
mod tests;

pub(crate) use kip848::ConsumerMember;

/// What the member needs to know about its group.
#[derive(Debug, Clone)]
pub(crate) struct MemberSettings {
    pub group_id: String,
    /// `group.instance.id` (static membership).
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`: how long a rebalance waits for members, and how long the
    /// application may stay away.
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// In preference order; all eager or all cooperative (checked by the config layer).
    pub assignors: Vec<Assignor>,
    pub retry_backoff: Duration,
    pub rack: Option<String>,
    /// KIP-848 only: the broker-side assignor to ask for.
    pub server_assignor: Option<String>,
}

/// The member's identity in one generation: what commits must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Generation {
    pub generation_id: i32,
    pub member_id: String,
    pub protocol: &'static str,
}

/// A request for the coordinator.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Join(JoinGroupRequest),
    Sync(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    Leave(LeaveGroupRequest),
    /// KIP-848's one request.
    ConsumerHeartbeat(ConsumerGroupHeartbeatRequest),
}

impl Outgoing {
    /// How long the response may take: a join waits for the whole group.
    pub fn response_timeout(&self, settings: &MemberSettings) -> Option<Duration> {
        match self {
            Outgoing::Join(_) => Some(settings.rebalance_timeout + Duration::from_secs(5)),
            _ => None,
        }
    }
}

/// Something the consumer must act on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MemberEvent {
    /// Stop consuming these partitions and commit what was consumed, then call
    /// [`Member::handle_revoked`].
    Revoke(Vec<TopicPartition>),
    /// These partitions are no longer the member's and may be someone else's already:
    /// stop consuming them without committing.
    Lost(Vec<TopicPartition>),
    /// Start consuming these partitions (added to what the member owns).
    Assigned {
        generation: Generation,
        added: Vec<TopicPartition>,
    },
    /// The leader needs the partition counts of these topics:
    /// [`Member::handle_metadata`].
    NeedMetadata(Vec<String>),
    /// A KIP-848 assignment names topics by ids the member cannot name:
    /// [`ConsumerMember::handle_topic_names`].
    NeedTopicNames(Vec<crate::protocol::Uuid>),
    /// Find the coordinator again, then [`Member::handle_coordinator_found`].
    CoordinatorLost,
    /// The member ended; nothing more will come.
    Failed(GroupError),
    /// The member left the group (after [`Member::leave`]).
    Left,
}

/// Why a member ended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// The coordinator refused a request for good.
    #[error("group {group}: {api:?} failed: {code}")]
    Refused {
        /// The group.
        group: String,
        /// The request.
        api: ApiKey,
        /// The broker's error.
        code: KafkaCode,
    },
    /// Another member joined with this member's `group.instance.id`.
    #[error("group {group}: fenced: another member uses group.instance.id {instance_id:?}")]
    FencedInstance {
        /// The group.
        group: String,
        /// The instance id.
        instance_id: String,
    },
    /// The coordinator chose an assignor this member did not offer.
    #[error(
        "group {group}: the coordinator chose protocol {protocol:?}, which this member did not offer"
    )]
    UnknownProtocol {
        /// The group.
        group: String,
        /// What it chose.
        protocol: String,
    },
    /// An embedded payload (a subscription or an assignment) did not decode or encode.
    #[error("group {group}: {source}")]
    Payload {
        /// The group.
        group: String,
        /// What went wrong.
        #[source]
        source: GroupProtocolErrorText,
    },
    /// The assignor could not assign (as the leader).
    #[error("group {group}: assignment failed: {message}")]
    Assignment {
        /// The group.
        group: String,
        /// Why.
        message: String,
    },
}

/// What went wrong with a consumer protocol payload (one that does not decode, say),
/// kept as text so that [`GroupError`] stays `Clone`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct GroupProtocolErrorText(String);

/// Where the member is in the protocol.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Must join (after `not_before`).
    Unjoined { not_before: Instant },
    /// Waiting for the consumer to revoke before joining (eager) or rejoining
    /// (cooperative).
    Revoking { then_join: bool },
    /// JoinGroup in flight.
    Joining,
    /// The leader waits for partition counts.
    AwaitingMetadata(PendingAssignment),
    /// SyncGroup in flight.
    Syncing,
    /// In the group with an assignment.
    Stable,
    /// The application stayed away past the rebalance timeout: out of the group until
    /// it polls again.
    PollExpired,
    /// LeaveGroup in flight, or leaving without one.
    Leaving,
    /// Ended.
    Done,
}

/// What the leader keeps between JoinGroup and the metadata it asked for.
#[derive(Debug, Clone, PartialEq)]
struct PendingAssignment {
    generation_id: i32,
    protocol: Assignor,
    members: Vec<AssignedMember>,
}

/// Which request is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Join,
    Sync {
        generation_id: i32,
        protocol: Assignor,
    },
    Heartbeat,
    Leave,
}

/// One member of one classic group.
#[derive(Debug)]
pub(crate) struct Member {
    settings: MemberSettings,
    state: State,
    member_id: String,
    generation: Option<Generation>,
    /// The partitions the consumer is consuming for this member.
    owned: BTreeSet<TopicPartition>,
    /// What an eager sticky member was assigned last, for its user data.
    previous: (Vec<TopicPartition>, i32),
    subscription: BTreeSet<String>,
    coordinator_known: bool,
    in_flight: Option<InFlight>,
    outgoing: Option<Outgoing>,
    events: VecDeque<MemberEvent>,
    rejoin_needed: bool,
    next_heartbeat: Instant,
    /// After a cooperative SyncGroup: the wait before the heartbeat after the next one,
    /// while it is shorter than the interval (see the module's rules).
    follow_up: Option<Duration>,
    last_heartbeat_ok: Instant,
    last_poll: Instant,
    /// Partitions being revoked (waiting for `handle_revoked`).
    revoking: Vec<TopicPartition>,
    /// The partition counts the leader assigned with.
    assigned_counts: Option<PartitionCounts>,
    is_leader: bool,
}

fn coordinator_error(code: KafkaCode) -> bool {
    [
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::COORDINATOR_LOAD_IN_PROGRESS,
    ]
    .contains(&code)
}

/// Errors after which the member cannot go on.
fn fatal_error(code: KafkaCode) -> bool {
    [
        KafkaCode::GROUP_AUTHORIZATION_FAILED,
        KafkaCode::INCONSISTENT_GROUP_PROTOCOL,
        KafkaCode::INVALID_SESSION_TIMEOUT,
        KafkaCode::INVALID_GROUP_ID,
        KafkaCode::GROUP_MAX_SIZE_REACHED,
        KafkaCode::UNSUPPORTED_VERSION,
        KafkaCode::GROUP_ID_NOT_FOUND,
    ]
    .contains(&code)
        || !code.is_retriable()
            && ![
                KafkaCode::UNKNOWN_MEMBER_ID,
                KafkaCode::ILLEGAL_GENERATION,
                KafkaCode::REBALANCE_IN_PROGRESS,
                KafkaCode::MEMBER_ID_REQUIRED,
                KafkaCode::FENCED_INSTANCE_ID,
            ]
            .contains(&code)
}

impl Member {
    /// A member about to join `settings.group_id` for `topics`.
    pub fn new(settings: MemberSettings, topics: BTreeSet<String>, now: Instant) -> Member {
        Member {
            state: State::Unjoined { not_before: now },
            member_id: String::new(),
            generation: None,
            owned: BTreeSet::new(),
            previous: (Vec::new(), -1),
            subscription: topics,
            coordinator_known: false,
            in_flight: None,
            outgoing: None,
            events: VecDeque::new(),
            rejoin_needed: false,
            next_heartbeat: now,
            follow_up: None,
            last_heartbeat_ok: now,
            last_poll: now,
            revoking: Vec::new(),
            assigned_counts: None,
            is_leader: false,
            settings,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &MemberSettings {
        &self.settings
    }

    /// The current generation, when the member is in the group with an assignment.
    pub fn generation(&self) -> Option<&Generation> {
        self.generation.as_ref()
    }

    /// Whether the member is the group's leader in the current generation.
    #[cfg(test)] // read by the tests only, so far
    pub fn is_leader(&self) -> bool {
        self.is_leader
    }

    /// The partitions owned now.
    #[cfg(test)] // read by the tests only, so far
    pub fn owned(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// The topics subscribed to.
    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.subscription
    }

    fn cooperative(&self) -> bool {
        self.settings.assignors.iter().all(|a| a.is_cooperative())
    }

    fn group(&self) -> String {
        self.settings.group_id.clone()
    }

    fn fail(&mut self, error: GroupError) {
        tracing::warn!(group = %self.settings.group_id, %error, "group member ended");
        self.state = State::Done;
        self.outgoing = None;
        self.generation = None;
        self.events.push_back(MemberEvent::Failed(error));
    }

    fn refused(&mut self, api: ApiKey, code: KafkaCode) {
        if code == KafkaCode::FENCED_INSTANCE_ID {
            let error = GroupError::FencedInstance {
                group: self.group(),
                instance_id: self.settings.instance_id.clone().unwrap_or_default(),
            };
            return self.fail(error);
        }
        let error = GroupError::Refused {
            group: self.group(),
            api,
            code,
        };
        self.fail(error);
    }

    /// Leaves the group: partitions are lost, the member id kept unless the coordinator
    /// forgot it, and a join follows.
    fn lose_everything(&mut self, forget_member_id: bool, now: Instant) {
        if forget_member_id {
            self.member_id.clear();
        }
        self.generation = None;
        self.is_leader = false;
        if !self.owned.is_empty() {
            let lost: Vec<_> = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MemberEvent::Lost(lost));
        }
        self.state = State::Unjoined { not_before: now };
    }

    fn coordinator_lost(&mut self, now: Instant) {
        self.coordinator_known = false;
        self.events.push_back(MemberEvent::CoordinatorLost);
        if matches!(self.state, State::Joining | State::Syncing) {
            self.state = State::Unjoined {
                not_before: now + self.settings.retry_backoff,
            };
        }
    }

    /// The coordinator is known (again): requests can go out.
    pub fn handle_coordinator_found(&mut self, now: Instant) {
        self.coordinator_known = true;
        self.advance(now);
    }

    /// The request in flight got no answer (the connection broke or timed out).
    pub fn handle_request_failed(&mut self, now: Instant) {
        let was = self.in_flight.take();
        if was == Some(InFlight::Leave) && self.state == State::Leaving {
            return self.finish_leaving();
        }
        self.coordinator_lost(now);
        if matches!(was, Some(InFlight::Join | InFlight::Sync { .. })) {
            self.state = State::Unjoined {
                not_before: now + self.settings.retry_backoff,
            };
        }
        self.advance(now);
    }

    /// The application polled (took records, or asked for them).
    pub fn handle_poll(&mut self, now: Instant) {
        self.last_poll = now;
        if self.state == State::PollExpired {
            self.state = State::Unjoined { not_before: now };
        }
        self.advance(now);
    }

    /// The subscription changed (a regex matched new topics, or the user subscribed
    /// anew): the member rejoins so the leader reassigns.
    pub fn subscribe(&mut self, topics: BTreeSet<String>, now: Instant) {
        if topics != self.subscription {
            self.subscription = topics;
            self.rejoin_needed = true;
        }
        self.advance(now);
    }

    /// Fresh partition counts: the leader rejoins when those it assigned with changed,
    /// or when a topic it subscribes to has metadata now and had none then.
    pub fn handle_metadata_changed(&mut self, counts: &PartitionCounts, now: Instant) {
        if let (true, Some(assigned)) = (self.is_leader, &self.assigned_counts) {
            let changed = counts
                .iter()
                .any(|(topic, count)| match assigned.get(topic) {
                    Some(c) => c != count,
                    // A subscribed topic that had no metadata when the leader assigned.
                    None => self.subscription.contains(topic),
                });
            if changed {
                tracing::info!(group = %self.settings.group_id, "partition counts changed: rebalancing");
                self.rejoin_needed = true;
            }
        }
        self.advance(now);
    }

    /// A commit made with generation `generation_id` was refused because the generation
    /// moved on: rejoin. A refusal of a generation already left behind, or one that comes
    /// while a rebalance is under way, says nothing new and is ignored: a commit in flight
    /// when the coordinator moves to the next generation is refused by design, and the
    /// join under way settles the member's place (losing the partitions for it would turn
    /// every KIP-429 cooperative rebalance of members that commit as they go into a
    /// stop-the-world one). The Java client's commit handler does the same: it resets the
    /// generation only if it is unchanged and no rebalance is in progress.
    pub fn handle_commit_fenced(&mut self, code: KafkaCode, generation_id: i32, now: Instant) {
        if code != KafkaCode::FENCED_INSTANCE_ID && self.commit_outdated(generation_id) {
            tracing::debug!(
                group = %self.settings.group_id, %code, generation = generation_id,
                "commit of an earlier generation refused: ignored"
            );
            return self.advance(now);
        }
        match code {
            KafkaCode::REBALANCE_IN_PROGRESS => self.rejoin_needed = true,
            KafkaCode::UNKNOWN_MEMBER_ID => self.lose_everything(true, now),
            KafkaCode::ILLEGAL_GENERATION => self.lose_everything(false, now),
            KafkaCode::FENCED_INSTANCE_ID => self.refused(ApiKey::OffsetCommit, code),
            _ => {}
        }
        self.advance(now);
    }

    /// Whether a commit made with `generation_id` belongs to a generation this member has
    /// left behind, or is leaving in a rebalance under way.
    fn commit_outdated(&self, generation_id: i32) -> bool {
        let rebalancing = matches!(
            self.state,
            State::Unjoined { .. }
                | State::Revoking { then_join: true }
                | State::Joining
                | State::AwaitingMetadata(_)
                | State::Syncing
        );
        rebalancing
            || self
                .generation
                .as_ref()
                .is_none_or(|g| g.generation_id != generation_id)
    }

    /// The consumer has stopped the partitions of the last [`MemberEvent::Revoke`] and
    /// committed what it consumed from them.
    pub fn handle_revoked(&mut self, now: Instant) {
        let State::Revoking { then_join } = self.state else {
            return;
        };
        for tp in std::mem::take(&mut self.revoking) {
            self.owned.remove(&tp);
        }
        self.state = if then_join || self.generation.is_none() {
            State::Unjoined { not_before: now }
        } else {
            State::Stable
        };
        if !then_join {
            // Cooperative: the partitions given up go to their new owners in the
            // rebalance this rejoin starts.
            self.rejoin_needed = true;
        }
        self.advance(now);
    }

    /// Leaves the group (after the consumer revoked and committed). A static member
    /// does not send LeaveGroup: its partitions wait for it until the session times
    /// out, which is the point of static membership.
    pub fn leave(&mut self, now: Instant) {
        if self.state == State::Done || self.state == State::Leaving {
            return;
        }
        self.owned.clear();
        self.state = State::Leaving;
        self.send_leave_or_finish();
        let _ = now;
    }

    /// Sends LeaveGroup for a dynamic member the coordinator knows; otherwise ends once
    /// no request is out.
    fn send_leave_or_finish(&mut self) {
        let dynamic = self.settings.instance_id.is_none();
        if dynamic && !self.member_id.is_empty() && self.coordinator_known {
            self.outgoing = Some(self.leave_request("the consumer is closing"));
            self.in_flight = Some(InFlight::Leave);
        } else if self.in_flight.is_none() {
            self.finish_leaving();
        }
    }

    fn finish_leaving(&mut self) {
        self.state = State::Done;
        self.generation = None;
        self.events.push_back(MemberEvent::Left);
    }

    /// LeaveGroup v3+ (KIP-345, brokers 2.4 and later): the member goes in `members`
    /// only, since the top-level `member_id` is v0-2 and a version that cannot carry a
    /// set field refuses to encode it (LeaveGroupRequest.json).
    fn leave_request(&self, reason: &str) -> Outgoing {
        // Version 3+ (Kafka 2.4+) names the member in `members` only: a top-level
        // member id as well fails to encode at every version, and no LeaveGroup is sent.
        Outgoing::Leave(
            LeaveGroupRequest::default()
                .with_group_id(self.group())
                .with_members(vec![
                    MemberIdentity::default()
                        .with_member_id(self.member_id.clone())
                        .with_group_instance_id(self.settings.instance_id.clone())
                        .with_reason(Some(reason.to_string())),
                ]),
        )
    }

    /// Time passed: heartbeats, backoffs, the poll interval.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When [`Member::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let poll_expiry = self.last_poll + self.settings.rebalance_timeout;
        let timer = match &self.state {
            State::Unjoined { not_before } if self.coordinator_known => Some(*not_before),
            State::Stable | State::Revoking { then_join: false } if self.coordinator_known => {
                Some(self.next_heartbeat)
            }
            _ => None,
        };
        [timer, self.polls_expected().then_some(poll_expiry)]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next request to send, if any.
    pub fn poll_request(&mut self) -> Option<Outgoing> {
        self.outgoing.take()
    }

    /// The next event for the consumer, if any.
    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        self.events.pop_front()
    }

    /// Whether the member ended (failed or left).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Moves the state machine on as far as it can without an answer.
    fn advance(&mut self, now: Instant) {
        if self.check_poll_interval(now) {
            return;
        }
        if self.in_flight.is_some() || !self.coordinator_known {
            return;
        }
        match self.state.clone() {
            State::Stable if self.rejoin_needed => {
                self.state = State::Unjoined { not_before: now };
                self.advance(now);
            }
            State::Stable | State::Revoking { then_join: false } if now >= self.next_heartbeat => {
                self.send_heartbeat(now);
            }
            State::Unjoined { not_before } if now >= not_before => self.prepare_join(now),
            _ => {}
        }
    }

    /// Leaves the group when the application has not polled for the rebalance
    /// timeout. Returns whether it did.
    fn check_poll_interval(&mut self, now: Instant) -> bool {
        if !self.polls_expected() || now < self.last_poll + self.settings.rebalance_timeout {
            return false;
        }
        tracing::warn!(
            group = %self.settings.group_id,
            interval = ?self.settings.rebalance_timeout,
            "the application did not poll within max.poll.interval.ms: leaving the group"
        );
        if self.settings.instance_id.is_none()
            && !self.member_id.is_empty()
            && self.coordinator_known
        {
            // Fire and forget: the answer is not waited for.
            self.outgoing = Some(self.leave_request("the application stopped polling"));
            self.in_flight = Some(InFlight::Leave);
        }
        self.lose_everything(true, now);
        self.state = State::PollExpired;
        true
    }

    /// Whether the application must keep polling: in the group or on the way in (the
    /// states [`Member::poll_timeout`] reports the poll deadline for, and the ones
    /// `check_poll_interval` acts in, so that deadline always moves the member on).
    fn polls_expected(&self) -> bool {
        !matches!(
            self.state,
            State::Done | State::Leaving | State::PollExpired
        )
    }

    fn send_heartbeat(&mut self, now: Instant) {
        let Some(generation) = &self.generation else {
            return;
        };
        self.outgoing = Some(Outgoing::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(self.group())
                .with_generation_id(generation.generation_id)
                .with_member_id(self.member_id.clone())
                .with_group_instance_id(self.settings.instance_id.clone()),
        ));
        self.in_flight = Some(InFlight::Heartbeat);
        self.next_heartbeat = now + self.next_heartbeat_wait();
    }

    /// The wait until the heartbeat after the one going now: the interval, or the next
    /// step of a cooperative follow-up (which doubles until it reaches the interval).
    fn next_heartbeat_wait(&mut self) -> Duration {
        let interval = self.settings.heartbeat_interval;
        match self.follow_up.take() {
            Some(wait) if wait < interval => {
                self.follow_up = Some(wait * 2);
                wait
            }
            _ => interval,
        }
    }

    /// Revokes what must go before a join, or joins.
    fn prepare_join(&mut self, now: Instant) {
        let to_revoke: Vec<TopicPartition> = if self.cooperative() {
            self.owned
                .iter()
                .filter(|tp| !self.subscription.contains(&tp.topic))
                .cloned()
                .collect()
        } else {
            self.owned.iter().cloned().collect()
        };
        if !to_revoke.is_empty() {
            self.revoking = to_revoke.clone();
            self.state = State::Revoking { then_join: true };
            self.events.push_back(MemberEvent::Revoke(to_revoke));
            return;
        }
        match self.join_request() {
            Ok(request) => {
                self.rejoin_needed = false;
                self.outgoing = Some(Outgoing::Join(request));
                self.in_flight = Some(InFlight::Join);
                self.state = State::Joining;
            }
            Err(source) => self.fail(self.payload_error(source)),
        }
        let _ = now;
    }

    fn payload_error(&self, source: GroupProtocolError) -> GroupError {
        GroupError::Payload {
            group: self.group(),
            source: GroupProtocolErrorText(source.to_string()),
        }
    }

    fn join_request(&self) -> Result<JoinGroupRequest, GroupProtocolError> {
        let mut protocols = Vec::with_capacity(self.settings.assignors.len());
        for assignor in &self.settings.assignors {
            protocols.push(
                JoinGroupRequestProtocol::default()
                    .with_name(assignor.name().to_string())
                    .with_metadata(self.subscription_for(*assignor)?),
            );
        }
        Ok(JoinGroupRequest::default()
            .with_group_id(self.group())
            .with_session_timeout_ms(millis(self.settings.session_timeout))
            .with_rebalance_timeout_ms(millis(self.settings.rebalance_timeout))
            .with_member_id(self.member_id.clone())
            .with_group_instance_id(self.settings.instance_id.clone())
            .with_protocol_type("consumer".to_string())
            .with_protocols(protocols)
            .with_reason(None))
    }

    fn subscription_for(&self, assignor: Assignor) -> Result<Bytes, GroupProtocolError> {
        let generation = self.generation.as_ref().map_or(-1, |g| g.generation_id);
        let user_data = match assignor {
            Assignor::Sticky => Some(encode_sticky_user_data(&self.previous.0, self.previous.1)?),
            // Java's CooperativeStickyAssignor sends the generation for members that
            // read subscriptions older than v2.
            Assignor::CooperativeSticky => Some(Bytes::copy_from_slice(&generation.to_be_bytes())),
            Assignor::Range | Assignor::RoundRobin => None,
        };
        let subscription = Subscription {
            topics: self.subscription.iter().cloned().collect(),
            user_data,
            owned_partitions: self.owned.iter().cloned().collect(),
            generation_id: (generation >= 0).then_some(generation),
            rack_id: self.settings.rack.clone(),
        };
        encode_subscription(&subscription, SUBSCRIPTION_VERSION)
    }

    /// The JoinGroup answer (or its failure).
    pub fn handle_join(&mut self, response: JoinGroupResponse, now: Instant) {
        if self.in_flight != Some(InFlight::Join) {
            return;
        }
        self.in_flight = None;
        if self.state != State::Joining {
            // Left, or failed, while the join was out. Leaving during a first join: the
            // answer names the member the coordinator now knows, which must leave.
            if self.state == State::Leaving && self.member_id.is_empty() {
                self.member_id = response.member_id;
            }
            return self.after_stray_answer(now);
        }
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            return self.join_failed(code, response.member_id, now);
        }
        self.member_id = response.member_id.clone();
        let chosen = response.protocol_name.clone().unwrap_or_default();
        let Some(protocol) = self
            .settings
            .assignors
            .iter()
            .copied()
            .find(|a| a.name() == chosen)
        else {
            let error = GroupError::UnknownProtocol {
                group: self.group(),
                protocol: chosen,
            };
            return self.fail(error);
        };
        self.is_leader = response.leader == self.member_id && !response.skip_assignment;
        if !self.is_leader {
            return self.send_sync(response.generation_id, protocol, Vec::new());
        }
        match self.leader_members(&response) {
            Ok(members) => {
                let topics: BTreeSet<String> = members
                    .iter()
                    .flat_map(|m| m.subscription.topics.iter().cloned())
                    .collect();
                self.state = State::AwaitingMetadata(PendingAssignment {
                    generation_id: response.generation_id,
                    protocol,
                    members,
                });
                self.events
                    .push_back(MemberEvent::NeedMetadata(topics.into_iter().collect()));
            }
            Err(source) => self.fail(self.payload_error(source)),
        }
    }

    fn after_stray_answer(&mut self, now: Instant) {
        if self.state == State::Leaving {
            self.send_leave_or_finish();
        }
        let _ = now;
    }

    fn join_failed(&mut self, code: KafkaCode, member_id: String, now: Instant) {
        tracing::debug!(group = %self.settings.group_id, %code, "JoinGroup failed");
        self.state = State::Unjoined { not_before: now };
        match code {
            KafkaCode::MEMBER_ID_REQUIRED => self.member_id = member_id,
            KafkaCode::UNKNOWN_MEMBER_ID => self.lose_everything(true, now),
            KafkaCode::ILLEGAL_GENERATION => self.lose_everything(false, now),
            KafkaCode::REBALANCE_IN_PROGRESS => {}
            c if coordinator_error(c) => self.coordinator_lost(now),
            c if fatal_error(c) || c == KafkaCode::FENCED_INSTANCE_ID => {
                return self.refused(ApiKey::JoinGroup, c);
            }
            _ => {
                self.state = State::Unjoined {
                    not_before: now + self.settings.retry_backoff,
                }
            }
        }
        self.advance(now);
    }

    fn leader_members(
        &self,
        response: &JoinGroupResponse,
    ) -> Result<Vec<AssignedMember>, GroupProtocolError> {
        response
            .members
            .iter()
            .map(|m| {
                Ok(AssignedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    subscription: decode_subscription(&m.metadata)?,
                })
            })
            .collect()
    }

    /// The partition counts the leader asked for ([`MemberEvent::NeedMetadata`]).
    /// Topics without metadata are left out of the assignment, as in Java.
    pub fn handle_metadata(&mut self, counts: PartitionCounts, now: Instant) {
        let State::AwaitingMetadata(pending) = self.state.clone() else {
            return;
        };
        let assigned = match pending.protocol.assign(&pending.members, &counts) {
            Ok(a) => a,
            Err(e) => return self.assignment_failed(e),
        };
        let mut assignments = Vec::with_capacity(assigned.len());
        for (member_id, partitions) in assigned {
            let bytes = encode_assignment(
                &Assignment {
                    partitions,
                    user_data: None,
                },
                ASSIGNMENT_VERSION,
            );
            match bytes {
                Ok(b) => assignments.push(
                    SyncGroupRequestAssignment::default()
                        .with_member_id(member_id)
                        .with_assignment(b),
                ),
                Err(source) => return self.fail(self.payload_error(source)),
            }
        }
        self.assigned_counts = Some(counts);
        self.send_sync(pending.generation_id, pending.protocol, assignments);
        let _ = now;
    }

    fn assignment_failed(&mut self, error: AssignError) {
        let error = GroupError::Assignment {
            group: self.group(),
            message: error.to_string(),
        };
        self.fail(error);
    }

    fn send_sync(
        &mut self,
        generation_id: i32,
        protocol: Assignor,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) {
        self.outgoing = Some(Outgoing::Sync(
            SyncGroupRequest::default()
                .with_group_id(self.group())
                .with_generation_id(generation_id)
                .with_member_id(self.member_id.clone())
                .with_group_instance_id(self.settings.instance_id.clone())
                .with_protocol_type(Some("consumer".to_string()))
                .with_protocol_name(Some(protocol.name().to_string()))
                .with_assignments(assignments),
        ));
        self.in_flight = Some(InFlight::Sync {
            generation_id,
            protocol,
        });
        self.state = State::Syncing;
    }

    /// The SyncGroup answer.
    pub fn handle_sync(&mut self, response: SyncGroupResponse, now: Instant) {
        let Some(InFlight::Sync {
            generation_id,
            protocol,
        }) = self.in_flight
        else {
            return;
        };
        self.in_flight = None;
        if self.state != State::Syncing {
            return self.after_stray_answer(now);
        }
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            return self.sync_failed(code, now);
        }
        let assignment = match decode_assignment(&response.assignment) {
            Ok(a) => a,
            Err(source) => return self.fail(self.payload_error(source)),
        };
        self.install(generation_id, protocol, assignment.partitions, now);
    }

    fn sync_failed(&mut self, code: KafkaCode, now: Instant) {
        tracing::debug!(group = %self.settings.group_id, %code, "SyncGroup failed");
        self.state = State::Unjoined { not_before: now };
        match code {
            KafkaCode::REBALANCE_IN_PROGRESS => {}
            KafkaCode::UNKNOWN_MEMBER_ID => self.lose_everything(true, now),
            KafkaCode::ILLEGAL_GENERATION => self.lose_everything(false, now),
            c if coordinator_error(c) => self.coordinator_lost(now),
            c if fatal_error(c) || c == KafkaCode::FENCED_INSTANCE_ID => {
                return self.refused(ApiKey::SyncGroup, c);
            }
            _ => {
                self.state = State::Unjoined {
                    not_before: now + self.settings.retry_backoff,
                }
            }
        }
        self.advance(now);
    }

    /// Takes the new assignment: what was added is assigned; under the cooperative
    /// protocol what was taken away is revoked first (then a rejoin follows).
    fn install(
        &mut self,
        generation_id: i32,
        protocol: Assignor,
        partitions: Vec<TopicPartition>,
        now: Instant,
    ) {
        let new: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        let revoked: Vec<_> = self.owned.difference(&new).cloned().collect();
        let added: Vec<_> = new.difference(&self.owned).cloned().collect();
        let generation = Generation {
            generation_id,
            member_id: self.member_id.clone(),
            protocol: protocol.name(),
        };
        tracing::info!(
            group = %self.settings.group_id, generation = generation_id,
            member = %self.member_id, leader = self.is_leader,
            assigned = new.len(), added = added.len(), revoked = revoked.len(),
            "joined the group"
        );
        self.generation = Some(generation.clone());
        self.previous = (new.iter().cloned().collect(), generation_id);
        self.owned.extend(added.iter().cloned());
        self.last_heartbeat_ok = now;
        self.schedule_heartbeats_after_sync(now);
        self.state = State::Stable;
        if !revoked.is_empty() {
            self.revoking = revoked.clone();
            self.state = State::Revoking { then_join: false };
            self.events.push_back(MemberEvent::Revoke(revoked));
        }
        self.events
            .push_back(MemberEvent::Assigned { generation, added });
        self.advance(now);
    }

    /// The first heartbeat after a SyncGroup: an interval later, or (cooperative) soon,
    /// to hear of a second round promptly (see the module's rules).
    fn schedule_heartbeats_after_sync(&mut self, now: Instant) {
        let interval = self.settings.heartbeat_interval;
        if self.cooperative() && FOLLOW_UP_FIRST < interval {
            self.next_heartbeat = now + FOLLOW_UP_FIRST;
            self.follow_up = Some(FOLLOW_UP_FIRST * 2);
        } else {
            self.next_heartbeat = now + interval;
            self.follow_up = None;
        }
    }

    /// The Heartbeat answer.
    pub fn handle_heartbeat(&mut self, response: HeartbeatResponse, now: Instant) {
        if self.in_flight != Some(InFlight::Heartbeat) {
            return;
        }
        self.in_flight = None;
        if !matches!(
            self.state,
            State::Stable | State::Revoking { then_join: false }
        ) {
            self.after_stray_answer(now);
            return self.advance(now);
        }
        let code = KafkaCode(response.error_code);
        match code {
            KafkaCode::NONE => self.last_heartbeat_ok = now,
            KafkaCode::REBALANCE_IN_PROGRESS => {
                tracing::debug!(group = %self.settings.group_id, "rebalance in progress: rejoining");
                self.rejoin_needed = true;
            }
            KafkaCode::UNKNOWN_MEMBER_ID => self.lose_everything(true, now),
            KafkaCode::ILLEGAL_GENERATION => self.lose_everything(false, now),
            c if coordinator_error(c) => self.coordinator_lost(now),
            c if fatal_error(c) || c == KafkaCode::FENCED_INSTANCE_ID => {
                return self.refused(ApiKey::Heartbeat, c);
            }
            _ => self.next_heartbeat = now + self.settings.retry_backoff,
        }
        self.advance(now);
    }

    /// The LeaveGroup answer (its error does not matter: the member is gone either way).
    pub fn handle_leave(&mut self, response: LeaveGroupResponse) {
        if self.in_flight != Some(InFlight::Leave) {
            return;
        }
        self.in_flight = None;
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            tracing::debug!(group = %self.settings.group_id, %code, "LeaveGroup refused");
        }
        if self.state == State::Leaving {
            self.finish_leaving();
        }
    }

    /// Whether a session is running out without a heartbeat answer (the coordinator may
    /// have forgotten the member); the driver looks for the coordinator again.
    pub fn session_expired(&self, now: Instant) -> bool {
        // Without a coordinator the driver is looking for one already.
        self.coordinator_known
            && matches!(self.state, State::Stable)
            && now >= self.last_heartbeat_ok + self.settings.session_timeout
    }
}

/// A member of either protocol, as the driver sees it.
#[derive(Debug)]
pub(crate) enum AnyMember {
    Classic(Member),
    Consumer(ConsumerMember),
}

/// Calls `$method` on whichever member it is.
macro_rules! either {
    ($self:ident, $m:ident => $e:expr) => {
        match $self {
            AnyMember::Classic($m) => $e,
            AnyMember::Consumer($m) => $e,
        }
    };
}

impl AnyMember {
    pub fn settings(&self) -> &MemberSettings {
        either!(self, m => m.settings())
    }
    pub fn generation(&self) -> Option<Generation> {
        match self {
            AnyMember::Classic(m) => m.generation().cloned(),
            AnyMember::Consumer(m) => m.generation(),
        }
    }
    pub fn subscription(&self) -> &BTreeSet<String> {
        either!(self, m => m.subscription())
    }
    pub fn is_done(&self) -> bool {
        either!(self, m => m.is_done())
    }
    pub fn poll_request(&mut self) -> Option<Outgoing> {
        either!(self, m => m.poll_request())
    }
    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        either!(self, m => m.poll_event())
    }
    pub fn poll_timeout(&self) -> Option<Instant> {
        either!(self, m => m.poll_timeout())
    }
    pub fn handle_timeout(&mut self, now: Instant) {
        either!(self, m => m.handle_timeout(now))
    }
    pub fn handle_coordinator_found(&mut self, now: Instant) {
        either!(self, m => m.handle_coordinator_found(now))
    }
    pub fn handle_request_failed(&mut self, now: Instant) {
        either!(self, m => m.handle_request_failed(now))
    }
    pub fn handle_poll(&mut self, now: Instant) {
        either!(self, m => m.handle_poll(now))
    }
    pub fn subscribe(&mut self, topics: BTreeSet<String>, now: Instant) {
        either!(self, m => m.subscribe(topics, now))
    }
    /// `generation_id`: what the refused commit carried (the classic member ignores a
    /// refusal of a generation it has left behind).
    pub fn handle_commit_fenced(&mut self, code: KafkaCode, generation_id: i32, now: Instant) {
        match self {
            AnyMember::Classic(m) => m.handle_commit_fenced(code, generation_id, now),
            AnyMember::Consumer(m) => m.handle_commit_fenced(code, now),
        }
    }
    pub fn handle_revoked(&mut self, now: Instant) {
        either!(self, m => m.handle_revoked(now))
    }
    pub fn leave(&mut self, now: Instant) {
        either!(self, m => m.leave(now))
    }
    /// Classic only: the session ran out without a heartbeat answer.
    pub fn session_expired(&self, now: Instant) -> bool {
        match self {
            AnyMember::Classic(m) => m.session_expired(now),
            AnyMember::Consumer(_) => false,
        }
    }
    /// Classic only: the leader's partition counts.
    pub fn handle_metadata(&mut self, counts: PartitionCounts, now: Instant) {
        if let AnyMember::Classic(m) = self {
            m.handle_metadata(counts, now)
        }
    }
    /// Classic only: a refresh's partition counts.
    pub fn handle_metadata_changed(&mut self, counts: &PartitionCounts, now: Instant) {
        if let AnyMember::Classic(m) = self {
            m.handle_metadata_changed(counts, now)
        }
    }
    /// KIP-848 only: names for an assignment's topic ids.
    pub fn handle_topic_names(
        &mut self,
        names: std::collections::HashMap<crate::protocol::Uuid, String>,
        now: Instant,
    ) {
        if let AnyMember::Consumer(m) = self {
            m.handle_topic_names(names, now)
        }
    }
    pub fn handle_join(&mut self, r: JoinGroupResponse, now: Instant) {
        if let AnyMember::Classic(m) = self {
            m.handle_join(r, now)
        }
    }
    pub fn handle_sync(&mut self, r: SyncGroupResponse, now: Instant) {
        if let AnyMember::Classic(m) = self {
            m.handle_sync(r, now)
        }
    }
    pub fn handle_heartbeat(&mut self, r: HeartbeatResponse, now: Instant) {
        if let AnyMember::Classic(m) = self {
            m.handle_heartbeat(r, now)
        }
    }
    pub fn handle_leave(&mut self, r: LeaveGroupResponse) {
        if let AnyMember::Classic(m) = self {
            m.handle_leave(r)
        }
    }
    pub fn handle_consumer_heartbeat(&mut self, r: ConsumerGroupHeartbeatResponse, now: Instant) {
        if let AnyMember::Consumer(m) = self {
            m.handle_heartbeat(r, now)
        }
    }
}

/// Whole milliseconds, saturating at `i32::MAX`.
fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Partition counts for `topics` from a metadata snapshot, leaving out unknown ones.
pub(crate) fn counts_of<'a>(
    topics: impl IntoIterator<Item = &'a String>,
    count: impl Fn(&str) -> Option<i32>,
) -> PartitionCounts {
    let mut counts = BTreeMap::new();
    for topic in topics {
        if let Some(c) = count(topic) {
            counts.insert(topic.clone(), c);
        }
    }
    counts
}
