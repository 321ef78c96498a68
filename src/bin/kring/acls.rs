//! `kring acls list|create|delete`: access control lists, with the resource, principal,
//! operation, permission, pattern and host filters of the Java `kafka-acls` tool.

use kring::admin::{
    AclBinding, AclBindingFilter, AclOperation, AclPermission, AclResourceType, Admin, PatternType,
};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring acls ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum AclsCommand {
    /// List the ACLs that match a filter (every ACL without one)
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Create ACLs: each principal given is allowed (or denied) each operation given
    #[command(alias = "add")]
    Create {
        /// Allow PRINCIPAL (TYPE:NAME, e.g. User:alice; User:* for every user; repeatable)
        #[arg(long, alias = "allow-principal", value_name = "PRINCIPAL")]
        allow: Vec<String>,
        /// Deny PRINCIPAL (TYPE:NAME; repeatable)
        #[arg(long, alias = "deny-principal", value_name = "PRINCIPAL")]
        deny: Vec<String>,
        /// read, write, create, delete, alter, describe, cluster-action, describe-configs,
        /// alter-configs, idempotent-write, all, ... (repeatable)
        #[arg(long = "operation", value_name = "OP")]
        operations: Vec<String>,
        /// How the resource name matches: literal or prefixed [default: literal]
        #[arg(long, value_name = "literal|prefixed")]
        pattern: Option<String>,
        /// The host the principal connects from [default: *]
        #[arg(long, value_name = "HOST", default_value = "*")]
        host: String,
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Delete the ACLs that match a filter (at least one filter option is needed)
    #[command(alias = "remove")]
    Delete {
        #[command(flatten)]
        filter: FilterArgs,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// The resource of an ACL: one of its options.
#[derive(Debug, clap::Args)]
pub struct ResourceArgs {
    /// The resource is topic T
    #[arg(long, value_name = "T", help_heading = "RESOURCE (one of)")]
    topic: Option<String>,
    /// The resource is group G
    #[arg(long, value_name = "G", help_heading = "RESOURCE (one of)")]
    group: Option<String>,
    /// The resource is the cluster
    #[arg(long, help_heading = "RESOURCE (one of)")]
    cluster: bool,
    /// The resource is transactional id ID
    #[arg(long, value_name = "ID", help_heading = "RESOURCE (one of)")]
    transactional_id: Option<String>,
}

/// The filter of `acls list` and `acls delete`: any of these.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    #[command(flatten)]
    resource: ResourceArgs,
    /// Only ACLs of principal P (TYPE:NAME)
    #[arg(long, value_name = "P", help_heading = "FILTER")]
    principal: Option<String>,
    /// Only ACLs of operation OP (read, write, describe, all, ...)
    #[arg(long, value_name = "OP", help_heading = "FILTER")]
    operation: Option<String>,
    /// Only allow or only deny ACLs
    #[arg(long, value_name = "allow|deny", help_heading = "FILTER")]
    permission: Option<String>,
    /// Only ACLs of this pattern type [default: any]
    #[arg(
        long,
        value_name = "any|match|literal|prefixed",
        help_heading = "FILTER"
    )]
    pattern: Option<String>,
    /// Only ACLs for connections from HOST
    #[arg(long, value_name = "HOST", help_heading = "FILTER")]
    host: Option<String>,
}

/// Runs `kring acls ...`.
pub fn run(command: AclsCommand) -> CliResult {
    match command {
        AclsCommand::List {
            filter,
            json,
            cluster,
        } => list(filter, json, cluster),
        AclsCommand::Create {
            allow,
            deny,
            operations,
            pattern,
            host,
            resource,
            cluster,
        } => create(
            Grants {
                allow,
                deny,
                operations,
                pattern,
                host,
            },
            resource,
            cluster,
        ),
        AclsCommand::Delete {
            filter,
            json,
            cluster,
        } => delete(filter, json, cluster),
    }
}

/// What `acls create` grants (or denies), to whom.
struct Grants {
    allow: Vec<String>,
    deny: Vec<String>,
    operations: Vec<String>,
    pattern: Option<String>,
    host: String,
}

fn usage(e: kring::Error) -> UsageError {
    UsageError::new(match e {
        kring::Error::InvalidArgument(why) => why,
        other => other.to_string(),
    })
}

/// The resource options: its type and name, if one was given.
fn resource(args: ResourceArgs) -> Result<Option<(AclResourceType, String)>, UsageError> {
    let mut found = Vec::new();
    for (name, kind) in [
        (args.topic, AclResourceType::Topic),
        (args.group, AclResourceType::Group),
        (args.transactional_id, AclResourceType::TransactionalId),
    ] {
        if let Some(name) = name {
            found.push((kind, name));
        }
    }
    if args.cluster {
        found.push((AclResourceType::Cluster, "kafka-cluster".into()));
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(UsageError::new(
            "give one resource: --topic, --group, --cluster or --transactional-id",
        )),
    }
}

fn filter(args: FilterArgs) -> Result<(AclBindingFilter, bool), UsageError> {
    let mut f = AclBindingFilter::any();
    let mut narrowed = false;
    if let Some((kind, name)) = resource(args.resource)? {
        f.resource_type = kind;
        f.resource_name = Some(name);
        narrowed = true;
    }
    if let Some(p) = args.principal {
        f.principal = Some(p);
        narrowed = true;
    }
    if let Some(op) = args.operation {
        f.operation = op.parse().map_err(usage)?;
        narrowed = true;
    }
    if let Some(p) = args.permission {
        f.permission = p.parse().map_err(usage)?;
        narrowed = true;
    }
    if let Some(h) = args.host {
        f.host = Some(h);
        narrowed = true;
    }
    // A named resource matches its literal and prefixed ACLs unless told otherwise.
    f.pattern_type = match args.pattern {
        Some(p) => {
            narrowed = true;
            p.parse().map_err(usage)?
        }
        None => PatternType::Any,
    };
    Ok((f, narrowed))
}

fn print(acls: &[AclBinding], json: bool) {
    if json {
        let rows: Vec<Json> = acls
            .iter()
            .map(|a| {
                obj! {
                    "resource_type" => a.resource_type.name(), "resource" => &a.resource_name,
                    "pattern" => a.pattern_type.name(), "principal" => &a.principal,
                    "host" => &a.host, "operation" => a.operation.name(),
                    "permission" => a.permission.name(),
                }
            })
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for a in acls {
            println!("{a}");
        }
    }
}

fn list(filter: FilterArgs, json: bool, cluster: ClusterArgs) -> CliResult {
    let (filter, _) = self::filter(filter)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    print(&wait(admin.describe_acls(&filter))?, json);
    Ok(())
}

fn create(grants: Grants, resource: ResourceArgs, cluster: ClusterArgs) -> CliResult {
    let Grants {
        allow,
        deny,
        operations,
        pattern,
        host,
    } = grants;
    let (resource_type, name) = self::resource(resource)?.ok_or_else(|| {
        UsageError::new("which resource? --topic, --group, --cluster or --transactional-id")
    })?;
    let cluster = cluster.options()?;
    if operations.is_empty() {
        return Err(UsageError::new("--operation is needed").into());
    }
    if allow.is_empty() && deny.is_empty() {
        return Err(UsageError::new("--allow or --deny PRINCIPAL is needed").into());
    }
    let pattern_type = match pattern {
        Some(p) => p.parse().map_err(usage)?,
        None => PatternType::Literal,
    };
    let mut acls = Vec::new();
    let principals = allow
        .iter()
        .map(|p| (p, AclPermission::Allow))
        .chain(deny.iter().map(|p| (p, AclPermission::Deny)));
    for (principal, permission) in principals {
        for op in &operations {
            let acl = AclBinding {
                resource_type,
                resource_name: name.clone(),
                pattern_type,
                principal: principal.clone(),
                host: host.clone(),
                operation: op.parse::<AclOperation>().map_err(usage)?,
                permission,
            };
            acl.validate().map_err(usage)?;
            acls.push(acl);
        }
    }
    let admin = Admin::new(connect(cluster)?);
    wait(admin.create_acls(&acls))?;
    for a in &acls {
        println!("created {a}");
    }
    Ok(())
}

fn delete(filter: FilterArgs, json: bool, cluster: ClusterArgs) -> CliResult {
    let (filter, narrowed) = self::filter(filter)?;
    let cluster = cluster.options()?;
    if !narrowed {
        return Err(UsageError::new(
            "delete needs a filter (a resource, --principal, --operation, ...): it would delete every ACL",
        )
        .into());
    }
    let admin = Admin::new(connect(cluster)?);
    let deleted = wait(admin.delete_acls(&[filter]))?;
    if !json {
        println!("deleted {} ACL(s)", deleted.len());
    }
    print(&deleted, json);
    Ok(())
}
