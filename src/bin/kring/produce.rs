//! `kring produce`: records from stdin or a file, split on a delimiter (found with
//! memchr), optionally split again into key and value, sent with the async producer.
//!
//! Input is read in chunks into one growing buffer; records are borrowed from it and
//! copied once, into the producer's batch. A record longer than `max.request.size`
//! is an error rather than a reason to grow the buffer without bound.
//!
//! With `--transactional-id`, records go in transactions of `--txn-records` records each
//! (the last one may be shorter): each is committed once its records are sent, and the
//! first that fails is aborted and ends the run, so a reader with read_committed sees
//! whole transactions only.

use std::io::Read;
use std::time::{Duration, Instant};

use kring::producer::{Producer, ProducerRecord};
use kring::protocol::KafkaCode;
use memchr::memmem;

use crate::args::{ClusterArgs, ClusterOptions, UsageError, unescape};
use crate::deliveries::Deliveries;
use crate::{CliError, CliResult, connect, wait};

/// `kring produce`: sends one record per delimited piece of stdin (or of --file).
#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    /// The topic (must exist)
    #[arg(short = 't', long, value_name = "TOPIC")]
    topic: String,
    /// Send every record to partition N [default: the partitioner]
    #[arg(short = 'p', long, value_name = "N")]
    partition: Option<i32>,
    /// Read records from PATH instead of stdin
    #[arg(short = 'f', long, value_name = "PATH")]
    file: Option<String>,
    /// Record delimiter [default: \n] (escapes \n \r \t \0 \\ \xNN)
    #[arg(short = 'D', long, value_name = "DELIM", allow_hyphen_values = true)]
    delimiter: Option<String>,
    /// Split each record at the first DELIM into key and value (a record without it is
    /// sent with a null key)
    #[arg(short = 'K', long, value_name = "DELIM", allow_hyphen_values = true)]
    key_delimiter: Option<String>,
    /// A header on every record (repeatable; KEY alone is a null value)
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// Compression: none, gzip, snappy, lz4 or zstd
    #[arg(short = 'z', long, value_name = "CODEC")]
    compression: Option<String>,
    /// Acknowledgements: 0, 1 or all [default: all]
    #[arg(short = 'a', long, value_name = "ACKS")]
    acks: Option<String>,
    /// Idempotent producer [default: true with acks=all]
    #[arg(long, value_name = "true|false")]
    idempotence: Option<String>,
    /// Write in transactions with this transactional.id (acks all)
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,
    /// Records per transaction [default: 1000] (the last may be shorter); the first
    /// transaction that fails is aborted and the run stops with an error
    #[arg(long, value_name = "N")]
    txn_records: Option<u64>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Input is read this much at a time.
const READ_CHUNK: usize = 1 << 20;

struct Settings {
    topic: String,
    partition: Option<i32>,
    file: Option<String>,
    delimiter: Vec<u8>,
    key_delimiter: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    /// Records per transaction, with a transactional id.
    txn_records: Option<u64>,
}

/// Where the run stands with its transactions.
#[derive(Default)]
struct Transactions {
    /// Records per transaction; 0 without transactions.
    every: u64,
    /// Records sent in the open transaction.
    open: u64,
    committed: u64,
    committed_records: u64,
}

impl Transactions {
    /// Opens a transaction if none is open.
    fn before_send(&mut self, producer: &Producer) -> kring::Result<()> {
        if self.every > 0 && self.open == 0 {
            producer.begin_transaction()?;
        }
        Ok(())
    }

    /// Counts a record sent; commits once the transaction is full.
    async fn after_send(&mut self, producer: &Producer) -> Result<(), CliError> {
        if self.every == 0 {
            return Ok(());
        }
        self.open += 1;
        if self.open == self.every {
            self.commit(producer).await?;
        }
        Ok(())
    }

    /// Commits the open transaction, or aborts it when the commit fails.
    async fn commit(&mut self, producer: &Producer) -> Result<(), CliError> {
        if self.every == 0 || self.open == 0 {
            return Ok(());
        }
        if let Err(e) = producer.commit_transaction().await {
            let aborted = producer.abort_transaction().await;
            let how = match aborted {
                Ok(()) => "aborted".to_string(),
                Err(a) => format!("and aborting it failed too: {a}"),
            };
            return Err(CliError::Failed(format!(
                "transaction {} ({} record(s)) failed, {how}: {e}; {} transaction(s) of {} \
                 record(s) were committed before it",
                self.committed + 1,
                self.open,
                self.committed,
                self.committed_records
            )));
        }
        self.committed += 1;
        self.committed_records += self.open;
        self.open = 0;
        Ok(())
    }
}

fn parse(args: ProduceArgs) -> Result<(Settings, ClusterOptions), UsageError> {
    let ProduceArgs {
        topic,
        partition,
        file,
        delimiter,
        key_delimiter,
        headers,
        compression,
        acks,
        idempotence,
        transactional_id,
        txn_records,
        cluster,
    } = args;
    if partition.is_some_and(|p| p < 0) {
        return Err(UsageError::new("--partition must be 0 or more"));
    }
    let delimiter = match delimiter {
        Some(d) => unescape("--delimiter", &d)?,
        None => b"\n".to_vec(),
    };
    if delimiter.is_empty() {
        return Err(UsageError::new("--delimiter must not be empty"));
    }
    let key_delimiter = key_delimiter
        .map(|k| unescape("--key-delimiter", &k))
        .transpose()?;
    if key_delimiter.as_ref().is_some_and(Vec::is_empty) {
        return Err(UsageError::new("--key-delimiter must not be empty"));
    }
    let headers = headers
        .into_iter()
        .map(|h| match h.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.as_bytes().to_vec())),
            None => (h, None),
        })
        .collect();
    if txn_records == Some(0) {
        return Err(UsageError::new("--txn-records must be 1 or more"));
    }
    if txn_records.is_some() && transactional_id.is_none() {
        return Err(UsageError::new("--txn-records needs --transactional-id"));
    }
    if transactional_id.as_deref() == Some("") {
        return Err(UsageError::new("--transactional-id must not be empty"));
    }
    let txn_records = transactional_id
        .as_ref()
        .map(|_| txn_records.unwrap_or(1000));
    let mut cluster = cluster.options()?;
    cluster.set_producer(&[
        ("compression.type", compression),
        ("acks", acks),
        ("enable.idempotence", idempotence),
        ("transactional.id", transactional_id),
    ])?;
    Ok((
        Settings {
            topic,
            partition,
            file,
            delimiter,
            key_delimiter,
            headers,
            txn_records,
        },
        cluster,
    ))
}

/// Checks that `topic` (and `partition`) exist, in words a user can act on; the
/// topic's partition count.
pub fn check_topic(
    client: &kring::Client,
    topic: &str,
    partition: Option<i32>,
) -> Result<usize, CliError> {
    check_topic_within(client, topic, partition, Duration::ZERO)
}

/// [`check_topic`] for a producer: a topic the cluster does not show yet is asked for
/// again for up to `topic.metadata.propagation.max.ms`, as the producer itself does.
pub fn check_topic_to_produce(
    client: &kring::Client,
    topic: &str,
    partition: Option<i32>,
) -> Result<usize, CliError> {
    let within = client.config().metadata.topic_propagation_max;
    check_topic_within(client, topic, partition, within)
}

fn check_topic_within(
    client: &kring::Client,
    topic: &str,
    partition: Option<i32>,
    within: Duration,
) -> Result<usize, CliError> {
    let info =
        wait(topic_saying_when_waiting(client, topic, within)).map_err(|e| match e.code() {
            Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION) => CliError::Failed(format!(
                "topic {topic:?} does not exist{} (kring topics create {topic})",
                waited(within)
            )),
            _ => e.into(),
        })?;
    if !info.error.is_ok() {
        return Err(CliError::Failed(format!("topic {topic:?}: {}", info.error)));
    }
    let count = info.partitions.len();
    if let Some(p) = partition
        && p as usize >= count
    {
        return Err(CliError::Failed(format!(
            "topic {topic:?} has {count} partition(s); there is no partition {p}"
        )));
    }
    Ok(count)
}

/// The topic's metadata; when the cluster does not show it yet and `within` allows a
/// wait, says so on stderr first, so a mistyped name does not look like a hang.
async fn topic_saying_when_waiting(
    client: &kring::Client,
    topic: &str,
    within: Duration,
) -> kring::Result<kring::client::TopicInfo> {
    match client.topic(topic).await {
        Err(e) if e.code() == Some(KafkaCode::UNKNOWN_TOPIC_OR_PARTITION) && !within.is_zero() => {
            eprintln!(
                "kring: topic {topic:?} is not in the cluster's metadata yet; waiting up to \
                 {within:?} for it (topic.metadata.propagation.max.ms)"
            );
            client.topic_within(topic, within).await
        }
        other => other,
    }
}

/// How long a missing topic was waited for, in words (nothing when it was not).
fn waited(within: Duration) -> String {
    if within.is_zero() {
        String::new()
    } else {
        format!(" after waiting {within:?} for it to reach the metadata")
    }
}

/// Runs `kring produce`.
pub fn run(args: ProduceArgs) -> CliResult {
    let (s, cluster) = parse(args)?;
    let max_record = cluster.config.producer.max_request_size;
    let mut input: Box<dyn Read> = match &s.file {
        Some(path) => Box::new(
            std::fs::File::open(path).map_err(|e| CliError::io(format!("opening {path}"), e))?,
        ),
        None => Box::new(std::io::stdin().lock()),
    };
    let client = connect(cluster)?;
    check_topic_to_produce(&client, &s.topic, s.partition)?;
    let producer = wait(Producer::new(client.clone()))?;
    let mut txns = Transactions {
        every: s.txn_records.unwrap_or(0),
        ..Transactions::default()
    };
    if txns.every > 0 {
        wait(producer.init_transactions())?;
    }
    let started = Instant::now();
    let mut deliveries = Deliveries::start();
    let (sent, bytes, mut send_errors) = wait(send_all(
        &producer,
        &s,
        &mut input,
        max_record,
        &mut deliveries,
        &mut txns,
    ));
    if send_errors.txn.is_none() && send_errors.count == 0 {
        // The last, shorter transaction.
        if let Err(e) = wait(txns.commit(&producer)) {
            send_errors.txn = Some(e);
        }
    }
    let flushed = wait(producer.flush());
    let tally = deliveries.finish();
    let _ = wait(producer.close());
    client.close();
    let failed = tally.failed + send_errors.count;
    eprintln!(
        "produced {} of {} record(s), {} value bytes, to {} in {:.2} s",
        tally.delivered,
        sent + send_errors.count,
        bytes,
        s.topic,
        started.elapsed().as_secs_f64()
    );
    if txns.every > 0 {
        eprintln!(
            "committed {} transaction(s) of {} record(s)",
            txns.committed, txns.committed_records
        );
    }
    if let Some(e) = send_errors.input.or(send_errors.txn) {
        return Err(e);
    }
    if failed > 0 {
        let first = send_errors.first.or(tally.first_error).unwrap_or_default();
        return Err(CliError::Failed(format!(
            "{failed} record(s) failed; the first: {first}"
        )));
    }
    flushed?;
    Ok(())
}

/// Records that could not be handed to the producer, and a failure reading input.
#[derive(Default)]
struct SendErrors {
    count: u64,
    first: Option<String>,
    input: Option<CliError>,
    /// A transaction that failed (and was aborted).
    txn: Option<CliError>,
}

/// Reads `input` to its end, sending each record; answers records handed over, their
/// value bytes, and what failed.
async fn send_all(
    producer: &Producer,
    s: &Settings,
    input: &mut dyn Read,
    max_record: usize,
    deliveries: &mut Deliveries,
    txns: &mut Transactions,
) -> (u64, u64, SendErrors) {
    let finder = memmem::Finder::new(&s.delimiter);
    let key_finder = s.key_delimiter.as_deref().map(memmem::Finder::new);
    let mut errors = SendErrors::default();
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let (mut sent, mut bytes) = (0u64, 0u64);
    let mut eof = false;
    while !eof {
        // Top up the buffer with one more chunk.
        let filled = buf.len();
        buf.resize(filled + READ_CHUNK, 0);
        let n = loop {
            match input.read(&mut buf[filled..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    errors.input = Some(CliError::io("reading input", e));
                    break 0;
                }
            }
        };
        buf.truncate(filled + n);
        eof = n == 0;
        // Send every complete record (and, at the end, the unterminated last one).
        let mut start = 0;
        loop {
            let end = match finder.find(&buf[start..]) {
                Some(i) => start + i,
                None if eof && start < buf.len() => buf.len(),
                None => break,
            };
            let record = &buf[start..end];
            start = (end + s.delimiter.len()).min(buf.len());
            let (key, value) = match &key_finder {
                Some(kf) => match kf.find(record) {
                    Some(i) => (Some(&record[..i]), &record[i + kf.needle().len()..]),
                    None => (None, record),
                },
                None => (None, record),
            };
            let mut r = ProducerRecord::new(&s.topic).with_value(value);
            r.key = key.map(Into::into);
            for (k, v) in &s.headers {
                r.headers.push(kring::record::Header {
                    key: k,
                    value: v.as_deref(),
                });
            }
            r.partition = s.partition;
            let sent_now = match txns.before_send(producer) {
                Ok(()) => producer.send(r).await,
                Err(e) => Err(e),
            };
            match sent_now {
                Ok(future) => {
                    sent += 1;
                    bytes += value.len() as u64;
                    deliveries.push(future, None);
                    if let Err(e) = txns.after_send(producer).await {
                        errors.txn = Some(e);
                        return (sent, bytes, errors);
                    }
                }
                Err(e) => {
                    errors.count += 1;
                    errors.first.get_or_insert_with(|| e.to_string());
                    if matches!(e, kring::Error::ClosedClient | kring::Error::ShuttingDown) {
                        return (sent, bytes, errors);
                    }
                }
            }
            if start >= buf.len() {
                break;
            }
        }
        buf.drain(..start);
        if errors.input.is_some() {
            break;
        }
        if buf.len() > max_record + s.delimiter.len() {
            errors.input = Some(CliError::Failed(format!(
                "a record is longer than max.request.size ({max_record} bytes) \
                 (no delimiter {:?} in {} bytes)",
                String::from_utf8_lossy(&s.delimiter),
                buf.len()
            )));
            break;
        }
    }
    (sent, bytes, errors)
}
