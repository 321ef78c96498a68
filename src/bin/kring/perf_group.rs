//! `kring perf consume --group GROUP`: the consume run through a [`GroupConsumer`] (one
//! member of a fresh group subscribed to the topic) instead of one partition consumer
//! per partition, so `perf/run`'s `consume-*-group` workloads compare the two ways of
//! reading the same data. The group starts at the oldest offsets (`auto.offset.reset`
//! earliest, nothing committed before) and commits nothing (auto-commit off), so the
//! work measured is the records' and the membership's, not the commits'.
//!
//! The clock starts when the first assignment arrives (the listener's `on_assigned`),
//! like the Java consumer perf-test's `fetch.time.ms`, which leaves out the group join;
//! the join's own duration is reported beside it (`join_s`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kring::config::OffsetReset;
use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};

use crate::args::ClusterOptions;
use crate::perf::{LATENCY_SAMPLE_EVERY, Outcome, value_share};
use crate::produce::check_topic;
use crate::stats::{Progress, cpu_seconds};
use crate::{CliError, CliResult, connect};

/// Remembers when partitions were first assigned.
struct FirstAssignment(Arc<Mutex<Option<Instant>>>);

impl RebalanceListener for FirstAssignment {
    fn on_assigned<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        if !partitions.is_empty() {
            let mut first = self.0.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(Instant::now);
        }
        Box::pin(async {})
    }
}

/// What the read loop counted.
#[derive(Default)]
struct Tally {
    records: u64,
    bytes: u64,
    digest: u64,
    end_to_end_ns: Vec<u64>,
}

/// Runs the group variant of `perf consume`: `records` of `topic` (all it holds now
/// when `None`) through a member of `group`.
pub fn consume(
    mut cluster: ClusterOptions,
    topic: &str,
    group: &str,
    records: Option<u64>,
    timeout: u64,
) -> CliResult {
    if group.is_empty() {
        return Err(crate::args::UsageError::new("--group needs a group id").into());
    }
    let config = &mut cluster.config;
    config.group.group_id = Some(group.to_string());
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.consumer.enable_auto_commit = false;
    let client = connect(cluster)?;
    let count = check_topic(&client, topic, None)?;
    let as_member = format!(" as a member of group {group}");
    let target = crate::perf::consume_target(&client, topic, count, records, &as_member)?;
    let runtime = crate::local_runtime()?;
    let assigned = Arc::new(Mutex::new(None));
    let cpu_start = cpu_seconds();
    let joining = Instant::now();
    let read = runtime.block_on(async {
        let mut member = GroupConsumer::with_listener(
            client.clone(),
            Topics::names([topic]),
            Box::new(FirstAssignment(assigned.clone())),
        )
        .await?;
        let limit = Duration::from_secs(timeout);
        let outcome = tokio::time::timeout(limit, read_until(&mut member, target)).await;
        let finished = Instant::now();
        let cpu_end = cpu_seconds();
        // Leaving the group is not part of the measured read.
        let _ = member.close().await;
        match outcome {
            Ok(tally) => Ok((tally?, finished, cpu_end)),
            Err(_) => Err(CliError::Failed(format!(
                "{target} records did not arrive within {timeout} s"
            ))),
        }
    });
    client.close();
    let (tally, finished, cpu_end) = read?;
    let started = assigned
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or(joining);
    eprintln!("kring: consumed values' digest {:016x}", tally.digest);
    eprintln!(
        "kring: joined group {group} in {:.3} s (not in elapsed_s)",
        (started - joining).as_secs_f64()
    );
    let mut end_to_end_ns = tally.end_to_end_ns;
    end_to_end_ns.sort_unstable();
    Outcome {
        op: "consume",
        records: tally.records,
        bytes: tally.bytes,
        elapsed: finished - started,
        cpu_seconds: cpu_start.zip(cpu_end).map(|(a, b)| b - a),
        sender_cpu_seconds: None,
        latencies_ns: Vec::new(),
        end_to_end_ns,
        end_to_end_is_stamped: false,
        io_backend: client.io_backend().name(),
    }
    .print();
    Ok(())
}

/// Reads borrowed batches until `target` records, touching every value as
/// `perf consume` does.
async fn read_until(member: &mut GroupConsumer, target: u64) -> Result<Tally, CliError> {
    let mut t = Tally::default();
    let mut progress = Progress::new("read");
    while t.records < target {
        let batch = match member.next_batch().await {
            None => {
                return Err(CliError::Failed(format!(
                    "the member left its group after {} of {target} records",
                    t.records
                )));
            }
            Some(batch) => batch?,
        };
        for record in batch.batch.records() {
            let r = record.map_err(|e| {
                CliError::Failed(format!("{}/{}: {e}", batch.topic, batch.partition))
            })?;
            let value = r.value().unwrap_or_default();
            t.bytes += value.len() as u64;
            t.digest = t.digest.wrapping_add(value_share(value));
            if t.records % LATENCY_SAMPLE_EVERY == 0 {
                t.end_to_end_ns.push(crate::perf::age_ns(r.timestamp()));
            }
            t.records += 1;
            if t.records == target {
                break;
            }
        }
        progress.update(t.records, t.bytes);
    }
    progress.finish();
    Ok(t)
}
