//! Mock producers for unit tests of user code written against
//! [`RecordProducer`] / [`SyncRecordProducer`] (Sarama's `mocks.AsyncProducer` and
//! `mocks.SyncProducer`): no sockets, no runtime, every send checked against an ordered
//! list of expectations.
//!
//! Invariants:
//! - Expectations are met strictly in order; each send consumes exactly one. A send with
//!   none left is *unexpected*: it fails (an [`Error::Batch`] naming the mock) and is
//!   reported by [`MockProducer::verify`].
//! - Every send is recorded as a [`SentRecord`] (owned copies of topic, key, value and
//!   headers), whatever its outcome.
//! - Successful sends get offsets 0, 1, 2, ... per topic-partition; failed ones get none.
//! - Delivery futures are resolved before `send` returns, so `await`, `wait()` and the
//!   blocking calls never wait; a tagged send's outcome is handed to the delivery
//!   handler ([`MockProducer::with_delivery_handler`]) before `send_tagged` returns.
//! - Problems are reported by [`MockProducer::verify`] and [`MockProducer::close`] (as a
//!   [`MockError::Unverified`]); problems still unreported when the last handle is
//!   dropped panic the test, unless the thread is already panicking.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use kring::error::{Error, Result};
use kring::producer::partitioner::murmur2_partition;
use kring::producer::{
    DeliveredBatch, DeliveryFuture, DeliveryHandler, FlushFuture, ProducerRecord, RecordMetadata,
    RecordProducer, SendFuture, SyncRecordProducer, TaggedSendFuture,
};

use super::MockError;

/// A record as a mock producer received it, with owned data.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentRecord {
    /// The topic.
    pub topic: String,
    /// The partition the mock assigned (the record's own, or chosen from the key).
    pub partition: i32,
    /// The key.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The timestamp the record asked for (`None`: now).
    pub timestamp: Option<i64>,
}

impl SentRecord {
    fn from_record(record: &ProducerRecord<'_>, partition: i32) -> SentRecord {
        SentRecord {
            topic: record.topic.to_string(),
            partition,
            key: record
                .key
                .as_ref()
                .map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: record
                .value
                .as_ref()
                .map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: record
                .headers
                .iter()
                .map(|h| (h.key.to_string(), h.value.map(Bytes::copy_from_slice)))
                .collect(),
            timestamp: record.timestamp,
        }
    }

    /// The key as UTF-8 text, if it is some and valid.
    pub fn key_str(&self) -> Option<&str> {
        self.key
            .as_deref()
            .and_then(|k| std::str::from_utf8(k).ok())
    }

    /// The value as UTF-8 text, if it is some and valid.
    pub fn value_str(&self) -> Option<&str> {
        self.value
            .as_deref()
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The value of the first header named `key`.
    pub fn header(&self, key: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_deref())
    }

    fn describe(&self) -> String {
        format!(
            "{}-{} key={:?} value={:?}",
            self.topic,
            self.partition,
            self.key.as_deref().map(String::from_utf8_lossy),
            self.value.as_deref().map(String::from_utf8_lossy),
        )
    }
}

type Checker = Box<dyn Fn(&SentRecord) -> std::result::Result<(), String> + Send>;

enum Outcome {
    /// Acknowledge the record.
    Succeed,
    /// Fail its delivery future with the error.
    Fail(Error),
    /// Fail `send` itself with the error (the record is never queued).
    Reject(Error),
}

struct Expectation {
    checker: Option<Checker>,
    outcome: Outcome,
}

impl Expectation {
    fn describe(&self) -> String {
        let checked = if self.checker.is_some() {
            " (with checker)"
        } else {
            ""
        };
        match &self.outcome {
            Outcome::Succeed => format!("send{checked}, then succeed"),
            Outcome::Fail(e) => format!("send{checked}, then fail with {e}"),
            Outcome::Reject(e) => format!("send{checked}, rejected with {e}"),
        }
    }
}

struct State {
    name: &'static str,
    partitions: i32,
    expectations: VecDeque<Expectation>,
    sent: Vec<SentRecord>,
    offsets: HashMap<(String, i32), i64>,
    /// Unexpected sends, checker failures.
    problems: Vec<String>,
    /// How many of `problems` a verify has reported already.
    reported: usize,
    flushes: usize,
    /// Deliveries failed since the last flush, and the first of them (what the next
    /// flush reports, as the real producer's does).
    failed_since_flush: u64,
    first_failure: Option<Error>,
    closed: bool,
    /// Told the outcome of each tagged send.
    handler: Option<Arc<dyn DeliveryHandler>>,
}

impl State {
    fn note_failure(&mut self, error: &Error) {
        self.failed_since_flush += 1;
        self.first_failure.get_or_insert_with(|| error.clone());
    }

    /// A flush: counted, and the failures since the previous one reported as the real
    /// producer's flush reports them.
    fn flush(&mut self) -> Result<()> {
        self.flushes += 1;
        let records = std::mem::take(&mut self.failed_since_flush);
        match self.first_failure.take() {
            None => Ok(()),
            Some(first) => Err(Error::DeliveryFailed {
                records,
                batches: records,
                first: Box::new(first),
            }),
        }
    }

    fn unverified(&mut self) -> Option<MockError> {
        let unused: Vec<String> = self
            .expectations
            .iter()
            .map(|e| format!("expected {}", e.describe()))
            .collect();
        let failures: Vec<String> = self.problems[self.reported..].to_vec();
        self.reported = self.problems.len();
        if unused.is_empty() && failures.is_empty() {
            return None;
        }
        // An unmet expectation is reported once: the test has been told.
        self.expectations.clear();
        Some(MockError::ClientUnverified {
            mock: self.name,
            unused,
            unexpected: Vec::new(),
            failures,
        })
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Some(e) = self.unverified() {
            panic!("{e} (dropped without verify)");
        }
    }
}

/// A producer for unit tests: implements [`RecordProducer`] and answers each send as
/// the next expectation says (Sarama's `mocks.NewAsyncProducer` with
/// `ExpectInputAndSucceed`, `ExpectInputAndFail`,
/// `ExpectInputWithCheckerFunctionAndSucceed`).
///
/// Clones share one state: hand a clone (or `&mock`) to the code under test and verify
/// on the one you kept.
///
/// ```
/// use kring_mock::MockProducer;
/// use kring::producer::{ProducerRecord, RecordProducer};
/// use kring::{Error, Result};
///
/// // The user's code, generic over the producer.
/// async fn publish_all(producer: &impl RecordProducer, events: &[&str]) -> Result<usize> {
///     let mut ok = 0;
///     for e in events {
///         let delivery = producer.send(ProducerRecord::new("events").with_value(*e)).await?;
///         if delivery.await.is_ok() {
///             ok += 1;
///         }
///     }
///     Ok(ok)
/// }
///
/// // The user's test.
/// let mock = MockProducer::new();
/// mock.expect_send_and_succeed();
/// mock.expect_send_and_fail(Error::Timeout("no ack".into()));
/// mock.expect_send_with_checker(|r| match r.value_str() {
///     Some("c") => Ok(()),
///     other => Err(format!("expected \"c\", got {other:?}")),
/// })
/// .and_succeed();
///
/// let ok = kring::client::block_on(publish_all(&mock, &["a", "b", "c"])).unwrap();
/// assert_eq!(ok, 2);
/// assert_eq!(mock.sent()[2].value_str(), Some("c"));
/// mock.verify().unwrap();
/// ```
#[derive(Clone)]
pub struct MockProducer {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for MockProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("MockProducer")
            .field("expectations", &s.expectations.len())
            .field("sent", &s.sent.len())
            .field("problems", &s.problems)
            .finish()
    }
}

impl Default for MockProducer {
    fn default() -> Self {
        MockProducer::new()
    }
}

impl MockProducer {
    /// A mock with no expectations, whose topics have one partition.
    pub fn new() -> MockProducer {
        MockProducer::named("MockProducer")
    }

    fn named(name: &'static str) -> MockProducer {
        MockProducer {
            state: Arc::new(Mutex::new(State {
                name,
                partitions: 1,
                expectations: VecDeque::new(),
                sent: Vec::new(),
                offsets: HashMap::new(),
                problems: Vec::new(),
                reported: 0,
                flushes: 0,
                failed_since_flush: 0,
                first_failure: None,
                closed: false,
                handler: None,
            })),
        }
    }

    /// Gives every topic `count` partitions (at least 1): a record without a partition
    /// goes to `murmur2(key) % count` as under the default partitioner, or to partition
    /// 0 without a key.
    pub fn with_partitions(self, count: i32) -> MockProducer {
        self.lock().partitions = count.max(1);
        self
    }

    /// Tells `handler` the outcome of every tagged send
    /// ([`RecordProducer::send_tagged`]), as the real producer's delivery handler
    /// (`ProducerBuilder::delivery_handler`) is told: here one record at a time, on the
    /// sending thread, before the send returns, and only for records the send queued
    /// (not those it fails itself: rejected, unexpected or sent after close). A panic
    /// in the handler reaches the test (the real producer catches and logs it).
    pub fn with_delivery_handler(self, handler: impl DeliveryHandler) -> MockProducer {
        self.lock().handler = Some(Arc::new(handler));
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking checker poisons nothing we cannot keep using.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an expectation: the next send is checked by the returned builder's checker
    /// (if any) and then answered as it says.
    pub fn expect_send(&self) -> ExpectSend<'_> {
        ExpectSend {
            producer: self,
            checker: None,
        }
    }

    /// Expects a send and acknowledges it.
    pub fn expect_send_and_succeed(&self) {
        self.expect_send().and_succeed();
    }

    /// Expects a send and fails its delivery with `error`.
    pub fn expect_send_and_fail(&self, error: Error) {
        self.expect_send().and_fail(error);
    }

    /// Expects a send that `checker` accepts (`Err(reason)` to reject it); finish with
    /// [`ExpectSend::and_succeed`] or [`ExpectSend::and_fail`]. A rejected record fails
    /// its delivery and is reported by [`MockProducer::verify`].
    pub fn expect_send_with_checker(
        &self,
        checker: impl Fn(&SentRecord) -> std::result::Result<(), String> + Send + 'static,
    ) -> ExpectSend<'_> {
        self.expect_send().with_checker(checker)
    }

    fn push(&self, expectation: Expectation) {
        self.lock().expectations.push_back(expectation);
    }

    /// Every record sent so far, in order (including failed and unexpected ones).
    pub fn sent(&self) -> Vec<SentRecord> {
        self.lock().sent.clone()
    }

    /// How many expectations are still waiting for a send.
    pub fn remaining_expectations(&self) -> usize {
        self.lock().expectations.len()
    }

    /// How many times `flush` was called.
    pub fn flushes(&self) -> usize {
        self.lock().flushes
    }

    /// Ok if every expectation was met and no send was unexpected or rejected by a
    /// checker since the last verify; otherwise the list. Each problem is reported once.
    pub fn verify(&self) -> std::result::Result<(), MockError> {
        match self.lock().unverified() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops taking records (later sends fail with [`Error::ShuttingDown`]) and
    /// verifies.
    pub fn close(&self) -> std::result::Result<(), MockError> {
        self.lock().closed = true;
        self.verify()
    }

    fn send_now(&self, record: &ProducerRecord<'_>) -> Result<DeliveryFuture> {
        let (partition, outcome) = self.answer(record)?;
        Ok(DeliveryFuture::ready(partition, outcome))
    }

    /// A tagged send: answered as an untagged one, and its outcome handed to the
    /// delivery handler before this returns, with no lock of the mock held (the handler
    /// may send again). Without a handler the record is refused before it is looked at,
    /// as the real producer refuses it.
    fn send_tagged_now(&self, record: &ProducerRecord<'_>, tag: u64) -> Result<()> {
        let (name, handler) = {
            let s = self.lock();
            if s.closed {
                return Err(Error::ShuttingDown);
            }
            (s.name, s.handler.clone())
        };
        let Some(handler) = handler else {
            return Err(Error::InvalidArgument(format!(
                "{name}: a record sent with a tag needs a delivery handler \
                 (MockProducer::with_delivery_handler)"
            )));
        };
        let (partition, outcome) = self.answer(record)?;
        let batch = DeliveredBatch::of_one(record.topic, partition, tag, outcome.as_ref().copied());
        handler.on_delivery(&batch);
        Ok(())
    }

    /// Records `record` and answers it with the next expectation: its partition and
    /// delivery outcome, or the error `send` itself fails with.
    fn answer(&self, record: &ProducerRecord<'_>) -> Result<(i32, Result<RecordMetadata>)> {
        let mut s = self.lock();
        if s.closed {
            return Err(Error::ShuttingDown);
        }
        let partition = match (record.partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(k)) => murmur2_partition(k.as_bytes(), s.partitions as usize),
            (None, None) => 0,
        };
        let sent = SentRecord::from_record(record, partition);
        let description = sent.describe();
        s.sent.push(sent.clone());
        let Some(expectation) = s.expectations.pop_front() else {
            let problem = format!("unexpected send: {description}");
            s.problems.push(problem.clone());
            return Err(Error::Batch(format!("{}: {problem}", s.name)));
        };
        if let Some(checker) = &expectation.checker {
            // The checker sees an owned copy and no handle to this mock, so running it
            // under the lock cannot deadlock.
            if let Err(reason) = checker(&sent) {
                let problem = format!("checker rejected {description}: {reason}");
                s.problems.push(problem.clone());
                let error = Error::Batch(format!("{}: {problem}", s.name));
                s.note_failure(&error);
                return Ok((partition, Err(error)));
            }
        }
        match expectation.outcome {
            Outcome::Succeed => {
                let next = s.offsets.entry((sent.topic, partition)).or_insert(0);
                let offset = *next;
                *next += 1;
                let meta = RecordMetadata {
                    partition,
                    offset,
                    timestamp: record.timestamp.unwrap_or(-1),
                };
                Ok((partition, Ok(meta)))
            }
            Outcome::Fail(e) => {
                s.note_failure(&e);
                Ok((partition, Err(e)))
            }
            Outcome::Reject(e) => Err(e),
        }
    }
}

impl RecordProducer for MockProducer {
    fn send<'a>(&'a self, record: ProducerRecord<'a>) -> SendFuture<'a> {
        let result = self.send_now(&record);
        Box::pin(std::future::ready(result))
    }

    fn send_tagged<'a>(&'a self, record: ProducerRecord<'a>, tag: u64) -> TaggedSendFuture<'a> {
        let result = self.send_tagged_now(&record, tag);
        Box::pin(std::future::ready(result))
    }

    fn flush(&self) -> FlushFuture<'_> {
        let result = self.lock().flush();
        Box::pin(std::future::ready(result))
    }

    fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        self.send_now(&record)
    }

    fn send_tagged_blocking(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
        self.send_tagged_now(&record, tag)
    }

    fn flush_blocking(&self) -> Result<()> {
        self.lock().flush()
    }
}

/// An expectation being built by [`MockProducer::expect_send`]; it takes effect when
/// finished with [`ExpectSend::and_succeed`], [`ExpectSend::and_fail`] or
/// [`ExpectSend::and_reject`].
#[must_use = "an expectation takes effect only when finished with and_succeed, and_fail or and_reject"]
pub struct ExpectSend<'m> {
    producer: &'m MockProducer,
    checker: Option<Checker>,
}

impl fmt::Debug for ExpectSend<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpectSend")
            .field("checker", &self.checker.is_some())
            .finish()
    }
}

impl ExpectSend<'_> {
    /// Checks the record with `checker` (`Err(reason)` rejects it: its delivery fails
    /// and verify reports the reason).
    pub fn with_checker(
        mut self,
        checker: impl Fn(&SentRecord) -> std::result::Result<(), String> + Send + 'static,
    ) -> Self {
        self.checker = Some(Box::new(checker));
        self
    }

    fn finish(self, outcome: Outcome) {
        self.producer.push(Expectation {
            checker: self.checker,
            outcome,
        });
    }

    /// The record is acknowledged (the next offset of its partition).
    pub fn and_succeed(self) {
        self.finish(Outcome::Succeed)
    }

    /// The record's delivery fails with `error` (the broker refused it).
    pub fn and_fail(self, error: Error) {
        self.finish(Outcome::Fail(error))
    }

    /// `send` itself fails with `error` (the producer refused to queue the record, as
    /// for an oversized record or a closed producer).
    pub fn and_reject(self, error: Error) {
        self.finish(Outcome::Reject(error))
    }
}

/// A blocking producer for unit tests: implements [`SyncRecordProducer`] with the
/// expectations of [`MockProducer`] (Sarama's `mocks.NewSyncProducer`). Dereferences to
/// the [`MockProducer`] that holds them.
///
/// ```
/// use kring_mock::MockSyncProducer;
/// use kring::producer::{ProducerRecord, SyncRecordProducer};
/// use kring::protocol::{ApiKey, KafkaCode};
/// use kring::Error;
///
/// // The user's code.
/// fn audit(producer: &dyn SyncRecordProducer, line: &str) -> kring::Result<i64> {
///     Ok(producer.send(ProducerRecord::new("audit").with_key("svc").with_value(line))?.offset)
/// }
///
/// // The user's test.
/// let mock = MockSyncProducer::new();
/// mock.expect_send_and_succeed();
/// mock.expect_send_and_succeed();
/// mock.expect_send_and_fail(Error::broker(
///     KafkaCode::NOT_ENOUGH_REPLICAS, ApiKey::Produce, Some("audit"), Some(0)));
/// assert_eq!(audit(&mock, "started").unwrap(), 0);
/// assert_eq!(audit(&mock, "stopped").unwrap(), 1);
/// assert!(audit(&mock, "lost").is_err());
/// mock.verify().unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct MockSyncProducer {
    inner: MockProducer,
}

impl Default for MockSyncProducer {
    fn default() -> Self {
        MockSyncProducer::new()
    }
}

impl MockSyncProducer {
    /// A mock with no expectations, whose topics have one partition.
    pub fn new() -> MockSyncProducer {
        MockSyncProducer {
            inner: MockProducer::named("MockSyncProducer"),
        }
    }

    /// See [`MockProducer::with_partitions`].
    pub fn with_partitions(self, count: i32) -> MockSyncProducer {
        MockSyncProducer {
            inner: self.inner.with_partitions(count),
        }
    }
}

impl std::ops::Deref for MockSyncProducer {
    type Target = MockProducer;

    fn deref(&self) -> &MockProducer {
        &self.inner
    }
}

impl SyncRecordProducer for MockSyncProducer {
    fn send(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        self.inner.send_now(&record)?.wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kring::client::block_on;

    #[test]
    fn offsets_increase_per_partition_and_failures_take_none() {
        let mock = MockProducer::new().with_partitions(4);
        for _ in 0..4 {
            mock.expect_send_and_succeed();
        }
        mock.expect_send_and_fail(Error::Timeout("t".into()));
        let send = |p: i32| {
            mock.send_blocking(ProducerRecord::new("t").with_partition(p))
                .unwrap()
                .wait()
        };
        assert_eq!(send(1).unwrap().offset, 0);
        assert_eq!(send(1).unwrap().offset, 1);
        assert_eq!(send(2).unwrap().offset, 0);
        assert_eq!(send(1).unwrap().offset, 2);
        assert!(matches!(send(1), Err(Error::Timeout(_))));
        mock.verify().unwrap();
    }

    #[test]
    fn keyed_records_follow_the_default_partitioner() {
        let mock = MockProducer::new().with_partitions(8);
        mock.expect_send_and_succeed();
        let d = block_on(RecordProducer::send(
            &mock,
            ProducerRecord::new("t").with_key("k1"),
        ))
        .unwrap();
        assert_eq!(d.partition(), murmur2_partition(b"k1", 8));
        assert_eq!(block_on(d).unwrap().partition, murmur2_partition(b"k1", 8));
        mock.verify().unwrap();
    }

    #[test]
    fn unexpected_sends_and_unmet_expectations_are_reported_once() {
        let mock = MockProducer::new();
        assert!(mock.send_blocking(ProducerRecord::new("t")).is_err());
        mock.expect_send_and_succeed();
        let err = mock.verify().unwrap_err().to_string();
        assert!(err.contains("unexpected send"), "{err}");
        assert!(err.contains("then succeed"), "{err}");
        mock.verify().unwrap();
    }

    #[test]
    fn a_rejecting_checker_fails_the_delivery_and_the_verify() {
        let mock = MockProducer::new();
        mock.expect_send_with_checker(|r| {
            if r.header("trace").is_some() {
                Ok(())
            } else {
                Err("no trace header".into())
            }
        })
        .and_succeed();
        let d = mock.send_blocking(ProducerRecord::new("t")).unwrap();
        assert!(d.wait().is_err());
        let err = mock.verify().unwrap_err().to_string();
        assert!(err.contains("no trace header"), "{err}");
    }

    #[test]
    fn rejected_and_closed_sends_fail_at_send() {
        let mock = MockProducer::new();
        mock.expect_send()
            .and_reject(Error::MessageTooLarge { size: 2, max: 1 });
        assert!(matches!(
            mock.send_blocking(ProducerRecord::new("t")),
            Err(Error::MessageTooLarge { .. })
        ));
        mock.close().unwrap();
        assert!(matches!(
            mock.send_blocking(ProducerRecord::new("t")),
            Err(Error::ShuttingDown)
        ));
    }

    #[test]
    #[should_panic(expected = "dropped without verify")]
    fn dropping_with_unmet_expectations_panics() {
        let mock = MockProducer::new();
        mock.expect_send_and_succeed();
    }
}
