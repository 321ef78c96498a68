//! Consumer groups: list them (ListGroups on every broker, since each coordinator knows
//! only its own groups), describe them (DescribeGroups for classic groups,
//! ConsumerGroupDescribe for KIP-848 ones), delete them (DeleteGroups; a group with
//! members is NON_EMPTY_GROUP), and read, set or delete their committed offsets
//! (OffsetFetch, OffsetCommit as an admin — generation -1, no member — and
//! OffsetDelete). Every per-group request goes to the group's coordinator, found with
//! FindCoordinator and looked up again after NOT_COORDINATOR.

use bytes::{Buf, Bytes};

use super::partitions::TopicPartition;
use super::{Admin, Route, check, left_out, version_of};
use crate::error::{Error, Result};
use crate::protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    consumer_protocol_assignment::ConsumerProtocolAssignment,
    offset_commit::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    offset_delete::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
    offset_fetch::OffsetFetchRequestGroup,
};
use crate::protocol::{Decode, KafkaCode};

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// `consumer` for consumer groups, empty for groups that only commit offsets.
    pub protocol_type: String,
    /// Its state (`Stable`, `Empty`, ...), empty from brokers before ListGroups v4.
    pub state: String,
    /// `classic` or `consumer` (KIP-848), empty before ListGroups v5.
    pub group_type: String,
    /// The coordinator's id.
    pub coordinator: i32,
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its static instance id (KIP-345), if any.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The host it connected from.
    pub client_host: String,
    /// The partitions assigned to it, by topic (sorted).
    pub assignment: Vec<TopicPartition>,
}

/// A group as DescribeGroups (or ConsumerGroupDescribe) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state (`Stable`, `Empty`, `PreparingRebalance`, ...).
    pub state: String,
    /// `consumer`, or empty for an offsets-only group.
    pub protocol_type: String,
    /// The assignor chosen (`range`, `cooperative-sticky`, `uniform`, ...).
    pub protocol: String,
    /// Its members.
    pub members: Vec<GroupMember>,
    /// The coordinator's id.
    pub coordinator: i32,
}

/// A committed offset of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch committed with it, -1 if none.
    pub leader_epoch: i32,
    /// The metadata committed with it.
    pub metadata: Option<String>,
}

impl Admin {
    /// Every group of the cluster, sorted by id (ListGroups sent to every broker).
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>> {
        self.client.refresh_metadata(&[]).await?;
        let ids: Vec<i32> = self.client.metadata().brokers.keys().copied().collect();
        let mut out = Vec::new();
        for id in ids {
            let listed = self
                .run(Route::Node(id), |broker| async move {
                    let response = broker.send(ListGroupsRequest::default()).await?;
                    check(
                        ApiKey::ListGroups,
                        &format!("broker {id}"),
                        response.error_code,
                        None,
                    )?;
                    Ok(response.groups)
                })
                .await?;
            out.extend(listed.into_iter().map(|g| GroupListing {
                group_id: g.group_id,
                protocol_type: g.protocol_type,
                state: g.group_state,
                group_type: g.group_type,
                coordinator: id,
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out.dedup_by(|a, b| a.group_id == b.group_id);
        Ok(out)
    }

    /// Describes `group`: state, assignor and each member's assignment. A group that
    /// does not exist is GROUP_ID_NOT_FOUND naming it.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        let label = format!("group {group}");
        let label = &label;
        let classic = self
            .run(Route::Group(group.to_string()), |broker| async move {
                let request = DescribeGroupsRequest::default().with_groups(vec![group.into()]);
                let response = broker.send(request).await?;
                let g = response
                    .groups
                    .into_iter()
                    .find(|g| g.group_id == group)
                    .ok_or_else(|| left_out(ApiKey::DescribeGroups, label))?;
                let code = KafkaCode(g.error_code);
                if code == KafkaCode::GROUP_ID_NOT_FOUND
                    || (code.is_ok() && g.group_state == "Dead")
                {
                    return Ok(None);
                }
                check(ApiKey::DescribeGroups, label, g.error_code, None)?;
                let members = g
                    .members
                    .into_iter()
                    .map(|m| {
                        Ok(GroupMember {
                            assignment: decode_assignment(group, &m.member_assignment)?,
                            member_id: m.member_id,
                            instance_id: m.group_instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Some(GroupDescription {
                    group_id: g.group_id,
                    state: g.group_state,
                    protocol_type: g.protocol_type,
                    protocol: g.protocol_data,
                    members,
                    coordinator: broker.id(),
                }))
            })
            .await?;
        match classic {
            Some(d) => Ok(d),
            None => self.describe_consumer_group(group).await,
        }
    }

    /// A KIP-848 group (ConsumerGroupDescribe), or GROUP_ID_NOT_FOUND.
    async fn describe_consumer_group(&self, group: &str) -> Result<GroupDescription> {
        let label = format!("group {group}");
        let label = &label;
        self.run(Route::Group(group.to_string()), |broker| async move {
            let not_found = || Error::Rejected {
                api: ApiKey::DescribeGroups,
                resource: label.clone(),
                code: KafkaCode::GROUP_ID_NOT_FOUND,
                message: Some("no such group".into()),
            };
            if version_of(&broker, ApiKey::ConsumerGroupDescribe).is_err() {
                return Err(not_found());
            }
            let request =
                ConsumerGroupDescribeRequest::default().with_group_ids(vec![group.into()]);
            let response = broker.send(request).await?;
            let g = response
                .groups
                .into_iter()
                .find(|g| g.group_id == group)
                .ok_or_else(|| left_out(ApiKey::ConsumerGroupDescribe, label))?;
            // Kafka 3.9 advertises ConsumerGroupDescribe but answers UNSUPPORTED_VERSION
            // unless KIP-848 is switched on: no such group can exist there.
            if matches!(
                KafkaCode(g.error_code),
                KafkaCode::GROUP_ID_NOT_FOUND | KafkaCode::UNSUPPORTED_VERSION
            ) {
                return Err(not_found());
            }
            check(
                ApiKey::ConsumerGroupDescribe,
                label,
                g.error_code,
                g.error_message,
            )?;
            let members = g
                .members
                .into_iter()
                .map(|m| {
                    let mut assignment: Vec<TopicPartition> = m
                        .assignment
                        .topic_partitions
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.clone(), *p)))
                        .collect();
                    assignment.sort();
                    GroupMember {
                        member_id: m.member_id,
                        instance_id: m.instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        assignment,
                    }
                })
                .collect();
            Ok(GroupDescription {
                group_id: g.group_id,
                state: g.group_state,
                protocol_type: "consumer".into(),
                protocol: g.assignor_name,
                members,
                coordinator: broker.id(),
            })
        })
        .await
    }

    /// Deletes `group` and its committed offsets; a group with members is
    /// NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND, both naming it.
    pub async fn delete_group(&self, group: &str) -> Result<()> {
        let label = format!("group {group}");
        let label = &label;
        self.run(Route::Group(group.to_string()), |broker| async move {
            let request = DeleteGroupsRequest::default().with_groups_names(vec![group.into()]);
            let response = broker.send(request).await?;
            let r = response
                .results
                .into_iter()
                .find(|r| r.group_id == group)
                .ok_or_else(|| left_out(ApiKey::DeleteGroups, label))?;
            check(ApiKey::DeleteGroups, label, r.error_code, None)
        })
        .await
    }

    /// Every offset `group` has committed, sorted by topic and partition.
    pub async fn list_group_offsets(&self, group: &str) -> Result<Vec<CommittedOffset>> {
        let label = format!("group {group}");
        let label = &label;
        self.run(Route::Group(group.to_string()), |broker| async move {
            let version = version_of(&broker, ApiKey::OffsetFetch)?;
            let request = if version >= 8 {
                OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(group.into())
                        .with_topics(None),
                ])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(group.into())
                    .with_topics(None)
            };
            let response = broker.send_version(request, version).await?;
            let mut out = Vec::new();
            if version >= 8 {
                let g = response
                    .groups
                    .into_iter()
                    .find(|g| g.group_id == group)
                    .ok_or_else(|| left_out(ApiKey::OffsetFetch, label))?;
                check(ApiKey::OffsetFetch, label, g.error_code, None)?;
                for t in g.topics {
                    for p in t.partitions {
                        offset_row(
                            &mut out,
                            label,
                            &t.name,
                            p.partition_index,
                            p.error_code,
                            (p.committed_offset, p.committed_leader_epoch, p.metadata),
                        )?;
                    }
                }
            } else {
                check(ApiKey::OffsetFetch, label, response.error_code, None)?;
                for t in response.topics {
                    for p in t.partitions {
                        offset_row(
                            &mut out,
                            label,
                            &t.name,
                            p.partition_index,
                            p.error_code,
                            (p.committed_offset, p.committed_leader_epoch, p.metadata),
                        )?;
                    }
                }
            }
            out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            Ok(out)
        })
        .await
    }

    /// Sets `group`'s committed offsets (OffsetCommit as an admin). The group must have
    /// no members: an active group's coordinator refuses (UNKNOWN_MEMBER_ID), naming
    /// the group. Offsets must not be negative.
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<()> {
        if let Some(((t, p), o)) = offsets.iter().find(|(_, o)| *o < 0) {
            return Err(Error::InvalidArgument(format!(
                "group {group}: offset {o} for {t}-{p} is negative"
            )));
        }
        let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
        for ((topic, partition), offset) in offsets {
            let p = OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(String::new()));
            match topics.iter_mut().find(|t| t.name == *topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![p]),
                ),
            }
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(group.into())
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(String::new())
            .with_retention_time_ms(-1)
            .with_topics(topics);
        let label = format!("group {group}");
        let label = &label;
        self.run(Route::Group(group.to_string()), |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                for t in &response.topics {
                    for p in &t.partitions {
                        check(
                            ApiKey::OffsetCommit,
                            &format!("{label} on {}-{}", t.name, p.partition_index),
                            p.error_code,
                            None,
                        )?;
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Deletes `group`'s committed offsets of `partitions` (OffsetDelete); refused with
    /// GROUP_SUBSCRIBED_TO_TOPIC while the group consumes the topic.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
        for (topic, partition) in partitions {
            let p = OffsetDeleteRequestPartition::default().with_partition_index(*partition);
            match topics.iter_mut().find(|t| t.name == *topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![p]),
                ),
            }
        }
        let request = OffsetDeleteRequest::default()
            .with_group_id(group.into())
            .with_topics(topics);
        let label = format!("group {group}");
        let label = &label;
        self.run(Route::Group(group.to_string()), |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(ApiKey::OffsetDelete, label, response.error_code, None)?;
                for t in &response.topics {
                    for p in &t.partitions {
                        check(
                            ApiKey::OffsetDelete,
                            &format!("{label} on {}-{}", t.name, p.partition_index),
                            p.error_code,
                            None,
                        )?;
                    }
                }
                Ok(())
            }
        })
        .await
    }
}

/// One partition of an OffsetFetch answer: an error names group and partition; no
/// committed offset (-1) is left out.
fn offset_row(
    out: &mut Vec<CommittedOffset>,
    label: &str,
    topic: &str,
    partition: i32,
    code: i16,
    (offset, leader_epoch, metadata): (i64, i32, Option<String>),
) -> Result<()> {
    check(
        ApiKey::OffsetFetch,
        &format!("{label} on {topic}-{partition}"),
        code,
        None,
    )?;
    if offset >= 0 {
        out.push(CommittedOffset {
            topic: topic.to_string(),
            partition,
            offset,
            leader_epoch,
            metadata,
        });
    }
    Ok(())
}

/// A classic consumer's assignment (ConsumerProtocolAssignment: an i16 version, then
/// the body); empty bytes are no assignment. A member of another protocol type (not
/// `consumer`) has bytes in its own format: those that do not decode are an error
/// naming the group.
fn decode_assignment(group: &str, bytes: &Bytes) -> Result<Vec<TopicPartition>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = bytes.clone();
    let malformed =
        |why: String| Error::Malformed(format!("group {group}: a member assignment {why}"));
    if buf.remaining() < 2 {
        return Err(malformed(format!("of {} byte(s)", bytes.len())));
    }
    // Versions above the ones this crate knows keep the v3 layout in front (the schema's
    // rule for data structures), so they decode as the newest known.
    let version = buf.get_i16();
    if version < 0 {
        return Err(malformed(format!("with version {version}")));
    }
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.min(3))
        .map_err(|e| malformed(format!("that does not decode: {e}")))?;
    let mut out: Vec<TopicPartition> = assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Encode;
    use crate::protocol::messages::consumer_protocol_assignment::TopicPartition as Assigned;

    #[test]
    fn assignments_decode_and_garbage_is_an_error() {
        let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            Assigned::default()
                .with_topic("t".into())
                .with_partitions(vec![2, 0]),
        ]);
        let mut buf = bytes::BytesMut::new();
        buf.extend_from_slice(&1i16.to_be_bytes());
        a.encode(&mut buf, 1).unwrap();
        let got = decode_assignment("g", &buf.freeze()).unwrap();
        assert_eq!(got, vec![("t".to_string(), 0), ("t".to_string(), 2)]);
        assert!(decode_assignment("g", &Bytes::new()).unwrap().is_empty());
        let e = decode_assignment("g", &Bytes::from_static(&[0, 1, 0xff])).unwrap_err();
        assert!(matches!(e, Error::Malformed(_)), "{e}");
        let e = decode_assignment("g", &Bytes::from_static(&[0])).unwrap_err();
        assert!(e.to_string().contains("group g"), "{e}");
    }
}
