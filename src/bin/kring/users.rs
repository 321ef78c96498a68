//! `kring users scram list|set|delete`: users' SCRAM credentials. The password is
//! salted and hashed here; only the salted hash goes to the broker.

use kring::admin::{Admin, ScramMechanism};

use crate::args::{ClusterArgs, UsageError};
use crate::json::{Json, obj};
use crate::{CliResult, connect, wait};

/// `kring users KIND`.
#[derive(Debug, clap::Subcommand)]
pub enum UsersCommand {
    /// SCRAM credentials (list, set, delete)
    #[command(subcommand)]
    Scram(ScramCommand),
}

/// `kring users scram ACTION`.
#[derive(Debug, clap::Subcommand)]
pub enum ScramCommand {
    /// The SCRAM mechanisms and iterations of users (every user without USER)
    #[command(alias = "describe")]
    List {
        /// Users to describe
        #[arg(value_name = "USER")]
        users: Vec<String>,
        /// JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Set a user's SCRAM credential (salted and hashed here)
    #[command(alias = "upsert")]
    Set {
        /// The user
        user: String,
        /// The password: the file's first line (`-` reads stdin), so it never shows in
        /// the process list
        #[arg(long, value_name = "FILE", required = true)]
        password_file: String,
        #[command(flatten)]
        mechanism: MechanismArg,
        /// Hash iterations, at least 4096
        #[arg(long, value_name = "N", default_value_t = 8192)]
        iterations: i32,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Delete a user's SCRAM credential of one mechanism
    Delete {
        /// The user
        user: String,
        #[command(flatten)]
        mechanism: MechanismArg,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// `--mechanism`.
#[derive(Debug, clap::Args)]
pub struct MechanismArg {
    /// SCRAM-SHA-256 or SCRAM-SHA-512
    #[arg(long = "mechanism", value_name = "M", default_value = "SCRAM-SHA-256")]
    name: String,
}

/// Runs `kring users ...`.
pub fn run(command: UsersCommand) -> CliResult {
    let UsersCommand::Scram(command) = command;
    match command {
        ScramCommand::List {
            users,
            json,
            cluster,
        } => list(&users, json, cluster),
        ScramCommand::Set {
            user,
            password_file,
            mechanism,
            iterations,
            cluster,
        } => set(&user, &password_file, &mechanism, iterations, cluster),
        ScramCommand::Delete {
            user,
            mechanism,
            cluster,
        } => delete(&user, &mechanism, cluster),
    }
}

fn mechanism(arg: &MechanismArg) -> Result<ScramMechanism, UsageError> {
    arg.name
        .parse()
        .map_err(|e: kring::Error| UsageError::new(e.to_string()))
}

/// Checks a user name given on the command line.
fn user(name: &str) -> Result<&str, UsageError> {
    Some(name)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| UsageError::new("which user? give its name"))
}

fn list(users: &[String], json: bool, cluster: ClusterArgs) -> CliResult {
    let cluster = cluster.options()?;
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

fn set(
    user: &str,
    file: &str,
    mechanism: &MechanismArg,
    iterations: i32,
    cluster: ClusterArgs,
) -> CliResult {
    let mechanism = self::mechanism(mechanism)?;
    let user = self::user(user)?;
    if iterations < 4096 {
        return Err(UsageError::new("--iterations must be at least 4096").into());
    }
    let cluster = cluster.options()?;
    let password = read_password(file)?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.upsert_scram_credential(user, mechanism, iterations, &password))?;
    println!("set {} for user {user}", mechanism.name());
    Ok(())
}

fn delete(user: &str, mechanism: &MechanismArg, cluster: ClusterArgs) -> CliResult {
    let mechanism = self::mechanism(mechanism)?;
    let user = self::user(user)?;
    let cluster = cluster.options()?;
    let admin = Admin::new(connect(cluster)?);
    wait(admin.delete_scram_credential(user, mechanism))?;
    println!("deleted {} of user {user}", mechanism.name());
    Ok(())
}
