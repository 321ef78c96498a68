//! Group faults on demand, and what a test reads back about KIP-848 groups: the
//! coordinator moving, one group request answered with an error, a member fenced by
//! the coordinator, and the assignments a consumer group handed out.

use kring::protocol::{ApiKey, KafkaCode, RequestKind};

use super::{ControlId, FakeCluster};
use crate::{MockError, ReceivedRequest, Reply};

/// The group a group request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
/// OffsetCommit, ConsumerGroupHeartbeat) is for.
pub fn request_group(request: &ReceivedRequest) -> Option<&str> {
    Some(match &request.request {
        RequestKind::JoinGroup(r) => &r.group_id,
        RequestKind::SyncGroup(r) => &r.group_id,
        RequestKind::Heartbeat(r) => &r.group_id,
        RequestKind::LeaveGroup(r) => &r.group_id,
        RequestKind::OffsetCommit(r) => &r.group_id,
        RequestKind::ConsumerGroupHeartbeat(r) => &r.group_id,
        _ => return None,
    })
}

/// A KIP-848 assignment the coordinator handed out: to which member, at which member
/// epoch, which partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    /// The member.
    pub member_id: String,
    /// Its member epoch in that answer.
    pub epoch: i32,
    /// The partitions it may own from then on.
    pub partitions: Vec<(String, i32)>,
}

impl FakeCluster {
    /// Moves `group`'s coordinator to the next broker that is up (in id order, after
    /// the current one) and returns it. The old coordinator answers the group's
    /// requests with NOT_COORDINATOR from now on; FindCoordinator names the new one.
    pub fn move_coordinator(&self, group: &str) -> Result<i32, MockError> {
        let (current, up) = {
            let st = self.state();
            let up: Vec<i32> = st
                .brokers
                .iter()
                .filter(|(_, b)| b.up)
                .map(|(&id, _)| id)
                .collect();
            (st.coordinator(group), up)
        };
        let next = up
            .iter()
            .copied()
            .find(|&id| Some(id) > current)
            .or_else(|| up.first().copied())
            .filter(|&id| Some(id) != current)
            .ok_or_else(|| {
                MockError::InvalidArgument(format!("no other broker is up to coordinate {group}"))
            })?;
        self.set_coordinator(group, next)?;
        Ok(next)
    }

    /// Answers the next `api` request for `group` with `code` (once), e.g.
    /// REBALANCE_IN_PROGRESS on a Heartbeat or an OffsetCommit, UNKNOWN_MEMBER_ID or
    /// FENCED_INSTANCE_ID on a heartbeat. Remove it with
    /// [`FakeCluster::remove_control`] if it never acts.
    pub fn fail_next(&self, group: &str, api: ApiKey, code: KafkaCode) -> ControlId {
        let group = group.to_string();
        self.control_once(Some(api), move |request| {
            if request_group(request) == Some(group.as_str()) {
                Reply::error(code)
            } else {
                Reply::pass()
            }
        })
    }

    /// Fences `member` of `group` as a coordinator does when it gives up on it: a
    /// classic member is removed (its next Heartbeat gets UNKNOWN_MEMBER_ID, and the
    /// others rebalance); a KIP-848 member's epoch moves on without it (its next
    /// heartbeat gets FENCED_MEMBER_EPOCH, its commits STALE_MEMBER_EPOCH) and its
    /// partitions are free for others; it may join again at epoch 0.
    pub fn fence_member(&self, group: &str, member: &str) -> Result<(), MockError> {
        let mut st = self.state();
        let g = st
            .groups
            .get_mut(group)
            .ok_or_else(|| MockError::InvalidArgument(format!("no group {group}")))?;
        if g.members.contains_key(member) {
            g.remove_member(member);
        } else if let Some(m) = g.consumer.members.get_mut(member) {
            g.consumer.epoch += 1;
            m.epoch = g.consumer.epoch;
            m.owned.clear();
            m.given = None;
        } else {
            return Err(MockError::InvalidArgument(format!(
                "no member {member} in group {group}"
            )));
        }
        drop(st);
        self.changed();
        Ok(())
    }

    /// The KIP-848 members of `group` with their member epochs.
    pub fn consumer_group_members(&self, group: &str) -> Vec<(String, i32)> {
        self.state()
            .groups
            .get(group)
            .map(|g| {
                g.consumer
                    .members
                    .iter()
                    .filter(|(_, m)| !m.departed)
                    .map(|(id, m)| (id.clone(), m.epoch))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The group epoch of KIP-848 group `group` (0 before anyone joined).
    pub fn consumer_group_epoch(&self, group: &str) -> Option<i32> {
        self.state().groups.get(group).map(|g| g.consumer.epoch)
    }

    /// Every assignment KIP-848 group `group` handed out, oldest first.
    pub fn consumer_group_handed(&self, group: &str) -> Vec<Handed> {
        self.state()
            .groups
            .get(group)
            .map(|g| {
                g.consumer
                    .handed
                    .iter()
                    .map(|(member_id, epoch, partitions)| Handed {
                        member_id: member_id.clone(),
                        epoch: *epoch,
                        partitions: partitions.iter().cloned().collect(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
