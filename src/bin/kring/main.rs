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
//! - `kring check`: a round trip of raw protocol requests against one broker;
//! - `kring completions bash|zsh|fish|elvish|powershell`: a shell completion script.
//!
//! Arguments are parsed by clap (derive): every command and subcommand has `--help`,
//! and a misspelt command or option is rejected with a suggestion. Each subcommand
//! module defines its own clap arguments; the cluster options they share (`-b`, `-X`,
//! `-F`) are in `args.rs`.
//!
//! Exit codes: 0 success (and `--help`, `--version`), 1 a failure talking to Kafka (or
//! reading input), 2 bad arguments (clap's own errors, and the checks of meaning made
//! after parsing, printed the same way: one line, then the command's usage). Every
//! other error is one line on stderr that names what failed.

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
mod metrics_view;
mod perf;
mod perf_group;
mod perf_rate;
mod perf_txn;
mod produce;
mod quotas;
mod records;
mod stats;
mod topics;
mod users;

use std::io::Write;
use std::process::ExitCode;

use args::UsageError;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "kring",
    version,
    about = "A Kafka command line: produce, consume, administer, measure.",
    subcommand_required = true,
    arg_required_else_help = true,
    after_help = "`kring COMMAND --help` shows a command's options.\n\
                  Exit codes: 0 success, 1 a failure talking to Kafka or reading input, \
                  2 bad arguments."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Send records read from stdin or a file
    ///
    /// Sends one record per delimited piece of stdin (or of --file).
    Produce(produce::ProduceArgs),
    /// Print records of a partition or a whole topic, or as a group member (-G)
    ///
    /// Prints records of a whole topic, or of the partitions given with -p; with -G,
    /// joins GROUP as a balanced consumer (kcat's -G) and prints what the group assigns
    /// it.
    Consume(consume::ConsumeArgs),
    /// List, create, describe, delete topics or add partitions
    #[command(subcommand)]
    Topics(topics::TopicsCommand),
    /// The cluster id, controller, brokers, features and API versions
    Cluster(cluster::ClusterCommandArgs),
    /// Describe or alter topic and broker configs
    #[command(subcommand)]
    Configs(configs::ConfigsCommand),
    /// Delete records, list offsets
    #[command(subcommand)]
    Records(records::RecordsCommand),
    /// List, describe (with lag), delete consumer groups, reset their offsets
    #[command(
        subcommand,
        after_help = "A group's offsets can be reset or deleted only while it has no members."
    )]
    Groups(groups::GroupsCommand),
    /// List, create or delete ACLs
    #[command(subcommand)]
    Acls(acls::AclsCommand),
    /// SCRAM credentials of users (users scram list|set|delete)
    #[command(subcommand)]
    Users(users::UsersCommand),
    /// List or alter client quotas
    #[command(subcommand)]
    Quotas(quotas::QuotasCommand),
    /// Measure producer or consumer throughput (perf produce, perf consume)
    #[command(subcommand, after_help = perf::REPORT)]
    Perf(perf::PerfCommand),
    /// A round trip of raw protocol requests against one broker
    Check(check::CheckArgs),
    /// Print a shell completion script
    ///
    /// For example `kring completions bash > ~/.local/share/bash-completion/completions/kring`,
    /// or `kring completions zsh > "${fpath[1]}/_kring"`.
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the version (as --version)
    #[command(hide = true)]
    Version,
}

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
    let matches = match parser().try_get_matches() {
        Ok(m) => m,
        // Usage errors exit 2; --help and --version print and exit 0.
        Err(e) => e.exit(),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(e)) => usage_error(&matches, e),
        Err(e) => {
            eprintln!("kring: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command.
fn run(command: Command) -> CliResult {
    match command {
        Command::Produce(a) => produce::run(a),
        Command::Consume(a) => {
            let view = a.metrics.start()?;
            let result = consume::run(a);
            if let Some(view) = view {
                view.finish();
            }
            result
        }
        Command::Topics(c) => topics::run(c),
        Command::Cluster(a) => cluster::run(a),
        Command::Configs(c) => configs::run(c),
        Command::Records(c) => records::run(c),
        Command::Groups(c) => groups::run(c),
        Command::Acls(c) => acls::run(c),
        Command::Users(c) => users::run(c),
        Command::Quotas(c) => quotas::run(c),
        Command::Perf(c) => perf::run(c),
        Command::Check(a) => check::run(a),
        Command::Completions { shell } => completions(shell),
        Command::Version => {
            println!("kring {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    }
}

/// Prints a check of meaning that failed after clap parsed the arguments the way clap
/// prints its own errors (one line, then the usage of the command that was run); exit 2.
fn usage_error(matches: &clap::ArgMatches, e: UsageError) -> ExitCode {
    let mut command = Cli::command();
    command.build();
    let mut at = matches;
    while let Some((name, sub)) = at.subcommand() {
        match command.find_subcommand(name) {
            Some(c) => command = c.clone(),
            None => break,
        }
        at = sub;
    }
    let _ = command
        .error(clap::error::ErrorKind::ValueValidation, e)
        .print();
    ExitCode::from(2)
}

/// The command line as parsed: [`Cli`] with its help wrapped and its flags repeatable.
fn parser() -> clap::Command {
    repeatable_flags(wrap_help(Cli::command()))
}

/// A flag given twice (`-e -e`, `--json --json`) is the flag given once, as it was with
/// the hand-written parser before clap; an option with one value given twice is still
/// refused.
fn repeatable_flags(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut command = command.mut_args(|arg| {
        if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            let id = arg.get_id().clone();
            arg.overrides_with(id)
        } else {
            arg
        }
    });
    for name in names {
        command = command.mut_subcommand(name, repeatable_flags);
    }
    command
}

/// Help texts wrapped to fit an 80-column terminal: clap is built without `wrap_help`
/// (which would pull in a terminal-size crate), so it prints each help text as one
/// line. Each option's help goes below its name (in commands without subcommands),
/// wrapped to 70 columns; line breaks
/// already in a text (the tables of `consume --offset`) are kept.
fn wrap_help(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut command = command;
    if command.get_subcommands().next().is_none() {
        command = command.next_line_help(true);
    }
    if let Some(about) = command.get_long_about().map(|h| wrap(&h.to_string(), 80)) {
        command = command.long_about(about);
    }
    if let Some(after) = command.get_after_help().map(|h| wrap(&h.to_string(), 80)) {
        command = command.after_help(after);
    }
    if let Some(after) = command
        .get_after_long_help()
        .map(|h| wrap(&h.to_string(), 80))
    {
        command = command.after_long_help(after);
    }
    command = command.mut_args(|mut arg| {
        if let Some(help) = arg.get_help().map(|h| wrap(&h.to_string(), HELP_WIDTH)) {
            arg = arg.help(help);
        }
        if let Some(long) = arg
            .get_long_help()
            .map(|h| wrap(&h.to_string(), HELP_WIDTH))
        {
            arg = arg.long_help(long);
        }
        arg
    });
    for name in names {
        command = command.mut_subcommand(name, wrap_help);
    }
    command
}

/// Columns of help text: 80 less the ten clap indents it by in `--help`.
const HELP_WIDTH: usize = 70;

/// `text` with each of its lines longer than `width` characters broken at spaces (a
/// longer word stays whole); a continuation keeps the line's leading indent.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width);
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut column = 0;
        for (j, word) in line.split_whitespace().enumerate() {
            let len = word.chars().count();
            if j == 0 {
                out.push_str(indent);
                column = indent.len();
            } else if column + 1 + len > width {
                out.push('\n');
                out.push_str(indent);
                column = indent.len();
            } else {
                out.push(' ');
                column += 1;
            }
            out.push_str(word);
            column += len;
        }
    }
    out
}

/// `kring completions SHELL`: the script on stdout. It is rendered first (the generator
/// panics on a failed write); a reader that stops early (`| head`) is not an error.
fn completions(shell: clap_complete::Shell) -> CliResult {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kring", &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::io("writing the completion script", e))
        }
        _ => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        // clap's own checks: no two options with one name or short flag, defaults
        // that parse, and the like, in every command and subcommand.
        Cli::command().debug_assert();
        parser().debug_assert();
    }

    #[test]
    fn flags_may_repeat_but_single_values_may_not() {
        let parse = |args: &[&str]| parser().try_get_matches_from(args);
        assert!(parse(&["kring", "consume", "-t", "x", "-e", "-e", "--exit"]).is_ok());
        assert!(parse(&["kring", "topics", "list", "--json", "--json"]).is_ok());
        let twice = parse(&["kring", "consume", "-t", "x", "-c", "1", "-c", "2"]);
        assert_eq!(
            twice.map(|_| ()).map_err(|e| e.kind()),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
        assert!(parse(&["kring", "consume", "-t", "x", "-t", "y"]).is_ok());
    }

    #[test]
    fn help_is_wrapped_keeping_line_breaks_and_indents() {
        assert_eq!(wrap("short line\n  kept", 20), "short line\n  kept");
        assert_eq!(
            wrap("one two three four five", 9),
            "one two\nthree\nfour five"
        );
        assert_eq!(wrap("  aaa bbb ccc", 9), "  aaa bbb\n  ccc");
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            "averyveryverylongword\nx"
        );
    }
}
