//! `kring topics`: list, create, describe and delete topics, and add partitions, through
//! [`kring::admin`].

use kring::admin::{Admin, NewTopic};

use crate::args::{Args, ClusterOptions, UsageError, cluster_usage};
use crate::json::{Json, obj};
use crate::{CliError, CliResult, connect, wait};

pub const USAGE: &str = concat!(
    "\
usage: kring topics list     [--internal] [--json] [CLUSTER]
       kring topics create   TOPIC [-p PARTITIONS] [-r REPLICATION] [--config NAME=VALUE]... [CLUSTER]
       kring topics describe TOPIC [--all-configs] [--json] [CLUSTER]
       kring topics delete   TOPIC [CLUSTER]
       kring topics alter-partitions TOPIC COUNT [--validate-only] [CLUSTER]

  --internal                 list internal topics too (__consumer_offsets, ...)
  -p, --partitions N         partitions of a new topic (default 1)
  -r, --replication-factor R replicas per partition (default 1)
  --config NAME=VALUE        a topic config of a new topic (repeatable)
  --all-configs              describe every config, defaults included
  --json                     JSON instead of text
  COUNT                      the topic's new partition count (more than today's)
  --validate-only            let the controller check without adding partitions

CLUSTER options:
",
    cluster_usage!()
);

/// Runs `kring topics ...`.
pub fn run(mut args: Args) -> CliResult {
    let action = args
        .positional()
        .ok_or_else(|| UsageError::new("topics needs list, create, describe or delete"))?;
    match action.as_str() {
        "list" => list(args),
        "create" => create(args),
        "describe" => describe(args),
        "delete" => delete(args),
        "alter-partitions" => alter_partitions(args),
        other => Err(UsageError::new(format!("unknown topics action {other:?}")).into()),
    }
}

fn topic_name(args: &mut Args) -> Result<String, UsageError> {
    let name = args
        .positional()
        .ok_or_else(|| UsageError::new("which topic? give its name"))?;
    // The broker's rules (Topic.validate): 1-249 of [a-zA-Z0-9._-], not "." or "..".
    let legal = !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if !legal {
        return Err(UsageError::new(format!(
            "{name:?} is not a legal topic name (1-249 characters of a-z A-Z 0-9 . _ -)"
        )));
    }
    Ok(name)
}

fn list(mut args: Args) -> CliResult {
    let internal = args.flag(&["--internal"]);
    let json = args.flag(&["--json"]);
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    let topics = wait(admin.list_topics(internal))?;
    if json {
        let rows: Vec<Json> = topics
            .iter()
            .map(|t| {
                obj! {"name" => &t.name, "partitions" => t.partitions.len(), "internal" => t.internal}
            })
            .collect();
        println!("{}", Json::Arr(rows));
        return Ok(());
    }
    for t in topics {
        println!("{}\t{} partition(s)", t.name, t.partitions.len());
    }
    Ok(())
}

fn create(mut args: Args) -> CliResult {
    let partitions: i32 = args.parsed(&["--partitions", "-p"])?.unwrap_or(1);
    let replication: i16 = args.parsed(&["--replication-factor", "-r"])?.unwrap_or(1);
    if partitions < 1 {
        return Err(UsageError::new("--partitions must be at least 1").into());
    }
    if replication < 1 {
        return Err(UsageError::new("--replication-factor must be at least 1").into());
    }
    let mut topic_configs = Vec::new();
    for c in args.values(&["--config"])? {
        let (k, v) = c
            .split_once('=')
            .ok_or_else(|| UsageError::new(format!("--config {c:?}: expected NAME=VALUE")))?;
        topic_configs.push((k.to_string(), v.to_string()));
    }
    let cluster = ClusterOptions::take(&mut args)?;
    let name = topic_name(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    let mut topic = NewTopic::new(&name, partitions, replication);
    topic.configs = topic_configs;
    wait(admin.create_topic(&topic))?;
    println!("created {name}: {partitions} partition(s), replication factor {replication}");
    Ok(())
}

fn describe(mut args: Args) -> CliResult {
    let all_configs = args.flag(&["--all-configs"]);
    let json = args.flag(&["--json"]);
    let cluster = ClusterOptions::take(&mut args)?;
    let name = topic_name(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    let info = wait(admin.describe_topic(&name))?;
    let configs = wait(admin.topic_configs(&name))?;
    if json {
        let partitions: Vec<Json> = info
            .partitions
            .iter()
            .map(|p| {
                obj! {
                    "partition" => p.id, "leader" => p.leader, "leader_epoch" => p.leader_epoch,
                    "replicas" => p.replicas.clone(), "isr" => p.isr.clone(),
                    "offline" => p.offline.clone(),
                }
            })
            .collect();
        let configs: Vec<Json> = configs
            .iter()
            .filter(|c| all_configs || !c.is_default)
            .map(|c| {
                obj! {
                    "name" => &c.name,
                    "value" => if c.sensitive { None } else { c.value.clone() },
                    "source" => c.source.name(),
                }
            })
            .collect();
        let value = obj! {
            "name" => &info.name, "id" => info.id.to_string(), "internal" => info.internal,
            "partitions" => Json::Arr(partitions), "configs" => Json::Arr(configs),
        };
        println!("{value}");
        return Ok(());
    }
    println!(
        "topic {}  id {}  {} partition(s){}",
        info.name,
        info.id,
        info.partitions.len(),
        if info.internal { "  internal" } else { "" }
    );
    for p in &info.partitions {
        println!(
            "  partition {:<4} leader {:<4} replicas {:?}  isr {:?}{}",
            p.id,
            p.leader,
            p.replicas,
            p.isr,
            if p.offline.is_empty() {
                String::new()
            } else {
                format!("  offline {:?}", p.offline)
            }
        );
    }
    let shown: Vec<_> = configs
        .iter()
        .filter(|c| all_configs || !c.is_default)
        .collect();
    if shown.is_empty() {
        println!("  configs: all defaults (--all-configs lists them)");
    } else {
        println!("  configs:");
        for c in shown {
            let value = if c.sensitive {
                "(sensitive)"
            } else {
                c.value.as_deref().unwrap_or("(null)")
            };
            println!("    {} = {}", c.name, value);
        }
    }
    Ok(())
}

fn delete(mut args: Args) -> CliResult {
    let cluster = ClusterOptions::take(&mut args)?;
    let name = topic_name(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.delete_topic(&name)).map_err(|e| match e.code() {
        Some(kring::protocol::KafkaCode::UNKNOWN_TOPIC_OR_PARTITION) => {
            CliError::Failed(format!("no topic {name:?} to delete"))
        }
        _ => e.into(),
    })?;
    println!("deleted {name}");
    Ok(())
}

fn alter_partitions(mut args: Args) -> CliResult {
    let validate_only = args.flag(&["--validate-only", "--dry-run"]);
    let cluster = ClusterOptions::take(&mut args)?;
    let name = topic_name(&mut args)?;
    let count = args
        .positional()
        .ok_or_else(|| UsageError::new("how many partitions? give the new COUNT"))?;
    let count: i32 = crate::args::parse_value("COUNT", &count)?;
    if count < 1 {
        return Err(UsageError::new("COUNT must be at least 1").into());
    }
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.create_partitions(&name, count, validate_only))?;
    let verb = if validate_only {
        "would have"
    } else {
        "now has"
    };
    println!("{name} {verb} {count} partition(s)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_the_brokers_rules() {
        let name = |n: &str| topic_name(&mut Args::new([n.to_string()]));
        assert_eq!(name("orders.v2-eu_1").unwrap(), "orders.v2-eu_1");
        assert!(name("..").is_err());
        assert!(name("has space").is_err());
        assert!(name("ünïcode").is_err());
        assert!(name(&"x".repeat(250)).is_err());
        assert!(topic_name(&mut Args::new(Vec::<String>::new())).is_err());
    }
}
