//! What the subcommands share on the command line: the cluster options every command
//! that talks to Kafka flattens into its clap arguments ([`ClusterArgs`]: `-b`, `-X`,
//! `-F`), turned into a checked [`ClusterOptions`]; the [`UsageError`] of a check clap
//! cannot make itself (exit code 2, printed with the command's usage); and small value
//! helpers (C-style escapes, parsing a value that is part of a larger one).
//!
//! clap parses and rejects (unknown or misspelt options, missing values, bad numbers);
//! what is left here are checks of meaning, such as a `-X` property the client does not
//! know.

use std::str::FromStr;

use kring::Config;

/// A usage error: printed with the command's usage, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub fn new(message: impl Into<String>) -> Self {
        UsageError(message.into())
    }
}

/// Parses `value` of option `name`, naming both on failure.
pub fn parse_value<T: FromStr>(name: &str, value: &str) -> Result<T, UsageError>
where
    T::Err: std::fmt::Display,
{
    value
        .parse()
        .map_err(|e| UsageError::new(format!("{name} {value:?}: {e}")))
}

/// The `NAME=VALUE` lines of a properties file, with their line numbers (blank lines and
/// `#` or `!` comments skipped).
fn properties_file(path: &str) -> Result<Vec<(usize, String)>, UsageError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| UsageError::new(format!("-F {path}: {e}")))?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .collect())
}

/// Applies one `NAME=VALUE`; errors name the property and where it came from, never
/// the value itself (it may be a password).
fn apply_property(
    config: &mut Config,
    given: &mut Vec<String>,
    property: &str,
    origin: &str,
) -> Result<(), UsageError> {
    let (name, value) = property
        .split_once('=')
        .ok_or_else(|| UsageError::new(format!("{origin}: expected NAME=VALUE")))?;
    let name = name.trim();
    config
        .set(name, value.trim())
        .map_err(|e| UsageError::new(format!("{origin} {name}: {e}")))?;
    given.push(name.to_string());
    Ok(())
}

/// [`ClusterArgs`] checked: the client's configuration, and which properties were given.
#[derive(Debug)]
pub struct ClusterOptions {
    pub config: Config,
    /// Property names given with `-X`.
    given: Vec<String>,
}

/// The options of every command that talks to a cluster (flattened into its arguments).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "CLUSTER options")]
pub struct ClusterArgs {
    /// Brokers to start from [default: $KRING_BOOTSTRAP, or 127.0.0.1:9092]
    #[arg(
        short = 'b',
        long = "bootstrap",
        alias = "broker",
        value_name = "HOST:PORT[,...]"
    )]
    pub bootstrap: Option<String>,
    /// A client property, Java or librdkafka name (repeatable), e.g. -X linger.ms=20
    /// -X security.protocol=SASL_SSL
    #[arg(short = 'X', long = "property", value_name = "NAME=VALUE")]
    pub properties: Vec<String>,
    /// Client properties from a file (NAME=VALUE lines, # comments), read before -X
    /// (repeatable)
    #[arg(short = 'F', long = "properties-file", value_name = "FILE")]
    pub properties_files: Vec<String>,
}

impl ClusterArgs {
    /// Checks the bootstrap servers and applies `-F` files, then `-X` properties.
    pub fn options(self) -> Result<ClusterOptions, UsageError> {
        let bootstrap = match self.bootstrap {
            Some(b) => b,
            None => std::env::var("KRING_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into()),
        };
        let servers: Vec<String> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        for s in &servers {
            if s.rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(UsageError::new(format!(
                    "--bootstrap: {s:?} is not HOST:PORT"
                )));
            }
        }
        if servers.is_empty() {
            return Err(UsageError::new("--bootstrap: no HOST:PORT given"));
        }
        let mut config = Config::new(servers);
        config.client_id = "kring-cli".into();
        let mut given = Vec::new();
        for file in &self.properties_files {
            for (line, property) in properties_file(file)? {
                let origin = format!("{file}:{line}");
                apply_property(&mut config, &mut given, &property, &origin)?;
            }
        }
        for property in &self.properties {
            apply_property(&mut config, &mut given, property, "-X")?;
        }
        Ok(ClusterOptions { config, given })
    }
}

impl ClusterOptions {
    /// Sets producer properties given by their own options (`--acks 1`); like the Java
    /// producer, acks other than `all` turn idempotence off unless it was asked for.
    /// Whether the property `name` was given with `-X`.
    pub fn was_given(&self, name: &str) -> bool {
        self.given.iter().any(|g| g == name)
    }

    pub fn set_producer(&mut self, settings: &[(&str, Option<String>)]) -> Result<(), UsageError> {
        let mut idempotence_given = self.given.iter().any(|g| g == "enable.idempotence");
        for (name, value) in settings {
            if let Some(v) = value {
                self.config
                    .set(name, v)
                    .map_err(|e| UsageError::new(format!("{name}={v}: {e}")))?;
                idempotence_given |= *name == "enable.idempotence";
            }
        }
        if !idempotence_given && self.config.producer.acks != kring::config::Acks::All {
            self.config.producer.enable_idempotence = false;
        }
        Ok(())
    }
}

/// Undoes C-style escapes in a delimiter or separator: `\n`, `\r`, `\t`, `\0`, `\\`
/// and `\xNN`.
pub fn unescape(name: &str, text: &str) -> Result<Vec<u8>, UsageError> {
    let bad = |why: &str| UsageError::new(format!("{name} {text:?}: {why}"));
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b't') => out.push(b'\t'),
            Some(b'0') => out.push(0),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let digits = std::str::from_utf8(&hex).map_err(|_| bad("bad \\x escape"))?;
                if digits.len() != 2 {
                    return Err(bad("\\x needs two hex digits"));
                }
                out.push(u8::from_str_radix(digits, 16).map_err(|_| bad("bad \\x escape"))?);
            }
            Some(other) => return Err(bad(&format!("unknown escape \\{}", other as char))),
            None => return Err(bad("ends in a lone backslash")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(bootstrap: &str, properties: &[&str]) -> Result<ClusterOptions, UsageError> {
        ClusterArgs {
            bootstrap: Some(bootstrap.into()),
            properties: properties.iter().map(|p| p.to_string()).collect(),
            properties_files: Vec::new(),
        }
        .options()
    }

    #[test]
    fn cluster_options_check_bootstrap_and_properties() {
        let o = cluster("h1:9092,h2:9093", &["linger.ms=20"]).unwrap();
        assert_eq!(o.config.bootstrap_servers, vec!["h1:9092", "h2:9093"]);
        assert_eq!(o.config.producer.linger.as_millis(), 20);
        assert!(cluster("nohost", &[]).is_err());
        assert!(cluster("h:99999", &[]).is_err());
        assert!(cluster(",", &[]).is_err());
        assert!(cluster("h:1", &["linger.ms"]).is_err());
        assert!(cluster("h:1", &["no.such.property=1"]).is_err());
        assert!(cluster("h:1", &["linger.ms=soon"]).is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("-D", "\\n").unwrap(), b"\n");
        assert_eq!(unescape("-D", "a\\tb\\x00\\\\").unwrap(), b"a\tb\0\\");
        assert_eq!(unescape("-D", "::").unwrap(), b"::");
        assert!(unescape("-D", "\\q").is_err());
        assert!(unescape("-D", "\\x4").is_err());
        assert!(unescape("-D", "\\xzz").is_err());
        assert!(unescape("-D", "\\").is_err());
    }
}
