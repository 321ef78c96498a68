//! Command-line arguments: a small parser shared by every subcommand, and the options
//! they have in common (bootstrap servers, `-X` client properties).
//!
//! Options are taken out of the list by name, in any order (`--name value`,
//! `--name=value`, or a short `-n value`); whatever is left at the end is an error, so a
//! misspelt option is never silently ignored.

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

/// The arguments of one subcommand, consumed option by option.
#[derive(Debug)]
pub struct Args {
    items: Vec<Option<String>>,
}

impl Args {
    pub fn new(items: impl IntoIterator<Item = String>) -> Self {
        Args {
            items: items.into_iter().map(Some).collect(),
        }
    }

    /// Whether a bare flag (`--keep-topic`) is present; takes every occurrence.
    pub fn flag(&mut self, names: &[&str]) -> bool {
        let mut found = false;
        for item in &mut self.items {
            if item.as_deref().is_some_and(|a| names.contains(&a)) {
                *item = None;
                found = true;
            }
        }
        found
    }

    /// Every value of a repeatable option (`-H k=v -H k2=v2`), in order.
    pub fn values(&mut self, names: &[&str]) -> Result<Vec<String>, UsageError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.items.len() {
            let Some(arg) = self.items[i].clone() else {
                i += 1;
                continue;
            };
            if let Some(name) = names.iter().find(|n| arg == **n) {
                self.items[i] = None;
                match self.items.get_mut(i + 1).and_then(Option::take) {
                    Some(v) => out.push(v),
                    None => return Err(UsageError::new(format!("{name} needs a value"))),
                }
                i += 2;
                continue;
            }
            if let Some(v) = names.iter().find_map(|n| {
                n.starts_with("--")
                    .then(|| arg.strip_prefix(n)?.strip_prefix('='))
                    .flatten()
            }) {
                out.push(v.to_string());
                self.items[i] = None;
            }
            i += 1;
        }
        Ok(out)
    }

    /// The value of an option given at most once.
    pub fn value(&mut self, names: &[&str]) -> Result<Option<String>, UsageError> {
        let mut all = self.values(names)?;
        match all.len() {
            0 => Ok(None),
            1 => Ok(all.pop()),
            _ => Err(UsageError::new(format!("{} given twice", names[0]))),
        }
    }

    /// The value of an option, parsed.
    pub fn parsed<T: FromStr>(&mut self, names: &[&str]) -> Result<Option<T>, UsageError>
    where
        T::Err: std::fmt::Display,
    {
        self.value(names)?
            .map(|v| parse_value(names[0], &v))
            .transpose()
    }

    /// The next positional argument (one not starting with `-`, or `-` itself).
    pub fn positional(&mut self) -> Option<String> {
        let slot = self.items.iter_mut().find(|i| {
            i.as_deref()
                .is_some_and(|a| a == "-" || !a.starts_with('-'))
        })?;
        slot.take()
    }

    /// Fails on any argument nobody took.
    pub fn finish(self) -> Result<(), UsageError> {
        match self.items.into_iter().flatten().next() {
            None => Ok(()),
            Some(a) if a.starts_with('-') => Err(UsageError::new(format!("unknown option {a:?}"))),
            Some(a) => Err(UsageError::new(format!("unexpected argument {a:?}"))),
        }
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

/// Options every command that talks to a cluster takes.
#[derive(Debug)]
pub struct ClusterOptions {
    pub config: Config,
    /// Property names given with `-X`.
    given: Vec<String>,
}

/// The usage lines of [`ClusterOptions`], for `concat!` into each command's usage.
macro_rules! cluster_usage {
    () => {
        "  -b, --bootstrap HOST:PORT[,...]  brokers to start from (default $KRING_BOOTSTRAP or 127.0.0.1:9092)
  -X NAME=VALUE                    a client property, Java or librdkafka name (repeatable),
                                   e.g. -X linger.ms=20 -X security.protocol=SASL_SSL
  -F FILE                          client properties from a file (NAME=VALUE lines, # comments),
                                   read before -X"
    };
}
pub(crate) use cluster_usage;

impl ClusterOptions {
    /// Takes `--bootstrap` and every `-X name=value` out of `args`.
    pub fn take(args: &mut Args) -> Result<Self, UsageError> {
        let bootstrap = match args.value(&["--bootstrap", "-b", "--broker"])? {
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
        for file in args.values(&["-F", "--properties-file"])? {
            for (line, property) in properties_file(&file)? {
                let origin = format!("{file}:{line}");
                apply_property(&mut config, &mut given, &property, &origin)?;
            }
        }
        for property in args.values(&["-X", "--property"])? {
            apply_property(&mut config, &mut given, &property, "-X")?;
        }
        Ok(ClusterOptions { config, given })
    }

    /// Sets producer properties given by their own options (`--acks 1`); like the Java
    /// producer, acks other than `all` turn idempotence off unless it was asked for.
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

    fn args(list: &[&str]) -> Args {
        Args::new(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn options_come_out_in_any_order_and_leftovers_fail() {
        let mut a = args(&["topic1", "-H", "a=1", "--count=5", "-H", "b=2", "--exit"]);
        assert_eq!(a.values(&["-H"]).unwrap(), vec!["a=1", "b=2"]);
        assert_eq!(a.parsed::<u64>(&["--count", "-c"]).unwrap(), Some(5));
        assert!(a.flag(&["--exit", "-e"]));
        assert_eq!(a.positional().as_deref(), Some("topic1"));
        a.finish().unwrap();

        let mut a = args(&["--count", "x"]);
        let e = a.parsed::<u64>(&["--count"]).unwrap_err();
        assert!(e.0.contains("--count \"x\""), "{e}");
        assert!(args(&["--count"]).value(&["--count"]).is_err());
        assert!(args(&["-c", "1", "-c", "2"]).value(&["-c"]).is_err());
        let e = args(&["--frobnicate"]).finish().unwrap_err();
        assert!(e.0.contains("unknown option"), "{e}");
        assert!(args(&["stray"]).finish().is_err());
    }

    #[test]
    fn cluster_options_check_bootstrap_and_properties() {
        let mut a = args(&["-b", "h1:9092,h2:9093", "-X", "linger.ms=20"]);
        let o = ClusterOptions::take(&mut a).unwrap();
        assert_eq!(o.config.bootstrap_servers, vec!["h1:9092", "h2:9093"]);
        assert_eq!(o.config.producer.linger.as_millis(), 20);
        assert!(ClusterOptions::take(&mut args(&["-b", "nohost"])).is_err());
        assert!(ClusterOptions::take(&mut args(&["-b", "h:99999"])).is_err());
        assert!(ClusterOptions::take(&mut args(&["-X", "linger.ms"])).is_err());
        assert!(ClusterOptions::take(&mut args(&["-X", "no.such.property=1"])).is_err());
        assert!(ClusterOptions::take(&mut args(&["-X", "linger.ms=soon"])).is_err());
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
