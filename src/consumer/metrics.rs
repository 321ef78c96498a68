//! What a partition consumer records about the batches it hands out (the names are in
//! [`crate::metrics`]), and where it shows them to the interceptors. Recorded per batch
//! and per fetched chunk, never per record.

use metrics::{Counter, Gauge, SharedString};

use crate::buf::MemoryBudget;
use crate::config::Interceptors;
use crate::error::Error;
use crate::metrics::names::*;

use super::interceptor::{ConsumedBatch, ConsumerInterceptor};
use super::reader::FetchedBatch;

/// A partition consumer's handles.
pub(crate) struct PartitionMetrics {
    records: Counter,
    bytes: Counter,
    lag: Gauge,
    prefetch: Gauge,
    interceptors: Interceptors<dyn ConsumerInterceptor>,
}

impl std::fmt::Debug for PartitionMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionMetrics").finish_non_exhaustive()
    }
}

impl PartitionMetrics {
    pub fn new(
        topic: &str,
        partition: i32,
        interceptors: Interceptors<dyn ConsumerInterceptor>,
    ) -> Self {
        let topic_label = SharedString::from(topic.to_string());
        let by_topic = [("topic", topic_label.clone())];
        let by_partition = [
            ("topic", topic_label),
            ("partition", SharedString::from(partition.to_string())),
        ];
        PartitionMetrics {
            records: metrics::counter!(CONSUMER_RECORDS, &by_topic),
            bytes: metrics::counter!(CONSUMER_BYTES, &by_topic),
            lag: metrics::gauge!(CONSUMER_LAG, &by_partition),
            prefetch: metrics::gauge!(CONSUMER_PREFETCH_BYTES),
            interceptors,
        }
    }

    /// A chunk arrived: the lag as of its fetch, the memory fetched and not consumed.
    pub fn fetched(&self, high_watermark: i64, position: i64, budget: &MemoryBudget) {
        if high_watermark >= 0 {
            self.lag.set((high_watermark - position).max(0) as f64);
        }
        self.prefetch
            .set(budget.capacity().saturating_sub(budget.available()) as f64);
    }

    /// `batch` of `topic`/`partition` is about to be handed out.
    pub fn handing_out(&self, topic: &str, partition: i32, batch: &FetchedBatch<'_>) {
        let (first, last, bytes) = batch.extent();
        let records = match batch.header() {
            Some(h) if first <= h.base_offset() => h.record_count().max(0) as u64,
            _ => (last - first + 1).max(0) as u64,
        };
        self.records.increment(records);
        self.bytes.increment(bytes as u64);
        if self.interceptors.is_empty() {
            return;
        }
        let consumed = ConsumedBatch {
            topic,
            partition,
            first_offset: first,
            last_offset: last,
            bytes,
        };
        for i in self.interceptors.iter() {
            i.on_consume(&consumed);
        }
    }
}

/// An error reported to a partition consumer of `topic` (rare: registered each time).
pub(crate) fn count_error(topic: &str, error: &Error) {
    let labels = [
        ("topic", SharedString::from(topic.to_string())),
        ("error", SharedString::const_str(error.kind())),
    ];
    metrics::counter!(CONSUMER_ERRORS, &labels).increment(1);
}
