//! Buffers with explicit ownership: fixed-size arenas from a [`BufferPool`],
//! recycled rather than reallocated, charged to a [`MemoryBudget`] that applies
//! backpressure when spent, and lent to I/O as a [`Loan`] that cannot be reused
//! until the I/O layer hands it back.
//!
//! This layer does no I/O and has no runtime: waiting for budget is a plain
//! `Future` woken by whoever returns bytes, so it works under the io_uring workers,
//! tokio, or a blocking `block_on`. Producer batches are written into [`PooledBuf`]s
//! by [`crate::record::BatchBuilder`] (a small compressed batch moves to a
//! [`ChargedBuf`] of its own size on seal), and
//! fetch responses are read into them and shared as `bytes::Bytes` via
//! [`PooledBuf::freeze`].
//!
//! Invariants: see [`pool`] and [`budget`]. No `unsafe` is needed here: buffers are
//! `Vec<u8>`s whose capacity is never exceeded, and read targets are initialized
//! slices.

pub mod budget;
pub mod pool;

pub use budget::{BudgetError, MemoryBudget, Permit, release_together};
pub use pool::{BufferPool, ChargedBuf, PooledBuf};
