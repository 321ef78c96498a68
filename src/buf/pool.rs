//! [`BufferPool`]: fixed-size buffers, recycled, charged to a [`MemoryBudget`], and
//! lent to I/O through a type that cannot be reused until I/O hands it back.
//!
//! Life of a buffer: [`BufferPool::try_get`] / [`BufferPool::get`] charge the budget
//! `buffer_size` bytes and hand out a [`PooledBuf`] (a recycled allocation when one
//! is cached, a new one otherwise). The owner fills it (a
//! [`crate::record::BatchBuilder`] writes straight into it). To send or receive it,
//! the owner converts it into a [`Loan`] with [`PooledBuf::lend`] or
//! [`PooledBuf::lend_for_read`]: the `PooledBuf` is consumed, so no code holds a way
//! to read, write or recycle the memory while the kernel may be using it. Only
//! [`Loan::complete`] / [`Loan::complete_read`] — called by the I/O layer when the
//! completion arrives — turn it back into a `PooledBuf`. A `Loan` dropped without
//! completion (a cancelled operation whose buffer the kernel may still touch) is
//! leaked on purpose: the memory is never freed or reused and its bytes stay charged
//! to the budget. Dropping a `PooledBuf` (or the last [`bytes::Bytes`] made by
//! [`PooledBuf::freeze`]) caches the allocation in the pool and frees its bytes in
//! the budget, waking the next waiter.
//!
//! Invariants: a cached buffer always has exactly `buffer_size` capacity and length
//! 0 (a buffer whose `Vec` was grown past its size is freed, not cached); the budget
//! bounds the bytes lent out, and because a pool allocates only when its cache is
//! empty, the memory one pool holds (lent plus cached) never exceeds its budget
//! when it has the budget to itself ([`BufferPool::trim`] frees the cache when
//! pools share one). This module has no `unsafe`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::budget::{BudgetError, MemoryBudget, Permit};

/// A pool of fixed-size buffers. Clones share the pool.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    buffer_size: usize,
    budget: MemoryBudget,
    cache: Mutex<Vec<Vec<u8>>>,
    allocated: AtomicU64,
    reused: AtomicU64,
    leaked: AtomicU64,
}

impl PoolInner {
    fn cache(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counters of a pool's life so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PoolStats {
    /// Fresh allocations.
    pub allocated: u64,
    /// Buffers served from the cache.
    pub reused: u64,
    /// Loans dropped without completion, whose memory was leaked.
    pub leaked: u64,
    /// Buffers cached now.
    pub cached: usize,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("buffer_size", &self.inner.buffer_size)
            .field("budget", &self.inner.budget)
            .field("stats", &self.stats())
            .finish()
    }
}

impl BufferPool {
    /// A pool of `buffer_size`-byte buffers drawing on `budget`.
    pub fn new(buffer_size: usize, budget: MemoryBudget) -> Self {
        BufferPool {
            inner: Arc::new(PoolInner {
                buffer_size,
                budget,
                cache: Mutex::new(Vec::new()),
                allocated: AtomicU64::new(0),
                reused: AtomicU64::new(0),
                leaked: AtomicU64::new(0),
            }),
        }
    }

    /// Allocates up to `count` buffers into the cache now (as many as the budget's
    /// free bytes allow), so the steady state starts without allocating.
    pub fn preallocate(&self, count: usize) -> usize {
        let mut made = Vec::new();
        for _ in 0..count {
            match self.try_get() {
                Ok(buf) => made.push(buf),
                Err(_) => break,
            }
        }
        made.len()
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> usize {
        self.inner.buffer_size
    }

    /// The budget buffers are charged to.
    pub fn budget(&self) -> &MemoryBudget {
        &self.inner.budget
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            allocated: self.inner.allocated.load(Ordering::Relaxed),
            reused: self.inner.reused.load(Ordering::Relaxed),
            leaked: self.inner.leaked.load(Ordering::Relaxed),
            cached: self.inner.cache().len(),
        }
    }

    /// Frees up to `count` cached buffers; returns how many it freed.
    pub fn shed(&self, count: usize) -> usize {
        let freed: Vec<Vec<u8>> = {
            let mut cache = self.inner.cache();
            let keep = cache.len().saturating_sub(count);
            cache.split_off(keep)
        };
        freed.len()
    }

    /// Frees every cached buffer.
    pub fn trim(&self) {
        self.shed(usize::MAX);
    }

    /// A buffer now, or [`BudgetError::Exhausted`] when the budget is spent.
    pub fn try_get(&self) -> Result<PooledBuf, BudgetError> {
        let permit = self.inner.budget.try_acquire(self.inner.buffer_size)?;
        Ok(self.wrap(permit))
    }

    /// A buffer, waiting (in line with other waiters on the budget) until the budget
    /// has room. Works on any executor.
    pub async fn get(&self) -> Result<PooledBuf, BudgetError> {
        let permit = self.inner.budget.acquire(self.inner.buffer_size).await?;
        Ok(self.wrap(permit))
    }

    fn wrap(&self, permit: Permit) -> PooledBuf {
        let cached = self.inner.cache().pop();
        let vec = match cached {
            Some(v) => {
                self.inner.reused.fetch_add(1, Ordering::Relaxed);
                v
            }
            None => {
                self.inner.allocated.fetch_add(1, Ordering::Relaxed);
                Vec::with_capacity(self.inner.buffer_size)
            }
        };
        PooledBuf {
            vec,
            permit: Some(permit),
            pool: self.inner.clone(),
        }
    }
}

/// A buffer from a [`BufferPool`]: a `Vec<u8>` of fixed capacity, owned by one
/// holder at a time. Dropping it returns it to the pool.
pub struct PooledBuf {
    vec: Vec<u8>,
    permit: Option<Permit>,
    pool: Arc<PoolInner>,
}

impl std::fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBuf")
            .field("len", &self.vec.len())
            .field("capacity", &self.vec.capacity())
            .finish()
    }
}

/// Writing past a buffer's fixed capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{needed} bytes do not fit in the {remaining} bytes left in the buffer")]
pub struct CapacityError {
    /// Bytes to write.
    pub needed: usize,
    /// Bytes free.
    pub remaining: usize,
}

impl PooledBuf {
    /// Bytes written.
    pub fn len(&self) -> usize {
        self.vec.len()
    }

    /// Nothing written.
    pub fn is_empty(&self) -> bool {
        self.vec.is_empty()
    }

    /// The fixed capacity.
    pub fn capacity(&self) -> usize {
        self.vec.capacity()
    }

    /// Bytes still free.
    pub fn remaining(&self) -> usize {
        self.vec.capacity() - self.vec.len()
    }

    /// Forgets the contents.
    pub fn clear(&mut self) {
        self.vec.clear();
    }

    /// Appends `data` if it fits in the fixed capacity; never reallocates.
    pub fn try_extend_from_slice(&mut self, data: &[u8]) -> Result<(), CapacityError> {
        if data.len() > self.remaining() {
            return Err(CapacityError {
                needed: data.len(),
                remaining: self.remaining(),
            });
        }
        self.vec.extend_from_slice(data);
        Ok(())
    }

    /// Lends the buffer's contents to I/O (a send). The buffer cannot be touched or
    /// recycled until [`Loan::complete`] gives it back.
    pub fn lend(self) -> Loan {
        let filled = self.vec.len();
        Loan {
            buf: Some(self),
            filled,
        }
    }

    /// Lends the buffer's free space to I/O (a receive) after its current contents.
    /// The space is zero-filled so it can be handed out as an initialized slice
    /// ([`Loan::read_target`]); [`Loan::complete_read`] keeps what the read filled.
    pub fn lend_for_read(mut self) -> Loan {
        let filled = self.vec.len();
        let capacity = self.vec.capacity();
        self.vec.resize(capacity, 0);
        Loan {
            buf: Some(self),
            filled,
        }
    }

    /// Moves `n` bytes of the buffer's charge into a permit of their own (for a smaller
    /// copy of its contents that should stay charged once the buffer goes back to the
    /// pool), or `None` when it is charged fewer than `n`. The buffer keeps the rest of
    /// its charge, and returns to the pool as before.
    pub fn split_charge(&mut self, n: usize) -> Option<Permit> {
        self.permit.as_mut()?.split_off(n)
    }

    /// Turns the buffer into shared, immutable [`Bytes`] without copying; the buffer
    /// returns to the pool when the last clone or slice of it is dropped.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(Frozen(self))
    }

    fn leak(mut self) {
        self.pool.leaked.fetch_add(1, Ordering::Relaxed);
        // The kernel may still write here: never free or reuse this memory.
        std::mem::forget(std::mem::take(&mut self.vec));
        if let Some(permit) = self.permit.take() {
            permit.leak();
        }
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let mut vec = std::mem::take(&mut self.vec);
        if vec.capacity() == self.pool.buffer_size {
            vec.clear();
            // Cache first, then free the bytes, so a woken waiter finds the buffer.
            self.pool.cache().push(vec);
        }
        drop(permit);
    }
}

impl std::ops::Deref for PooledBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.vec
    }
}

impl std::ops::DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.vec
    }
}

/// The underlying `Vec`, for writers such as [`crate::record::BatchBuilder`] that
/// respect its capacity. Growing it works but frees the buffer instead of recycling it.
impl AsRef<Vec<u8>> for PooledBuf {
    fn as_ref(&self) -> &Vec<u8> {
        &self.vec
    }
}

impl AsMut<Vec<u8>> for PooledBuf {
    fn as_mut(&mut self) -> &mut Vec<u8> {
        &mut self.vec
    }
}

struct Frozen(PooledBuf);

/// A heap buffer of its own, charged to a budget by its capacity: for contents that
/// are much smaller than a pooled buffer (a batch using a small part of its arena, or
/// compressed to one), kept charged without
/// holding a whole pooled buffer. Dropping it (or the last [`Bytes`] made by
/// [`ChargedBuf::freeze`]) frees the memory and returns the bytes to the budget.
#[derive(Debug)]
pub struct ChargedBuf {
    vec: Vec<u8>,
    /// Held for its drop, which returns the bytes to the budget.
    _permit: Permit,
}

impl ChargedBuf {
    /// An empty buffer with room for exactly `permit.size()` bytes.
    pub fn new(permit: Permit) -> Self {
        ChargedBuf {
            vec: Vec::with_capacity(permit.size()),
            _permit: permit,
        }
    }

    /// Shared, immutable [`Bytes`] without copying, charged until the last is dropped.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for ChargedBuf {
    fn as_ref(&self) -> &[u8] {
        &self.vec
    }
}

/// The underlying `Vec`, for writers that respect its capacity (growing it would use
/// memory past its charge).
impl AsRef<Vec<u8>> for ChargedBuf {
    fn as_ref(&self) -> &Vec<u8> {
        &self.vec
    }
}

impl AsMut<Vec<u8>> for ChargedBuf {
    fn as_mut(&mut self) -> &mut Vec<u8> {
        &mut self.vec
    }
}

impl AsRef<[u8]> for Frozen {
    fn as_ref(&self) -> &[u8] {
        &self.0.vec
    }
}

/// A buffer lent to I/O. It gives the I/O layer a stable address and length, and
/// nothing else: the only ways back to a usable buffer are [`Loan::complete`] and
/// [`Loan::complete_read`]. Dropped without completion, the memory is leaked
/// (never reused), because the kernel may still be reading or writing it.
#[must_use = "a dropped loan leaks its buffer; complete it when the I/O finishes"]
pub struct Loan {
    buf: Option<PooledBuf>,
    /// Bytes of content before the lent region (for reads) or to send (for writes).
    filled: usize,
}

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan")
            .field("filled", &self.filled)
            .field("len", &self.vec().len())
            .finish()
    }
}

static EMPTY: Vec<u8> = Vec::new();

impl Loan {
    fn vec(&self) -> &Vec<u8> {
        self.buf.as_ref().map_or(&EMPTY, |b| &b.vec)
    }

    /// The bytes to send (the buffer's contents when it was lent).
    pub fn as_slice(&self) -> &[u8] {
        &self.vec()[..self.filled.min(self.vec().len())]
    }

    /// Start of the buffer, stable for the loan's life (for building iovecs and
    /// io_uring submissions).
    pub fn as_ptr(&self) -> *const u8 {
        self.vec().as_ptr()
    }

    /// The region a receive may fill: after the contents, up to the capacity.
    /// Empty for a loan made by [`PooledBuf::lend`].
    pub fn read_target(&mut self) -> &mut [u8] {
        let filled = self.filled;
        match self.buf.as_mut() {
            Some(b) if filled <= b.vec.len() => &mut b.vec[filled..],
            _ => &mut [],
        }
    }

    /// I/O is done with a sent buffer: it is usable again, contents unchanged.
    pub fn complete(mut self) -> Option<PooledBuf> {
        let mut buf = self.buf.take()?;
        buf.vec.truncate(self.filled);
        Some(buf)
    }

    /// I/O is done with a receive that filled `n` bytes of [`Loan::read_target`]:
    /// the buffer comes back holding its old contents plus those bytes (`n` is
    /// clamped to the lent region).
    pub fn complete_read(mut self, n: usize) -> Option<PooledBuf> {
        let mut buf = self.buf.take()?;
        let end = self.filled.saturating_add(n).min(buf.vec.len());
        buf.vec.truncate(end);
        Some(buf)
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            buf.leak();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::budget::tests::CountingWaker;
    use super::*;
    use std::future::Future;
    use std::sync::atomic::AtomicUsize;
    use std::task::Poll;

    /// Part of a pooled buffer's charge moved to a `ChargedBuf` stays charged until
    /// the last `Bytes` of it goes; the buffer itself returns to the pool, cached,
    /// giving back only the rest.
    #[test]
    fn a_split_charge_outlives_its_pooled_buffer() {
        let pool = BufferPool::new(1024, MemoryBudget::new(1024));
        let mut a = pool.try_get().unwrap();
        assert!(a.split_charge(1025).is_none(), "more than it is charged");
        let permit = a.split_charge(100).unwrap();
        assert_eq!(pool.budget().available(), 0, "splitting frees nothing");
        drop(a);
        assert_eq!(pool.budget().available(), 924, "the rest of the charge");
        assert_eq!(pool.stats().cached, 1, "the buffer is cached");
        assert!(pool.try_get().is_err(), "100 bytes are still charged");
        let mut small = ChargedBuf::new(permit);
        assert_eq!(AsRef::<Vec<u8>>::as_ref(&small).capacity(), 100);
        small.as_mut().extend_from_slice(&[9; 100]);
        let bytes = small.freeze();
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(pool.budget().available(), 924, "a slice still holds it");
        assert_eq!(&slice[..], &[9; 10]);
        drop(slice);
        assert_eq!(pool.budget().available(), 1024);
        assert!(pool.try_get().is_ok());
        assert_eq!(pool.shed(5), 1, "one cached buffer to free");
        assert_eq!(pool.stats().cached, 0);
    }

    #[test]
    fn buffers_are_recycled_and_charged() {
        let pool = BufferPool::new(1024, MemoryBudget::new(4096));
        assert_eq!(pool.preallocate(10), 4, "budget allows four");
        assert_eq!(pool.stats().cached, 4);
        assert_eq!(pool.budget().available(), 4096);
        let mut a = pool.try_get().unwrap();
        assert_eq!(a.capacity(), 1024);
        assert!(a.is_empty());
        a.try_extend_from_slice(&[1; 1000]).unwrap();
        assert_eq!(
            a.try_extend_from_slice(&[1; 25]),
            Err(CapacityError {
                needed: 25,
                remaining: 24
            })
        );
        let ptr = a.as_ptr();
        drop(a);
        let b = pool.try_get().unwrap();
        assert!(b.is_empty(), "recycled buffers come back cleared");
        let stats = pool.stats();
        assert_eq!(stats.allocated, 4);
        assert!(stats.reused >= 2);
        // LIFO cache: the same allocation.
        assert_eq!(b.as_ptr(), ptr);
    }

    #[test]
    fn exhausted_budget_blocks_and_a_return_wakes_the_waiter() {
        let pool = BufferPool::new(100, MemoryBudget::new(200));
        let a = pool.try_get().unwrap();
        let _b = pool.try_get().unwrap();
        assert!(matches!(pool.try_get(), Err(BudgetError::Exhausted { .. })));
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut fut: std::pin::Pin<Box<dyn Future<Output = Result<PooledBuf, BudgetError>> + '_>> =
            Box::pin(pool.get());
        let poll = |f: &mut std::pin::Pin<Box<dyn Future<Output = _> + '_>>| {
            let w = std::task::Waker::from(waker.clone());
            f.as_mut().poll(&mut std::task::Context::from_waker(&w))
        };
        assert!(poll(&mut fut).is_pending());
        drop(a);
        assert_eq!(waker.0.load(Ordering::SeqCst), 1);
        let Poll::Ready(Ok(c)) = poll(&mut fut) else {
            panic!("woken with a buffer")
        };
        assert_eq!(pool.stats().allocated, 2, "the returned buffer was reused");
        drop(c);
    }

    #[test]
    fn a_loan_is_reusable_only_after_completion() {
        let pool = BufferPool::new(64, MemoryBudget::new(64));
        let mut buf = pool.try_get().unwrap();
        buf.try_extend_from_slice(b"hello").unwrap();
        let loan = buf.lend();
        assert_eq!(loan.as_slice(), b"hello");
        // While lent, the pool has nothing to give.
        assert!(pool.try_get().is_err());
        let buf = loan.complete().unwrap();
        assert_eq!(&buf[..], b"hello");
        drop(buf);
        assert!(pool.try_get().is_ok());
    }

    #[test]
    fn reads_fill_the_free_space() {
        let pool = BufferPool::new(16, MemoryBudget::unlimited());
        let mut buf = pool.try_get().unwrap();
        buf.try_extend_from_slice(b"ab").unwrap();
        let mut loan = buf.lend_for_read();
        let target = loan.read_target();
        assert_eq!(target.len(), 14);
        target[..3].copy_from_slice(b"cde");
        let buf = loan.complete_read(3).unwrap();
        assert_eq!(&buf[..], b"abcde");
        // An over-reported length is clamped to the lent region.
        let buf = buf.lend_for_read().complete_read(1000).unwrap();
        assert_eq!(buf.len(), 16);
    }

    #[test]
    fn a_dropped_loan_is_leaked_not_reused() {
        let pool = BufferPool::new(32, MemoryBudget::new(64));
        let buf = pool.try_get().unwrap();
        let loan = buf.lend();
        drop(loan);
        let stats = pool.stats();
        assert_eq!(stats.leaked, 1);
        assert_eq!(stats.cached, 0, "never cached");
        assert_eq!(pool.budget().available(), 32, "its bytes stay charged");
    }

    #[test]
    fn frozen_buffers_return_when_the_last_slice_drops() {
        let pool = BufferPool::new(32, MemoryBudget::new(32));
        let mut buf = pool.try_get().unwrap();
        buf.try_extend_from_slice(b"payload").unwrap();
        let bytes = buf.freeze();
        let slice = bytes.slice(3..);
        drop(bytes);
        assert!(pool.try_get().is_err(), "still referenced");
        assert_eq!(&slice[..], b"load");
        drop(slice);
        assert_eq!(pool.stats().cached, 1);
        assert!(pool.try_get().is_ok());
    }

    #[test]
    fn grown_buffers_are_freed_not_cached() {
        let pool = BufferPool::new(8, MemoryBudget::unlimited());
        let mut buf = pool.try_get().unwrap();
        buf.as_mut().extend_from_slice(&[0; 100]);
        drop(buf);
        assert_eq!(pool.stats().cached, 0);
        pool.preallocate(2);
        assert_eq!(pool.stats().cached, 2);
        pool.trim();
        assert_eq!(pool.stats().cached, 0);
    }
}
