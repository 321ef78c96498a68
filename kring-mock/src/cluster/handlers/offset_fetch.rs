//! OffsetFetch (API 9): committed offsets, per group from v8.

use std::collections::BTreeMap;

use kring::protocol::ResponseKind;
use kring::protocol::messages::{
    OffsetFetchRequest, OffsetFetchResponse,
    offset_fetch::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
        OffsetFetchResponseTopic, OffsetFetchResponseTopics,
    },
};

use crate::cluster::Ctx;
use crate::cluster::group::{Group, check_coordinator, fail};

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
