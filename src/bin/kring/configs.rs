//! `kring configs describe|alter topic|broker NAME`: a topic's or a broker's configs
//! (`broker default` for the cluster-wide broker default), changed with
//! IncrementalAlterConfigs: every change of one call is applied together or not at all.

use kring::admin::{Admin, AlterConfigOp, ConfigResource};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// The config owner, as `topic NAME` or `broker ID|default`.
#[derive(Debug, clap::Args)]
pub struct ResourceArgs {
    /// topic or broker
    #[arg(value_name = "topic|broker")]
    kind: String,
    /// A topic name, or a broker id (`default`: every broker's default)
    #[arg(value_name = "NAME")]
    name: String,
}

/// `kring configs ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigsCommand {
    /// A topic's or broker's configs (overrides only, unless --all)
    Describe {
        #[command(flatten)]
        resource: ResourceArgs,
        /// Describe every config, defaults included
        #[arg(long, visible_alias = "all-configs")]
        all: bool,
        /// One JSON object instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Change a topic's or broker's configs, all or nothing
    ///
    /// Changes a topic's or broker's configs with IncrementalAlterConfigs: all changes of
    /// one call are applied together or not at all.
    Alter {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        changes: Changes,
        /// Let the broker check the changes without applying them
        #[arg(long, visible_alias = "dry-run")]
        validate_only: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// The changes of `configs alter`.
#[derive(Debug, clap::Args)]
pub struct Changes {
    /// Set config N to V (repeatable)
    #[arg(long, value_name = "N=V")]
    set: Vec<String>,
    /// Remove config N's override, back to its default (repeatable)
    #[arg(long, value_name = "N")]
    delete: Vec<String>,
    /// Add V to list config N (repeatable)
    #[arg(long, value_name = "N=V")]
    append: Vec<String>,
    /// Remove V from list config N (repeatable)
    #[arg(long, value_name = "N=V")]
    subtract: Vec<String>,
}

/// Runs `kring configs ...`.
pub fn run(command: ConfigsCommand) -> CliResult {
    match command {
        ConfigsCommand::Describe {
            resource,
            all,
            json,
            cluster,
        } => describe(resource, all, json, cluster),
        ConfigsCommand::Alter {
            resource,
            changes,
            validate_only,
            cluster,
        } => alter(resource, changes, validate_only, cluster),
    }
}

/// `topic NAME` or `broker ID|default`.
fn resource(args: ResourceArgs) -> Result<ConfigResource, UsageError> {
    let ResourceArgs { kind, name } = args;
    match kind.as_str() {
        "topic" | "topics" => Ok(ConfigResource::Topic(name)),
        "broker" | "brokers" if name == "default" => Ok(ConfigResource::BrokerDefault),
        "broker" | "brokers" => name
            .parse()
            .map(ConfigResource::Broker)
            .map_err(|_| UsageError::new(format!("broker {name:?}: expected an id or default"))),
        other => Err(UsageError::new(format!(
            "{other:?}: configs are of a topic or a broker"
        ))),
    }
}

fn describe(resource: ResourceArgs, all: bool, json: bool, cluster: ClusterArgs) -> CliResult {
    let resource = self::resource(resource)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    let entries = wait(admin.describe_configs(&resource))?;
    let shown: Vec<_> = entries.iter().filter(|c| all || !c.is_default).collect();
    if json {
        let configs = shown
            .iter()
            .map(|c| {
                obj! {
                    "name" => &c.name,
                    "value" => if c.sensitive { None } else { c.value.clone() },
                    "source" => c.source.name(),
                    "default" => c.is_default,
                    "read_only" => c.read_only,
                    "sensitive" => c.sensitive,
                }
            })
            .collect();
        println!(
            "{}",
            obj! {"resource" => resource.to_string(), "configs" => Json::Arr(configs)}
        );
        return Ok(());
    }
    println!("configs of {resource}:");
    if shown.is_empty() {
        println!("  none set (--all lists the defaults)");
    }
    for c in shown {
        let value = if c.sensitive {
            "(sensitive)"
        } else {
            c.value.as_deref().unwrap_or("(null)")
        };
        println!("  {} = {}  ({})", c.name, value, c.source.name());
    }
    Ok(())
}

fn pair(option: &str, text: &str) -> Result<(String, String), UsageError> {
    text.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| UsageError::new(format!("{option} {text:?}: expected NAME=VALUE")))
}

fn alter(
    resource: ResourceArgs,
    changes: Changes,
    validate_only: bool,
    cluster: ClusterArgs,
) -> CliResult {
    let mut ops = Vec::new();
    for s in &changes.set {
        let (k, v) = pair("--set", s)?;
        ops.push(AlterConfigOp::Set(k, v));
    }
    for s in &changes.append {
        let (k, v) = pair("--append", s)?;
        ops.push(AlterConfigOp::Append(k, v));
    }
    for s in &changes.subtract {
        let (k, v) = pair("--subtract", s)?;
        ops.push(AlterConfigOp::Subtract(k, v));
    }
    for k in changes.delete {
        ops.push(AlterConfigOp::Delete(k));
    }
    let resource = self::resource(resource)?;
    let cluster = cluster.options()?;
    if ops.is_empty() {
        return Err(UsageError::new(
            "nothing to change: give --set, --delete, --append or --subtract",
        )
        .into());
    }
    let admin = Admin::new(connect(cluster)?);
    wait(admin.incremental_alter_configs(&resource, &ops, validate_only))?;
    let verb = if validate_only {
        "would change"
    } else {
        "changed"
    };
    println!("{verb} {} config(s) of {resource}", ops.len());
    Ok(())
}
