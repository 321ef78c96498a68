//! ConsumerGroupHeartbeat (API 68): KIP-848 joins, heartbeats and leaves, on the model
//! in [`crate::cluster::consumer_group`].

use std::collections::{BTreeMap, BTreeSet};

use kring::protocol::messages::consumer_group_heartbeat::{
    Assignment, ConsumerGroupHeartbeatResponseTopicPartitions,
};
use kring::protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kring::protocol::{KafkaCode, ResponseKind, Uuid};

use crate::cluster::Ctx;
use crate::cluster::consumer_group::{ASSIGNORS, ConsumerGroup, ConsumerMember, Tp};
use crate::cluster::group::check_coordinator;
use crate::cluster::state::State;

/// A member's epoch when it leaves for good, and when a static member steps out.
const LEAVE: i32 = -1;
const LEAVE_STATIC: i32 = -2;

pub(crate) fn heartbeat(cx: &Ctx<'_>, r: &ConsumerGroupHeartbeatRequest) -> ResponseKind {
    let mut st = cx.lock();
    let answer = match answer(&mut st, cx.broker, r) {
        Ok(response) => response,
        Err((code, message)) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(message))
            .with_member_epoch(-1),
    };
    drop(st);
    cx.notify();
    ResponseKind::ConsumerGroupHeartbeat(answer)
}

type Failure = (KafkaCode, String);

fn answer(
    st: &mut State,
    broker: i32,
    r: &ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse, Failure> {
    check_coordinator(st, broker, &r.group_id).map_err(|c| (c, "not the coordinator".into()))?;
    check_request(r)?;
    let interval = st.config.consumer_heartbeat_interval_ms;
    let partitions: BTreeMap<String, i32> = st
        .topics
        .iter()
        .map(|(name, t)| (name.clone(), t.partitions.len() as i32))
        .collect();
    let owned = r.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .filter_map(|t| topic_name(st, t.topic_id).map(|n| (n, &t.partitions)))
            .flat_map(|(n, ps)| ps.iter().map(move |&p| (n.clone(), p)))
            .collect::<BTreeSet<Tp>>()
    });
    let group = st.groups.entry(r.group_id.clone()).or_default();
    if !group.members.is_empty() {
        return Err((
            KafkaCode::GROUP_ID_NOT_FOUND,
            format!("group {} is a classic group", r.group_id),
        ));
    }
    let names: BTreeMap<String, Uuid> = st_topic_ids(&st.topics);
    let cg = &mut st
        .groups
        .get_mut(&r.group_id)
        .ok_or((KafkaCode::UNKNOWN_MEMBER_ID, String::new()))?
        .consumer;
    if let Some(a) = &r.server_assignor {
        cg.assignor = Some(a.clone());
    }
    let response = ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(r.member_id.clone()))
        .with_heartbeat_interval_ms(interval);
    match r.member_epoch {
        LEAVE | LEAVE_STATIC => {
            leave(cg, r, &partitions)?;
            return Ok(response.with_member_epoch(r.member_epoch));
        }
        0 => join(cg, r, &partitions)?,
        epoch => {
            cg.check_epoch(&r.member_id, epoch, false)
                .map_err(|c| (c, format!("member epoch {epoch} is not current")))?;
            let subscription = r.subscribed_topic_names.clone().map(BTreeSet::from_iter);
            let member = cg
                .members
                .get_mut(&r.member_id)
                .ok_or((KafkaCode::UNKNOWN_MEMBER_ID, String::new()))?;
            let resubscribed = subscription.is_some_and(|s| {
                let changed = s != member.subscription;
                member.subscription = s;
                changed
            });
            if resubscribed {
                cg.rebalance(&partitions);
            }
        }
    }
    if let (Some(owned), Some(m)) = (owned, cg.members.get_mut(&r.member_id)) {
        m.owned = owned;
    }
    let granted = cg.grant(&r.member_id);
    let group_epoch = cg.epoch;
    let member = cg
        .members
        .get_mut(&r.member_id)
        .ok_or((KafkaCode::UNKNOWN_MEMBER_ID, String::new()))?;
    let mut response = response;
    if member.given.as_ref() != Some(&granted) {
        member.epoch = group_epoch;
        member.given = Some(granted.clone());
        let epoch = member.epoch;
        cg.handed
            .push((r.member_id.clone(), epoch, granted.clone()));
        response = response.with_assignment(Some(assignment(&granted, &names)));
    }
    let epoch = cg.members.get(&r.member_id).map_or(0, |m| m.epoch);
    Ok(response.with_member_epoch(epoch))
}

fn check_request(r: &ConsumerGroupHeartbeatRequest) -> Result<(), Failure> {
    if r.group_id.is_empty() {
        return Err((KafkaCode::INVALID_GROUP_ID, "empty group id".into()));
    }
    if r.member_id.is_empty() {
        return Err((KafkaCode::INVALID_REQUEST, "empty member id".into()));
    }
    if r.subscribed_topic_regex
        .as_ref()
        .is_some_and(|s| !s.is_empty())
    {
        return Err((
            KafkaCode::INVALID_REQUEST,
            "the fake cluster takes no regex subscriptions".into(),
        ));
    }
    if let Some(a) = r.server_assignor.as_deref() {
        if !ASSIGNORS.contains(&a) {
            return Err((
                KafkaCode::UNSUPPORTED_ASSIGNOR,
                format!("no assignor {a:?}"),
            ));
        }
    }
    Ok(())
}

fn join(
    cg: &mut ConsumerGroup,
    r: &ConsumerGroupHeartbeatRequest,
    partitions: &BTreeMap<String, i32>,
) -> Result<(), Failure> {
    let subscription: BTreeSet<String> = r
        .subscribed_topic_names
        .clone()
        .ok_or((KafkaCode::INVALID_REQUEST, "a join names its topics".into()))?
        .into_iter()
        .collect();
    let mut member = ConsumerMember::default();
    if let Some(instance) = &r.instance_id {
        let holder = cg
            .members
            .iter()
            .find(|(id, m)| m.instance_id.as_ref() == Some(instance) && **id != r.member_id)
            .map(|(id, m)| (id.clone(), m.departed));
        match holder {
            Some((_, false)) => {
                return Err((
                    KafkaCode::UNRELEASED_INSTANCE_ID,
                    format!("instance id {instance} is in use"),
                ));
            }
            Some((old, true)) => {
                // The static member comes back: it takes over its reserved target.
                if let Some(m) = cg.members.remove(&old) {
                    member.target = m.target;
                }
            }
            None => {}
        }
    }
    member.instance_id = r.instance_id.clone();
    member.subscription = subscription;
    cg.members.insert(r.member_id.clone(), member);
    cg.rebalance(partitions);
    Ok(())
}

fn leave(
    cg: &mut ConsumerGroup,
    r: &ConsumerGroupHeartbeatRequest,
    partitions: &BTreeMap<String, i32>,
) -> Result<(), Failure> {
    let member = cg
        .members
        .get_mut(&r.member_id)
        .ok_or((KafkaCode::UNKNOWN_MEMBER_ID, "no such member".into()))?;
    if r.member_epoch == LEAVE_STATIC && member.instance_id.is_some() {
        member.departed = true;
        member.owned.clear();
        member.given = None;
        return Ok(());
    }
    cg.members.remove(&r.member_id);
    cg.rebalance(partitions);
    Ok(())
}

fn st_topic_ids(topics: &BTreeMap<String, crate::cluster::state::Topic>) -> BTreeMap<String, Uuid> {
    topics.iter().map(|(n, t)| (n.clone(), t.id)).collect()
}

fn topic_name(st: &State, id: Uuid) -> Option<String> {
    st.topics
        .iter()
        .find(|(_, t)| t.id == id)
        .map(|(n, _)| n.clone())
}

fn assignment(granted: &BTreeSet<Tp>, ids: &BTreeMap<String, Uuid>) -> Assignment {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in granted {
        by_topic.entry(t.as_str()).or_default().push(*p);
    }
    Assignment::default().with_topic_partitions(
        by_topic
            .into_iter()
            .filter_map(|(t, ps)| {
                ids.get(t).map(|&id| {
                    ConsumerGroupHeartbeatResponseTopicPartitions::default()
                        .with_topic_id(id)
                        .with_partitions(ps)
                })
            })
            .collect(),
    )
}
