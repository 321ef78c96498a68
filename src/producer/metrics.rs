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
    /// What this sink last set the queued-records and buffer gauges to (the buffer
    /// gauge is the producer's, set by every sink: one that last read bytes in use
    /// may be the last to have set it).
    last_queued: u64,
    last_buffer: usize,
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
            last_queued: 0,
            last_buffer: 0,
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

    /// Samples the gauges when due, or at once when the sink is about to sleep with
    /// nothing to bring it back (`idle`: no timer, no answer awaited) and it last set
    /// either gauge above zero: a sink idle after its last answer would otherwise leave
    /// them at what it last sampled while busy, until records came again.
    /// `unsettled` and `buffer_used` are asked only when sampling.
    pub fn sample(
        &mut self,
        now: Instant,
        idle: bool,
        unsettled: impl FnOnce() -> u64,
        buffer_used: impl FnOnce() -> usize,
    ) {
        if !self.due_to_sample(now, idle) {
            return;
        }
        self.next_sample = Some(now + SAMPLE_EVERY);
        self.last_queued = unsettled();
        self.last_buffer = buffer_used();
        self.queued_records.set(self.last_queued as f64);
        self.buffer_bytes.set(self.last_buffer as f64);
    }

    fn due_to_sample(&self, now: Instant, idle: bool) -> bool {
        let stale = idle && (self.last_queued != 0 || self.last_buffer != 0);
        stale || self.next_sample.is_none_or(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Samples with `queued` records unsettled and no buffer in use; whether the sink
    /// was asked.
    fn sample_at(m: &mut SinkMetrics, now: Instant, idle: bool, queued: u64) -> bool {
        sample_with(m, now, idle, queued, 0)
    }

    fn sample_with(
        m: &mut SinkMetrics,
        now: Instant,
        idle: bool,
        queued: u64,
        buffer: usize,
    ) -> bool {
        let asked = Cell::new(false);
        m.sample(
            now,
            idle,
            || {
                asked.set(true);
                queued
            },
            || buffer,
        );
        asked.get()
    }

    #[test]
    fn an_idle_sink_samples_its_queued_records_at_once_until_the_gauge_reads_none() {
        let mut m = SinkMetrics::new(1, false);
        let t0 = Instant::now();
        assert!(sample_at(&mut m, t0, false, 5), "the first sample");
        let soon = t0 + Duration::from_millis(10);
        assert!(!sample_at(&mut m, soon, false, 0), "busy: not due yet");
        assert!(sample_at(&mut m, soon, true, 0), "idle with 5 last read");
        assert_eq!(m.last_queued, 0);
        let later = soon + Duration::from_millis(10);
        assert!(
            !sample_at(&mut m, later, true, 0),
            "idle, and the gauge reads 0"
        );
        assert!(
            sample_at(&mut m, soon + SAMPLE_EVERY, false, 3),
            "due again"
        );
        assert_eq!(m.last_queued, 3);
    }

    #[test]
    fn an_idle_sink_that_last_saw_the_buffer_in_use_samples_it_again() {
        let mut m = SinkMetrics::new(1, false);
        let t0 = Instant::now();
        // Nothing of its own queued, but other sinks' records in the buffer.
        assert!(sample_with(&mut m, t0, false, 0, 4096));
        let soon = t0 + Duration::from_millis(10);
        assert!(
            sample_with(&mut m, soon, true, 0, 0),
            "idle with 4096 last read"
        );
        assert_eq!(m.last_buffer, 0);
        assert!(!sample_with(&mut m, soon, true, 0, 0), "both gauges read 0");
    }
}
