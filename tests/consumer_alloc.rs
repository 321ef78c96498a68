//! The borrowed consumer path allocates nothing per record: a counting allocator
//! (per thread, so the workers' allocations do not count) watches this thread while it
//! takes batches and reads every record's key and value.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::{client, config, create_topic, unique};
use kring::consumer::{Consumer, Offset};
use kring::producer::{Producer, ProducerRecord};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: delegates to the system allocator; the counter is a const-initialised
// thread-local Cell, which never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn borrowed_records_allocate_nothing_per_record() {
    let client = client(config());
    let topic = unique("kring-alloc");
    create_topic(&client, &topic, 1, 1, &[]);
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let total = 50_000usize;
    let value = vec![b'v'; 100];
    for i in 0..total {
        let key = (i as u64).to_be_bytes();
        let _queued = producer
            .send_blocking(
                ProducerRecord::new(&topic)
                    .with_partition(0)
                    .with_key(&key)
                    .with_value(&value),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();
    producer.close_blocking().unwrap();

    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(&topic, 0, Offset::Oldest)
        .unwrap();
    // Warm up: the first batch (thread-local waker, scratch) may allocate.
    let mut read = 0usize;
    let mut checksum = 0u64;
    {
        let batch = pc.next_batch_blocking().unwrap().unwrap();
        for r in batch.records() {
            let r = r.unwrap();
            checksum += r.value().unwrap().len() as u64;
            read += 1;
        }
    }
    let before = allocations();
    let mut batches = 0u64;
    let mut measured = 0usize;
    while read < total {
        let batch = pc.next_batch_blocking().unwrap().unwrap();
        batches += 1;
        for r in batch.records() {
            let r = r.unwrap();
            checksum += r.key().unwrap()[7] as u64 + r.value().unwrap().len() as u64;
            read += 1;
            measured += 1;
        }
    }
    let allocated = allocations() - before;
    eprintln!(
        "{measured} records in {batches} batches: {allocated} allocations on the reading thread (checksum {checksum})"
    );
    assert_eq!(read, total);
    assert!(measured > 10_000, "enough records measured: {measured}");
    assert!(
        allocated <= batches,
        "{allocated} allocations for {measured} records in {batches} batches"
    );
    client.close();
}
