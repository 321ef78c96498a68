//! `kring consume -G GROUP -t TOPIC...`: kcat's balanced consumer. One
//! [`GroupConsumer`] subscribed to the topics (or to a regular expression, for a topic
//! given as `^...`), printing the records the group assigns it in the same format as
//! the partition path.
//!
//! Invariants that make it at-least-once and no more:
//! - A batch is rendered, written and flushed to stdout before the next call into the
//!   group consumer, and only that call counts the batch as consumed; every commit
//!   (auto-commit, on revoke, on leaving) happens inside such a call, so an offset is
//!   never committed before the records below it were printed.
//! - `-c N` prints exactly N records; when the last one is in the middle of a batch,
//!   the partition is moved back (seek) to the record after it, so the commit on
//!   leaving covers only what was printed.
//! - `--commit-log` writes a `commit` line only after the broker accepted the commit
//!   (read back from the consumer after each call, and after the commit the rebalance
//!   listener makes on revoke), so a log that was cut short (a SIGKILL) understates the
//!   last commit, never overstates it.
//! - `-e`: each partition's end is its log end offset when it was assigned; the
//!   command exits once the assignment is not empty and every partition in it has been
//!   read to its end (kcat's rule; a member assigned nothing waits).
//! - SIGINT and SIGTERM close the consumer (commit, then LeaveGroup); a second signal
//!   while leaving gives up at once.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use kring::admin::{Admin, OffsetSpec};
use kring::consumer::Offset;
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::{Client, config::OffsetReset};
#[cfg(unix)]
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::Notify;

use crate::args::{ClusterOptions, UsageError};
use crate::consume::{Rendered, render_batch};
use crate::format::Format;
use crate::produce::check_topic;
use crate::{CliError, CliResult, connect};

/// What `consume::parse` took from the command line for `-G`.
pub struct Parsed {
    pub group: String,
    pub topics: Vec<String>,
    pub start: Option<String>,
    pub count: Option<u64>,
    pub exit_at_end: bool,
    pub format: Format,
    pub quiet: bool,
    pub commit_log: bool,
}

/// A checked `-G` command.
pub struct GroupSettings {
    group: String,
    /// The topics given by name (checked to exist before joining).
    names: Vec<String>,
    topics: Topics,
    count: Option<u64>,
    exit_at_end: bool,
    format: Format,
    quiet: bool,
    commit_log: bool,
}

/// Checks the `-G` options and puts the group ones into the client's configuration.
pub fn settings(p: Parsed, cluster: &mut ClusterOptions) -> Result<GroupSettings, UsageError> {
    if p.group.is_empty() {
        return Err(UsageError::new("-G: the group id is empty"));
    }
    if let Some(start) = &p.start {
        cluster.config.consumer.auto_offset_reset = start_of_group(start)?;
    }
    cluster.config.group.group_id = Some(p.group.clone());
    let (topics, names) = subscription(&p.topics)?;
    Ok(GroupSettings {
        group: p.group,
        names,
        topics,
        count: p.count,
        exit_at_end: p.exit_at_end,
        format: p.format,
        quiet: p.quiet,
        commit_log: p.commit_log,
    })
}

/// `-o` with `-G`: where a partition without a committed offset starts.
fn start_of_group(text: &str) -> Result<OffsetReset, UsageError> {
    match text {
        "beginning" | "oldest" | "earliest" => Ok(OffsetReset::Earliest),
        "end" | "newest" | "latest" => Ok(OffsetReset::Latest),
        _ => Err(UsageError::new(format!(
            "--offset {text:?}: with -G only beginning or end (where a partition without a \
             committed offset starts); move a group's offsets with kring groups reset-offsets"
        ))),
    }
}

/// The subscription `-t` options make, and the plain names among them. A topic
/// starting with `^` is a regular expression matched anywhere in a topic's name, as
/// librdkafka (and so kcat) matches it; with any of them, the plain names join the
/// pattern as literals.
fn subscription(given: &[String]) -> Result<(Topics, Vec<String>), UsageError> {
    let mut names = Vec::new();
    let mut patterns = Vec::new();
    for t in given {
        if t.is_empty() {
            return Err(UsageError::new("--topic: an empty topic name"));
        }
        if t.starts_with('^') {
            // Topics::pattern matches whole names; `.*(?:P).*` is P found anywhere
            // (its own ^ and $ still anchor it).
            patterns.push(format!(".*(?:{t}).*"));
        } else if !names.contains(t) {
            names.push(t.clone());
        }
    }
    if patterns.is_empty() {
        return Ok((Topics::names(names.clone()), names));
    }
    let mut alternatives = patterns;
    alternatives.extend(names.iter().map(|n| regex_lite::escape(n)));
    let topics =
        Topics::pattern(&alternatives.join("|")).map_err(|e| UsageError::new(e.to_string()))?;
    Ok((topics, names))
}

/// What the rebalance listener and the main loop share.
#[derive(Default)]
struct View {
    /// Each assigned partition's end offset when it was assigned (for `-e`).
    ends: BTreeMap<TopicPartition, i64>,
    /// The last committed offset logged (or found at assignment) per partition.
    logged: BTreeMap<TopicPartition, i64>,
    /// A failure inside a callback, reported by the main loop.
    failure: Option<CliError>,
}

/// The listener: logs rebalances, commits on revoke (so the commit can be logged),
/// and looks up the end offsets `-e` needs.
struct Listener {
    view: Arc<Mutex<View>>,
    admin: Admin,
    auto_commit: bool,
    exit_at_end: bool,
    commit_log: bool,
    /// Wakes the main loop when a new assignment may already be at its end.
    assigned: Arc<Notify>,
}

impl Listener {
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn on_assigned_async(&mut self, consumer: &mut GroupConsumer, added: &[TopicPartition]) {
        for tp in added {
            let committed = consumer.committed(&tp.topic, tp.partition).ok().flatten();
            if self.commit_log {
                let shown = committed.map_or("-".to_string(), |c| c.to_string());
                eprintln!("assigned\t{}\t{}\t{shown}", tp.topic, tp.partition);
            }
            if let Some(c) = committed {
                self.view().logged.insert(tp.clone(), c);
            }
        }
        if self.exit_at_end {
            let keys: Vec<(String, i32)> = added
                .iter()
                .map(|tp| (tp.topic.clone(), tp.partition))
                .collect();
            match self.admin.list_offsets(&keys, OffsetSpec::Latest).await {
                Ok(ends) => {
                    let mut view = self.view();
                    for e in ends {
                        view.ends
                            .insert(TopicPartition::new(e.topic, e.partition), e.offset);
                    }
                }
                Err(e) => {
                    self.view().failure.get_or_insert(CliError::Failed(format!(
                        "end offsets of the partitions assigned: {e}"
                    )));
                }
            }
        }
        self.assigned.notify_one();
    }

    async fn on_revoked_async(&mut self, consumer: &mut GroupConsumer, gone: &[TopicPartition]) {
        if self.auto_commit {
            match consumer.commit().await {
                Ok(()) => log_commits(consumer, &self.view, self.commit_log),
                Err(e) => eprintln!("kring: commit on revoke failed: {e}"),
            }
        }
        self.forget(gone, "revoked");
    }

    fn forget(&mut self, gone: &[TopicPartition], why: &str) {
        let mut view = self.view();
        for tp in gone {
            if self.commit_log {
                eprintln!("{why}\t{}\t{}", tp.topic, tp.partition);
            }
            view.logged.remove(tp);
            view.ends.remove(tp);
        }
    }
}

impl RebalanceListener for Listener {
    fn on_assigned<'a>(
        &'a mut self,
        consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        Box::pin(self.on_assigned_async(consumer, partitions))
    }

    fn on_revoked<'a>(
        &'a mut self,
        consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        Box::pin(self.on_revoked_async(consumer, partitions))
    }

    fn on_lost<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        self.forget(partitions, "lost");
        Box::pin(async {})
    }
}

/// Logs (with `--commit-log`) every assigned partition whose committed offset moved
/// since it was last logged.
fn log_commits(consumer: &GroupConsumer, view: &Mutex<View>, commit_log: bool) {
    let mut view = view.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for tp in consumer.assignment() {
        let Ok(Some(c)) = consumer.committed(&tp.topic, tp.partition) else {
            continue;
        };
        if view.logged.get(&tp) != Some(&c) {
            if commit_log {
                eprintln!("commit\t{}\t{}\t{c}", tp.topic, tp.partition);
            }
            view.logged.insert(tp, c);
        }
    }
}

/// Whether `-e` is satisfied: something is assigned and every assigned partition's
/// position reached the end it had when assigned.
fn all_at_end(consumer: &GroupConsumer, view: &View) -> bool {
    let assignment = consumer.assignment();
    !assignment.is_empty()
        && assignment.iter().all(|tp| {
            let end = view.ends.get(tp);
            let position = consumer.position(&tp.topic, tp.partition).ok();
            matches!((position, end), (Some(p), Some(&e)) if p >= e)
        })
}

/// One turn of the main loop.
enum Step {
    /// A batch was rendered into the buffer.
    Printed {
        topic: String,
        partition: i32,
        rendered: Rendered,
    },
    /// SIGINT or SIGTERM.
    Signal,
    /// A new assignment (maybe already at its end, for `-e`).
    Assigned,
    /// The consumer's stream ended (it left the group).
    Ended,
    /// The group consumer failed.
    Failed(kring::Error),
    /// A record of the batch could not be rendered.
    BadBatch(CliError),
}

/// Why the main loop stopped, and so how the member goes.
enum Stop {
    /// Done (count, end, signal, closed stdout): commit what was printed, leave.
    Leave,
    /// A failure at a batch boundary: commit what was printed, leave, report it.
    LeaveThenFail(CliError),
    /// A failure that left the last batch's position past what was printed: leave
    /// without committing (what was printed since the last commit is read again by
    /// the next owner), report it.
    Abandon(CliError),
}

/// The run's state outside the consumer.
struct Printer {
    stdout: std::io::Stdout,
    buffer: Vec<u8>,
    printed: u64,
    remaining: Option<u64>,
}

impl Printer {
    /// Writes and flushes the rendered batch; false when stdout is closed (`| head`).
    fn write(&mut self) -> Result<bool, CliError> {
        let mut out = self.stdout.lock();
        let result = out.write_all(&self.buffer).and_then(|()| out.flush());
        self.buffer.clear();
        match result {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(CliError::io("writing output", e)),
        }
    }

    /// Takes one record from `--count`; false once it is used up.
    fn admit(remaining: &mut Option<u64>) -> bool {
        match remaining {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
            None => true,
        }
    }
}

/// Signal streams for SIGINT and SIGTERM.
#[cfg(unix)]
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

#[cfg(unix)]
impl Signals {
    fn new() -> Result<Signals, CliError> {
        let listen = |kind| signal(kind).map_err(|e| CliError::io("listening for signals", e));
        Ok(Signals {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Ctrl-C where there are no unix signals (Windows): the one stop request there.
#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn new() -> Result<Signals, CliError> {
        Ok(Signals)
    }

    async fn next(&mut self) {
        // An error here means no Ctrl-C handler could be installed: then no stop
        // request can come, so wait for none rather than stop at once.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Runs `kring consume -G`.
pub fn run(s: GroupSettings, cluster: ClusterOptions) -> CliResult {
    let client = connect(cluster)?;
    for name in &s.names {
        check_topic(&client, name, None)?;
    }
    let runtime = crate::local_runtime()?;
    let result = runtime.block_on(consume(&s, &client));
    drop(runtime);
    client.close();
    result
}

async fn consume(s: &GroupSettings, client: &Client) -> CliResult {
    let mut signals = Signals::new()?;
    let view = Arc::new(Mutex::new(View::default()));
    let assigned = Arc::new(Notify::new());
    let listener = Listener {
        view: view.clone(),
        admin: Admin::new(client.clone()),
        auto_commit: client.config().consumer.enable_auto_commit,
        exit_at_end: s.exit_at_end,
        commit_log: s.commit_log,
        assigned: assigned.clone(),
    };
    let mut gc =
        GroupConsumer::with_listener(client.clone(), s.topics.clone(), Box::new(listener)).await?;
    let mut printer = Printer {
        stdout: std::io::stdout(),
        buffer: Vec::with_capacity(1 << 16),
        printed: 0,
        remaining: s.count,
    };
    let stop = if s.count == Some(0) {
        Stop::Leave
    } else {
        read(s, &mut gc, &mut printer, &view, &assigned, &mut signals).await
    };
    let result = match stop {
        Stop::Leave => leave(gc, &mut signals).await,
        Stop::LeaveThenFail(e) => {
            if let Err(also) = leave(gc, &mut signals).await {
                eprintln!("kring: {also}");
            }
            Err(e)
        }
        // Dropping the consumer sends LeaveGroup without committing.
        Stop::Abandon(e) => Err(e),
    };
    if !s.quiet {
        eprintln!(
            "consumed {} record(s) as a member of group {}",
            printer.printed, s.group
        );
    }
    result
}

/// Closes the consumer (the listener's commit on revoke, LeaveGroup); a second signal
/// gives up waiting.
async fn leave(gc: GroupConsumer, signals: &mut Signals) -> CliResult {
    tokio::select! {
        closed = gc.close() => closed.map_err(CliError::from),
        () = signals.next() => Err(CliError::Failed(
            "interrupted again while leaving the group: left without waiting".into(),
        )),
    }
}

/// Prints batches until the count, the end (`-e`), a signal, a closed stdout or a
/// failure.
async fn read(
    s: &GroupSettings,
    gc: &mut GroupConsumer,
    printer: &mut Printer,
    view: &Mutex<View>,
    assigned: &Notify,
    signals: &mut Signals,
) -> Stop {
    loop {
        let step = next_step(s, gc, printer, assigned, signals).await;
        log_commits(gc, view, s.commit_log);
        let failure = view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .failure
            .take();
        if let Some(failure) = failure {
            return match step {
                Step::Printed {
                    topic,
                    partition,
                    rendered,
                } => after_unprinted(gc, &topic, partition, rendered, Some(failure)).await,
                _ => Stop::LeaveThenFail(failure),
            };
        }
        match step {
            Step::Signal | Step::Ended => return Stop::Leave,
            Step::Failed(e) => return Stop::LeaveThenFail(e.into()),
            Step::BadBatch(e) => return Stop::Abandon(e),
            Step::Assigned => {}
            Step::Printed {
                topic,
                partition,
                rendered,
            } => {
                match printer.write() {
                    Ok(true) => printer.printed += rendered.count,
                    Ok(false) => {
                        return after_unprinted(gc, &topic, partition, rendered, None).await;
                    }
                    Err(e) => {
                        return after_unprinted(gc, &topic, partition, rendered, Some(e)).await;
                    }
                }
                if printer.remaining == Some(0) {
                    return count_reached(gc, &topic, partition, rendered).await;
                }
            }
        }
        if s.exit_at_end {
            let view = view.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if all_at_end(gc, &view) {
                return Stop::Leave;
            }
        }
    }
}

/// Waits for the next batch (rendering it), a signal or a new assignment.
async fn next_step(
    s: &GroupSettings,
    gc: &mut GroupConsumer,
    printer: &mut Printer,
    assigned: &Notify,
    signals: &mut Signals,
) -> Step {
    let remaining = &mut printer.remaining;
    let buffer = &mut printer.buffer;
    tokio::select! {
        biased;
        () = signals.next() => Step::Signal,
        () = assigned.notified(), if s.exit_at_end => Step::Assigned,
        next = gc.next_batch() => match next {
            None => Step::Ended,
            Some(Err(e)) => Step::Failed(e),
            Some(Ok(b)) => {
                let admit = |_offset: i64| Printer::admit(remaining);
                match render_batch(&b.batch, b.topic, b.partition, &s.format, buffer, admit) {
                    Ok(rendered) => Step::Printed {
                        topic: b.topic.to_string(),
                        partition: b.partition,
                        rendered,
                    },
                    Err(e) => Step::BadBatch(e),
                }
            }
        },
    }
}

/// The batch just rendered was not printed: its partition goes back to the batch's
/// first record, so that leaving commits nothing of it.
async fn rewind_unprinted(
    gc: &mut GroupConsumer,
    topic: &str,
    partition: i32,
    rendered: Rendered,
) -> Result<(), CliError> {
    let Some(first) = rendered.first else {
        return Ok(());
    };
    gc.seek(topic, partition, Offset::Exact(first))
        .await
        .map_err(|e| {
            CliError::Failed(format!(
                "{topic}-{partition}: moving back to {first}, the first record not printed: {e}"
            ))
        })
}

/// How the member goes after a batch that was not printed: with `failure` (none for a
/// closed stdout) once the batch is rewound, without committing when it cannot be.
async fn after_unprinted(
    gc: &mut GroupConsumer,
    topic: &str,
    partition: i32,
    rendered: Rendered,
    failure: Option<CliError>,
) -> Stop {
    match (
        rewind_unprinted(gc, topic, partition, rendered).await,
        failure,
    ) {
        (Ok(()), None) => Stop::Leave,
        (Ok(()), Some(f)) => Stop::LeaveThenFail(f),
        (Err(e), None) => Stop::Abandon(e),
        (Err(e), Some(f)) => Stop::Abandon(CliError::Failed(format!("{f}; {e}"))),
    }
}

/// `--count` is used up by the batch just printed: when it stopped inside the batch,
/// the partition goes back to the record after the last one printed, so that leaving
/// commits only what was printed.
async fn count_reached(
    gc: &mut GroupConsumer,
    topic: &str,
    partition: i32,
    rendered: Rendered,
) -> Stop {
    let Some(next) = rendered.next.filter(|_| rendered.refused) else {
        return Stop::Leave;
    };
    match gc.seek(topic, partition, Offset::Exact(next)).await {
        Ok(()) => Stop::Leave,
        Err(e) => Stop::Abandon(CliError::Failed(format!(
            "{topic}-{partition}: moving back to {next}, after the last record printed: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(given: &[&str]) -> Result<(Topics, Vec<String>), UsageError> {
        subscription(&given.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn plain_topics_are_names_and_caret_makes_a_pattern() {
        let (t, names) = topics(&["a", "b", "a"]).unwrap();
        assert!(matches!(t, Topics::Names(ref n) if n == &["a", "b"]), "{t}");
        assert_eq!(names, ["a", "b"]);
        let (t, names) = topics(&["^orders-", "audit.log"]).unwrap();
        let Topics::Pattern(_) = t else { panic!("{t}") };
        assert_eq!(names, ["audit.log"]);
        assert!(
            topics(&["^(unclosed"])
                .unwrap_err()
                .0
                .contains("does not compile")
        );
        assert!(topics(&[""]).is_err());
    }

    #[test]
    fn group_start_is_beginning_or_end() {
        assert_eq!(start_of_group("beginning").unwrap(), OffsetReset::Earliest);
        assert_eq!(start_of_group("end").unwrap(), OffsetReset::Latest);
        for bad in ["42", "-5", "s@100"] {
            assert!(
                start_of_group(bad)
                    .unwrap_err()
                    .0
                    .contains("only beginning or end")
            );
        }
    }
}
