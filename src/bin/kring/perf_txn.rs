//! `kring perf produce --transactional-id ID --txn-records N`: the produce run in
//! transactions (perf/README.md, the peer contract's transactional produce). The producer
//! initialises transactions once, before the clock starts, then sends its records in
//! transactions of N each — begin, N sends, commit; the last one may be shorter — and
//! the run fails on the first record or commit that fails (the open transaction is then
//! aborted, so nothing of it is left for read_committed readers).
//!
//! The send loop itself is perf produce's ([`RecordSender`]), so both runs hand records
//! to the producer and time their delivery reports the same way.

use kring::producer::Producer;

use crate::args::UsageError;
use crate::perf::RecordSender;
use crate::{CliError, wait};

/// The two options, given together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnOptions {
    /// The producer's `transactional.id`.
    pub(crate) id: String,
    /// Records per transaction (at least 1).
    pub(crate) records: u64,
}

impl TxnOptions {
    /// Checks `--transactional-id` and `--txn-records`: `None` when neither is given;
    /// one without the other, an empty id or 0 records is a usage error.
    pub(crate) fn check(
        id: Option<String>,
        records: Option<u64>,
    ) -> Result<Option<TxnOptions>, UsageError> {
        match (id, records) {
            (None, None) => Ok(None),
            (Some(id), _) if id.is_empty() => {
                Err(UsageError::new("--transactional-id needs a non-empty id"))
            }
            (Some(_), Some(0)) => Err(UsageError::new("--txn-records must be at least 1")),
            (Some(id), Some(records)) => Ok(Some(TxnOptions { id, records })),
            (None, Some(_)) => Err(UsageError::new("--txn-records needs --transactional-id")),
            (Some(_), None) => Err(UsageError::new("--transactional-id needs --txn-records")),
        }
    }

    /// The producer property these options set.
    pub(crate) fn setting(&self) -> (&'static str, Option<String>) {
        ("transactional.id", Some(self.id.clone()))
    }
}

/// Registers the transactional id (InitProducerId): set-up, before the timed part.
pub(crate) fn init(producer: &Producer, options: &TxnOptions) -> Result<(), CliError> {
    wait(producer.init_transactions())?;
    println!(
        "perf produce: transactions of {} records, transactional.id {}",
        options.records, options.id
    );
    Ok(())
}

/// Sends records `0..records` in transactions of `per_txn`, each committed before the
/// next begins; on a failure the open transaction is aborted and the failure returned.
pub(crate) async fn send_in_transactions(
    sender: &mut RecordSender<'_>,
    records: u64,
    per_txn: u64,
) -> Result<(), kring::Error> {
    let mut start = 0;
    while start < records {
        let end = records.min(start.saturating_add(per_txn));
        if let Err(e) = one_transaction(sender, start..end).await {
            // The failure is what the run reports; an abort that fails as well (a fenced
            // or fatal producer) adds nothing to it.
            let _ = sender.producer().abort_transaction().await;
            return Err(e);
        }
        start = end;
    }
    Ok(())
}

/// Begin, the sends of `range`, commit.
async fn one_transaction(
    sender: &mut RecordSender<'_>,
    range: std::ops::Range<u64>,
) -> Result<(), kring::Error> {
    sender.producer().begin_transaction()?;
    sender.send(range).await?;
    sender.producer().commit_transaction().await
}
