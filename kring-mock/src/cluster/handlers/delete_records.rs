//! DeleteRecords (API 21): moves a partition's log start offset.

use kring::protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse,
    delete_records::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult},
};
use kring::protocol::{KafkaCode, ResponseKind};

use super::{led_partition, partition_mut};
use crate::cluster::Ctx;

pub(crate) fn delete_records(cx: &Ctx<'_>, r: &DeleteRecordsRequest) -> ResponseKind {
    let mut st = cx.lock();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|dp| {
                            let mut out = DeleteRecordsPartitionResult::default()
                                .with_partition_index(dp.partition_index)
                                .with_low_watermark(-1);
                            if let Err(code) = led_partition(
                                &st,
                                cx.broker,
                                st.topics.get(&t.name),
                                dp.partition_index,
                                -1,
                            ) {
                                out.error_code = code.code();
                                return out;
                            }
                            let Some(p) = partition_mut(&mut st, &t.name, dp.partition_index)
                            else {
                                out.error_code = KafkaCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                                return out;
                            };
                            let offset = if dp.offset == -1 {
                                p.log.high_watermark
                            } else {
                                dp.offset
                            };
                            if offset < 0 || offset > p.log.high_watermark {
                                out.error_code = KafkaCode::OFFSET_OUT_OF_RANGE.code();
                                return out;
                            }
                            p.log.delete_before(offset);
                            out.low_watermark = p.log.log_start;
                            out
                        })
                        .collect(),
                )
        })
        .collect();
    drop(st);
    cx.notify();
    ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))
}
