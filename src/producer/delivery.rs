//! Delivery reports for records sent with a tag ([`Producer::send_tagged`]): instead of
//! a [`DeliveryFuture`](super::DeliveryFuture) per record, the producer's
//! [`DeliveryHandler`] is told the outcome of each settled batch's tagged records at once,
//! with the tags they were sent with (librdkafka's delivery report callback with each
//! message's opaque, and the Java client's send callback, serve the same purpose).
//!
//! A tagged record costs the sending thread no future and no shared counter: its tag is
//! noted in its batch (24 bytes in a list the batch keeps), and the batch's outcome is
//! handed to the handler once, on the thread that settles it, after that thread has let
//! go of every producer lock.
//!
//! [`Producer::send_tagged`]: super::Producer::send_tagged

use std::sync::Arc;

use super::RecordMetadata;
use crate::engine::produce::completion::{BatchAck, ReportTagged, TaggedRecord};
use crate::error::Error;

/// Told the outcome of records sent with [`Producer::send_tagged`]
/// (set with [`ProducerBuilder::delivery_handler`]).
///
/// Called once per batch holding tagged records, when the broker acknowledged it or it
/// failed for good (a batch that is retried is reported once, at its final outcome;
/// one split because the broker found it too large is reported per part). It runs on
/// the thread that settles the batch: usually the worker that owns the leader's
/// connection, at the end of its turn; the thread that closes or drops the producer for
/// what it fails; a sending thread for a batch that failed as it was sealed. It never
/// runs with a producer lock held, so it may send again (`try_send_tagged` never
/// waits); but keep it short and never block in it, as on the worker it holds up every
/// connection that worker drives (hand the reports to another thread when there is more
/// to do). A handler that keeps a `Producer` clone keeps the producer alive: close it
/// with [`Producer::close`]. A panic in it is caught and logged; the batch's reports
/// are then lost to the application.
///
/// One partition's batches are reported in the order they settle on one thread; a
/// batch failed on a sending thread as it was sealed may be reported before an older
/// one the worker settled in the same moment.
///
/// Every record sent with a tag is reported exactly once, the failed ones too: when
/// the producer closes or is dropped, what it could not send is reported failed.
/// [`Producer::flush`] returns once every batch sent before it is settled, which
/// includes its call to the handler.
///
/// Any `Fn(&DeliveredBatch<'_>) + Send + Sync + 'static` closure is a handler.
///
/// [`Producer::send_tagged`]: super::Producer::send_tagged
/// [`Producer::flush`]: super::Producer::flush
/// [`Producer::close`]: super::Producer::close
/// [`ProducerBuilder::delivery_handler`]: super::ProducerBuilder::delivery_handler
pub trait DeliveryHandler: Send + Sync + 'static {
    /// The outcome of one batch's tagged records.
    fn on_delivery(&self, batch: &DeliveredBatch<'_>);
}

impl<F> DeliveryHandler for F
where
    F: Fn(&DeliveredBatch<'_>) + Send + Sync + 'static,
{
    fn on_delivery(&self, batch: &DeliveredBatch<'_>) {
        self(batch)
    }
}

/// One settled batch's tagged records, as a [`DeliveryHandler`] is told them.
#[derive(Debug, Clone, Copy)]
pub struct DeliveredBatch<'a> {
    topic: &'a str,
    partition: i32,
    outcome: Result<BatchAck, &'a Error>,
    records: TaggedRecords<'a>,
}

/// Where a reported batch's tagged records are: the producer's batch lends its list; a
/// batch of one ([`DeliveredBatch::of_one`]) holds its record.
#[derive(Debug, Clone, Copy)]
enum TaggedRecords<'a> {
    Lent(&'a [TaggedRecord]),
    One(TaggedRecord),
}

impl TaggedRecords<'_> {
    fn len(&self) -> usize {
        match self {
            TaggedRecords::Lent(records) => records.len(),
            TaggedRecords::One(_) => 1,
        }
    }

    fn get(&self, i: usize) -> TaggedRecord {
        match self {
            TaggedRecords::Lent(records) => records[i],
            TaggedRecords::One(record) => *record,
        }
    }
}

impl<'a> DeliveredBatch<'a> {
    /// A batch of one tagged record, `result` its outcome: what a test double of the
    /// producer reports for each tagged send (`kring_mock::MockProducer` does), and a
    /// way to call a [`DeliveryHandler`] in the handler's own unit tests. The real
    /// producer reports its batches whole.
    pub fn of_one(
        topic: &'a str,
        partition: i32,
        tag: u64,
        result: Result<RecordMetadata, &'a Error>,
    ) -> DeliveredBatch<'a> {
        let timestamp = result.map_or(-1, |m| m.timestamp);
        DeliveredBatch {
            topic,
            partition,
            outcome: result.map(|m| BatchAck {
                base_offset: m.offset,
                log_append_time: -1,
            }),
            records: TaggedRecords::One(TaggedRecord {
                index: 0,
                timestamp,
                tag,
            }),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &'a str {
        self.topic
    }

    /// The partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Why the batch failed for good, or `None` when the broker acknowledged it.
    pub fn error(&self) -> Option<&'a Error> {
        self.outcome.err()
    }

    /// How many tagged records the batch held (records sent without a tag are not
    /// counted: their futures tell them).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it held none (never, as reported).
    pub fn is_empty(&self) -> bool {
        self.records.len() == 0
    }

    /// Each tagged record's outcome, in the order they were sent.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Delivery<'a>> + 'a {
        let (partition, outcome, records) = (self.partition, self.outcome, self.records);
        (0..records.len()).map(move |i| {
            let r = records.get(i);
            Delivery {
                tag: r.tag,
                result: outcome.map(|ack| {
                    let (offset, timestamp) = r.at(&ack);
                    RecordMetadata {
                        partition,
                        offset,
                        timestamp,
                    }
                }),
            }
        })
    }
}

/// One tagged record's outcome.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The tag it was sent with.
    pub tag: u64,
    /// Where it was written (offset -1 with acks=0), or why it was not.
    pub result: Result<RecordMetadata, &'a Error>,
}

/// The engine's way to the producer's handler.
pub(crate) struct HandlerReporter(pub Arc<dyn DeliveryHandler>);

impl std::fmt::Debug for HandlerReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandlerReporter")
    }
}

impl ReportTagged for HandlerReporter {
    fn report(
        &self,
        topic: &str,
        partition: i32,
        outcome: Result<&BatchAck, &Error>,
        records: &[TaggedRecord],
    ) {
        let batch = DeliveredBatch {
            topic,
            partition,
            outcome: outcome.copied(),
            records: TaggedRecords::Lent(records),
        };
        let handler = &self.0;
        let called =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.on_delivery(&batch)));
        if called.is_err() {
            tracing::error!(
                topic,
                partition,
                records = records.len(),
                "the producer's delivery handler panicked; these reports are lost"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DeliveredBatch, RecordMetadata};
    use crate::error::Error;

    #[test]
    fn a_batch_of_one_reports_its_tag_and_metadata() {
        let meta = RecordMetadata {
            partition: 2,
            offset: 41,
            timestamp: 1_700_000_000_123,
        };
        let batch = DeliveredBatch::of_one("t", 2, 7, Ok(meta));
        assert_eq!((batch.topic(), batch.partition(), batch.len()), ("t", 2, 1));
        assert!(batch.error().is_none());
        let all: Vec<_> = batch.iter().collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].tag, 7);
        assert_eq!(all[0].result.unwrap(), meta);
    }

    #[test]
    fn a_failed_batch_of_one_reports_its_error() {
        let error = Error::Timeout("no ack".into());
        let batch = DeliveredBatch::of_one("t", 0, 9, Err(&error));
        assert!(matches!(batch.error(), Some(Error::Timeout(_))));
        let d = batch.iter().next().unwrap();
        assert_eq!(d.tag, 9);
        assert!(matches!(d.result, Err(Error::Timeout(_))));
    }
}
