//! The transaction rules, one case each.

use super::*;

fn tp(topic: &str, partition: i32) -> TxnPartition {
    (Arc::from(topic), partition)
}

fn open() -> Transaction {
    let mut t = Transaction::new("t1");
    t.handle_initialized();
    t.begin().unwrap();
    t
}

#[test]
fn calls_before_init_transactions_are_refused_and_say_why() {
    let mut t = Transaction::new("t1");
    let e = t.begin().unwrap_err();
    assert!(e.to_string().contains("before init_transactions"), "{e}");
    assert!(t.check_send().is_err());
    assert!(t.begin_commit().is_err());
    assert!(t.begin_abort().is_err());
    assert_eq!(t.state(), TxnState::Uninitialized);
}

#[test]
fn a_commit_or_a_send_with_no_transaction_open_is_refused() {
    let mut t = Transaction::new("t1");
    t.handle_initialized();
    let e = t.begin_commit().unwrap_err();
    assert!(e.to_string().contains("no transaction open"), "{e}");
    assert!(t.check_send().is_err());
    assert!(t.check_offsets().is_err());
    assert!(t.check_init().is_err(), "init_transactions twice");
    t.begin().unwrap();
    assert!(t.begin().is_err(), "begin inside a transaction");
}

#[test]
fn partitions_are_asked_for_once_per_round_and_added_only_when_the_coordinator_says() {
    let mut t = open();
    assert_eq!(t.note_partition(&tp("a", 0)), Joining::Ask);
    assert_eq!(
        t.note_partition(&tp("a", 0)),
        Joining::Nothing,
        "asked for once"
    );
    assert_eq!(t.note_partition(&tp("a", 1)), Joining::Ask);
    let round = t.poll_add_partitions().unwrap();
    assert_eq!(round, vec![tp("a", 0), tp("a", 1)]);
    assert!(t.poll_add_partitions().is_none(), "one request at a time");
    assert_eq!(
        t.note_partition(&tp("a", 0)),
        Joining::Nothing,
        "on the wire already"
    );
    assert_eq!(
        t.note_partition(&tp("b", 0)),
        Joining::Ask,
        "for the next round"
    );
    assert!(!t.is_added(&tp("a", 0)));
    let outcome =
        t.handle_add_partitions(&[(tp("a", 0), KafkaCode::NONE), (tp("a", 1), KafkaCode::NONE)]);
    assert_eq!(outcome.added, vec![tp("a", 0), tp("a", 1)]);
    assert!(t.is_added(&tp("a", 0)));
    assert_eq!(t.poll_add_partitions().unwrap(), vec![tp("b", 0)]);
}

#[test]
fn retriable_and_not_attempted_partitions_are_asked_for_again() {
    let mut t = open();
    t.note_partition(&tp("a", 0));
    t.note_partition(&tp("a", 1));
    t.note_partition(&tp("a", 2));
    t.poll_add_partitions().unwrap();
    let outcome = t.handle_add_partitions(&[
        (tp("a", 0), KafkaCode::CONCURRENT_TRANSACTIONS),
        (tp("a", 1), KafkaCode::OPERATION_NOT_ATTEMPTED),
        // a-2 left out of the answer
    ]);
    assert!(outcome.added.is_empty());
    assert!(outcome.retry && !outcome.find_coordinator);
    assert!(
        outcome.previous_ending,
        "CONCURRENT_TRANSACTIONS: retried soon"
    );
    assert_eq!(t.state(), TxnState::InTransaction);
    assert_eq!(t.poll_add_partitions().unwrap().len(), 3);
}

#[test]
fn a_moved_coordinator_asks_for_it_again() {
    let mut t = open();
    t.note_partition(&tp("a", 0));
    t.poll_add_partitions().unwrap();
    let outcome = t.handle_add_partitions(&[(tp("a", 0), KafkaCode::NOT_COORDINATOR)]);
    assert!(outcome.retry && outcome.find_coordinator);
    assert!(!outcome.previous_ending);
    assert_eq!(t.poll_add_partitions().unwrap(), vec![tp("a", 0)]);
}

#[test]
fn a_refused_partition_makes_the_transaction_abortable_and_drops_unsent_batches() {
    let mut t = open();
    t.note_partition(&tp("secret", 0));
    t.poll_add_partitions().unwrap();
    let outcome =
        t.handle_add_partitions(&[(tp("secret", 0), KafkaCode::TOPIC_AUTHORIZATION_FAILED)]);
    assert!(!outcome.retry);
    assert_eq!(t.state(), TxnState::Abortable);
    assert!(t.drops_unsent());
    let e = t.begin_commit().unwrap_err();
    assert!(
        matches!(&e, TransactionError::Abortable { cause, .. } if cause.contains("secret-0")),
        "{e}"
    );
    assert!(t.check_send().is_err());
    t.begin_abort().unwrap();
    assert!(t.handle_ended().is_empty());
    assert_eq!(t.state(), TxnState::Ready);
    assert!(t.failure().is_none());
}

#[test]
fn fencing_is_fatal_and_nothing_but_close_is_left() {
    let mut t = open();
    t.note_partition(&tp("a", 0));
    t.poll_add_partitions().unwrap();
    t.handle_add_partitions(&[(tp("a", 0), KafkaCode::PRODUCER_FENCED)]);
    assert_eq!(t.state(), TxnState::Fatal);
    let e = t.begin_abort().unwrap_err();
    assert!(
        matches!(
            e,
            TransactionError::Fatal {
                code: Some(KafkaCode::PRODUCER_FENCED),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(t.begin().is_err());
    assert!(t.check_send().is_err());
    assert!(t.handle_ended().is_empty());
    assert_eq!(t.state(), TxnState::Fatal, "an ending does not revive it");
    // A later abortable error does not hide the fatal one.
    t.fail(ErrorClass::Abortable, "late".into(), None);
    assert!(matches!(t.failure(), Some(TransactionError::Fatal { .. })));
}

#[test]
fn the_first_abortable_cause_is_kept() {
    let mut t = open();
    t.fail(ErrorClass::Abortable, "first".into(), None);
    t.fail(ErrorClass::Abortable, "second".into(), None);
    assert!(
        matches!(t.failure(), Some(TransactionError::Abortable { cause, .. }) if cause == "first")
    );
}

#[test]
fn errors_are_classed_as_the_java_client_does() {
    use ApiKey::*;
    assert_eq!(
        class_of(EndTxn, KafkaCode::CONCURRENT_TRANSACTIONS),
        ErrorClass::Retriable
    );
    assert_eq!(
        class_of(EndTxn, KafkaCode::COORDINATOR_LOAD_IN_PROGRESS),
        ErrorClass::CoordinatorMoved
    );
    assert_eq!(
        class_of(EndTxn, KafkaCode::INVALID_PRODUCER_EPOCH),
        ErrorClass::Fatal
    );
    assert_eq!(
        class_of(
            InitProducerId,
            KafkaCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ),
        ErrorClass::Fatal
    );
    assert_eq!(
        class_of(TxnOffsetCommit, KafkaCode::ILLEGAL_GENERATION),
        ErrorClass::Abortable
    );
    assert_eq!(
        class_of(TxnOffsetCommit, KafkaCode::GROUP_AUTHORIZATION_FAILED),
        ErrorClass::Abortable
    );
    assert_eq!(
        class_of(AddPartitionsToTxn, KafkaCode::UNKNOWN_TOPIC_OR_PARTITION),
        ErrorClass::Retriable
    );
    assert_eq!(
        class_of(EndTxn, KafkaCode::TRANSACTION_ABORTABLE),
        ErrorClass::Abortable
    );
}

#[test]
fn an_end_is_needed_only_when_the_coordinator_knows_of_the_transaction() {
    let mut t = open();
    assert!(!t.needs_end_txn());
    t.note_partition(&tp("a", 0));
    assert!(!t.needs_end_txn(), "not asked for yet");
    t.poll_add_partitions().unwrap();
    assert!(t.needs_end_txn(), "the request may have reached it");
    t.begin_abort().unwrap();
    t.handle_add_partitions(&[(tp("a", 0), KafkaCode::NONE)]);
    assert!(t.needs_end_txn());
    assert_eq!(t.handle_ended(), vec![tp("a", 0)]);
    assert!(
        !t.is_added(&tp("a", 0)),
        "the next transaction adds it again"
    );

    let mut t = open();
    assert!(t.needs_group("g"));
    t.handle_group_added("g");
    assert!(!t.needs_group("g"));
    assert!(t.needs_end_txn());
}

#[test]
fn pending_partitions_are_not_asked_for_once_an_abort_starts() {
    let mut t = open();
    t.note_partition(&tp("a", 0));
    t.begin_abort().unwrap();
    assert!(t.poll_add_partitions().is_none());
    assert!(!t.needs_end_txn());
    // A send that passed its check before the abort registers late: not asked for, and
    // nothing is left pending for the abort to wait on.
    assert_eq!(t.note_partition(&tp("b", 0)), Joining::Nothing);
    assert!(!t.adding());
}

#[test]
fn sequence_trouble_fails_the_transaction_and_the_abort_bumps_the_epoch() {
    let mut t = open();
    t.handle_sequence_trouble("OUT_OF_ORDER_SEQUENCE_NUMBER on a-0".into());
    assert_eq!(t.state(), TxnState::Abortable);
    assert!(t.abort_needs_bump(false));
    t.begin_abort().unwrap();
    t.handle_ended();
    assert!(!t.abort_needs_bump(false), "bumped with the abort");
}

fn open_v2() -> Transaction {
    let mut t = Transaction::new("t2");
    assert!(!t.adopt_protocol(TxnProtocol::V2), "no bump at init");
    t.handle_initialized();
    t.begin().unwrap();
    t
}

#[test]
fn in_v2_a_partition_joins_at_its_first_send_and_nothing_is_asked_for() {
    let mut t = open_v2();
    assert_eq!(t.note_partition(&tp("a", 0)), Joining::Joined);
    assert_eq!(t.note_partition(&tp("a", 0)), Joining::Nothing, "once");
    assert!(t.is_added(&tp("a", 0)));
    assert!(
        t.poll_add_partitions().is_none(),
        "no AddPartitionsToTxn in v2"
    );
    assert!(!t.adding());
    assert!(!t.needs_group("g"), "no AddOffsetsToTxn in v2");
    assert!(
        t.needs_end_txn(),
        "the partition's leader told the coordinator"
    );
    assert_eq!(t.handle_ended(), vec![tp("a", 0)]);
    assert!(!t.needs_end_txn());
}

#[test]
fn in_v2_offsets_alone_need_an_end_txn_and_an_empty_transaction_none() {
    let mut t = open_v2();
    assert!(
        !t.needs_end_txn(),
        "nothing sent: no EndTxn (an empty v2 commit is refused)"
    );
    t.handle_group_added("g");
    assert!(t.needs_end_txn());
}

#[test]
fn in_v2_an_abort_never_asks_for_an_init_producer_id_bump() {
    let mut t = open_v2();
    t.note_partition(&tp("a", 0));
    t.handle_sequence_trouble("gap".into());
    assert_eq!(t.state(), TxnState::Abortable);
    assert!(
        !t.abort_needs_bump(true),
        "EndTxn v5 bumps the epoch itself"
    );
    let v1 = open();
    assert!(
        v1.abort_needs_bump(true),
        "v1: a failed batch needs the bump"
    );
}

#[test]
fn the_protocol_changes_only_between_transactions_and_an_upgrade_costs_a_bump() {
    let mut t = open();
    assert_eq!(t.protocol(), TxnProtocol::V1);
    assert!(
        !t.adopt_protocol(TxnProtocol::V2),
        "not while a transaction is open"
    );
    assert_eq!(t.protocol(), TxnProtocol::V1);
    t.begin_commit().unwrap();
    t.handle_ended();
    assert!(
        t.adopt_protocol(TxnProtocol::V2),
        "v1 to v2 after init: bump"
    );
    assert_eq!(t.protocol(), TxnProtocol::V2);
    assert!(!t.adopt_protocol(TxnProtocol::V2), "unchanged");
    assert!(
        !t.adopt_protocol(TxnProtocol::V1),
        "a downgrade needs no bump"
    );
    assert_eq!(t.protocol(), TxnProtocol::V1);
    assert_eq!(TxnProtocol::for_feature_level(0), TxnProtocol::V1);
    assert_eq!(TxnProtocol::for_feature_level(1), TxnProtocol::V1);
    assert_eq!(TxnProtocol::for_feature_level(2), TxnProtocol::V2);
}

#[test]
fn unknown_producer_id_makes_the_abort_bump_and_transaction_abortable_during_an_abort_is_fatal() {
    let mut t = open();
    t.note_partition(&tp("a", 0));
    t.poll_add_partitions().unwrap();
    t.handle_add_partitions(&[(tp("a", 0), KafkaCode::UNKNOWN_PRODUCER_ID)]);
    assert_eq!(t.state(), TxnState::Abortable);
    assert!(
        t.abort_needs_bump(false),
        "the coordinator lost the producer: bump"
    );
    t.begin_abort().unwrap();
    t.fail(
        ErrorClass::Abortable,
        "EndTxn".into(),
        Some(KafkaCode::TRANSACTION_ABORTABLE),
    );
    assert_eq!(
        t.state(),
        TxnState::Fatal,
        "an abort refused as abortable would loop"
    );
}

#[test]
fn cancelled_offsets_make_the_transaction_abortable_and_the_abort_bump() {
    let mut t = open();
    t.handle_group_added("g");
    t.handle_offsets_cancelled();
    assert_eq!(t.state(), TxnState::Abortable);
    assert!(t.begin_commit().is_err(), "only an abort is left");
    assert!(
        t.abort_needs_bump(false),
        "a late TxnOffsetCommit must meet a newer epoch"
    );
}

#[test]
fn v1_requests_stay_below_the_versions_that_mean_v2_and_v2_uses_exactly_those() {
    let range = |r: VersionRange| (r.min, r.max);
    assert_eq!(range(TxnProtocol::V1.produce_versions()), (0, 11));
    assert_eq!(range(TxnProtocol::V2.produce_versions()), (12, 12));
    assert_eq!(range(TxnProtocol::V1.end_txn_versions()), (0, 4));
    assert_eq!(range(TxnProtocol::V2.end_txn_versions()), (5, 5));
    assert_eq!(range(TxnProtocol::V1.txn_offset_commit_versions()), (0, 4));
    assert_eq!(range(TxnProtocol::V2.txn_offset_commit_versions()), (5, 5));
}
