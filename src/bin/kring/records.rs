//! `kring records delete|offsets`: delete records before an offset or a time
//! (DeleteRecords on each partition's leader), and list partitions' offsets
//! (ListOffsets: earliest, latest, by time, the largest timestamp).

use kring::admin::{Admin, DeleteBefore, OffsetSpec};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring records ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum RecordsCommand {
    /// Delete every record before a point (DeleteRecords on each partition's leader)
    Delete {
        /// Delete every record before POINT: an OFFSET, `end` (everything), or time=MS
        /// (every record older than MS milliseconds since the epoch); without
        /// :PARTITION, every partition of the topic
        #[arg(value_name = "TOPIC[:PARTITION]@POINT", required = true)]
        cuts: Vec<String>,
        /// One JSON object instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// List the partitions' offsets (ListOffsets)
    Offsets {
        /// The topic
        topic: String,
        /// Which offset to list: earliest, latest, max (the record with the largest
        /// timestamp) or MS (the first record at or after that time) [default: earliest]
        #[arg(long, alias = "time", value_name = "earliest|latest|max|MS")]
        at: Option<String>,
        /// One JSON object instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// Runs `kring records ...`.
pub fn run(command: RecordsCommand) -> CliResult {
    match command {
        RecordsCommand::Delete {
            cuts,
            json,
            cluster,
        } => delete(&cuts, json, cluster),
        RecordsCommand::Offsets {
            topic,
            at,
            json,
            cluster,
        } => offsets(&topic, at.as_deref(), json, cluster),
    }
}

/// One `TOPIC[:PARTITION]@POINT`.
#[derive(Debug, PartialEq)]
struct Cut {
    topic: String,
    partition: Option<i32>,
    before: DeleteBefore,
}

fn parse_cut(text: &str) -> Result<Cut, UsageError> {
    let bad = |why: &str| {
        UsageError::new(format!(
            "{text:?}: {why} (expected TOPIC[:PARTITION]@POINT)"
        ))
    };
    let (target, point) = text.rsplit_once('@').ok_or_else(|| bad("no @POINT"))?;
    let (topic, partition) = match target.rsplit_once(':') {
        Some((t, p)) => (
            t,
            Some(
                p.parse::<i32>()
                    .ok()
                    .filter(|p| *p >= 0)
                    .ok_or_else(|| bad("bad partition"))?,
            ),
        ),
        None => (target, None),
    };
    if topic.is_empty() {
        return Err(bad("no topic"));
    }
    let before = if point == "end" {
        DeleteBefore::HighWatermark
    } else if let Some(ms) = point.strip_prefix("time=") {
        DeleteBefore::Timestamp(ms.parse().map_err(|_| bad("bad time=MS"))?)
    } else {
        let offset: i64 = point.parse().map_err(|_| bad("bad offset"))?;
        if offset < 0 {
            return Err(bad("negative offset"));
        }
        DeleteBefore::Offset(offset)
    };
    Ok(Cut {
        topic: topic.to_string(),
        partition,
        before,
    })
}

fn delete(texts: &[String], json: bool, cluster: ClusterArgs) -> CliResult {
    let cuts = texts
        .iter()
        .map(|t| parse_cut(t))
        .collect::<Result<Vec<_>, _>>()?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let mut by_topic: Vec<(String, Vec<(i32, DeleteBefore)>)> = Vec::new();
    for cut in cuts {
        let partitions = match cut.partition {
            Some(p) => vec![p],
            None => wait(admin.client().partitions(&cut.topic))?,
        };
        let slot = match by_topic.iter().position(|(t, _)| *t == cut.topic) {
            Some(i) => i,
            None => {
                by_topic.push((cut.topic.clone(), Vec::new()));
                by_topic.len() - 1
            }
        };
        by_topic[slot]
            .1
            .extend(partitions.into_iter().map(|p| (p, cut.before)));
    }
    let mut rows = Vec::new();
    for (topic, cuts) in &by_topic {
        for (partition, low) in wait(admin.delete_records(topic, cuts))? {
            rows.push((topic.clone(), partition, low));
        }
    }
    if json {
        let rows: Vec<Json> = rows
            .iter()
            .map(|(t, p, low)| obj! {"topic" => t, "partition" => *p, "low_watermark" => *low})
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for (t, p, low) in rows {
            println!("{t}:{p} now starts at offset {low}");
        }
    }
    Ok(())
}

fn offsets(topic: &str, at: Option<&str>, json: bool, cluster: ClusterArgs) -> CliResult {
    let spec = match at {
        None | Some("earliest") => OffsetSpec::Earliest,
        Some("latest") => OffsetSpec::Latest,
        Some("max") => OffsetSpec::MaxTimestamp,
        Some(ms) => OffsetSpec::Timestamp(ms.parse().map_err(|_| {
            UsageError::new(format!("--at {ms:?}: expected earliest, latest, max or MS"))
        })?),
    };
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let found = wait(admin.topic_offsets(topic, spec))?;
    if json {
        let rows: Vec<Json> = found
            .iter()
            .map(|o| {
                obj! {
                    "topic" => &o.topic, "partition" => o.partition, "offset" => o.offset,
                    "timestamp" => o.timestamp, "leader_epoch" => o.leader_epoch,
                }
            })
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for o in found {
            println!("{}:{}:{}", o.topic, o.partition, o.offset);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_parse_and_bad_ones_say_why() {
        let cut = parse_cut("orders.v2:3@120").unwrap();
        assert_eq!(
            cut,
            Cut {
                topic: "orders.v2".into(),
                partition: Some(3),
                before: DeleteBefore::Offset(120)
            }
        );
        assert_eq!(parse_cut("t@end").unwrap().partition, None);
        assert_eq!(
            parse_cut("t:0@time=1700000000000").unwrap().before,
            DeleteBefore::Timestamp(1_700_000_000_000)
        );
        for bad in [
            "t:0",
            "t:x@1",
            "t:-1@1",
            "@5",
            "t:0@-3",
            "t:0@soon",
            "t:0@time=x",
        ] {
            let e = parse_cut(bad).unwrap_err();
            assert!(e.0.contains(bad), "{bad}: {e}");
        }
    }
}
