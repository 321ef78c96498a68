//! Zero heap allocations per record in steady state, proven with a counting global
//! allocator: once the pool, the codec state and the scratch buffer are warm,
//! encoding batches into pooled arenas, compressing them on seal, decompressing and
//! iterating every record (headers included) allocates nothing at all — neither per
//! record nor per batch.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kring::internals::{BufferPool, MemoryBudget};
use kring::record::{
    BatchBuilder, BatchOptions, Batches, Compression, Compressor, Decompressor, Header,
};

struct Counting;

thread_local! {
    // Per thread, so other tests running in parallel do not count.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers every call to the system allocator unchanged; only counts.
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

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
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

struct Pipeline {
    pool: BufferPool,
    compressor: Compressor,
    decompressor: Decompressor,
    scratch: Vec<u8>,
    value: Vec<u8>,
}

impl Pipeline {
    fn new() -> Self {
        let pool = BufferPool::new(1 << 20, MemoryBudget::new(8 << 20));
        pool.preallocate(4);
        Pipeline {
            pool,
            compressor: Compressor::new(),
            decompressor: Decompressor::new(4 << 20),
            scratch: Vec::new(),
            value: (0..100u8).map(|i| b'a' + i % 26).collect(),
        }
    }

    /// Builds, seals (compressing with `codec`), reads back and iterates one batch
    /// of `n` records; returns a checksum so nothing is optimised away.
    fn round(&mut self, codec: Compression, n: usize) -> u64 {
        let arena = self.pool.try_get().unwrap();
        let mut b = BatchBuilder::new(arena, BatchOptions::default()).unwrap();
        let headers = [Header::new("trace-id", b"0123456789abcdef")];
        for i in 0..n {
            let key = (i as u64).to_be_bytes();
            b.append(
                1_700_000_000_000 + i as i64,
                Some(&key),
                Some(&self.value),
                &headers,
            )
            .unwrap();
        }
        let out = self.pool.try_get().unwrap();
        let (sealed, spare) = b.seal_compressed(codec, &mut self.compressor, out).unwrap();
        drop(spare);
        assert_eq!(sealed.compression(), codec);
        let mut sum = 0u64;
        for batch in Batches::new(sealed.as_bytes()).verify_crc(true) {
            let batch = batch.unwrap();
            for r in batch
                .records(&mut self.decompressor, &mut self.scratch)
                .unwrap()
            {
                let r = r.unwrap();
                sum += r.offset() as u64 + r.value().map_or(0, |v| v.len() as u64);
                for h in r.headers() {
                    sum += h.unwrap().key.len() as u64;
                }
            }
        }
        sum
    }
}

#[test]
fn steady_state_allocates_nothing_per_record_or_per_batch() {
    let mut p = Pipeline::new();
    for codec in Compression::ALL {
        // Warm-up: codec contexts, the pool's arenas, the scratch buffer's high water.
        let before = allocations();
        for _ in 0..3 {
            p.round(codec, 5000);
        }
        if codec == Compression::Zstd {
            // zstd's C contexts are counted too (the `with-rust-allocator` feature).
            assert!(allocations() > before, "zstd context creation is visible");
        }
        for n in [1, 100, 5000] {
            let before = allocations();
            let mut sum = 0;
            for _ in 0..10 {
                sum += p.round(codec, n);
            }
            let made = allocations() - before;
            assert!(sum > 0);
            assert_eq!(
                made, 0,
                "{codec:?}: {made} allocations for 10 batches of {n} records"
            );
        }
    }
}

#[test]
fn the_counter_counts() {
    let before = allocations();
    let v: Vec<u8> = Vec::with_capacity(10);
    drop(std::hint::black_box(v));
    assert_eq!(allocations() - before, 1);
}
