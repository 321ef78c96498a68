//! The transactional producer's rules, sans-IO (KIP-98, with KIP-360's epoch bump after
//! an abort, KIP-447's group metadata on offsets and KIP-890's transactions v2): which
//! calls each state allows, which partitions must be added to the transaction before
//! their batches go out, how each broker error code is classed, and what ends a
//! transaction. The producer's driver (`producer::txn`) does the I/O and feeds the
//! answers back here.
//!
//! States, as the Java client's `TransactionManager`:
//! - `Uninitialized` → (`init_transactions`) → `Ready` → (`begin`) → `InTransaction`.
//! - `InTransaction` → (`commit`) → `Committing` → `Ready`.
//! - `InTransaction` or `Abortable` → (`abort`) → `Aborting` → `Ready`.
//! - An abortable error (a batch failed, a partition or the offsets could not be added, a
//!   commit refused for a reason the next transaction may not share) → `Abortable`: only
//!   `abort` is allowed, and the batches not sent yet fail with that error.
//! - A fatal error (fenced by a newer producer with the same transactional id, not
//!   authorised, a broker that lost the producer's state) → `Fatal`: the producer can only
//!   be closed; nothing more is written.
//!
//! Two protocols ([`TxnProtocol`]), chosen from the cluster's finalized
//! `transaction.version` at `init_transactions` and again whenever a transaction ends
//! (never in the middle of one):
//! - **v1**: a batch of a partition goes out only once the coordinator has added the
//!   partition to the transaction (AddPartitionsToTxn, all the partitions first sent to
//!   since the last request in one request per round), offsets only after
//!   AddOffsetsToTxn; an abort after something that may have left a sequence gap ends
//!   with an epoch bump (InitProducerId with the current id and epoch).
//! - **v2** (KIP-890, Kafka 4.0+): a partition is in the transaction as soon as a batch
//!   goes to it (Produce v12 has the partition leader add it), offsets as soon as they
//!   are sent (TxnOffsetCommit v5); every EndTxn (v5) bumps the epoch and its answer
//!   carries the new one, so no InitProducerId follows an abort. Moving from v1 to v2
//!   after init costs one bump when the v1 transaction ended (as the Java client,
//!   KAFKA-18227), so none of its partitions counts as added to the next one.
//!
//! The set of partitions in the transaction is emptied when the transaction ends.
//!
//! Errors are classed once, in [`class_of`]: retriable codes are retried inside (the
//! coordinator is looked up again when it moved), the others end the transaction or the
//! producer.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::protocol::{ApiKey, KafkaCode, VersionRange};

/// A topic and partition of the transaction.
pub(crate) type TxnPartition = (Arc<str>, i32);

/// The transaction protocol, from the cluster's finalized `transaction.version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnProtocol {
    /// Transactions v1 (KIP-98): partitions and offsets added explicitly, Produce at
    /// most v11, EndTxn at most v4, TxnOffsetCommit at most v4.
    V1,
    /// Transactions v2 (KIP-890): partitions and offsets added implicitly, Produce v12,
    /// EndTxn v5 (which bumps the epoch), TxnOffsetCommit v5.
    V2,
}

/// The versions a transaction's requests may go at, by protocol: in v1 at most the
/// last version before KIP-890 (a higher one tells the broker the client speaks v2), in
/// v2 exactly the first version of v2 (kring does not speak the topic-id versions after
/// it).
impl TxnProtocol {
    /// The protocol for a cluster whose finalized `transaction.version` is `level`.
    pub fn for_feature_level(level: i16) -> Self {
        if level >= 2 {
            TxnProtocol::V2
        } else {
            TxnProtocol::V1
        }
    }

    /// Produce of a transactional producer.
    pub fn produce_versions(self) -> VersionRange {
        self.pick(
            VersionRange { min: 0, max: 11 },
            VersionRange { min: 12, max: 12 },
        )
    }

    /// EndTxn (v5 bumps the epoch and names it).
    pub fn end_txn_versions(self) -> VersionRange {
        self.pick(
            VersionRange { min: 0, max: 4 },
            VersionRange { min: 5, max: 5 },
        )
    }

    /// TxnOffsetCommit (v5 adds the group to the transaction itself).
    pub fn txn_offset_commit_versions(self) -> VersionRange {
        self.pick(
            VersionRange { min: 0, max: 4 },
            VersionRange { min: 5, max: 5 },
        )
    }

    fn pick(self, v1: VersionRange, v2: VersionRange) -> VersionRange {
        match self {
            TxnProtocol::V1 => v1,
            TxnProtocol::V2 => v2,
        }
    }
}

/// What sending to a partition means for the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joining {
    /// Nothing to do: the partition is in the transaction or asked for already (or no
    /// transaction is open).
    Nothing,
    /// v1: the partition is to be asked for (AddPartitionsToTxn).
    Ask,
    /// v2: the partition is in the transaction from now on; its batches may go out.
    Joined,
}

/// Where the transactional producer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// `init_transactions` has not completed.
    Uninitialized,
    /// No transaction open.
    Ready,
    /// A transaction is open: sends and offsets are allowed.
    InTransaction,
    /// A commit is under way.
    Committing,
    /// An abort is under way.
    Aborting,
    /// The transaction must be aborted.
    Abortable,
    /// The producer can do nothing more but close.
    Fatal,
}

/// Why a transactional call was refused or a transaction failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// A call made in a state that does not allow it (a send before
    /// `begin_transaction`, a commit with none open, `init_transactions` twice...).
    #[error("transactional id {transactional_id}: cannot {call} {state}")]
    InvalidState {
        /// The transactional id.
        transactional_id: String,
        /// What was called.
        call: &'static str,
        /// Why not, in words ("before init_transactions", "with no transaction open").
        state: &'static str,
    },
    /// The transaction failed and must be aborted (`abort_transaction`); the producer
    /// can go on with a new one afterwards.
    #[error("transactional id {transactional_id}: the transaction must be aborted: {cause}")]
    Abortable {
        /// The transactional id.
        transactional_id: String,
        /// What failed.
        cause: String,
    },
    /// The producer can write nothing more (fenced by a newer instance with the same
    /// transactional id, not authorised, ...): close it.
    #[error("transactional id {transactional_id}: the producer can no longer be used: {cause}")]
    Fatal {
        /// The transactional id.
        transactional_id: String,
        /// What failed.
        cause: String,
        /// The broker's code, when a broker said so.
        code: Option<KafkaCode>,
    },
    /// The producer was made without `transactional.id`.
    #[error("{call} needs a transactional producer (set transactional.id)")]
    NotTransactional {
        /// What was called.
        call: &'static str,
    },
    /// The record was not sent: its transaction was aborted.
    #[error(
        "transactional id {transactional_id}: the transaction was aborted before this record was sent"
    )]
    Aborted {
        /// The transactional id.
        transactional_id: String,
    },
}

/// How an error code is handled inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// Retry the same request later.
    Retriable,
    /// Find the coordinator again, then retry.
    CoordinatorMoved,
    /// The transaction must be aborted.
    Abortable,
    /// The producer is done.
    Fatal,
}

/// The class of `code` answered to `api` (not NONE).
pub(crate) fn class_of(api: ApiKey, code: KafkaCode) -> ErrorClass {
    match code {
        KafkaCode::NOT_COORDINATOR
        | KafkaCode::COORDINATOR_NOT_AVAILABLE
        | KafkaCode::COORDINATOR_LOAD_IN_PROGRESS => ErrorClass::CoordinatorMoved,
        KafkaCode::PRODUCER_FENCED
        | KafkaCode::INVALID_PRODUCER_EPOCH
        | KafkaCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        | KafkaCode::INVALID_PRODUCER_ID_MAPPING
        | KafkaCode::INVALID_TXN_STATE
        | KafkaCode::INVALID_TRANSACTION_TIMEOUT
        | KafkaCode::TRANSACTIONAL_ID_NOT_FOUND
        | KafkaCode::UNSUPPORTED_VERSION
        | KafkaCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
        | KafkaCode::CLUSTER_AUTHORIZATION_FAILED => ErrorClass::Fatal,
        // The group moved on: these offsets belong to a generation that is over.
        KafkaCode::UNKNOWN_MEMBER_ID
        | KafkaCode::ILLEGAL_GENERATION
        | KafkaCode::FENCED_INSTANCE_ID
            if api == ApiKey::TxnOffsetCommit =>
        {
            ErrorClass::Abortable
        }
        // AddPartitionsToTxn: not attempted because another partition failed.
        KafkaCode::OPERATION_NOT_ATTEMPTED => ErrorClass::Retriable,
        // The topic may be on its way (metadata not everywhere yet).
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION if api == ApiKey::AddPartitionsToTxn => {
            ErrorClass::Retriable
        }
        code if code.is_retriable() => ErrorClass::Retriable,
        _ => ErrorClass::Abortable,
    }
}

/// Whether `code` in a Produce answer ends a transactional producer (as the Java client:
/// fenced by a newer instance, or not authorised): not a failed batch to abort for, but
/// the producer's end.
pub(crate) fn ends_the_producer(code: KafkaCode) -> bool {
    [
        KafkaCode::PRODUCER_FENCED,
        KafkaCode::INVALID_PRODUCER_EPOCH,
        KafkaCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaCode::CLUSTER_AUTHORIZATION_FAILED,
    ]
    .contains(&code)
}

/// What an AddPartitionsToTxn answer settled.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct AddOutcome {
    /// Partitions now in the transaction: their batches may go out.
    pub added: Vec<TxnPartition>,
    /// Some partitions are to be asked for again (after a backoff).
    pub retry: bool,
    /// The coordinator is to be found again first.
    pub find_coordinator: bool,
    /// The coordinator is still completing the previous transaction
    /// (CONCURRENT_TRANSACTIONS): that takes milliseconds, so the retry should come
    /// sooner than `retry.backoff.ms` (the Java client waits 20 ms there).
    pub previous_ending: bool,
}

/// The transaction of one transactional producer.
#[derive(Debug)]
pub(crate) struct Transaction {
    transactional_id: String,
    state: TxnState,
    /// Why the transaction (or the producer) failed, in `Abortable` and `Fatal`.
    failure: Option<TransactionError>,
    /// Partitions the coordinator added to the open transaction.
    added: BTreeSet<TxnPartition>,
    /// Partitions sent to, not asked for yet.
    pending: BTreeSet<TxnPartition>,
    /// Partitions in the AddPartitionsToTxn request on the wire.
    requesting: BTreeSet<TxnPartition>,
    /// Groups whose offsets are part of the open transaction (AddOffsetsToTxn done).
    groups: BTreeSet<String>,
    /// Something went wrong in this transaction that may have left a sequence gap: the
    /// abort ends with an epoch bump (KIP-360).
    needs_bump: bool,
    /// The protocol of the open (or next) transaction.
    protocol: TxnProtocol,
}

impl Transaction {
    /// A producer with `transactional_id`, before `init_transactions`.
    pub fn new(transactional_id: impl Into<String>) -> Self {
        Transaction {
            transactional_id: transactional_id.into(),
            state: TxnState::Uninitialized,
            failure: None,
            added: BTreeSet::new(),
            pending: BTreeSet::new(),
            requesting: BTreeSet::new(),
            groups: BTreeSet::new(),
            needs_bump: false,
            protocol: TxnProtocol::V1,
        }
    }

    /// The protocol of the open (or next) transaction.
    pub fn protocol(&self) -> TxnProtocol {
        self.protocol
    }

    /// Takes `protocol` for the transactions from now on: at `init_transactions`, or
    /// once a transaction ended (never while one is open, where it is ignored). Returns
    /// whether the producer must bump its epoch before the next transaction: a move from
    /// v1 to v2 after init (KAFKA-18227).
    pub fn adopt_protocol(&mut self, protocol: TxnProtocol) -> bool {
        let upgrade = match self.state {
            TxnState::Uninitialized => false,
            TxnState::Ready => self.protocol == TxnProtocol::V1 && protocol == TxnProtocol::V2,
            _ => return false,
        };
        self.protocol = protocol;
        upgrade
    }

    /// The transactional id.
    pub fn id(&self) -> &str {
        &self.transactional_id
    }

    /// Where it stands.
    pub fn state(&self) -> TxnState {
        self.state
    }

    fn invalid(&self, call: &'static str, state: &'static str) -> TransactionError {
        TransactionError::InvalidState {
            transactional_id: self.transactional_id.clone(),
            call,
            state,
        }
    }

    /// The error a call gets in the current state when it is not one of `allowed`.
    fn require(&self, call: &'static str, allowed: &[TxnState]) -> Result<(), TransactionError> {
        if allowed.contains(&self.state) {
            return Ok(());
        }
        Err(match self.state {
            TxnState::Fatal | TxnState::Abortable => self
                .failure
                .clone()
                .unwrap_or_else(|| self.invalid(call, "now")),
            TxnState::Uninitialized => self.invalid(call, "before init_transactions"),
            TxnState::Ready => self.invalid(call, "with no transaction open (begin_transaction)"),
            TxnState::InTransaction => self.invalid(call, "while a transaction is open"),
            TxnState::Committing => self.invalid(call, "while a commit is under way"),
            TxnState::Aborting => self.invalid(call, "while an abort is under way"),
        })
    }

    /// `init_transactions` may start.
    pub fn check_init(&self) -> Result<(), TransactionError> {
        self.require("init_transactions", &[TxnState::Uninitialized])
    }

    /// InitProducerId succeeded.
    pub fn handle_initialized(&mut self) {
        if self.state == TxnState::Uninitialized {
            self.state = TxnState::Ready;
        }
    }

    /// Opens a transaction.
    pub fn begin(&mut self) -> Result<(), TransactionError> {
        self.require("begin_transaction", &[TxnState::Ready])?;
        self.state = TxnState::InTransaction;
        Ok(())
    }

    /// Whether a record may be sent now.
    pub fn check_send(&self) -> Result<(), TransactionError> {
        self.require("send", &[TxnState::InTransaction])
    }

    /// A record went to `partition`: whether it must be asked for (v1), joins the
    /// transaction at once (v2), or is in it or asked for already.
    pub fn note_partition(&mut self, partition: &TxnPartition) -> Joining {
        // A send that passed its check before an abort began registers late: its batch
        // fails with the abort, and the partition must not be asked for.
        if !self.is_open() || self.added.contains(partition) || self.requesting.contains(partition)
        {
            return Joining::Nothing;
        }
        match self.protocol {
            TxnProtocol::V2 => {
                self.added.insert(partition.clone());
                Joining::Joined
            }
            TxnProtocol::V1 if self.pending.insert(partition.clone()) => Joining::Ask,
            TxnProtocol::V1 => Joining::Nothing,
        }
    }

    /// Whether `partition` is in the open transaction (its batches may go out).
    #[cfg(test)]
    pub fn is_added(&self, partition: &TxnPartition) -> bool {
        self.added.contains(partition)
    }

    /// The partitions for the next AddPartitionsToTxn request, if one may go now (none
    /// is on the wire, and the transaction is open or committing).
    pub fn poll_add_partitions(&mut self) -> Option<Vec<TxnPartition>> {
        let open = matches!(self.state, TxnState::InTransaction | TxnState::Committing);
        if !open || !self.requesting.is_empty() || self.pending.is_empty() {
            return None;
        }
        self.requesting = std::mem::take(&mut self.pending);
        Some(self.requesting.iter().cloned().collect())
    }

    /// Whether an AddPartitionsToTxn is on the wire or waits to go.
    pub fn adding(&self) -> bool {
        !self.pending.is_empty() || !self.requesting.is_empty()
    }

    /// Applies an AddPartitionsToTxn answer: each requested partition's code (a code for
    /// the whole request applies to every one of them; a partition the answer left out
    /// is asked for again).
    pub fn handle_add_partitions(&mut self, codes: &[(TxnPartition, KafkaCode)]) -> AddOutcome {
        let mut outcome = AddOutcome::default();
        let requested = std::mem::take(&mut self.requesting);
        for partition in requested {
            let code = codes
                .iter()
                .find(|(p, _)| *p == partition)
                .map_or(KafkaCode::OPERATION_NOT_ATTEMPTED, |(_, c)| *c);
            if code.is_ok() {
                self.added.insert(partition.clone());
                outcome.added.push(partition);
                continue;
            }
            match class_of(ApiKey::AddPartitionsToTxn, code) {
                ErrorClass::Retriable => {
                    outcome.retry = true;
                    outcome.previous_ending |= code == KafkaCode::CONCURRENT_TRANSACTIONS;
                }
                ErrorClass::CoordinatorMoved => {
                    outcome.retry = true;
                    outcome.find_coordinator = true;
                }
                class => {
                    let cause = format!(
                        "adding {}-{} to the transaction: {code}",
                        partition.0, partition.1
                    );
                    self.fail(class, cause, Some(code));
                }
            }
            if outcome.retry && self.is_open() {
                self.pending.insert(partition);
            }
        }
        if !self.is_open() {
            self.pending.clear();
            outcome.retry = false;
        }
        outcome
    }

    /// The AddPartitionsToTxn request could not be made or answered (a connection error
    /// or the coordinator lookup failed): its partitions are asked for again.
    pub fn handle_add_failed(&mut self) {
        let requested = std::mem::take(&mut self.requesting);
        if self.is_open() {
            self.pending.extend(requested);
        }
    }

    fn is_open(&self) -> bool {
        matches!(self.state, TxnState::InTransaction | TxnState::Committing)
    }

    /// Whether offsets may be sent to the transaction now.
    pub fn check_offsets(&self) -> Result<(), TransactionError> {
        self.require("send_offsets_to_transaction", &[TxnState::InTransaction])
    }

    /// Whether `group` must still be added (AddOffsetsToTxn) to the open transaction
    /// before its offsets are sent: in v1, once per group; never in v2, where the
    /// TxnOffsetCommit adds it.
    pub fn needs_group(&self, group: &str) -> bool {
        self.protocol == TxnProtocol::V1 && !self.groups.contains(group)
    }

    /// `group` is part of the open transaction: AddOffsetsToTxn succeeded (v1), or its
    /// TxnOffsetCommit is about to go (v2, which may add it even if no answer comes).
    pub fn handle_group_added(&mut self, group: &str) {
        self.groups.insert(group.to_string());
    }

    /// Starts a commit.
    pub fn begin_commit(&mut self) -> Result<(), TransactionError> {
        // Again from Committing: the previous attempt timed out with its outcome unknown,
        // and a commit is resumed, never turned into an abort (as the Java client).
        self.require(
            "commit_transaction",
            &[TxnState::InTransaction, TxnState::Committing],
        )?;
        self.state = TxnState::Committing;
        Ok(())
    }

    /// Starts an abort (of an open or a failed transaction).
    pub fn begin_abort(&mut self) -> Result<(), TransactionError> {
        self.require(
            "abort_transaction",
            &[
                TxnState::InTransaction,
                TxnState::Abortable,
                TxnState::Aborting,
            ],
        )?;
        self.state = TxnState::Aborting;
        self.pending.clear();
        Ok(())
    }

    /// Whether the coordinator knows of the transaction (so an EndTxn is needed to end
    /// it): a partition or a group was added, or a request to add some may have
    /// reached it.
    pub fn needs_end_txn(&self) -> bool {
        !self.added.is_empty() || !self.groups.is_empty() || !self.requesting.is_empty()
    }

    /// Whether the abort must end with an epoch bump by InitProducerId: in v1 when
    /// something in the transaction may have left a sequence gap (or a batch of it
    /// failed: `batch_failed`); never in v2, whose EndTxn bumps the epoch itself.
    pub fn abort_needs_bump(&self, batch_failed: bool) -> bool {
        self.protocol == TxnProtocol::V1 && (self.needs_bump || batch_failed)
    }

    /// Something in this transaction may have left a sequence gap (a batch failed or was
    /// dropped after it had a sequence): the producer needs a new epoch, which the abort
    /// obtains; until then the transaction can only be aborted.
    pub fn handle_sequence_trouble(&mut self, cause: String) {
        self.needs_bump = true;
        if self.state == TxnState::InTransaction || self.state == TxnState::Committing {
            self.fail(ErrorClass::Abortable, cause, None);
        }
    }

    /// A `send_offsets_to_transaction` was cancelled before its answer: its requests may
    /// still reach the coordinators, so the transaction can only be aborted, and the
    /// abort bumps the epoch so that a late TxnOffsetCommit is refused rather than taken
    /// into the next transaction.
    pub fn handle_offsets_cancelled(&mut self) {
        self.needs_bump = true;
        if self.is_open() {
            self.fail(
                ErrorClass::Abortable,
                "send_offsets_to_transaction was cancelled before its answer: the offsets' fate is unknown".into(),
                None,
            );
        }
    }

    /// The transaction (or, for a fatal class, the producer) failed.
    pub fn fail(&mut self, class: ErrorClass, cause: String, code: Option<KafkaCode>) {
        let transactional_id = self.transactional_id.clone();
        // The coordinator lost the producer's state (KIP-360): the next transaction
        // needs a new epoch, which the abort obtains (v1; the Java client's
        // `abortableErrorIfPossible`).
        if code == Some(KafkaCode::UNKNOWN_PRODUCER_ID) {
            self.needs_bump = true;
        }
        // An abort refused as abortable would be retried for ever (the Java client
        // makes it fatal, KAFKA-19250).
        let class =
            if self.state == TxnState::Aborting && code == Some(KafkaCode::TRANSACTION_ABORTABLE) {
                ErrorClass::Fatal
            } else {
                class
            };
        match class {
            ErrorClass::Fatal => {
                self.state = TxnState::Fatal;
                self.failure = Some(TransactionError::Fatal {
                    transactional_id,
                    cause,
                    code,
                });
            }
            _ if self.state == TxnState::Fatal => {}
            // An abort that fails for a reason other than a fatal one is retried by
            // the caller: it stays an abort.
            _ if self.state == TxnState::Aborting => {}
            _ => {
                if self.state != TxnState::Abortable {
                    self.failure = Some(TransactionError::Abortable {
                        transactional_id,
                        cause,
                    });
                }
                self.state = TxnState::Abortable;
            }
        }
    }

    /// The transaction's failure, if it failed.
    pub fn failure(&self) -> Option<&TransactionError> {
        self.failure.as_ref()
    }

    /// Whether batches not sent yet are to be failed rather than sent (the transaction
    /// is being aborted or must be, or the producer is done).
    pub fn drops_unsent(&self) -> bool {
        matches!(
            self.state,
            TxnState::Aborting | TxnState::Abortable | TxnState::Fatal
        )
    }

    /// The partitions in the open transaction (to be let go before it ends).
    pub fn added_partitions(&self) -> Vec<TxnPartition> {
        self.added.iter().cloned().collect()
    }

    /// The EndTxn (or, with nothing to end, the commit or abort itself) succeeded: the
    /// partitions and groups leave with the transaction, which are returned.
    pub fn handle_ended(&mut self) -> Vec<TxnPartition> {
        if self.state == TxnState::Fatal {
            return Vec::new();
        }
        self.state = TxnState::Ready;
        self.failure = None;
        self.needs_bump = false;
        self.groups.clear();
        self.pending.clear();
        self.requesting.clear();
        std::mem::take(&mut self.added).into_iter().collect()
    }
}

#[cfg(test)]
mod tests;
