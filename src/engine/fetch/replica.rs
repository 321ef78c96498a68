//! Which replica a partition is fetched from (KIP-392, follower fetching), sans-IO.
//!
//! A consumer that names its rack (`client.rack`, sent as the Fetch's `rack_id`, v11+)
//! may be told by the leader to read from a replica in that rack instead
//! (`preferred_read_replica`; the leader then answers without records). As the Java
//! client does (`SubscriptionState`'s preferred read replica and
//! `AbstractFetch.selectReadReplica`):
//! - the replica is remembered for `metadata.max.age.ms` from when it was first named;
//!   after that the partition is fetched from its leader again, which may name it anew;
//! - a replica metadata does not list yet is not used: the partition stays on its leader
//!   while metadata is refreshed;
//! - a fetch from the replica that fails (the connection broke, or an answer that means
//!   the replica can't serve this position: NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE,
//!   FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE (the replica is
//!   behind the leader's high watermark), OFFSET_OUT_OF_RANGE, and the other stale
//!   metadata codes) forgets it and goes back to the leader. A follower's
//!   OFFSET_OUT_OF_RANGE never resets the position: the leader's answer at the same
//!   position decides (its own OFFSET_OUT_OF_RANGE or `diverging_epoch`).
//!
//! The position travels with the partition: switching between leader and replica never
//! moves it, so nothing is read twice or skipped. A replica serves only what it has up to
//! its own high watermark.

use std::time::{Duration, Instant};

use crate::protocol::{KafkaCode, is_stale_metadata};

/// The replica a partition is read from instead of its leader, until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadReplica {
    /// Its broker id.
    pub broker: i32,
    /// When the leader is asked again (`metadata.max.age.ms` after it was named).
    pub until: Instant,
}

impl ReadReplica {
    /// Whether it is still to be used at `now`.
    pub fn is_current(&self, now: Instant) -> bool {
        now < self.until
    }
}

/// Where a partition's next fetches go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// To its leader.
    Leader,
    /// To the preferred read replica, this broker.
    Replica(i32),
    /// To its leader for now: the preferred replica, this broker, is not in metadata yet
    /// (refresh it).
    LeaderUntilKnown(i32),
}

/// Where a partition led by `leader`, with read replica `preferred`, is fetched from at
/// `now`; `known` says whether metadata lists a broker.
pub(crate) fn route(
    preferred: Option<ReadReplica>,
    leader: i32,
    now: Instant,
    known: impl Fn(i32) -> bool,
) -> Route {
    match preferred {
        Some(r) if r.is_current(now) && r.broker != leader => {
            if known(r.broker) {
                Route::Replica(r.broker)
            } else {
                Route::LeaderUntilKnown(r.broker)
            }
        }
        _ => Route::Leader,
    }
}

/// The read replica after an answer from broker `served_by` that named
/// `preferred_read_replica` (-1: none): a newly named replica is remembered for
/// `max_age` from `now`; the one already remembered keeps its expiry (the Java client
/// does not extend it either); none named, or the answering broker itself, changes
/// nothing.
pub(crate) fn after_answer(
    current: Option<ReadReplica>,
    served_by: i32,
    preferred_read_replica: i32,
    now: Instant,
    max_age: Duration,
) -> Option<ReadReplica> {
    if preferred_read_replica < 0 || preferred_read_replica == served_by {
        return current;
    }
    match current {
        Some(r) if r.broker == preferred_read_replica && r.is_current(now) => Some(r),
        _ => Some(ReadReplica {
            broker: preferred_read_replica,
            until: now + max_age,
        }),
    }
}

/// Whether a read replica's answer `code` sends the partition back to its leader.
pub(crate) fn falls_back(code: KafkaCode) -> bool {
    code == KafkaCode::OFFSET_OUT_OF_RANGE || is_stale_metadata(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGE: Duration = Duration::from_secs(300);

    fn replica(broker: i32, until: Instant) -> Option<ReadReplica> {
        Some(ReadReplica { broker, until })
    }

    #[test]
    fn a_known_current_replica_is_fetched_from() {
        let now = Instant::now();
        assert_eq!(
            route(replica(3, now + AGE), 1, now, |_| true),
            Route::Replica(3)
        );
    }

    #[test]
    fn no_replica_or_an_expired_one_is_the_leader() {
        let now = Instant::now();
        assert_eq!(route(None, 1, now, |_| true), Route::Leader);
        assert_eq!(
            route(replica(3, now + AGE), 1, now + AGE, |_| true),
            Route::Leader,
            "expired at its age"
        );
        assert_eq!(
            route(replica(1, now + AGE), 1, now, |_| true),
            Route::Leader
        );
    }

    #[test]
    fn an_unknown_replica_keeps_the_leader_until_metadata_lists_it() {
        let now = Instant::now();
        assert_eq!(
            route(replica(7, now + AGE), 1, now, |id| id != 7),
            Route::LeaderUntilKnown(7)
        );
    }

    #[test]
    fn a_named_replica_is_remembered_for_the_age() {
        let now = Instant::now();
        assert_eq!(after_answer(None, 1, 3, now, AGE), replica(3, now + AGE));
        // Named again later: the first expiry holds.
        let later = now + Duration::from_secs(10);
        assert_eq!(
            after_answer(replica(3, now + AGE), 1, 3, later, AGE),
            replica(3, now + AGE)
        );
        // Another one, or the same after it expired: a fresh age.
        assert_eq!(
            after_answer(replica(3, now + AGE), 1, 2, later, AGE),
            replica(2, later + AGE)
        );
        let after = now + AGE;
        assert_eq!(
            after_answer(replica(3, now + AGE), 1, 3, after, AGE),
            replica(3, after + AGE)
        );
    }

    #[test]
    fn minus_one_or_the_answering_broker_changes_nothing() {
        let now = Instant::now();
        assert_eq!(after_answer(None, 1, -1, now, AGE), None);
        assert_eq!(after_answer(None, 1, 1, now, AGE), None);
        assert_eq!(
            after_answer(replica(3, now + AGE), 3, -1, now, AGE),
            replica(3, now + AGE)
        );
    }

    #[test]
    fn the_errors_that_send_a_partition_back_to_its_leader() {
        for code in [
            KafkaCode::OFFSET_OUT_OF_RANGE,
            KafkaCode::NOT_LEADER_OR_FOLLOWER,
            KafkaCode::REPLICA_NOT_AVAILABLE,
            KafkaCode::FENCED_LEADER_EPOCH,
            KafkaCode::UNKNOWN_LEADER_EPOCH,
            KafkaCode::OFFSET_NOT_AVAILABLE,
            KafkaCode::KAFKA_STORAGE_ERROR,
        ] {
            assert!(falls_back(code), "{code}");
        }
        assert!(!falls_back(KafkaCode::NONE));
        assert!(!falls_back(KafkaCode::TOPIC_AUTHORIZATION_FAILED));
    }
}
