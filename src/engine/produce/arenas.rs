//! Batch arenas in a few sizes, so that many partitions with open batches share
//! `buffer.memory` instead of each holding a whole `batch.size`.
//!
//! A partition's batches start in the smallest class. A batch sealed because it was
//! full moves its partition up one class for the next batch (up to `batch.size`); one
//! sealed by linger while using less than a quarter of its arena moves it down. A busy
//! partition reaches full-size arenas within a few batches; a thousand partitions with
//! a trickle each take a small arena apiece. Records are still written once, in place:
//! a batch never moves to a bigger arena, the next one gets it. A batch sealed using at
//! most half of its arena moves, whole, to a buffer of its own size (see the
//! partition's `Arena::smaller_home`), and the arena is free for the next.
//!
//! Every class charges the one [`MemoryBudget`] by the size of the buffers it lends.
//! Freed buffers are cached per class (and not charged); when a class must allocate a
//! fresh buffer and the caches would take what the pools hold past the budget, the other
//! classes' caches are freed, so memory held stays within the budget plus one class's
//! cache. A batch moved out of its arena (a small or compressed one) keeps part of the
//! arena's charge while the arena is cached; cached arenas past the budget are then freed
//! ([`ArenaPools::shed_past_budget`]).

use crate::buf::{BudgetError, BufferPool, MemoryBudget, PooledBuf};

/// The smallest arena (and the step between classes: each is 4× the one before).
const SMALLEST: usize = 16 * 1024;
const STEP: usize = 4;

/// Pools of batch arenas, one per size class, sharing one budget.
#[derive(Clone)]
pub(crate) struct ArenaPools {
    classes: Vec<BufferPool>,
}

impl std::fmt::Debug for ArenaPools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaPools")
            .field(
                "sizes",
                &self
                    .classes
                    .iter()
                    .map(BufferPool::buffer_size)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ArenaPools {
    /// Classes from 16 KiB up to `batch_size` (the last class is exactly `batch_size`),
    /// all charged to `budget`.
    pub fn new(batch_size: usize, budget: MemoryBudget) -> Self {
        let batch_size = batch_size.max(1);
        let mut sizes = Vec::new();
        let mut size = SMALLEST;
        while size < batch_size {
            sizes.push(size);
            size *= STEP;
        }
        sizes.push(batch_size);
        ArenaPools {
            classes: sizes
                .into_iter()
                .map(|s| BufferPool::new(s, budget.clone()))
                .collect(),
        }
    }

    /// The largest class: `batch.size`.
    pub fn largest(&self) -> usize {
        self.classes.len() - 1
    }

    /// The arena size of `class`.
    pub fn size(&self, class: usize) -> usize {
        self.classes[class.min(self.largest())].buffer_size()
    }

    /// The smallest class at or above `class` whose arenas hold `needed` bytes, if any.
    pub fn class_for(&self, class: usize, needed: usize) -> Option<usize> {
        (class.min(self.largest())..self.classes.len()).find(|&c| self.size(c) >= needed)
    }

    /// An arena of `class` now, or [`BudgetError::Exhausted`].
    pub fn try_get(&self, class: usize) -> Result<PooledBuf, BudgetError> {
        self.make_room(class);
        self.classes[class.min(self.largest())].try_get()
    }

    /// Bytes of the budget in use (arenas lent and cached), not counting what this thread
    /// has returned but holds back until its `release_together` ends: those arenas are
    /// cached already, and counted as used they would be counted twice.
    pub fn budget_used(&self) -> usize {
        self.classes.first().map_or(0, |c| {
            let budget = c.budget();
            (budget.capacity() - budget.available()).saturating_sub(budget.held_back())
        })
    }

    /// An arena of `class`, waiting for budget.
    pub async fn get(&self, class: usize) -> Result<PooledBuf, BudgetError> {
        self.make_room(class);
        self.classes[class.min(self.largest())].get().await
    }

    /// Frees cached arenas, the largest first, while what the pools hold (lent and
    /// cached) and what else is charged to the budget come to more than the budget.
    /// For after an arena went back to its pool while its batch stays charged (see
    /// `Arena::smaller_home`): cached, it is memory the budget no longer counts.
    pub fn shed_past_budget(&self) {
        let Some(capacity) = self.classes.first().map(|c| c.budget().capacity()) else {
            return;
        };
        let charged = self.budget_used();
        let mut cached = self.cached_bytes();
        for pool in self.classes.iter().rev() {
            let over = (charged + cached).saturating_sub(capacity);
            if over == 0 {
                return;
            }
            let size = pool.buffer_size();
            cached -= pool.shed(over.div_ceil(size)) * size;
        }
    }

    /// Bytes of the arenas cached in every class (not charged to the budget).
    fn cached_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|p| p.stats().cached * p.buffer_size())
            .sum()
    }

    /// Before `class` allocates a fresh buffer (it has none cached): frees the other
    /// classes' cached buffers if keeping them would take what the pools hold (lent plus
    /// cached) past the budget. While memory is plentiful the caches stay, so partitions
    /// of different classes don't make each other reallocate.
    fn make_room(&self, class: usize) {
        let class = class.min(self.largest());
        if self.classes[class].stats().cached > 0 {
            return;
        }
        let capacity = self.classes[class].budget().capacity();
        if self.budget_used() + self.cached_bytes() + self.size(class) > capacity {
            for (c, pool) in self.classes.iter().enumerate() {
                if c != class {
                    pool.trim();
                }
            }
        }
    }
}

/// The class for a partition's next batch after one was sealed: up when it filled its
/// arena, down when linger sealed it at under a quarter full, else the same.
pub(crate) fn next_class(
    class: usize,
    largest: usize,
    filled: bool,
    used: usize,
    arena: usize,
) -> usize {
    if filled {
        (class + 1).min(largest)
    } else if used < arena / 4 {
        class.saturating_sub(1)
    } else {
        class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_step_up_to_the_batch_size() {
        let pools = ArenaPools::new(1_000_000, MemoryBudget::new(32 << 20));
        let sizes: Vec<usize> = (0..=pools.largest()).map(|c| pools.size(c)).collect();
        assert_eq!(sizes, vec![16 << 10, 64 << 10, 256 << 10, 1_000_000]);
        assert_eq!(pools.class_for(0, 100), Some(0));
        assert_eq!(pools.class_for(0, 20_000), Some(1));
        assert_eq!(pools.class_for(2, 100), Some(2));
        assert_eq!(pools.class_for(0, 1_000_001), None);
        // A batch size below the smallest class is the only class.
        let tiny = ArenaPools::new(4096, MemoryBudget::new(1 << 20));
        assert_eq!(tiny.largest(), 0);
        assert_eq!(tiny.size(0), 4096);
    }

    #[test]
    fn many_small_arenas_fit_where_few_big_ones_did() {
        // 32 MiB held 32 arenas of 1 MB; it holds 2048 of the smallest class.
        let pools = ArenaPools::new(1 << 20, MemoryBudget::new(32 << 20));
        let held: Vec<_> = (0..2048).map(|_| pools.try_get(0).unwrap()).collect();
        assert!(pools.try_get(0).is_err());
        drop(held);
        // 32 MiB of small buffers are cached now: a big one frees that cache first.
        let big = pools.try_get(pools.largest()).unwrap();
        assert_eq!(big.capacity(), 1 << 20);
        assert_eq!(pools.classes[0].stats().cached, 0);
        // With room to spare, caches stay: a fresh buffer of another class leaves the
        // cached small one alone.
        drop(pools.try_get(0).unwrap());
        assert_eq!(pools.classes[1].stats().cached, 0);
        let _medium = pools.try_get(1).unwrap();
        assert_eq!(pools.classes[0].stats().cached, 1);
        drop(big);
    }

    /// An arena cached while part of its charge lives on (a compressed batch moved out
    /// of it) is freed when the budget counts no room for it.
    #[test]
    fn cached_arenas_past_the_budget_are_shed() {
        let arena = 16 << 10;
        let pools = ArenaPools::new(arena, MemoryBudget::new(2 * arena));
        let mut a = pools.try_get(0).unwrap();
        let b = pools.try_get(0).unwrap();
        let moved = a.split_charge(100).unwrap();
        drop(a);
        assert_eq!(pools.classes[0].stats().cached, 1);
        pools.shed_past_budget();
        assert_eq!(
            pools.classes[0].stats().cached,
            0,
            "b, the moved bytes and a cached arena would be past the budget"
        );
        drop(b);
        pools.shed_past_budget();
        assert_eq!(pools.classes[0].stats().cached, 1, "room for it now");
        drop(moved);
    }

    #[test]
    fn partitions_move_between_classes() {
        assert_eq!(next_class(0, 3, true, 16 << 10, 16 << 10), 1);
        assert_eq!(next_class(3, 3, true, 1 << 20, 1 << 20), 3);
        assert_eq!(next_class(2, 3, false, 1000, 256 << 10), 1);
        assert_eq!(next_class(0, 3, false, 10, 16 << 10), 0);
        assert_eq!(next_class(2, 3, false, 100 << 10, 256 << 10), 2);
    }
}
