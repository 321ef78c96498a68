//! `kring quotas list|alter`: client quotas of users, client ids and IPs (KIP-546).

use kring::admin::{Admin, QuotaMatch};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring quotas ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum QuotasCommand {
    /// The quotas of an entity (every user and client id quota without ENTITY)
    #[command(alias = "describe")]
    List {
        #[command(flatten)]
        entity: EntityArgs,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Set or remove quotas of an entity
    Alter {
        #[command(flatten)]
        entity: EntityArgs,
        /// Set quota K (producer_byte_rate, consumer_byte_rate, request_percentage,
        /// controller_mutation_rate, connection_creation_rate) to V (repeatable)
        #[arg(long, value_name = "K=V")]
        set: Vec<String>,
        /// Remove quota K (repeatable)
        #[arg(long, value_name = "K")]
        delete: Vec<String>,
        /// Let the broker check the changes without applying them
        #[arg(long)]
        validate_only: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// The entity whose quotas these are; `<default>` for the type's default.
#[derive(Debug, clap::Args)]
pub struct EntityArgs {
    /// A user (`<default>`: the users' default)
    #[arg(long, value_name = "NAME", help_heading = "ENTITY")]
    user: Option<String>,
    /// A client id (`<default>`: the client ids' default)
    #[arg(long, value_name = "NAME", help_heading = "ENTITY")]
    client_id: Option<String>,
    /// An IP address (`<default>`: the IPs' default)
    #[arg(long, value_name = "ADDRESS", help_heading = "ENTITY")]
    ip: Option<String>,
}

/// Runs `kring quotas ...`.
pub fn run(command: QuotasCommand) -> CliResult {
    match command {
        QuotasCommand::List {
            entity,
            json,
            cluster,
        } => list(entity, json, cluster),
        QuotasCommand::Alter {
            entity,
            set,
            delete,
            validate_only,
            cluster,
        } => alter(entity, &set, delete, validate_only, cluster),
    }
}

/// The entity options, as (type, name or None for default).
fn entity(args: EntityArgs) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (name, kind) in [
        (args.user, "user"),
        (args.client_id, "client-id"),
        (args.ip, "ip"),
    ] {
        if let Some(name) = name {
            let name = (name != "<default>").then_some(name);
            out.push((kind.to_string(), name));
        }
    }
    out
}

fn list(entity: EntityArgs, json: bool, cluster: ClusterArgs) -> CliResult {
    let entity = self::entity(entity);
    let cluster = cluster.options()?;
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

fn alter(
    entity: EntityArgs,
    set: &[String],
    delete: Vec<String>,
    validate_only: bool,
    cluster: ClusterArgs,
) -> CliResult {
    let mut ops = Vec::new();
    for s in set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| UsageError::new(format!("--set {s:?}: expected KEY=VALUE")))?;
        let value: f64 = crate::args::parse_value(&format!("--set {k}"), v)?;
        ops.push((k.to_string(), Some(value)));
    }
    for k in delete {
        ops.push((k, None));
    }
    let entity = self::entity(entity);
    let cluster = cluster.options()?;
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
