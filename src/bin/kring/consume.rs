//! `kring consume`: one partition, several, or a whole topic, from the oldest or newest
//! offset, an exact or end-relative offset, or a timestamp; printed in a `%`-format
//! (see `format.rs`); stopping after a count or at the end of the data.
//!
//! Each partition is read by its own task on one current-thread runtime, so a slow
//! partition never holds up the others; a task renders a whole fetched batch of
//! borrowed records into a buffer and writes it to stdout at once.
//!
//! With `-G GROUP` the command is a group member instead (`consume_group.rs`); both
//! paths render batches with [`render_batch`].

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::rc::Rc;

use kring::consumer::{Consumer, FetchedBatch, Offset, PartitionConsumer};
use tokio::sync::Notify;

use crate::args::{ClusterArgs, ClusterOptions, UsageError, parse_value};
use crate::consume_group::{self, GroupSettings};
use crate::format::{Format, RecordView};
use crate::produce::check_topic;
use crate::{CliError, CliResult, connect, wait};

/// `kring consume`: prints records of a whole topic, or of the partitions given with -p;
/// with -G, joins GROUP as a balanced consumer (kcat's -G) and prints what the group
/// assigns it.
#[derive(Debug, clap::Args)]
#[command(after_long_help = GROUP_SETTINGS)]
pub struct ConsumeArgs {
    /// The topic; with -G repeatable, and a TOPIC starting with ^ is a regular
    /// expression (every topic it matches, checked again as topics come and go)
    #[arg(short = 't', long = "topic", value_name = "TOPIC", required = true)]
    topics: Vec<String>,
    /// A partition to read (repeatable) [default: every partition]
    #[arg(short = 'p', long = "partition", value_name = "N")]
    partitions: Vec<i32>,
    /// Where to start in each partition [default: beginning]:
    ///   beginning | oldest   the oldest record kept
    ///   end | newest         only records written from now on
    ///   N                    offset N
    ///   -N                   N records before the end
    ///   s@MS | @MS           the first record at or after MS
    ///                        (milliseconds since the epoch)
    /// with -G only beginning or end: where a partition without a
    /// committed offset starts (auto.offset.reset, default end)
    #[arg(
        short = 'o',
        long = "offset",
        value_name = "beginning|end|N|-N|s@MS",
        allow_hyphen_values = true,
        verbatim_doc_comment
    )]
    offset: Option<String>,
    /// Stop after N records in all (with -G, what was printed is committed before
    /// leaving the group)
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
    /// Stop at the end of the data (each partition's end offset when the command
    /// started; with -G, when it was assigned, once every assigned partition reached it)
    #[arg(short = 'e', long = "exit")]
    exit: bool,
    /// Output per record [default: "%s\n"]; tokens: %t topic, %p partition, %o offset,
    /// %T timestamp ms, %k key, %K key length, %s value, %S value length (-1 for null),
    /// %h headers (k=v,k2=v2), %% a percent sign; escapes \n \t \0 \xNN
    #[arg(short = 'f', long, value_name = "FORMAT", allow_hyphen_values = true)]
    format: Option<String>,
    /// No summary line on stderr
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The consumer group to join (group.id)
    #[arg(
        short = 'G',
        long,
        value_name = "GROUP",
        help_heading = "GROUP options (-G)"
    )]
    group: Option<String>,
    /// Each rebalance and commit on stderr, one line each (tab-separated;
    /// a commit line follows the broker's answer):
    ///   assigned TOPIC PARTITION COMMITTED|-
    ///   revoked TOPIC PARTITION | lost TOPIC PARTITION
    ///   commit TOPIC PARTITION OFFSET
    #[arg(long, help_heading = "GROUP options (-G)", verbatim_doc_comment)]
    commit_log: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    pub metrics: crate::metrics_view::MetricsArgs,
}

/// The group settings that pass through -X and -F, in `kring consume --help`.
const GROUP_SETTINGS: &str = "Group settings pass through -X and -F: \
    session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms, \
    partition.assignment.strategy, group.instance.id, enable.auto.commit, \
    auto.commit.interval.ms, auto.offset.reset. Records printed are committed \
    (auto-commit, at most auto.commit.interval.ms behind, on a rebalance and on \
    leaving); SIGINT or SIGTERM commits and leaves the group, then exits 0.";

/// Where each partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Oldest,
    Newest,
    Exact(i64),
    BeforeEnd(i64),
    Timestamp(i64),
}

fn parse_start(text: &str) -> Result<Start, UsageError> {
    Ok(match text {
        "beginning" | "oldest" | "earliest" => Start::Oldest,
        "end" | "newest" | "latest" => Start::Newest,
        _ => {
            if let Some(ms) = text.strip_prefix("s@").or_else(|| text.strip_prefix('@')) {
                let ms: i64 = parse_value("--offset", ms)?;
                if ms < 0 {
                    return Err(UsageError::new("--offset: a timestamp is 0 or more"));
                }
                Start::Timestamp(ms)
            } else if let Some(n) = text.strip_prefix('-') {
                let n: u64 = parse_value("--offset", n)?;
                Start::BeforeEnd(n.min(i64::MAX as u64) as i64)
            } else {
                let offset: u64 = parse_value("--offset", text)?;
                Start::Exact(offset.min(i64::MAX as u64) as i64)
            }
        }
    })
}

struct Settings {
    topic: String,
    partitions: Vec<i32>,
    start: Start,
    count: Option<u64>,
    exit_at_end: bool,
    format: Format,
    quiet: bool,
}

/// What `kring consume` was asked to do: read partitions, or join a group.
enum Mode {
    Partitions(Settings),
    Group(GroupSettings),
}

fn parse(args: ConsumeArgs) -> Result<(Mode, ClusterOptions), UsageError> {
    let ConsumeArgs {
        topics,
        partitions: given_partitions,
        offset: start,
        count,
        exit: exit_at_end,
        format,
        quiet,
        group,
        commit_log,
        cluster,
        metrics: _,
    } = args;
    let mut partitions = Vec::new();
    for p in given_partitions {
        if p < 0 {
            return Err(UsageError::new("--partition must be 0 or more"));
        }
        if !partitions.contains(&p) {
            partitions.push(p);
        }
    }
    let format = Format::parse(format.as_deref().unwrap_or("%s\\n"))?;
    let mut cluster = cluster.options()?;
    let Some(group) = group else {
        if topics.len() > 1 {
            return Err(UsageError::new(
                "several --topic need -G GROUP (a balanced consumer); without it, one topic",
            ));
        }
        if commit_log {
            return Err(UsageError::new("--commit-log is for -G GROUP"));
        }
        if cluster.config.group.group_id.is_some() {
            return Err(UsageError::new(
                "group.id is set (-X or -F) but the partition consumer joins no group: \
                 give -G GROUP to consume as a group member",
            ));
        }
        let start = match start {
            Some(o) => parse_start(&o)?,
            None => Start::Oldest,
        };
        let mut topics = topics;
        return Ok((
            Mode::Partitions(Settings {
                topic: topics.remove(0),
                partitions,
                start,
                count,
                exit_at_end,
                format,
                quiet,
            }),
            cluster,
        ));
    };
    if !partitions.is_empty() {
        return Err(UsageError::new(
            "--partition is not for -G: the group assigns the partitions",
        ));
    }
    let settings = consume_group::settings(
        consume_group::Parsed {
            group,
            topics,
            start,
            count,
            exit_at_end,
            format,
            quiet,
            commit_log,
        },
        &mut cluster,
    )?;
    Ok((Mode::Group(settings), cluster))
}

/// What the partition tasks share (all on one thread).
struct Shared {
    out: RefCell<std::io::BufWriter<std::io::StdoutLock<'static>>>,
    /// Records still to print under `--count`.
    remaining: Cell<Option<u64>>,
    printed: Cell<u64>,
    running: Cell<usize>,
    stopped: Cell<bool>,
    error: RefCell<Option<CliError>>,
    done: Notify,
}

impl Shared {
    /// Takes one record from the count; false once the count is used up.
    fn take_one(&self) -> bool {
        match self.remaining.get() {
            Some(0) => false,
            Some(n) => {
                self.remaining.set(Some(n - 1));
                true
            }
            None => true,
        }
    }

    /// Whether `--count` records have been printed.
    fn count_reached(&self) -> bool {
        self.remaining.get() == Some(0)
    }

    fn stop(&self) {
        self.stopped.set(true);
        self.done.notify_one();
    }

    fn fail(&self, error: CliError) {
        self.error.borrow_mut().get_or_insert(error);
        self.stop();
    }

    /// Writes rendered records; a closed pipe (`| head`) ends the command quietly.
    fn write(&self, bytes: &[u8]) {
        let mut out = self.out.borrow_mut();
        let result = out.write_all(bytes).and_then(|()| out.flush());
        match result {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => self.stop(),
            Err(e) => self.fail(CliError::io("writing output", e)),
        }
    }
}

/// Runs `kring consume`.
pub fn run(args: ConsumeArgs) -> CliResult {
    let (mode, cluster) = parse(args)?;
    match mode {
        Mode::Partitions(s) => consume_partitions(s, cluster),
        Mode::Group(s) => consume_group::run(s, cluster),
    }
}

/// Reads the partitions `s` names, each in its own task.
fn consume_partitions(s: Settings, cluster: ClusterOptions) -> CliResult {
    let client = connect(cluster)?;
    let count = check_topic(&client, &s.topic, s.partitions.iter().copied().max())?;
    let partitions: Vec<i32> = if s.partitions.is_empty() {
        (0..count as i32).collect()
    } else {
        s.partitions.clone()
    };
    let consumer = Consumer::new(client.clone())?;
    let mut plan = Vec::with_capacity(partitions.len());
    for &p in &partitions {
        let (earliest, latest) = wait(consumer.offsets(&s.topic, p))?;
        let start = match s.start {
            Start::Oldest => Offset::Oldest,
            Start::Newest => Offset::Exact(latest),
            Start::Exact(o) => Offset::Exact(o),
            Start::BeforeEnd(n) => Offset::Exact(latest.saturating_sub(n).max(earliest)),
            Start::Timestamp(ms) => Offset::Timestamp(ms),
        };
        plan.push((p, start, s.exit_at_end.then_some(latest)));
    }

    let runtime = crate::local_runtime()?;
    let shared = Rc::new(Shared {
        out: RefCell::new(std::io::BufWriter::with_capacity(
            1 << 16,
            std::io::stdout().lock(),
        )),
        remaining: Cell::new(s.count),
        printed: Cell::new(0),
        running: Cell::new(plan.len()),
        stopped: Cell::new(false),
        error: RefCell::new(None),
        done: Notify::new(),
    });
    let format = Rc::new(s.format.clone());
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let mut readers = Vec::with_capacity(plan.len());
        for (p, start, end) in plan {
            match consumer.consume_partition(&s.topic, p, start).await {
                Ok(pc) => readers.push((pc, end)),
                Err(e) => return shared.fail(e.into()),
            }
        }
        if readers.is_empty() || s.count == Some(0) {
            return;
        }
        for (pc, end) in readers {
            let shared = shared.clone();
            let format = format.clone();
            let topic = s.topic.clone();
            tokio::task::spawn_local(async move {
                read_partition(&shared, pc, end, &format, &topic).await;
                shared.running.set(shared.running.get() - 1);
                if shared.running.get() == 0 {
                    shared.stop();
                }
            });
        }
        shared.done.notified().await;
    });
    // Dropping the runtime cancels partition tasks still waiting for data.
    drop(local);
    drop(runtime);
    let _ = shared.out.borrow_mut().flush();
    consumer_summary(&s, &shared);
    client.close();
    match shared.error.borrow_mut().take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn consumer_summary(s: &Settings, shared: &Shared) {
    if !s.quiet {
        eprintln!(
            "consumed {} record(s) from {}",
            shared.printed.get(),
            s.topic
        );
    }
}

/// Prints one partition's records until its end, the count, an error or a stop.
async fn read_partition(
    shared: &Shared,
    mut pc: PartitionConsumer,
    end: Option<i64>,
    format: &Format,
    topic: &str,
) {
    let mut rendered: Vec<u8> = Vec::with_capacity(1 << 16);
    let partition = pc.partition();
    loop {
        if shared.stopped.get()
            || shared.count_reached()
            || end.is_some_and(|end| pc.position() >= end)
        {
            return;
        }
        let batch = match pc.next_batch().await {
            None => return,
            Some(Err(e)) => return shared.fail(CliError::Failed(e.to_string())),
            Some(Ok(batch)) => batch,
        };
        rendered.clear();
        let admit = |offset: i64| end.is_none_or(|end| offset < end) && shared.take_one();
        let outcome = match render_batch(&batch, topic, partition, format, &mut rendered, admit) {
            Ok(o) => o,
            Err(e) => return shared.fail(e),
        };
        shared.printed.set(shared.printed.get() + outcome.count);
        // The last record the count allows ends the partition now, not at the next
        // record (which may never come).
        let finished = outcome.refused || shared.count_reached();
        shared.write(&rendered);
        if finished {
            if shared.count_reached() {
                shared.stop();
            }
            return;
        }
    }
}

/// What [`render_batch`] printed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rendered {
    /// Records rendered.
    pub count: u64,
    /// The offset of the first record rendered (`None` when none was).
    pub first: Option<i64>,
    /// The offset after the last record rendered (`None` when none was).
    pub next: Option<i64>,
    /// Whether `admit` refused a record of the batch (the rest was left unrendered).
    pub refused: bool,
}

/// Renders the records of `batch` into `out` in order while `admit(offset)` allows
/// them; a bad record or header fails naming the partition (and offset).
pub fn render_batch(
    batch: &FetchedBatch<'_>,
    topic: &str,
    partition: i32,
    format: &Format,
    out: &mut Vec<u8>,
    mut admit: impl FnMut(i64) -> bool,
) -> Result<Rendered, CliError> {
    let mut rendered = Rendered::default();
    let mut headers: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    for record in batch.records() {
        let record = record
            .map_err(|e| CliError::Failed(format!("{topic}-{partition}: bad record: {e}")))?;
        if !admit(record.offset()) {
            rendered.refused = true;
            break;
        }
        headers.clear();
        if format.wants_headers() {
            for h in record.headers() {
                let h = h.map_err(|e| {
                    CliError::Failed(format!(
                        "{topic}-{partition}: bad header at offset {}: {e}",
                        record.offset()
                    ))
                })?;
                headers.push((h.key, h.value));
            }
        }
        format.render(
            &RecordView {
                topic,
                partition,
                offset: record.offset(),
                timestamp: record.timestamp(),
                key: record.key(),
                value: record.value(),
                headers: &headers,
            },
            out,
        );
        rendered.count += 1;
        rendered.first.get_or_insert(record.offset());
        rendered.next = Some(record.offset() + 1);
    }
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_positions() {
        assert_eq!(parse_start("beginning").unwrap(), Start::Oldest);
        assert_eq!(parse_start("end").unwrap(), Start::Newest);
        assert_eq!(parse_start("42").unwrap(), Start::Exact(42));
        assert_eq!(parse_start("-10").unwrap(), Start::BeforeEnd(10));
        assert_eq!(
            parse_start("s@1700000000000").unwrap(),
            Start::Timestamp(1_700_000_000_000)
        );
        assert_eq!(parse_start("@5").unwrap(), Start::Timestamp(5));
        assert!(parse_start("soon").is_err());
        assert!(parse_start("s@-1").is_err());
        assert!(parse_start("--5").is_err());
    }
}
