//! Consumer groups (issue 15), the sans-IO pieces built so far.
//!
//! - [`protocol`]: the classic consumer protocol's embedded formats (the bytes inside
//!   JoinGroup's protocol metadata and SyncGroup's assignments), byte-compatible with
//!   the Java client's `ConsumerProtocol`, and the StickyAssignor's user data.
//! - [`assignor`]: the four client-side assignors (`range`, `roundrobin`, `sticky`,
//!   `cooperative-sticky`) as pure, deterministic functions.
//!
//! The group consumer itself (join/sync/heartbeat state machine, offsets, the public
//! handle) is not built yet, so everything here is crate-private.

// Nothing outside the tests calls this yet: the group member engine comes next.
#![allow(dead_code)]

pub(crate) mod assignor;
pub(crate) mod protocol;

use std::fmt;

/// One partition of one topic. Ordered by topic, then partition, which is the order
/// every assignor and encoder here uses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TopicPartition {
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
