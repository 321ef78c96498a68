//! `kring users scram list|set|delete`: users' SCRAM credentials. The password is
//! salted and hashed here; only the salted hash goes to the broker.

use kring::admin::{Admin, ScramMechanism};

use crate::args::{Args, ClusterOptions, UsageError, cluster_usage};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

pub const USAGE: &str = concat!(
    "\
usage: kring users scram list   [USER...] [--json] [CLUSTER]
       kring users scram set    USER --password-file FILE [--mechanism M] [--iterations N] [CLUSTER]
       kring users scram delete USER [--mechanism M] [CLUSTER]

  --mechanism M        SCRAM-SHA-256 (default) or SCRAM-SHA-512
  --iterations N       hash iterations, at least 4096 (default 8192)
  --password-file FILE the password: the file's first line (`-` reads stdin), so it
                       never shows in the process list
  --json               JSON instead of text

CLUSTER options:
",
    cluster_usage!()
);

/// Runs `kring users ...`.
pub fn run(mut args: Args) -> CliResult {
    match args.positional().as_deref() {
        Some("scram") => {}
        Some(other) => {
            return Err(UsageError::new(format!("unknown users kind {other:?}: try scram")).into());
        }
        None => return Err(UsageError::new("users needs scram").into()),
    }
    let action = args
        .positional()
        .ok_or_else(|| UsageError::new("users scram needs list, set or delete"))?;
    match action.as_str() {
        "list" | "describe" => list(args),
        "set" | "upsert" => set(args),
        "delete" => delete(args),
        other => Err(UsageError::new(format!("unknown users scram action {other:?}")).into()),
    }
}

fn mechanism(args: &mut Args) -> Result<ScramMechanism, UsageError> {
    match args.value(&["--mechanism"])? {
        Some(m) => m
            .parse()
            .map_err(|e: kring::Error| UsageError::new(e.to_string())),
        None => Ok(ScramMechanism::Sha256),
    }
}

fn user(args: &mut Args) -> Result<String, UsageError> {
    args.positional()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| UsageError::new("which user? give its name"))
}

fn list(mut args: Args) -> CliResult {
    let json = args.flag(&["--json"]);
    let cluster = ClusterOptions::take(&mut args)?;
    let mut users = Vec::new();
    while let Some(u) = args.positional() {
        users.push(u);
    }
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    let names: Vec<&str> = users.iter().map(String::as_str).collect();
    let filter = (!names.is_empty()).then_some(names.as_slice());
    let found = wait(admin.describe_user_scram_credentials(filter))?;
    if json {
        let rows: Vec<Json> = found
            .iter()
            .map(|u| {
                obj! {
                    "user" => &u.user,
                    "credentials" => Json::Arr(u.credentials.iter().map(|(m, i)| obj! {
                        "mechanism" => m.name(), "iterations" => *i,
                    }).collect()),
                }
            })
            .collect();
        println!("{}", Json::Arr(rows));
    } else {
        for u in found {
            let creds: Vec<String> = u
                .credentials
                .iter()
                .map(|(m, i)| format!("{}(iterations={i})", m.name()))
                .collect();
            println!("{}\t{}", u.user, creds.join(" "));
        }
    }
    Ok(())
}

fn read_password(path: &str) -> Result<String, crate::CliError> {
    let text = if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_line(&mut s)
            .map_err(|e| crate::CliError::io("reading the password from stdin", e))?;
        s
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| crate::CliError::io(format!("reading {path}"), e))?
    };
    let password = text.lines().next().unwrap_or("").to_string();
    if password.is_empty() {
        return Err(
            UsageError::new(format!("--password-file {path}: the password is empty")).into(),
        );
    }
    Ok(password)
}

fn set(mut args: Args) -> CliResult {
    let mechanism = mechanism(&mut args)?;
    let iterations: i32 = args.parsed(&["--iterations"])?.unwrap_or(8192);
    let file = args
        .value(&["--password-file"])?
        .ok_or_else(|| UsageError::new("--password-file is needed"))?;
    let cluster = ClusterOptions::take(&mut args)?;
    let user = user(&mut args)?;
    args.finish()?;
    if iterations < 4096 {
        return Err(UsageError::new("--iterations must be at least 4096").into());
    }
    let password = read_password(&file)?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.upsert_scram_credential(&user, mechanism, iterations, &password))?;
    println!("set {} for user {user}", mechanism.name());
    Ok(())
}

fn delete(mut args: Args) -> CliResult {
    let mechanism = mechanism(&mut args)?;
    let cluster = ClusterOptions::take(&mut args)?;
    let user = user(&mut args)?;
    args.finish()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.delete_scram_credential(&user, mechanism))?;
    println!("deleted {} of user {user}", mechanism.name());
    Ok(())
}
