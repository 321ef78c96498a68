//! `kring topics`: list, create, describe and delete topics, and add partitions, through
//! [`kring::admin`].

use kring::admin::{Admin, NewTopic};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliError, CliResult, connect, wait};

/// `kring topics ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum TopicsCommand {
    /// List topics with their partition counts
    List {
        /// List internal topics too (__consumer_offsets, ...)
        #[arg(long)]
        internal: bool,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Create a topic
    Create {
        /// The topic's name
        topic: String,
        /// Partitions of the new topic
        #[arg(short = 'p', long, value_name = "N", default_value_t = 1)]
        partitions: i32,
        /// Replicas per partition
        #[arg(
            short = 'r',
            long = "replication-factor",
            value_name = "R",
            default_value_t = 1
        )]
        replication_factor: i16,
        /// A topic config of the new topic (repeatable)
        #[arg(long = "config", value_name = "NAME=VALUE")]
        configs: Vec<String>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Partitions, leaders, replicas and configs of a topic
    Describe {
        /// The topic's name
        topic: String,
        /// Describe every config, defaults included
        #[arg(long)]
        all_configs: bool,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Delete a topic
    Delete {
        /// The topic's name
        topic: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Add partitions to a topic
    AlterPartitions {
        /// The topic's name
        topic: String,
        /// The topic's new partition count (more than today's)
        #[arg(value_name = "COUNT")]
        count: i32,
        /// Let the controller check without adding partitions
        #[arg(long, visible_alias = "dry-run")]
        validate_only: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// Runs `kring topics ...`.
pub fn run(command: TopicsCommand) -> CliResult {
    match command {
        TopicsCommand::List {
            internal,
            json,
            cluster,
        } => list(internal, json, cluster),
        TopicsCommand::Create {
            topic,
            partitions,
            replication_factor,
            configs,
            cluster,
        } => create(&topic, partitions, replication_factor, &configs, cluster),
        TopicsCommand::Describe {
            topic,
            all_configs,
            json,
            cluster,
        } => describe(&topic, all_configs, json, cluster),
        TopicsCommand::Delete { topic, cluster } => delete(&topic, cluster),
        TopicsCommand::AlterPartitions {
            topic,
            count,
            validate_only,
            cluster,
        } => alter_partitions(&topic, count, validate_only, cluster),
    }
}

/// Checks a topic name given on the command line.
fn topic_name(name: &str) -> Result<&str, UsageError> {
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

fn list(internal: bool, json: bool, cluster: ClusterArgs) -> CliResult {
    let cluster = cluster.options()?;
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

fn create(
    name: &str,
    partitions: i32,
    replication: i16,
    configs: &[String],
    cluster: ClusterArgs,
) -> CliResult {
    if partitions < 1 {
        return Err(UsageError::new("--partitions must be at least 1").into());
    }
    if replication < 1 {
        return Err(UsageError::new("--replication-factor must be at least 1").into());
    }
    let mut topic_configs = Vec::new();
    for c in configs {
        let (k, v) = c
            .split_once('=')
            .ok_or_else(|| UsageError::new(format!("--config {c:?}: expected NAME=VALUE")))?;
        topic_configs.push((k.to_string(), v.to_string()));
    }
    let name = topic_name(name)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let mut topic = NewTopic::new(name, partitions, replication);
    topic.configs = topic_configs;
    wait(admin.create_topic(&topic))?;
    println!("created {name}: {partitions} partition(s), replication factor {replication}");
    Ok(())
}

fn describe(name: &str, all_configs: bool, json: bool, cluster: ClusterArgs) -> CliResult {
    let name = topic_name(name)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let info = wait(admin.describe_topic(name))?;
    let configs = wait(admin.topic_configs(name))?;
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

fn delete(name: &str, cluster: ClusterArgs) -> CliResult {
    let name = topic_name(name)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.delete_topic(name)).map_err(|e| match e.code() {
        Some(kring::protocol::KafkaCode::UNKNOWN_TOPIC_OR_PARTITION) => {
            CliError::Failed(format!("no topic {name:?} to delete"))
        }
        _ => e.into(),
    })?;
    println!("deleted {name}");
    Ok(())
}

fn alter_partitions(
    name: &str,
    count: i32,
    validate_only: bool,
    cluster: ClusterArgs,
) -> CliResult {
    let name = topic_name(name)?;
    if count < 1 {
        return Err(UsageError::new("COUNT must be at least 1").into());
    }
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.create_partitions(name, count, validate_only))?;
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
        let name = topic_name;
        assert_eq!(name("orders.v2-eu_1").unwrap(), "orders.v2-eu_1");
        assert!(name("..").is_err());
        assert!(name("has space").is_err());
        assert!(name("ünïcode").is_err());
        assert!(name(&"x".repeat(250)).is_err());
        assert!(name("").is_err());
    }
}
