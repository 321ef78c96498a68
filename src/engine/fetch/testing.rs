//! A partition as a fetcher sees it, for tests and the simulation: chunks queue up to a
//! capacity (the consumer's room), errors are kept, everything else is plain atomics.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Chunk, FetchTarget, ReadReplica};
use crate::error::Error;

#[derive(Debug)]
pub(crate) struct TestTarget {
    topic: Arc<str>,
    partition: i32,
    position: AtomicI64,
    pub fetch_epoch: AtomicI32,
    pub leader_epoch: AtomicI32,
    pub high_watermark: AtomicI64,
    pub paused: AtomicBool,
    pub closed: AtomicBool,
    /// How many chunks the consumer holds before it has no room.
    pub capacity: AtomicUsize,
    pub queue: Mutex<VecDeque<Chunk>>,
    pub errors: Mutex<Vec<Error>>,
    pub read_replica: Mutex<Option<ReadReplica>>,
}

impl TestTarget {
    pub fn new(topic: &str, partition: i32, position: i64, capacity: usize) -> Arc<Self> {
        Arc::new(TestTarget {
            topic: Arc::from(topic),
            partition,
            position: AtomicI64::new(position),
            fetch_epoch: AtomicI32::new(-1),
            leader_epoch: AtomicI32::new(-1),
            high_watermark: AtomicI64::new(-1),
            paused: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            capacity: AtomicUsize::new(capacity),
            queue: Mutex::new(VecDeque::new()),
            errors: Mutex::new(Vec::new()),
            read_replica: Mutex::new(None),
        })
    }

    /// The chunks delivered and not taken yet.
    pub fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Chunk>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The errors reported so far.
    pub fn errors(&self) -> Vec<String> {
        let errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        errors.iter().map(ToString::to_string).collect()
    }
}

impl FetchTarget for TestTarget {
    fn topic(&self) -> &Arc<str> {
        &self.topic
    }
    fn partition(&self) -> i32 {
        self.partition
    }
    fn fetch_position(&self) -> i64 {
        self.position.load(Ordering::SeqCst)
    }
    fn fetch_epoch(&self) -> i32 {
        self.fetch_epoch.load(Ordering::SeqCst)
    }
    fn set_fetch_position(&self, offset: i64, epoch: i32) {
        self.position.store(offset, Ordering::SeqCst);
        self.fetch_epoch.store(epoch, Ordering::SeqCst);
    }
    fn current_leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::SeqCst)
    }
    fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::SeqCst)
    }
    fn set_high_watermark(&self, offset: i64) {
        self.high_watermark.store(offset, Ordering::SeqCst);
    }
    fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }
    fn has_room(&self) -> bool {
        self.queue().len() < self.capacity.load(Ordering::SeqCst)
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
    fn deliver(&self, chunk: Chunk) -> bool {
        let mut queue = self.queue();
        if queue.len() >= self.capacity.load(Ordering::SeqCst) {
            return false;
        }
        queue.push_back(chunk);
        true
    }
    fn report(&self, error: Error) {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(error);
    }
    fn read_replica(&self) -> Option<ReadReplica> {
        *self
            .read_replica
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
    fn set_read_replica(&self, replica: Option<ReadReplica>) {
        *self
            .read_replica
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = replica;
    }
}
