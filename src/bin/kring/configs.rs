//! `kring configs describe|alter topic|broker NAME`: a topic's or a broker's configs
//! (`broker default` for the cluster-wide broker default), changed with
//! IncrementalAlterConfigs: every change of one call is applied together or not at all.

use kring::admin::{Admin, AlterConfigOp, ConfigResource};

use crate::args::{Args, ClusterOptions, UsageError, cluster_usage};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

pub const USAGE: &str = concat!(
    "\
usage: kring configs describe topic|broker NAME [--all] [--json] [CLUSTER]
       kring configs alter    topic|broker NAME [--set NAME=VALUE]... [--delete NAME]...
                              [--append NAME=VALUE]... [--subtract NAME=VALUE]...
                              [--validate-only] [CLUSTER]

  NAME             a topic name, or a broker id (`default`: every broker's default)
  --all            describe every config, defaults included
  --json           one JSON object instead of text
  --set N=V        set config N to V (repeatable)
  --delete N       remove config N's override, back to its default (repeatable)
  --append N=V     add V to list config N (repeatable)
  --subtract N=V   remove V from list config N (repeatable)
  --validate-only  let the broker check the changes without applying them

All changes of one `alter` are applied together or not at all.

CLUSTER options:
",
    cluster_usage!()
);

/// Runs `kring configs ...`.
pub fn run(mut args: Args) -> CliResult {
    let action = args
        .positional()
        .ok_or_else(|| UsageError::new("configs needs describe or alter"))?;
    match action.as_str() {
        "describe" => describe(args),
        "alter" => alter(args),
        other => Err(UsageError::new(format!("unknown configs action {other:?}")).into()),
    }
}

/// `topic NAME` or `broker ID|default`.
fn resource(args: &mut Args) -> Result<ConfigResource, UsageError> {
    let kind = args
        .positional()
        .ok_or_else(|| UsageError::new("configs of what? give topic NAME or broker ID"))?;
    let name = args
        .positional()
        .ok_or_else(|| UsageError::new(format!("which {kind}? give its name")))?;
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

fn describe(mut args: Args) -> CliResult {
    let all = args.flag(&["--all", "--all-configs"]);
    let json = args.flag(&["--json"]);
    let cluster = ClusterOptions::take(&mut args)?;
    let resource = resource(&mut args)?;
    args.finish()?;
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

fn alter(mut args: Args) -> CliResult {
    let mut ops = Vec::new();
    for s in args.values(&["--set"])? {
        let (k, v) = pair("--set", &s)?;
        ops.push(AlterConfigOp::Set(k, v));
    }
    for s in args.values(&["--append"])? {
        let (k, v) = pair("--append", &s)?;
        ops.push(AlterConfigOp::Append(k, v));
    }
    for s in args.values(&["--subtract"])? {
        let (k, v) = pair("--subtract", &s)?;
        ops.push(AlterConfigOp::Subtract(k, v));
    }
    for k in args.values(&["--delete"])? {
        ops.push(AlterConfigOp::Delete(k));
    }
    let validate_only = args.flag(&["--validate-only", "--dry-run"]);
    let cluster = ClusterOptions::take(&mut args)?;
    let resource = resource(&mut args)?;
    args.finish()?;
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
