//! The consumer's ListOffsets lookups, gathered: lookups at the same broker asked for
//! together (partition consumers started at once, a group member's new assignment)
//! go in one request, as the Java client and librdkafka send one per leader, instead of
//! one request each. A lookup joins the gathering open at its broker (or opens one),
//! lets the tasks ready to run go first (one yield), and then, if nobody has yet,
//! closes the gathering and has a task on the broker's worker send it and hand each
//! lookup its answer. A lone lookup costs that yield, a task on the worker and a
//! channel; nothing waits on a timer.
//!
//! The first lookup of a gathering polled after its yield closes it, and the request is
//! sent and answered on the worker, not by a caller's future: a caller whose future is
//! dropped or no longer polled holds up nobody else (a dropped caller's partition may
//! still be asked; its answer is dropped). A partition already in the open gathering is looked up on its own (the
//! broker refuses a partition listed twice). Each caller keeps its own retries (a
//! partition's error, a broken connection): an answer is the partition's error code and
//! offset, or the request's error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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

/// How a request asks: its isolation level and `timeout_ms`.
type How = (i8, i32);

/// A lookup in a gathering, and where its answer goes.
type Ask = (Lookup, oneshot::Sender<Answer>);

/// The lookups gathered at a broker so far.
struct Gathering {
    id: u64,
    asks: Vec<Ask>,
}

/// The open gatherings of one consumer, by broker.
pub(crate) struct Lookups {
    gathering: Mutex<HashMap<Key, Gathering>>,
    next_id: std::sync::atomic::AtomicU64,
    /// The requests' `timeout_ms` (v10+): how long the broker may take to read an
    /// offset from remote storage (tiered topics), the consumer's request timeout as
    /// the Java client sends; 0 would have it give up at once.
    timeout_ms: i32,
}

impl Lookups {
    /// Lookups whose requests allow the broker `request_timeout`.
    pub(crate) fn new(request_timeout: Duration) -> Self {
        Lookups {
            gathering: Mutex::default(),
            next_id: Default::default(),
            timeout_ms: request_timeout.as_millis().try_into().unwrap_or(i32::MAX),
        }
    }

    /// Looks `lookup` up at `leader`, in one request with whatever else is asked of
    /// `leader` at the same time (sent from a task on the worker that owns `leader`).
    pub(crate) async fn look_up(&self, leader: &Broker, isolation: i8, lookup: Lookup) -> Answer {
        let key = (leader.id(), isolation);
        let Some((id, answer)) = self.join(key, &lookup) else {
            return ask(leader, (isolation, self.timeout_ms), lookup).await;
        };
        tokio::task::yield_now().await;
        if let Some(asks) = self.close(key, id) {
            let (broker, runtime) = (leader.clone(), leader.runtime());
            // If the task cannot start (the runtime is stopping), the asks are dropped
            // with it, and each caller asks on its own.
            let how = (isolation, self.timeout_ms);
            let _ = runtime.spawn_on(runtime.worker_for(key.0), move |_| async move {
                answer_all(&broker, how, asks).await;
            });
        }
        match answer.await {
            Ok(answer) => answer,
            Err(_) => ask(leader, (isolation, self.timeout_ms), lookup).await,
        }
    }

    /// Joins (or opens) the gathering at `key`: its id, and where the answer comes.
    /// `None` when `lookup`'s partition is already in it.
    fn join(&self, key: Key, lookup: &Lookup) -> Option<(u64, oneshot::Receiver<Answer>)> {
        let mut gathering = self
            .gathering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let g = gathering.entry(key).or_insert_with(|| Gathering {
            id: self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            asks: Vec::new(),
        });
        // Callers gone (their futures dropped) are not waited for, nor asked for.
        g.asks.retain(|(_, tx)| !tx.is_closed());
        if g.asks.iter().any(|(l, _)| same_partition(l, lookup)) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        g.asks.push((lookup.clone(), tx));
        Some((g.id, rx))
    }

    /// Closes the gathering `id` at `key` and takes its lookups, unless another of
    /// them did first.
    fn close(&self, key: Key, id: u64) -> Option<Vec<Ask>> {
        let mut gathering = self
            .gathering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if gathering.get(&key)?.id != id {
            return None;
        }
        gathering.remove(&key).map(|g| g.asks)
    }
}

fn same_partition(a: &Lookup, b: &Lookup) -> bool {
    a.partition == b.partition && a.topic == b.topic
}

/// Looks one partition up, in a request of its own.
async fn ask(leader: &Broker, how: How, lookup: Lookup) -> Answer {
    let result = leader.send(request(&[&lookup], how)).await;
    result.map(|response| answer_of(&response, &lookup))
}

/// Sends one request for `asks` and answers each on its channel.
async fn answer_all(leader: &Broker, how: How, asks: Vec<Ask>) {
    let lookups: Vec<&Lookup> = asks.iter().map(|(l, _)| l).collect();
    let result = leader.send(request(&lookups, how)).await;
    for (lookup, reply) in asks {
        let answer = match &result {
            Ok(response) => Ok(answer_of(response, &lookup)),
            Err(e) => Err(e.clone()),
        };
        let _ = reply.send(answer);
    }
}

/// One ListOffsets request for `lookups`, grouped by topic.
fn request(lookups: &[&Lookup], (isolation, timeout_ms): How) -> ListOffsetsRequest {
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
        .with_timeout_ms(timeout_ms)
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
    fn a_partition_consumer_can_be_started_from_any_thread() {
        // Type-checked, not run: the start (its lookup included) is a Send future.
        fn send<T: Send>(_: &T) {}
        let _ = |c: &crate::consumer::Consumer| {
            send(&c.consume_partition("t", 0, crate::consumer::Offset::Oldest));
        };
    }

    #[test]
    fn a_request_lists_each_topic_once_with_its_partitions_and_their_timestamps() {
        let asks = [
            lookup("a", 0, -2),
            lookup("b", 3, -1),
            lookup("a", 1, 1_700),
        ];
        let request = request(&asks.iter().collect::<Vec<_>>(), (1, 30_000));
        assert_eq!(request.isolation_level, 1);
        assert_eq!(
            request.timeout_ms, 30_000,
            "the broker may read remote storage"
        );
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

#[cfg(test)]
mod stopping {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::Poll;
    use std::time::Duration;

    use super::*;
    use crate::io::{BackendChoice, ConnectionConfig};
    use crate::runtime::{Runtime, RuntimeConfig};

    #[test]
    fn lookups_whose_request_task_cannot_start_end_with_an_error_instead_of_waiting() {
        // The runtime has stopped: the gathering's task cannot start on the worker, so
        // its lookups are dropped with it, and each caller's own request fails as well
        // (nothing left to send it). Both callers end, with an error.
        let rt = Runtime::new(RuntimeConfig {
            workers: 1,
            backend: BackendChoice::Epoll,
            thread_name: "kr-lookup-stop".into(),
        })
        .unwrap();
        let broker = Broker::open(&rt, 1, "127.0.0.1:9", ConnectionConfig::default()).unwrap();
        rt.shutdown();
        assert!(
            rt.spawn_on(0, |_| async {}).is_err(),
            "a stopped runtime starts no task"
        );
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            both_lookups_fail(&broker);
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("the lookups ended instead of waiting (a guard against a hang)");
    }

    /// Two lookups of partitions of "t" at `broker` at once: each ends with the error a
    /// stopped runtime gives.
    fn both_lookups_fail(broker: &Broker) {
        let lookups = Lookups::new(Duration::from_secs(30));
        let ask = |partition| {
            let lookup = Lookup {
                topic: Arc::from("t"),
                partition,
                timestamp: -1,
            };
            Box::pin(lookups.look_up(broker, 0, lookup))
                as Pin<Box<dyn Future<Output = Answer> + '_>>
        };
        let mut asks = [ask(0), ask(1)];
        let mut answers: [Option<Answer>; 2] = [None, None];
        crate::client::block_on(std::future::poll_fn(|cx| {
            for (f, a) in asks.iter_mut().zip(answers.iter_mut()) {
                if a.is_none()
                    && let Poll::Ready(v) = f.as_mut().poll(cx)
                {
                    *a = Some(v);
                }
            }
            if answers.iter().all(Option::is_some) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }));
        for answer in answers {
            let error = answer.unwrap().expect_err("no runtime to ask with");
            assert!(
                matches!(error, IoError::ShuttingDown | IoError::Closed { .. }),
                "{error:?}"
            );
        }
    }
}
