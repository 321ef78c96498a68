//! Security settings: `security.protocol`, TLS (`ssl.*`) and SASL (`sasl.*`), by the
//! Java client's and librdkafka's names, with Java's `sasl.jaas.config` login modules
//! (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule's unsecured mode) parsed.
//! Secrets are [`Secret`]s: never in `Debug` output, logs or errors.
//!
//! What is refused, with a message saying what to do instead: JKS and PKCS#12 stores
//! and their passwords (use PEM), private keys in encryption formats other than
//! PKCS#8's PBES2 (`ssl.key.password` decrypts those), GSSAPI, and TLS or SASL settings
//! under a `security.protocol` that does not use them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ConfigurationError;
pub use crate::engine::sasl::{OAuthToken, SaslMechanism, Secret, TokenProvider, unsecured_jwt};

/// `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// No TLS, no SASL.
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL without TLS.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections use TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }
}

/// PEM data: a file to read when the client starts, or the text itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    /// A PEM file.
    File(PathBuf),
    /// PEM text (Java's `ssl.truststore.certificates`, `ssl.keystore.key`, ...).
    Text(Secret),
}

/// TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsConfig {
    /// CA certificates that may sign the brokers' certificates (`ssl.ca.location`,
    /// `ssl.truststore.location` with type PEM, `ssl.truststore.certificates`); none:
    /// Mozilla's roots (the `webpki-roots` crate), as for a managed cluster with a
    /// public CA.
    pub ca: Option<PemSource>,
    /// The client certificate chain for mutual TLS (`ssl.certificate.location`,
    /// `ssl.keystore.certificate.chain`, or a PEM `ssl.keystore.location`).
    pub certificate: Option<PemSource>,
    /// The client certificate's private key, PKCS#8, PKCS#1 or SEC1 PEM
    /// (`ssl.key.location`, `ssl.keystore.key`, or a PEM `ssl.keystore.location`).
    pub key: Option<PemSource>,
    /// The password of an encrypted PKCS#8 `key` (`ssl.key.password`; PBES2: PBKDF2 or
    /// scrypt with AES-CBC). Set for a key that is not encrypted, it is refused.
    pub key_password: Option<Secret>,
    /// Check that the broker's certificate covers the host connected to
    /// (`ssl.endpoint.identification.algorithm`: `https`, the default, or empty).
    pub verify_hostname: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            ca: None,
            certificate: None,
            key: None,
            key_password: None,
            verify_hostname: true,
        }
    }
}

impl TlsConfig {
    fn is_set(&self) -> bool {
        self.ca.is_some()
            || self.certificate.is_some()
            || self.key.is_some()
            || self.key_password.is_some()
    }
}

/// An OAUTHBEARER token provider as a setting (compared by identity).
#[derive(Clone)]
pub struct TokenProviderHandle(pub Arc<dyn TokenProvider>);

impl std::fmt::Debug for TokenProviderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenProvider(..)")
    }
}

impl PartialEq for TokenProviderHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Unsecured JWTs (`alg: none`) for a broker running Kafka's unsecured OAUTHBEARER
/// validator: tests and development only (Java's OAuthBearerLoginModule with
/// `unsecuredLoginStringClaim_sub`, librdkafka's `enable.sasl.oauthbearer.unsecure.jwt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredJwt {
    /// The `sub` claim.
    pub principal: String,
    /// Token lifetime (`unsecuredLoginLifetimeSeconds`, 1 h).
    pub lifetime: Duration,
    /// The `scope` claim.
    pub scope: Vec<String>,
    /// SASL extensions (`unsecuredLoginExtension_NAME`).
    pub extensions: Vec<(String, String)>,
}

impl TokenProvider for UnsecuredJwt {
    fn token(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send + '_>> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let token = unsecured_jwt(
            &self.principal,
            now_ms,
            self.lifetime.as_millis() as u64,
            &self.scope,
        );
        let token = OAuthToken {
            value: Secret::new(token),
            lifetime: self.lifetime,
            extensions: self.extensions.clone(),
        };
        Box::pin(std::future::ready(Ok(token)))
    }
}

/// SASL settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SaslConfig {
    /// The mechanism (`sasl.mechanism`, librdkafka's `sasl.mechanisms`; GSSAPI is
    /// refused). Default PLAIN, as both reference clients (GSSAPI aside).
    pub mechanism: SaslMechanism,
    /// PLAIN and SCRAM user (`sasl.username`, or `username` in `sasl.jaas.config`).
    pub username: Option<String>,
    /// PLAIN and SCRAM password (`sasl.password`, or `password` in `sasl.jaas.config`).
    pub password: Option<Secret>,
    /// OAUTHBEARER tokens from the application (set in code: [`SaslConfig::token_provider`]).
    pub token_provider: Option<TokenProviderHandle>,
    /// OAUTHBEARER with unsecured JWTs (tests only).
    pub unsecured_jwt: Option<UnsecuredJwt>,
}

impl Default for SaslConfig {
    fn default() -> Self {
        SaslConfig {
            mechanism: SaslMechanism::Plain,
            username: None,
            password: None,
            token_provider: None,
            unsecured_jwt: None,
        }
    }
}

impl SaslConfig {
    /// Sets the OAUTHBEARER token provider.
    pub fn token_provider(&mut self, provider: impl TokenProvider) -> &mut Self {
        self.token_provider = Some(TokenProviderHandle(Arc::new(provider)));
        self
    }

    fn is_set(&self) -> bool {
        self.username.is_some()
            || self.password.is_some()
            || self.token_provider.is_some()
            || self.unsecured_jwt.is_some()
    }
}

/// Every security setting.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct SecurityConfig {
    /// `security.protocol` (PLAINTEXT by default, as both reference clients).
    pub protocol: SecurityProtocol,
    /// TLS, used by SSL and SASL_SSL.
    pub tls: TlsConfig,
    /// SASL, used by SASL_PLAINTEXT and SASL_SSL.
    pub sasl: SaslConfig,
}

fn inconsistent(field: &'static str, reason: impl Into<String>) -> ConfigurationError {
    ConfigurationError::Inconsistent {
        field,
        reason: reason.into(),
    }
}

impl SecurityConfig {
    /// Checks the combination: what the protocol needs is there, and nothing is set
    /// that it would not use.
    pub fn validate(&self) -> Result<(), ConfigurationError> {
        let p = self.protocol;
        if !p.uses_tls() && self.tls.is_set() {
            return Err(inconsistent(
                "security.tls",
                format!(
                    "ssl.* settings are given but security.protocol is {p:?}; use SSL or SASL_SSL"
                ),
            ));
        }
        if self.tls.certificate.is_some() != self.tls.key.is_some() {
            return Err(inconsistent(
                "security.tls.key",
                "a client certificate needs its key and a key its certificate \
                 (ssl.certificate.location with ssl.key.location)",
            ));
        }
        if self.tls.key_password.is_some() && self.tls.key.is_none() {
            return Err(inconsistent(
                "security.tls.key_password",
                "ssl.key.password is set but there is no private key (ssl.key.location, \
                 ssl.keystore.key or a PEM ssl.keystore.location)",
            ));
        }
        if !p.uses_sasl() {
            if self.sasl.is_set() {
                return Err(inconsistent(
                    "security.sasl",
                    format!(
                        "sasl.* settings are given but security.protocol is {p:?}; use SASL_PLAINTEXT or SASL_SSL"
                    ),
                ));
            }
            return Ok(());
        }
        let s = &self.sasl;
        if s.mechanism.uses_password() {
            if s.username.as_deref().is_none_or(str::is_empty) || s.password.is_none() {
                return Err(inconsistent(
                    "security.sasl.username",
                    format!(
                        "{} needs sasl.username and sasl.password (or sasl.jaas.config)",
                        s.mechanism.name()
                    ),
                ));
            }
            if s.token_provider.is_some() || s.unsecured_jwt.is_some() {
                return Err(inconsistent(
                    "security.sasl.token_provider",
                    format!(
                        "a token provider is set but sasl.mechanism is {}",
                        s.mechanism.name()
                    ),
                ));
            }
        } else {
            if s.unsecured_jwt
                .as_ref()
                .is_some_and(|j| j.principal.is_empty())
            {
                return Err(inconsistent(
                    "security.sasl.unsecured_jwt",
                    "unsecured JWTs need a principal (sasl.oauthbearer.config=principal=NAME, \
                     or unsecuredLoginStringClaim_sub in sasl.jaas.config)",
                ));
            }
            if s.token_provider.is_some() == s.unsecured_jwt.is_some() {
                return Err(inconsistent(
                    "security.sasl.token_provider",
                    "OAUTHBEARER needs exactly one token source: a token provider set in code, \
                     or unsecured JWTs (enable.sasl.oauthbearer.unsecure.jwt or the \
                     OAuthBearerLoginModule's unsecuredLoginStringClaim_sub)",
                ));
            }
            if s.username.is_some() || s.password.is_some() {
                return Err(inconsistent(
                    "security.sasl.username",
                    "OAUTHBEARER takes no user name or password",
                ));
            }
        }
        Ok(())
    }

    /// Applies one `ssl.*`, `sasl.*` or `security.protocol` property; `Ok(false)` if
    /// the name is none of them.
    pub(super) fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigurationError> {
        let invalid = |reason: String| ConfigurationError::InvalidValue {
            field: key.to_string(),
            value: if key.contains("password") || key.contains("jaas") || key.contains("key") {
                "<redacted>".into()
            } else {
                value.to_string()
            },
            reason,
        };
        let v = value.trim();
        let file = || PemSource::File(PathBuf::from(v));
        let text = || PemSource::Text(Secret::new(value));
        match key {
            "security.protocol" => {
                self.protocol = SecurityProtocol::parse(v).ok_or_else(|| {
                    invalid("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL".into())
                })?
            }
            "ssl.ca.location" | "ssl.truststore.location" => self.tls.ca = Some(file()),
            "ssl.truststore.certificates" | "ssl.ca.pem" => self.tls.ca = Some(text()),
            "ssl.truststore.type" | "ssl.keystore.type" => {
                if !v.eq_ignore_ascii_case("PEM") {
                    return Err(invalid(
                        "only PEM stores are supported; convert with `openssl pkcs12 -in \
                         store.p12 -nodes -out store.pem` (JKS: keytool -importkeystore to \
                         PKCS12 first)"
                            .into(),
                    ));
                }
            }
            "ssl.keystore.location" => {
                // A PEM key store: the private key and the certificate chain in one file.
                self.tls.certificate = Some(file());
                self.tls.key = Some(file());
            }
            "ssl.certificate.location" => self.tls.certificate = Some(file()),
            "ssl.keystore.certificate.chain" | "ssl.certificate.pem" => {
                self.tls.certificate = Some(text())
            }
            "ssl.key.location" => self.tls.key = Some(file()),
            "ssl.keystore.key" | "ssl.key.pem" => self.tls.key = Some(text()),
            "ssl.key.password" => {
                self.tls.key_password = (!value.is_empty()).then(|| Secret::new(value))
            }
            "ssl.keystore.password" | "ssl.truststore.password" => {
                if !v.is_empty() {
                    return Err(invalid(
                        "password-protected stores are not supported: use PEM (an encrypted \
                         PKCS#8 key takes ssl.key.password)"
                            .into(),
                    ));
                }
            }
            "ssl.endpoint.identification.algorithm" => {
                self.tls.verify_hostname = match v.to_ascii_lowercase().as_str() {
                    "https" => true,
                    "" | "none" => false,
                    _ => return Err(invalid("expected https or an empty value".into())),
                }
            }
            "sasl.mechanism" | "sasl.mechanisms" => {
                self.sasl.mechanism = SaslMechanism::parse(v).map_err(invalid)?
            }
            "sasl.username" => self.sasl.username = Some(v.to_string()),
            "sasl.password" => self.sasl.password = Some(Secret::new(value)),
            "sasl.jaas.config" => self.apply_jaas(v).map_err(invalid)?,
            "enable.sasl.oauthbearer.unsecure.jwt" => match v.to_ascii_lowercase().as_str() {
                "true" => {
                    self.sasl
                        .unsecured_jwt
                        .get_or_insert_with(default_unsecured);
                }
                "false" => self.sasl.unsecured_jwt = None,
                _ => return Err(invalid("expected true or false".into())),
            },
            "sasl.oauthbearer.config" => {
                let jwt = self
                    .sasl
                    .unsecured_jwt
                    .get_or_insert_with(default_unsecured);
                apply_librdkafka_oauth_config(jwt, v).map_err(invalid)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Java's `sasl.jaas.config`: `<LoginModule class> required key="value" ...;`.
    fn apply_jaas(&mut self, text: &str) -> Result<(), String> {
        let jaas = Jaas::parse(text)?;
        let module = jaas.module.rsplit('.').next().unwrap_or(jaas.module);
        match module {
            "PlainLoginModule" | "ScramLoginModule" => {
                for (k, v) in &jaas.options {
                    match k.as_str() {
                        "username" => self.sasl.username = Some(v.clone()),
                        "password" => self.sasl.password = Some(Secret::new(v.clone())),
                        "tokenauth" => return Err("delegation tokens are not supported".into()),
                        _ => {}
                    }
                }
                if self.sasl.username.is_none() || self.sasl.password.is_none() {
                    return Err(format!("{module} needs username and password options"));
                }
                Ok(())
            }
            "OAuthBearerLoginModule" => {
                let jwt = self
                    .sasl
                    .unsecured_jwt
                    .get_or_insert_with(default_unsecured);
                for (k, v) in &jaas.options {
                    match k.as_str() {
                        "unsecuredLoginStringClaim_sub" => jwt.principal = v.clone(),
                        "unsecuredLoginLifetimeSeconds" => {
                            let secs: u64 = v.parse().map_err(|_| {
                                format!("unsecuredLoginLifetimeSeconds {v:?} is not a number")
                            })?;
                            jwt.lifetime = Duration::from_secs(secs);
                        }
                        "unsecuredLoginListClaim_scope" => {
                            jwt.scope = v.split(',').map(|s| s.trim().to_string()).collect()
                        }
                        k if k.starts_with("unsecuredLoginExtension_") => jwt
                            .extensions
                            .push((k["unsecuredLoginExtension_".len()..].to_string(), v.clone())),
                        other => {
                            return Err(format!(
                                "OAuthBearerLoginModule option {other:?} is not supported \
                                 (only the unsecured-JWT options; for real tokens set a token \
                                 provider in code)"
                            ));
                        }
                    }
                }
                if jwt.principal.is_empty() {
                    return Err("OAuthBearerLoginModule needs unsecuredLoginStringClaim_sub".into());
                }
                Ok(())
            }
            other => Err(format!(
                "login module {other:?} is not supported (PlainLoginModule, ScramLoginModule, \
                 OAuthBearerLoginModule)"
            )),
        }
    }
}

fn default_unsecured() -> UnsecuredJwt {
    UnsecuredJwt {
        principal: String::new(),
        lifetime: Duration::from_secs(3600),
        scope: Vec::new(),
        extensions: Vec::new(),
    }
}

/// librdkafka's `sasl.oauthbearer.config`: `principal=X [scope=a,b] [lifeSeconds=N]
/// [extension_NAME=value]`, space-separated.
fn apply_librdkafka_oauth_config(jwt: &mut UnsecuredJwt, text: &str) -> Result<(), String> {
    for item in text.split_whitespace() {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not key=value"))?;
        match k {
            "principal" => jwt.principal = v.to_string(),
            "scope" => jwt.scope = v.split(',').map(str::to_string).collect(),
            "lifeSeconds" => {
                let secs: u64 = v
                    .parse()
                    .map_err(|_| format!("lifeSeconds {v:?} is not a number"))?;
                jwt.lifetime = Duration::from_secs(secs);
            }
            k if k.starts_with("extension_") => jwt
                .extensions
                .push((k["extension_".len()..].to_string(), v.to_string())),
            other => return Err(format!("unknown key {other:?}")),
        }
    }
    Ok(())
}

/// One JAAS login module entry.
struct Jaas<'a> {
    module: &'a str,
    options: Vec<(String, String)>,
}

impl<'a> Jaas<'a> {
    fn parse(text: &'a str) -> Result<Self, String> {
        let text = text.trim();
        let body = text
            .strip_suffix(';')
            .ok_or("a JAAS entry ends with ';'")?
            .trim();
        let (module, rest) = body
            .split_once(char::is_whitespace)
            .ok_or("expected `<LoginModule> required key=\"value\" ...;`")?;
        let rest = rest.trim_start();
        let (flag, mut rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if !["required", "requisite", "sufficient", "optional"].contains(&flag) {
            return Err(format!("unknown control flag {flag:?} (expected required)"));
        }
        let mut options = Vec::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let (key, after) = rest
                .split_once('=')
                .ok_or_else(|| "expected key=value".to_string())?;
            let key = key.trim();
            let after = after.trim_start();
            let (value, remainder) = if let Some(quoted) = after.strip_prefix('"') {
                let end = quoted
                    .find('"')
                    .ok_or_else(|| format!("unterminated quote in option {key:?}"))?;
                (&quoted[..end], &quoted[end + 1..])
            } else {
                after.split_once(char::is_whitespace).unwrap_or((after, ""))
            };
            options.push((key.to_string(), value.to_string()));
            rest = remainder;
        }
        Ok(Jaas { module, options })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(props: &[(&str, &str)]) -> Result<SecurityConfig, ConfigurationError> {
        let mut c = SecurityConfig::default();
        for (k, v) in props {
            assert!(c.set(k, v)?, "{k} is a security property");
        }
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn java_jaas_entries_parse() {
        let c = with(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3 cr=t";"#,
            ),
        ])
        .unwrap();
        assert_eq!(c.sasl.username.as_deref(), Some("alice"));
        assert_eq!(c.sasl.password.as_ref().unwrap().expose(), "s3 cr=t");
        assert!(!format!("{c:?}").contains("s3 cr=t"));

        let c = with(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" unsecuredLoginExtension_traceId="7";"#,
            ),
        ])
        .unwrap();
        let jwt = c.sasl.unsecured_jwt.unwrap();
        assert_eq!(jwt.principal, "admin");
        assert_eq!(
            jwt.extensions,
            vec![("traceId".to_string(), "7".to_string())]
        );
    }

    #[test]
    fn refused_settings_say_what_to_do() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("ssl.truststore.type", "JKS")], "PEM"),
            (&[("ssl.keystore.password", "x")], "use PEM"),
            (
                &[("ssl.key.password", "x")],
                "security.protocol is Plaintext",
            ),
            (
                &[("security.protocol", "SSL"), ("ssl.key.password", "x")],
                "no private key",
            ),
            (&[("sasl.mechanism", "GSSAPI")], "not supported"),
            (&[("security.protocol", "TLS")], "expected PLAINTEXT"),
            (
                &[("ssl.ca.location", "/ca.pem")],
                "security.protocol is Plaintext",
            ),
            (
                &[
                    ("security.protocol", "SASL_SSL"),
                    ("sasl.mechanism", "PLAIN"),
                ],
                "needs sasl.username",
            ),
            (
                &[
                    ("security.protocol", "SASL_SSL"),
                    ("sasl.mechanism", "OAUTHBEARER"),
                ],
                "exactly one token source",
            ),
            (
                &[
                    ("security.protocol", "SASL_SSL"),
                    ("sasl.jaas.config", "com.example.Krb5LoginModule required;"),
                ],
                "not supported",
            ),
            (
                &[
                    ("security.protocol", "SSL"),
                    ("ssl.certificate.location", "/c.pem"),
                ],
                "needs its key",
            ),
        ];
        for (props, expected) in cases {
            let err = with(props).unwrap_err().to_string();
            assert!(err.contains(expected), "{props:?}: {err}");
        }
    }

    #[test]
    fn secrets_stay_out_of_errors() {
        let mut c = SecurityConfig::default();
        let err = c
            .set("sasl.jaas.config", "Plain required password=\"hunter2\"")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
