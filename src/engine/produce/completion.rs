//! The completion all records of one batch share: pending (with the wakers of the
//! futures waiting on it), done (the broker's answer or the final error), or split
//! (MESSAGE_TOO_LARGE: record `i` moved to batch `i`). Settled once; the first outcome
//! stays. It is the handoff from a sink to the users' delivery futures, on any thread,
//! and to the producer's delivery handler for the batch's tagged records (sent with a
//! tag instead of a future), which is called once, by whoever settles the batch, and
//! never with a producer lock held: a batch with tagged records settled while the thread
//! holds a partition's lock ([`ReportScope`], which `ProducePartition::state` takes), or
//! is in a sink's turn, is settled when the last such scope ends; its outcome becomes
//! visible to its futures and flushes only after the handler returns.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::error::Error;

/// The broker's answer for a whole batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchAck {
    pub base_offset: i64,
    pub log_append_time: i64,
}

impl BatchAck {
    /// The offset and timestamp of record `index` of the batch, whose own timestamp was
    /// `timestamp`: the broker's log append time where the topic uses it.
    pub fn record_at(&self, index: usize, timestamp: i64) -> (i64, i64) {
        let offset = if self.base_offset < 0 {
            -1
        } else {
            self.base_offset + index as i64
        };
        let timestamp = if self.log_append_time >= 0 {
            self.log_append_time
        } else {
            timestamp
        };
        (offset, timestamp)
    }
}

/// A record sent with a tag instead of a delivery future: its place in its batch, its
/// timestamp and the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaggedRecord {
    pub index: u32,
    pub timestamp: i64,
    pub tag: u64,
}

impl TaggedRecord {
    /// Its offset and timestamp in a batch acknowledged with `ack`.
    pub fn at(&self, ack: &BatchAck) -> (i64, i64) {
        ack.record_at(self.index as usize, self.timestamp)
    }
}

/// Where the outcome of tagged records goes: called once per settled batch that has
/// some, with the batch's partition, its outcome and its tagged records.
pub(crate) trait ReportTagged: Send + Sync + std::fmt::Debug {
    fn report(
        &self,
        topic: &str,
        partition: i32,
        outcome: Result<&BatchAck, &Error>,
        records: &[TaggedRecord],
    );
}

/// Where tagged records are reported, and the lists their batches keep them in.
#[derive(Debug, Clone)]
pub(crate) struct TagReports {
    pub reporter: Arc<dyn ReportTagged>,
    pub lists: Arc<TagLists>,
}

impl TagReports {
    /// Reports to `reporter`, keeping reported lists of up to `keep_bytes` in all to
    /// lend again.
    pub fn new(reporter: Arc<dyn ReportTagged>, keep_bytes: usize) -> Self {
        TagReports {
            reporter,
            lists: Arc::new(TagLists::new(keep_bytes)),
        }
    }
}

/// Lists of tagged records given back once reported, lent again to new batches. A
/// batch's list grows to its record count (a 1 MB batch of 100-B records: about 9,000
/// records, 216 KB): a new list per batch grew by doubling every time, each growth a
/// copy into memory faulted in afresh (a fifth of produce-100's page faults). Lists of
/// up to `keep_bytes` in all are kept (what is kept was in use at once before); a list
/// with room for fewer than [`TagLists::SMALLEST`] records (the one-record lists of a
/// split batch) is not worth keeping.
#[derive(Debug)]
pub(crate) struct TagLists {
    kept: Mutex<Kept>,
    keep_bytes: usize,
}

/// The lists kept, and the bytes they hold.
#[derive(Debug, Default)]
struct Kept {
    lists: Vec<Vec<TaggedRecord>>,
    bytes: usize,
}

/// The bytes a list holds.
fn bytes_of(list: &Vec<TaggedRecord>) -> usize {
    list.capacity() * std::mem::size_of::<TaggedRecord>()
}

impl TagLists {
    /// The fewest records a list kept has room for.
    const SMALLEST: usize = 64;

    fn new(keep_bytes: usize) -> Self {
        TagLists {
            kept: Mutex::new(Kept::default()),
            keep_bytes,
        }
    }

    /// An empty list: one given back before, if any.
    pub fn take(&self) -> Vec<TaggedRecord> {
        let mut kept = self.kept();
        let list = kept.lists.pop().unwrap_or_default();
        kept.bytes -= bytes_of(&list);
        list
    }

    /// Keeps `list` (emptied) to lend again, unless it is small or the lists kept
    /// would come to more than `keep_bytes`.
    fn give_back(&self, mut list: Vec<TaggedRecord>) {
        if list.capacity() < Self::SMALLEST {
            return;
        }
        list.clear();
        let mut kept = self.kept();
        let bytes = kept.bytes + bytes_of(&list);
        if bytes <= self.keep_bytes {
            kept.bytes = bytes;
            kept.lists.push(list);
        }
    }

    /// Lists kept now.
    #[cfg(test)]
    pub fn kept_count(&self) -> usize {
        self.kept().lists.len()
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A batch's tagged records and where to report them.
pub(crate) struct TaggedBatch {
    pub reports: TagReports,
    pub topic: Arc<str>,
    pub partition: i32,
    pub records: Vec<TaggedRecord>,
}

impl std::fmt::Debug for TaggedBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaggedBatch")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("records", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl TaggedBatch {
    /// Reports the batch's tagged records with `settled`; a split batch hands each record
    /// on to the batch it moved to, reported when that one settles.
    fn settle(self, settled: &Settled) {
        match settled {
            Settled::Done(outcome) => self.reports.reporter.report(
                &self.topic,
                self.partition,
                outcome.as_ref(),
                &self.records,
            ),
            Settled::Split(parts) => {
                for r in &self.records {
                    let part = TaggedBatch {
                        reports: self.reports.clone(),
                        topic: self.topic.clone(),
                        partition: self.partition,
                        records: vec![TaggedRecord { index: 0, ..*r }],
                    };
                    match parts.get(r.index as usize) {
                        Some(p) => p.tag(part),
                        // Cannot happen (a split makes a batch per record); reported
                        // failed rather than never.
                        None => part.settle(&Settled::Done(Err(Error::ShuttingDown))),
                    }
                }
            }
        }
        self.reports.lists.give_back(self.records);
    }
}

/// How a batch ended.
#[derive(Debug)]
enum Settled {
    Done(Result<BatchAck, Error>),
    /// The batch was split (MESSAGE_TOO_LARGE); record `i` now lives in batch `i`.
    Split(Vec<Arc<BatchShared>>),
}

/// Where one future's waker sits in its batch's list of waiting wakers, once the
/// future has waited: each future keeps to its own entry and replaces the waker there
/// when polled again with another.
///
/// Not a search of the list with `Waker::will_wake` against the waker a poll is given:
/// a stored clone can compare unequal to the very waker it was cloned from (its vtable
/// a copy elsewhere in the binary, as with tokio's `block_on` waker in a release build),
/// and then every poll of a pending future added a waker more. A harness polling its
/// oldest report at every turn left about ten per batch, each an `eventfd` write when
/// the batch settled; a future polled in a loop would have grown the list without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitSlot(u32);

impl WaitSlot {
    /// Not waiting yet (or waiting on another batch: a split moves the record). A
    /// future made afresh for each wait (as `Producer::flush` makes for each batch it
    /// waits on) takes a new entry each time.
    pub const NONE: WaitSlot = WaitSlot(u32::MAX);
}

/// The completion shared by every record of one batch.
///
/// The outcome is set once, under `waiting`'s lock, so a future that finds it unset
/// under that lock has its waker taken by the settling; once set it is read without any
/// lock (every record of a batch reads it: one lock per record would be paid by every
/// delivery future).
#[derive(Debug)]
pub(crate) struct BatchShared {
    settled: OnceLock<Settled>,
    /// Its outcome is decided: set when a settling begins (which may finish later, see
    /// [`ReportScope`]); later settlings are ignored.
    decided: AtomicBool,
    waiting: Mutex<Waiting>,
    /// Where threads blocked in [`BatchShared::wait_record`] sleep.
    done: Condvar,
}

/// Who waits while the batch is pending.
#[derive(Debug, Default)]
struct Waiting {
    /// The wakers of the futures, one entry per future (its [`WaitSlot`]).
    wakers: Vec<Waker>,
    /// Threads asleep on `done`: settling notifies the condition variable (a system
    /// call) only when there are some.
    blocked: usize,
    /// The batch's tagged records, reported when it settles.
    tagged: Option<TaggedBatch>,
}

impl BatchShared {
    pub fn new() -> Arc<Self> {
        Arc::new(BatchShared {
            settled: OnceLock::new(),
            decided: AtomicBool::new(false),
            waiting: Mutex::new(Waiting::default()),
            done: Condvar::new(),
        })
    }

    /// Settles the batch; false when its outcome was decided already (the first one
    /// stays). Its tagged records are reported first, so that whoever waits for the
    /// batch (a flush) is released only once the delivery handler has been told; inside
    /// a [`ReportScope`] all of it waits for the scope's end.
    fn settle(self: &Arc<Self>, outcome: Settled) -> bool {
        let tagged = match self.waiting.lock() {
            Ok(mut waiting) if !self.decided.swap(true, Ordering::AcqRel) => waiting.tagged.take(),
            _ => return false,
        };
        match tagged {
            Some(tagged) if DEPTH.try_with(Cell::get).unwrap_or(0) > 0 => {
                let mut deferred = Some((self.clone(), outcome, tagged));
                let queued = DEFERRED.try_with(|d| {
                    d.borrow_mut().extend(deferred.take());
                    let _ = ANY_DEFERRED.try_with(|a| a.set(true));
                });
                // The thread's locals being torn down: finished here rather than lost.
                if let (Err(_), Some((_, outcome, tagged))) = (queued, deferred) {
                    self.finish_settling(outcome, Some(tagged));
                }
            }
            tagged => self.finish_settling(outcome, tagged),
        }
        true
    }

    /// Whether the batch's outcome is visible to its futures and flushes (its settling
    /// finished).
    pub fn is_resolved(&self) -> bool {
        self.settled.get().is_some()
    }

    /// Reports `tagged` with `outcome` (and any tags the batch was given meanwhile),
    /// then makes the outcome the batch's and wakes whoever waits for it.
    fn finish_settling(&self, outcome: Settled, mut tagged: Option<TaggedBatch>) {
        let (wakers, blocked) = loop {
            if let Some(tagged) = tagged.take() {
                tagged.settle(&outcome);
            }
            let Ok(mut waiting) = self.waiting.lock() else {
                return;
            };
            // Tags given while the handler ran are reported before the outcome shows.
            tagged = waiting.tagged.take();
            if tagged.is_none() {
                // Only this settling sets it (`decided` kept any other out).
                let _ = self.settled.set(outcome);
                break (std::mem::take(&mut waiting.wakers), waiting.blocked);
            }
        };
        if blocked > 0 {
            self.done.notify_all();
        }
        wake_each_task_once(wakers);
    }

    /// Gives the batch its tagged records, reported when it settles (at once if it has).
    pub(crate) fn tag(&self, tagged: TaggedBatch) {
        if tagged.records.is_empty() {
            return;
        }
        // A batch gets its tags before it is settled (when sealed or failed open, or,
        // split, before its parts are sent); one being settled takes them when it
        // finishes.
        let pending = match self.waiting.lock() {
            Ok(mut waiting) if self.settled.get().is_none() => {
                waiting.tagged = Some(tagged);
                None
            }
            Ok(_) => Some(Ok(tagged)),
            Err(_) => Some(Err(tagged)),
        };
        match pending {
            None => {}
            Some(Ok(tagged)) => {
                if let Some(settled) = self.settled.get() {
                    tagged.settle(settled);
                }
            }
            // The lock poisoned (a panic while it was held): reported failed, not never.
            Some(Err(tagged)) => tagged.settle(&Settled::Done(Err(Error::ShuttingDown))),
        }
    }

    /// Whether the batch's outcome is decided (done or split; its settling may still
    /// be finishing, see [`ReportScope`]).
    pub fn is_settled(&self) -> bool {
        self.decided.load(Ordering::Acquire)
    }

    /// Completes every record of the batch; false when it was settled already.
    pub fn complete(self: &Arc<Self>, result: Result<BatchAck, Error>) -> bool {
        self.settle(Settled::Done(result))
    }

    /// Hands each record over to its own new batch.
    pub fn split_into(self: &Arc<Self>, parts: Vec<Arc<BatchShared>>) {
        let _ = self.settle(Settled::Split(parts));
    }

    /// Record `index`'s part of the outcome, once there is one.
    fn resolved(&self, index: usize) -> Option<Resolved> {
        Some(match self.settled.get()? {
            Settled::Done(r) => Resolved::Done(r.clone()),
            Settled::Split(parts) => match parts.get(index) {
                Some(p) => Resolved::Moved(p.clone()),
                None => Resolved::Done(Err(Error::ShuttingDown)),
            },
        })
    }

    /// The result for record `index`, or the batch it moved to; if pending, registers
    /// the waker in the future's own entry (`slot`: [`WaitSlot::NONE`] the first time).
    #[inline]
    pub(crate) fn poll_record(
        &self,
        index: usize,
        waiter: Option<(&Waker, &mut WaitSlot)>,
    ) -> Poll<Resolved> {
        if let Some(r) = self.resolved(index) {
            return Poll::Ready(r);
        }
        let Ok(mut waiting) = self.waiting.lock() else {
            return Poll::Ready(Resolved::Done(Err(Error::ShuttingDown)));
        };
        // Settled meanwhile: its wakers were taken already.
        if let Some(r) = self.resolved(index) {
            return Poll::Ready(r);
        }
        if let Some((waker, slot)) = waiter {
            register(&mut waiting.wakers, waker, slot);
        }
        Poll::Pending
    }

    #[inline]
    pub(crate) fn wait_record(&self, index: usize) -> Resolved {
        if let Some(r) = self.resolved(index) {
            return r;
        }
        let Ok(mut waiting) = self.waiting.lock() else {
            return Resolved::Done(Err(Error::ShuttingDown));
        };
        loop {
            if let Some(r) = self.resolved(index) {
                return r;
            }
            waiting.blocked += 1;
            waiting = match self.done.wait(waiting) {
                Ok(g) => g,
                Err(_) => return Resolved::Done(Err(Error::ShuttingDown)),
            };
            waiting.blocked -= 1;
        }
    }

    /// The batches a split batch became (none when it was not split).
    fn parts(&self) -> Vec<Arc<BatchShared>> {
        match self.settled.get() {
            Some(Settled::Split(p)) => p.clone(),
            _ => Vec::new(),
        }
    }
}

/// Puts `waker` in the entry `slot` names, or in a new one.
fn register(waiting: &mut Vec<Waker>, waker: &Waker, slot: &mut WaitSlot) {
    let entry = (*slot != WaitSlot::NONE)
        .then(|| waiting.get_mut(slot.0 as usize))
        .flatten();
    match entry {
        // `clone_from` keeps the stored waker when it is known to wake the same task.
        Some(old) => old.clone_from(waker),
        None => {
            // A batch holds at most i32::MAX records, so the index fits; were it ever
            // not to, the slot stays NONE and the future registers afresh at each poll.
            if let Ok(index) = u32::try_from(waiting.len())
                && index != WaitSlot::NONE.0
            {
                *slot = WaitSlot(index);
            }
            waiting.push(waker.clone());
        }
    }
}

/// Wakes every waker, but one equal to the waker woken just before it only once: the
/// futures of one task (records of one batch awaited together) register one after
/// another, and their stored clones compare equal to each other.
fn wake_each_task_once(wakers: Vec<Waker>) {
    let mut last: Option<Waker> = None;
    for w in wakers {
        if last.as_ref().is_some_and(|l| l.will_wake(&w)) {
            continue;
        }
        w.wake_by_ref();
        last = Some(w);
    }
}

thread_local! {
    /// How many [`ReportScope`]s this thread is in.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Settlings of batches with tagged records begun inside them, to finish when the
    /// last one ends.
    static DEFERRED: RefCell<Vec<(Arc<BatchShared>, Settled, TaggedBatch)>> =
        const { RefCell::new(Vec::new()) };
    /// Whether `DEFERRED` may hold any: what a scope's end looks at.
    static ANY_DEFERRED: Cell<bool> = const { Cell::new(false) };
    /// `finish_deferred` is running on this thread.
    static FINISHING: Cell<bool> = const { Cell::new(false) };
}

/// While one is alive on a thread, batches with tagged records settled there finish
/// settling (their handler called, then their outcome made visible) only when the last
/// one ends: the delivery handler never runs with a producer lock held, so it may send.
/// `ProducePartition::state` holds one with the partition's lock (dropped after it), and
/// a sink's turn holds one around everything it settles (so its handler runs after the
/// turn's freed memory is back in the budget).
///
/// Not `Send`: a scope counts on its thread, so it must never be held across an
/// `.await` (another task on the thread would run inside it).
#[must_use = "the scope ends when this is dropped"]
pub(crate) struct ReportScope(std::marker::PhantomData<*const ()>);

impl ReportScope {
    /// Enters a scope.
    #[inline]
    pub fn enter() -> Self {
        let _ = DEPTH.try_with(|d| d.set(d.get() + 1));
        ReportScope(std::marker::PhantomData)
    }
}

impl Drop for ReportScope {
    #[inline]
    fn drop(&mut self) {
        let depth = DEPTH
            .try_with(|d| {
                let depth = d.get().saturating_sub(1);
                d.set(depth);
                depth
            })
            .unwrap_or(1);
        if depth == 0 && ANY_DEFERRED.try_with(Cell::get).unwrap_or(false) {
            finish_deferred();
        }
    }
}

/// Finishes the settlings deferred on this thread, and those their handlers defer, in
/// the order they were deferred. A handler's own scopes ending inside leave theirs to
/// this loop rather than start another (no recursion, order kept).
#[cold]
fn finish_deferred() {
    if FINISHING.try_with(|f| f.replace(true)).unwrap_or(true) {
        return;
    }
    let mut finishing = Finishing(Vec::new().into_iter());
    loop {
        let _ = ANY_DEFERRED.try_with(|a| a.set(false));
        let deferred = DEFERRED
            .try_with(|d| std::mem::take(&mut *d.borrow_mut()))
            .unwrap_or_default();
        if deferred.is_empty() {
            return;
        }
        finishing.0 = deferred.into_iter();
        for (shared, outcome, tagged) in finishing.0.by_ref() {
            shared.finish_settling(outcome, Some(tagged));
        }
    }
}

/// The settlings being finished: on a panic (a waker's), those not reached yet go back
/// to be finished at the thread's next scope end instead of being lost.
struct Finishing(std::vec::IntoIter<(Arc<BatchShared>, Settled, TaggedBatch)>);

impl Drop for Finishing {
    fn drop(&mut self) {
        let rest: Vec<_> = self.0.by_ref().collect();
        if !rest.is_empty() {
            let _ = DEFERRED.try_with(|d| d.borrow_mut().extend(rest));
            let _ = ANY_DEFERRED.try_with(|a| a.set(true));
        }
        let _ = FINISHING.try_with(|f| f.set(false));
    }
}

/// Runs `f` inside a [`ReportScope`].
pub(crate) fn reports_after<R>(f: impl FnOnce() -> R) -> R {
    let _scope = ReportScope::enter();
    f()
}

pub(crate) enum Resolved {
    Done(Result<BatchAck, Error>),
    Moved(Arc<BatchShared>),
}

/// Waits for a whole batch (flush): until it is settled, and a split batch until every
/// part is.
pub(crate) fn batch_done(shared: Arc<BatchShared>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    struct Settled(Arc<BatchShared>, WaitSlot);
    impl Future for Settled {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let Settled(shared, slot) = &mut *self;
            match shared.poll_record(0, Some((cx.waker(), slot))) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(_) => Poll::Ready(()),
            }
        }
    }
    Box::pin(async move {
        Settled(shared.clone(), WaitSlot::NONE).await;
        for c in shared.parts() {
            batch_done(c).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// A task that counts its wake-ups.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn woken(task: &Arc<Task>) -> usize {
        task.0.load(Ordering::SeqCst)
    }

    fn ack() -> Result<BatchAck, Error> {
        Ok(BatchAck {
            base_offset: 7,
            log_append_time: -1,
        })
    }

    #[test]
    fn a_thread_blocked_on_a_record_is_woken_when_its_batch_settles() {
        let shared = BatchShared::new();
        let blocked = {
            let shared = shared.clone();
            std::thread::spawn(move || match shared.wait_record(3) {
                Resolved::Done(r) => r.map(|a| a.base_offset),
                Resolved::Moved(_) => panic!("not split"),
            })
        };
        // Settled only once the thread sleeps on the batch (or it finds it settled).
        while shared.waiting.lock().unwrap().blocked == 0 && !blocked.is_finished() {
            std::thread::yield_now();
        }
        assert!(shared.complete(ack()));
        assert_eq!(blocked.join().unwrap().unwrap(), 7);
        assert_eq!(shared.waiting.lock().unwrap().blocked, 0);
    }

    #[test]
    fn a_future_polled_again_keeps_one_entry_and_only_its_last_waker_is_woken() {
        let shared = BatchShared::new();
        let tasks: Vec<Arc<Task>> = (0..1000).map(|_| Arc::default()).collect();
        let mut slot = WaitSlot::NONE;
        for task in &tasks {
            let waker = Waker::from(task.clone());
            assert!(
                shared
                    .poll_record(0, Some((&waker, &mut slot)))
                    .is_pending()
            );
        }
        assert_eq!(shared.waiting.lock().unwrap().wakers.len(), 1);
        assert!(shared.complete(ack()));
        let (last, earlier) = tasks.split_last().unwrap();
        assert_eq!(woken(last), 1);
        assert!(earlier.iter().all(|t| woken(t) == 0));
    }

    #[test]
    fn every_waiting_future_of_a_batch_is_woken_and_one_task_once() {
        let shared = BatchShared::new();
        let (a, b) = (Arc::<Task>::default(), Arc::<Task>::default());
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let mut slots = [WaitSlot::NONE; 4];
        // Records 0 and 1 awaited by task a, 2 by b, then 3 by a again.
        for (i, w) in [&wa, &wa, &wb, &wa].into_iter().enumerate() {
            assert!(shared.poll_record(i, Some((w, &mut slots[i]))).is_pending());
        }
        assert_eq!(shared.waiting.lock().unwrap().wakers.len(), 4);
        assert!(shared.complete(ack()));
        // a's two entries in a row wake it once; its later one again.
        assert_eq!((woken(&a), woken(&b)), (2, 1));
        let mut slot = WaitSlot::NONE;
        match shared.poll_record(3, Some((&wa, &mut slot))) {
            Poll::Ready(Resolved::Done(Ok(ack))) => assert_eq!(ack.base_offset, 7),
            _ => panic!("a settled batch is ready"),
        }
        assert_eq!(slot, WaitSlot::NONE);
    }

    /// Every report a delivery handler got: (partition, tag, offset or error), and
    /// whether the batch looked settled to its waiters while it was told.
    /// (partition, tag, (offset, timestamp) or the error's text).
    type Report = (i32, u64, Result<(i64, i64), String>);

    #[derive(Debug, Default)]
    struct Recorder {
        reports: Mutex<Vec<Report>>,
        watching: Mutex<Option<Arc<BatchShared>>>,
        settled_while_told: Mutex<Vec<bool>>,
    }

    impl ReportTagged for Recorder {
        fn report(
            &self,
            _topic: &str,
            partition: i32,
            outcome: Result<&BatchAck, &Error>,
            records: &[TaggedRecord],
        ) {
            if let Some(b) = self.watching.lock().unwrap().as_ref() {
                let visible = b.poll_record(0, None).is_ready();
                self.settled_while_told.lock().unwrap().push(visible);
            }
            let mut all = self.reports.lock().unwrap();
            for r in records {
                let result = outcome.map(|a| r.at(a)).map_err(|e| e.to_string());
                all.push((partition, r.tag, result));
            }
        }
    }

    fn tagged(recorder: &Arc<Recorder>, records: &[(u32, i64, u64)]) -> TaggedBatch {
        TaggedBatch {
            reports: TagReports::new(recorder.clone(), 1 << 20),
            topic: Arc::from("t"),
            partition: 3,
            records: records
                .iter()
                .map(|&(index, timestamp, tag)| TaggedRecord {
                    index,
                    timestamp,
                    tag,
                })
                .collect(),
        }
    }

    #[test]
    fn a_reported_list_is_lent_again_empty_and_no_more_are_kept_than_asked() {
        let recorder = Arc::new(Recorder::default());
        let list_bytes = 100 * std::mem::size_of::<TaggedRecord>();
        // Room for one list of 100 records, not two.
        let reports = TagReports::new(recorder.clone(), list_bytes * 3 / 2);
        let settle_one = |records: usize| {
            let shared = BatchShared::new();
            let mut batch = tagged(&recorder, &[]);
            batch.reports = reports.clone();
            batch.records = Vec::with_capacity(records);
            for i in 0..records {
                batch.records.push(TaggedRecord {
                    index: i as u32,
                    timestamp: 1,
                    tag: i as u64,
                });
            }
            shared.tag(batch);
            assert!(shared.complete(Ok(BatchAck {
                base_offset: 0,
                log_append_time: -1,
            })));
        };
        settle_one(100);
        settle_one(100);
        settle_one(3);
        assert_eq!(reports.lists.kept_count(), 1, "one of 100; none of 3");
        let lent = reports.lists.take();
        assert!(lent.is_empty(), "lent empty");
        assert_eq!(lent.capacity(), 100, "with the room it had");
        assert_eq!(reports.lists.kept_count(), 0);
        assert_eq!(reports.lists.take().capacity(), 0, "then new ones");
        drop(lent);
        settle_one(100);
        assert_eq!(
            reports.lists.kept_count(),
            1,
            "the bytes taken out are free again"
        );
        assert_eq!(
            recorder.reports.lock().unwrap().len(),
            303,
            "every record reported"
        );
    }

    #[test]
    fn tagged_records_are_reported_once_before_the_batch_settles_for_its_waiters() {
        let recorder = Arc::new(Recorder::default());
        let shared = BatchShared::new();
        *recorder.watching.lock().unwrap() = Some(shared.clone());
        shared.tag(tagged(&recorder, &[(0, 10, 7), (2, 11, 9)]));
        assert!(
            recorder.reports.lock().unwrap().is_empty(),
            "not before it settles"
        );
        assert!(shared.complete(Ok(BatchAck {
            base_offset: 100,
            log_append_time: -1,
        })));
        assert_eq!(
            *recorder.reports.lock().unwrap(),
            vec![(3, 7, Ok((100, 10))), (3, 9, Ok((102, 11)))]
        );
        // Told before a flush waiting on the batch could see it settled.
        assert_eq!(*recorder.settled_while_told.lock().unwrap(), vec![false]);
        assert!(
            !shared.complete(Err(Error::ShuttingDown)),
            "the first outcome stays"
        );
        assert_eq!(recorder.reports.lock().unwrap().len(), 2, "reported once");
        *recorder.watching.lock().unwrap() = None;
    }

    #[test]
    fn a_split_batch_hands_each_tagged_record_to_its_part() {
        let recorder = Arc::new(Recorder::default());
        let parent = BatchShared::new();
        parent.tag(tagged(&recorder, &[(1, 5, 41), (2, 6, 42)]));
        let parts: Vec<_> = (0..3).map(|_| BatchShared::new()).collect();
        parent.split_into(parts.clone());
        assert!(
            recorder.reports.lock().unwrap().is_empty(),
            "parts not settled yet"
        );
        assert!(parts[2].complete(Ok(BatchAck {
            base_offset: 50,
            log_append_time: 999,
        })));
        assert!(parts[1].complete(Err(Error::Timeout("expired".into()))));
        assert!(parts[0].complete(Ok(BatchAck {
            base_offset: 1,
            log_append_time: -1,
        })));
        assert_eq!(
            *recorder.reports.lock().unwrap(),
            vec![
                // Record 2 is record 0 of part 2, stamped with the log append time.
                (3, 42, Ok((50, 999))),
                (3, 41, Err(Error::Timeout("expired".into()).to_string())),
            ]
        );
    }

    #[test]
    fn tags_given_to_a_settled_batch_are_reported_at_once() {
        let recorder = Arc::new(Recorder::default());
        let shared = BatchShared::new();
        assert!(shared.complete(Err(Error::ProducerDropped)));
        shared.tag(tagged(&recorder, &[(0, 1, 5)]));
        assert_eq!(
            *recorder.reports.lock().unwrap(),
            vec![(3, 5, Err(Error::ProducerDropped.to_string()))]
        );
    }
}
