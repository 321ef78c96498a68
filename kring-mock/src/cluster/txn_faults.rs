//! Transaction faults on demand, and what a test reads back about transactions: the
//! coordinator moving in the middle of a commit, CONCURRENT_TRANSACTIONS on the next
//! requests of a transactional id, another producer fencing the id, and every
//! transaction that ended (with its markers and the offsets it committed).
//!
//! The coordinator of a transactional id moves as a group's does
//! ([`FakeCluster::move_coordinator`] works for both): the old broker answers the
//! transaction's requests with NOT_COORDINATOR and FindCoordinator (key type 1) names
//! the new one. (Overrides are by key: a group and a transactional id of the same name
//! move together.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kring::protocol::{ApiKey, KafkaCode, RequestKind};

use super::state::State;
use super::txn::{EndedTxn, now_ms};
use super::{ControlId, FakeCluster};
use crate::server::lock;
use crate::{MockError, ReceivedRequest, Reply};

/// The transactional id a request is for: InitProducerId (with one),
/// AddPartitionsToTxn (v0-3), AddOffsetsToTxn, TxnOffsetCommit, EndTxn and a
/// transactional Produce.
pub fn request_transactional_id(request: &ReceivedRequest) -> Option<&str> {
    Some(match &request.request {
        RequestKind::InitProducerId(r) => r.transactional_id.as_deref()?,
        RequestKind::AddPartitionsToTxn(r) => &r.v3_and_below_transactional_id,
        RequestKind::AddOffsetsToTxn(r) => &r.transactional_id,
        RequestKind::TxnOffsetCommit(r) => &r.transactional_id,
        RequestKind::EndTxn(r) => &r.transactional_id,
        RequestKind::Produce(r) => r.transactional_id.as_deref()?,
        _ => return None,
    })
}

impl State {
    /// The next live broker after `key`'s coordinator (in id order, wrapping), if
    /// another is up.
    fn next_coordinator(&self, key: &str) -> Option<i32> {
        let current = self.coordinator(key);
        let up = self.live_brokers();
        up.iter()
            .copied()
            .find(|&id| Some(id) > current)
            .or_else(|| up.first().copied())
            .filter(|&id| Some(id) != current)
    }
}

impl FakeCluster {
    /// The coordinator of `transactional_id` moves in the middle of its next commit
    /// or abort: the next EndTxn for it is answered NOT_COORDINATOR by the broker it
    /// reached (which ends nothing), and from then on the next live broker coordinates
    /// the id; the producer must find it and end the transaction there. Remove it
    /// with [`FakeCluster::remove_control`] if no EndTxn comes.
    pub fn move_coordinator_at_end(&self, transactional_id: &str) -> ControlId {
        let id = transactional_id.to_string();
        let core = Arc::downgrade(&self.core);
        self.control_once(Some(ApiKey::EndTxn), move |request| {
            if request_transactional_id(request) != Some(id.as_str()) {
                return Reply::pass();
            }
            if let Some(core) = core.upgrade() {
                let mut st = lock(&core.state);
                if let Some(next) = st.next_coordinator(&id) {
                    st.coordinator_overrides.insert(id.clone(), next);
                }
                drop(st);
                core.changed.notify_all();
            }
            Reply::error(KafkaCode::NOT_COORDINATOR)
        })
    }

    /// Answers the next `n` `api` requests (AddPartitionsToTxn, InitProducerId,
    /// EndTxn, AddOffsetsToTxn...) for `transactional_id` with
    /// CONCURRENT_TRANSACTIONS, as a coordinator still completing the previous end
    /// does, then lets them through.
    pub fn concurrent_transactions(
        &self,
        transactional_id: &str,
        api: ApiKey,
        n: usize,
    ) -> ControlId {
        let id = transactional_id.to_string();
        let left = AtomicUsize::new(n);
        self.control(Some(api), move |request| {
            if request_transactional_id(request) != Some(id.as_str()) {
                return Reply::pass();
            }
            let took = left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1));
            match took {
                Ok(_) => Reply::error(KafkaCode::CONCURRENT_TRANSACTIONS),
                Err(_) => Reply::pass(),
            }
        })
    }

    /// Another producer initialises `transactional_id` (InitProducerId at its
    /// coordinator): the epoch moves on, the producer holding the older one is fenced,
    /// and a transaction it left open is aborted. Returns the new producer id and epoch.
    pub fn fence_transactional_id(&self, transactional_id: &str) -> Result<(i64, i16), MockError> {
        let mut st = self.state();
        let coordinator = st
            .coordinator(transactional_id)
            .ok_or(MockError::InvalidArgument("no broker is up".into()))?;
        let timeout = st
            .txns
            .get(transactional_id)
            .map_or(60_000, |t| t.timeout_ms);
        let out = st
            .init_transactional(
                coordinator,
                transactional_id,
                timeout,
                None,
                KafkaCode::PRODUCER_FENCED,
                now_ms(),
            )
            .map_err(|code| {
                MockError::InvalidArgument(format!(
                    "InitProducerId for {transactional_id}: {}",
                    code.name()
                ))
            })?;
        drop(st);
        self.changed();
        Ok(out)
    }

    /// The producer id and epoch `transactional_id` has now.
    pub fn transactional_producer(&self, transactional_id: &str) -> Option<(i64, i16)> {
        self.state()
            .txns
            .get(transactional_id)
            .map(|t| (t.producer_id, t.epoch))
    }

    /// Every transaction of `transactional_id` that ended, oldest first.
    pub fn ended_transactions(&self, transactional_id: &str) -> Vec<EndedTxn> {
        self.state()
            .ended_txns
            .iter()
            .filter(|e| e.transactional_id == transactional_id)
            .cloned()
            .collect()
    }

    /// The last stable offset of `topic`-`partition` (the high watermark when no
    /// transaction is open there).
    pub fn last_stable_offset(&self, topic: &str, partition: i32) -> Result<i64, MockError> {
        self.with_partition(topic, partition, |p, _| Ok(p.log.last_stable_offset()))
    }
}
