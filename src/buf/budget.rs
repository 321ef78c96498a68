//! [`MemoryBudget`]: a byte budget shared by the pools of one client, with
//! backpressure when it is spent.
//!
//! [`MemoryBudget::try_acquire`] answers at once; [`MemoryBudget::acquire`] returns a
//! future that completes when enough bytes come back. Waiters are served strictly in
//! arrival order (a large request is not starved by a stream of small ones), and
//! `try_acquire` does not jump the queue. The future is runtime-agnostic: it keeps
//! its `Waker` in a queue under the budget's mutex and is woken by whichever
//! [`Permit`] drop frees the bytes — no tokio, no I/O, no timers here.
//!
//! [`release_together`] holds back the releases a thread makes while it runs a closure
//! and makes them at its end, one per budget: a task returning many buffers at once (a
//! produce response acknowledging many batches) then wakes a waiter once for all of
//! them, instead of once per buffer, each wake-up taking one buffer's worth and
//! sleeping again.
//!
//! Invariants: `available + Σ outstanding permits + Σ granted-but-unclaimed
//! waiters + Σ releases held back == capacity`; a dropped `Acquire` future gives back
//! anything granted to it; a request larger than the whole capacity fails at once
//! rather than waiting forever.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Why bytes could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// Not enough bytes are free now (only from `try_acquire`).
    #[error("memory budget exhausted: {requested} bytes requested, {available} available")]
    Exhausted {
        /// Bytes asked for.
        requested: usize,
        /// Bytes free at the time.
        available: usize,
    },
    /// The request exceeds the whole budget and could never be granted.
    #[error("{requested} bytes requested from a budget of {capacity}")]
    ExceedsCapacity {
        /// Bytes asked for.
        requested: usize,
        /// The budget's capacity.
        capacity: usize,
    },
}

/// A byte budget with FIFO backpressure. Clones share the budget.
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    state: Mutex<State>,
}

struct State {
    available: usize,
    next_id: u64,
    waiters: VecDeque<Waiter>,
}

struct Waiter {
    id: u64,
    need: usize,
    granted: bool,
    waker: Option<Waker>,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryBudget")
            .field("capacity", &self.inner.capacity)
            .field("available", &state.available)
            .field("waiters", &state.waiters.len())
            .finish()
    }
}

impl MemoryBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        MemoryBudget {
            inner: Arc::new(Inner {
                capacity,
                state: Mutex::new(State {
                    available: capacity,
                    next_id: 0,
                    waiters: VecDeque::new(),
                }),
            }),
        }
    }

    /// A budget that never runs out (for tests and unbounded pools).
    pub fn unlimited() -> Self {
        MemoryBudget::new(usize::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock; recover the state if one did.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Total bytes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Bytes free now.
    pub fn available(&self) -> usize {
        self.lock().available
    }

    /// Futures waiting for bytes.
    pub fn waiting(&self) -> usize {
        self.lock().waiters.iter().filter(|w| !w.granted).count()
    }

    /// Takes `n` bytes now, or fails with [`BudgetError::Exhausted`] when they are not
    /// free or earlier waiters are queued for them.
    pub fn try_acquire(&self, n: usize) -> Result<Permit, BudgetError> {
        self.check_capacity(n)?;
        let mut state = self.lock();
        let queued = state.waiters.iter().any(|w| !w.granted);
        if queued || state.available < n {
            return Err(BudgetError::Exhausted {
                requested: n,
                available: state.available,
            });
        }
        state.available -= n;
        Ok(Permit {
            budget: self.clone(),
            size: n,
        })
    }

    /// Takes `n` bytes, waiting in line until they are free.
    pub fn acquire(&self, n: usize) -> Acquire {
        Acquire {
            budget: self.clone(),
            need: n,
            id: None,
            done: false,
        }
    }

    fn check_capacity(&self, n: usize) -> Result<(), BudgetError> {
        if n > self.inner.capacity {
            return Err(BudgetError::ExceedsCapacity {
                requested: n,
                capacity: self.inner.capacity,
            });
        }
        Ok(())
    }

    /// Returns `n` bytes and hands them to waiters in order (at the end of the
    /// enclosing [`release_together`], if any).
    fn release(&self, n: usize) {
        if self.hold_back(n) {
            return;
        }
        self.credit(n).into_iter().for_each(Waker::wake);
    }

    /// Adds `n` free bytes and grants them to waiters in order; returns the wakers to
    /// call (the lock released).
    fn credit(&self, n: usize) -> Vec<Waker> {
        let mut state = self.lock();
        state.available += n;
        grant_waiters(&mut state)
    }

    /// Bytes this thread has returned to this budget and holds back until its
    /// [`release_together`] ends (0 outside one).
    pub fn held_back(&self) -> usize {
        HELD.try_with(|held| {
            held.try_borrow().ok().and_then(|h| {
                h.as_ref().map(|list| {
                    list.iter()
                        .filter(|(b, _)| Arc::ptr_eq(&b.inner, &self.inner))
                        .map(|(_, bytes)| *bytes)
                        .sum()
                })
            })
        })
        .ok()
        .flatten()
        .unwrap_or(0)
    }

    /// Adds `n` bytes to this thread's releases held back for this budget, if a
    /// [`release_together`] is running on it.
    fn hold_back(&self, n: usize) -> bool {
        HELD.try_with(|held| {
            let Ok(mut held) = held.try_borrow_mut() else {
                return false;
            };
            let Some(list) = held.as_mut() else {
                return false;
            };
            match list
                .iter_mut()
                .find(|(b, _)| Arc::ptr_eq(&b.inner, &self.inner))
            {
                Some((_, bytes)) => *bytes += n,
                None => list.push((self.clone(), n)),
            }
            true
        })
        .unwrap_or(false)
    }
}

thread_local! {
    /// The releases held back on this thread by a running [`release_together`]: each
    /// budget with its bytes. `None` when none runs.
    static HELD: RefCell<Option<Vec<(MemoryBudget, usize)>>> = const { RefCell::new(None) };
}

/// Runs `f`, holding back the budget releases this thread makes meanwhile (buffers and
/// permits dropped) and making them when it ends, one per budget, so that a waiter is
/// woken once for all of them. Nested calls join the outermost. The bytes are released
/// however `f` ends, a panic included. `f` must not wait for the bytes it returns:
/// they are not free until it ends.
pub fn release_together<R>(f: impl FnOnce() -> R) -> R {
    let outermost = HELD.with(|held| {
        let mut held = held.borrow_mut();
        let outermost = held.is_none();
        if outermost {
            *held = Some(Vec::new());
        }
        outermost
    });
    // Made only by the outermost call: a guard made and dropped by a nested one (as
    // `then_some` would) would release everything held so far.
    let _release = if outermost { Some(ReleaseHeld) } else { None };
    f()
}

/// Makes the releases held back, when the outermost [`release_together`] ends.
struct ReleaseHeld;

impl Drop for ReleaseHeld {
    fn drop(&mut self) {
        let held = HELD
            .try_with(|held| held.borrow_mut().take())
            .ok()
            .flatten()
            .unwrap_or_default();
        // Every budget gets its bytes back before any waiter is woken: a waker that
        // panicked could not keep the others' bytes from them.
        let wake: Vec<Waker> = held
            .into_iter()
            .flat_map(|(budget, bytes)| budget.credit(bytes))
            .collect();
        // Each waiter granted bytes is woken, even if one waker panics (its panic goes
        // on once the others are woken).
        let mut panicked = None;
        for w in wake {
            let woken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
            if let Err(p) = woken {
                panicked.get_or_insert(p);
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    }
}

/// Grants bytes to waiters at the head of the queue while they fit, returning the
/// wakers to call once the lock is released.
fn grant_waiters(state: &mut State) -> Vec<Waker> {
    let mut wake = Vec::new();
    for i in 0..state.waiters.len() {
        if state.waiters[i].granted {
            continue;
        }
        let need = state.waiters[i].need;
        if need > state.available {
            break;
        }
        state.available -= need;
        let w = &mut state.waiters[i];
        w.granted = true;
        if let Some(waker) = w.waker.take() {
            wake.push(waker);
        }
    }
    wake
}

/// Bytes held from a [`MemoryBudget`]; dropping it gives them back.
#[derive(Debug)]
pub struct Permit {
    budget: MemoryBudget,
    size: usize,
}

impl Permit {
    /// Bytes held.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The budget the bytes came from.
    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// Keeps `keep` bytes and returns the rest to the budget now.
    pub fn shrink_to(&mut self, keep: usize) {
        if keep < self.size {
            let give = self.size - keep;
            self.size = keep;
            self.budget.release(give);
        }
    }

    /// Moves `n` of this permit's bytes into a permit of their own, or `None` when it
    /// holds fewer than `n`.
    pub fn split_off(&mut self, n: usize) -> Option<Permit> {
        if n > self.size {
            return None;
        }
        self.size -= n;
        Some(Permit {
            budget: self.budget.clone(),
            size: n,
        })
    }

    /// Adds `other`'s bytes to this permit, when both come from the same budget;
    /// otherwise gives `other` back untouched.
    pub fn merge(&mut self, mut other: Permit) -> Result<(), Permit> {
        if !Arc::ptr_eq(&self.budget.inner, &other.budget.inner) {
            return Err(other);
        }
        self.size += other.size;
        other.size = 0;
        Ok(())
    }

    /// Forgets the bytes: they stay charged to the budget for good. For memory that
    /// can never be reused (a buffer the kernel may still write to).
    pub(crate) fn leak(mut self) {
        self.size = 0;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.size > 0 {
            self.budget.release(self.size);
        }
    }
}

/// Future of [`MemoryBudget::acquire`]. Dropping it before completion leaves the
/// queue (and returns bytes already granted to it).
#[must_use = "futures do nothing unless polled"]
pub struct Acquire {
    budget: MemoryBudget,
    need: usize,
    id: Option<u64>,
    done: bool,
}

impl std::fmt::Debug for Acquire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acquire")
            .field("need", &self.need)
            .field("queued", &self.id.is_some())
            .finish()
    }
}

impl Future for Acquire {
    type Output = Result<Permit, BudgetError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            // Polled after completion: nothing more to give.
            return Poll::Pending;
        }
        if let Err(e) = this.budget.check_capacity(this.need) {
            this.done = true;
            return Poll::Ready(Err(e));
        }
        let mut state = this.budget.lock();
        match this.id {
            None => {
                let queued = state.waiters.iter().any(|w| !w.granted);
                if !queued && state.available >= this.need {
                    state.available -= this.need;
                    drop(state);
                    this.done = true;
                    return Poll::Ready(Ok(Permit {
                        budget: this.budget.clone(),
                        size: this.need,
                    }));
                }
                let id = state.next_id;
                state.next_id += 1;
                state.waiters.push_back(Waiter {
                    id,
                    need: this.need,
                    granted: false,
                    waker: Some(cx.waker().clone()),
                });
                this.id = Some(id);
                Poll::Pending
            }
            Some(id) => {
                let Some(pos) = state.waiters.iter().position(|w| w.id == id) else {
                    // Cannot happen: only this future removes its entry.
                    this.done = true;
                    return Poll::Ready(Err(BudgetError::Exhausted {
                        requested: this.need,
                        available: state.available,
                    }));
                };
                if state.waiters[pos].granted {
                    state.waiters.remove(pos);
                    drop(state);
                    this.id = None;
                    this.done = true;
                    return Poll::Ready(Ok(Permit {
                        budget: this.budget.clone(),
                        size: this.need,
                    }));
                }
                let w = &mut state.waiters[pos];
                match &mut w.waker {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let mut state = self.budget.lock();
        let Some(pos) = state.waiters.iter().position(|w| w.id == id) else {
            return;
        };
        let Some(w) = state.waiters.remove(pos) else {
            return;
        };
        if w.granted {
            state.available += w.need;
        }
        // Leaving the head of the line may let the next waiters through.
        let wake = grant_waiters(&mut state);
        drop(state);
        wake.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    /// A waker that counts its wake-ups.
    pub(crate) struct CountingWaker(pub AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn poll_once<F: Future + Unpin>(
        f: &mut F,
        waker: &Arc<CountingWaker>,
    ) -> Poll<F::Output> {
        let waker = Waker::from(waker.clone());
        Pin::new(f).poll(&mut Context::from_waker(&waker))
    }

    /// Permits dropped inside `release_together` go back at its end, together: the
    /// waiter is woken once, with everything they held free by then, and a nested
    /// call joins the outermost.
    #[test]
    fn releases_held_back_go_back_together_at_the_end() {
        let b = MemoryBudget::new(100);
        let other = MemoryBudget::new(10);
        let parts: Vec<Permit> = (0..4).map(|_| b.try_acquire(25).unwrap()).collect();
        let foreign = other.try_acquire(10).unwrap();
        let w = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut waiting = b.acquire(25);
        assert!(poll_once(&mut waiting, &w).is_pending());
        let mut parts = parts.into_iter();
        release_together(|| {
            drop(parts.next());
            release_together(|| drop(parts.next()));
            drop(foreign);
            assert_eq!(b.available(), 0, "held back while it runs");
            assert_eq!((b.held_back(), other.held_back()), (50, 10));
            assert_eq!(other.available(), 0);
            assert_eq!(w.0.load(Ordering::SeqCst), 0, "nobody woken yet");
        });
        assert_eq!(w.0.load(Ordering::SeqCst), 1, "woken once, at the end");
        assert_eq!(other.available(), 10, "each budget gets its own bytes");
        assert_eq!(b.available(), 25, "50 returned, 25 granted to the waiter");
        let Poll::Ready(Ok(granted)) = poll_once(&mut waiting, &w) else {
            panic!("the waiter was granted its bytes");
        };
        drop((granted, parts));
        assert_eq!(
            b.available(),
            100,
            "outside the scope, releases are at once"
        );
    }

    /// A panic inside `release_together` still returns what was held back.
    #[test]
    fn releases_held_back_go_back_when_the_closure_panics() {
        let b = MemoryBudget::new(10);
        let p = b.try_acquire(10).unwrap();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            release_together(|| {
                drop(p);
                panic!("in the middle of a turn");
            })
        }));
        assert!(outcome.is_err());
        assert_eq!(b.available(), 10);
        // The thread is out of the scope: the next release is at once.
        drop(b.try_acquire(10).unwrap());
        assert_eq!(b.available(), 10);
    }

    #[test]
    fn merged_permits_release_together() {
        let b = MemoryBudget::new(100);
        let mut p = b.try_acquire(30).unwrap();
        p.merge(b.try_acquire(20).unwrap()).unwrap();
        assert_eq!((p.size(), b.available()), (50, 50));
        let other = MemoryBudget::new(10);
        let foreign = p.merge(other.try_acquire(5).unwrap()).unwrap_err();
        assert_eq!((p.size(), foreign.size()), (50, 5));
        drop(p);
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn try_acquire_and_release() {
        let b = MemoryBudget::new(100);
        let p1 = b.try_acquire(60).unwrap();
        assert_eq!(b.available(), 40);
        assert_eq!(
            b.try_acquire(50).unwrap_err(),
            BudgetError::Exhausted {
                requested: 50,
                available: 40
            }
        );
        assert_eq!(
            b.try_acquire(101).unwrap_err(),
            BudgetError::ExceedsCapacity {
                requested: 101,
                capacity: 100
            }
        );
        drop(p1);
        assert_eq!(b.available(), 100);
        let mut p = b.try_acquire(100).unwrap();
        p.shrink_to(30);
        assert_eq!(b.available(), 70);
        drop(p);
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn waiters_are_served_in_order_and_woken() {
        let b = MemoryBudget::new(100);
        let held = b.try_acquire(100).unwrap();
        let w1 = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let w2 = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut big = b.acquire(80);
        let mut small = b.acquire(10);
        assert!(poll_once(&mut big, &w1).is_pending());
        assert!(poll_once(&mut small, &w2).is_pending());
        assert_eq!(b.waiting(), 2);
        drop(held);
        assert_eq!(w1.0.load(Ordering::SeqCst), 1);
        assert_eq!(w2.0.load(Ordering::SeqCst), 1);
        assert_eq!(b.available(), 10, "granted in order, the rest free");
        let Poll::Ready(Ok(p_big)) = poll_once(&mut big, &w1) else {
            panic!("granted")
        };
        let Poll::Ready(Ok(p_small)) = poll_once(&mut small, &w2) else {
            panic!("granted")
        };
        assert_eq!(b.available(), 10);
        drop((p_big, p_small));
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn fifo_blocks_small_requests_behind_a_large_one() {
        let b = MemoryBudget::new(100);
        let held = b.try_acquire(50).unwrap();
        let w = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut big = b.acquire(80);
        assert!(poll_once(&mut big, &w).is_pending());
        // 50 bytes are free, but the large waiter is first in line.
        assert!(matches!(
            b.try_acquire(10),
            Err(BudgetError::Exhausted { .. })
        ));
        let mut small = b.acquire(10);
        assert!(poll_once(&mut small, &w).is_pending());
        // Cancelling the large waiter lets the small one through.
        drop(big);
        assert!(matches!(poll_once(&mut small, &w), Poll::Ready(Ok(_))));
        drop(held);
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn dropping_a_granted_future_returns_its_bytes() {
        let b = MemoryBudget::new(10);
        let held = b.try_acquire(10).unwrap();
        let w = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut f = b.acquire(10);
        assert!(poll_once(&mut f, &w).is_pending());
        drop(held);
        assert_eq!(b.available(), 0, "granted to the waiter");
        drop(f);
        assert_eq!(b.available(), 10);
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn oversized_acquire_fails_at_once() {
        let b = MemoryBudget::new(10);
        let w = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut f = b.acquire(11);
        assert!(matches!(
            poll_once(&mut f, &w),
            Poll::Ready(Err(BudgetError::ExceedsCapacity { .. }))
        ));
    }

    #[test]
    fn threads_contending_never_exceed_the_budget() {
        let b = MemoryBudget::new(1000);
        let in_use = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let b = b.clone();
                let in_use = in_use.clone();
                std::thread::spawn(move || {
                    let w = Arc::new(CountingWaker(AtomicUsize::new(0)));
                    for i in 0..2000 {
                        let n = 100 + (i * 37 + t * 11) % 300;
                        let mut f = b.acquire(n);
                        let permit = loop {
                            match poll_once(&mut f, &w) {
                                Poll::Ready(p) => break p.unwrap(),
                                Poll::Pending => std::thread::yield_now(),
                            }
                        };
                        let now = in_use.fetch_add(n, Ordering::SeqCst) + n;
                        assert!(now <= 1000, "{now} bytes in use");
                        in_use.fetch_sub(n, Ordering::SeqCst);
                        drop(permit);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(b.available(), 1000);
    }
}
