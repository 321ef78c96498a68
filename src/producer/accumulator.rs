//! The accumulator: per partition, one open batch being written in place into an arena,
//! then sealed batches waiting for the sender, then batches in flight.
//!
//! Invariants:
//! - A record is copied once, into its final place in the open batch (`BatchBuilder`).
//! - Sealing (CRC, compression) happens on the thread that filled the batch or on the
//!   sender when linger expires; it never happens under another partition's lock.
//! - With idempotence, sequence numbers are assigned when a batch is first sent, in
//!   queue order, so a batch that expires unsent leaves no gap; a batch that comes back
//!   for a retry goes back to the head of its queue in sequence order, and the partition
//!   sends nothing new until every batch still in flight has answered.
//! - A sealed batch's memory stays with its `Bytes` until every request carrying it is
//!   done, so a buffer is never reused while I/O may still read it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::buf::PooledBuf;
use crate::producer::record::BatchShared;
use crate::record::{BatchBuilder, BatchOptions, Compression, Compressor, SealedBatch};

/// The memory a batch is written into.
#[derive(Debug)]
pub(crate) enum Arena {
    /// A pooled buffer of one of the arena classes (16 KiB up to `batch.size`), charged
    /// to `buffer.memory`.
    Pooled(PooledBuf),
    /// A buffer of its own for a record larger than `batch.size` (or a compressed copy
    /// when the pool is exhausted).
    Heap(Vec<u8>),
}

impl AsRef<Vec<u8>> for Arena {
    fn as_ref(&self) -> &Vec<u8> {
        match self {
            Arena::Pooled(p) => p.as_ref(),
            Arena::Heap(v) => v,
        }
    }
}

impl AsMut<Vec<u8>> for Arena {
    fn as_mut(&mut self) -> &mut Vec<u8> {
        match self {
            Arena::Pooled(p) => p.as_mut(),
            Arena::Heap(v) => v,
        }
    }
}

impl Arena {
    /// Shared, immutable bytes without copying; a pooled buffer returns to its pool
    /// when the last `Bytes` of it is dropped.
    pub fn freeze(self) -> Bytes {
        match self {
            Arena::Pooled(p) => p.freeze(),
            Arena::Heap(v) => Bytes::from(v),
        }
    }
}

/// The batch currently being filled.
#[derive(Debug)]
pub(crate) struct OpenBatch {
    pub builder: BatchBuilder<Arena>,
    pub shared: Arc<BatchShared>,
    pub created: Instant,
}

/// A sealed batch: mutable until first sent (so its producer state can be set), then
/// frozen.
#[derive(Debug)]
pub(crate) enum BatchData {
    Sealed(SealedBatch<Arena>),
    Frozen(Bytes),
}

/// A sealed batch waiting to be sent (or re-sent).
#[derive(Debug)]
pub(crate) struct QueuedBatch {
    pub data: BatchData,
    pub records: i32,
    pub shared: Arc<BatchShared>,
    pub created: Instant,
    pub attempts: u32,
    pub base_sequence: Option<i32>,
    /// Sent at least once: its fate on the broker may be unknown.
    pub sent: bool,
}

/// A batch in a request on the wire.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub shared: Arc<BatchShared>,
}

/// Everything about one partition.
#[derive(Debug, Default)]
pub(crate) struct PartitionState {
    pub open: Option<OpenBatch>,
    pub queue: VecDeque<QueuedBatch>,
    pub in_flight: VecDeque<InFlight>,
    pub next_sequence: i32,
    /// The broker has acknowledged a batch of this partition in the current epoch. Until
    /// then one batch at a time is in flight: a broker with no state for the producer
    /// accepts any first sequence, so a second batch could overtake a first one that
    /// failed (NOT_LEADER on a new partition, say) and land out of order.
    pub acked_in_epoch: bool,
    /// A batch failed and came back: send nothing until the in-flight ones answered.
    pub hold_until_drained: bool,
    pub retry_at: Option<Instant>,
    /// The arena size class of this partition's next batch (see `arenas.rs`).
    pub arena_class: usize,
}

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Compressor> = std::cell::RefCell::new(Compressor::new());
}

impl PartitionState {
    /// Starts a batch in `arena`.
    pub fn open_batch(
        &mut self,
        arena: Arena,
        max_size: usize,
    ) -> Result<(), crate::record::BuildError> {
        let builder = BatchBuilder::new(arena, BatchOptions::default().with_max_size(max_size))?;
        self.open = Some(OpenBatch {
            builder,
            shared: BatchShared::new(),
            created: Instant::now(),
        });
        Ok(())
    }

    /// Seals the open batch (compressing with `codec` into `spare` when given) and queues it.
    pub fn seal_open(&mut self, codec: Compression, spare: Option<Arena>) {
        let Some(open) = self.open.take() else { return };
        if open.builder.is_empty() {
            return;
        }
        let records = open.builder.len() as i32;
        let sealed = if codec == Compression::None {
            open.builder.seal()
        } else {
            let out = spare.unwrap_or_else(|| Arena::Heap(Vec::with_capacity(open.builder.size())));
            COMPRESSOR.with(|c| {
                open.builder
                    .seal_compressed(codec, &mut c.borrow_mut(), out)
                    .map(|(sealed, _free)| sealed)
            })
        };
        match sealed {
            Ok(sealed) => self.queue.push_back(QueuedBatch {
                data: BatchData::Sealed(sealed),
                records,
                shared: open.shared,
                created: open.created,
                attempts: 0,
                base_sequence: None,
                sent: false,
            }),
            Err(e) => open
                .shared
                .complete(Err(crate::Error::Batch(e.to_string()))),
        }
    }

    /// Puts a batch that came back for a retry in sequence order at the head of the queue.
    pub fn requeue(&mut self, batch: QueuedBatch) {
        let pos = match batch.base_sequence {
            None => 0,
            Some(seq) => self
                .queue
                .iter()
                .position(|q| q.base_sequence.is_none_or(|s| s > seq))
                .unwrap_or(self.queue.len()),
        };
        self.queue.insert(pos, batch);
    }

    /// Removes `shared` from the in-flight list.
    pub fn finish_in_flight(&mut self, shared: &Arc<BatchShared>) -> Option<InFlight> {
        let i = self
            .in_flight
            .iter()
            .position(|f| Arc::ptr_eq(&f.shared, shared))?;
        self.in_flight.remove(i)
    }

    /// Every batch not yet settled (for flush).
    pub fn pending(&self) -> Vec<Arc<BatchShared>> {
        self.open
            .iter()
            .map(|o| o.shared.clone())
            .chain(self.queue.iter().map(|q| q.shared.clone()))
            .chain(self.in_flight.iter().map(|f| f.shared.clone()))
            .collect()
    }
}
