//! The fake cluster's transaction coordinator (KIP-98, transactions v1): one [`Txn`]
//! per transactional id with its producer id and epoch, the partitions and groups of
//! the open transaction and the offsets sent to it, and the rules the handlers share
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and
//! Produce of transactional batches).
//!
//! The model, simplified from Kafka's `TransactionCoordinator` and sized for tests:
//! - An end (EndTxn, or the abort of an open transaction when a new producer inits the
//!   same id) completes at once: the markers are appended to every partition of the
//!   transaction and the offsets of a commit become the group's committed offsets
//!   before the answer goes out (Kafka's PrepareCommit/PrepareAbort phase, in which the
//!   coordinator answers CONCURRENT_TRANSACTIONS, is a fault:
//!   [`super::FakeCluster::concurrent_transactions`]).
//! - Partitions are added whatever their leader; Produce refuses a transactional batch
//!   for a partition not in its producer's open transaction (INVALID_TXN_STATE), as a
//!   broker verifying transactions does (KIP-890 part 1), and a batch of a fenced epoch
//!   (INVALID_PRODUCER_EPOCH).
//! - No transaction timeouts, no transactions v2 (KIP-890 part 2: EndTxn v5,
//!   AddPartitionsToTxn v4+ are the brokers'), no transaction log.
//!
//! Invariants: a transactional id's producer id is fixed until its epoch runs out; the
//! epoch only grows; `partitions`, `groups` and `pending_offsets` are empty unless the
//! status is `Ongoing`.

use std::collections::{BTreeMap, BTreeSet};

use kring::protocol::KafkaCode;

use super::state::{Committed, State};

/// Kafka's `transaction.max.timeout.ms` default: a longer `transaction.timeout.ms` is
/// refused with INVALID_TRANSACTION_TIMEOUT.
pub(crate) const MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;

/// The coordinator epoch written into markers (one coordinator generation here).
const COORDINATOR_EPOCH: i32 = 0;

/// Where a transactional id's transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnStatus {
    /// No transaction yet since InitProducerId.
    Empty,
    /// Partitions or offsets were added: a transaction is open.
    Ongoing,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

/// The coordinator's state of one transactional id.
#[derive(Debug, Clone)]
pub(crate) struct Txn {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) status: TxnStatus,
    /// Partitions of the open transaction.
    pub(crate) partitions: BTreeSet<(String, i32)>,
    /// Groups whose offsets are part of it (AddOffsetsToTxn).
    pub(crate) groups: BTreeSet<String>,
    /// Offsets sent to it (TxnOffsetCommit), by group: committed with it.
    pub(crate) pending_offsets: BTreeMap<String, BTreeMap<(String, i32), Committed>>,
}

/// A transaction that ended, as tests read it back
/// ([`super::FakeCluster::ended_transactions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedTxn {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id and the epoch its markers carry.
    pub producer_id: i64,
    /// The epoch.
    pub epoch: i16,
    /// Committed (true) or aborted.
    pub committed: bool,
    /// The broker that coordinated the end; `None` when the coordinator aborted it
    /// itself (a new producer initialised the same id).
    pub coordinator: Option<i32>,
    /// The partitions markers went to, with each marker's offset.
    pub markers: Vec<(String, i32, i64)>,
    /// The offsets committed with it: (group, topic, partition, offset). Empty for
    /// an abort.
    pub offsets: Vec<(String, String, i32, i64)>,
}

/// PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for request versions before `since`
/// (Kafka answers older clients with the code they know).
pub(crate) fn fenced(version: i16, since: i16) -> KafkaCode {
    if version >= since {
        KafkaCode::PRODUCER_FENCED
    } else {
        KafkaCode::INVALID_PRODUCER_EPOCH
    }
}

impl State {
    /// The transaction of `id` if `broker` coordinates it and the producer id and
    /// epoch are its current ones: the checks every request of a transaction passes
    /// first. `fenced_code` is what an older epoch gets.
    pub(crate) fn txn_for(
        &mut self,
        broker: i32,
        id: &str,
        producer_id: i64,
        epoch: i16,
        fenced_code: KafkaCode,
    ) -> Result<&mut Txn, KafkaCode> {
        if id.is_empty() {
            return Err(KafkaCode::INVALID_REQUEST);
        }
        if self.coordinator(id) != Some(broker) {
            return Err(KafkaCode::NOT_COORDINATOR);
        }
        self.txn_of_producer(id, producer_id, epoch, fenced_code)
    }

    /// The transaction of `id` if the producer id and epoch are its current ones,
    /// wherever it is coordinated (TxnOffsetCommit goes to the group's coordinator).
    pub(crate) fn txn_of_producer(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        fenced_code: KafkaCode,
    ) -> Result<&mut Txn, KafkaCode> {
        let txn = self
            .txns
            .get_mut(id)
            .ok_or(KafkaCode::INVALID_PRODUCER_ID_MAPPING)?;
        if txn.producer_id != producer_id {
            return Err(KafkaCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if epoch != txn.epoch {
            return Err(fenced_code);
        }
        Ok(txn)
    }

    /// InitProducerId with a transactional id at its coordinator: a new producer id at
    /// epoch 0, or the id's producer id at the next epoch (fencing the older one, and
    /// aborting a transaction it left open); with the current id and epoch passed
    /// (KIP-360), the same bump for that producer.
    pub(crate) fn init_transactional(
        &mut self,
        broker: i32,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
        fenced_code: KafkaCode,
        now_ms: i64,
    ) -> Result<(i64, i16), KafkaCode> {
        if id.is_empty() {
            return Err(KafkaCode::INVALID_REQUEST);
        }
        if self.coordinator(id) != Some(broker) {
            return Err(KafkaCode::NOT_COORDINATOR);
        }
        if timeout_ms <= 0 || timeout_ms > MAX_TRANSACTION_TIMEOUT_MS {
            return Err(KafkaCode::INVALID_TRANSACTION_TIMEOUT);
        }
        let Some(txn) = self.txns.get(id) else {
            if current.is_some() {
                return Err(KafkaCode::INVALID_PRODUCER_ID_MAPPING);
            }
            let producer_id = self.allocate_producer_id();
            self.txns
                .insert(id.to_string(), Txn::new(producer_id, 0, timeout_ms));
            return Ok((producer_id, 0));
        };
        if let Some((pid, epoch)) = current {
            if pid != txn.producer_id {
                return Err(KafkaCode::INVALID_PRODUCER_ID_MAPPING);
            }
            if epoch != txn.epoch {
                return Err(fenced_code);
            }
        }
        if txn.status == TxnStatus::Ongoing {
            // The older producer's transaction can never commit now.
            self.end_txn(id, false, None, now_ms);
        }
        let (producer_id, epoch) = match self.txns.get(id) {
            Some(t) if t.epoch < i16::MAX - 1 => (t.producer_id, t.epoch + 1),
            _ => (self.allocate_producer_id(), 0),
        };
        self.txns
            .insert(id.to_string(), Txn::new(producer_id, epoch, timeout_ms));
        Ok((producer_id, epoch))
    }

    /// Ends `id`'s open transaction: a marker on every partition of it (at the epoch
    /// of the transaction), and on a commit the pending offsets become committed.
    /// Recorded in `ended_txns`. A transaction not open ends with nothing written.
    pub(crate) fn end_txn(
        &mut self,
        id: &str,
        commit: bool,
        coordinator: Option<i32>,
        now_ms: i64,
    ) {
        let Some(txn) = self.txns.get_mut(id) else {
            return;
        };
        let (producer_id, epoch) = (txn.producer_id, txn.epoch);
        let partitions = std::mem::take(&mut txn.partitions);
        let pending = std::mem::take(&mut txn.pending_offsets);
        txn.groups.clear();
        txn.status = if commit {
            TxnStatus::CompleteCommit
        } else {
            TxnStatus::CompleteAbort
        };
        let mut markers = Vec::new();
        for (topic, index) in partitions {
            let Some(p) = super::handlers::partition_mut(self, &topic, index) else {
                // The topic was deleted meanwhile: no log to mark.
                continue;
            };
            let leader_epoch = p.leader_epoch;
            // Building a one-record control batch in a fresh buffer cannot fail; were it
            // to, the partition would show no marker in `EndedTxn::markers`.
            if let Ok(offset) = p.log.append_marker(
                producer_id,
                epoch,
                commit,
                COORDINATOR_EPOCH,
                leader_epoch,
                now_ms,
            ) {
                markers.push((topic, index, offset));
            }
        }
        let mut offsets = Vec::new();
        if commit {
            for (group, committed) in pending {
                let g = self.groups.entry(group.clone()).or_default();
                for ((topic, partition), c) in committed {
                    offsets.push((group.clone(), topic.clone(), partition, c.offset));
                    g.offsets.insert((topic, partition), c);
                }
            }
        }
        self.ended_txns.push(EndedTxn {
            transactional_id: id.to_string(),
            producer_id,
            epoch,
            committed: commit,
            coordinator,
            markers,
            offsets,
        });
    }

    /// Produce of a transactional batch of `producer_id` at `epoch` to
    /// `topic`-`partition`: allowed only while its transaction is open with the
    /// partition in it, at the current epoch.
    pub(crate) fn check_transactional_produce(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), KafkaCode> {
        let txn = self
            .txns
            .values()
            .find(|t| t.producer_id == producer_id)
            .ok_or(KafkaCode::INVALID_PRODUCER_ID_MAPPING)?;
        if epoch < txn.epoch {
            return Err(KafkaCode::INVALID_PRODUCER_EPOCH);
        }
        if epoch > txn.epoch
            || txn.status != TxnStatus::Ongoing
            || !txn.partitions.contains(&(topic.to_string(), partition))
        {
            return Err(KafkaCode::INVALID_TXN_STATE);
        }
        Ok(())
    }
}

impl Txn {
    fn new(producer_id: i64, epoch: i16, timeout_ms: i32) -> Txn {
        Txn {
            producer_id,
            epoch,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            pending_offsets: BTreeMap::new(),
        }
    }
}

/// Milliseconds since the Unix epoch, for marker timestamps (handlers run on sockets,
/// not in a sans-IO layer, so they may read the clock).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
