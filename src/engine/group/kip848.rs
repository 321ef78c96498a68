//! The KIP-848 group member (`group.protocol=consumer`), sans-IO: one
//! ConsumerGroupHeartbeat loop in place of JoinGroup/SyncGroup/Heartbeat. The coordinator
//! runs the assignor (`group.remote.assignor`, or the broker's default) and hands each
//! member the partitions it may own now; the member reconciles towards them and tells
//! the coordinator what it owns in its next heartbeat.
//!
//! Rules, kept here alone:
//! - Joining is a heartbeat at epoch 0 with the full subscription; the member id is the
//!   client's own (given at creation, a random UUID, as KIP-848's v1 asks). Every
//!   heartbeat carries the full state (subscription, owned partitions): allowed by the
//!   protocol, and it makes a heartbeat after any failure correct without bookkeeping.
//! - Reconciling: partitions the new assignment no longer holds are revoked first (the
//!   consumer commits what it consumed, then [`ConsumerMember::handle_revoked`]), then
//!   the new ones are assigned, then a heartbeat goes at once to acknowledge. Partitions
//!   that stay are never stopped. An assignment naming topic ids the client's metadata
//!   does not know waits for [`ConsumerMember::handle_topic_names`].
//! - One heartbeat in flight at a time, at the interval the coordinator gives.
//! - FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the partitions are lost (not committed)
//!   and the member joins again at epoch 0 with the same id. UNRELEASED_INSTANCE_ID,
//!   FENCED_INSTANCE_ID, an unsupported assignor, an authorization failure end it.
//! - Leaving is a heartbeat at epoch -1 (dynamic) or -2 (static: the partitions wait
//!   for the member until its session times out).
//! - The application must come back within `max.poll.interval.ms` (see
//!   [`ConsumerMember::handle_poll`]); if it does not, the member leaves, its partitions
//!   are lost, and it joins again at its next poll.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::{Generation, GroupError, MemberEvent, MemberSettings, Outgoing, millis};
use crate::group::TopicPartition;
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatRequestTopicPartitions;
use crate::protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use crate::protocol::{ApiKey, KafkaCode, Uuid};

/// The epoch a dynamic member leaves with.
const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member leaves with (it may come back).
const LEAVE_STATIC_EPOCH: i32 = -2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Heartbeating (joining at epoch 0 when `epoch == 0`).
    Active,
    /// Waiting for the consumer to revoke partitions.
    Revoking,
    /// The application stayed away past `max.poll.interval.ms`.
    PollExpired,
    /// A leave heartbeat is out (or about to go).
    Leaving,
    Done,
}

/// One member of one KIP-848 consumer group.
#[derive(Debug)]
pub(crate) struct ConsumerMember {
    settings: MemberSettings,
    member_id: String,
    epoch: i32,
    state: State,
    owned: BTreeSet<TopicPartition>,
    /// The assignment the coordinator gave last, by topic id.
    target: Option<Vec<(Uuid, Vec<i32>)>>,
    names: HashMap<Uuid, String>,
    revoking: Vec<TopicPartition>,
    subscription: BTreeSet<String>,
    coordinator_known: bool,
    in_flight: bool,
    /// A heartbeat is wanted now (join, acknowledgement), not at the interval.
    urgent: bool,
    interval: Duration,
    next_heartbeat: Instant,
    last_poll: Instant,
    asked_names: bool,
    outgoing: Option<Outgoing>,
    events: VecDeque<MemberEvent>,
}

fn coordinator_error(code: KafkaCode) -> bool {
    [
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::COORDINATOR_LOAD_IN_PROGRESS,
    ]
    .contains(&code)
}

impl ConsumerMember {
    /// A member about to join with `member_id` (a random UUID the driver made).
    pub fn new(
        settings: MemberSettings,
        member_id: String,
        topics: BTreeSet<String>,
        now: Instant,
    ) -> ConsumerMember {
        ConsumerMember {
            interval: settings.heartbeat_interval,
            settings,
            member_id,
            epoch: 0,
            state: State::Active,
            owned: BTreeSet::new(),
            target: None,
            names: HashMap::new(),
            revoking: Vec::new(),
            subscription: topics,
            coordinator_known: false,
            in_flight: false,
            urgent: true,
            next_heartbeat: now,
            last_poll: now,
            asked_names: false,
            outgoing: None,
            events: VecDeque::new(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &MemberSettings {
        &self.settings
    }

    /// The member's epoch as a generation, once it has one.
    pub fn generation(&self) -> Option<Generation> {
        (self.epoch > 0 && matches!(self.state, State::Active | State::Revoking)).then(|| {
            Generation {
                generation_id: self.epoch,
                member_id: self.member_id.clone(),
                protocol: "consumer",
            }
        })
    }

    /// The topics subscribed to.
    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.subscription
    }

    /// Whether the member ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The next request.
    pub fn poll_request(&mut self) -> Option<Outgoing> {
        self.outgoing.take()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        self.events.pop_front()
    }

    /// When [`ConsumerMember::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let heartbeat = (self.coordinator_known
            && matches!(self.state, State::Active | State::Revoking)
            && !self.in_flight)
            .then_some(self.next_heartbeat);
        let poll = matches!(self.state, State::Active | State::Revoking)
            .then_some(self.last_poll + self.settings.rebalance_timeout);
        [heartbeat, poll].into_iter().flatten().min()
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// The coordinator is known (again).
    pub fn handle_coordinator_found(&mut self, now: Instant) {
        self.coordinator_known = true;
        self.urgent = true;
        self.advance(now);
    }

    /// The heartbeat in flight got no answer.
    pub fn handle_request_failed(&mut self, now: Instant) {
        self.in_flight = false;
        if self.state == State::Leaving {
            return self.finish_leaving();
        }
        self.coordinator_known = false;
        self.events.push_back(MemberEvent::CoordinatorLost);
        self.next_heartbeat = now + self.settings.retry_backoff;
    }

    /// The application polled.
    pub fn handle_poll(&mut self, now: Instant) {
        self.last_poll = now;
        if self.state == State::PollExpired {
            self.state = State::Active;
            self.epoch = 0;
            self.urgent = true;
        }
        self.advance(now);
    }

    /// The subscription changed: the next heartbeat says so.
    pub fn subscribe(&mut self, topics: BTreeSet<String>, now: Instant) {
        if topics != self.subscription {
            self.subscription = topics;
            self.urgent = true;
        }
        self.advance(now);
    }

    /// Names for topic ids of an assignment ([`MemberEvent::NeedTopicNames`]).
    pub fn handle_topic_names(&mut self, names: HashMap<Uuid, String>, now: Instant) {
        self.names.extend(names);
        self.asked_names = false;
        self.reconcile(now);
        self.advance(now);
    }

    /// A commit found the epoch stale or the member fenced.
    pub fn handle_commit_fenced(&mut self, code: KafkaCode, now: Instant) {
        match code {
            KafkaCode::UNKNOWN_MEMBER_ID | KafkaCode::FENCED_MEMBER_EPOCH => self.fenced(now),
            // The epoch moved on: the next heartbeat brings the new one.
            _ => self.urgent = true,
        }
        self.advance(now);
    }

    /// The consumer stopped the partitions of the last revoke and committed them.
    pub fn handle_revoked(&mut self, now: Instant) {
        if self.state != State::Revoking {
            return;
        }
        for tp in std::mem::take(&mut self.revoking) {
            self.owned.remove(&tp);
        }
        self.state = State::Active;
        self.reconcile(now);
        self.urgent = true;
        self.advance(now);
    }

    /// Leaves the group.
    pub fn leave(&mut self, now: Instant) {
        if matches!(self.state, State::Done | State::Leaving) {
            return;
        }
        self.owned.clear();
        self.state = State::Leaving;
        if self.coordinator_known && self.epoch > 0 {
            self.send_heartbeat(self.leave_epoch(), now);
        } else if !self.in_flight {
            self.finish_leaving();
        }
    }

    fn leave_epoch(&self) -> i32 {
        if self.settings.instance_id.is_some() {
            LEAVE_STATIC_EPOCH
        } else {
            LEAVE_EPOCH
        }
    }

    fn finish_leaving(&mut self) {
        self.state = State::Done;
        self.events.push_back(MemberEvent::Left);
    }

    fn fail(&mut self, error: GroupError) {
        tracing::warn!(group = %self.settings.group_id, %error, "group member ended");
        self.state = State::Done;
        self.outgoing = None;
        self.events.push_back(MemberEvent::Failed(error));
    }

    fn fenced(&mut self, now: Instant) {
        tracing::info!(group = %self.settings.group_id, member = %self.member_id, epoch = self.epoch, "fenced: rejoining");
        self.epoch = 0;
        self.target = None;
        self.revoking.clear();
        if !self.owned.is_empty() {
            let lost: Vec<_> = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MemberEvent::Lost(lost));
        }
        self.state = State::Active;
        self.urgent = true;
        let _ = now;
    }

    fn advance(&mut self, now: Instant) {
        if self.check_poll_interval(now) {
            return;
        }
        if self.in_flight || !self.coordinator_known {
            return;
        }
        if matches!(self.state, State::Active | State::Revoking)
            && (self.urgent || now >= self.next_heartbeat)
        {
            self.send_heartbeat(self.epoch, now);
        }
    }

    fn check_poll_interval(&mut self, now: Instant) -> bool {
        if !matches!(self.state, State::Active | State::Revoking)
            || now < self.last_poll + self.settings.rebalance_timeout
        {
            return false;
        }
        tracing::warn!(group = %self.settings.group_id, "the application did not poll within max.poll.interval.ms: leaving the group");
        let leave = self.leave_epoch();
        if self.coordinator_known && self.epoch > 0 && !self.in_flight {
            self.send_heartbeat(leave, now);
        }
        self.fenced(now);
        self.state = State::PollExpired;
        true
    }

    fn send_heartbeat(&mut self, epoch: i32, now: Instant) {
        let owned = self.owned_by_topic_id();
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(self.settings.group_id.clone())
            .with_member_id(self.member_id.clone())
            .with_member_epoch(epoch)
            .with_instance_id(self.settings.instance_id.clone())
            .with_rack_id(self.settings.rack.clone())
            .with_rebalance_timeout_ms(millis(self.settings.rebalance_timeout))
            .with_subscribed_topic_names(Some(self.subscription.iter().cloned().collect()))
            .with_server_assignor(self.settings.server_assignor.clone())
            .with_topic_partitions(Some(owned));
        self.outgoing = Some(Outgoing::ConsumerHeartbeat(request));
        self.in_flight = true;
        self.urgent = false;
        self.next_heartbeat = now + self.interval;
    }

    /// What the member owns, by topic id (partitions of topics whose id it does not
    /// know cannot be owned: they were assigned by id).
    fn owned_by_topic_id(&self) -> Vec<ConsumerGroupHeartbeatRequestTopicPartitions> {
        let ids: HashMap<&str, Uuid> = self.names.iter().map(|(id, n)| (n.as_str(), *id)).collect();
        let mut by_id: Vec<ConsumerGroupHeartbeatRequestTopicPartitions> = Vec::new();
        for tp in &self.owned {
            let Some(id) = ids.get(tp.topic.as_str()) else {
                continue;
            };
            match by_id.iter_mut().find(|t| t.topic_id == *id) {
                Some(t) => t.partitions.push(tp.partition),
                None => by_id.push(
                    ConsumerGroupHeartbeatRequestTopicPartitions::default()
                        .with_topic_id(*id)
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        by_id
    }

    /// The heartbeat's answer.
    pub fn handle_heartbeat(&mut self, response: ConsumerGroupHeartbeatResponse, now: Instant) {
        if !self.in_flight {
            return;
        }
        if self.state == State::Leaving {
            // A heartbeat sent before the leave may answer first (with the member's
            // epoch); the leave's own answer has a leave epoch, or an error.
            if response.member_epoch < 0 || response.error_code != 0 {
                self.in_flight = false;
                self.finish_leaving();
            }
            return;
        }
        self.in_flight = false;
        if self.state == State::PollExpired || self.state == State::Done {
            return;
        }
        let code = KafkaCode(response.error_code);
        if !code.is_ok() {
            return self.heartbeat_failed(code, response.error_message, now);
        }
        if let Some(id) = response.member_id.filter(|id| !id.is_empty()) {
            self.member_id = id;
        }
        self.epoch = response.member_epoch;
        if response.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(response.heartbeat_interval_ms as u64);
            self.next_heartbeat = now + self.interval;
        }
        if let Some(assignment) = response.assignment {
            self.target = Some(
                assignment
                    .topic_partitions
                    .into_iter()
                    .map(|t| (t.topic_id, t.partitions))
                    .collect(),
            );
            self.reconcile(now);
        }
        self.advance(now);
    }

    fn heartbeat_failed(&mut self, code: KafkaCode, message: Option<String>, now: Instant) {
        tracing::debug!(group = %self.settings.group_id, %code, ?message, "ConsumerGroupHeartbeat failed");
        match code {
            KafkaCode::FENCED_MEMBER_EPOCH | KafkaCode::UNKNOWN_MEMBER_ID => self.fenced(now),
            c if coordinator_error(c) => {
                self.coordinator_known = false;
                self.events.push_back(MemberEvent::CoordinatorLost);
                self.urgent = true;
            }
            KafkaCode::FENCED_INSTANCE_ID | KafkaCode::UNRELEASED_INSTANCE_ID => {
                let error = GroupError::FencedInstance {
                    group: self.settings.group_id.clone(),
                    instance_id: self.settings.instance_id.clone().unwrap_or_default(),
                };
                self.fail(error);
            }
            c if c.is_retriable() => self.next_heartbeat = now + self.settings.retry_backoff,
            c => {
                let error = GroupError::Refused {
                    group: self.settings.group_id.clone(),
                    api: ApiKey::ConsumerGroupHeartbeat,
                    code: c,
                };
                self.fail(error);
            }
        }
    }

    /// Moves towards the coordinator's assignment: revoke first, then assign.
    fn reconcile(&mut self, now: Instant) {
        if self.state != State::Active {
            return;
        }
        let Some(target) = &self.target else {
            return;
        };
        let unknown: Vec<Uuid> = target
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !self.names.contains_key(id))
            .collect();
        if !unknown.is_empty() {
            if !self.asked_names {
                self.asked_names = true;
                self.events.push_back(MemberEvent::NeedTopicNames(unknown));
            }
            return;
        }
        let wanted: BTreeSet<TopicPartition> = target
            .iter()
            .flat_map(|(id, ps)| {
                let name = self.names[id].clone();
                ps.iter()
                    .map(move |p| TopicPartition::new(name.clone(), *p))
            })
            .collect();
        let revoked: Vec<_> = self.owned.difference(&wanted).cloned().collect();
        if !revoked.is_empty() {
            self.revoking = revoked.clone();
            self.state = State::Revoking;
            self.events.push_back(MemberEvent::Revoke(revoked));
            return;
        }
        let added: Vec<_> = wanted.difference(&self.owned).cloned().collect();
        if added.is_empty() {
            return;
        }
        self.owned.extend(added.iter().cloned());
        tracing::info!(group = %self.settings.group_id, epoch = self.epoch, member = %self.member_id, assigned = self.owned.len(), added = added.len(), "assignment reconciled");
        let generation = Generation {
            generation_id: self.epoch,
            member_id: self.member_id.clone(),
            protocol: "consumer",
        };
        self.events
            .push_back(MemberEvent::Assigned { generation, added });
        // Acknowledge what is owned now.
        self.urgent = true;
        let _ = now;
    }
}
