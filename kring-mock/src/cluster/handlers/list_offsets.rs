//! ListOffsets (API 2): earliest, latest and by-timestamp offsets.

use kring::protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, list_offsets::ListOffsetsTopicResponse,
};
use kring::protocol::{KafkaCode, ResponseKind};

use super::led_partition;
use crate::cluster::Ctx;
use crate::responses::list_offsets_partition;

pub(crate) fn list_offsets(cx: &Ctx<'_>, r: &ListOffsetsRequest) -> ResponseKind {
    let st = cx.lock();
    let version = cx.request.version;
    let topics = r
        .topics
        .iter()
        .map(|t| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|lp| {
                            let p = match led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.name),
                                lp.partition_index,
                                lp.current_leader_epoch,
                            ) {
                                Ok(p) => p,
                                Err(code) => {
                                    return list_offsets_partition(
                                        lp.partition_index,
                                        code,
                                        None,
                                        version,
                                    );
                                }
                            };
                            let log = &p.log;
                            let found = match lp.timestamp {
                                -2 | -4 => Some((log.log_start, -1, p.leader_epoch)),
                                // read_committed's latest is the last stable offset.
                                -1 if r.isolation_level == 1 => {
                                    Some((log.last_stable_offset(), -1, p.leader_epoch))
                                }
                                -1 => Some((log.high_watermark, -1, p.leader_epoch)),
                                -3 => log.max_timestamp(),
                                ts if ts >= 0 => log.offset_for_timestamp(ts),
                                _ => None,
                            };
                            list_offsets_partition(
                                lp.partition_index,
                                KafkaCode::NONE,
                                found,
                                version,
                            )
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}
