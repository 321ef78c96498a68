//! The model of classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! KIP-62 style rebalances without session expiry) and their committed offsets, as a
//! group coordinator keeps them (`kafka.coordinator.group.GroupCoordinator`, in
//! miniature). The handlers of the group APIs, one file each, are in
//! [`super::handlers`].
//!
//! A rebalance begins when a member joins or leaves; it completes, with a new
//! generation, when every member has rejoined, or when the longest rebalance timeout
//! of the members runs out (members that did not rejoin are removed). Joiners and
//! followers waiting for the leader's SyncGroup block their connection until then.
//! Members are never expired for missing heartbeats: tests remove them with
//! LeaveGroup, or by letting a rebalance time out without them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kring::protocol::{KafkaCode, Request, Response, ResponseKind};

use super::Ctx;
use super::state::{Committed, State};
use crate::error_response;

/// A classic group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum GroupState {
    #[default]
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout: Duration,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    /// Join order, for choosing a leader.
    pub(super) seq: u64,
}

impl Member {
    pub(super) fn metadata(&self, protocol: Option<&str>) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| Some(name.as_str()) == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// A group and its committed offsets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub(crate) state: GroupState,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol: Option<String>,
    pub(crate) generation: i32,
    pub(super) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    pub(crate) offsets: BTreeMap<(String, i32), Committed>,
    /// Rebalances started and completed: a joiner waits until `completed` reaches the
    /// round it joined in.
    pub(super) round: u64,
    pub(super) completed: u64,
    pub(super) joined: BTreeSet<String>,
    pub(super) deadline: Option<Instant>,
    /// The KIP-848 side: members that heartbeat with ConsumerGroupHeartbeat.
    pub(crate) consumer: super::consumer_group::ConsumerGroup,
}

impl Group {
    pub(super) fn rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    pub(super) fn begin_rebalance(&mut self) {
        self.state = GroupState::PreparingRebalance;
        self.round += 1;
        self.joined.clear();
        self.deadline = Some(Instant::now() + self.rebalance_timeout());
    }

    /// Completes the join phase if every member has rejoined.
    pub(super) fn maybe_complete_join(&mut self) {
        if self.state == GroupState::PreparingRebalance
            && self.members.keys().all(|m| self.joined.contains(m))
        {
            self.complete_join();
        }
    }

    /// Ends the join phase: absentees leave, the generation advances, a protocol and
    /// a leader are chosen.
    pub(super) fn complete_join(&mut self) {
        let joined = std::mem::take(&mut self.joined);
        self.members.retain(|id, _| joined.contains(id));
        self.generation += 1;
        self.completed = self.round;
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            self.deadline = None;
            return;
        }
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self
                .members
                .iter()
                .min_by_key(|(_, m)| m.seq)
                .map(|(id, _)| id.clone());
        }
        let leader = &self.members[self.leader.as_deref().unwrap_or_default()];
        self.protocol = leader
            .protocols
            .iter()
            .map(|(name, _)| name)
            .find(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .cloned();
        self.state = GroupState::CompletingRebalance;
        self.deadline = Some(Instant::now() + self.rebalance_timeout());
    }

    pub(super) fn remove_member(&mut self, member: &str) {
        self.members.remove(member);
        self.joined.remove(member);
        if self.leader.as_deref() == Some(member) {
            self.leader = None;
        }
        match self.state {
            _ if self.members.is_empty() => {
                self.state = GroupState::Empty;
                self.protocol = None;
                self.leader = None;
                self.generation += 1;
                self.completed = self.round;
                self.deadline = None;
            }
            GroupState::Stable | GroupState::CompletingRebalance => self.begin_rebalance(),
            GroupState::PreparingRebalance => self.maybe_complete_join(),
            GroupState::Empty => {}
        }
    }

    pub(super) fn find_member(&self, member_id: &str, instance_id: Option<&str>) -> Option<String> {
        if self.members.contains_key(member_id) {
            return Some(member_id.to_string());
        }
        let instance = instance_id?;
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
            .map(|(id, _)| id.clone())
    }
}

/// The error answer to a group request (all of which `error_response` covers).
pub(super) fn fail<R: Request>(cx: &Ctx<'_>, request: &R, code: KafkaCode) -> ResponseKind {
    error_response(&request.clone().into_kind(), cx.request.version, code)
        .unwrap_or_else(|| R::Response::default().into_kind())
}

/// NOT_COORDINATOR unless this broker coordinates `group`.
pub(super) fn check_coordinator(st: &State, broker: i32, group: &str) -> Result<(), KafkaCode> {
    if st.coordinator(group) == Some(broker) {
        Ok(())
    } else {
        Err(KafkaCode::NOT_COORDINATOR)
    }
}
