//! The transactional producer's I/O (KIP-98): `init_transactions`, `begin_transaction`,
//! `send_offsets_to_transaction`, `commit_transaction` and `abort_transaction`, and the
//! task that adds partitions to the open transaction. The rules (which call each state
//! allows, how each error is classed) are the sans-IO [`crate::engine::txn`]; this module
//! sends what it decides and feeds the answers back.
//!
//! Which protocol a transaction uses follows the cluster's finalized `transaction.version`
//! (read from the brokers' ApiVersions answers at `init_transactions` and whenever a
//! transaction ends, the newest features epoch winning, as the Java client does):
//! transactions v2 (KIP-890, Kafka 4.0+) where it is 2 or more, v1 otherwise.
//!
//! The flow of one transaction in v1 (Produce at most v11, EndTxn and TxnOffsetCommit at
//! most v4):
//! - a record sent to a partition not yet in the transaction registers it; the adder task
//!   asks the coordinator for every partition registered since its last request in one
//!   AddPartitionsToTxn, and only then lets the partition's sink send its batches;
//! - offsets go through AddOffsetsToTxn (at the transaction coordinator) and
//!   TxnOffsetCommit (at the group's, with the member's generation, KIP-447);
//! - a commit sends everything, waits for every batch's answer, and ends the transaction
//!   with EndTxn; any record that failed makes the transaction abortable instead;
//! - an abort fails what was not sent, waits for what is on the wire, and ends the
//!   transaction with EndTxn; when something in it may have left a sequence gap it then
//!   bumps the epoch (InitProducerId with the current id and epoch, KIP-360).
//!
//! In v2 (Produce v12, EndTxn v5, TxnOffsetCommit v5) there is no AddPartitionsToTxn and
//! no AddOffsetsToTxn: a partition's batches go out at once and its leader adds it to
//! the transaction, the group coordinator adds the offsets. Every EndTxn bumps the
//! epoch and its answer names the new one (a new producer id when the epoch ran out),
//! which the producer takes, its sequences starting again at 0; no InitProducerId
//! follows an abort.
//!
//! Calls a state does not allow fail with [`TransactionError`] and change nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

use super::{Producer, ProducerShared, driver};
use crate::client::CoordinatorKind;
use crate::consumer::offsets::with_coordinator;
use crate::engine::produce::partition::{ProducePartition, ProducerId};
use crate::engine::txn::{
    AddOutcome, ErrorClass, Joining, Transaction, TransactionError, TxnPartition, TxnProtocol,
    TxnState, class_of,
};
use crate::error::{Error, Result};
use crate::group::{OffsetAndMetadata, TopicPartition};
use crate::protocol::messages::add_partitions_to_txn::AddPartitionsToTxnTopic;
use crate::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use crate::protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, TxnOffsetCommitRequest,
};
use crate::protocol::{ApiKey, KafkaCode, VersionRange};

/// The newest AddPartitionsToTxn a client sends (v4+ are the brokers' own, KIP-890).
const ADD_PARTITIONS_MAX_VERSION: i16 = 3;
/// The newest AddOffsetsToTxn of transactions v1 (v2 sends none).
const ADD_OFFSETS_MAX_VERSION: i16 = 3;
/// The feature whose finalized level chooses the protocol.
const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// A consumer group member's identity, for offsets sent to a transaction (KIP-447: the
/// group coordinator refuses them once that generation is over, so a zombie member's
/// transaction cannot commit offsets). From [`crate::group::GroupConsumer::group_metadata`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The group.
    pub group_id: String,
    /// The generation (the member epoch with KIP-848); -1 for none.
    pub generation_id: i32,
    /// The member id; empty for none.
    pub member_id: String,
    /// The static member's `group.instance.id`.
    pub group_instance_id: Option<String>,
}

impl GroupMetadata {
    /// A group without membership (offsets not tied to a generation, as a consumer
    /// that assigns its partitions itself).
    pub fn for_group(group_id: impl Into<String>) -> Self {
        GroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// What the producer's handles and tasks share about its transactions.
#[derive(Debug)]
pub(crate) struct TxnShared {
    engine: Mutex<Transaction>,
    /// Sends between their state check and their partition's registration: a commit
    /// or an abort waits for them, so no record slips in after it started.
    sends: AtomicUsize,
    sends_done: Notify,
    /// Wakes the adder task.
    adder: Notify,
    /// An AddPartitionsToTxn round was settled.
    settled: Notify,
    /// Mirrors `Transaction::drops_unsent` for the sinks, which read it at every drain.
    drop_unsent: AtomicBool,
    /// Mirrors `Transaction::protocol() == V2` for the sinks (the Produce version).
    v2: AtomicBool,
    adder_started: AtomicBool,
    /// Batches failed since the producer was made, when the open transaction began: a
    /// commit refuses to go on if any failed since (a flush may have taken the report).
    failed_at_begin: std::sync::atomic::AtomicU64,
}

impl TxnShared {
    pub fn new(transactional_id: &str) -> Self {
        TxnShared {
            engine: Mutex::new(Transaction::new(transactional_id)),
            sends: AtomicUsize::new(0),
            sends_done: Notify::new(),
            adder: Notify::new(),
            settled: Notify::new(),
            drop_unsent: AtomicBool::new(false),
            v2: AtomicBool::new(false),
            adder_started: AtomicBool::new(false),
            failed_at_begin: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn engine(&self) -> MutexGuard<'_, Transaction> {
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the engine, then lets the sinks know whether unsent batches are to
    /// be dropped now.
    fn update<T>(&self, shared: &ProducerShared, f: impl FnOnce(&mut Transaction) -> T) -> T {
        let (out, started_dropping) = {
            let mut engine = self.engine();
            let out = f(&mut engine);
            // Under the lock, so two updates cannot leave the flag behind the state.
            let drop_unsent = engine.drops_unsent();
            let was = self.drop_unsent.swap(drop_unsent, Ordering::SeqCst);
            self.v2
                .store(engine.protocol() == TxnProtocol::V2, Ordering::SeqCst);
            (out, drop_unsent && !was)
        };
        if started_dropping {
            shared.sinks.wake_all();
        }
        out
    }

    /// The error batches not sent yet fail with, while the transaction is being (or
    /// must be) aborted.
    pub fn unsent_error(&self) -> Option<Error> {
        if !self.drop_unsent.load(Ordering::Acquire) {
            return None;
        }
        let engine = self.engine();
        Some(match engine.failure() {
            Some(f) => Error::Transaction(f.clone()),
            None => Error::Transaction(TransactionError::Aborted {
                transactional_id: engine.id().to_string(),
            }),
        })
    }

    /// A sink found a sequence gap (or a batch of unknown fate): the transaction can
    /// only be aborted now, and the abort bumps the epoch.
    pub fn handle_sequence_trouble(&self, shared: &ProducerShared) {
        self.update(shared, |t| {
            t.handle_sequence_trouble(
                "a batch failed in a way that needs a new producer epoch (a sequence gap, a batch of unknown fate, or an epoch the broker refused: see the batch's own error)"
                    .into(),
            );
        });
    }

    /// A Produce answer ended the producer (fenced, not authorised): fatal at once, as
    /// the Java client, rather than abortable until the abort's EndTxn is refused.
    /// A batch failed with `error`, whose code ends the producer.
    fn handle_fenced_by(&self, shared: &ProducerShared, error: &Error) {
        let code = error.code();
        self.update(shared, |t| {
            t.fail(ErrorClass::Fatal, format!("a batch failed: {error}"), code);
        });
    }

    pub fn handle_fenced(&self, shared: &ProducerShared, code: KafkaCode) {
        self.update(shared, |t| {
            t.fail(
                ErrorClass::Fatal,
                format!("a Produce answer said {code}"),
                Some(code),
            );
        });
    }

    /// Waits until no send is between its check and its registration.
    async fn sends_settled(&self) {
        loop {
            let done = self.sends_done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if self.sends.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }

    /// Waits until no AddPartitionsToTxn is pending or on the wire.
    async fn adds_settled(&self) {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if !self.engine().adding() {
                return;
            }
            self.adder.notify_one();
            settled.await;
        }
    }

    /// Wakes the adder so it can see the producer closing.
    pub fn wake_adder(&self) {
        self.adder.notify_one();
    }

    /// The versions Produce requests of this producer may go at now.
    pub fn produce_versions(&self) -> VersionRange {
        let protocol = if self.v2.load(Ordering::Acquire) {
            TxnProtocol::V2
        } else {
            TxnProtocol::V1
        };
        protocol.produce_versions()
    }
}

/// A send in progress, counted until it has registered its partition.
pub(crate) struct SendGuard<'a>(&'a TxnShared);

/// [`ProducerShared::enter_send`] for a transactional producer.
fn enter_transaction_send(txn: &TxnShared) -> Result<SendGuard<'_>> {
    txn.sends.fetch_add(1, Ordering::SeqCst);
    let guard = SendGuard(txn);
    txn.engine().check_send()?;
    Ok(guard)
}

impl Drop for SendGuard<'_> {
    fn drop(&mut self) {
        if self.0.sends.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.sends_done.notify_waiters();
        }
    }
}

impl ProducerShared {
    fn txn_of(&self, call: &'static str) -> Result<&TxnShared> {
        self.txn
            .as_ref()
            .ok_or(Error::Transaction(TransactionError::NotTransactional {
                call,
            }))
    }

    fn transactional_id(&self) -> &str {
        self.settings
            .transactional_id
            .as_deref()
            .unwrap_or_default()
    }

    /// For a transactional producer: whether a record may be sent now; the guard keeps
    /// a commit or an abort from starting until the record's partition is registered.
    /// Inlined for the producer without a transaction, on the per-record path.
    #[inline]
    pub(crate) fn enter_send(&self) -> Result<Option<SendGuard<'_>>> {
        match &self.txn {
            None => Ok(None),
            Some(txn) => enter_transaction_send(txn).map(Some),
        }
    }

    /// A record of a transactional producer went to `partition`: it joins the
    /// transaction (the adder asks the coordinator) unless it is in it already.
    pub(crate) fn register_partition(&self, partition: &ProducePartition) {
        if let Some(txn) = &self.txn {
            let key: TxnPartition = (partition.topic.clone(), partition.index);
            let joining = txn.engine().note_partition(&key);
            match joining {
                Joining::Ask => txn.adder.notify_one(),
                Joining::Joined => partition.state().join_transaction(),
                Joining::Nothing => {}
            }
        }
    }

    fn partition_of(&self, topic: &str, index: i32) -> Option<Arc<ProducePartition>> {
        let topics = self.topics.read().ok()?;
        topics.get(topic)?.partition(index)
    }

    fn current_producer(&self) -> Result<ProducerId> {
        self.identity.lock().ok().and_then(|p| *p).ok_or_else(|| {
            Error::Transaction(TransactionError::InvalidState {
                transactional_id: self.transactional_id().to_string(),
                call: "use the transaction",
                state: "before init_transactions",
            })
        })
    }

    /// The protocol the cluster's finalized `transaction.version` calls for: from the
    /// connected broker whose features epoch is the newest (the transaction coordinator's
    /// when no other answered ApiVersions with features).
    fn cluster_txn_protocol(&self, coordinator: Option<&crate::io::Broker>) -> TxnProtocol {
        let tables = self
            .client
            .brokers()
            .into_iter()
            .chain(coordinator.cloned())
            .filter_map(|b| b.api_versions());
        let newest = tables.max_by_key(|t| t.features_epoch());
        TxnProtocol::for_feature_level(
            newest.map_or(0, |t| t.feature_level(TRANSACTION_VERSION_FEATURE)),
        )
    }

    /// Takes `new` as the producer's id and epoch: the batches still queued get it and
    /// sequences from 0.
    fn adopt_producer(&self, new: ProducerId) {
        if let Ok(mut slot) = self.identity.lock() {
            *slot = Some(new);
        }
        for p in self.all_partitions() {
            p.state().restamp(new, Instant::now());
        }
    }

    /// Records `error` (from a transactional request) in the engine as its class says,
    /// and returns what the caller should see.
    fn fail_with(&self, txn: &TxnShared, api: ApiKey, error: Error) -> Error {
        let class = match error.code() {
            Some(code) => class_of(api, code),
            None if error.is_retriable() => ErrorClass::Retriable,
            None => ErrorClass::Abortable,
        };
        if class == ErrorClass::Retriable || class == ErrorClass::CoordinatorMoved {
            // Timed out retrying: the outcome is unknown; the call may be made again.
            return error;
        }
        let cause = format!("{api:?}: {error}");
        txn.update(self, |t| {
            t.fail(class, cause, error.code());
            t.failure().cloned().map_or(error, Error::Transaction)
        })
    }
}

impl Producer {
    /// Registers the transactional id with its coordinator and obtains the producer id
    /// and epoch (InitProducerId): an earlier producer with the same transactional id is
    /// fenced from now on, and a transaction it left open is aborted by the coordinator
    /// first (waited for). Must be called once before the first transaction.
    pub async fn init_transactions(&self) -> Result<()> {
        let shared = self.shared();
        let txn = shared.txn_of("init_transactions")?;
        txn.engine().check_init()?;
        let id = match driver::init_producer_id(shared, None).await {
            Ok(id) => id,
            Err(e) => return Err(shared.fail_with(txn, ApiKey::InitProducerId, e)),
        };
        if let Ok(mut slot) = shared.identity.lock() {
            *slot = Some(id);
        }
        let coordinator = shared
            .client
            .find_coordinator_of(CoordinatorKind::Transaction, shared.transactional_id())
            .await
            .ok();
        let protocol = shared.cluster_txn_protocol(coordinator.as_ref());
        txn.update(shared, |t| {
            t.adopt_protocol(protocol);
            t.handle_initialized();
        });
        self.start_adder()?;
        tracing::info!(
            transactional_id = shared.transactional_id(),
            producer_id = id.id,
            epoch = id.epoch,
            ?protocol,
            "transactions initialised"
        );
        Ok(())
    }

    /// The transaction protocol the next (or open) transaction uses: `Some(2)` for
    /// KIP-890's transactions v2 (the cluster finalized `transaction.version` 2 or more),
    /// `Some(1)` for the older protocol, `None` for a producer without
    /// `transactional.id`. Read from the brokers at `init_transactions` and whenever a
    /// transaction ends.
    pub fn transaction_version(&self) -> Option<i16> {
        let txn = self.shared().txn.as_ref()?;
        Some(match txn.engine().protocol() {
            TxnProtocol::V1 => 1,
            TxnProtocol::V2 => 2,
        })
    }

    /// Opens a transaction: records sent from now on until the commit or the abort
    /// belong to it. Nothing goes to the broker until the first record.
    pub fn begin_transaction(&self) -> Result<()> {
        let shared = self.shared();
        let txn = shared.txn_of("begin_transaction")?;
        txn.update(shared, Transaction::begin)?;
        txn.failed_at_begin
            .store(shared.failures.lifetime().0, Ordering::SeqCst);
        Ok(())
    }

    /// Makes `offsets` (each the next offset to consume) of `group`'s partitions part of
    /// the open transaction: they are committed with it, or not at all. `group` is the
    /// consuming member's identity ([`crate::group::GroupConsumer::group_metadata`]), so
    /// the group coordinator refuses the offsets of a generation that is over
    /// (the transaction then must be aborted). A commit or abort called meanwhile waits
    /// for this call. Dropping the future once its first request is out (a timeout of
    /// the application's) leaves the offsets' fate unknown: the transaction becomes
    /// abortable (a commit fails and says so), and the abort bumps the epoch so a late
    /// request cannot land in the next transaction.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        group: &GroupMetadata,
    ) -> Result<()> {
        let shared = self.shared();
        let txn = shared.txn_of("send_offsets_to_transaction")?;
        // Counted as a send: a commit or an abort begun meanwhile waits for it, so its
        // AddOffsetsToTxn and TxnOffsetCommit never come after the EndTxn.
        txn.sends.fetch_add(1, Ordering::SeqCst);
        let _in_transaction = SendGuard(txn);
        txn.engine().check_offsets()?;
        if group.group_id.is_empty() {
            return Err(Error::InvalidArgument(
                "send_offsets_to_transaction: the group id is empty".into(),
            ));
        }
        if let Some((tp, o)) = offsets.iter().find(|(_, o)| o.offset < 0) {
            return Err(Error::InvalidArgument(format!(
                "send_offsets_to_transaction: offset {} for {}-{} is negative",
                o.offset, tp.topic, tp.partition
            )));
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let producer = shared.current_producer()?;
        // Dropped before it completes, the call leaves the offsets' fate unknown (they
        // may be in the transaction or not): the transaction can then only be aborted.
        let unfinished = OffsetsUnfinished {
            shared,
            txn,
            done: false,
        };
        let protocol = txn.engine().protocol();
        if txn.engine().needs_group(&group.group_id) {
            if let Err(e) = self.add_offsets(producer, &group.group_id).await {
                return Err(unfinished.failed(ApiKey::AddOffsetsToTxn, e));
            }
        }
        // v1: added by AddOffsetsToTxn; v2: the TxnOffsetCommit adds it, even when its
        // answer is lost, so the transaction needs its EndTxn from here on.
        txn.engine().handle_group_added(&group.group_id);
        if let Err(e) = self
            .txn_offset_commit(producer, offsets, group, protocol)
            .await
        {
            return Err(unfinished.failed(ApiKey::TxnOffsetCommit, e));
        }
        unfinished.finished();
        Ok(())
    }

    /// Commits the open transaction: sends every record of it, waits for each answer,
    /// and ends it (EndTxn). If any record failed, nothing is committed and the error
    /// says the transaction must be aborted. A commit that timed out may be called
    /// again; it resumes.
    pub async fn commit_transaction(&self) -> Result<()> {
        let shared = self.shared();
        let txn = shared.txn_of("commit_transaction")?;
        txn.update(shared, Transaction::begin_commit)?;
        {
            // Lingering batches go now: a send waiting for memory waits for them.
            let _hurry = shared.hurry();
            txn.sends_settled().await;
        }
        let _ = shared.settle_batches().await;
        // Counted since the begin, not taken from the flush report: a flush inside the
        // transaction may have taken that already. Any failed batch fails the commit
        // (as the Java client: every failed batch makes the transaction abortable).
        let (failed, last) = shared.failures.lifetime();
        let since = failed.saturating_sub(txn.failed_at_begin.load(Ordering::SeqCst));
        // A batch refused because the producer was fenced ends it: the sink says so too,
        // but its word may reach the transaction after this commit read the tally.
        if let Some(ending) = shared.failures.ending().filter(|_| since > 0) {
            txn.handle_fenced_by(shared, &ending);
        } else if since > 0 {
            let last = last.map_or_else(String::new, |e| e.to_string());
            let cause = format!("{since} batch(es) failed in the transaction, the last: {last}");
            txn.update(shared, |t| {
                t.fail(ErrorClass::Abortable, cause, None);
            });
        }
        txn.adds_settled().await;
        self.end_transaction(txn, true).await
    }

    /// Aborts the open (or failed) transaction: records not sent yet fail with
    /// [`TransactionError::Aborted`] (or the transaction's failure), records on the wire
    /// are waited for, and read_committed consumers never see any of them. The producer
    /// can begin a new transaction afterwards.
    pub async fn abort_transaction(&self) -> Result<()> {
        let shared = self.shared();
        let txn = shared.txn_of("abort_transaction")?;
        txn.update(shared, Transaction::begin_abort)?;
        {
            let _hurry = shared.hurry();
            txn.sends_settled().await;
        }
        // The sinks fail what is not on the wire at their next drain.
        shared.sinks.wake_all();
        let _ = shared.settle_batches().await;
        txn.adds_settled().await;
        self.end_transaction(txn, false).await
    }

    /// Ends the transaction at the coordinator when it knows of it, bumps the epoch after
    /// an abort that needs it, and lets the partitions leave.
    async fn end_transaction(&self, txn: &TxnShared, commit: bool) -> Result<()> {
        let shared = self.shared();
        let failed_in_txn =
            shared.failures.lifetime().0 > txn.failed_at_begin.load(Ordering::SeqCst);
        let (needed, bump, state) = {
            let t = txn.engine();
            // A batch that failed (dropped by the abort included) may have had a
            // sequence: the next transaction needs a new epoch, or its first batch would
            // leave a gap (KIP-360; the Java client bumps on every failed sequenced batch).
            (
                t.needs_end_txn(),
                !commit && t.abort_needs_bump(failed_in_txn),
                t.state(),
            )
        };
        if commit && state != TxnState::Committing {
            // The transaction failed meanwhile (a batch, the offsets, the adder): nothing
            // may be committed.
            return Err(txn
                .engine()
                .failure()
                .cloned()
                .map_or(Error::ShuttingDown, Error::Transaction));
        }
        if needed {
            let producer = shared.current_producer()?;
            let protocol = txn.engine().protocol();
            match self.end_txn(producer, commit, protocol).await {
                // v2: every EndTxn bumps the epoch (a new id when it ran out).
                Ok(Some(new)) => shared.adopt_producer(new),
                Ok(None) => {}
                Err(e) => return Err(shared.fail_with(txn, ApiKey::EndTxn, e)),
            }
        }
        if txn.engine().state() == TxnState::Fatal {
            return Err(txn
                .engine()
                .failure()
                .cloned()
                .map_or(Error::ShuttingDown, Error::Transaction));
        }
        // Read again for the next transaction (this one ended with the protocol it began
        // with); a move from v1 to v2 bumps the epoch first, so nothing of this v1
        // transaction counts as added to the next (KAFKA-18227).
        let coordinator = shared
            .client
            .find_coordinator_of(CoordinatorKind::Transaction, shared.transactional_id())
            .await
            .ok();
        let next_protocol = shared.cluster_txn_protocol(coordinator.as_ref());
        let upgrade =
            txn.engine().protocol() == TxnProtocol::V1 && next_protocol == TxnProtocol::V2;
        if bump || upgrade {
            let current = shared.current_producer()?;
            let new = match driver::init_producer_id(shared, Some(current)).await {
                Ok(id) => id,
                Err(e) => return Err(shared.fail_with(txn, ApiKey::InitProducerId, e)),
            };
            shared.adopt_producer(new);
            tracing::info!(epoch = new.epoch, upgrade, "producer epoch bumped");
        }
        // The partitions leave before the state says Ready, so a transaction begun at
        // once cannot send through a partition still marked in this one.
        for (topic, index) in txn.engine().added_partitions() {
            if let Some(p) = shared.partition_of(&topic, index) {
                p.state().leave_transaction();
            }
        }
        txn.update(shared, |t| {
            t.handle_ended();
            t.adopt_protocol(next_protocol);
        });
        tracing::debug!(
            transactional_id = shared.transactional_id(),
            commit,
            "transaction ended"
        );
        Ok(())
    }

    /// At close: a transaction still open (or failed) is aborted rather than left for
    /// the coordinator to time out after `transaction.timeout.ms`, which would hold
    /// read_committed consumers back until then.
    pub(super) async fn abort_open_transaction(&self) {
        let Some(txn) = &self.shared().txn else {
            return;
        };
        let state = txn.engine().state();
        if matches!(
            state,
            TxnState::InTransaction
                | TxnState::Abortable
                | TxnState::Aborting
                | TxnState::Committing
        ) {
            tracing::info!(?state, "closing with a transaction open: aborting it");
            if state == TxnState::Committing {
                // A commit that timed out: its outcome is unknown and it cannot be
                // turned into an abort; the coordinator finishes or times it out.
                return;
            }
            if let Err(e) = self.abort_transaction().await {
                tracing::warn!(error = %e, "aborting the open transaction at close failed");
            }
        }
    }

    /// [`Producer::init_transactions`] for plain threads.
    pub fn init_transactions_blocking(&self) -> Result<()> {
        crate::client::block_on(self.init_transactions())
    }

    /// [`Producer::commit_transaction`] for plain threads.
    pub fn commit_transaction_blocking(&self) -> Result<()> {
        crate::client::block_on(self.commit_transaction())
    }

    /// [`Producer::abort_transaction`] for plain threads.
    pub fn abort_transaction_blocking(&self) -> Result<()> {
        crate::client::block_on(self.abort_transaction())
    }

    /// Starts the task that adds partitions to the open transaction.
    fn start_adder(&self) -> Result<()> {
        let shared = self.shared().clone();
        let Some(txn) = &shared.txn else {
            return Ok(());
        };
        if txn.adder_started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let runtime = shared.client.runtime().clone();
        runtime.spawn_on(runtime.worker_for(-1), move |_| run_adder(shared))?;
        Ok(())
    }

    /// Ends the transaction; in v2 the answer's new producer id and epoch.
    async fn end_txn(
        &self,
        producer: ProducerId,
        commit: bool,
        protocol: TxnProtocol,
    ) -> Result<Option<ProducerId>> {
        let request = EndTxnRequest::default()
            .with_transactional_id(self.shared().transactional_id().to_string())
            .with_producer_id(producer.id)
            .with_producer_epoch(producer.epoch)
            .with_committed(commit);
        self.at_txn_coordinator(request, protocol.end_txn_versions(), |r| {
            code_result(
                r.error_code,
                bumped_producer(r.producer_id, r.producer_epoch),
            )
        })
        .await
    }

    async fn add_offsets(&self, producer: ProducerId, group: &str) -> Result<()> {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(self.shared().transactional_id().to_string())
            .with_producer_id(producer.id)
            .with_producer_epoch(producer.epoch)
            .with_group_id(group.to_string());
        let versions = VersionRange {
            min: 0,
            max: ADD_OFFSETS_MAX_VERSION,
        };
        self.at_txn_coordinator(request, versions, |r| code_result(r.error_code, ()))
            .await
    }

    /// Sends `request` (at a version within `versions`) to the transaction coordinator,
    /// following it while it moves; `read` turns the answer into its result or error code.
    async fn at_txn_coordinator<R, T>(
        &self,
        request: R,
        versions: VersionRange,
        read: impl Fn(&R::Response) -> std::result::Result<T, KafkaCode>,
    ) -> Result<T>
    where
        R: crate::protocol::Request + Clone + Send + 'static,
    {
        let shared = self.shared();
        let id = shared.transactional_id().to_string();
        let api = R::API_KEY;
        with_coordinator(
            &shared.client,
            CoordinatorKind::Transaction,
            &id,
            api,
            |broker| {
                let (request, read) = (request.clone(), &read);
                async move {
                    let version = version_within(&broker, api, versions)?;
                    let r = broker.send_version(request, version).await?;
                    Ok(read(&r))
                }
            },
        )
        .await
    }

    async fn txn_offset_commit(
        &self,
        producer: ProducerId,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        group: &GroupMetadata,
        protocol: TxnProtocol,
    ) -> Result<()> {
        let shared = self.shared();
        let versions = protocol.txn_offset_commit_versions();
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(shared.transactional_id().to_string())
            .with_group_id(group.group_id.clone())
            .with_producer_id(producer.id)
            .with_producer_epoch(producer.epoch)
            .with_generation_id(group.generation_id)
            .with_member_id(group.member_id.clone())
            .with_group_instance_id(group.group_instance_id.clone())
            .with_topics(offset_topics(offsets));
        with_coordinator(
            &shared.client,
            CoordinatorKind::Group,
            &group.group_id,
            ApiKey::TxnOffsetCommit,
            |broker| {
                let request = request.clone();
                async move {
                    let version = version_within(&broker, ApiKey::TxnOffsetCommit, versions)?;
                    let r = broker.send_version(request, version).await?;
                    let first = r
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| KafkaCode(p.error_code))
                        .find(|c| !c.is_ok());
                    Ok(first.map_or(Ok(()), Err))
                }
            },
        )
        .await
    }
}

/// The offsets as TxnOffsetCommit's topics.
fn offset_topics(
    offsets: &[(TopicPartition, OffsetAndMetadata)],
) -> Vec<TxnOffsetCommitRequestTopic> {
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (tp, o) in offsets {
        let partition = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(o.offset)
            .with_committed_leader_epoch(o.wire_epoch())
            .with_committed_metadata(Some(o.metadata.clone()));
        match topics.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                TxnOffsetCommitRequestTopic::default()
                    .with_name(tp.topic.clone())
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}

/// The version to send `api` at: the highest both sides speak, at most `versions.max`,
/// and refused when that is below `versions.min` (a broker that finalized transactions
/// v2 but cannot take its requests).
fn version_within(broker: &crate::io::Broker, api: ApiKey, versions: VersionRange) -> Result<i16> {
    broker
        .api_versions()
        .and_then(|v| v.version_for(api))
        .map(|v| v.min(versions.max))
        .filter(|&v| v >= versions.min)
        .ok_or_else(|| {
            Error::Io(crate::engine::error::IoError::UnsupportedApi {
                api,
                addr: broker.addr().to_string(),
            })
        })
}

/// EndTxn v5's new producer id and epoch (-1 in older answers: nothing to take).
fn bumped_producer(id: i64, epoch: i16) -> Option<ProducerId> {
    (id >= 0 && epoch >= 0).then_some(ProducerId { id, epoch })
}

/// A `send_offsets_to_transaction` between its first request and its last answer: if
/// the future is dropped there, the offsets may or may not be in the transaction, so it
/// is made abortable (committing it could commit offsets the application believes were
/// not sent, or leave out ones it believes were), and its abort bumps the epoch.
struct OffsetsUnfinished<'a> {
    shared: &'a ProducerShared,
    txn: &'a TxnShared,
    done: bool,
}

impl OffsetsUnfinished<'_> {
    fn failed(mut self, api: ApiKey, error: Error) -> Error {
        self.done = true;
        self.shared.fail_with(self.txn, api, error)
    }

    fn finished(mut self) {
        self.done = true;
    }
}

impl Drop for OffsetsUnfinished<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.txn
                .update(self.shared, Transaction::handle_offsets_cancelled);
        }
    }
}

fn code_result<T>(code: i16, ok: T) -> std::result::Result<T, KafkaCode> {
    let code = KafkaCode(code);
    if code.is_ok() { Ok(ok) } else { Err(code) }
}

/// The adder: asks the coordinator for the partitions registered since its last
/// request, one AddPartitionsToTxn at a time, and lets each added partition's sink send.
async fn run_adder(shared: Arc<ProducerShared>) {
    let Some(txn) = &shared.txn else {
        return;
    };
    let mut ending_retries = 0u32;
    loop {
        if shared.closed.load(Ordering::Acquire) && !txn.engine().adding() {
            break;
        }
        let Some(round) = txn.engine().poll_add_partitions() else {
            txn.settled.notify_waiters();
            txn.adder.notified().await;
            continue;
        };
        let outcome = match add_partitions(&shared, &round).await {
            Ok(codes) => txn.update(&shared, |t| t.handle_add_partitions(&codes)),
            Err(e) => {
                tracing::debug!(error = %e, "AddPartitionsToTxn failed");
                let fatal = e
                    .code()
                    .is_some_and(|c| class_of(ApiKey::AddPartitionsToTxn, c) == ErrorClass::Fatal);
                txn.update(&shared, |t| {
                    t.handle_add_failed();
                    if fatal {
                        t.fail(
                            ErrorClass::Fatal,
                            format!("AddPartitionsToTxn: {e}"),
                            e.code(),
                        );
                    } else if !e.is_retriable() {
                        t.fail(
                            ErrorClass::Abortable,
                            format!("AddPartitionsToTxn: {e}"),
                            e.code(),
                        );
                    }
                });
                AddOutcome {
                    retry: e.is_retriable(),
                    // The coordinator's broker may be gone: look it up again.
                    find_coordinator: e.is_retriable(),
                    ..AddOutcome::default()
                }
            }
        };
        admit(&shared, &outcome.added);
        if outcome.find_coordinator {
            shared
                .client
                .invalidate_coordinator(CoordinatorKind::Transaction, shared.transactional_id());
        }
        txn.settled.notify_waiters();
        if outcome.retry {
            let backoff = if outcome.previous_ending {
                ending_retries += 1;
                previous_txn_ending_backoff(ending_retries).min(shared.settings.retry_backoff)
            } else {
                shared.settings.retry_backoff
            };
            tokio::time::sleep(backoff).await;
        } else {
            ending_retries = 0;
        }
    }
    txn.settled.notify_waiters();
}

/// The delay before the `n`-th retry (from 1) of an AddPartitionsToTxn answered
/// CONCURRENT_TRANSACTIONS: the coordinator is writing the previous transaction's
/// markers, which takes a few milliseconds, and the first add of every transaction meets
/// it right after a commit: 2 ms doubling up to 20 ms (the Java client waits 20 ms at
/// once), never more than `retry.backoff.ms`.
fn previous_txn_ending_backoff(n: u32) -> std::time::Duration {
    std::time::Duration::from_millis((2u64 << n.saturating_sub(1).min(4)).min(20))
}

#[cfg(test)]
#[test]
fn retries_after_a_concurrent_transaction_start_short_and_grow_to_20_ms() {
    let ms = |n| previous_txn_ending_backoff(n).as_millis();
    assert_eq!(
        [ms(1), ms(2), ms(3), ms(4), ms(5), ms(50)],
        [2, 4, 8, 16, 20, 20]
    );
}

/// Lets the sinks of the partitions the coordinator added send their batches.
fn admit(shared: &ProducerShared, added: &[TxnPartition]) {
    for (topic, index) in added {
        if let Some(p) = shared.partition_of(topic, *index) {
            p.state().join_transaction();
        }
    }
}

/// One AddPartitionsToTxn attempt for `round`: each partition's code (a code for the
/// whole request is every partition's).
async fn add_partitions(
    shared: &ProducerShared,
    round: &[TxnPartition],
) -> Result<Vec<(TxnPartition, KafkaCode)>> {
    let producer = shared.current_producer()?;
    let id = shared.transactional_id().to_string();
    let broker = shared
        .client
        .find_coordinator_of(CoordinatorKind::Transaction, &id)
        .await?;
    broker.connect().await?;
    let version = version_within(
        &broker,
        ApiKey::AddPartitionsToTxn,
        VersionRange {
            min: 0,
            max: ADD_PARTITIONS_MAX_VERSION,
        },
    )?;
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, index) in round {
        match topics.iter_mut().find(|t| *t.name == **topic) {
            Some(t) => t.partitions.push(*index),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(topic.to_string())
                    .with_partitions(vec![*index]),
            ),
        }
    }
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(id)
        .with_v3_and_below_producer_id(producer.id)
        .with_v3_and_below_producer_epoch(producer.epoch)
        .with_v3_and_below_topics(topics);
    let response = broker.send_version(request, version).await?;
    let whole = KafkaCode(response.error_code);
    let mut codes = Vec::with_capacity(round.len());
    for result in &response.results_by_topic_v3_and_below {
        for p in &result.results_by_partition {
            if let Some(key) = round
                .iter()
                .find(|(t, i)| **t == *result.name && *i == p.partition_index)
            {
                codes.push((key.clone(), KafkaCode(p.partition_error_code)));
            }
        }
    }
    if !whole.is_ok() {
        codes = round.iter().map(|p| (p.clone(), whole)).collect();
    }
    Ok(codes)
}
