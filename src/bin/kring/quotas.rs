//! `kring quotas list|alter`: client quotas of users, client ids and IPs (KIP-546).

use kring::admin::{Admin, QuotaMatch};

use crate::args::{Args, ClusterOptions, UsageError, cluster_usage};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

pub const USAGE: &str = concat!(
    "\
usage: kring quotas list  [ENTITY...] [--json] [CLUSTER]
       kring quotas alter ENTITY... [--set KEY=VALUE]... [--delete KEY]... [--validate-only] [CLUSTER]

  ENTITY    --user NAME | --client-id NAME | --ip ADDRESS, with `<default>` for the
            type's default; list without ENTITY shows every user and client id quota
  --set K=V set quota K (producer_byte_rate, consumer_byte_rate, request_percentage,
            controller_mutation_rate, connection_creation_rate) to V
  --delete K remove quota K
  --json    JSON instead of text

CLUSTER options:
",
    cluster_usage!()
);

/// Runs `kring quotas ...`.
pub fn run(mut args: Args) -> CliResult {
    let action = args
        .positional()
        .ok_or_else(|| UsageError::new("quotas needs list or alter"))?;
    match action.as_str() {
        "list" | "describe" => list(args),
        "alter" => alter(args),
        other => Err(UsageError::new(format!("unknown quotas action {other:?}")).into()),
    }
}

/// The `--user`/`--client-id`/`--ip` options, as (type, name or None for default).
fn entity(args: &mut Args) -> Result<Vec<(String, Option<String>)>, UsageError> {
    let mut out = Vec::new();
    for (option, kind) in [
        ("--user", "user"),
        ("--client-id", "client-id"),
        ("--ip", "ip"),
    ] {
        if let Some(name) = args.value(&[option])? {
            let name = (name != "<default>").then_some(name);
            out.push((kind.to_string(), name));
        }
    }
    Ok(out)
}

fn list(mut args: Args) -> CliResult {
    let json = args.flag(&["--json"]);
    let entity = entity(&mut args)?;
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
    let filter: Vec<(String, QuotaMatch)> = if entity.is_empty() {
        vec![("user".into(), QuotaMatch::Any)]
    } else {
        entity
            .iter()
            .map(|(t, n)| {
                let m = n.clone().map_or(QuotaMatch::Default, QuotaMatch::Exact);
                (t.clone(), m)
            })
            .collect()
    };
    let admin = Admin::new(connect(cluster)?);
    let mut quotas = wait(admin.describe_client_quotas(&filter, !entity.is_empty()))?;
    if entity.is_empty() {
        let clients = [("client-id".to_string(), QuotaMatch::Any)];
        quotas.extend(wait(admin.describe_client_quotas(&clients, false))?);
        quotas.sort_by(|a, b| a.entity.cmp(&b.entity));
        quotas.dedup_by(|a, b| a.entity == b.entity);
    }
    let label = |e: &[(String, Option<String>)]| {
        e.iter()
            .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
            .collect::<Vec<_>>()
            .join(",")
    };
    if json {
        let rows: Vec<Json> = quotas
            .iter()
            .map(|q| {
                obj! {
                    "entity" => label(&q.entity),
                    "quotas" => Json::Arr(q.values.iter().map(|(k, v)| obj! {
                        "key" => k, "value" => v.to_string(),
                    }).collect()),
                }
            })
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for q in quotas {
            let values: Vec<String> = q.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("{}\t{}", label(&q.entity), values.join(" "));
        }
    }
    Ok(())
}

fn alter(mut args: Args) -> CliResult {
    let mut ops = Vec::new();
    for s in args.values(&["--set"])? {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| UsageError::new(format!("--set {s:?}: expected KEY=VALUE")))?;
        let value: f64 = crate::args::parse_value(&format!("--set {k}"), v)?;
        ops.push((k.to_string(), Some(value)));
    }
    for k in args.values(&["--delete"])? {
        ops.push((k, None));
    }
    let validate_only = args.flag(&["--validate-only"]);
    let entity = entity(&mut args)?;
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
    if entity.is_empty() {
        return Err(UsageError::new("whose quotas? give --user, --client-id or --ip").into());
    }
    if ops.is_empty() {
        return Err(UsageError::new("nothing to change: give --set or --delete").into());
    }
    let admin = Admin::new(connect(cluster)?);
    wait(admin.alter_client_quotas(&entity, &ops, validate_only))?;
    let verb = if validate_only {
        "would change"
    } else {
        "changed"
    };
    println!("{verb} {} quota(s)", ops.len());
    Ok(())
}
