//! The partition's rules, driven by hand with time passed in.

use std::time::Duration;

use super::*;
use crate::buf::MemoryBudget;
use crate::engine::produce::completion::ReportTagged;

fn settings() -> ProduceSettings {
    ProduceSettings {
        acks: -1,
        idempotent: true,
        linger: Duration::from_millis(5),
        timer_resolution: Duration::ZERO,
        batch_size: 16 * 1024,
        max_request_size: 1 << 20,
        delivery_timeout: Duration::from_secs(120),
        retries: u32::MAX,
        retry_backoff: Duration::from_millis(100),
        retry_backoff_max: Duration::from_secs(1),
        request_timeout: Duration::from_secs(30),
        max_in_flight: 5,
        transactional_id: None,
        transaction_timeout: std::time::Duration::from_secs(60),
        codec: Compression::None,
        report_tagged: None,
    }
}

fn pools() -> ArenaPools {
    ArenaPools::new(16 * 1024, MemoryBudget::new(1 << 20))
}

/// A record of `value` alone, timestamp 1.
fn value_record(value: &[u8]) -> RecordParts<'_> {
    RecordParts {
        key: None,
        value: Some(value),
        headers: &[],
        timestamp: 1,
    }
}

/// Appends one record with `value` (and nothing else) to an open batch.
fn append_value(
    s: &mut PartitionState,
    value: &[u8],
    settings: &ProduceSettings,
    pools: &ArenaPools,
    now: Instant,
) {
    let appended = s
        .append(
            value_record(value),
            None,
            &mut None,
            settings,
            pools,
            || now,
        )
        .unwrap();
    assert!(matches!(appended, Appended::Done { .. }));
}

const PRODUCER: ProducerId = ProducerId { id: 7, epoch: 0 };

/// A partition with `batches` sealed batches of `per_batch` records each.
fn partition_with(
    batches: usize,
    per_batch: usize,
    now: Instant,
) -> (Arc<ProducePartition>, ProduceSettings, ArenaPools) {
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    {
        let mut s = p.state();
        for b in 0..batches {
            for r in 0..per_batch {
                append_value(
                    &mut s,
                    format!("{b}-{r}").as_bytes(),
                    &settings,
                    &pools,
                    now,
                );
            }
            s.seal(SealReason::Due, &settings, &pools, &|| now);
        }
    }
    (p, settings, pools)
}

fn take(p: &Arc<ProducePartition>, now: Instant, settings: &ProduceSettings) -> Vec<Outgoing> {
    let mut out = Vec::new();
    p.state().take_sendable(
        p,
        now,
        Some(PRODUCER),
        false,
        settings,
        usize::MAX,
        &mut out,
    );
    out
}

/// What the partition sends while an epoch bump is pending.
fn take_while_bumping(
    p: &Arc<ProducePartition>,
    now: Instant,
    settings: &ProduceSettings,
) -> Vec<Outgoing> {
    let mut out = Vec::new();
    p.state()
        .take_sendable(p, now, Some(PRODUCER), true, settings, usize::MAX, &mut out);
    out
}

fn sequence_of(o: &Outgoing) -> i32 {
    RecordBatchRef::new(&o.batch).unwrap().base_sequence()
}

fn ack() -> Verdict {
    Verdict::Acked(BatchAck {
        base_offset: 0,
        log_append_time: -1,
    })
}

#[test]
fn sequences_wrap_to_zero_after_i32_max() {
    assert_eq!(increment_sequence(5, 3), 8);
    assert_eq!(increment_sequence(i32::MAX - 2, 2), i32::MAX);
    assert_eq!(increment_sequence(i32::MAX - 2, 3), 0);
    assert_eq!(increment_sequence(i32::MAX, 10), 9);
}

#[test]
fn one_batch_in_flight_until_the_first_ack_then_five() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(8, 3, now);
    let first = take(&p, now, &settings);
    assert_eq!(first.len(), 1, "a new epoch sends one batch at a time");
    assert_eq!(sequence_of(&first[0]), 0);
    assert!(take(&p, now, &settings).is_empty());
    let effects = p
        .state()
        .settle(first.into_iter().next().unwrap(), ack(), now, &settings);
    assert!(!effects.bump && !effects.refresh);
    assert!(matches!(effects.report.fate, Fate::Acked(_)));
    assert_eq!(effects.report.records, 3, "three records per batch");
    let next = take(&p, now, &settings);
    assert_eq!(next.len(), MAX_IDEMPOTENT_IN_FLIGHT);
    let sequences: Vec<i32> = next.iter().map(sequence_of).collect();
    assert_eq!(sequences, vec![3, 6, 9, 12, 15], "three records per batch");
    assert_eq!(
        next.iter().map(|o| o.round).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn a_retry_goes_back_in_sequence_order_and_holds_the_partition() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(4, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let mut batches = take(&p, now, &settings);
    assert_eq!(batches.len(), 3);
    let third = batches.pop().unwrap();
    let second = batches.pop().unwrap();
    let retry = Verdict::Retry {
        error: Error::ShuttingDown,
        stale: true,
    };
    // The later batch fails first, then the earlier one: the queue is in sequence order.
    let effects = p.state().settle(third, retry.clone(), now, &settings);
    assert!(effects.refresh && !effects.bump);
    assert!(
        take(&p, now + Duration::from_secs(5), &settings).is_empty(),
        "held: batches are still in flight"
    );
    p.state().settle(second, retry, now, &settings);
    let settle_first = batches.pop().unwrap();
    p.state().settle(settle_first, ack(), now, &settings);
    // Backoff: nothing before it ends.
    let mut out = Vec::new();
    let again = p.state().take_sendable(
        &p,
        now,
        Some(PRODUCER),
        false,
        &settings,
        usize::MAX,
        &mut out,
    );
    assert_eq!(again, Some(now + settings.backoff(0)));
    // Not before four fifths of the backoff either; from then on it may go.
    let early = now + settings.backoff(0) * 4 / 5 - Duration::from_millis(1);
    assert!(take(&p, early, &settings).is_empty());
    // Resent with their first sequences, in order, one at a time while retrying.
    let later = now + Duration::from_secs(1);
    let resent = take(&p, later, &settings);
    assert_eq!(resent.iter().map(sequence_of).collect::<Vec<_>>(), vec![2]);
    p.state()
        .settle(resent.into_iter().next().unwrap(), ack(), later, &settings);
    let resent = take(&p, later, &settings);
    assert_eq!(resent.iter().map(sequence_of).collect::<Vec<_>>(), vec![3]);
}

#[test]
fn out_of_order_behind_an_unwritten_batch_is_a_retry_and_a_gap_otherwise() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(4, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let mut batches = take(&p, now, &settings);
    let (third, second) = (batches.remove(1), batches.remove(0));
    // The third is refused while the second is still on the wire (not written yet):
    // only out of order because of it. The rule the simulation showed was missing.
    let effects = p.state().settle(
        third,
        Verdict::OutOfOrder(Error::ShuttingDown),
        now,
        &settings,
    );
    assert!(!effects.bump, "behind a batch still in flight: not a gap");
    // Behind a batch that came back for a retry: not a gap either.
    let (p2, settings2, _) = partition_with(3, 1, now);
    let first = take(&p2, now, &settings2).remove(0);
    p2.state().settle(first, ack(), now, &settings2);
    let mut two = take(&p2, now, &settings2);
    let (later, earlier) = (two.remove(1), two.remove(0));
    p2.state().settle(
        earlier,
        Verdict::Retry {
            error: Error::ShuttingDown,
            stale: false,
        },
        now,
        &settings2,
    );
    let effects = p2.state().settle(
        later,
        Verdict::OutOfOrder(Error::ShuttingDown),
        now,
        &settings2,
    );
    assert!(!effects.bump, "behind a retry: not a gap");
    // The very next batch after the last acknowledged one, refused: a real gap.
    let effects = p.state().settle(
        second,
        Verdict::OutOfOrder(Error::ShuttingDown),
        now,
        &settings,
    );
    assert!(
        effects.bump,
        "the next expected batch refused: a gap, bump the epoch"
    );
}

#[test]
fn fatal_errors_fail_the_batch_and_bump_with_idempotence() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(1, 2, now);
    let first = take(&p, now, &settings).remove(0);
    let shared = first.shared.clone();
    let effects = p
        .state()
        .settle(first, Verdict::Fatal(Error::ShuttingDown), now, &settings);
    assert!(effects.bump);
    assert!(matches!(
        shared.poll_record(0, None),
        std::task::Poll::Ready(super::super::completion::Resolved::Done(Err(_)))
    ));
    assert!(!p.state().has_pending());
}

#[test]
fn expiry_of_a_sent_batch_asks_for_a_bump_and_unsent_ones_do_not() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(2, 1, now);
    let later = now + settings.delivery_timeout;
    assert!(!p.state().expire(later, &settings), "never sent");
    assert!(!p.state().has_pending());

    let (p, settings, _) = partition_with(1, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(
        first,
        Verdict::Retry {
            error: Error::ShuttingDown,
            stale: false,
        },
        now,
        &settings,
    );
    assert!(p.state().expire(later, &settings), "sent: fate unknown");
}

#[test]
fn each_queued_batch_expires_at_its_own_delivery_timeout() {
    let now = Instant::now();
    let second = now + Duration::from_secs(1);
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    for at in [now, second] {
        append_value(&mut p.state(), b"v", &settings, &pools, at);
        p.state().seal(SealReason::Due, &settings, &pools, &|| at);
    }
    let timeout = settings.delivery_timeout;
    let mut s = p.state();
    s.expire(now + timeout - Duration::from_millis(1), &settings);
    assert_eq!(s.pending().len(), 2, "neither is due");
    s.expire(now + timeout, &settings);
    assert_eq!(s.pending().len(), 1, "the first expired, not the second");
    s.expire(second + timeout - Duration::from_millis(1), &settings);
    assert_eq!(s.pending().len(), 1, "the second is not due yet");
    s.expire(second + timeout, &settings);
    assert_eq!(s.pending().len(), 0, "then it is");
}

#[test]
fn a_batch_back_for_a_retry_expires_by_its_own_age() {
    let now = Instant::now();
    let later = now + Duration::from_secs(1);
    let timeout = settings().delivery_timeout;
    let (p, settings, pools) = partition_with(1, 1, now);
    let first = take(&p, now, &settings).remove(0);
    // As an expiry scan leaves an empty queue: the watermark starts again from the
    // next batch queued, a later one.
    p.state().forget_queue_state();
    append_value(&mut p.state(), b"v", &settings, &pools, later);
    p.state()
        .seal(SealReason::Due, &settings, &pools, &|| later);
    let refused = Verdict::Retry {
        error: Error::ShuttingDown,
        stale: false,
    };
    p.state().settle(first, refused, later, &settings);
    assert_eq!(p.state().pending().len(), 2);
    // Queued again, it expires at its own creation's deadline, not the later batch's.
    let past = now + timeout + Duration::from_millis(1);
    assert!(p.state().expire(past, &settings), "it had been sent");
    assert_eq!(p.state().pending().len(), 1);
}

#[test]
fn a_retry_window_left_by_failed_batches_holds_nothing_back() {
    let now = Instant::now();
    let (p, settings, pools) = partition_with(1, 1, now);
    let first = take(&p, now, &settings).remove(0);
    let refused = Verdict::Retry {
        error: Error::ShuttingDown,
        stale: false,
    };
    p.state().settle(first, refused, now, &settings);
    p.state().fail_unsent(&Error::ShuttingDown, now);
    // A record sent during what was the backoff goes at its linger.
    let soon = now + Duration::from_millis(10);
    append_value(&mut p.state(), b"v", &settings, &pools, soon);
    assert!(!p.state().busy_sending(soon, &settings));
    let due = soon + settings.linger;
    assert_eq!(
        p.state().seal_if_due(due, false, false, &settings, &pools),
        None
    );
    assert_eq!(take(&p, due, &settings).len(), 1);
}

#[test]
fn restamping_uses_the_record_layers_setter_and_renumbers_from_zero() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(3, 2, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(
        first,
        Verdict::UnknownProducer(Error::ShuttingDown),
        now,
        &settings,
    );
    let bumped = ProducerId { id: 99, epoch: 4 };
    p.state().restamp(bumped, now);
    let resent = take(&p, now, &settings);
    assert_eq!(resent.len(), 1, "a new epoch: one at a time again");
    let batch = RecordBatchRef::new(&resent[0].batch).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (99, 4, 0)
    );
    p.state()
        .settle(resent.into_iter().next().unwrap(), ack(), now, &settings);
    // The never-sent batches continue the new numbering.
    let rest = take(&p, now, &settings);
    let sequences: Vec<i32> = rest.iter().map(sequence_of).collect();
    assert_eq!(sequences, vec![2, 4]);
    let batch = RecordBatchRef::new(&rest[0].batch).unwrap();
    assert_eq!(
        batch.producer_id(),
        7,
        "stamped with what the sink passed in"
    );
}

#[test]
fn a_moved_partition_waits_for_its_batches_on_the_old_sink() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(3, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().adopt(Arc::new(CountingWake::default()));
    p.state().settle(first, ack(), now, &settings);
    // Adopted with a batch on the wire: held until it answered, then free.
    assert_eq!(take(&p, now, &settings).len(), 2);
    let (p, settings, _) = partition_with(3, 1, now);
    let first = take(&p, now, &settings).remove(0);
    let new_sink = Arc::new(CountingWake::default());
    p.state().adopt(new_sink.clone());
    let woken = new_sink.count();
    assert!(take(&p, now, &settings).is_empty(), "held while in flight");
    p.state().settle(first, ack(), now, &settings);
    assert_eq!(
        new_sink.count(),
        woken + 1,
        "the new sink is told when the last answer came back through the old one"
    );
    assert_eq!(take(&p, now, &settings).len(), 2);
}

#[test]
fn the_sink_is_not_woken_for_a_batch_that_could_not_go_yet() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let wakes = Arc::new(CountingWake::default());
    p.state().adopt(wakes.clone());
    append_value(&mut p.state(), b"a", &settings, &pools, now);
    assert_eq!(wakes.count(), 1, "a new batch: the sink learns its linger");
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    let first = take(&p, now, &settings).remove(0);
    // Idempotent, nothing acknowledged yet in the epoch: one batch on the wire at a
    // time, and its answer drains the partition anyway.
    append_value(&mut p.state(), b"b", &settings, &pools, now);
    assert_eq!(wakes.count(), 1, "it could not go before the answer");
    p.state().settle(first, ack(), now, &settings);
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    append_value(&mut p.state(), b"c", &settings, &pools, now);
    assert_eq!(wakes.count(), 2, "room on the wire again: woken");
}

/// A sink's waker as the driver's: counts wake-ups and says when the sink drains next.
struct TimedWake {
    wakes: CountingWake,
    next: crate::engine::produce::wake::NextDrain,
}

impl Wake for TimedWake {
    fn wake(&self) {
        self.wakes.wake();
    }

    fn drains_by(&self, deadline: Instant) -> bool {
        self.next.drains_by(deadline)
    }

    fn waits_for_an_answer(&self) -> bool {
        self.next.waits_for_an_answer()
    }
}

/// A partition adopted by a sink whose wake-ups are counted and whose timer the test sets.
fn partition_with_timed_sink(now: Instant) -> (Arc<ProducePartition>, Arc<TimedWake>) {
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let sink = Arc::new(TimedWake {
        wakes: CountingWake::default(),
        next: crate::engine::produce::wake::NextDrain::new(now),
    });
    p.state().adopt(sink.clone());
    (p, sink)
}

#[test]
fn a_new_batch_wakes_the_sink_only_if_it_would_not_drain_by_the_batchs_linger() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, sink) = partition_with_timed_sink(now);
    let mut opened = 0;
    let mut open_batch = |at: Instant| {
        // Each time a new batch (the last one sealed by time, as the sink would).
        append_value(&mut p.state(), b"v", &settings, &pools, at);
        p.state().seal(SealReason::Due, &settings, &pools, &|| at);
        opened += 1;
        sink.wakes.count()
    };
    sink.next.sleeping_until(Some(now + settings.linger / 2));
    assert_eq!(
        open_batch(now),
        0,
        "the sink's timer comes before the linger"
    );
    sink.next.sleeping_until(Some(now + settings.linger));
    assert_eq!(open_batch(now), 0, "the sink's timer is the linger itself");
    sink.next.sleeping_until(Some(now + settings.linger * 2));
    assert_eq!(
        open_batch(now),
        1,
        "the sink's timer comes after the linger"
    );
    sink.next.sleeping_until(None);
    assert_eq!(open_batch(now), 2, "the sink sleeps with no timer");
    sink.next.draining();
    assert_eq!(
        open_batch(now),
        3,
        "the sink drains: it may have passed the partition"
    );
    assert_eq!(opened, 5);
}

#[test]
fn a_new_batch_wakes_a_sink_whose_timer_comes_after_the_lingers_early_end() {
    let now = Instant::now();
    let pools = pools();
    let settings = ProduceSettings {
        timer_resolution: Duration::from_millis(1),
        ..settings()
    };
    let (p, sink) = partition_with_timed_sink(now);
    // Sealed at 4.5 ms (half a resolution before the linger's 5): a timer at 4.75 ms is
    // too late.
    sink.next
        .sleeping_until(Some(now + Duration::from_micros(4_750)));
    append_value(&mut p.state(), b"v", &settings, &pools, now);
    assert_eq!(sink.wakes.count(), 1);
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    sink.next
        .sleeping_until(Some(now + Duration::from_micros(4_500)));
    append_value(&mut p.state(), b"w", &settings, &pools, now);
    assert_eq!(sink.wakes.count(), 1, "a timer at 4.5 ms comes in time");
}

#[test]
fn with_no_linger_a_new_batch_always_wakes_the_sink() {
    let now = Instant::now();
    let (mut settings, pools) = (settings(), pools());
    settings.linger = Duration::ZERO;
    let (p, sink) = partition_with_timed_sink(now);
    // The sink's timer is due now but may not have fired: the batch is due now too.
    sink.next.sleeping_until(Some(now));
    append_value(&mut p.state(), b"v", &settings, &pools, now);
    assert_eq!(sink.wakes.count(), 1);
}

#[test]
fn a_full_batch_wakes_the_sink_even_when_it_drains_before_the_linger() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, sink) = partition_with_timed_sink(now);
    sink.next.sleeping_until(Some(now + settings.linger / 2));
    let value = vec![7u8; 1000];
    while !p.state().has_sendable() {
        append_value(&mut p.state(), &value, &settings, &pools, now);
    }
    assert_eq!(
        sink.wakes.count(),
        1,
        "full: it can go now, not at the sink's timer"
    );
}

#[test]
fn a_sink_waiting_for_an_answer_is_woken_neither_for_a_new_batch_nor_a_full_one() {
    let now = Instant::now();
    let (mut settings, pools) = (settings(), pools());
    let (p, sink) = partition_with_timed_sink(now);
    let value = vec![7u8; 1000];
    let fill_one = || {
        while !p.state().has_sendable() {
            append_value(&mut p.state(), &value, &settings, &pools, now);
        }
    };
    sink.next.sleeping_for_an_answer();
    fill_one();
    assert_eq!(sink.wakes.count(), 0, "every slot taken: the answer drains");
    // Without a linger too: the batch is due at once, but cannot go before the answer.
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    assert!(p.state().due_at(&settings).is_none(), "no batch open");
    settings.linger = Duration::ZERO;
    append_value(&mut p.state(), b"v", &settings, &pools, now);
    assert!(p.state().due_at(&settings).is_some(), "a batch opened");
    assert_eq!(sink.wakes.count(), 0);
    // Once the sink has drained again with a slot free, the same is woken for.
    sink.next.draining();
    sink.next.sleeping_until(None);
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    append_value(&mut p.state(), b"w", &settings, &pools, now);
    assert_eq!(sink.wakes.count(), 1, "a slot free: a new batch wakes it");
}

#[test]
fn a_linger_ends_half_a_timer_resolution_early_so_that_a_late_timer_is_late_by_half_at_most() {
    let now = Instant::now();
    let pools = pools();
    let ms = Duration::from_millis;
    let settings = ProduceSettings {
        timer_resolution: ms(1),
        ..settings()
    };
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let mut s = p.state();
    append_value(&mut s, b"v", &settings, &pools, now);
    // The sink's timer is set half a resolution early: fired up to a resolution late,
    // it comes within half a resolution of the end of the linger (5 ms).
    let early = now + Duration::from_micros(4_500);
    assert_eq!(
        s.seal_if_due(now, false, false, &settings, &pools),
        Some(early)
    );
    assert_eq!(
        s.seal_if_due(
            early - Duration::from_nanos(1),
            false,
            false,
            &settings,
            &pools
        ),
        Some(early)
    );
    assert!(!s.has_sendable());
    assert_eq!(s.seal_if_due(early, false, false, &settings, &pools), None);
    assert!(
        s.has_sendable(),
        "sealed half a resolution before its linger ends"
    );
    // A linger under a resolution ends early by half of itself: it still lingers.
    let short = ProduceSettings {
        linger: Duration::from_micros(600),
        ..settings.clone()
    };
    assert_eq!(short.linger_ends(now), now + Duration::from_micros(300));
    let none = ProduceSettings {
        linger: Duration::ZERO,
        ..settings
    };
    assert_eq!(none.linger_ends(now), now);
}

#[test]
fn linger_seals_only_when_due_unless_flushing() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let mut s = p.state();
    append_value(&mut s, b"v", &settings, &pools, now);
    assert_eq!(
        s.seal_if_due(now, false, false, &settings, &pools),
        Some(now + settings.linger)
    );
    assert!(!s.has_sendable());
    assert_eq!(s.seal_if_due(now, true, false, &settings, &pools), None);
    assert!(s.has_sendable(), "a flush seals at once");
}

#[test]
fn a_busy_partition_keeps_its_lingering_batch_open_until_it_can_send_it() {
    let now = Instant::now();
    let (p, settings, pools) = partition_with(1, 1, now);
    // The epoch's first batch is on the wire: one at a time until it is acknowledged.
    let first = take(&p, now, &settings).remove(0);
    let mut s = p.state();
    append_value(&mut s, b"a", &settings, &pools, now);
    let later = now + settings.linger * 3;
    assert!(s.busy_sending(later, &settings));
    assert_eq!(
        s.seal_if_due(later, false, true, &settings, &pools),
        Some(now + settings.delivery_timeout),
        "held until its delivery timeout at most"
    );
    assert!(!s.has_sendable(), "past its linger, still open");
    append_value(&mut s, b"b", &settings, &pools, later);
    s.settle(first, ack(), later, &settings);
    assert!(!s.busy_sending(later, &settings));
    assert_eq!(s.seal_if_due(later, false, false, &settings, &pools), None);
    drop(s);
    let next = take(&p, later, &settings);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].records, 2, "both records in the one batch");
    // Past its delivery timeout, a held batch is sealed (and so expires).
    let mut s = p.state();
    append_value(&mut s, b"old", &settings, &pools, later);
    let expired = later + settings.delivery_timeout;
    assert_eq!(s.seal_if_due(expired, false, true, &settings, &pools), None);
    assert!(s.has_sendable());
    assert!(!s.expire(expired, &settings), "expired before it was sent");
    assert!(!s.has_sendable());
    drop(s);
    // A flush seals a held batch all the same.
    let mut s = p.state();
    append_value(&mut s, b"c", &settings, &pools, later);
    assert_eq!(s.seal_if_due(later, true, true, &settings, &pools), None);
    assert!(s.has_sendable());
}

#[test]
fn while_a_retry_is_unresolved_one_batch_goes_at_a_time_and_nothing_new() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(8, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let round = take(&p, now, &settings);
    assert_eq!(round.len(), 5);
    let retry = Verdict::Retry {
        error: Error::ShuttingDown,
        stale: false,
    };
    for (i, b) in round.into_iter().enumerate() {
        let verdict = if i == 1 { retry.clone() } else { ack() };
        p.state().settle(b, verdict, now, &settings);
    }
    let later = now + Duration::from_secs(5);
    // The retried batch (sequence 2) alone; the never-sent ones wait behind it.
    let resent = take(&p, later, &settings);
    assert_eq!(resent.iter().map(sequence_of).collect::<Vec<_>>(), vec![2]);
    assert!(take(&p, later, &settings).is_empty());
    p.state()
        .settle(resent.into_iter().next().unwrap(), retry, later, &settings);
    let again = take(&p, later + Duration::from_secs(5), &settings);
    assert_eq!(
        again.iter().map(sequence_of).collect::<Vec<_>>(),
        vec![2],
        "still alone"
    );
    p.state()
        .settle(again.into_iter().next().unwrap(), ack(), later, &settings);
    // Resolved: a full window of new batches again.
    let next = take(&p, later + Duration::from_secs(10), &settings);
    assert_eq!(next.iter().map(sequence_of).collect::<Vec<_>>(), vec![6, 7]);
}

#[test]
fn a_batch_that_may_have_been_written_is_resolved_before_a_bump_renumbers_it() {
    let now = Instant::now();
    let (p, settings, _) = partition_with(3, 1, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let mut round = take(&p, now, &settings);
    let (second, first_of_two) = (round.remove(1), round.remove(0));
    // The connection broke under the first: it may have been written.
    let lost = Verdict::Retry {
        error: Error::Io(crate::engine::error::IoError::ShuttingDown),
        stale: true,
    };
    p.state().settle(first_of_two, lost, now, &settings);
    // The second was refused before writing: certainly not written.
    let refused = Verdict::Retry {
        error: Error::broker(
            KafkaCode::NOT_LEADER_OR_FOLLOWER,
            crate::protocol::ApiKey::Produce,
            None,
            None,
        ),
        stale: true,
    };
    p.state().settle(second, refused, now, &settings);
    assert!(
        !p.state().ready_for_bump(),
        "the first must be resolved first"
    );
    // While a bump is pending, only that batch goes out, under the old epoch.
    let later = now + Duration::from_secs(5);
    let mut out = take_while_bumping(&p, later, &settings);
    assert_eq!(out.iter().map(sequence_of).collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        RecordBatchRef::new(&out[0].batch).unwrap().producer_epoch(),
        0
    );
    // The broker refuses it as out of order: it was never written. Ready.
    let probe = out.remove(0);
    p.state().settle(
        probe,
        Verdict::OutOfOrder(Error::ShuttingDown),
        later,
        &settings,
    );
    assert!(p.state().ready_for_bump());
    let mut none = Vec::new();
    p.state().take_sendable(
        &p,
        later + Duration::from_secs(5),
        Some(PRODUCER),
        true,
        &settings,
        usize::MAX,
        &mut none,
    );
    assert!(
        none.is_empty(),
        "nothing else goes while the bump is pending"
    );
}

#[test]
fn an_idempotent_producer_moves_to_its_next_epoch_and_needs_a_new_id_after_the_last() {
    let id = ProducerId { id: 7, epoch: 0 };
    assert_eq!(id.next_epoch(), Some(ProducerId { id: 7, epoch: 1 }));
    let last = ProducerId {
        id: 7,
        epoch: i16::MAX,
    };
    assert_eq!(last.next_epoch(), None);
}

/// A batch sealed with a few records moves to a buffer of its own size, charged by that
/// size, and its arena is free at once for the next batch; one filling most of its arena
/// stays there.
#[test]
fn a_small_batch_leaves_its_arena_and_a_big_one_keeps_it() {
    let now = Instant::now();
    let mut settings = settings();
    settings.idempotent = false;
    let arena = 16 * 1024;
    // Room for one arena and a little more.
    let pools = ArenaPools::new(arena, MemoryBudget::new(arena + 1024));
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    for value in [b"first", b"other"] {
        append_value(&mut p.state(), value, &settings, &pools, now);
    }
    assert_eq!(pools.budget_used(), arena, "the open batch holds an arena");
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    let small = take(&p, now, &settings);
    assert_eq!(small.len(), 1);
    let len = small[0].batch.len();
    assert!(len < 200, "two small records: {len} bytes");
    assert_eq!(pools.budget_used(), len, "charged by its own size");
    let batch = RecordBatchRef::new(&small[0].batch).unwrap();
    assert!(batch.verify_crc().is_ok());
    let values: Vec<Vec<u8>> = batch
        .records()
        .unwrap()
        .map(|r| r.unwrap().value().unwrap().to_vec())
        .collect();
    assert_eq!(values, vec![b"first".to_vec(), b"other".to_vec()]);
    // Its arena is free again: the next batch gets it while the first is in flight.
    let value = vec![3u8; 1000];
    for _ in 0..12 {
        append_value(&mut p.state(), &value, &settings, &pools, now);
    }
    p.state().seal(SealReason::Due, &settings, &pools, &|| now);
    let big = take(&p, now, &settings);
    assert!(big[0].batch.len() > arena / 2);
    assert_eq!(
        pools.budget_used(),
        len + arena,
        "a batch filling most of its arena stays there, charged the whole arena"
    );
}

/// A compressed batch stays charged to `buffer.memory` until it is settled: with the
/// budget spent, sealing it used to compress into an uncharged heap copy and free the
/// arena, so appends went on past the budget. Compressed to a small fraction of its
/// arena, it moves to a buffer of its own size charged by that size, and the rest of
/// the arena's charge is free at once for the next batches.
#[test]
fn a_small_compressed_batch_stays_charged_by_its_own_size() {
    let now = Instant::now();
    let mut settings = settings();
    settings.codec = Compression::Lz4;
    let arena = 16 * 1024;
    let pools = ArenaPools::new(arena, MemoryBudget::new(arena));
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let value = b"order shipped pending warehouse invoice ".repeat(8);
    let mut s = p.state();
    for _ in 0..20 {
        append_value(&mut s, &value, &settings, &pools, now);
    }
    assert_eq!(
        pools.budget_used(),
        arena,
        "the open batch holds the only arena"
    );
    s.seal(SealReason::Due, &settings, &pools, &|| now);
    drop(s);
    let out = take(&p, now, &settings);
    assert_eq!(out.len(), 1);
    let sent = out[0].batch.len();
    assert!(sent < 20 * value.len() / 8, "compressed well: {sent}");
    assert_eq!(pools.budget_used(), sent, "charged by its own size");
    assert!(
        pools.try_get(0).is_err(),
        "the budget still counts it: {sent} of {arena} bytes"
    );
    let batch = RecordBatchRef::new(&out[0].batch).unwrap();
    assert_eq!(batch.compression().unwrap(), Compression::Lz4);
    assert!(batch.verify_crc().is_ok());
    let mut decompressor = Decompressor::new(1 << 20);
    let mut scratch = Vec::new();
    let values: Vec<Vec<u8>> = batch
        .decompress_records(&mut decompressor, &mut scratch)
        .unwrap()
        .map(|r| r.unwrap().value().unwrap().to_vec())
        .collect();
    assert_eq!(values, vec![value.clone(); 20]);
    let effects = p
        .state()
        .settle(out.into_iter().next().unwrap(), ack(), now, &settings);
    assert!(matches!(effects.report.fate, Fate::Acked(_)));
    assert_eq!(pools.budget_used(), 0, "settled, nothing is charged");
}

/// A batch that compresses to more than half its arena stays in it, charged the
/// whole arena until it is settled.
#[test]
fn a_compressed_batch_that_shrinks_little_keeps_its_arena_charged() {
    let now = Instant::now();
    let mut settings = settings();
    settings.codec = Compression::Lz4;
    let arena = 16 * 1024;
    let pools = ArenaPools::new(arena, MemoryBudget::new(2 * arena));
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    // Mostly incompressible: lz4 saves little on bytes from a generator, and only
    // the run at each value's end shrinks.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut s = p.state();
    for _ in 0..12 {
        let value: Vec<u8> = (0..1000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i < 800 { x as u8 } else { b'a' }
            })
            .collect();
        append_value(&mut s, &value, &settings, &pools, now);
    }
    s.seal(SealReason::Due, &settings, &pools, &|| now);
    drop(s);
    let out = take(&p, now, &settings);
    assert_eq!(out.len(), 1);
    let batch = RecordBatchRef::new(&out[0].batch).unwrap();
    assert_eq!(batch.compression().unwrap(), Compression::Lz4, "it shrank");
    assert!(out[0].batch.len() > arena / 2, "but not below half");
    assert_eq!(pools.budget_used(), arena, "the arena stays charged");
    let effects = p
        .state()
        .settle(out.into_iter().next().unwrap(), ack(), now, &settings);
    assert!(matches!(effects.report.fate, Fate::Acked(_)));
    assert_eq!(pools.budget_used(), 0, "settled, the arena is free");
}

/// A record kept out of a batch holding others, whether for room or for a timestamp too
/// far from the batch's first, starts a batch of its own; one too large for any batch
/// fails alone as MessageTooLarge.
#[test]
fn a_record_that_cannot_join_the_open_batch_starts_its_own() {
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let now = Instant::now();
    let mut s = p.state();
    let at = |timestamp| RecordParts {
        key: None,
        value: Some(b"v"),
        headers: &[],
        timestamp,
    };
    let first = s
        .append(at(-1), None, &mut None, &settings, &pools, || now)
        .unwrap();
    // i64::MAX - (-1) overflows the batch's timestamp delta.
    let far = s
        .append(at(i64::MAX), None, &mut None, &settings, &pools, || now)
        .unwrap();
    match (first, far) {
        (
            Appended::Done {
                shared: a,
                index: 0,
            },
            Appended::Done {
                shared: b,
                index: 0,
            },
        ) => assert!(
            !Arc::ptr_eq(&a, &b),
            "the second record has a batch of its own"
        ),
        other => panic!("{other:?}"),
    }
    let huge = vec![0u8; settings.max_request_size];
    let too_large = RecordParts {
        value: Some(&huge),
        ..at(5)
    };
    match s.append(too_large, None, &mut None, &settings, &pools, || now) {
        Err(Error::MessageTooLarge { .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// What a delivery handler was told: (tag, offset or error).
#[derive(Debug, Default)]
struct TagLog(std::sync::Mutex<Vec<(u64, Result<i64, String>)>>);

impl ReportTagged for TagLog {
    fn report(
        &self,
        _topic: &str,
        _partition: i32,
        outcome: Result<&BatchAck, &Error>,
        records: &[TaggedRecord],
    ) {
        let mut log = self.0.lock().unwrap();
        for r in records {
            let result = outcome.map(|a| r.at(a).0).map_err(|e| e.to_string());
            log.push((r.tag, result));
        }
    }
}

/// Tagged and untagged records share batches: the tagged ones are reported when their
/// batch settles, at their own offsets; those of a batch failed while still open too.
#[test]
fn tagged_records_are_reported_with_their_batch() {
    let log = Arc::new(TagLog::default());
    let settings = ProduceSettings {
        report_tagged: Some(TagReports::new(log.clone(), 1 << 20)),
        ..settings()
    };
    let pools = pools();
    let now = Instant::now();
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    {
        let mut s = p.state();
        for (i, tag) in [None, Some(11), Some(12), None].into_iter().enumerate() {
            let appended = s
                .append(
                    value_record(b"v"),
                    tag,
                    &mut None,
                    &settings,
                    &pools,
                    || now,
                )
                .unwrap();
            match (tag, appended) {
                (None, Appended::Done { index, .. }) => assert_eq!(index, i),
                (Some(_), Appended::Tagged) => {}
                (tag, other) => panic!("{tag:?}: {other:?}"),
            }
        }
        s.seal(SealReason::Due, &settings, &pools, &|| now);
        // A second batch, failed while open.
        s.append(
            value_record(b"w"),
            Some(13),
            &mut None,
            &settings,
            &pools,
            || now,
        )
        .unwrap();
    }
    let sent = take(&p, now, &settings);
    assert_eq!(sent.len(), 1);
    assert!(
        log.0.lock().unwrap().is_empty(),
        "nothing before an outcome"
    );
    sent[0].shared.complete(Ok(BatchAck {
        base_offset: 40,
        log_append_time: -1,
    }));
    assert_eq!(*log.0.lock().unwrap(), vec![(11, Ok(41)), (12, Ok(42))]);
    p.state().fail_unsent(&Error::ProducerDropped, now);
    assert_eq!(
        log.0.lock().unwrap().last(),
        Some(&(13, Err(Error::ProducerDropped.to_string())))
    );
}

/// Without a handler a tagged record is refused rather than sent unreported.
#[test]
fn a_tagged_record_without_a_handler_is_refused() {
    let (settings, pools) = (settings(), pools());
    let mut s = PartitionState::default();
    let record = value_record(b"v");
    let refused = s.append(record, Some(1), &mut None, &settings, &pools, Instant::now);
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
}

/// The delivery handler is called once the partition's lock is released, so it may
/// send to the same partition: here it finds the lock free each time it is told.
#[test]
fn the_delivery_handler_runs_with_the_partition_unlocked() {
    #[derive(Debug, Default)]
    struct LockProbe {
        partition: std::sync::Mutex<Option<Arc<ProducePartition>>>,
        found_free: std::sync::Mutex<Vec<bool>>,
    }
    impl ReportTagged for LockProbe {
        fn report(
            &self,
            _topic: &str,
            _partition: i32,
            _outcome: Result<&BatchAck, &Error>,
            _records: &[TaggedRecord],
        ) {
            if let Some(p) = self.partition.lock().unwrap().as_ref() {
                let free = p.state.try_lock().is_ok();
                self.found_free.lock().unwrap().push(free);
            }
        }
    }
    let probe = Arc::new(LockProbe::default());
    let settings = ProduceSettings {
        report_tagged: Some(TagReports::new(probe.clone(), 1 << 20)),
        ..settings()
    };
    let pools = pools();
    let now = Instant::now();
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    *probe.partition.lock().unwrap() = Some(p.clone());
    let record = value_record(b"v");
    p.state()
        .append(record, Some(1), &mut None, &settings, &pools, || now)
        .unwrap();
    // Failed under the lock (the open batch, then a sealed one).
    p.state().fail_unsent(&Error::ProducerDropped, now);
    {
        let mut s = p.state();
        s.append(record, Some(2), &mut None, &settings, &pools, || now)
            .unwrap();
        s.seal(SealReason::Due, &settings, &pools, &|| now);
        s.fail_all(&Error::ShuttingDown, now);
        assert_eq!(
            probe.found_free.lock().unwrap().len(),
            1,
            "not while it is held"
        );
    }
    assert_eq!(*probe.found_free.lock().unwrap(), vec![true, true]);
    *probe.partition.lock().unwrap() = None;
}

/// A batch with tagged records settled inside a sink's turn finishes settling at the
/// turn's end; meanwhile it is still pending for a flush, which then waits for it (and
/// so for its handler).
#[test]
fn a_batch_finishing_after_the_turn_is_still_pending_for_a_flush() {
    let log = Arc::new(TagLog::default());
    let settings = ProduceSettings {
        report_tagged: Some(TagReports::new(log.clone(), 1 << 20)),
        ..settings()
    };
    let pools = pools();
    let now = Instant::now();
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let record = value_record(b"v");
    {
        let mut s = p.state();
        s.append(record, Some(7), &mut None, &settings, &pools, || now)
            .unwrap();
        s.seal(SealReason::Due, &settings, &pools, &|| now);
    }
    let sent = take(&p, now, &settings).pop().unwrap();
    let shared = sent.shared.clone();
    crate::engine::produce::completion::reports_after(|| {
        p.state().settle(sent, ack(), now, &settings);
        let pending = p.state().pending();
        assert!(
            pending.iter().any(|b| Arc::ptr_eq(b, &shared)),
            "pending until its settling finishes"
        );
        assert!(log.0.lock().unwrap().is_empty(), "told at the turn's end");
        assert!(!shared.is_resolved());
    });
    assert_eq!(*log.0.lock().unwrap(), vec![(7, Ok(0))]);
    assert!(shared.is_resolved());
    assert!(p.state().pending().is_empty());
}

/// Appends `count` records (values `r{first}`, `r{first+1}`, ...) made at `at`, and seals
/// them into a batch when `seal`.
fn append_records(
    s: &mut PartitionState,
    first: usize,
    count: usize,
    seal: bool,
    settings: &ProduceSettings,
    pools: &ArenaPools,
    at: Instant,
) {
    for i in first..first + count {
        append_value(s, format!("r{i}").as_bytes(), settings, pools, at);
    }
    if seal {
        s.seal(SealReason::Due, settings, pools, &|| at);
    }
}

/// A partition counting into a limit of `limit` queued records.
fn limited_partition(limit: usize) -> (Arc<ProducePartition>, Arc<QueuedRecords>) {
    let queued = Arc::new(QueuedRecords::new(limit));
    let accounts = ProducerAccounts {
        queued: queued.clone(),
        ..Default::default()
    };
    (ProducePartition::new(Arc::from("t"), 0, accounts), queued)
}

#[test]
fn records_past_the_queued_limit_are_refused_and_given_back_as_batches_settle() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, queued) = limited_partition(6);
    {
        let mut s = p.state();
        for batch in 0..3 {
            append_records(&mut s, 2 * batch, 2, true, &settings, &pools, now);
        }
        let refused = s
            .append(
                value_record(b"r6"),
                None,
                &mut None,
                &settings,
                &pools,
                || now,
            )
            .unwrap();
        assert!(matches!(refused, Appended::NeedRoom), "{refused:?}");
    }
    assert_eq!(queued.queued(), 6, "a refused record is not counted");
    // Three batches of two: acknowledged, failed for good, out of time.
    let mut out = take(&p, now, &settings);
    assert_eq!(out.len(), 1, "one batch on the wire until the first answer");
    p.state().settle(out.remove(0), ack(), now, &settings);
    assert_eq!(
        queued.queued(),
        4,
        "an acknowledged batch gives its records back"
    );
    let mut out = take(&p, now, &settings);
    assert_eq!(out.len(), 2);
    let fatal = Verdict::Fatal(Error::ShuttingDown);
    p.state().settle(out.remove(0), fatal, now, &settings);
    assert_eq!(queued.queued(), 2, "a failed batch gives its records back");
    let later = now + settings.delivery_timeout + Duration::from_secs(1);
    let retry = Verdict::Retry {
        error: Error::Timeout("no answer".into()),
        stale: false,
    };
    p.state().settle(out.remove(0), retry, later, &settings);
    assert_eq!(
        queued.queued(),
        0,
        "a batch out of time gives its records back"
    );
}

#[test]
fn an_expired_batch_gives_its_records_back() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, queued) = limited_partition(100);
    {
        let mut s = p.state();
        append_records(&mut s, 0, 1, true, &settings, &pools, now);
        append_records(&mut s, 1, 1, false, &settings, &pools, now);
    }
    assert_eq!(queued.queued(), 2);
    let later = now + settings.delivery_timeout + Duration::from_secs(1);
    p.state().expire(later, &settings);
    assert_eq!(
        queued.queued(),
        1,
        "the queued batch expired; the open one waits"
    );
}

#[test]
fn a_split_batch_gives_its_records_back_through_its_parts() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, queued) = limited_partition(100);
    {
        let mut s = p.state();
        append_records(&mut s, 0, 3, true, &settings, &pools, now);
    }
    let mut out = take(&p, now, &settings);
    let too_large = Verdict::TooLarge(Error::MessageTooLarge { size: 10, max: 1 });
    p.state().settle(out.remove(0), too_large, now, &settings);
    assert_eq!(queued.queued(), 3, "split, not settled");
    let mut answered = 0;
    while answered < 3 {
        let parts = take(&p, now, &settings);
        assert!(!parts.is_empty(), "the parts go out");
        for part in parts {
            p.state().settle(part, ack(), now, &settings);
            answered += 1;
        }
    }
    assert_eq!(queued.queued(), 0, "every part gave its record back");
}

#[test]
fn closing_gives_back_the_open_batch_and_the_queue() {
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, queued) = limited_partition(100);
    let mut s = p.state();
    append_records(&mut s, 0, 3, true, &settings, &pools, now);
    append_records(&mut s, 3, 2, false, &settings, &pools, now);
    assert_eq!(queued.queued(), 5);
    s.fail_all(&Error::ShuttingDown, now);
    assert_eq!(queued.queued(), 0);
}

/// Three batches of one record; the third made ten seconds after the others (still in
/// time when they run out). The first is acknowledged; the second and third are on the
/// wire.
fn second_and_third_on_the_wire(now: Instant) -> (Arc<ProducePartition>, Outgoing, Outgoing) {
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let made = [now, now, now + Duration::from_secs(10)];
    for (i, at) in made.into_iter().enumerate() {
        append_records(&mut p.state(), i, 1, true, &settings, &pools, at);
    }
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let mut two = take(&p, now, &settings);
    assert_eq!(two.len(), 2);
    let (third, second) = (two.remove(1), two.remove(0));
    (p, second, third)
}

/// [`second_and_third_on_the_wire`], then the second refused before it was written (not
/// its leader: certainly not written) and the third's attempt lost with its connection.
fn second_refused_before_writing_third_lost(now: Instant) -> Arc<ProducePartition> {
    let settings = settings();
    let (p, second, third) = second_and_third_on_the_wire(now);
    let not_leader = Verdict::Retry {
        error: Error::broker(
            KafkaCode::NOT_LEADER_OR_FOLLOWER,
            crate::protocol::ApiKey::Produce,
            Some("t"),
            Some(0),
        ),
        stale: true,
    };
    p.state().settle(second, not_leader, now, &settings);
    p.state().settle(third, connection_lost(), now, &settings);
    p
}

fn connection_lost() -> Verdict {
    Verdict::Retry {
        error: Error::Timeout("connection lost".into()),
        stale: false,
    }
}

/// The third batch's attempt is lost with its connection, then it is retried alone and
/// refused out of order; returns the effects of that refusal and the third's completion.
fn refuse_the_retried_third(
    p: &Arc<ProducePartition>,
    third: Outgoing,
    at: Instant,
) -> (Effects, Arc<BatchShared>) {
    p.state().settle(third, connection_lost(), at, &settings());
    let (effects, shared, _) = refuse_the_one_to_send(p, 2, at + Duration::from_secs(2));
    (effects, shared)
}

/// Takes the partition's one batch to send at `at` (numbered `sequence`: the third,
/// alone) and has it refused out of order; returns the effects of that refusal, its
/// completion, and whether it went out as maybe written.
fn refuse_the_one_to_send(
    p: &Arc<ProducePartition>,
    sequence: i32,
    at: Instant,
) -> (Effects, Arc<BatchShared>, bool) {
    let settings = settings();
    let mut retried = take(p, at, &settings);
    assert_eq!(retried.len(), 1, "alone");
    assert_eq!(sequence_of(&retried[0]), sequence);
    let (shared, maybe_written) = (retried[0].shared.clone(), retried[0].maybe_written);
    let refused = Verdict::OutOfOrder(Error::ShuttingDown);
    let effects = p.state().settle(retried.remove(0), refused, at, &settings);
    (effects, shared, maybe_written)
}

#[test]
fn behind_a_batch_of_unknown_fate_a_lost_attempt_fails_rather_than_being_renumbered() {
    // The second batch's attempt is lost too, and it runs out of time: its fate is
    // unknown. The third, refused out of order, is written if and only if the second's
    // lost attempt lands (its own lost attempt with it): renumbered by an epoch bump, it
    // could be written twice; kept, it would wait out its own timeout with everything
    // else held by the bump. It fails. What the simulation found with a limit on queued
    // records.
    let now = Instant::now();
    let settings = settings();
    let (p, second, third) = second_and_third_on_the_wire(now);
    let out_of_time = now + settings.delivery_timeout + Duration::from_secs(1);
    p.state()
        .settle(second, connection_lost(), out_of_time, &settings);
    let (effects, shared) = refuse_the_retried_third(&p, third, out_of_time);
    assert!(
        effects.bump,
        "failed with its fate unknown: the epoch is bumped"
    );
    assert!(matches!(
        shared.poll_record(0, None),
        std::task::Poll::Ready(super::super::completion::Resolved::Done(Err(_)))
    ));
    assert!(p.state().ready_for_bump(), "nothing left to hold the bump");
}

#[test]
fn behind_a_batch_refused_for_good_a_lost_attempt_cannot_land_and_is_renumbered() {
    // The second is refused for good (the broker never wrote it): nothing past its
    // sequence is taken in this epoch, a lost attempt of the third included.
    let now = Instant::now();
    let settings = settings();
    let (p, second, third) = second_and_third_on_the_wire(now);
    let refused = Verdict::Fatal(Error::ShuttingDown);
    p.state().settle(second, refused, now, &settings);
    let (_, shared) = refuse_the_retried_third(&p, third, now);
    assert!(!shared.is_settled(), "queued again");
    assert!(p.state().ready_for_bump(), "renumbered by the bump");
}

#[test]
fn behind_a_batch_its_connection_failed_for_good_a_lost_attempt_fails_rather_than_being_renumbered()
{
    // The second's attempt ended without an answer the sink could use, and not retried:
    // a malformed answer header, or the task awaiting the answer lost. The broker may
    // have written it, so the third, refused out of order, is written if and only if
    // the second's attempt was (its own lost attempt with it): renumbered by an epoch
    // bump, it could be written twice. It fails, as behind a batch of unknown fate.
    use crate::engine::error::IoError;
    use crate::protocol::{ApiKey, DecodeError};
    let addr = || "127.0.0.1:9".to_string();
    let ended = [
        IoError::Decode {
            api: ApiKey::Produce,
            addr: addr(),
            source: DecodeError::NegativeLength(-2),
        },
        IoError::AnswerLost {
            api: ApiKey::Produce,
            addr: addr(),
            reason: "panicked".into(),
        },
    ];
    for error in ended {
        let now = Instant::now();
        let settings = settings();
        let (p, second, third) = second_and_third_on_the_wire(now);
        let name = error.to_string();
        p.state()
            .settle(second, Verdict::Fatal(Error::Io(error)), now, &settings);
        let (effects, shared) = refuse_the_retried_third(&p, third, now);
        assert!(effects.bump, "{name}: the epoch is bumped");
        assert!(
            matches!(
                shared.poll_record(0, None),
                std::task::Poll::Ready(super::super::completion::Resolved::Done(Err(_)))
            ),
            "{name}: the third fails instead of waiting for a renumbering"
        );
    }
}

#[test]
fn a_lost_attempt_queued_behind_a_retried_batch_holds_the_bump() {
    // The second is still being retried: once it is written, a lost attempt of the
    // third may be too. The third is resolved under its own epoch, not renumbered.
    let now = Instant::now();
    let settings = settings();
    let p = second_refused_before_writing_third_lost(now);
    let later = now + Duration::from_secs(2);
    let mut retried = take(&p, later, &settings);
    assert_eq!(retried.len(), 1, "the second, alone");
    assert_eq!(sequence_of(&retried[0]), 1);
    let second = retried.remove(0);
    assert!(
        !p.state().ready_for_bump(),
        "the third may have been written: not renumbered"
    );
    p.state().settle(second, ack(), later, &settings);
    let third = take(&p, later, &settings).remove(0);
    p.state().settle(third, ack(), later, &settings);
    assert!(p.state().ready_for_bump());
}

#[test]
fn a_retried_batch_goes_out_alone_once_those_before_it_have_answered() {
    // A batch sent again goes out alone: not while the batch before it is on the wire,
    // and not with those behind it. Refused out of order with nothing failed before it,
    // it is the batch right after the last acknowledged: a gap.
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let (p, second, third) = second_and_third_on_the_wire(now);
    p.state().settle(third, connection_lost(), now, &settings);
    append_records(&mut p.state(), 3, 1, true, &settings, &pools, now);
    let later = now + Duration::from_secs(2);
    assert!(
        take(&p, later, &settings).is_empty(),
        "held while the second is on the wire"
    );
    p.state().settle(second, ack(), later, &settings);
    let mut retried = take(&p, later, &settings);
    assert_eq!(retried.len(), 1, "the third alone, the fourth behind it");
    assert_eq!(sequence_of(&retried[0]), 2);
    assert!(retried[0].maybe_written);
    let shared = retried[0].shared.clone();
    let effects = p.state().settle(
        retried.remove(0),
        Verdict::OutOfOrder(Error::ShuttingDown),
        later,
        &settings,
    );
    assert!(effects.bump, "right after the last acknowledged: a gap");
    assert!(!shared.is_settled(), "queued again for the new epoch");
    assert!(p.state().ready_for_bump(), "renumbered by the bump");
}

/// The first batch (one record) acknowledged; then a batch of two records (sequences 1
/// and 2) made at `now` and one of one record (sequence 3) made at `third_made`, both on
/// the wire; the first of them answered too large, so it is split into two parts not
/// sent yet. Returns the partition and the second batch, still on the wire.
fn split_ahead_of_one_on_the_wire(
    now: Instant,
    third_made: Instant,
) -> (Arc<ProducePartition>, Outgoing) {
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    append_records(&mut p.state(), 0, 1, true, &settings, &pools, now);
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    append_records(&mut p.state(), 1, 2, true, &settings, &pools, now);
    append_records(&mut p.state(), 3, 1, true, &settings, &pools, third_made);
    let mut two = take(&p, now, &settings);
    assert_eq!(two.len(), 2);
    let (behind, split) = (two.remove(1), two.remove(0));
    let too_large = Verdict::TooLarge(Error::MessageTooLarge { size: 10, max: 1 });
    p.state().settle(split, too_large, now, &settings);
    (p, behind)
}

#[test]
fn a_batch_sent_again_waits_for_the_split_parts_ahead_of_it() {
    // The parts (never sent) may go out together; the batch behind them, whose attempt
    // was lost, goes again only once they answered, and alone.
    let now = Instant::now();
    let settings = settings();
    let (p, behind) = split_ahead_of_one_on_the_wire(now, now);
    p.state().settle(behind, connection_lost(), now, &settings);
    append_records(&mut p.state(), 4, 1, true, &settings, &pools(), now);
    let later = now + Duration::from_secs(2);
    let parts = take(&p, later, &settings);
    let sequences: Vec<i32> = parts.iter().map(sequence_of).collect();
    assert_eq!(
        sequences,
        vec![1, 2],
        "the parts, not the batch sent again beside them"
    );
    for part in parts {
        p.state().settle(part, ack(), later, &settings);
    }
    let again = take(&p, later, &settings);
    assert_eq!(again.len(), 1, "alone: the batch behind it waits");
    assert_eq!(sequence_of(&again[0]), 3);
    assert!(again[0].maybe_written);
}

#[test]
fn split_parts_that_expire_leave_a_hole_the_epoch_bump_renumbers() {
    // The parts run out of time before they are sent: their sequences will never be
    // written, so everything after them waits for an epoch bump. The batch behind them,
    // refused out of order after a lost attempt, cannot land in this epoch either: it
    // is renumbered by the bump, not held as maybe written until its own timeout.
    let now = Instant::now();
    let settings = settings();
    let (p, behind) = split_ahead_of_one_on_the_wire(now, now + Duration::from_secs(10));
    let out_of_time = now + settings.delivery_timeout + Duration::from_secs(1);
    assert!(
        p.state().expire(out_of_time, &settings),
        "expired parts had sequences: the epoch is bumped"
    );
    p.state()
        .settle(behind, connection_lost(), out_of_time, &settings);
    let later = out_of_time + Duration::from_secs(2);
    resent_alone_refused_out_of_order_is_renumbered(&p, 3, later);
}

#[test]
fn a_lost_attempt_behind_a_batch_surely_not_written_does_not_hold_the_bump() {
    // The second is refused before it was written, the third's attempt is lost. During a
    // bump only a batch that may have been written goes out, at the head of the queue:
    // the second is not one, so nothing goes. The third cannot land (the broker takes no
    // sequence past the second's, which is not written): the bump renumbers both now
    // rather than wait for the second's delivery timeout.
    let now = Instant::now();
    let settings = settings();
    let p = second_refused_before_writing_third_lost(now);
    let later = now + Duration::from_secs(2);
    let out = take_while_bumping(&p, later, &settings);
    assert!(out.is_empty(), "during the bump nothing goes");
    assert!(p.state().ready_for_bump());
}

#[test]
fn behind_a_failure_surely_not_written_a_lost_attempt_is_renumbered_not_failed() {
    // Below the fourth batch: the second failed with its fate unknown (its attempt lost,
    // then out of time), the third was refused for good. The fourth, refused out of
    // order after a lost attempt, cannot land in this epoch whatever became of the
    // second (the third is never written): it is renumbered by the bump, not failed.
    let now = Instant::now();
    let (settings, pools) = (settings(), pools());
    let p = ProducePartition::new(Arc::from("t"), 0, Default::default());
    let made = [
        now,
        now,
        now + Duration::from_secs(10),
        now + Duration::from_secs(10),
    ];
    for (i, at) in made.into_iter().enumerate() {
        append_records(&mut p.state(), i, 1, true, &settings, &pools, at);
    }
    let first = take(&p, now, &settings).remove(0);
    p.state().settle(first, ack(), now, &settings);
    let mut three = take(&p, now, &settings);
    assert_eq!(three.len(), 3);
    let (fourth, third, second) = (three.remove(2), three.remove(1), three.remove(0));
    p.state().settle(second, connection_lost(), now, &settings);
    p.state()
        .settle(third, Verdict::Fatal(Error::ShuttingDown), now, &settings);
    p.state().settle(fourth, connection_lost(), now, &settings);
    let out_of_time = now + settings.delivery_timeout + Duration::from_secs(1);
    assert!(
        p.state().expire(out_of_time, &settings),
        "the second ran out of time"
    );
    resent_alone_refused_out_of_order_is_renumbered(&p, 3, out_of_time);
}

/// Takes the partition's one batch to send at `at` (sent again, at `sequence`), has it
/// refused out of order, and checks it is queued again for the epoch bump to renumber,
/// not failed.
fn resent_alone_refused_out_of_order_is_renumbered(
    p: &Arc<ProducePartition>,
    sequence: i32,
    at: Instant,
) {
    let (_, shared, maybe_written) = refuse_the_one_to_send(p, sequence, at);
    assert!(maybe_written, "its last attempt was lost");
    assert!(
        !shared.is_settled(),
        "queued again for the new epoch, not failed"
    );
    assert!(p.state().ready_for_bump(), "renumbered by the bump");
}

/// The third batch's attempt ended with `error` (retriable), the second was acknowledged:
/// the third as taken again, and whether an epoch bump could renumber the partition then.
fn third_retried_after(error: crate::io::IoError) -> (Outgoing, bool) {
    let now = Instant::now();
    let settings = settings();
    let (p, second, third) = second_and_third_on_the_wire(now);
    let failed = Verdict::Retry {
        error: Error::Io(error),
        stale: true,
    };
    p.state().settle(third, failed, now, &settings);
    p.state().settle(second, ack(), now, &settings);
    let ready = p.state().ready_for_bump();
    let later = now + Duration::from_secs(2);
    let mut retried = take(&p, later, &settings);
    assert_eq!(retried.len(), 1);
    (retried.remove(0), ready)
}

#[test]
fn an_attempt_that_never_reached_the_broker_leaves_the_batch_surely_unwritten() {
    // No connection could be made: the request was never written, so the batch is not
    // one of unknown fate (an epoch bump may renumber it at once, and running out of
    // time it fails without one being needed for it).
    let addr = "127.0.0.1:9".to_string();
    let never_sent = [
        crate::io::IoError::Connect {
            addr: addr.clone(),
            message: "refused".into(),
        },
        crate::io::IoError::NotConnected {
            addr: addr.clone(),
            retry_in: Duration::from_millis(100),
        },
    ];
    for error in never_sent {
        let shown = error.to_string();
        let (retried, ready) = third_retried_after(error);
        assert!(!retried.maybe_written, "{shown}");
        assert!(ready, "{shown}: nothing of unknown fate holds a bump");
    }
    // A connection that broke with it on the wire leaves its fate unknown.
    let (retried, ready) = third_retried_after(crate::io::IoError::Disconnected {
        addr,
        reason: "reset".into(),
    });
    assert!(retried.maybe_written);
    assert!(!ready, "learnt first, under the epoch it was sent with");
}
