//! OffsetForLeaderEpoch (API 23, KIP-320): where a leader epoch ended.

use kring::protocol::ResponseKind;
use kring::protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    offset_for_leader_epoch::{EpochEndOffset, OffsetForLeaderTopicResult},
};

use super::led_partition;
use crate::cluster::Ctx;

pub(crate) fn offset_for_leader_epoch(
    cx: &Ctx<'_>,
    r: &OffsetForLeaderEpochRequest,
) -> ResponseKind {
    let st = cx.lock();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|op| {
                            let mut out = EpochEndOffset::default()
                                .with_partition(op.partition)
                                .with_leader_epoch(-1)
                                .with_end_offset(-1);
                            match led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.topic),
                                op.partition,
                                op.current_leader_epoch,
                            ) {
                                Ok(p) => {
                                    let (epoch, end) =
                                        p.log.end_offset_for_epoch(op.leader_epoch, p.leader_epoch);
                                    out.leader_epoch = epoch;
                                    out.end_offset = end;
                                }
                                Err(code) => out.error_code = code.code(),
                            }
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}
