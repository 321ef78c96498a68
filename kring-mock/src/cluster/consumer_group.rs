//! The model of KIP-848 consumer groups (`group.protocol=consumer`,
//! ConsumerGroupHeartbeat), in miniature: the coordinator keeps each member's
//! subscription, computes a target assignment whenever membership or subscriptions
//! change (the group epoch then advances), and hands each member its target minus what
//! other members still report owning, so a partition reaches its new owner only after
//! the old owner's heartbeat no longer lists it (KIP-848's revocation before
//! assignment). A member's epoch takes the group epoch whenever what it is given
//! changes.
//!
//! Simplifications: the assignors (`uniform`, the default, and `range`) recompute from
//! scratch rather than stickily; regex subscriptions are refused; members never expire
//! (tests fence them with [`super::FakeCluster::fence_member`]); a static member that
//! leaves at epoch -2 keeps its target reserved until one with its instance id joins.

use std::collections::{BTreeMap, BTreeSet};

use kring::protocol::KafkaCode;

/// A topic-partition by name.
pub(crate) type Tp = (String, i32);

/// One KIP-848 member.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConsumerMember {
    pub(crate) epoch: i32,
    pub(crate) instance_id: Option<String>,
    pub(crate) subscription: BTreeSet<String>,
    /// What its last heartbeat said it owns.
    pub(crate) owned: BTreeSet<Tp>,
    /// What the assignor wants it to own.
    pub(crate) target: BTreeSet<Tp>,
    /// What it was last given.
    pub(crate) given: Option<BTreeSet<Tp>>,
    /// Left at epoch -2 (static): kept for its instance id to come back.
    pub(crate) departed: bool,
}

/// The KIP-848 side of a group.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConsumerGroup {
    pub(crate) epoch: i32,
    pub(crate) assignor: Option<String>,
    pub(crate) members: BTreeMap<String, ConsumerMember>,
    /// Every assignment handed out: (member, member epoch, partitions).
    pub(crate) handed: Vec<(String, i32, BTreeSet<Tp>)>,
}

/// The assignors this coordinator runs.
pub(crate) const ASSIGNORS: &[&str] = &["uniform", "range"];

impl ConsumerGroup {
    /// Recomputes every member's target and advances the group epoch.
    pub(crate) fn rebalance(&mut self, partitions: &BTreeMap<String, i32>) {
        self.epoch += 1;
        for m in self.members.values_mut() {
            m.target.clear();
        }
        let range = self.assignor.as_deref() == Some("range");
        let mut next = 0usize;
        for (topic, &count) in partitions {
            let subscribers: Vec<String> = self
                .members
                .iter()
                .filter(|(_, m)| m.subscription.contains(topic))
                .map(|(id, _)| id.clone())
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            for p in 0..count {
                let who = if range {
                    range_owner(p, count, subscribers.len())
                } else {
                    next += 1;
                    (next - 1) % subscribers.len()
                };
                if let Some(m) = self.members.get_mut(&subscribers[who]) {
                    m.target.insert((topic.clone(), p));
                }
            }
        }
    }

    /// What `member` may own now: its target less what others still own.
    pub(crate) fn grant(&self, member: &str) -> BTreeSet<Tp> {
        let Some(m) = self.members.get(member) else {
            return BTreeSet::new();
        };
        m.target
            .iter()
            .filter(|tp| {
                !self
                    .members
                    .iter()
                    .any(|(id, o)| id != member && o.owned.contains(*tp))
            })
            .cloned()
            .collect()
    }

    /// The member epoch check of a heartbeat or a commit (`commit` chooses
    /// STALE_MEMBER_EPOCH for an older epoch, as OffsetCommit answers).
    pub(crate) fn check_epoch(
        &self,
        member: &str,
        epoch: i32,
        commit: bool,
    ) -> Result<(), KafkaCode> {
        let m = self
            .members
            .get(member)
            .filter(|m| !m.departed)
            .ok_or(KafkaCode::UNKNOWN_MEMBER_ID)?;
        match epoch {
            e if e == m.epoch => Ok(()),
            e if commit && e < m.epoch => Err(KafkaCode::STALE_MEMBER_EPOCH),
            _ => Err(KafkaCode::FENCED_MEMBER_EPOCH),
        }
    }
}

/// The member index range assignment gives partition `p` of `count` over `n` members.
fn range_owner(p: i32, count: i32, n: usize) -> usize {
    let n = n as i32;
    let per = count / n;
    let extra = count % n;
    // The first `extra` members take `per + 1` partitions each.
    let cut = extra * (per + 1);
    let who = if p < cut {
        p / (per + 1)
    } else {
        extra + (p - cut) / per.max(1)
    };
    who.clamp(0, n - 1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_owner_splits_evenly_with_the_extra_first() {
        let owners: Vec<usize> = (0..7).map(|p| range_owner(p, 7, 3)).collect();
        assert_eq!(owners, vec![0, 0, 0, 1, 1, 2, 2]);
        let owners: Vec<usize> = (0..2).map(|p| range_owner(p, 2, 3)).collect();
        assert_eq!(owners, vec![0, 1]);
    }

    #[test]
    fn grant_withholds_what_another_member_still_owns() {
        let mut g = ConsumerGroup::default();
        let mut parts = BTreeMap::new();
        parts.insert("t".to_string(), 2);
        let sub: BTreeSet<String> = ["t".to_string()].into();
        g.members.insert(
            "a".into(),
            ConsumerMember {
                subscription: sub.clone(),
                owned: [("t".to_string(), 0), ("t".to_string(), 1)].into(),
                ..Default::default()
            },
        );
        g.members.insert(
            "b".into(),
            ConsumerMember {
                subscription: sub,
                ..Default::default()
            },
        );
        g.rebalance(&parts);
        let b_target = g.members["b"].target.clone();
        assert_eq!(b_target.len(), 1);
        assert!(g.grant("b").is_empty(), "a still owns b's target");
        if let Some(a) = g.members.get_mut("a") {
            a.owned.retain(|tp| !b_target.contains(tp));
        }
        assert_eq!(g.grant("b"), b_target);
    }
}
