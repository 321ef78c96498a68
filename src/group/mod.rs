//! Consumer groups: [`GroupConsumer`], a member of a group reading every partition
//! the group assigns it as one stream, with rebalance callbacks and commits tied to the
//! member's generation.
//!
//! - `consumer`: the public handle (records, commits, positions, close).
//! - `builder`: [`GroupConsumerBuilder`], a member with settings of its own over a
//!   shared client.
//! - `driver`: the task on a worker that runs the member engine
//!   (`engine::group`): coordinator, heartbeats, metadata for the leader.
//! - `offsets`: OffsetFetch for assigned partitions and commits with the generation.
//! - `protocol`: the classic consumer protocol's embedded formats, byte-compatible with
//!   the Java client's `ConsumerProtocol`, and the StickyAssignor's user data.
//! - `assignor`: the four client-side assignors (`range`, `roundrobin`, `sticky`,
//!   `cooperative-sticky`) as pure, deterministic functions.

pub(crate) mod assignor;
mod builder;
mod consumer;
mod driver;
mod offsets;
pub(crate) mod protocol;

pub use crate::engine::group::{GroupError, GroupProtocolErrorText};
pub use builder::GroupConsumerBuilder;
pub use consumer::{
    CommitFuture, GroupBatch, GroupConsumer, ListenerFuture, Pattern, RebalanceListener, Topics,
};
pub use offsets::OffsetAndMetadata;

use std::fmt;

/// One partition of one topic. Ordered by topic, then partition, which is the order
/// every assignor and encoder here uses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A partition of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.topic, self.partition)
    }
}
