//! `kring acls list|create|delete`: access control lists, with the resource, principal,
//! operation, permission, pattern and host filters of the Java `kafka-acls` tool.

use kring::admin::{
    AclBinding, AclBindingFilter, AclOperation, AclPermission, AclResourceType, Admin, PatternType,
};

use crate::args::{Args, ClusterOptions, UsageError, cluster_usage};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

pub const USAGE: &str = concat!(
    "\
usage: kring acls list   [FILTER] [--json] [CLUSTER]
       kring acls create (--allow|--deny) PRINCIPAL --operation OP... RESOURCE
                         [--pattern literal|prefixed] [--host HOST] [CLUSTER]
       kring acls delete FILTER [--json] [CLUSTER]

  RESOURCE    --topic T | --group G | --cluster | --transactional-id ID
  PRINCIPAL   TYPE:NAME, e.g. User:alice (User:* for every user)
  OP          read, write, create, delete, alter, describe, cluster-action,
              describe-configs, alter-configs, idempotent-write, all, ...
  FILTER      any of: RESOURCE, --principal P, --operation OP, --permission allow|deny,
              --pattern any|match|literal|prefixed, --host HOST
              (delete needs at least one)
  --json      JSON instead of text

CLUSTER options:
",
    cluster_usage!()
);

/// Runs `kring acls ...`.
pub fn run(mut args: Args) -> CliResult {
    let action = args
        .positional()
        .ok_or_else(|| UsageError::new("acls needs list, create or delete"))?;
    match action.as_str() {
        "list" => list(args),
        "create" | "add" => create(args),
        "delete" | "remove" => delete(args),
        other => Err(UsageError::new(format!("unknown acls action {other:?}")).into()),
    }
}

fn usage(e: kring::Error) -> UsageError {
    UsageError::new(match e {
        kring::Error::InvalidArgument(why) => why,
        other => other.to_string(),
    })
}

/// The resource options: its type and name, if one was given.
fn resource(args: &mut Args) -> Result<Option<(AclResourceType, String)>, UsageError> {
    let mut found = Vec::new();
    for (option, kind) in [
        ("--topic", AclResourceType::Topic),
        ("--group", AclResourceType::Group),
        ("--transactional-id", AclResourceType::TransactionalId),
    ] {
        if let Some(name) = args.value(&[option])? {
            found.push((kind, name));
        }
    }
    if args.flag(&["--cluster"]) {
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

fn filter(args: &mut Args) -> Result<(AclBindingFilter, bool), UsageError> {
    let mut f = AclBindingFilter::any();
    let mut narrowed = false;
    if let Some((kind, name)) = resource(args)? {
        f.resource_type = kind;
        f.resource_name = Some(name);
        narrowed = true;
    }
    if let Some(p) = args.value(&["--principal"])? {
        f.principal = Some(p);
        narrowed = true;
    }
    if let Some(op) = args.value(&["--operation"])? {
        f.operation = op.parse().map_err(usage)?;
        narrowed = true;
    }
    if let Some(p) = args.value(&["--permission"])? {
        f.permission = p.parse().map_err(usage)?;
        narrowed = true;
    }
    if let Some(h) = args.value(&["--host"])? {
        f.host = Some(h);
        narrowed = true;
    }
    // A named resource matches its literal and prefixed ACLs unless told otherwise.
    f.pattern_type = match args.value(&["--pattern"])? {
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

fn list(mut args: Args) -> CliResult {
    let json = args.flag(&["--json"]);
    let (filter, _) = filter(&mut args)?;
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    print(&wait(admin.describe_acls(&filter))?, json);
    Ok(())
}

fn create(mut args: Args) -> CliResult {
    let allow = args.values(&["--allow", "--allow-principal"])?;
    let deny = args.values(&["--deny", "--deny-principal"])?;
    let operations = args.values(&["--operation"])?;
    let pattern = args.value(&["--pattern"])?;
    let host = args.value(&["--host"])?.unwrap_or_else(|| "*".into());
    let (resource_type, name) = resource(&mut args)?.ok_or_else(|| {
        UsageError::new("which resource? --topic, --group, --cluster or --transactional-id")
    })?;
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
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

fn delete(mut args: Args) -> CliResult {
    let json = args.flag(&["--json"]);
    let (filter, narrowed) = filter(&mut args)?;
    let cluster = ClusterOptions::take(&mut args)?;
    args.finish()?;
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
