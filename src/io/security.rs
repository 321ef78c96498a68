//! Turning security settings into what connections use: the rustls client
//! configuration (trust roots, client certificate, host name checking) built once per
//! client from PEM files or text — the file reads happen here, at start-up — and, per
//! connection, the SASL credentials (a token from the application's provider, cached
//! until 80% of its lifetime), SCRAM's nonce and the re-authentication seed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::config::ConfigurationError;
use crate::config::security::{PemSource, SaslConfig, Secret, SecurityConfig, TlsConfig};
use crate::engine::connection::{ConnectionSecurity, Start};
use crate::engine::error::IoError;
use crate::engine::sasl::{
    CredentialSource, OAuthToken, SaslCredentials, SaslSetup, TokenProvider, base64_url_encode,
};
use crate::engine::tls::TlsSetup;
use crate::io::encrypted_key::decrypt_pkcs8;

fn tls_error(field: &'static str, reason: impl Into<String>) -> ConfigurationError {
    ConfigurationError::Inconsistent {
        field,
        reason: reason.into(),
    }
}

/// The connection security a configuration implies (files read now).
pub fn connection_security(
    config: &SecurityConfig,
) -> Result<ConnectionSecurity, ConfigurationError> {
    let tls = if config.protocol.uses_tls() {
        Some(TlsSetup {
            config: Arc::new(client_config(&config.tls)?),
        })
    } else {
        None
    };
    let sasl = if config.protocol.uses_sasl() {
        Some(sasl_setup(&config.sasl)?)
    } else {
        None
    };
    Ok(ConnectionSecurity { tls, sasl })
}

fn pem_bytes(source: &PemSource, field: &'static str) -> Result<Vec<u8>, ConfigurationError> {
    match source {
        PemSource::Text(text) => Ok(text.expose().as_bytes().to_vec()),
        PemSource::File(path) => std::fs::read(path)
            .map_err(|e| tls_error(field, format!("reading {}: {e}", path.display()))),
    }
}

fn certificates(
    source: &PemSource,
    field: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ConfigurationError> {
    let bytes = pem_bytes(source, field)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| tls_error(field, format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(tls_error(
            field,
            "no CERTIFICATE block found in the PEM data",
        ));
    }
    Ok(certs)
}

fn private_key(
    source: &PemSource,
    password: Option<&Secret>,
) -> Result<PrivateKeyDer<'static>, ConfigurationError> {
    let field = "security.tls.key";
    let bytes = pem_bytes(source, field)?;
    let decrypted = decrypt_pkcs8(&bytes, password.map(Secret::expose))
        .map_err(|e| tls_error(field, e.to_string()))?;
    if let Some(der) = decrypted {
        return Ok(PrivateKeyDer::Pkcs8(der.into()));
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        tls_error(
            field,
            format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
        )
    })
}

fn root_store(tls: &TlsConfig) -> Result<RootCertStore, ConfigurationError> {
    let mut roots = RootCertStore::empty();
    match &tls.ca {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(ca) => {
            for cert in certificates(ca, "security.tls.ca")? {
                roots.add(cert).map_err(|e| {
                    tls_error("security.tls.ca", format!("unusable CA certificate: {e}"))
                })?;
            }
        }
    }
    Ok(roots)
}

/// The rustls client configuration: ring's provider, TLS 1.2 and 1.3.
fn client_config(tls: &TlsConfig) -> Result<ClientConfig, ConfigurationError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(root_store(tls)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| tls_error("security.tls.ca", e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("security.tls", e.to_string()))?;
    let builder = if tls.verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier(verifier)))
    };
    match (&tls.certificate, &tls.key) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(
                certificates(cert, "security.tls.certificate")?,
                private_key(key, tls.key_password.as_ref())?,
            )
            .map_err(|e| {
                tls_error(
                    "security.tls.key",
                    format!("client certificate and key: {e}"),
                )
            }),
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// Verifies the chain, signatures and validity dates, but not that the certificate
/// names the host (`ssl.endpoint.identification.algorithm` empty).
#[derive(Debug)]
struct ChainOnlyVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnlyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn sasl_setup(sasl: &SaslConfig) -> Result<SaslSetup, ConfigurationError> {
    let source = if sasl.mechanism.uses_password() {
        match (&sasl.username, &sasl.password) {
            (Some(username), Some(password)) => CredentialSource::Password {
                username: username.clone(),
                password: password.clone(),
            },
            _ => {
                return Err(tls_error(
                    "security.sasl.username",
                    "needs sasl.username and sasl.password",
                ));
            }
        }
    } else {
        let provider: Arc<dyn TokenProvider> = match (&sasl.token_provider, &sasl.unsecured_jwt) {
            (Some(p), _) => p.0.clone(),
            (None, Some(jwt)) => Arc::new(jwt.clone()),
            (None, None) => {
                return Err(tls_error(
                    "security.sasl.token_provider",
                    "OAUTHBEARER needs a token source",
                ));
            }
        };
        CredentialSource::Tokens(Arc::new(CachedTokens {
            provider,
            cached: Mutex::new(None),
        }))
    };
    Ok(SaslSetup {
        mechanism: sasl.mechanism,
        source,
    })
}

/// A provider's tokens, reused until 80% of their lifetime has passed.
struct CachedTokens {
    provider: Arc<dyn TokenProvider>,
    cached: Mutex<Option<(OAuthToken, Instant)>>,
}

impl CachedTokens {
    fn fresh(&self) -> Option<OAuthToken> {
        let cached = self.cached.lock().ok()?;
        let (token, obtained) = cached.as_ref()?;
        (obtained.elapsed() < token.lifetime.mul_f64(0.8)).then(|| token.clone())
    }
}

impl TokenProvider for CachedTokens {
    fn token(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send + '_>> {
        Box::pin(async move {
            if let Some(token) = self.fresh() {
                return Ok(token);
            }
            let token = self.provider.token().await?;
            if let Ok(mut cached) = self.cached.lock() {
                *cached = Some((token.clone(), Instant::now()));
            }
            Ok(token)
        })
    }
}

/// A SCRAM client nonce: 18 random bytes from the OS, URL-safe base64 (24 characters,
/// none of them `,`).
pub fn nonce() -> String {
    let mut bytes = [0u8; 18];
    // The OS generator does not fail on Linux once booted; a failure would leave zeros
    // and the broker's nonce still makes the exchange unique.
    let _ = SystemRandom::new().fill(&mut bytes);
    base64_url_encode(&bytes)
}

/// A KIP-848 member id: 16 random bytes as Kafka writes a `Uuid` (URL-safe base64,
/// 22 characters), as the Java client makes them.
pub fn random_member_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = SystemRandom::new().fill(&mut bytes);
    let mut id = base64_url_encode(&bytes);
    id.truncate(22);
    id
}

fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    let _ = SystemRandom::new().fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

/// What a new connection (or a re-authentication) needs: credentials resolved (a
/// provider's token obtained within `timeout`), a nonce, a seed.
pub async fn start_for(
    security: &ConnectionSecurity,
    addr: &str,
    timeout: Duration,
) -> Result<Start, IoError> {
    let credentials = match &security.sasl {
        None => None,
        Some(sasl) => Some(credentials(sasl, addr, timeout).await?),
    };
    Ok(Start {
        credentials,
        nonce: nonce(),
        seed: seed(),
    })
}

async fn credentials(
    sasl: &SaslSetup,
    addr: &str,
    timeout: Duration,
) -> Result<SaslCredentials, IoError> {
    let provider = match &sasl.source {
        CredentialSource::Password { username, password } => {
            return Ok(SaslCredentials::Password {
                username: username.clone(),
                password: password.clone(),
            });
        }
        CredentialSource::Tokens(provider) => provider,
    };
    let failed = |reason: String| IoError::TokenProvider {
        addr: addr.to_string(),
        reason,
    };
    let token = tokio::time::timeout(timeout, provider.token())
        .await
        .map_err(|_| failed(format!("no token within {timeout:?}")))?
        .map_err(failed)?;
    Ok(SaslCredentials::Token {
        token: token.value,
        extensions: token.extensions,
    })
}
