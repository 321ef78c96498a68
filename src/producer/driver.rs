//! The producer's drivers: one task per broker runs that broker's sink
//! ([`crate::engine::produce::sink`]) on the worker that owns the broker's connection,
//! feeding it time, wake-ups and the broker's answers; routing hands a partition to the
//! sink of its leader; the epoch bump (KIP-360) moves the producer to its next epoch when
//! a sink asks for one (by itself, as the Java client does: a new producer id would not
//! fence requests of the old one still on their way) and restamps what waits to be
//! resent.
//!
//! Invariants:
//! - A partition belongs to exactly one sink at a time (the one it was last routed to).
//! - `active` counts drains and requests in progress across all sinks. A sink enters
//!   (increments) before it reads whether a bump is pending; the bump sets its flag
//!   before it waits for `active` to reach zero. So no batch is stamped with an epoch
//!   the bump is about to replace, and the bump never runs with a request on the wire.
//! - While a bump is pending, sinks send only batches whose earlier attempt may have
//!   been written, one at a time under the old epoch, until the broker says whether it
//!   was (acknowledged, as a duplicate) or not (out of order); the bump waits for that,
//!   so it never renumbers a batch that already landed.
//! - A sink task ends when the producer is closed (or dropped) and its partitions have
//!   nothing left to settle, or when the runtime shuts down (everything unsettled fails).
//! - Once the client is closed, every drain fails what is not on the wire with
//!   [`Error::ClosedClient`]; what is on the wire fails with its `IoError::Closed`,
//!   which is not retried.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use super::ProducerShared;
use super::answers::{Answer, Answers};
use super::metrics::SinkMetrics;
use crate::buf::release_together;
use crate::client::{ClusterMetadata, TopicInfo};
use crate::engine::error::IoError;
use crate::engine::produce::completion::reports_after;
use crate::engine::produce::partition::{ProducePartition, ProducerId};
use crate::engine::produce::request::ANY_PRODUCE_VERSION;
use crate::engine::produce::sink::{Leaders, Sink, SinkContext, SinkEvent};
use crate::engine::produce::wake::{NextDrain, Wake};
use crate::error::{Error, Result};
use crate::protocol::messages::InitProducerIdRequest;
use crate::protocol::{ApiKey, KafkaCode};
use crate::runtime::sleep_until;

/// Wakes a sink's task, and tells the appending threads when it drains next unwoken.
#[derive(Debug)]
pub(crate) struct SinkWaker {
    notify: Notify,
    next_drain: NextDrain,
}

impl SinkWaker {
    fn new() -> Self {
        SinkWaker {
            notify: Notify::new(),
            next_drain: NextDrain::new(Instant::now()),
        }
    }
}

impl Wake for SinkWaker {
    fn wake(&self) {
        self.notify.notify_one();
    }

    fn drains_by(&self, deadline: Instant) -> bool {
        self.next_drain.drains_by(deadline)
    }

    fn waits_for_an_answer(&self) -> bool {
        self.next_drain.waits_for_an_answer()
    }
}

/// The handle the rest of the producer holds to one sink's task.
#[derive(Debug)]
pub(crate) struct SinkHandle {
    broker: i32,
    /// Partitions routed to this sink, not adopted yet.
    inbox: Mutex<Vec<Arc<ProducePartition>>>,
    waker: Arc<SinkWaker>,
    done: watch::Sender<bool>,
}

impl SinkHandle {
    pub fn wake(&self) {
        self.waker.wake();
    }

    fn hand_over(&self, partition: Arc<ProducePartition>) {
        if let Ok(mut inbox) = self.inbox.lock() {
            inbox.push(partition);
        }
        self.wake();
    }

    /// Whether partitions wait in the inbox.
    fn has_inbox(&self) -> bool {
        self.inbox.lock().map(|i| !i.is_empty()).unwrap_or(false)
    }

    fn take_inbox(&self) -> Vec<Arc<ProducePartition>> {
        self.inbox
            .lock()
            .map(|mut i| std::mem::take(&mut *i))
            .unwrap_or_default()
    }

    /// Waits until the sink's task has ended.
    pub async fn finished(&self) {
        let mut rx = self.done.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }
}

/// Every sink of one producer, by broker id.
#[derive(Debug, Default)]
pub(crate) struct Sinks(Mutex<BTreeMap<i32, Arc<SinkHandle>>>);

impl Sinks {
    pub fn all(&self) -> Vec<Arc<SinkHandle>> {
        self.0
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn wake_all(&self) {
        for s in self.all() {
            s.wake();
        }
    }
}

/// Leaders from a metadata snapshot: a partition's leader if metadata lists it as a
/// live broker (and so the client has a connection for it). A drain asks for every
/// partition of the sink, mostly of one topic: the last topic found is kept, so the
/// topic table is hashed into only when the topic changes.
struct MetadataLeaders<'a> {
    metadata: &'a ClusterMetadata,
    last_topic: Cell<Option<(&'a str, &'a TopicInfo)>>,
}

impl<'a> MetadataLeaders<'a> {
    fn new(metadata: &'a ClusterMetadata) -> Self {
        MetadataLeaders {
            metadata,
            last_topic: Cell::new(None),
        }
    }

    fn topic(&self, topic: &str) -> Option<&'a TopicInfo> {
        if let Some((_, info)) = self.last_topic.get().filter(|(name, _)| *name == topic) {
            return Some(info);
        }
        let (name, info) = self.metadata.topics.get_key_value(topic)?;
        self.last_topic.set(Some((name.as_str(), info)));
        Some(info)
    }
}

impl Leaders for MetadataLeaders<'_> {
    fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        let t = self.topic(topic)?;
        let p = t
            .partitions
            .get(partition as usize)
            .filter(|p| p.id == partition)
            .or_else(|| t.partitions.iter().find(|p| p.id == partition))?;
        (p.leader >= 0 && self.metadata.brokers.contains_key(&p.leader)).then_some(p.leader)
    }
}

impl ProducerShared {
    /// Hands `partition` to the sink of its leader (starting that sink if needed); with
    /// no leader known yet, to some broker's sink, which holds it until metadata says.
    pub(super) fn route(self: &Arc<Self>, partition: Arc<ProducePartition>) -> Result<()> {
        let metadata = self.client.metadata();
        let leader = MetadataLeaders::new(&metadata)
            .leader_of(&partition.topic, partition.index)
            .or_else(|| metadata.brokers.keys().next().copied())
            .ok_or_else(|| Error::OutOfBrokers("metadata lists no broker".into()))?;
        self.sink(leader)?.hand_over(partition);
        Ok(())
    }

    /// The sink of broker `broker`, started on the worker that owns its connection.
    fn sink(self: &Arc<Self>, broker: i32) -> Result<Arc<SinkHandle>> {
        let mut sinks = self.sinks.0.lock().map_err(|_| Error::ShuttingDown)?;
        if let Some(s) = sinks.get(&broker) {
            return Ok(s.clone());
        }
        let (done, _) = watch::channel(false);
        let handle = Arc::new(SinkHandle {
            broker,
            inbox: Mutex::new(Vec::new()),
            waker: Arc::new(SinkWaker::new()),
            done,
        });
        let runtime = self.client.runtime();
        let shutdown = runtime.shutdown_signal();
        let (shared, task_handle) = (self.clone(), handle.clone());
        runtime.spawn_on(runtime.worker_for(broker), move |_| {
            run_sink(shared, task_handle, shutdown)
        })?;
        sinks.insert(broker, handle.clone());
        Ok(handle)
    }

    /// Enters a drain (see the module's invariants); returns whether a bump is pending.
    fn enter(&self) -> bool {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.bump_needed.load(Ordering::SeqCst)
    }

    /// Leaves a drain or a request.
    fn leave(&self) {
        if self.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// A sink asked for an epoch bump: the first asker starts it.
    fn request_bump(self: &Arc<Self>) {
        if let Some(txn) = &self.txn {
            // In a transaction the epoch is bumped by the abort the failure calls for.
            txn.handle_sequence_trouble(self);
            return;
        }
        if self.bump_needed.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = self.clone();
        let runtime = self.client.runtime();
        if let Err(e) = runtime.spawn_on(runtime.worker_for(-1), move |_| bump_epoch(shared)) {
            tracing::warn!(error = %e, "could not start the producer epoch bump");
        }
    }

    /// Whether every partition may be renumbered by an epoch bump now.
    fn ready_for_bump(&self) -> bool {
        self.all_partitions()
            .iter()
            .all(|p| p.state().ready_for_bump())
    }

    fn producer(&self) -> Option<ProducerId> {
        self.identity.lock().ok().and_then(|p| *p)
    }

    /// Acts on what the sink asked for; whether the sink should drain again at once
    /// (leaders moved).
    fn handle_events(self: &Arc<Self>, sink: &mut Sink) -> bool {
        let mut stale: Vec<Arc<str>> = Vec::new();
        let mut sink_woken = false;
        while let Some(event) = sink.poll_event() {
            match event {
                SinkEvent::Moved(p) => {
                    tracing::debug!(topic = %p.topic, partition = p.index, from = sink.broker(), "partition moved");
                    if let Err(e) = self.route(p.clone()) {
                        // Nowhere to go now: stay here until metadata says more.
                        tracing::debug!(error = %e, "rerouting a partition failed");
                        if let Ok(this) = self.sink(sink.broker()) {
                            this.hand_over(p);
                        }
                    }
                }
                SinkEvent::Refresh(topic) => {
                    if !stale.contains(&topic) {
                        stale.push(topic);
                    }
                }
                SinkEvent::ProducerFenced(code) => {
                    if let Some(txn) = &self.txn {
                        txn.handle_fenced(self, code);
                    }
                }
                SinkEvent::BumpEpoch => self.request_bump(),
                SinkEvent::LeaderHints { hints, endpoints } => {
                    // The partitions move at the next drain; the refresh their error
                    // asked for still runs, in the background.
                    if self.client.apply_leader_hints(&hints, &endpoints) {
                        tracing::debug!(
                            partitions = hints.len(),
                            "leaders moved, as the broker said"
                        );
                        sink_woken = true;
                    }
                }
            }
        }
        if !stale.is_empty() {
            let client = self.client.clone();
            tokio::task::spawn_local(async move {
                let names: Vec<&str> = stale.iter().map(|t| &**t).collect();
                let _ = client.refresh_after_error(&names).await;
            });
        }
        sink_woken
    }
}

/// One broker's sink task.
async fn run_sink(
    shared: Arc<ProducerShared>,
    handle: Arc<SinkHandle>,
    mut shutdown: watch::Receiver<bool>,
) {
    let broker = handle.broker;
    let addr: Arc<str> = shared.client.broker(broker).map_or_else(
        || Arc::from(format!("broker {broker}")),
        |b| Arc::from(b.addr()),
    );
    let mut sink = Sink::new(broker, addr.clone());
    let mut metrics = SinkMetrics::new(
        broker,
        shared.settings.codec != crate::record::Compression::None,
    );
    let waker: Arc<dyn Wake> = handle.waker.clone();
    let mut answers = Answers::new(&addr);
    let mut answered = None;
    loop {
        // The arenas this turn frees (batches answered, small batches moved out of
        // theirs) go back to the budget together at its end: a sender waiting for
        // memory is woken once for all of them, not once per arena. The delivery
        // handler is told of the turn's tagged records after that, with no lock held.
        reports_after(|| {
            release_together(|| {
                if let Some(answer) = answered.take() {
                    settle(&shared, &mut sink, answer);
                    while let Some(answer) = answers.try_next() {
                        settle(&shared, &mut sink, answer);
                    }
                    report(&shared, &mut sink, &mut metrics);
                }
                drain_turn(&shared, &handle, &waker, &mut sink, &mut answers, &addr);
            })
        });
        if shared.closed.load(Ordering::Acquire)
            && answers.is_empty()
            && !sink.has_pending()
            && !handle.has_inbox()
        {
            break;
        }
        let timeout = sink.poll_timeout();
        metrics.sample(
            Instant::now(),
            timeout.is_none() && answers.is_empty(),
            || sink.unsettled_records(),
            || shared.pools.budget_used(),
        );
        sink.publish_sleep(&handle.waker.next_drain, &shared.settings);
        tokio::select! {
            biased;
            _ = shutdown.changed() => {
                sink.fail_all(&Error::ShuttingDown, Instant::now());
                // Partitions handed over and not adopted yet have records too.
                for p in handle.take_inbox() {
                    p.state().fail_all(&Error::ShuttingDown, Instant::now());
                }
                break;
            }
            Some(answer) = answers.next(), if !answers.is_empty() => {
                answered = Some(answer);
            }
            _ = handle.waker.notify.notified() => {}
            _ = sleep_until(timeout) => {}
        }
    }
    // The gauges as the sink leaves them: nothing queued once closed or failed.
    metrics.sample(
        Instant::now(),
        true,
        || sink.unsettled_records(),
        || shared.pools.budget_used(),
    );
    // Whatever answers were still awaited when the runtime went away are dropped here;
    // their batches were failed above.
    for _ in 0..answers.len() {
        shared.leave();
    }
    answers.abort_all();
    handle.done.send_replace(true);
}

/// One drain of `sink`, and its requests sent to the broker's connection.
fn drain(shared: &Arc<ProducerShared>, sink: &mut Sink, answers: &mut Answers, addr: &Arc<str>) {
    let bumping = shared.enter();
    let metadata = shared.client.metadata();
    let cx = SinkContext {
        settings: &shared.settings,
        pools: &shared.pools,
        producer: shared.producer(),
        bumping,
        flushing: shared.flushing.load(Ordering::Acquire) > 0 || closing_gracefully(shared),
        leaders: &MetadataLeaders::new(&metadata),
        produce_versions: shared
            .txn
            .as_ref()
            .map_or(ANY_PRODUCE_VERSION, |t| t.produce_versions()),
    };
    sink.drain(Instant::now(), &cx);
    while let Some((token, request)) = sink.poll_request() {
        shared.active.fetch_add(1, Ordering::SeqCst);
        let broker = shared.client.broker(sink.broker());
        let addr = addr.clone();
        let span = tracing::debug_span!(
            "kring_produce",
            broker = sink.broker(),
            batches = request.topics.iter().map(|(_, b)| b.len()).sum::<usize>(),
        );
        let answer = async move {
            let result = match broker {
                Some(b) => b.send_raw(Box::new(request)).await,
                None => Err(IoError::NotConnected {
                    addr: addr.to_string(),
                    retry_in: Duration::ZERO,
                }),
            };
            (token, result)
        };
        answers.spawn(token, tracing::Instrument::instrument(answer, span));
    }
    shared.leave();
}

/// Whether `close()` is under way, which sends everything; a dropped producer is
/// closing too, but fails what it had not sent. `closing` is read first: the drop sets
/// `abandoned` before it.
fn closing_gracefully(shared: &ProducerShared) -> bool {
    shared.closing.load(Ordering::Acquire) && !shared.abandoned.load(Ordering::Acquire)
}

/// A sink's turn after its wake-up: takes the partitions handed to it, fails what can
/// no longer be sent, drains, and acts on what the drain asks for.
fn drain_turn(
    shared: &Arc<ProducerShared>,
    handle: &SinkHandle,
    waker: &Arc<dyn Wake>,
    sink: &mut Sink,
    answers: &mut Answers,
    addr: &Arc<str>,
) {
    // Before any partition is looked at (see `engine::produce::wake`).
    handle.waker.next_drain.draining();
    for p in handle.take_inbox() {
        sink.adopt(p, waker.clone());
    }
    if shared.abandoned.load(Ordering::Acquire) {
        sink.fail_unsent(&Error::ProducerDropped, Instant::now());
    } else if shared.client.is_closed() {
        // Nothing can be sent any more: fail what waits instead of letting it sit
        // until delivery.timeout.ms (requests on the wire fail with IoError::Closed).
        sink.fail_unsent(&Error::ClosedClient, Instant::now());
    } else if let Some(error) = shared.txn.as_ref().and_then(|t| t.unsent_error()) {
        // The transaction is being (or must be) aborted: nothing more of it is sent.
        sink.fail_unsent(&error, Instant::now());
    }
    drain(shared, sink, answers, addr);
    if shared.handle_events(sink) {
        // Leader hints applied: the moved partitions leave at this drain.
        drain(shared, sink, answers, addr);
        shared.handle_events(sink);
    }
}

/// Hands the batches just answered to the metrics and the interceptors.
fn report(shared: &ProducerShared, sink: &mut Sink, metrics: &mut SinkMetrics) {
    let interceptors = &shared.interceptors;
    for (partition, report) in sink.take_reports() {
        metrics.record(&partition, &report, interceptors);
    }
}

/// Hands the sink the answer to one of its requests (or why there is none).
fn settle(shared: &ProducerShared, sink: &mut Sink, (token, result): Answer) {
    sink.handle_response(token, result, Instant::now(), &shared.settings);
    shared.leave();
}

/// Bumps the epoch once nothing is in flight (see [`ProducerId::next_epoch`]; a new
/// producer id only after the last epoch), restamps every waiting batch, and lets the
/// sinks send again.
async fn bump_epoch(shared: Arc<ProducerShared>) {
    loop {
        // Nothing on the wire, and every batch that may have been written under the
        // current epoch resolved by the sinks (they keep sending those alone meanwhile):
        // renumbering one that landed would write it twice.
        while shared.active.load(Ordering::SeqCst) > 0 || !shared.ready_for_bump() {
            let idle = shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if shared.active.load(Ordering::SeqCst) == 0 && shared.ready_for_bump() {
                break;
            }
            if shared.abandoned.load(Ordering::Acquire) && shared.closed.load(Ordering::Acquire) {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), idle).await;
        }
        let next = match shared.producer().and_then(ProducerId::next_epoch) {
            Some(next) => Ok(next),
            None => init_producer_id(&shared, None).await,
        };
        match next {
            Ok(new) => {
                tracing::info!(
                    producer_id = new.id,
                    epoch = new.epoch,
                    "producer epoch bumped"
                );
                if let Ok(mut slot) = shared.identity.lock() {
                    *slot = Some(new);
                }
                for p in shared.all_partitions() {
                    p.state().restamp(new, Instant::now());
                }
                shared.bump_needed.store(false, Ordering::SeqCst);
                shared.sinks.wake_all();
                return;
            }
            Err(e) if shared.abandoned.load(Ordering::Acquire) => {
                tracing::debug!(error = %e, "producer dropped: epoch bump abandoned");
                return;
            }
            Err(e) if shared.client.is_closed() => {
                // No broker will answer again; the sinks fail what waits.
                tracing::debug!(error = %e, "client closed: epoch bump abandoned");
                shared.sinks.wake_all();
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "producer epoch bump failed; retrying");
                tokio::time::sleep(shared.settings.retry_backoff).await;
            }
        }
    }
}

/// Obtains a producer id, or bumps the epoch of `current` (InitProducerId v3+); for a
/// transactional producer, at its transaction coordinator with its transactional id.
pub(super) async fn init_producer_id(
    shared: &ProducerShared,
    current: Option<ProducerId>,
) -> Result<ProducerId> {
    let client = shared.client.clone();
    let timeout = client.config().admin.timeout;
    let backoff = client.config().admin.retry_backoff;
    let txn = shared
        .settings
        .transactional_id
        .clone()
        .map(|id| (id, shared.settings.transaction_timeout));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let runtime = client.runtime().clone();
    runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
        let deadline = Instant::now() + timeout;
        let result = loop {
            match init_producer_id_once(&client, current, txn.as_ref()).await {
                Ok(id) => break Ok(id),
                Err(e) if e.is_retriable() && Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                }
                Err(e) => break Err(e),
            }
        };
        let _ = tx.send(result);
    })?;
    rx.await.map_err(|_| Error::ShuttingDown)?
}

async fn init_producer_id_once(
    client: &crate::client::Client,
    current: Option<ProducerId>,
    txn: Option<&(String, Duration)>,
) -> Result<ProducerId> {
    let broker = match txn {
        Some((id, _)) => {
            client
                .find_coordinator_of(crate::client::CoordinatorKind::Transaction, id)
                .await?
        }
        None => client.any_broker()?,
    };
    broker.connect().await?;
    let version = broker
        .api_versions()
        .and_then(|v| v.version_for(ApiKey::InitProducerId))
        .unwrap_or(0);
    let (id, epoch) = match current {
        Some(c) if version >= 3 => (c.id, c.epoch),
        _ => (-1, -1),
    };
    let response = broker
        .send_version(
            InitProducerIdRequest::default()
                .with_transactional_id(txn.map(|(id, _)| id.clone()))
                .with_transaction_timeout_ms(
                    txn.map_or(60_000, |(_, t)| t.as_millis().min(i32::MAX as u128) as i32),
                )
                .with_producer_id(id)
                .with_producer_epoch(epoch),
            version,
        )
        .await?;
    let code = KafkaCode(response.error_code);
    if !code.is_ok() {
        if let Some((id, _)) = txn.filter(|_| {
            [
                KafkaCode::NOT_COORDINATOR,
                KafkaCode::COORDINATOR_NOT_AVAILABLE,
            ]
            .contains(&code)
        }) {
            client.invalidate_coordinator(crate::client::CoordinatorKind::Transaction, id);
        }
        return Err(Error::broker(code, ApiKey::InitProducerId, None, None));
    }
    Ok(ProducerId {
        id: response.producer_id,
        epoch: response.producer_epoch,
    })
}
