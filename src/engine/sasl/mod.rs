//! SASL authentication (KIP-43, KIP-152), sans-IO: the mechanisms' client side as state
//! machines over the bytes each SaslAuthenticate round carries. The connection engine
//! runs the exchange between the ApiVersions handshake and `Ready` (and again for a
//! KIP-368 re-authentication); this module knows only the mechanisms:
//!
//! - PLAIN (RFC 4616): one message, `authzid NUL user NUL password`.
//! - SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802/7677, [`scram`]): two rounds, the broker's
//!   signature verified.
//! - OAUTHBEARER (RFC 7628, KIP-255): one message with a bearer token the application
//!   supplies; a failed token gets the broker's JSON error, answered with `0x01` so the
//!   broker ends the exchange with its error code.
//!
//! Secrets travel as [`Secret`], whose `Debug` and `Display` never show the value.

mod base64;
pub mod scram;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use base64::encode_url_safe as base64_url_encode;
use scram::{Scram, ScramHash};

/// A password, key or token: kept out of `Debug`, `Display` and error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that must send or use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A SASL mechanism kring speaks (`sasl.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN: user name and password in the clear (use it over TLS).
    Plain,
    /// SCRAM-SHA-256.
    ScramSha256,
    /// SCRAM-SHA-512.
    ScramSha512,
    /// OAUTHBEARER: a bearer token (KIP-255).
    OAuthBearer,
}

impl SaslMechanism {
    /// The name on the wire and in `sasl.mechanism`.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Parses a `sasl.mechanism` value; the error says why a name is refused.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "GSSAPI" => Err(
                "GSSAPI (Kerberos) is not supported by kring; use SCRAM-SHA-512, \
                 OAUTHBEARER or PLAIN over TLS"
                    .into(),
            ),
            other => Err(format!(
                "unknown SASL mechanism {other:?} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"
            )),
        }
    }

    /// Whether the mechanism authenticates with a user name and password.
    pub fn uses_password(self) -> bool {
        !matches!(self, SaslMechanism::OAuthBearer)
    }
}

/// What one exchange authenticates with, resolved for this connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslCredentials {
    /// PLAIN and SCRAM.
    Password {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// OAUTHBEARER.
    Token {
        /// The compact-serialised token.
        token: Secret,
        /// SASL extensions (KIP-342), sent as `key=value` pairs.
        extensions: Vec<(String, String)>,
    },
}

/// A bearer token from the application's [`TokenProvider`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthToken {
    /// The compact-serialised token (a JWT, usually).
    pub value: Secret,
    /// How long it stays valid from when it was obtained; kring asks for a new one
    /// after 80% of it (as the Java client's refresh window).
    pub lifetime: Duration,
    /// SASL extensions (KIP-342) to send with it.
    pub extensions: Vec<(String, String)>,
}

/// Where OAUTHBEARER tokens come from: the application's identity provider client.
/// Called when a connection authenticates and the cached token is near its end, and
/// for KIP-368 re-authentication. An error fails that connection attempt with
/// the provider's message (it is retried with the connection's backoff).
pub trait TokenProvider: Send + Sync + 'static {
    /// Obtains a token.
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send + '_>>;
}

/// Where a connection's SASL credentials come from.
#[derive(Clone)]
pub enum CredentialSource {
    /// PLAIN and SCRAM: fixed credentials.
    Password {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// OAUTHBEARER: tokens obtained from a provider.
    Tokens(Arc<dyn TokenProvider>),
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Password { username, .. } => f
                .debug_struct("Password")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            CredentialSource::Tokens(_) => f.write_str("Tokens(<provider>)"),
        }
    }
}

/// A connection's SASL settings.
#[derive(Debug, Clone)]
pub struct SaslSetup {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// Its credentials.
    pub source: CredentialSource,
}

impl SaslSetup {
    /// The credentials when they need no provider.
    pub fn static_credentials(&self) -> Option<SaslCredentials> {
        match &self.source {
            CredentialSource::Password { username, password } => Some(SaslCredentials::Password {
                username: username.clone(),
                password: password.clone(),
            }),
            CredentialSource::Tokens(_) => None,
        }
    }
}

/// A failed SASL exchange. Not retriable: the same credentials fail again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// The broker refused the credentials (or the mechanism).
    #[error("{mechanism} authentication failed: {reason}")]
    Rejected {
        /// The mechanism.
        mechanism: &'static str,
        /// The broker's message, or what it said.
        reason: String,
    },
    /// The broker broke the mechanism's protocol (or failed to prove itself, SCRAM).
    #[error("{mechanism} exchange failed: {reason}")]
    Protocol {
        /// The mechanism.
        mechanism: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The credentials do not suit the mechanism.
    #[error("{mechanism} needs {needs}")]
    Credentials {
        /// The mechanism.
        mechanism: &'static str,
        /// What it needs.
        needs: &'static str,
    },
}

/// What to do after a broker message.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes in another SaslAuthenticate request.
    Reply(Vec<u8>),
    /// Authenticated.
    Done,
}

enum Exchange {
    /// PLAIN and OAUTHBEARER before the broker's answer.
    OneShot,
    /// OAUTHBEARER after the broker's error challenge: the `0x01` was sent, the broker's
    /// error code follows.
    OAuthFailed(String),
    Scram(Scram),
    Done,
}

/// One client-side SASL exchange.
pub struct SaslExchange {
    mechanism: SaslMechanism,
    exchange: Exchange,
}

impl std::fmt::Debug for SaslExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslExchange")
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

impl SaslExchange {
    /// Starts an exchange; returns it with the first message for SaslAuthenticate.
    /// `nonce` is SCRAM's client nonce (printable, no `,`), drawn by the caller.
    pub fn start(
        mechanism: SaslMechanism,
        credentials: &SaslCredentials,
        nonce: String,
    ) -> Result<(Self, Vec<u8>), SaslError> {
        let needs = |needs| SaslError::Credentials {
            mechanism: mechanism.name(),
            needs,
        };
        let (exchange, first) = match (mechanism, credentials) {
            (SaslMechanism::Plain, SaslCredentials::Password { username, password }) => {
                let mut m = Vec::with_capacity(username.len() + password.expose().len() + 2);
                m.push(0);
                m.extend_from_slice(username.as_bytes());
                m.push(0);
                m.extend_from_slice(password.expose().as_bytes());
                (Exchange::OneShot, m)
            }
            (
                SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512,
                SaslCredentials::Password { username, password },
            ) => {
                let hash = if mechanism == SaslMechanism::ScramSha256 {
                    ScramHash::Sha256
                } else {
                    ScramHash::Sha512
                };
                let (scram, first) = Scram::start(hash, username, password.clone(), nonce);
                (Exchange::Scram(scram), first)
            }
            (SaslMechanism::OAuthBearer, SaslCredentials::Token { token, extensions }) => {
                (Exchange::OneShot, oauth_initial(token, extensions))
            }
            (SaslMechanism::OAuthBearer, _) => return Err(needs("a token")),
            (_, _) => return Err(needs("a user name and password")),
        };
        Ok((
            SaslExchange {
                mechanism,
                exchange,
            },
            first,
        ))
    }

    /// The broker accepted the last message and sent `server` back.
    pub fn step(&mut self, server: &[u8]) -> Result<Step, SaslError> {
        let name = self.mechanism.name();
        match std::mem::replace(&mut self.exchange, Exchange::Done) {
            Exchange::OneShot if server.is_empty() => Ok(Step::Done),
            Exchange::OneShot if self.mechanism == SaslMechanism::OAuthBearer => {
                // RFC 7628 3.2.2: an error challenge; the client answers with a lone
                // 0x01 and the broker fails the exchange with its code.
                self.exchange = Exchange::OAuthFailed(String::from_utf8_lossy(server).into());
                Ok(Step::Reply(vec![0x01]))
            }
            Exchange::OneShot => Err(SaslError::Protocol {
                mechanism: name,
                reason: format!("unexpected {} bytes from the broker", server.len()),
            }),
            Exchange::OAuthFailed(challenge) => Err(SaslError::Rejected {
                mechanism: name,
                reason: format!("the broker accepted after refusing the token ({challenge})"),
            }),
            Exchange::Scram(mut scram) => match scram.step(server)? {
                Some(reply) => {
                    self.exchange = Exchange::Scram(scram);
                    Ok(Step::Reply(reply))
                }
                None => Ok(Step::Done),
            },
            Exchange::Done => Err(SaslError::Protocol {
                mechanism: name,
                reason: "the broker sent more after the exchange ended".into(),
            }),
        }
    }

    /// The broker failed the exchange with `message`: the error to report, with the
    /// OAUTHBEARER challenge if there was one.
    pub fn rejected(&self, message: &str) -> SaslError {
        let reason = match &self.exchange {
            Exchange::OAuthFailed(challenge) if !message.contains(challenge.as_str()) => {
                format!("{message} ({challenge})")
            }
            _ => message.to_string(),
        };
        SaslError::Rejected {
            mechanism: self.mechanism.name(),
            reason,
        }
    }
}

/// RFC 7628's initial client response: `n,,^Aauth=Bearer <token>^A[key=value^A...]^A`.
fn oauth_initial(token: &Secret, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {}\x01", token.expose());
    for (k, v) in extensions {
        m.push_str(k);
        m.push('=');
        m.push_str(v);
        m.push('\x01');
    }
    m.push('\x01');
    m.into_bytes()
}

/// An unsecured JWT (`alg: none`) for brokers running Kafka's unsecured OAUTHBEARER
/// validator (tests and development only): `sub` = `principal`, issued at `now_ms`,
/// expiring `lifetime_ms` later, with an optional `scope`.
pub fn unsecured_jwt(principal: &str, now_ms: u64, lifetime_ms: u64, scope: &[String]) -> String {
    let header = base64_url_encode(br#"{"alg":"none"}"#);
    let mut claims = format!(
        r#"{{"sub":{},"iat":{},"exp":{}"#,
        json_string(principal),
        now_ms as f64 / 1000.0,
        (now_ms + lifetime_ms) as f64 / 1000.0
    );
    if !scope.is_empty() {
        let list: Vec<String> = scope.iter().map(|s| json_string(s)).collect();
        claims.push_str(&format!(r#","scope":[{}]"#, list.join(",")));
    }
    claims.push('}');
    format!("{header}.{}.", base64_url_encode(claims.as_bytes()))
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(user: &str, pass: &str) -> SaslCredentials {
        SaslCredentials::Password {
            username: user.into(),
            password: Secret::new(pass),
        }
    }

    #[test]
    fn plain_sends_one_message_and_is_done_on_an_empty_answer() {
        let (mut x, first) =
            SaslExchange::start(SaslMechanism::Plain, &password("u", "p"), String::new()).unwrap();
        assert_eq!(first, b"\0u\0p");
        assert_eq!(x.step(b"").unwrap(), Step::Done);
        assert!(x.step(b"").is_err());
    }

    #[test]
    fn oauth_sends_the_token_and_answers_an_error_challenge() {
        let token = SaslCredentials::Token {
            token: Secret::new("t0k"),
            extensions: vec![("traceId".into(), "42".into())],
        };
        let (mut x, first) =
            SaslExchange::start(SaslMechanism::OAuthBearer, &token, String::new()).unwrap();
        assert_eq!(first, b"n,,\x01auth=Bearer t0k\x01traceId=42\x01\x01");
        assert_eq!(
            x.step(br#"{"status":"invalid_token"}"#).unwrap(),
            Step::Reply(vec![1])
        );
        let err = x.rejected("Authentication failed").to_string();
        assert!(err.contains("invalid_token"), "{err}");
    }

    #[test]
    fn credentials_must_suit_the_mechanism() {
        let token = SaslCredentials::Token {
            token: Secret::new("t"),
            extensions: vec![],
        };
        assert!(SaslExchange::start(SaslMechanism::ScramSha512, &token, "n".into()).is_err());
        assert!(
            SaslExchange::start(SaslMechanism::OAuthBearer, &password("u", "p"), "n".into())
                .is_err()
        );
    }

    #[test]
    fn secrets_never_show() {
        let c = password("alice", "hunter2");
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(Secret::new("hunter2").to_string(), "<redacted>");
    }

    #[test]
    fn mechanism_names_parse_and_gssapi_is_refused_clearly() {
        assert_eq!(
            SaslMechanism::parse("scram-sha-512"),
            Ok(SaslMechanism::ScramSha512)
        );
        assert!(
            SaslMechanism::parse("GSSAPI")
                .unwrap_err()
                .contains("not supported")
        );
        assert!(SaslMechanism::parse("MD5").unwrap_err().contains("unknown"));
    }

    #[test]
    fn unsecured_jwts_carry_the_principal_and_expiry() {
        let jwt = unsecured_jwt("alice", 1_000_000, 60_000, &["read".into()]);
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(parts[0], "eyJhbGciOiJub25lIn0");
    }
}
