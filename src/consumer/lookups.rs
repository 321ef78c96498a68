//! The consumer's ListOffsets lookups, gathered: lookups at the same broker asked for
//! together (partition consumers started at once, a group member's new assignment)
//! go in one request, as the Java client and librdkafka send one per leader, instead of
//! one request each. The first lookup at a broker gathers: it lets the tasks ready to
//! run go first (one yield), then sends its own partition and every one asked for at
//! that broker meanwhile, and hands each its answer. A lone lookup costs that one
//! yield and nothing else; nothing waits on a timer.
//!
//! Each caller keeps its own retries (a partition's error, a broken connection): an
//! answer is the partition's error code and offset, or the request's error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::io::{Broker, IoError};
use crate::protocol::KafkaCode;
use crate::protocol::messages::ListOffsetsRequest;
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsResponse, ListOffsetsTopic,
};

/// A partition's answer: its error code and offset, or why the request failed.
pub(crate) type Answer = Result<(KafkaCode, i64), IoError>;

/// One partition's lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lookup {
    pub topic: Arc<str>,
    pub partition: i32,
    /// -2 the earliest offset, -1 the latest, else a timestamp in ms.
    pub timestamp: i64,
}

/// Where lookups gather: a broker, and the isolation level of its request.
type Key = (i32, i8);

/// Lookups waiting to join the request a gatherer is about to send.
struct Gathering {
    id: u64,
    /// The gatherer's own lookup.
    own: Lookup,
    joined: Vec<(Lookup, oneshot::Sender<Answer>)>,
}

impl Gathering {
    fn has_partition_of(&self, lookup: &Lookup) -> bool {
        same_partition(&self.own, lookup)
            || self.joined.iter().any(|(l, _)| same_partition(l, lookup))
    }
}

/// The gatherings of one consumer, by broker.
#[derive(Default)]
pub(crate) struct Lookups {
    gathering: Mutex<HashMap<Key, Gathering>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// Removes a gathering its gatherer left before taking it (its task was dropped
/// mid-yield): those who joined it are answered by their own requests instead.
struct Abandon<'a> {
    lookups: &'a Lookups,
    key: Key,
    id: u64,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if let Ok(mut gathering) = self.lookups.gathering.lock()
            && gathering.get(&self.key).is_some_and(|g| g.id == self.id)
        {
            gathering.remove(&self.key);
        }
    }
}

impl Lookups {
    /// Looks `lookup` up at `leader`, in one request with whatever else is asked of
    /// `leader` at the same time.
    pub(crate) async fn look_up(&self, leader: &Broker, isolation: i8, lookup: Lookup) -> Answer {
        let key = (leader.id(), isolation);
        match self.join_or_gather(key, &lookup) {
            Role::Joined(answer) => match answer.await {
                Ok(answer) => answer,
                // The gatherer's task ended before it answered: on its own.
                Err(_) => send(leader, isolation, vec![(lookup, None)]).await,
            },
            Role::Alone => send(leader, isolation, vec![(lookup, None)]).await,
            Role::Gather(id) => {
                let abandon = Abandon {
                    lookups: self,
                    key,
                    id,
                };
                tokio::task::yield_now().await;
                let joined = self.take(key, id);
                drop(abandon);
                let mut asks = vec![(lookup, None)];
                asks.extend(joined.into_iter().map(|(l, tx)| (l, Some(tx))));
                send(leader, isolation, asks).await
            }
        }
    }

    /// Joins the gathering at `key`, or starts one.
    fn join_or_gather(&self, key: Key, lookup: &Lookup) -> Role {
        let Ok(mut gathering) = self.gathering.lock() else {
            return Role::Alone;
        };
        match gathering.get_mut(&key) {
            // A partition goes into a request once (the broker refuses it twice).
            Some(g) if g.has_partition_of(lookup) => Role::Alone,
            Some(g) => {
                let (tx, rx) = oneshot::channel();
                g.joined.push((lookup.clone(), tx));
                Role::Joined(rx)
            }
            None => {
                let id = self
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let own = lookup.clone();
                let joined = Vec::new();
                gathering.insert(key, Gathering { id, own, joined });
                Role::Gather(id)
            }
        }
    }

    /// Takes the gathering `id` started (what joined it), ending it.
    fn take(&self, key: Key, id: u64) -> Vec<(Lookup, oneshot::Sender<Answer>)> {
        let Ok(mut gathering) = self.gathering.lock() else {
            return Vec::new();
        };
        match gathering.get(&key) {
            Some(g) if g.id == id => gathering.remove(&key).map_or_else(Vec::new, |g| g.joined),
            _ => Vec::new(),
        }
    }
}

enum Role {
    /// Joined another's gathering: the answer comes on this channel.
    Joined(oneshot::Receiver<Answer>),
    /// Started the gathering with this id: sends it.
    Gather(u64),
    /// Goes alone.
    Alone,
}

fn same_partition(a: &Lookup, b: &Lookup) -> bool {
    a.partition == b.partition && a.topic == b.topic
}

/// Sends one request for `asks` (the first is the caller's own) and answers the others
/// on their channels; returns the first's answer.
async fn send(
    leader: &Broker,
    isolation: i8,
    asks: Vec<(Lookup, Option<oneshot::Sender<Answer>>)>,
) -> Answer {
    let lookups: Vec<&Lookup> = asks.iter().map(|(l, _)| l).collect();
    let result = leader.send(request(&lookups, isolation)).await;
    let mut own = None;
    for (lookup, reply) in asks {
        let answer = match &result {
            Ok(response) => Ok(answer_of(response, &lookup)),
            Err(e) => Err(e.clone()),
        };
        match reply {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => own = Some(answer),
        }
    }
    own.unwrap_or(Ok((KafkaCode::UNKNOWN_TOPIC_OR_PARTITION, -1)))
}

/// One ListOffsets request for `lookups`, grouped by topic.
fn request(lookups: &[&Lookup], isolation: i8) -> ListOffsetsRequest {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for l in lookups {
        let partition = ListOffsetsPartition::default()
            .with_partition_index(l.partition)
            .with_timestamp(l.timestamp);
        match topics.iter_mut().find(|t| *t.name == *l.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(l.topic.to_string())
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ListOffsetsRequest::default()
        .with_replica_id(-1)
        .with_isolation_level(isolation)
        .with_topics(topics)
}

/// The partition's code and offset in `response`; a partition the broker left out is
/// UNKNOWN_TOPIC_OR_PARTITION (retriable: its caller looks again after a refresh).
fn answer_of(response: &ListOffsetsResponse, lookup: &Lookup) -> (KafkaCode, i64) {
    response
        .topics
        .iter()
        .filter(|t| *t.name == *lookup.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == lookup.partition)
        .map_or((KafkaCode::UNKNOWN_TOPIC_OR_PARTITION, -1), |p| {
            (KafkaCode(p.error_code), p.offset)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::list_offsets::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };

    fn lookup(topic: &str, partition: i32, timestamp: i64) -> Lookup {
        Lookup {
            topic: Arc::from(topic),
            partition,
            timestamp,
        }
    }

    #[test]
    fn a_request_lists_each_topic_once_with_its_partitions_and_their_timestamps() {
        let asks = [
            lookup("a", 0, -2),
            lookup("b", 3, -1),
            lookup("a", 1, 1_700),
        ];
        let request = request(&asks.iter().collect::<Vec<_>>(), 1);
        assert_eq!(request.isolation_level, 1);
        assert_eq!(request.replica_id, -1);
        let listed: Vec<(&str, Vec<(i32, i64)>)> = request
            .topics
            .iter()
            .map(|t| {
                let parts = t.partitions.iter();
                (
                    t.name.as_str(),
                    parts.map(|p| (p.partition_index, p.timestamp)).collect(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [("a", vec![(0, -2), (1, 1_700)]), ("b", vec![(3, -1)])]
        );
    }

    #[test]
    fn each_lookup_gets_its_own_partition_and_one_left_out_is_unknown() {
        let partition = |index, error_code, offset| {
            ListOffsetsPartitionResponse::default()
                .with_partition_index(index)
                .with_error_code(error_code)
                .with_offset(offset)
        };
        let response = ListOffsetsResponse::default().with_topics(vec![
            ListOffsetsTopicResponse::default()
                .with_name("a".into())
                .with_partitions(vec![partition(0, 0, 7), partition(1, 6, -1)]),
        ]);
        assert_eq!(
            answer_of(&response, &lookup("a", 0, -1)),
            (KafkaCode::NONE, 7)
        );
        assert_eq!(
            answer_of(&response, &lookup("a", 1, -1)),
            (KafkaCode::NOT_LEADER_OR_FOLLOWER, -1)
        );
        assert_eq!(
            answer_of(&response, &lookup("b", 0, -1)),
            (KafkaCode::UNKNOWN_TOPIC_OR_PARTITION, -1)
        );
    }
}
