//! Classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, KIP-62 style
//! rebalances without session expiry) and committed offsets, as a group coordinator
//! does them (`kafka.coordinator.group.GroupCoordinator`, in miniature).
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

use super::Ctx;
use super::state::{Committed, State};
use crate::error_response;
use kring::protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
    describe_groups::{DescribedGroup, DescribedGroupMember},
    join_group::JoinGroupResponseMember,
    leave_group::MemberResponse,
    list_groups::ListedGroup,
    offset_commit::{OffsetCommitResponsePartition, OffsetCommitResponseTopic},
    offset_fetch::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    },
};
use kring::protocol::{KafkaCode, Request, Response, ResponseKind};

/// The largest committed metadata string accepted (Kafka's
/// `offset.metadata.max.bytes`).
const MAX_METADATA: usize = 4096;

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
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// Join order, for choosing a leader.
    seq: u64,
}

impl Member {
    fn metadata(&self, protocol: Option<&str>) -> Bytes {
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
    protocol_type: Option<String>,
    protocol: Option<String>,
    pub(crate) generation: i32,
    leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    pub(crate) offsets: BTreeMap<(String, i32), Committed>,
    /// Rebalances started and completed: a joiner waits until `completed` reaches the
    /// round it joined in.
    round: u64,
    completed: u64,
    joined: BTreeSet<String>,
    deadline: Option<Instant>,
}

impl Group {
    fn rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    fn begin_rebalance(&mut self) {
        self.state = GroupState::PreparingRebalance;
        self.round += 1;
        self.joined.clear();
        self.deadline = Some(Instant::now() + self.rebalance_timeout());
    }

    /// Completes the join phase if every member has rejoined.
    fn maybe_complete_join(&mut self) {
        if self.state == GroupState::PreparingRebalance
            && self.members.keys().all(|m| self.joined.contains(m))
        {
            self.complete_join();
        }
    }

    /// Ends the join phase: absentees leave, the generation advances, a protocol and
    /// a leader are chosen.
    fn complete_join(&mut self) {
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

    fn remove_member(&mut self, member: &str) {
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

    fn find_member(&self, member_id: &str, instance_id: Option<&str>) -> Option<String> {
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
fn fail<R: Request>(cx: &Ctx<'_>, request: &R, code: KafkaCode) -> ResponseKind {
    error_response(&request.clone().into_kind(), cx.request.version, code)
        .unwrap_or_else(|| R::Response::default().into_kind())
}

/// NOT_COORDINATOR unless this broker coordinates `group`.
fn check_coordinator(st: &State, broker: i32, group: &str) -> Result<(), KafkaCode> {
    if st.coordinator(group) == Some(broker) {
        Ok(())
    } else {
        Err(KafkaCode::NOT_COORDINATOR)
    }
}

pub(crate) fn join(cx: &Ctx<'_>, r: &JoinGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    if r.group_id.is_empty() {
        return fail(cx, r, KafkaCode::INVALID_GROUP_ID);
    }
    if r.protocol_type.is_empty() || r.protocols.is_empty() {
        return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    let client_id = cx.request.client_id().unwrap_or_default().to_string();
    let state = &mut *st;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let others_agree = {
        let mut common: Option<BTreeSet<&str>> = None;
        for (id, m) in &group.members {
            if *id == r.member_id {
                continue;
            }
            let names: BTreeSet<&str> = m.protocols.iter().map(|(n, _)| n.as_str()).collect();
            common = Some(match common {
                None => names,
                Some(c) => c.intersection(&names).copied().collect(),
            });
        }
        common.is_none_or(|c| r.protocols.iter().any(|p| c.contains(p.name.as_str())))
    };
    let type_matches = group.members.is_empty()
        || group.protocol_type.as_deref() == Some(r.protocol_type.as_str());
    if !others_agree || !type_matches {
        return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
    }
    let member_id = if r.member_id.is_empty() {
        match group.find_member("", r.group_instance_id.as_deref()) {
            Some(existing) => existing,
            None => {
                state.member_seq += 1;
                let prefix = if client_id.is_empty() {
                    "member"
                } else {
                    &client_id
                };
                format!("{prefix}-{}", state.member_seq)
            }
        }
    } else if group.members.contains_key(&r.member_id) {
        r.member_id.clone()
    } else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    let rebalance_ms = if r.rebalance_timeout_ms > 0 {
        r.rebalance_timeout_ms
    } else {
        r.session_timeout_ms
    };
    let seq = state.member_seq;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let member = group.members.entry(member_id.clone()).or_insert(Member {
        instance_id: None,
        client_id: client_id.clone(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout: Duration::ZERO,
        protocols: Vec::new(),
        assignment: Bytes::new(),
        seq,
    });
    member.instance_id = r.group_instance_id.clone();
    member.rebalance_timeout = Duration::from_millis(rebalance_ms.max(0) as u64);
    member.protocols = r
        .protocols
        .iter()
        .map(|p| (p.name.clone(), p.metadata.clone()))
        .collect();
    group.protocol_type = Some(r.protocol_type.clone());
    if group.state != GroupState::PreparingRebalance {
        group.begin_rebalance();
    }
    group.joined.insert(member_id.clone());
    let round = group.round;
    group.maybe_complete_join();
    cx.notify();

    loop {
        let Some(group) = st.groups.get_mut(&r.group_id) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        if group.completed >= round {
            break;
        }
        if !group.members.contains_key(&member_id) {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        }
        let deadline = group.deadline.unwrap_or_else(Instant::now);
        if Instant::now() >= deadline {
            group.complete_join();
            cx.notify();
            break;
        }
        if cx.aborted(&st) {
            return fail(cx, r, KafkaCode::COORDINATOR_NOT_AVAILABLE);
        }
        st = cx.wait(st, deadline);
    }
    let group = &st.groups[&r.group_id];
    if !group.members.contains_key(&member_id) {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    }
    let leader = group.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        group
            .members
            .iter()
            .map(|(id, m)| {
                JoinGroupResponseMember::default()
                    .with_member_id(id.clone())
                    .with_group_instance_id(m.instance_id.clone())
                    .with_metadata(m.metadata(group.protocol.as_deref()))
            })
            .collect()
    } else {
        Vec::new()
    };
    ResponseKind::JoinGroup(
        JoinGroupResponse::default()
            .with_generation_id(group.generation)
            .with_protocol_type(group.protocol_type.clone())
            .with_protocol_name(Some(group.protocol.clone().unwrap_or_default()))
            .with_leader(leader)
            .with_member_id(member_id)
            .with_members(members),
    )
}

pub(crate) fn sync(cx: &Ctx<'_>, r: &SyncGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let ok = |group: &Group, member: &str| {
        ResponseKind::SyncGroup(
            SyncGroupResponse::default()
                .with_protocol_type(group.protocol_type.clone())
                .with_protocol_name(group.protocol.clone())
                .with_assignment(group.members[member].assignment.clone()),
        )
    };
    loop {
        let Some(group) = st.groups.get_mut(&r.group_id) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        let Some(member) = group.find_member(&r.member_id, r.group_instance_id.as_deref()) else {
            return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
        };
        if r.generation_id != group.generation {
            return fail(cx, r, KafkaCode::ILLEGAL_GENERATION);
        }
        if r.protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != group.protocol_type.as_ref())
            || r.protocol_name
                .as_ref()
                .is_some_and(|p| Some(p) != group.protocol.as_ref())
        {
            return fail(cx, r, KafkaCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        match group.state {
            GroupState::Stable => return ok(group, &member),
            GroupState::PreparingRebalance => return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS),
            GroupState::Empty => return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID),
            GroupState::CompletingRebalance => {}
        }
        if group.leader.as_deref() == Some(member.as_str()) {
            for a in &r.assignments {
                if let Some(m) = group.members.get_mut(&a.member_id) {
                    m.assignment = a.assignment.clone();
                }
            }
            group.state = GroupState::Stable;
            group.deadline = None;
            let answer = ok(group, &member);
            cx.notify();
            return answer;
        }
        let deadline = group.deadline.unwrap_or_else(Instant::now);
        if Instant::now() >= deadline {
            // The leader never sent its assignment: start over without it.
            if let Some(leader) = group.leader.clone() {
                group.remove_member(&leader);
            }
            cx.notify();
            return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS);
        }
        if cx.aborted(&st) {
            return fail(cx, r, KafkaCode::COORDINATOR_NOT_AVAILABLE);
        }
        st = cx.wait(st, deadline);
    }
}

pub(crate) fn heartbeat(cx: &Ctx<'_>, r: &HeartbeatRequest) -> ResponseKind {
    let st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let Some(group) = st.groups.get(&r.group_id) else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    if group
        .find_member(&r.member_id, r.group_instance_id.as_deref())
        .is_none()
    {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    }
    if r.generation_id != group.generation {
        return fail(cx, r, KafkaCode::ILLEGAL_GENERATION);
    }
    if group.state == GroupState::PreparingRebalance {
        return fail(cx, r, KafkaCode::REBALANCE_IN_PROGRESS);
    }
    ResponseKind::Heartbeat(HeartbeatResponse::default())
}

pub(crate) fn leave(cx: &Ctx<'_>, r: &LeaveGroupRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let leaving: Vec<(String, Option<String>)> = if cx.request.version < 3 {
        vec![(r.member_id.clone(), None)]
    } else {
        r.members
            .iter()
            .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
            .collect()
    };
    let Some(group) = st.groups.get_mut(&r.group_id) else {
        return fail(cx, r, KafkaCode::UNKNOWN_MEMBER_ID);
    };
    let mut results = Vec::new();
    for (member_id, instance) in leaving {
        let code = match group.find_member(&member_id, instance.as_deref()) {
            Some(found) => {
                group.remove_member(&found);
                KafkaCode::NONE
            }
            None => KafkaCode::UNKNOWN_MEMBER_ID,
        };
        results.push(
            MemberResponse::default()
                .with_member_id(member_id)
                .with_group_instance_id(instance)
                .with_error_code(code.code()),
        );
    }
    cx.notify();
    if cx.request.version < 3 {
        let code = results.first().map_or(0, |m| m.error_code);
        return ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code));
    }
    ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_members(results))
}

pub(crate) fn describe(cx: &Ctx<'_>, r: &DescribeGroupsRequest) -> ResponseKind {
    let st = cx.lock();
    let groups = r
        .groups
        .iter()
        .map(|id| {
            if let Err(code) = check_coordinator(&st, cx.broker, id) {
                return DescribedGroup::default()
                    .with_error_code(code.code())
                    .with_group_id(id.clone());
            }
            let Some(group) = st.groups.get(id) else {
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_group_state("Dead".into());
            };
            DescribedGroup::default()
                .with_group_id(id.clone())
                .with_group_state(group.state.name().into())
                .with_protocol_type(group.protocol_type.clone().unwrap_or_default())
                .with_protocol_data(group.protocol.clone().unwrap_or_default())
                .with_members(
                    group
                        .members
                        .iter()
                        .map(|(member_id, m)| {
                            DescribedGroupMember::default()
                                .with_member_id(member_id.clone())
                                .with_group_instance_id(m.instance_id.clone())
                                .with_client_id(m.client_id.clone())
                                .with_client_host(m.client_host.clone())
                                .with_member_metadata(m.metadata(group.protocol.as_deref()))
                                .with_member_assignment(m.assignment.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
}

pub(crate) fn list(cx: &Ctx<'_>, r: &ListGroupsRequest) -> ResponseKind {
    let st = cx.lock();
    let classic = r.types_filter.is_empty()
        || r.types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("classic"));
    let groups = st
        .groups
        .iter()
        .filter(|(id, _)| classic && st.coordinator(id) == Some(cx.broker))
        .filter(|(_, g)| {
            r.states_filter.is_empty()
                || r.states_filter
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(g.state.name()))
        })
        .map(|(id, g)| {
            ListedGroup::default()
                .with_group_id(id.clone())
                .with_protocol_type(g.protocol_type.clone().unwrap_or_default())
                .with_group_state(g.state.name().into())
                .with_group_type("classic".into())
        })
        .collect();
    ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))
}

/// Whether a commit from this member and generation is allowed now.
fn commit_allowed(group: Option<&Group>, r: &OffsetCommitRequest) -> Result<(), KafkaCode> {
    let simple = r.generation_id_or_member_epoch < 0 && r.member_id.is_empty();
    let Some(group) = group else {
        return if simple {
            Ok(())
        } else {
            Err(KafkaCode::ILLEGAL_GENERATION)
        };
    };
    if simple {
        return if group.members.is_empty() {
            Ok(())
        } else {
            Err(KafkaCode::UNKNOWN_MEMBER_ID)
        };
    }
    if group
        .find_member(&r.member_id, r.group_instance_id.as_deref())
        .is_none()
    {
        return Err(KafkaCode::UNKNOWN_MEMBER_ID);
    }
    if r.generation_id_or_member_epoch != group.generation {
        return Err(KafkaCode::ILLEGAL_GENERATION);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(KafkaCode::REBALANCE_IN_PROGRESS);
    }
    Ok(())
}

pub(crate) fn offset_commit(cx: &Ctx<'_>, r: &OffsetCommitRequest) -> ResponseKind {
    let mut st = cx.lock();
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    if r.group_id.is_empty() {
        return fail(cx, r, KafkaCode::INVALID_GROUP_ID);
    }
    if let Err(code) = commit_allowed(st.groups.get(&r.group_id), r) {
        return fail(cx, r, code);
    }
    let state = &mut *st;
    let group = state.groups.entry(r.group_id.clone()).or_default();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let known = state.topics.get(&t.name).is_some_and(|topic| {
                                (0..topic.partitions.len() as i32).contains(&p.partition_index)
                            });
                            let code = if !known {
                                KafkaCode::UNKNOWN_TOPIC_OR_PARTITION
                            } else if p
                                .committed_metadata
                                .as_ref()
                                .is_some_and(|m| m.len() > MAX_METADATA)
                            {
                                KafkaCode::OFFSET_METADATA_TOO_LARGE
                            } else {
                                group.offsets.insert(
                                    (t.name.clone(), p.partition_index),
                                    Committed {
                                        offset: p.committed_offset,
                                        leader_epoch: p.committed_leader_epoch,
                                        metadata: p.committed_metadata.clone(),
                                    },
                                );
                                KafkaCode::NONE
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect();
    cx.notify();
    ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
}

/// Committed offsets of `group` for `topics` (`None`: every committed partition):
/// (topic, [(partition, offset, epoch, metadata)]).
type Fetched = Vec<(String, Vec<(i32, i64, i32, Option<String>)>)>;

fn fetch_offsets(group: Option<&Group>, topics: Option<Vec<(String, Vec<i32>)>>) -> Fetched {
    let lookup = |t: &str, p: i32| match group.and_then(|g| g.offsets.get(&(t.to_string(), p))) {
        Some(c) => (p, c.offset, c.leader_epoch, c.metadata.clone()),
        None => (p, -1, -1, Some(String::new())),
    };
    match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(t, ps)| {
                let found = ps.into_iter().map(|p| lookup(&t, p)).collect();
                (t, found)
            })
            .collect(),
        None => {
            let mut by_topic: BTreeMap<String, Vec<_>> = BTreeMap::new();
            for ((t, p), c) in group.iter().flat_map(|g| g.offsets.iter()) {
                by_topic.entry(t.clone()).or_default().push((
                    *p,
                    c.offset,
                    c.leader_epoch,
                    c.metadata.clone(),
                ));
            }
            by_topic.into_iter().collect()
        }
    }
}

pub(crate) fn offset_fetch(cx: &Ctx<'_>, r: &OffsetFetchRequest) -> ResponseKind {
    let st = cx.lock();
    let metadata = |m: Option<String>| m.or_else(|| Some(String::new()));
    if cx.request.version >= 8 {
        let groups = r
            .groups
            .iter()
            .map(|g| {
                if let Err(code) = check_coordinator(&st, cx.broker, &g.group_id) {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code.code());
                }
                let asked = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                        .collect()
                });
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_topics(
                        fetch_offsets(st.groups.get(&g.group_id), asked)
                            .into_iter()
                            .map(|(name, ps)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(name)
                                    .with_partitions(
                                        ps.into_iter()
                                            .map(|(p, o, e, m)| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(o)
                                                    .with_committed_leader_epoch(e)
                                                    .with_metadata(metadata(m))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            })
            .collect();
        return ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_groups(groups));
    }
    if let Err(code) = check_coordinator(&st, cx.broker, &r.group_id) {
        return fail(cx, r, code);
    }
    let asked = r.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.clone(), t.partition_indexes.clone()))
            .collect()
    });
    ResponseKind::OffsetFetch(
        OffsetFetchResponse::default().with_topics(
            fetch_offsets(st.groups.get(&r.group_id), asked)
                .into_iter()
                .map(|(name, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(name)
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o, e, m)| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(e)
                                        .with_metadata(metadata(m))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    )
}
