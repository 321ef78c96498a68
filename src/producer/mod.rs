//! The producer (Sarama's AsyncProducer and SyncProducer, done the modern way).
//!
//! `send` chooses a partition, copies the record once into that partition's open batch
//! (an arena from a pool charged to `buffer.memory`) and returns a [`DeliveryFuture`];
//! batches are sealed when full (on the sending thread) or when `linger` expires (on the
//! sender). One sender task on a worker gathers sealed batches per leader into one
//! Produce request per broker per round, handles answers, retries with backoff, follows
//! leaders through metadata, and keeps idempotent sequences (on by default, as in the
//! Java client since 3.0): InitProducerId at start, per-partition sequences, up to five
//! batches in flight per partition with order kept across retries, and an epoch bump
//! (KIP-360) when a sequence gap or an unknown producer id needs one.
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

mod accumulator;
mod api;
mod arenas;
pub mod partitioner;
mod record;
pub mod request;
mod sender;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{Notify, mpsc, oneshot};

pub use api::{FlushFuture, RecordProducer, SendFuture, SyncRecordProducer};
pub use partitioner::{Partitioner, TopicPartitions};
pub use record::{DeliveryFuture, Payload, ProducerRecord, RecordMetadata};

use crate::buf::MemoryBudget;
use crate::client::Client;
use crate::config::{Acks, Config};
use crate::error::{Error, Result};
use crate::protocol::{ApiKey, KafkaCode};
use crate::record::{BATCH_HEADER_LEN, Compression as Codec, record_encoded_len};
use accumulator::{Arena, PartitionState};
use arenas::{ArenaPools, next_class};

/// One topic's partitions.
#[derive(Debug)]
pub(crate) struct TopicState {
    pub name: Arc<str>,
    pub partitions: RwLock<Vec<Arc<Mutex<PartitionState>>>>,
    /// What the partitioner needs, computed once per metadata snapshot rather than per
    /// record.
    view: Mutex<TopicView>,
}

#[derive(Debug, Clone, Default)]
struct TopicView {
    /// The generation of the metadata snapshot this view was computed from.
    generation: u64,
    count: usize,
    available: Arc<[i32]>,
}

/// The idempotent producer's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerId {
    pub id: i64,
    pub epoch: i16,
}

pub(crate) struct ProducerInner {
    pub client: Client,
    pub config: Arc<Config>,
    /// Batch arenas by size class, charged to `buffer.memory`.
    pub arenas: ArenaPools,
    pub codec: Codec,
    partitioner: Option<Box<dyn Partitioner>>,
    pub topics: RwLock<HashMap<String, Arc<TopicState>>>,
    /// Wakes the sender: a batch was sealed, a flush or close began, an answer came.
    pub wake: Notify,
    /// Callers waiting in flush: seal everything now.
    pub flushing: AtomicUsize,
    pub closing: AtomicBool,
    pub closed: AtomicBool,
    pub producer_id: Mutex<Option<ProducerId>>,
    /// Set when the producer epoch must be bumped before anything more is sent.
    pub bump_needed: AtomicBool,
    pub in_flight_requests: AtomicUsize,
    /// Resolves when the sender task has finished (close waits for it).
    sender_done: Mutex<Option<oneshot::Receiver<()>>>,
}

impl std::fmt::Debug for ProducerInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("codec", &self.codec)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

/// The asynchronous producer. Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Producer {
    inner: Arc<ProducerInner>,
}

enum Append {
    Done(DeliveryFuture),
    /// No arena of this class is free right now.
    NeedArena(usize),
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
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
        let config = Arc::new(client.config().clone());
        config.validate()?;
        let p = &config.producer;
        let arenas = ArenaPools::new(p.batch_size, MemoryBudget::new(p.buffer_memory));
        let seed = now_ms() as u64 ^ u64::from(std::process::id());
        let inner = Arc::new(ProducerInner {
            client: client.clone(),
            codec: codec_of(p.compression),
            partitioner: partitioner
                .or_else(|| partitioner::from_kind(p.partitioner, p.batch_size, seed)),
            arenas,
            config: config.clone(),
            topics: RwLock::new(HashMap::new()),
            wake: Notify::new(),
            flushing: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            producer_id: Mutex::new(None),
            bump_needed: AtomicBool::new(false),
            in_flight_requests: AtomicUsize::new(0),
            sender_done: Mutex::new(None),
        });
        if p.enable_idempotence {
            let id = sender::init_producer_id(&inner, None).await?;
            if let Ok(mut slot) = inner.producer_id.lock() {
                *slot = Some(id);
            }
        }
        let (done_tx, done_rx) = oneshot::channel();
        let task_inner = inner.clone();
        let runtime = client.runtime();
        runtime.spawn_on(runtime.worker_for(-1), move |_| async move {
            sender::run(task_inner).await;
            let _ = done_tx.send(());
        })?;
        if let Ok(mut slot) = inner.sender_done.lock() {
            *slot = Some(done_rx);
        }
        Ok(Producer { inner })
    }

    /// [`Producer::new`] for plain threads.
    pub fn new_blocking(client: Client) -> Result<Producer> {
        crate::client::block_on(Self::new(client))
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The producer id and epoch (idempotence), if any.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.inner
            .producer_id
            .lock()
            .ok()
            .and_then(|p| p.map(|p| (p.id, p.epoch)))
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closing.load(Ordering::Acquire) || self.inner.client.is_closed() {
            Err(Error::ShuttingDown)
        } else {
            Ok(())
        }
    }

    /// The topic's state, its partition count and the partitions with a leader; a
    /// metadata request is made for a topic not seen yet when `fetch` allows it.
    async fn topic(&self, name: &str, fetch: bool) -> Result<(Arc<TopicState>, Arc<[i32]>, usize)> {
        let metadata = self.inner.client.metadata();
        let known = self
            .inner
            .topics
            .read()
            .ok()
            .and_then(|t| t.get(name).cloned());
        if let Some(t) = &known
            && let Ok(view) = t.view.lock()
            && view.generation == metadata.generation
            && view.count > 0
        {
            return Ok((t.clone(), view.available.clone(), view.count));
        }
        let meta = match metadata.topics.get(name) {
            Some(t) => t.clone(),
            None if fetch => self.inner.client.topic(name).await?,
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
        let available: Arc<[i32]> = meta
            .partitions
            .iter()
            .filter(|p| p.leader >= 0)
            .map(|p| p.id)
            .collect();
        let topic = match known {
            Some(t) => t,
            None => {
                let mut topics = self.inner.topics.write().map_err(|_| Error::ShuttingDown)?;
                topics
                    .entry(name.to_string())
                    .or_insert_with(|| {
                        Arc::new(TopicState {
                            name: Arc::from(name),
                            partitions: RwLock::new(Vec::new()),
                            view: Mutex::new(TopicView::default()),
                        })
                    })
                    .clone()
            }
        };
        if let Ok(mut parts) = topic.partitions.write() {
            while parts.len() < count {
                parts.push(Arc::new(Mutex::new(PartitionState::default())));
            }
        }
        if let Ok(mut view) = topic.view.lock() {
            *view = TopicView {
                generation: if metadata.topics.contains_key(name) {
                    metadata.generation
                } else {
                    0
                },
                count,
                available: available.clone(),
            };
        }
        Ok((topic, available, count))
    }

    fn choose_partition(
        &self,
        record: &ProducerRecord<'_>,
        available: &[i32],
        count: usize,
    ) -> Result<i32> {
        let partition = match (record.partition, &self.inner.partitioner) {
            (Some(p), _) => p,
            (None, Some(partitioner)) => {
                let key = record.key.as_ref().map(Payload::as_bytes);
                let size = key.map_or(0, <[u8]>::len)
                    + record.value.as_ref().map_or(0, |v| v.as_bytes().len());
                partitioner.partition(
                    record.topic,
                    key,
                    size,
                    TopicPartitions { count, available },
                )
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

    /// Appends under the partition's lock. Needs an arena only when the partition has
    /// no open batch and the pool has nothing free right now.
    fn append(
        &self,
        topic: &TopicState,
        partition: i32,
        record: &ProducerRecord<'_>,
        timestamp: i64,
        mut arena: Option<Arena>,
    ) -> Result<Append> {
        let part = topic
            .partitions
            .read()
            .map_err(|_| Error::ShuttingDown)?
            .get(partition as usize)
            .cloned()
            .ok_or_else(|| Error::InvalidPartition {
                topic: topic.name.to_string(),
                partition,
                count: 0,
            })?;
        let key = record.key.as_ref().map(Payload::as_bytes);
        let value = record.value.as_ref().map(Payload::as_bytes);
        let config = &self.inner.config.producer;
        let mut state = part.lock().map_err(|_| Error::ShuttingDown)?;
        loop {
            if state.open.is_none() {
                let needed =
                    BATCH_HEADER_LEN + record_encoded_len(0, 0, key, value, &record.headers);
                // Room for the request and topic framing around one batch.
                let limit = config
                    .max_request_size
                    .saturating_sub(256 + topic.name.len());
                if needed > limit {
                    return Err(Error::MessageTooLarge {
                        size: needed,
                        max: limit,
                    });
                }
                let arenas = &self.inner.arenas;
                let (arena, max) = match arenas.class_for(state.arena_class, needed) {
                    None => (Arena::Heap(Vec::with_capacity(needed)), needed),
                    Some(class) => {
                        // An arena waited for in `send` may be of another class (the
                        // partition's class moved meanwhile): fine if the record fits.
                        let a = match arena.take() {
                            Some(Arena::Pooled(b)) if b.capacity() >= needed => b,
                            _ => match arenas.try_get(class) {
                                Ok(b) => b,
                                Err(_) => return Ok(Append::NeedArena(class)),
                            },
                        };
                        let max = a.capacity().min(config.batch_size);
                        (Arena::Pooled(a), max)
                    }
                };
                state
                    .open_batch(arena, max)
                    .map_err(|e| Error::Batch(e.to_string()))?;
                // The sender may be asleep with no deadline (up to its idle tick): let it
                // learn this batch's linger deadline, or a lone record waits that long.
                self.inner.wake.notify_one();
            }
            let open = state.open.as_mut().expect("opened above");
            let size = open
                .builder
                .record_size(timestamp, key, value, &record.headers);
            if open.builder.fits(size) {
                open.builder
                    .append(timestamp, key, value, &record.headers)
                    .map_err(|e| Error::Batch(e.to_string()))?;
                let index = open.builder.len() - 1;
                let future = DeliveryFuture::new(open.shared.clone(), index, partition, timestamp);
                // Nearly full: seal now rather than on the next record.
                if open.builder.remaining() < 64 {
                    self.seal_full(&mut state);
                }
                return Ok(Append::Done(future));
            }
            if open.builder.is_empty() {
                return Err(Error::MessageTooLarge {
                    size,
                    max: open.builder.remaining(),
                });
            }
            self.seal_full(&mut state);
        }
    }

    /// Seals a batch that filled its arena; the partition's next batch gets a bigger one.
    fn seal_full(&self, state: &mut PartitionState) {
        let arenas = &self.inner.arenas;
        state.arena_class = next_class(state.arena_class, arenas.largest(), true, 0, 0);
        let spare = self.inner.spare_arena(state);
        state.seal_open(self.inner.codec, spare);
        self.inner.wake.notify_one();
    }

    /// Queues `record` and returns its delivery future; waits while `buffer.memory` is
    /// used up (and for metadata of a topic not seen before).
    pub async fn send(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        self.check_open()?;
        let (topic, available, count) = self.topic(record.topic, true).await?;
        let partition = self.choose_partition(&record, &available, count)?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let mut arena = None;
        loop {
            match self.append(&topic, partition, &record, timestamp, arena.take())? {
                Append::Done(f) => return Ok(f),
                Append::NeedArena(class) => {
                    let buf = self
                        .inner
                        .arenas
                        .get(class)
                        .await
                        .map_err(|e| Error::Batch(e.to_string()))?;
                    self.check_open()?;
                    arena = Some(Arena::Pooled(buf));
                }
            }
        }
    }

    /// Queues `record` without ever waiting: a full `buffer.memory`, or a topic whose
    /// metadata is not known yet, is an error.
    pub fn try_send(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        self.check_open()?;
        let (topic, available, count) = crate::client::block_on(self.topic(record.topic, false))?;
        let partition = self.choose_partition(&record, &available, count)?;
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        match self.append(&topic, partition, &record, timestamp, None)? {
            Append::Done(f) => Ok(f),
            Append::NeedArena(_) => Err(Error::Batch(format!(
                "buffer.memory ({} bytes) is full",
                self.inner.config.producer.buffer_memory
            ))),
        }
    }

    /// [`Producer::send`] for plain threads: queues the record (waiting for memory).
    pub fn send_blocking(&self, record: ProducerRecord<'_>) -> Result<DeliveryFuture> {
        crate::client::block_on(self.send(record))
    }

    /// Sends every record queued so far without waiting for linger, and waits until each
    /// is acknowledged or failed.
    pub async fn flush(&self) -> Result<()> {
        let pending: Vec<_> = sender::all_partitions(&self.inner)
            .iter()
            .flat_map(|p| p.lock().map(|s| s.pending()).unwrap_or_default())
            .collect();
        self.inner.flushing.fetch_add(1, Ordering::AcqRel);
        self.inner.wake.notify_one();
        for shared in pending {
            record::batch_done(shared).await;
        }
        self.inner.flushing.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    /// [`Producer::flush`] for plain threads.
    pub fn flush_blocking(&self) -> Result<()> {
        crate::client::block_on(self.flush())
    }

    /// Stops taking records, delivers (or fails) everything pending, and stops the
    /// sender. The client stays open.
    pub async fn close(&self) -> Result<()> {
        if self.inner.closing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let flushed = self.flush().await;
        self.inner.closed.store(true, Ordering::Release);
        self.inner.wake.notify_one();
        let done = self
            .inner
            .sender_done
            .lock()
            .ok()
            .and_then(|mut d| d.take());
        if let Some(done) = done {
            let _ = done.await;
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
        let runtime = self.inner.client.runtime().clone();
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
        self.producer.inner.flushing.fetch_add(1, Ordering::AcqRel);
        self.producer.inner.wake.notify_one();
        let result = delivery.wait();
        self.producer.inner.flushing.fetch_sub(1, Ordering::AcqRel);
        result
    }

    /// Sends every record (batched together) and waits for all; one result per record,
    /// in order.
    pub fn send_all(&self, records: &[ProducerRecord<'_>]) -> Vec<Result<RecordMetadata>> {
        let deliveries: Vec<Result<DeliveryFuture>> = records
            .iter()
            .map(|r| self.producer.send_blocking(r.clone()))
            .collect();
        self.producer.inner.flushing.fetch_add(1, Ordering::AcqRel);
        self.producer.inner.wake.notify_one();
        let out = deliveries
            .into_iter()
            .map(|d| d.and_then(DeliveryFuture::wait))
            .collect();
        self.producer.inner.flushing.fetch_sub(1, Ordering::AcqRel);
        out
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

impl ProducerInner {
    pub fn acks(&self) -> i16 {
        match self.config.producer.acks {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    pub fn idempotent(&self) -> bool {
        self.config.producer.enable_idempotence
    }

    /// With a codec, an arena for the compressed copy of the open batch: the smallest
    /// class its uncompressed bytes fit (a batch that wouldn't shrink is sent as it is),
    /// or none when the budget is spent (the copy then takes heap memory of its own).
    pub fn spare_arena(&self, state: &PartitionState) -> Option<Arena> {
        if self.codec == Codec::None {
            return None;
        }
        let size = state.open.as_ref()?.builder.size();
        let class = self.arenas.class_for(0, size)?;
        self.arenas.try_get(class).ok().map(Arena::Pooled)
    }
}
