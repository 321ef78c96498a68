//! The producer's engines, sans-IO: per-partition batching and idempotence rules
//! ([`partition`]), and one sink per broker ([`sink`]) that drains the partitions that
//! broker leads into Produce requests and applies the answers. The producer's drivers
//! (`crate::producer`) run each sink on the worker that owns its broker's connection.
//!
//! - [`arenas`]: batch arenas in size classes sharing `buffer.memory`.
//! - [`completion`]: the completion a batch's records share with their futures.
//! - [`failures`]: the producer's tally of batches that failed for good (for flush).
//! - [`pace`]: whether a sink's broker is behind, so that lingering batches wait for
//!   its next answer.
//! - [`queued`]: the count of records not settled yet, and its limit
//!   (`queue.buffering.max.messages`).
//! - [`request`]: the hand-encoded Produce request over pre-encoded batches.
//! - [`wake`]: when an appending thread must wake a partition's sink.

pub(crate) mod arenas;
pub(crate) mod completion;
pub(crate) mod failures;
pub(crate) mod pace;
pub(crate) mod partition;
pub(crate) mod queued;
pub(crate) mod request;
pub(crate) mod sink;
pub(crate) mod wake;
