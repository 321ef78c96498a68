//! What a sink's task records about the batches its broker answered (the names are in
//! [`crate::metrics`]), and where it hands each final outcome to the interceptors.
//! Recorded per batch and per request, never per record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, SharedString};

use crate::config::Interceptors;
use crate::engine::produce::partition::{BatchReport, Fate, ProducePartition};
use crate::metrics::CountersBy;
use crate::metrics::names::*;

use super::interceptor::{Acknowledgement, ProducerInterceptor};

/// How often the gauges are sampled (they walk the sink's partitions).
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// One topic's counters.
struct TopicMetrics {
    records: Counter,
    batches: Counter,
    retries: Counter,
    /// By error kind.
    errors: CountersBy,
}

impl TopicMetrics {
    fn new(topic: &str) -> Self {
        let labels = [("topic", SharedString::from(topic.to_string()))];
        TopicMetrics {
            records: metrics::counter!(PRODUCER_RECORDS, &labels),
            batches: metrics::counter!(PRODUCER_BATCHES, &labels),
            retries: metrics::counter!(PRODUCER_RETRIES, &labels),
            errors: CountersBy::new(PRODUCER_ERRORS, labels[0].clone(), "error"),
        }
    }
}

/// A sink task's metric handles.
pub(crate) struct SinkMetrics {
    topics: HashMap<Arc<str>, TopicMetrics>,
    batch_records: Histogram,
    batch_bytes: Histogram,
    compression_ratio: Histogram,
    delivery_latency: Histogram,
    queued_records: Gauge,
    buffer_bytes: Gauge,
    next_sample: Option<Instant>,
    /// The producer compresses its batches.
    compressing: bool,
}

impl SinkMetrics {
    pub fn new(broker: i32, compressing: bool) -> Self {
        let labels = [("broker", SharedString::from(broker.to_string()))];
        SinkMetrics {
            topics: HashMap::new(),
            batch_records: metrics::histogram!(PRODUCER_BATCH_RECORDS),
            batch_bytes: metrics::histogram!(PRODUCER_BATCH_BYTES),
            compression_ratio: metrics::histogram!(PRODUCER_COMPRESSION_RATIO),
            delivery_latency: metrics::histogram!(PRODUCER_DELIVERY_LATENCY),
            queued_records: metrics::gauge!(PRODUCER_QUEUED_RECORDS, &labels),
            buffer_bytes: metrics::gauge!(PRODUCER_BUFFER_BYTES),
            next_sample: None,
            compressing,
        }
    }

    /// Records one batch's answer and tells the interceptors of a final outcome.
    pub fn record(
        &mut self,
        partition: &ProducePartition,
        report: &BatchReport,
        interceptors: &Interceptors<dyn ProducerInterceptor>,
    ) {
        let topic = &partition.topic;
        let t = self
            .topics
            .entry(topic.clone())
            .or_insert_with(|| TopicMetrics::new(topic));
        match &report.fate {
            Fate::Acked(_) => {
                t.records.increment(report.records.max(0) as u64);
                t.batches.increment(1);
                self.batch_records.record(f64::from(report.records));
                self.batch_bytes.record(report.wire_bytes as f64);
                if self.compressing && report.uncompressed_bytes > 0 {
                    let ratio = report.wire_bytes as f64 / report.uncompressed_bytes as f64;
                    self.compression_ratio.record(ratio);
                }
                self.delivery_latency.record(report.waited.as_secs_f64());
            }
            Fate::Retried => t.retries.increment(1),
            Fate::Failed(e) => t.errors.increment(e.kind()),
        }
        if interceptors.is_empty() {
            return;
        }
        let result = match &report.fate {
            Fate::Acked(ack) => Ok(ack.base_offset),
            Fate::Failed(e) => Err(e),
            Fate::Retried => return,
        };
        let ack = Acknowledgement {
            topic,
            partition: partition.index,
            records: report.records,
            result,
        };
        for i in interceptors.iter() {
            i.on_acknowledgement(&ack);
        }
    }

    /// Samples the gauges when due: `unsettled` and `buffer_used` are asked only then.
    pub fn sample(
        &mut self,
        now: Instant,
        unsettled: impl FnOnce() -> u64,
        buffer_used: impl FnOnce() -> usize,
    ) {
        if self.next_sample.is_some_and(|at| now < at) {
            return;
        }
        self.next_sample = Some(now + SAMPLE_EVERY);
        self.queued_records.set(unsettled() as f64);
        self.buffer_bytes.set(buffer_used() as f64);
    }
}
