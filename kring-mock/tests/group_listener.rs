//! A rebalance listener whose callback is cut short (the application reads with a
//! timeout shorter than the callback takes, so the group consumer's call is dropped
//! mid-callback): the callback runs again on the next call, as documented, and the
//! listener is still there for the callbacks after it. Before the fix the listener was
//! dropped with the interrupted call, and every later callback was skipped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kring::config::OffsetReset;
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::{Client, Config};
use kring_mock::FakeCluster;

const TOPIC: &str = "t";

#[derive(Default)]
struct Calls {
    assigned: Vec<Vec<TopicPartition>>,
    revoked: Vec<Vec<TopicPartition>>,
}

/// Takes `slow` the first time it is told of an assignment.
struct SlowFirstAssign {
    client: Client,
    slow: Duration,
    calls: Arc<Mutex<Calls>>,
}

impl RebalanceListener for SlowFirstAssign {
    fn on_assigned<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        Box::pin(async move {
            let first = self.calls.lock().unwrap().assigned.is_empty();
            self.calls
                .lock()
                .unwrap()
                .assigned
                .push(partitions.to_vec());
            if first {
                let _ = self.client.sleep(self.slow).await;
            }
        })
    }

    fn on_revoked<'a>(
        &'a mut self,
        _: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.calls.lock().unwrap().revoked.push(partitions.to_vec());
        Box::pin(async {})
    }
}

#[test]
fn a_listener_callback_cut_short_runs_again_and_the_listener_stays() {
    let cluster = FakeCluster::builder()
        .brokers(1)
        .topic(TOPIC, 2)
        .build()
        .unwrap();
    for p in 0..2 {
        cluster
            .append_records(TOPIC, p, 0, &[(None, Some(b"v".as_slice()))])
            .unwrap();
    }
    let mut c = Config::new(cluster.bootstrap());
    c.group.group_id = Some("listener-cut".into());
    c.consumer.auto_offset_reset = OffsetReset::Earliest;
    c.consumer.enable_auto_commit = false;
    let client = Client::connect_blocking(c).unwrap();
    let calls = Arc::new(Mutex::new(Calls::default()));
    let listener = SlowFirstAssign {
        client: client.clone(),
        slow: Duration::from_millis(600),
        calls: calls.clone(),
    };
    let read = kring::client::block_on(async {
        let mut gc = GroupConsumer::with_listener(
            client.clone(),
            Topics::names([TOPIC]),
            Box::new(listener),
        )
        .await
        .unwrap();
        let mut read = 0;
        let mut cut_short = 0;
        // Reads with a 100 ms timeout until both records came (a guard of 200 calls
        // against hanging, not a timing assertion).
        for _ in 0..200 {
            if read == 2 {
                break;
            }
            tokio::select! {
                m = gc.next_message() => {
                    m.expect("alive").expect("no error");
                    read += 1;
                }
                _ = client.sleep(Duration::from_millis(100)) => cut_short += 1,
            }
        }
        assert!(cut_short > 0, "the first callback outlasted a call");
        gc.close().await.unwrap();
        read
    });
    client.close();
    assert_eq!(read, 2, "both records read");
    let mut guard = calls.lock().unwrap();
    let calls = &mut *guard;
    for v in calls.assigned.iter_mut().chain(calls.revoked.iter_mut()) {
        v.sort();
    }
    let both: Vec<TopicPartition> = (0..2).map(|p| TopicPartition::new(TOPIC, p)).collect();
    assert_eq!(
        calls.assigned,
        vec![both.clone(), both.clone()],
        "the interrupted on_assigned ran again"
    );
    assert_eq!(
        calls.revoked,
        vec![both],
        "the listener was still there at close"
    );
}
