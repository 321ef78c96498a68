//! `kring groups list|describe|delete|reset-offsets|delete-offsets`: consumer groups,
//! their members and committed offsets; `describe` shows each member (id, instance id,
//! client id, host, assigned partitions) and each partition's committed offset, end
//! offset and lag (the end offset minus the committed one).

use std::collections::BTreeMap;

use kring::admin::{Admin, GroupDescription, OffsetSpec, TopicPartition};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring groups ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// List the consumer groups
    List {
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// A group's members, committed offsets and lag
    Describe {
        /// The group id
        group: String,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Delete a group (it must have no members)
    Delete {
        /// The group id
        group: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Commit new offsets for a group without members
    ResetOffsets {
        /// The group id
        group: String,
        /// The topic (every partition) or one partition (repeatable)
        #[arg(short = 't', long = "topic", value_name = "TOPIC[:PARTITION]")]
        topics: Vec<String>,
        /// earliest, latest, an OFFSET, or time=MS or @MS (the first record at or after
        /// MS milliseconds since the epoch; the end where there is none)
        #[arg(long, value_name = "POINT", allow_hyphen_values = true)]
        to: Option<String>,
        /// Show the new offsets without committing them
        #[arg(long)]
        dry_run: bool,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Delete a group's committed offsets of some partitions
    DeleteOffsets {
        /// The group id
        group: String,
        /// The topic (every partition) or one partition (repeatable)
        #[arg(short = 't', long = "topic", value_name = "TOPIC[:PARTITION]")]
        topics: Vec<String>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// Runs `kring groups ...`.
pub fn run(command: GroupsCommand) -> CliResult {
    match command {
        GroupsCommand::List { json, cluster } => list(json, cluster),
        GroupsCommand::Describe {
            group,
            json,
            cluster,
        } => describe(&group, json, cluster),
        GroupsCommand::Delete { group, cluster } => delete(&group, cluster),
        GroupsCommand::ResetOffsets {
            group,
            topics,
            to,
            dry_run,
            json,
            cluster,
        } => reset_offsets(&group, &topics, to.as_deref(), dry_run, json, cluster),
        GroupsCommand::DeleteOffsets {
            group,
            topics,
            cluster,
        } => delete_offsets(&group, &topics, cluster),
    }
}

/// Checks a group id given on the command line.
fn group_name(group: &str) -> Result<&str, UsageError> {
    Some(group)
        .filter(|g| !g.is_empty())
        .ok_or_else(|| UsageError::new("which group? give its id"))
}

fn list(json: bool, cluster: ClusterArgs) -> CliResult {
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let groups = wait(admin.list_groups())?;
    if json {
        let rows: Vec<Json> = groups
            .iter()
            .map(|g| {
                obj! {
                    "group" => &g.group_id, "state" => &g.state, "type" => &g.group_type,
                    "protocol_type" => &g.protocol_type, "coordinator" => g.coordinator,
                }
            })
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for g in groups {
            println!("{}\t{}\t{}", g.group_id, g.state, g.group_type);
        }
    }
    Ok(())
}

/// One partition row of `describe`.
struct Row {
    topic: String,
    partition: i32,
    committed: Option<i64>,
    end: i64,
    member: Option<String>,
}

fn describe(group: &str, json: bool, cluster: ClusterArgs) -> CliResult {
    let group = group_name(group)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let description = wait(admin.describe_group(group))?;
    let rows = partition_rows(&admin, group, &description)?;
    if json {
        let members: Vec<Json> = description
            .members
            .iter()
            .map(|m| {
                obj! {
                    "member_id" => &m.member_id, "client_id" => &m.client_id,
                    "host" => &m.client_host, "instance_id" => m.instance_id.clone(),
                    "assignment" => Json::Arr(m.assignment.iter().map(|(t, p)| obj! {
                        "topic" => t, "partition" => *p,
                    }).collect()),
                }
            })
            .collect();
        let partitions: Vec<Json> = rows
            .iter()
            .map(|r| {
                obj! {
                    "topic" => &r.topic, "partition" => r.partition, "committed" => r.committed,
                    "end" => r.end, "lag" => r.committed.map(|c| (r.end - c).max(0)),
                    "member" => r.member.clone(),
                }
            })
            .collect();
        let value = obj! {
            "group" => &description.group_id, "state" => &description.state,
            "protocol_type" => &description.protocol_type, "assignor" => &description.protocol,
            "coordinator" => description.coordinator, "members" => Json::Arr(members),
            "partitions" => Json::Arr(partitions),
        };
        println!("{value}");
        return Ok(());
    }
    println!(
        "group {}  state {}  assignor {}  coordinator {}  {} member(s)",
        description.group_id,
        description.state,
        if description.protocol.is_empty() {
            "-"
        } else {
            &description.protocol
        },
        description.coordinator,
        description.members.len()
    );
    print_members(&description);
    println!(
        "  {:<30} {:>9} {:>14} {:>14} {:>8}  MEMBER",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"
    );
    for r in rows {
        let (current, lag) = match r.committed {
            Some(c) => (c.to_string(), (r.end - c).max(0).to_string()),
            None => ("-".to_string(), "-".to_string()),
        };
        println!(
            "  {:<30} {:>9} {:>14} {:>14} {:>8}  {}",
            r.topic,
            r.partition,
            current,
            r.end,
            lag,
            r.member.as_deref().unwrap_or("-")
        );
    }
    Ok(())
}

/// The members table of `describe`: who they are and what each is assigned.
fn print_members(description: &GroupDescription) {
    if description.members.is_empty() {
        return;
    }
    println!(
        "  {:<44} {:<16} {:<20} {:<16} ASSIGNMENT",
        "MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST"
    );
    for m in &description.members {
        println!(
            "  {:<44} {:<16} {:<20} {:<16} {}",
            m.member_id,
            m.instance_id.as_deref().unwrap_or("-"),
            m.client_id,
            m.client_host,
            assignment_text(&m.assignment)
        );
    }
}

/// `t1:0,1,2 t2:0`, or `-` for nothing.
fn assignment_text(assignment: &[TopicPartition]) -> String {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in assignment {
        by_topic.entry(t).or_default().push(*p);
    }
    if by_topic.is_empty() {
        return "-".into();
    }
    by_topic
        .into_iter()
        .map(|(t, mut ps)| {
            ps.sort_unstable();
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}:{}", ps.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every partition the group has committed or been assigned, with its end offset.
fn partition_rows(
    admin: &Admin,
    group: &str,
    description: &GroupDescription,
) -> Result<Vec<Row>, crate::CliError> {
    let mut rows: BTreeMap<TopicPartition, (Option<i64>, Option<String>)> = BTreeMap::new();
    for c in wait(admin.list_group_offsets(group))? {
        rows.entry((c.topic, c.partition)).or_default().0 = Some(c.offset);
    }
    for m in &description.members {
        for tp in &m.assignment {
            rows.entry(tp.clone()).or_default().1 = Some(m.member_id.clone());
        }
    }
    let keys: Vec<TopicPartition> = rows.keys().cloned().collect();
    let ends: BTreeMap<TopicPartition, i64> = wait(admin.list_offsets(&keys, OffsetSpec::Latest))?
        .into_iter()
        .map(|o| ((o.topic, o.partition), o.offset))
        .collect();
    Ok(rows
        .into_iter()
        .map(|((topic, partition), (committed, member))| Row {
            end: ends.get(&(topic.clone(), partition)).copied().unwrap_or(-1),
            topic,
            partition,
            committed,
            member,
        })
        .collect())
}

fn delete(group: &str, cluster: ClusterArgs) -> CliResult {
    let group = group_name(group)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.delete_group(group))?;
    println!("deleted group {group}");
    Ok(())
}

/// The partitions `--topic T[:P]` options name (every partition of a bare topic).
fn topic_partitions(
    admin: &Admin,
    specs: &[String],
) -> Result<Vec<TopicPartition>, crate::CliError> {
    let mut out = Vec::new();
    for spec in specs {
        match spec.rsplit_once(':') {
            Some((t, p)) => {
                let p: i32 =
                    p.parse().ok().filter(|p| *p >= 0).ok_or_else(|| {
                        UsageError::new(format!("--topic {spec:?}: bad partition"))
                    })?;
                out.push((t.to_string(), p));
            }
            None => {
                let info = wait(admin.describe_topic(spec))?;
                out.extend(info.partitions.iter().map(|p| (spec.clone(), p.id)));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Where `--to` points.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ResetTo {
    Spec(OffsetSpec),
    Offset(i64),
}

fn parse_to(text: &str) -> Result<ResetTo, UsageError> {
    let bad = || {
        UsageError::new(format!(
            "--to {text:?}: expected earliest, latest, OFFSET, time=MS or @MS"
        ))
    };
    Ok(match text {
        "earliest" => ResetTo::Spec(OffsetSpec::Earliest),
        "latest" => ResetTo::Spec(OffsetSpec::Latest),
        t => match t.strip_prefix("time=").or_else(|| t.strip_prefix('@')) {
            // ListOffsets reads -1 and -2 as latest and earliest: a time is 0 or more.
            Some(ms) => ResetTo::Spec(OffsetSpec::Timestamp(
                ms.parse()
                    .ok()
                    .filter(|ms: &i64| *ms >= 0)
                    .ok_or_else(bad)?,
            )),
            None => ResetTo::Offset(t.parse().ok().filter(|o: &i64| *o >= 0).ok_or_else(bad)?),
        },
    })
}

fn reset_offsets(
    group: &str,
    topics: &[String],
    to: Option<&str>,
    dry_run: bool,
    json: bool,
    cluster: ClusterArgs,
) -> CliResult {
    let to = to.ok_or_else(|| {
        UsageError::new("--to is needed: earliest, latest, OFFSET, time=MS or @MS")
    })?;
    let to = parse_to(to)?;
    let group = group_name(group)?;
    let cluster = cluster.options()?;
    if topics.is_empty() {
        return Err(UsageError::new("--topic is needed: which partitions to reset").into());
    }
    let admin = Admin::new(connect(cluster)?);
    let partitions = topic_partitions(&admin, topics)?;
    let offsets: Vec<(TopicPartition, i64)> = match to {
        ResetTo::Offset(o) => partitions.into_iter().map(|tp| (tp, o)).collect(),
        ResetTo::Spec(spec) => {
            let ends: BTreeMap<TopicPartition, i64> =
                wait(admin.list_offsets(&partitions, OffsetSpec::Latest))?
                    .into_iter()
                    .map(|o| ((o.topic, o.partition), o.offset))
                    .collect();
            wait(admin.list_offsets(&partitions, spec))?
                .into_iter()
                .map(|o| {
                    let tp = (o.topic, o.partition);
                    // No record at or after the time: the end, as the Java tool does.
                    let offset = if o.offset < 0 {
                        ends.get(&tp).copied().unwrap_or(0)
                    } else {
                        o.offset
                    };
                    (tp, offset)
                })
                .collect()
        }
    };
    if !dry_run {
        wait(admin.alter_group_offsets(group, &offsets))?;
    }
    if json {
        let rows: Vec<Json> = offsets
            .iter()
            .map(|((t, p), o)| obj! {"topic" => t, "partition" => *p, "offset" => *o})
            .collect();
        println!(
            "{}",
            obj! {"group" => group, "applied" => !dry_run, "offsets" => Json::Arr(rows)}
        );
    } else {
        let verb = if dry_run { "would set" } else { "set" };
        for ((t, p), o) in &offsets {
            println!("{group}: {verb} {t}:{p} to {o}");
        }
    }
    Ok(())
}

fn delete_offsets(group: &str, topics: &[String], cluster: ClusterArgs) -> CliResult {
    let group = group_name(group)?;
    let cluster = cluster.options()?;
    if topics.is_empty() {
        return Err(
            UsageError::new("--topic is needed: which partitions' offsets to delete").into(),
        );
    }
    let admin = Admin::new(connect(cluster)?);
    let partitions = topic_partitions(&admin, topics)?;
    wait(admin.delete_group_offsets(group, &partitions))?;
    println!(
        "{group}: deleted the offsets of {} partition(s)",
        partitions.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_points_parse() {
        assert_eq!(
            parse_to("earliest").unwrap(),
            ResetTo::Spec(OffsetSpec::Earliest)
        );
        assert_eq!(parse_to("42").unwrap(), ResetTo::Offset(42));
        assert_eq!(
            parse_to("time=5").unwrap(),
            ResetTo::Spec(OffsetSpec::Timestamp(5))
        );
        assert_eq!(
            parse_to("@1700000000000").unwrap(),
            ResetTo::Spec(OffsetSpec::Timestamp(1_700_000_000_000))
        );
        for bad in ["-1", "soon", "time=", "time=x", "@", "@-5", "time=-1"] {
            assert!(parse_to(bad).unwrap_err().0.contains(bad), "{bad}");
        }
    }
}
