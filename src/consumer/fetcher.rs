//! The fetcher's driver: one task per broker, on the worker that owns that broker's
//! connection, runs the fetch engine ([`crate::engine::fetch`]) — it reserves the
//! memory each Fetch may bring back (waiting for budget: backpressure), sends the
//! request, and hands partitions the engine gives back to the consumer (leader moved,
//! offset out of range, a preferred read replica named, a read replica that failed or
//! aged out: KIP-392). Partitions reach it over a channel; consumers wake it when they
//! take a chunk, pause, resume or close. A fetcher serves the partitions routed to its
//! broker, as leader or as their read replica ([`crate::engine::fetch::replica`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};

use crate::buf::MemoryBudget;
use crate::client::{BrokerInfo, LeaderHint};
use crate::config::{Config, IsolationLevel, OffsetReset};
use crate::engine::fetch::epochs::EpochEnd;
use crate::engine::fetch::replica::ReadReplica;
use crate::engine::fetch::{Chunk, FetchSettings, FetchTarget, Fetcher, Next};
use crate::error::Error;
use crate::io::Broker;
use crate::protocol::{ApiKey, Uuid};
use crate::runtime::sleep_until;

use super::ConsumerInner;

/// What a partition consumer receives.
#[derive(Debug)]
pub(crate) enum Delivery {
    Chunk(Chunk),
    /// The position moved (the reset policy after OFFSET_OUT_OF_RANGE).
    Reset(i64),
    Error(Error),
}

/// State shared by a partition consumer and whichever fetcher serves it.
#[derive(Debug)]
pub(crate) struct PartitionShared {
    pub topic: Arc<str>,
    pub partition: i32,
    /// The next offset to fetch.
    pub fetch_position: AtomicI64,
    /// The leader epoch of the last batch fetched before `fetch_position` (KIP-320), -1
    /// when unknown.
    pub fetch_epoch: AtomicI32,
    /// The leader epoch of the leader the partition is attached to (from metadata or a
    /// leader hint), -1 before the first attachment.
    pub leader_epoch: AtomicI32,
    pub high_watermark: AtomicI64,
    pub paused: AtomicBool,
    pub closed: AtomicBool,
    pub tx: mpsc::Sender<Delivery>,
    /// A separate error channel, when the user asked for one.
    pub errors: std::sync::Mutex<Option<mpsc::Sender<super::ConsumerError>>>,
    /// Wakes the serving fetcher when the consumer has taken a chunk (room again), or
    /// was paused, resumed or closed.
    pub wake: std::sync::Mutex<Option<Arc<Notify>>>,
    /// The replica it is read from instead of its leader (KIP-392), if any.
    pub read_replica: std::sync::Mutex<Option<ReadReplica>>,
    /// The broker whose fetcher it was last attached to (-1 before the first).
    pub fetching_from: AtomicI32,
}

impl PartitionShared {
    /// Tells the fetcher serving this partition that something changed.
    pub fn wake_fetcher(&self) {
        if let Some(w) = self.wake.lock().ok().and_then(|w| w.clone()) {
            w.notify_one();
        }
    }
}

impl FetchTarget for PartitionShared {
    fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    fn partition(&self) -> i32 {
        self.partition
    }

    fn fetch_position(&self) -> i64 {
        self.fetch_position.load(Ordering::Acquire)
    }

    fn fetch_epoch(&self) -> i32 {
        self.fetch_epoch.load(Ordering::Acquire)
    }

    fn set_fetch_position(&self, offset: i64, epoch: i32) {
        self.fetch_epoch.store(epoch, Ordering::Release);
        self.fetch_position.store(offset, Ordering::Release);
    }

    fn current_leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    fn set_high_watermark(&self, offset: i64) {
        self.high_watermark.store(offset, Ordering::Release);
    }

    fn paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    fn has_room(&self) -> bool {
        self.tx.capacity() > 0
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.tx.is_closed()
    }

    fn deliver(&self, chunk: Chunk) -> bool {
        self.tx.try_send(Delivery::Chunk(chunk)).is_ok()
    }

    /// Reports an error: on the user's error channel if there is one with room, else inline.
    fn report(&self, error: Error) {
        let e = super::ConsumerError {
            topic: self.topic.to_string(),
            partition: self.partition,
            error,
        };
        let channel = self.errors.lock().ok().and_then(|c| c.clone());
        let e = match channel {
            Some(tx) => match tx.try_send(e) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(e) | mpsc::error::TrySendError::Closed(e)) => e,
            },
            None => e,
        };
        let _ = self.tx.try_send(Delivery::Error(e.error));
    }

    fn read_replica(&self) -> Option<ReadReplica> {
        self.read_replica.lock().ok().and_then(|r| *r)
    }

    fn set_read_replica(&self, replica: Option<ReadReplica>) {
        if let Ok(mut r) = self.read_replica.lock() {
            *r = replica;
        }
    }
}

pub(crate) enum Command {
    Add(Arc<PartitionShared>),
}

/// The fetch engine's settings from the client's configuration.
pub(crate) fn settings_of(config: &Config) -> FetchSettings {
    let c = &config.consumer;
    FetchSettings {
        max_wait: c.fetch_max_wait,
        min_bytes: c.fetch_min_bytes,
        max_bytes: c.fetch_max_bytes,
        partition_max_bytes: c.max_partition_fetch_bytes,
        isolation_level: match c.isolation_level {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        },
        error_backoff: config.admin.retry_backoff,
        error_backoff_max: config.producer.retry_backoff_max,
        rack_id: c.client_rack.clone(),
        read_replica_max_age: config.metadata.refresh_interval,
    }
}

/// The fetcher task for one broker. Ends when the consumer is gone and no partition
/// remains, or when the connection fails (its partitions go back to the consumer).
pub(crate) async fn run(
    consumer: Weak<ConsumerInner>,
    broker: Broker,
    mut commands: mpsc::Receiver<Command>,
    budget: MemoryBudget,
    settings: FetchSettings,
) {
    let wake = Arc::new(Notify::new());
    let adopt = |p: &Arc<PartitionShared>| {
        if let Ok(mut w) = p.wake.lock() {
            *w = Some(wake.clone());
        }
    };
    let mut engine: Fetcher<PartitionShared> = Fetcher::for_broker(settings, broker.id());
    loop {
        while let Ok(Command::Add(p)) = commands.try_recv() {
            adopt(&p);
            engine.add(p);
        }
        let expired = engine.poll_expired(Instant::now());
        if !expired.is_empty() {
            let Some(inner) = consumer.upgrade() else {
                return;
            };
            // The read replica's age ran out: the leader is asked again.
            inner.reattach(expired);
        }
        let (max_bytes, short_poll) = match engine.poll_next(Instant::now(), budget.capacity()) {
            Next::Idle => match commands.recv().await {
                Some(Command::Add(p)) => {
                    adopt(&p);
                    engine.add(p);
                    continue;
                }
                None => return,
            },
            Next::Wait { until } => {
                tokio::select! {
                    c = commands.recv() => match c {
                        Some(Command::Add(p)) => {
                            adopt(&p);
                            engine.add(p);
                        }
                        None => return,
                    },
                    _ = wake.notified() => {}
                    _ = sleep_until(Some(until)) => {}
                }
                continue;
            }
            Next::Fetch {
                max_bytes,
                short_poll,
            } => (max_bytes, short_poll),
        };
        let Ok(permit) = budget.acquire(max_bytes).await else {
            return;
        };
        let Some(inner) = consumer.upgrade() else {
            return;
        };
        let version = match negotiated_fetch_version(&broker).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(broker = broker.addr(), error = %e, "fetch connection failed");
                drop(permit);
                hand_back_after_failure(&inner, &mut engine);
                return;
            }
        };
        let metadata = inner.client.metadata();
        let topic_id = |t: &str| metadata.topics.get(t).map_or(Uuid::ZERO, |m| m.id);
        let request = engine.build_request(version, max_bytes, short_poll, &topic_id);
        drop(metadata);
        let span = tracing::debug_span!(
            "kring_fetch",
            broker = broker.id(),
            partitions = request
                .topics
                .iter()
                .map(|t| t.partitions.len())
                .sum::<usize>(),
            max_bytes,
        );
        let sent = tracing::Instrument::instrument(broker.send_version(request, version), span);
        let response = match sent.await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(broker = broker.addr(), error = %e, "fetch failed");
                drop(permit);
                hand_back_after_failure(&inner, &mut engine);
                return;
            }
        };
        let outcome = engine.handle_response(response, version, permit, Instant::now());
        if !outcome.redirected.is_empty() {
            redirect(&inner, outcome.redirected);
        }
        if !outcome.fallback.is_empty() {
            // Back to the leader at once; metadata is refreshed meanwhile (the replica
            // may have left the partition).
            inner.reroute(outcome.fallback, Duration::ZERO, true);
        }
        if !outcome.moved.is_empty() {
            reroute_moved(
                &inner,
                broker.id(),
                outcome.moved,
                &outcome.hints,
                &outcome.endpoints,
            );
        }
        settle_positions(&inner, outcome.reset, outcome.diverged).await;
    }
}

/// Resets the partitions found out of range and judges those whose log diverged (from
/// the Fetch's `diverging_epoch`), all at once: the ListOffsets lookups of the resets
/// (and of divergences that fall back on the reset policy) at one leader go in one
/// request ([`super::lookups`]), where one after another a fetch answer naming 256
/// partitions out of range held the fetcher for 256 round trips.
async fn settle_positions(
    inner: &ConsumerInner,
    reset: Vec<Arc<PartitionShared>>,
    diverged: Vec<(Arc<PartitionShared>, EpochEnd)>,
) {
    let resets = reset.into_iter().map(|p| {
        Box::pin(async move {
            if let Err(e) = inner.reset_offset(&p).await {
                p.report(e);
            }
        }) as Pin<Box<dyn Future<Output = ()> + Send + '_>>
    });
    let validations = diverged.into_iter().map(|(p, end)| {
        Box::pin(async move { inner.handle_divergence(&p, end).await })
            as Pin<Box<dyn Future<Output = ()> + Send + '_>>
    });
    all_of(resets.chain(validations).collect()).await;
}

/// Runs `futures` together on this task until every one has finished.
async fn all_of(mut futures: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>>) {
    std::future::poll_fn(|cx| {
        futures.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if futures.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// The connection broke, timed out or could not be made: the fetcher's partitions find
/// their leader again (after a pause and a metadata refresh).
fn hand_back_after_failure(inner: &ConsumerInner, engine: &mut Fetcher<PartitionShared>) {
    inner.reroute(engine.handle_failure(), Duration::from_millis(100), false);
}

/// The Fetch version to use with `broker`, connecting first when its connection has
/// not negotiated versions yet (a fetcher's own connection opens lazily): a first fetch
/// sent at a guessed version would begin its session naming topics differently from
/// the next, which the broker refuses.
async fn negotiated_fetch_version(broker: &Broker) -> Result<i16, crate::io::IoError> {
    if broker.api_versions().is_none() {
        broker.connect().await?;
    }
    Ok(broker
        .api_versions()
        .and_then(|v| v.version_for(ApiKey::Fetch))
        .unwrap_or(12))
}

/// Sends partitions to the read replica a leader named (KIP-392): at once when metadata
/// lists its broker; else metadata is refreshed first (after `retry.backoff.ms`, so a
/// leader naming an unknown broker is not asked in a loop) and they go to the leader
/// until it lists the replica.
fn redirect(inner: &ConsumerInner, partitions: Vec<Arc<PartitionShared>>) {
    let (known, unknown): (Vec<_>, Vec<_>) = partitions.into_iter().partition(|p| {
        p.read_replica()
            .is_some_and(|r| inner.client.broker(r.broker).is_some())
    });
    if !known.is_empty() {
        inner.reattach(known);
    }
    if !unknown.is_empty() {
        inner.reroute(unknown, inner.config.metadata.refresh_backoff, false);
    }
}

/// Sends partitions whose leader moved to their new leader: at once for those the
/// broker (`from`) named another leader of (KIP-951, applied to the metadata cache
/// first), after a metadata refresh for the others.
fn reroute_moved(
    inner: &ConsumerInner,
    from: i32,
    moved: Vec<Arc<PartitionShared>>,
    hints: &[LeaderHint],
    endpoints: &[BrokerInfo],
) {
    inner.client.apply_leader_hints(hints, endpoints);
    let metadata = inner.client.metadata();
    let (hinted, others): (Vec<_>, Vec<_>) = moved.into_iter().partition(|p| {
        hints.iter().any(|h| {
            *h.topic == *p.topic
                && h.partition == p.partition
                && (h.leader != from || h.leader_epoch > p.leader_epoch.load(Ordering::Acquire))
                && metadata
                    .partition(&p.topic, p.partition)
                    .is_some_and(|m| m.leader == h.leader && m.leader_epoch == h.leader_epoch)
        })
    });
    drop(metadata);
    if !hinted.is_empty() {
        inner.reroute(hinted, Duration::ZERO, true);
    }
    if !others.is_empty() {
        inner.reroute(others, inner.config.metadata.refresh_backoff, false);
    }
}

/// Where a partition starts or resets to, resolved with ListOffsets at its leader.
pub(crate) fn reset_timestamp(policy: OffsetReset) -> Option<i64> {
    match policy {
        OffsetReset::Earliest => Some(-2),
        OffsetReset::Latest => Some(-1),
        OffsetReset::None => None,
    }
}
