//! The producer (Sarama's AsyncProducer and SyncProducer, done the modern way).
//!
//! `send` chooses a partition, copies the record once into that partition's open batch
//! (an arena from a pool charged to `buffer.memory`) and returns a [`DeliveryFuture`];
//! batches are sealed when full (on the sending thread) or when `linger` expires. Each
//! partition belongs to the sink of the broker that leads it, and each sink runs on the
//! worker that owns that broker's connection (see `engine::produce` for the rules and
//! `driver` for the tasks): it gathers its partitions' sealed batches into one Produce
//! request per round, handles answers, retries with backoff, follows leaders through
//! metadata, and keeps idempotent sequences (on by default, as in the Java client since
//! 3.0): InitProducerId at start, per-partition sequences, up to five batches in flight
//! per partition with order kept across retries, and an epoch bump (KIP-360) when a
//! sequence gap or an unknown producer id needs one.
//!
//! Transactions (`transactional.id`): [`Producer::init_transactions`] once, then
//! [`Producer::begin_transaction`], sends, [`Producer::send_offsets_to_transaction`] and
//! [`Producer::commit_transaction`] or [`Producer::abort_transaction`]; the rules are in
//! `engine::txn`, the I/O in `txn.rs`. A record's partition is added to the transaction
//! before its batches go (the sink holds them until then).
//!
//! Shutdown: [`Producer::close`] sends everything and waits for every answer. Dropping
//! the last handle without `close()` fails the records not yet sent with
//! [`Error::ProducerDropped`] at once; records already on the wire get their broker's
//! answer (within `request.timeout.ms`), and then the producer's tasks end.
//!
//! ```no_run
//! use kring::{Client, Config};
//! use kring::producer::{Producer, ProducerRecord};
//! # async fn run() -> kring::Result<()> {
//! let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
//! let producer = Producer::new(client).await?;
//! let delivery = producer.send(ProducerRecord::new("events").with_key("k").with_value("v")).await?;
//! let meta = delivery.await?;
//! println!("partition {} offset {}", meta.partition, meta.offset);
//! producer.close().await?;
//! # Ok(()) }
//! ```

mod answers;
mod api;
mod builder;
mod clock;
mod delivery;
mod driver;
mod interceptor;
mod metrics;
pub mod partitioner;
mod record;
mod routes;
mod sending;
mod txn;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::Poll;
use std::time::Instant;

use tokio::sync::{Notify, mpsc};

pub use crate::engine::txn::TransactionError;
pub use api::{FlushFuture, RecordProducer, SendFuture, SyncRecordProducer, TaggedSendFuture};
pub use builder::ProducerBuilder;
pub use delivery::{DeliveredBatch, Delivery, DeliveryHandler};
pub use interceptor::{Acknowledgement, ProducerInterceptor};
pub use partitioner::{Partitioner, TopicPartitions};
pub use record::{DeliveryFuture, Payload, ProducerRecord, RecordMetadata};
pub use sending::{Sending, SendingTagged};
pub use txn::GroupMetadata;

use crate::buf::MemoryBudget;
use crate::client::Client;
use crate::config::{Acks, Config, ProducerConfig};
use crate::engine::produce::arenas::ArenaPools;
use crate::engine::produce::completion::{BatchShared, ReportTagged, TagReports, batch_done};
use crate::engine::produce::failures::{DeliveryFailures, FailureReport};
use crate::engine::produce::partition::{
    Appended, Arena, ProducePartition, ProduceSettings, ProducerAccounts, ProducerId, RecordParts,
};
use crate::engine::produce::queued::QueuedRecords;
use crate::error::{Error, Result};
use crate::protocol::{ApiKey, KafkaCode};
use crate::record::Compression as Codec;
use clock::now_ms;
use driver::Sinks;
use routes::{TopicRoutes, TopicState, TopicTable};

/// A result on the per-record path, its error boxed: 16 bytes, where an [`Error`] (80
/// bytes) made every `Result` at least 80. Those were copied through memory at each call
/// on the path, and read back by loads wider than the stores that wrote them: a
/// store-forwarding stall per call, on every record (`perf annotate` of produce-100).
type Hot<T> = std::result::Result<T, Box<Error>>;

/// What one `send` has settled so far, kept while it waits (for an arena, for room among
/// the queued records, or for the topic's metadata) and tries again.
#[derive(Default)]
struct SendState {
    /// Chosen once: a record waiting for an arena does not ask the partitioner again.
    partition: Option<i32>,
    /// The record's timestamp, or the clock's when it has none: read once, when the
    /// record is first appended (after any wait for metadata).
    timestamp: Option<i64>,
    /// An arena waited for after [`Appended::NeedArena`].
    arena: Option<Arena>,
    /// What to wait for before appending again.
    waiting_for: Option<WaitFor>,
    /// The tag of a record sent with [`Producer::send_tagged`].
    tag: Option<u64>,
    /// The batch a record sent without a tag was appended to (its completion), and the
    /// record's place in it: what [`Appended::Done`] said, kept here by
    /// [`Producer::append`] rather than passed back up the calls (see [`Appending`]).
    batch: Option<Arc<BatchShared>>,
    position: usize,
}

/// What [`Producer::append`] and the calls above it return for a record: nothing, or
/// why it could not be appended; where it went (the batch of a record sent without a
/// tag: [`SendState::batch`]) or what it waits for ([`SendState::waiting_for`]) is left
/// in the send's state. Eight bytes, so it comes
/// back in a register. Returned instead, [`Appended`] (16 bytes then, its numbers `u32`s)
/// was written in 4- and 8-byte stores and copied on by 8- and 16-byte loads, two
/// store-forwarding stalls per record (29% of `Producer::append`'s samples in a
/// produce-100 profile).
type Appending = Hot<()>;

impl SendState {
    /// A send's state before anything is settled. Made where the send keeps it, not
    /// returned with `admit`'s guard: moved out of that pair it was copied by 16-byte
    /// loads spanning narrower stores of its fields, a store-forwarding stall per record.
    /// The record's own timestamp is read when it is appended, with the clock's: read
    /// here, just after the caller wrote the record, the load stalled on its stores.
    fn new(tag: Option<u64>) -> SendState {
        SendState {
            tag,
            ..SendState::default()
        }
    }
}

/// What a send waits for before it appends again.
#[derive(Debug, Clone, Copy)]
enum WaitFor {
    /// An arena of this class (`buffer.memory` used up).
    Arena(usize),
    /// Room among the queued records (`queue.buffering.max.messages` reached).
    Room,
}

/// A record a send queued: its delivery future, or nothing more for one sent with a
/// tag (its outcome goes to the producer's delivery handler).
pub(crate) enum Queued {
    Future(DeliveryFuture),
    Tagged,
}

impl Queued {
    /// The delivery future of a record sent without a tag.
    fn into_future(self) -> Result<DeliveryFuture> {
        match self {
            Queued::Future(future) => Ok(future),
            // Only a record sent with a tag is queued without a future.
            Queued::Tagged => Err(Error::InvalidArgument(
                "a record without a tag was taken as tagged".into(),
            )),
        }
    }
}

/// How [`Producer::send_now`] left a record.
enum SendNow<'a> {
    /// Appended.
    Done(Queued),
    /// It must wait (for an arena, for room among the queued records, or for its topic's
    /// metadata): how far it got, and its place in an open transaction.
    Wait(SendState, Option<txn::SendGuard<'a>>),
}

/// What the producer's handles and its tasks share.
pub(crate) struct ProducerShared {
    /// Unique for the life of the process: the key of this producer's routes in each
    /// sending thread's cache (see `routes`).
    id: u64,
    pub client: Client,
    pub settings: ProduceSettings,
    /// Batch arenas by size class, charged to `buffer.memory`.
    pub pools: ArenaPools,
    /// This producer's `buffer.memory` (for errors).
    buffer_memory: usize,
    partitioner: Option<Box<dyn Partitioner>>,
    pub topics: TopicTable,
    pub sinks: Sinks,
    /// The idempotent producer's id and epoch.
    pub identity: Mutex<Option<ProducerId>>,
    /// An epoch bump is pending: sinks send nothing until it is done.
    pub bump_needed: AtomicBool,
    /// Drains and requests in progress over all sinks (see `driver`).
    pub active: AtomicUsize,
    /// Signalled when `active` drops to zero.
    pub idle: Notify,
    /// Callers waiting in flush: seal everything now.
    pub flushing: AtomicUsize,
    pub closing: AtomicBool,
    /// No more records will come: sinks end once everything is settled.
    pub closed: AtomicBool,
    /// Dropped without `close()`: unsent records fail.
    pub abandoned: AtomicBool,
    /// Batches that failed for good since the last flush (what flush reports).
    pub failures: Arc<DeliveryFailures>,
    /// Records sent and not settled yet, and their limit.
    pub queued: Arc<QueuedRecords>,
    /// A transactional producer's transactions (`transactional.id` set).
    pub txn: Option<txn::TxnShared>,
    /// Run on each record sent and each batch's outcome.
    pub interceptors: crate::config::Interceptors<dyn ProducerInterceptor>,
}

impl std::fmt::Debug for ProducerShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("codec", &self.settings.codec)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The users' side of the producer: when the last one goes, the producer is abandoned.
#[derive(Debug)]
struct Handle {
    shared: Arc<ProducerShared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let shared = &self.shared;
        // No `close()` can run meanwhile (it borrows a handle), so load-then-store is
        // enough: closed already means there is nothing to abandon.
        if shared.closing.load(Ordering::Acquire) {
            return;
        }
        tracing::debug!("producer dropped without close(): unsent records fail");
        // Abandoned before closing: a sink that sees `closing` must also see that it
        // is abandoned, or it takes the drop for a close and sends what should fail.
        shared.abandoned.store(true, Ordering::Release);
        shared.closing.store(true, Ordering::Release);
        shared.closed.store(true, Ordering::Release);
        shared.sinks.wake_all();
        if let Some(txn) = &shared.txn {
            txn.wake_adder();
        }
    }
}

/// The asynchronous producer. Cheap to clone; `Send + Sync`.
///
/// [`Producer::send`] copies the record into its partition's open batch and returns a
/// [`DeliveryFuture`] that resolves once the broker acknowledged it (or it failed for
/// good); [`Producer::flush`] sends everything queued and reports failures since the
/// last flush; [`Producer::close`] flushes and stops. [`Producer::builder`] gives a
/// producer settings of its own on a shared client; [`SyncProducer`] waits for each
/// send.
///
/// ```no_run
/// use kring::producer::{Producer, ProducerRecord};
/// use kring::{Client, Config};
///
/// # async fn run() -> kring::Result<()> {
/// let client = Client::connect(Config::new(["127.0.0.1:9092"])).await?;
/// let producer = Producer::new(client.clone()).await?;
/// let mut deliveries = Vec::new();
/// for i in 0..100u32 {
///     let value = i.to_string();
///     let record = ProducerRecord::new("orders")
///         .with_key("customer-7")
///         .with_value(value.as_str())
///         .with_header("source", b"example");
///     deliveries.push(producer.send(record).await?);
/// }
/// producer.flush().await?; // Error::DeliveryFailed when any record failed
/// for delivery in deliveries {
///     let written = delivery.await?;
///     println!("partition {} offset {}", written.partition, written.offset);
/// }
/// producer.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Producer {
    handle: Arc<Handle>,
}

fn codec_of(c: crate::config::Compression) -> Codec {
    use crate::config::Compression as C;
    match c {
        C::None => Codec::None,
        C::Gzip => Codec::Gzip,
        C::Snappy => Codec::Snappy,
        C::Lz4 => Codec::Lz4,
        C::Zstd => Codec::Zstd,
    }
}

/// The bytes of reported lists of tagged records to keep for new batches: half of
/// `buffer.memory` (a list holds 24 bytes a record; for 100-byte records that is under a
/// quarter of their batches' bytes).
fn tag_lists_kept(buffer_memory: usize) -> usize {
    buffer_memory / 2
}

/// The settings the producer's engines use, from the client's configuration with this
/// producer's own section.
fn settings_of(
    config: &Config,
    delivery_handler: Option<Arc<dyn DeliveryHandler>>,
) -> ProduceSettings {
    let p = &config.producer;
    ProduceSettings {
        acks: match p.acks {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        },
        idempotent: p.enable_idempotence,
        linger: p.linger,
        timer_resolution: crate::runtime::TIMER_RESOLUTION,
        batch_size: p.batch_size,
        max_request_size: p.max_request_size,
        delivery_timeout: p.delivery_timeout,
        retries: p.retries,
        retry_backoff: p.retry_backoff,
        retry_backoff_max: p.retry_backoff_max,
        request_timeout: config.net.request_timeout,
        max_in_flight: config.net.max_in_flight,
        transactional_id: p.transactional_id.clone(),
        transaction_timeout: p.transaction_timeout,
        codec: codec_of(p.compression),
        report_tagged: delivery_handler.map(|h| {
            let reporter = Arc::new(delivery::HandlerReporter(h)) as Arc<dyn ReportTagged>;
            TagReports::new(reporter, tag_lists_kept(p.buffer_memory))
        }),
    }
}

impl ProducerShared {
    /// Every partition of every topic the producer has seen.
    pub(crate) fn all_partitions(&self) -> Vec<Arc<ProducePartition>> {
        let topics: Vec<Arc<TopicState>> = self
            .topics
            .read()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default();
        topics.iter().flat_map(|t| t.partitions()).collect()
    }

    /// Waits until every batch sent so far is acknowledged or failed; what failed is
    /// returned (and no longer reported by a later flush).
    pub(crate) async fn settle_batches(&self) -> Option<FailureReport> {
        let pending: Vec<_> = self
            .all_partitions()
            .iter()
            .flat_map(|p| p.state().pending())
            .collect();
        let _hurry = self.hurry();
        for batch in pending {
            batch_done(batch).await;
        }
        self.failures.take()
    }

    /// Shows `record` to the interceptors, if there are any.
    fn intercept(&self, record: &ProducerRecord<'_>) {
        if !self.interceptors.is_empty() {
            for i in self.interceptors.iter() {
                i.on_send(record);
            }
        }
    }

    /// Waits until a record may be queued again (`queue.buffering.max.messages`
    /// reached). While it waits, every sink seals and sends what it has: records in open
    /// batches would otherwise wait out their linger, with nothing more to join them
    /// (the Java client's accumulator sends every batch while a sender waits for
    /// memory, for the same reason).
    async fn wait_for_room(&self) {
        let mut room = std::pin::pin!(self.queued.room());
        let mut hurry = None;
        std::future::poll_fn(|cx| match room.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                hurry.get_or_insert_with(|| self.hurry());
                Poll::Pending
            }
        })
        .await
    }

    /// Asks every sink to seal and send now (a flush, or a sync send, is waiting).
    fn hurry(&self) -> FlushGuard<'_> {
        self.flushing.fetch_add(1, Ordering::AcqRel);
        self.sinks.wake_all();
        FlushGuard(self)
    }
}

/// Ends a [`ProducerShared::hurry`] when dropped.
struct FlushGuard<'a>(&'a ProducerShared);

impl Drop for FlushGuard<'_> {
    fn drop(&mut self) {
        self.0.flushing.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Producer {
    /// A producer on `client`'s connections, configured by `client.config().producer`.
    /// With idempotence on, it first obtains a producer id (InitProducerId).
    pub async fn new(client: Client) -> Result<Producer> {
        Self::with_partitioner(client, None).await
    }

    /// A producer whose records find their partition through `partitioner` (instead of
    /// the one `producer.partitioner` names); `None` uses the configured one.
    pub async fn with_partitioner(
        client: Client,
        partitioner: Option<Box<dyn Partitioner>>,
    ) -> Result<Producer> {
        let own = client.config().producer.clone();
        Self::start(client, own, partitioner, None).await
    }

    /// A producer with settings of its own over `client`'s connections and workers:
    /// starts from `client.config().producer`; see [`ProducerBuilder`].
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder::new(client)
    }

    /// Starts a producer on `client` with `own` settings (validated with the client's).
    /// Everything below reads `own` (through `settings`, `pools`, `buffer_memory` and
    /// the partitioner), never `client.config().producer`.
    async fn start(
        client: Client,
        own: ProducerConfig,
        partitioner: Option<Box<dyn Partitioner>>,
        delivery_handler: Option<Arc<dyn DeliveryHandler>>,
    ) -> Result<Producer> {
        let mut config = client.config().clone();
        config.producer = own;
        config.validate()?;
        let p = &config.producer;
        let pools = ArenaPools::new(p.batch_size, MemoryBudget::new(p.buffer_memory));
        let seed = now_ms() as u64 ^ u64::from(std::process::id());
        let shared = Arc::new(ProducerShared {
            id: routes::next_producer_id(),
            client: client.clone(),
            settings: settings_of(&config, delivery_handler),
            partitioner: partitioner
                .or_else(|| partitioner::from_kind(p.partitioner, p.batch_size, seed)),
            pools,
            buffer_memory: p.buffer_memory,
            topics: RwLock::new(HashMap::default()),
            sinks: Sinks::default(),
            identity: Mutex::new(None),
            bump_needed: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            idle: Notify::new(),
            flushing: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            failures: Arc::default(),
            queued: Arc::new(QueuedRecords::new(p.max_queued_records)),
            txn: p.transactional_id.as_deref().map(txn::TxnShared::new),
            interceptors: p.interceptors.clone(),
        });
        // A transactional producer obtains its id in init_transactions.
        if shared.settings.idempotent && shared.txn.is_none() {
            let id = driver::init_producer_id(&shared, None).await?;
            if let Ok(mut slot) = shared.identity.lock() {
                *slot = Some(id);
            }
        }
        Ok(Producer {
            handle: Arc::new(Handle { shared }),
        })
    }

    fn shared(&self) -> &Arc<ProducerShared> {
        &self.handle.shared
    }

    /// [`Producer::new`] for plain threads.
    pub fn new_blocking(client: Client) -> Result<Producer> {
        crate::client::block_on(Self::new(client))
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.shared().client
    }

    /// The producer id and epoch (idempotence), if any.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.shared()
            .identity
            .lock()
            .ok()
            .and_then(|p| p.map(|p| (p.id, p.epoch)))
    }

    /// Refuses records once the producer is closing ([`Error::ShuttingDown`]) or its
    /// client was closed ([`Error::ClosedClient`]).
    fn check_open(&self) -> Result<()> {
        if self.shared().closing.load(Ordering::Acquire) {
            Err(Error::ShuttingDown)
        } else if self.shared().client.is_closed() {
            Err(Error::ClosedClient)
        } else {
            Ok(())
        }
    }

    /// Routes `record` through its topic's routes if they are from the current
    /// metadata snapshot (this thread's cached copy of them: no lock taken), and
    /// appends it; `None` when the topic is new to the producer or the metadata changed
    /// since (then [`Producer::refresh_topic`]).
    fn append_current(
        &self,
        record: &ProducerRecord<'_>,
        state: &mut SendState,
    ) -> Option<Appending> {
        let shared = self.shared();
        let generation = shared.client.metadata_generation();
        routes::with_current_routes(
            shared.id,
            &shared.topics,
            record.topic,
            generation,
            |topic, routes| {
                let part = self.partition_for(topic, routes, record, state)?;
                self.append(part, record, state)
            },
        )
    }

    /// The partition `record` goes to: the one chosen before, or the partitioner's
    /// choice now.
    fn partition_for<'r>(
        &self,
        topic: &TopicState,
        routes: &'r TopicRoutes,
        record: &ProducerRecord<'_>,
        state: &mut SendState,
    ) -> Hot<&'r Arc<ProducePartition>> {
        let partition = match state.partition {
            Some(p) => p,
            None => {
                let partitions = TopicPartitions::new(routes.count, &routes.available)
                    .with_sticky(&topic.sticky);
                *state
                    .partition
                    .insert(self.choose_partition(record, partitions)?)
            }
        };
        routes
            .partitions
            .get(partition as usize)
            .filter(|_| (partition as usize) < routes.count)
            .ok_or_else(|| {
                Box::new(Error::InvalidPartition {
                    topic: record.topic.to_string(),
                    partition,
                    count: routes.count,
                })
            })
    }

    /// Routes `record` after bringing its topic's routes up to date with the metadata
    /// (a metadata request is made for a topic not known yet when `fetch` allows it).
    async fn route_refreshed(
        &self,
        record: &ProducerRecord<'_>,
        state: &mut SendState,
        fetch: bool,
    ) -> Result<Arc<ProducePartition>> {
        let topic = self.refresh_topic(record.topic, fetch).await?;
        let routes = topic.routes().ok_or(Error::ShuttingDown)?;
        self.partition_for(&topic, &routes, record, state)
            .cloned()
            .map_err(|e| *e)
    }

    /// Brings the routes of topic `name` up to date with the current metadata snapshot.
    async fn refresh_topic(&self, name: &str, fetch: bool) -> Result<Arc<TopicState>> {
        let shared = self.shared();
        let metadata = shared.client.metadata();
        let in_snapshot = metadata.topics.get(name);
        let meta = match in_snapshot {
            Some(t) => t.clone(),
            None if fetch => {
                let within = shared.client.config().metadata.topic_propagation_max;
                shared.client.topic_within(name, within).await?
            }
            None => {
                return Err(Error::broker(
                    KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
                    ApiKey::Metadata,
                    Some(name),
                    None,
                ));
            }
        };
        let count = meta.partitions.len();
        let available: Vec<i32> = meta
            .partitions
            .iter()
            .filter(|p| p.leader >= 0)
            .map(|p| p.id)
            .collect();
        let known = shared.topics.read().ok().and_then(|t| t.get(name).cloned());
        let topic = match known {
            Some(t) => t,
            None => {
                let mut topics = shared.topics.write().map_err(|_| Error::ShuttingDown)?;
                topics
                    .entry(name.to_string())
                    .or_insert_with(|| Arc::new(TopicState::new(name)))
                    .clone()
            }
        };
        let added = topic
            .update(|routes| {
                let added = self.grow_partitions(&topic.name, &mut routes.partitions, count);
                routes.generation = if in_snapshot.is_some() {
                    metadata.generation
                } else {
                    0
                };
                routes.count = count;
                routes.available = available;
                added
            })
            .ok_or(Error::ShuttingDown)?;
        for p in added {
            self.shared().route(p)?;
        }
        Ok(topic)
    }

    /// Makes the partitions `topic` gained (up to `count`); the caller routes each to
    /// its sink once the routes' lock is released.
    fn grow_partitions(
        &self,
        topic: &Arc<str>,
        parts: &mut Vec<Arc<ProducePartition>>,
        count: usize,
    ) -> Vec<Arc<ProducePartition>> {
        let start = parts.len();
        for index in start..count {
            let accounts = ProducerAccounts {
                failures: self.shared().failures.clone(),
                queued: self.shared().queued.clone(),
            };
            parts.push(ProducePartition::new(topic.clone(), index as i32, accounts));
        }
        parts[start.min(parts.len())..].to_vec()
    }

    fn choose_partition(
        &self,
        record: &ProducerRecord<'_>,
        partitions: TopicPartitions<'_>,
    ) -> Result<i32> {
        let count = partitions.count;
        let partition = match (record.partition, &self.shared().partitioner) {
            (Some(p), _) => p,
            (None, Some(partitioner)) => {
                let key = record.key.as_ref().map(Payload::as_bytes);
                let size = key.map_or(0, <[u8]>::len)
                    + record.value.as_ref().map_or(0, |v| v.as_bytes().len());
                partitioner.partition(record.topic, key, size, partitions)
            }
            (None, None) => {
                return Err(Error::InvalidPartition {
                    topic: record.topic.to_string(),
                    partition: -1,
                    count,
                });
            }
        };
        if partition < 0 || partition as usize >= count {
            return Err(Error::InvalidPartition {
                topic: record.topic.to_string(),
                partition,
                count,
            });
        }
        Ok(partition)
    }

    /// Appends under the partition's lock (no other lock held). Needs an arena only
    /// when the partition has no open batch and the pool has nothing free right now.
    /// What the append did goes into `state`, field by field (see [`Appending`]).
    fn append(
        &self,
        part: &ProducePartition,
        record: &ProducerRecord<'_>,
        state: &mut SendState,
    ) -> Appending {
        let parts = RecordParts {
            key: record.key.as_ref().map(Payload::as_bytes),
            value: record.value.as_ref().map(Payload::as_bytes),
            headers: &record.headers,
            timestamp: *state
                .timestamp
                .get_or_insert_with(|| record.timestamp.unwrap_or_else(now_ms)),
        };
        let shared = self.shared();
        let appended = part.state().append(
            parts,
            state.tag,
            &mut state.arena,
            &shared.settings,
            &shared.pools,
            Instant::now,
        )?;
        match appended {
            Appended::Done {
                shared: batch,
                index,
            } => {
                state.batch = Some(batch);
                state.position = index;
            }
            Appended::Tagged => {}
            Appended::NeedArena(class) => {
                state.waiting_for = Some(WaitFor::Arena(class));
                return Ok(());
            }
            Appended::NeedRoom => {
                state.waiting_for = Some(WaitFor::Room);
                return Ok(());
            }
        }
        shared.register_partition(part);
        Ok(())
    }

    /// What every send does first: refuses the record once the producer is closing,
    /// shows it to the interceptors, and counts it into an open transaction (the guard
    /// is held until the record's partition is registered).
    #[inline]
    fn admit(
        &self,
        record: &ProducerRecord<'_>,
        tag: Option<u64>,
    ) -> Result<Option<txn::SendGuard<'_>>> {
        self.check_open()?;
        if tag.is_some() && self.shared().settings.report_tagged.is_none() {
            return Err(Error::InvalidArgument(
                "a record sent with a tag needs the producer's delivery handler \
                 (ProducerBuilder::delivery_handler)"
                    .into(),
            ));
        }
        self.shared().intercept(record);
        self.shared().enter_send()
    }

    /// What an appended record leaves its sender: its delivery future, or nothing for
    /// one sent with a tag. `None` for an append that must wait (for an arena, or for
    /// room among the queued records: `state.waiting_for` says which).
    fn queued(state: &mut SendState) -> Option<Queued> {
        if state.waiting_for.is_some() {
            return None;
        }
        Some(match state.batch.take() {
            Some(batch) => Queued::Future(DeliveryFuture::new(
                batch,
                state.position,
                state.partition.unwrap_or(-1),
                state.timestamp.unwrap_or_default(),
            )),
            None => Queued::Tagged,
        })
    }

    /// Queues `record` and returns its delivery future; waits while `buffer.memory` is
    /// used up, and for metadata of a topic not seen before: up to
    /// `topic.metadata.propagation.max.ms` for a topic the cluster does not show yet.
    /// Like an `async fn`, it does nothing until first polled (see [`Sending`]).
    pub fn send<'a>(&'a self, record: ProducerRecord<'a>) -> Sending<'a> {
        Sending::new(self, record)
    }

    /// Queues `record` like [`Producer::send`], without a delivery future: its outcome
    /// goes, with `tag`, to the producer's [`DeliveryHandler`]
    /// ([`ProducerBuilder::delivery_handler`]), a batch at a time. Fails with
    /// [`Error::InvalidArgument`] when the producer has no handler.
    ///
    /// For pipelines that track their records themselves (an offset to commit, a slot in
    /// a ring) and want no per-record future: the tag is theirs to choose, and a record
    /// costs a 24-byte entry in its batch's list instead of a future sharing its batch's
    /// completion (librdkafka's delivery report callback with a message's opaque, the
    /// Java client's callback, are the same idea).
    pub fn send_tagged<'a>(&'a self, record: ProducerRecord<'a>, tag: u64) -> SendingTagged<'a> {
        SendingTagged::new(self, record, tag)
    }

    /// [`Producer::send_tagged`] for plain threads (waits for memory). A record appended
    /// at once is appended without a future, so on a sending thread of its own this is
    /// cheaper per record than `send_tagged(..).await` (about 80 instructions of some
    /// 1,200 for a 100-byte record, `perf/instructions`).
    pub fn send_tagged_blocking(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
        self.queue_blocking(record, Some(tag), |_| Ok(()))
    }

    /// What the blocking sends do: appends at once when it can, as the first poll of a
    /// send's future would, and only a record that must wait (for memory or metadata)
    /// goes on in a future run to its end on this thread. Most records need no future,
    /// no waker and no executor.
    ///
    /// The record's [`Queued`] goes straight to `out`, compiled into each caller's copy:
    /// returned instead, it came back through memory in stores narrower than the
    /// caller's loads, a store-forwarding stall on every record sent with a tag.
    fn queue_blocking<T>(
        &self,
        record: ProducerRecord<'_>,
        tag: Option<u64>,
        out: impl FnOnce(Queued) -> Result<T>,
    ) -> Result<T> {
        match self.send_now(&record, tag)? {
            SendNow::Done(queued) => out(queued),
            SendNow::Wait(state, in_transaction) => out(crate::client::block_on(
                self.send_waiting(record, state, in_transaction),
            )?),
        }
    }

    /// [`Producer::send_tagged`] without ever waiting, as [`Producer::try_send`].
    pub fn try_send_tagged(&self, record: ProducerRecord<'_>, tag: u64) -> Result<()> {
        self.try_queue(&record, Some(tag)).map(|_| ())
    }

    /// What every send tries first: appending at once, without waiting. Most records
    /// are appended so; the rest go on in [`Producer::send_waiting`], with the state
    /// and transaction guard this leaves them.
    #[inline(always)]
    fn send_now(&self, record: &ProducerRecord<'_>, tag: Option<u64>) -> Result<SendNow<'_>> {
        let in_transaction = self.admit(record, tag)?;
        let mut state = SendState::new(tag);
        match self.append_current(record, &mut state) {
            Some(Ok(())) => {
                if let Some(queued) = Self::queued(&mut state) {
                    return Ok(SendNow::Done(queued));
                }
            }
            Some(Err(e)) => return Err(*e),
            None => {}
        }
        Ok(SendNow::Wait(state, in_transaction))
    }

    /// The rest of a [`Producer::send`] that must wait: for an arena or for room among
    /// the queued records (`state.waiting_for`), else for the topic's metadata (its
    /// routes were not current).
    async fn send_waiting<'a>(
        &'a self,
        record: ProducerRecord<'a>,
        mut state: SendState,
        _in_transaction: Option<txn::SendGuard<'a>>,
    ) -> Result<Queued> {
        let record = &record;
        loop {
            let routed = match state.waiting_for.take() {
                Some(WaitFor::Arena(class)) => {
                    let buf = self
                        .shared()
                        .pools
                        .get(class)
                        .await
                        .map_err(|e| Error::Batch(e.to_string()))?;
                    self.check_open()?;
                    state.arena = Some(Arena::Pooled(buf));
                    self.append_current(record, &mut state)
                }
                Some(WaitFor::Room) => {
                    self.shared().wait_for_room().await;
                    self.check_open()?;
                    self.append_current(record, &mut state)
                }
                // Just found not current: refreshed without looking again.
                None => None,
            };
            match routed {
                Some(appended) => appended.map_err(|e| *e)?,
                None => {
                    let part = self.route_refreshed(record, &mut state, true).await?;
                    self.append(&part, record, &mut state).map_err(|e| *e)?
                }
            }
            if let Some(queued) = Self::queued(&mut state) {
                return Ok(queued);
            }
        }
    }

    /// Queues `record` without ever waiting: a full `buffer.memory`, or a topic whose
    /// metadata is not known yet, is an error.
    pub fn try_send(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        self.try_queue(&record, None)?.into_future()
    }

    /// [`Producer::try_send`] and [`Producer::try_send_tagged`].
    fn try_queue(&self, record: &ProducerRecord<'_>, tag: Option<u64>) -> Result<Queued> {
        let _in_transaction = self.admit(record, tag)?;
        let mut state = SendState::new(tag);
        match self.append_current(record, &mut state) {
            Some(appended) => appended.map_err(|e| *e)?,
            None => {
                let part =
                    crate::client::block_on(self.route_refreshed(record, &mut state, false))?;
                self.append(&part, record, &mut state).map_err(|e| *e)?
            }
        }
        Self::queued(&mut state).ok_or_else(|| match state.waiting_for {
            Some(WaitFor::Room) => Error::Batch(format!(
                "queue.buffering.max.messages ({} records) reached",
                self.shared().queued.limit()
            )),
            _ => Error::Batch(format!(
                "buffer.memory ({} bytes) is full",
                self.shared().buffer_memory
            )),
        })
    }

    /// [`Producer::send`] for plain threads: queues the record (waiting for memory),
    /// without a future of its own when it can be appended at once.
    pub fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        self.queue_blocking(record, None, Queued::into_future)
    }

    /// Sends every record queued so far without waiting for linger, and waits until each
    /// is acknowledged or failed.
    ///
    /// Returns [`Error::DeliveryFailed`] when any record failed for good since the
    /// previous flush (or since the producer was made): every record sent before this
    /// flush is settled by then, so a failure among them is never hidden behind `Ok`.
    /// The error counts the failed records and batches and carries the first failure;
    /// each record's own [`DeliveryFuture`] still has its own error, and records sent
    /// with a tag have been reported to the delivery handler (failed ones included)
    /// before flush returns. Records that failed at `send` (which returned the error
    /// itself) are not counted. Failures of records sent by other threads while the
    /// flush waits may be counted too, and with concurrent flushes each failure is
    /// reported by one of them only. (Java's `flush` throws nothing and librdkafka's
    /// only reports a timeout; both leave failures to the delivery callbacks, which here
    /// are the delivery futures and the delivery handler.)
    pub async fn flush(&self) -> Result<()> {
        match self.shared().settle_batches().await {
            None => Ok(()),
            Some(report) => Err(Error::DeliveryFailed {
                records: report.records,
                batches: report.batches,
                first: Box::new(report.first),
            }),
        }
    }

    /// [`Producer::flush`] for plain threads (the same errors).
    pub fn flush_blocking(&self) -> Result<()> {
        crate::client::block_on(self.flush())
    }

    /// Stops taking records, delivers (or fails) everything pending, and waits for the
    /// producer's tasks to end. The client stays open. Returns what its final
    /// [`Producer::flush`] returns: [`Error::DeliveryFailed`] when records failed since
    /// the previous flush.
    pub async fn close(&self) -> Result<()> {
        let shared = self.shared();
        if shared.closing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.abort_open_transaction().await;
        let flushed = self.flush().await;
        shared.closed.store(true, Ordering::Release);
        if let Some(txn) = &shared.txn {
            txn.wake_adder();
        }
        for sink in shared.sinks.all() {
            sink.wake();
            sink.finished().await;
        }
        flushed
    }

    /// [`Producer::close`] for plain threads.
    pub fn close_blocking(&self) -> Result<()> {
        crate::client::block_on(self.close())
    }

    /// A Sarama-style channel interface: records go into `input`; acknowledgements come
    /// out of `successes` and failures out of `errors`. Dropping `input` flushes and ends
    /// both streams.
    pub fn channels(&self, capacity: usize) -> Result<ProducerChannels> {
        let (input_tx, mut input_rx) = mpsc::channel::<OwnedRecord>(capacity.max(1));
        let (ok_tx, ok_rx) = mpsc::channel(capacity.max(1));
        let (err_tx, err_rx) = mpsc::channel(capacity.max(1));
        let producer = self.clone();
        let runtime = self.shared().client.runtime().clone();
        runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
            let mut waiting = tokio::task::JoinSet::new();
            while let Some(owned) = input_rx.recv().await {
                let record = owned.as_record();
                match producer.send(record).await {
                    Ok(delivery) => {
                        let ok_tx = ok_tx.clone();
                        let err_tx = err_tx.clone();
                        waiting.spawn_local(async move {
                            match delivery.await {
                                Ok(meta) => {
                                    let _ = ok_tx.send((owned, meta)).await;
                                }
                                Err(e) => {
                                    let _ = err_tx.send((owned, e)).await;
                                }
                            }
                        });
                    }
                    Err(e) => {
                        let _ = err_tx.send((owned, e)).await;
                    }
                }
                while waiting.try_join_next().is_some() {}
            }
            while waiting.join_next().await.is_some() {}
        })?;
        Ok(ProducerChannels {
            input: input_tx,
            successes: ok_rx,
            errors: err_rx,
        })
    }
}

/// A record that owns its data, for the channel interface.
#[derive(Debug, Clone)]
pub struct OwnedRecord {
    /// The topic.
    pub topic: String,
    /// The key.
    pub key: Option<bytes::Bytes>,
    /// The value.
    pub value: Option<bytes::Bytes>,
    /// Headers.
    pub headers: Vec<(String, bytes::Bytes)>,
    /// Timestamp (ms); `None` is now.
    pub timestamp: Option<i64>,
    /// Explicit partition.
    pub partition: Option<i32>,
}

impl OwnedRecord {
    /// A record for `topic` with this value.
    pub fn new(topic: impl Into<String>, value: impl Into<bytes::Bytes>) -> Self {
        OwnedRecord {
            topic: topic.into(),
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: None,
            partition: None,
        }
    }

    /// Borrows it as a [`ProducerRecord`].
    pub fn as_record(&self) -> ProducerRecord<'_> {
        ProducerRecord {
            topic: &self.topic,
            key: self.key.as_deref().map(Payload::Borrowed),
            value: self.value.as_deref().map(Payload::Borrowed),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| crate::record::Header::new(k, v))
                .collect(),
            timestamp: self.timestamp,
            partition: self.partition,
        }
    }
}

/// The channel interface of [`Producer::channels`].
#[derive(Debug)]
pub struct ProducerChannels {
    /// Records to send.
    pub input: mpsc::Sender<OwnedRecord>,
    /// Acknowledged records.
    pub successes: mpsc::Receiver<(OwnedRecord, RecordMetadata)>,
    /// Failed records.
    pub errors: mpsc::Receiver<(OwnedRecord, Error)>,
}

/// A blocking producer (Sarama's SyncProducer): each call returns once its records are
/// acknowledged.
///
/// For plain threads (no async runtime needed); [`Producer::send_blocking`] is the
/// non-waiting alternative, queueing a record and returning its delivery future.
///
/// ```no_run
/// use kring::producer::{ProducerRecord, SyncProducer};
/// use kring::{Client, Config};
///
/// let client = Client::connect_blocking(Config::new(["127.0.0.1:9092"]))?;
/// let producer = SyncProducer::connect(client)?;
/// let written = producer.send(ProducerRecord::new("orders").with_value("one"))?;
/// println!("partition {} offset {}", written.partition, written.offset);
/// let batch = [
///     ProducerRecord::new("orders").with_value("two"),
///     ProducerRecord::new("orders").with_value("three"),
/// ];
/// for result in producer.send_all(&batch) {
///     result?;
/// }
/// producer.close()?;
/// # Ok::<(), kring::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SyncProducer {
    producer: Producer,
}

impl SyncProducer {
    /// Wraps a producer.
    pub fn new(producer: Producer) -> Self {
        SyncProducer { producer }
    }

    /// Connects a producer on `client` (blocking).
    pub fn connect(client: Client) -> Result<Self> {
        Ok(SyncProducer {
            producer: Producer::new_blocking(client)?,
        })
    }

    /// Sends one record and waits for its acknowledgement.
    pub fn send(&self, record: ProducerRecord<'_>) -> Result<RecordMetadata> {
        let delivery = self.producer.send_blocking(record)?;
        let _hurry = self.producer.shared().hurry();
        delivery.wait()
    }

    /// Sends every record (batched together) and waits for all; one result per record,
    /// in order.
    pub fn send_all(&self, records: &[ProducerRecord<'_>]) -> Vec<Result<RecordMetadata>> {
        let deliveries: Vec<Result<DeliveryFuture>> = records
            .iter()
            .map(|r| self.producer.send_blocking(r.clone()))
            .collect();
        let _hurry = self.producer.shared().hurry();
        deliveries
            .into_iter()
            .map(|d| d.and_then(DeliveryFuture::wait))
            .collect()
    }

    /// The asynchronous producer underneath.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// Closes the producer.
    pub fn close(&self) -> Result<()> {
        self.producer.close_blocking()
    }
}

#[cfg(test)]
mod tests {
    use super::{Producer, ProducerRecord};

    /// The size of what a call returns, without making the call.
    fn size_of_output<'a, Fut>(_: impl Fn(&'a Producer, ProducerRecord<'a>) -> Fut) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// `send` sets up its future for every record: the waiting path (metadata, arenas)
    /// is boxed apart so that it stays small (it was 1,176 bytes with it inline).
    #[test]
    fn the_send_future_stays_small() {
        let size = size_of_output(|p: &Producer, r| p.send(r));
        assert!(size <= 512, "send's future is {size} bytes");
    }
}
