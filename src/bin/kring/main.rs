//! The `kring` command line: the roles of Sarama's console producer, console consumer
//! and producer-performance tools, and of kcat.
//!
//! - `kring produce`: records from stdin or a file, split on a delimiter;
//! - `kring consume`: a partition or a whole topic, printed in a chosen format, or as
//!   a member of a consumer group (`-G`);
//! - `kring topics list|create|describe|delete|alter-partitions`;
//! - `kring cluster`: brokers, controller, features, API versions;
//! - `kring configs describe|alter`: topic and broker configs;
//! - `kring records delete|offsets`: delete records, list offsets;
//! - `kring groups list|describe|delete|reset-offsets|delete-offsets`;
//! - `kring acls list|create|delete`;
//! - `kring users scram list|set|delete`, `kring quotas list|alter`;
//! - `kring perf produce|consume`: throughput runs with a live progress line and a report;
//! - `kring check`: a round trip of raw protocol requests against one broker.
//!
//! Exit codes: 0 success, 1 a failure talking to Kafka (or reading input), 2 bad
//! arguments. Every error is one line on stderr that names what failed.

mod acls;
mod args;
mod check;
mod cluster;
mod configs;
mod consume;
mod consume_group;
mod deliveries;
mod format;
mod groups;
mod json;
mod perf;
mod perf_group;
mod perf_txn;
mod produce;
mod quotas;
mod records;
mod stats;
mod topics;
mod users;

use std::process::ExitCode;

use args::{Args, UsageError};

const USAGE: &str = "\
usage: kring COMMAND [OPTIONS]

commands:
  produce   send records read from stdin or a file
  consume   print records of a partition or a whole topic, or as a group member (-G)
  topics    list, create, describe, delete topics or add partitions
  cluster   the cluster id, controller, brokers, features and API versions
  configs   describe or alter topic and broker configs
  records   delete records, list offsets
  groups    list, describe (with lag), delete consumer groups, reset their offsets
  acls      list, create or delete ACLs
  users     SCRAM credentials of users (users scram list|set|delete)
  quotas    list or alter client quotas
  perf      measure producer or consumer throughput (perf produce, perf consume)
  check     a round trip of raw protocol requests against one broker

`kring COMMAND --help` shows a command's options.";

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments: printed with the command's usage; exit code 2.
    #[error("{0}")]
    Usage(#[from] UsageError),
    /// Kafka or the client said no.
    #[error(transparent)]
    Kafka(#[from] kring::Error),
    /// Reading input or writing output failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Anything else, said in words.
    #[error("{0}")]
    Failed(String),
    /// `--help` was asked for: the usage is printed instead of running the command.
    #[error("help")]
    Help,
}

impl CliError {
    /// An I/O failure while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            what: what.into(),
            source,
        }
    }
}

/// What a subcommand's `run` returns.
pub type CliResult = Result<(), CliError>;

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next();
    let rest: Vec<String> = argv.collect();
    let wants_help = rest.iter().any(|a| a == "-h" || a == "--help");
    let (usage, result): (&str, CliResult) = match command.as_deref() {
        Some("produce") => (
            produce::USAGE,
            help_or(wants_help, || produce::run(Args::new(rest))),
        ),
        Some("consume") => (
            consume::USAGE,
            help_or(wants_help, || consume::run(Args::new(rest))),
        ),
        Some("topics") => (
            topics::USAGE,
            help_or(wants_help, || topics::run(Args::new(rest))),
        ),
        Some("cluster") => (
            cluster::USAGE,
            help_or(wants_help, || cluster::run(Args::new(rest))),
        ),
        Some("configs") => (
            configs::USAGE,
            help_or(wants_help, || configs::run(Args::new(rest))),
        ),
        Some("records") => (
            records::USAGE,
            help_or(wants_help, || records::run(Args::new(rest))),
        ),
        Some("groups") => (
            groups::USAGE,
            help_or(wants_help, || groups::run(Args::new(rest))),
        ),
        Some("acls") => (
            acls::USAGE,
            help_or(wants_help, || acls::run(Args::new(rest))),
        ),
        Some("users") => (
            users::USAGE,
            help_or(wants_help, || users::run(Args::new(rest))),
        ),
        Some("quotas") => (
            quotas::USAGE,
            help_or(wants_help, || quotas::run(Args::new(rest))),
        ),
        Some("perf") => (
            perf::USAGE,
            help_or(wants_help, || perf::run(Args::new(rest))),
        ),
        Some("check") => (
            check::USAGE,
            help_or(wants_help, || check::run(Args::new(rest))),
        ),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some("-V" | "--version" | "version") => {
            println!("kring {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some(other) => (
            USAGE,
            Err(UsageError::new(format!("unknown command {other:?}")).into()),
        ),
        None => (USAGE, Err(UsageError::new("no command given").into())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Help) => {
            println!("{usage}");
            ExitCode::SUCCESS
        }
        Err(CliError::Usage(e)) => {
            eprintln!("kring: {e}\n\n{usage}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("kring: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--help` anywhere in a command's arguments prints its usage instead of running it.
fn help_or(wants_help: bool, run: impl FnOnce() -> CliResult) -> CliResult {
    if wants_help {
        Err(CliError::Help)
    } else {
        run()
    }
}

/// Connects a client, saying which brokers could not be reached when none answers.
pub fn connect(options: args::ClusterOptions) -> Result<kring::Client, CliError> {
    options
        .config
        .validate()
        .map_err(|e| UsageError::new(e.to_string()))?;
    let servers = options.config.bootstrap_servers.join(",");
    kring::Client::connect_blocking(options.config)
        .map_err(|e| CliError::Failed(format!("cannot connect to {servers}: {e}")))
}

/// Waits for `future` on this thread (the client's futures run on any executor).
pub fn wait<T>(future: impl std::future::Future<Output = T>) -> T {
    kring::client::block_on(future)
}

/// A single-threaded runtime for a command's own tasks (the client's workers do the I/O).
pub fn local_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::io("starting a runtime", e))
}
