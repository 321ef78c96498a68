//! Client quotas (KIP-546: DescribeClientQuotas, AlterClientQuotas) and SCRAM
//! credentials (KIP-554: DescribeUserScramCredentials, AlterUserScramCredentials).
//! A SCRAM password never goes on the wire: the client salts and hashes it
//! (PBKDF2-HMAC-SHA-256/512, RFC 5802's `Hi`) and sends the salted password.

use bytes::Bytes;

use super::{Admin, Route, check};
use crate::error::{Error, Result};
use crate::protocol::messages::{
    AlterClientQuotasRequest, AlterUserScramCredentialsRequest, ApiKey,
    DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest,
    alter_client_quotas::{
        AlterClientQuotasRequestEntityData, AlterClientQuotasRequestEntryData, OpData,
    },
    alter_user_scram_credentials::{ScramCredentialDeletion, ScramCredentialUpsertion},
    describe_client_quotas::ComponentData,
    describe_user_scram_credentials::UserName,
};

/// A quota entity: `(type, name)` pairs such as `("user", Some("alice"))`, with `None`
/// for the type's default (`<default>` in the Java tools).
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// How a describe matches one entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name exactly.
    Exact(String),
    /// The type's default entity.
    Default,
    /// Any name, the default included.
    Any,
}

/// The quotas of one entity.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuota {
    /// The entity, sorted by type.
    pub entity: QuotaEntity,
    /// Its quotas (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`,
    /// ...), sorted by name.
    pub values: Vec<(String, f64)>,
}

fn entity_label(entity: &[(String, Option<String>)]) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
        .collect();
    format!("quota entity {}", parts.join(","))
}

/// A SCRAM mechanism (KIP-554 codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hash(self) -> crate::engine::sasl::scram::ScramHash {
        use crate::engine::sasl::scram::ScramHash;
        match self {
            ScramMechanism::Sha256 => ScramHash::Sha256,
            ScramMechanism::Sha512 => ScramHash::Sha512,
        }
    }
}

impl std::str::FromStr for ScramMechanism {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "SCRAM-SHA-256" | "SHA-256" | "SHA256" => Ok(ScramMechanism::Sha256),
            "SCRAM-SHA-512" | "SHA-512" | "SHA512" => Ok(ScramMechanism::Sha512),
            _ => Err(Error::InvalidArgument(format!(
                "{s:?} is not a SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)"
            ))),
        }
    }
}

/// A user's SCRAM credentials: mechanism and iteration count of each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserScramCredentials {
    /// The user.
    pub user: String,
    /// Its credentials.
    pub credentials: Vec<(ScramMechanism, i32)>,
}

/// The fewest iterations Kafka accepts (`ScramMechanism.minIterations`).
const MIN_ITERATIONS: i32 = 4096;

impl Admin {
    /// The quotas of the entities `filter` matches (`(type, match)` per entity type);
    /// `strict` leaves out entities with types beyond those named.
    pub async fn describe_client_quotas(
        &self,
        filter: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<ClientQuota>> {
        let components = filter
            .iter()
            .map(|(t, m)| {
                let (match_type, name) = match m {
                    QuotaMatch::Exact(n) => (0, Some(n.clone())),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(t.clone())
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::DescribeClientQuotas,
                    "client quotas",
                    response.error_code,
                    response.error_message,
                )?;
                let mut out: Vec<ClientQuota> = response
                    .entries
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| {
                        let mut entity: QuotaEntity = e
                            .entity
                            .into_iter()
                            .map(|d| (d.entity_type, d.entity_name))
                            .collect();
                        entity.sort();
                        let mut values: Vec<(String, f64)> =
                            e.values.into_iter().map(|v| (v.key, v.value)).collect();
                        values.sort_by(|a, b| a.0.cmp(&b.0));
                        ClientQuota { entity, values }
                    })
                    .collect();
                out.sort_by(|a, b| a.entity.cmp(&b.entity));
                Ok(out)
            }
        })
        .await
    }

    /// Sets (`Some`) or removes (`None`) quotas of `entity`, all or none.
    pub async fn alter_client_quotas(
        &self,
        entity: &[(String, Option<String>)],
        ops: &[(String, Option<f64>)],
        validate_only: bool,
    ) -> Result<()> {
        let label = entity_label(entity);
        if entity.is_empty() {
            return Err(Error::InvalidArgument("a quota entity needs a type".into()));
        }
        if let Some((k, v)) = ops
            .iter()
            .find(|(_, v)| v.is_some_and(|v| !v.is_finite() || v < 0.0))
        {
            return Err(Error::InvalidArgument(format!(
                "{label}: quota {k} = {v:?} must be a finite number, not negative"
            )));
        }
        let request = AlterClientQuotasRequest::default()
            .with_validate_only(validate_only)
            .with_entries(vec![
                AlterClientQuotasRequestEntryData::default()
                    .with_entity(
                        entity
                            .iter()
                            .map(|(t, n)| {
                                AlterClientQuotasRequestEntityData::default()
                                    .with_entity_type(t.clone())
                                    .with_entity_name(n.clone())
                            })
                            .collect(),
                    )
                    .with_ops(
                        ops.iter()
                            .map(|(k, v)| {
                                OpData::default()
                                    .with_key(k.clone())
                                    .with_value(v.unwrap_or(0.0))
                                    .with_remove(v.is_none())
                            })
                            .collect(),
                    ),
            ]);
        let label = &label;
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                for e in response.entries {
                    check(
                        ApiKey::AlterClientQuotas,
                        label,
                        e.error_code,
                        e.error_message,
                    )?;
                }
                Ok(())
            }
        })
        .await
    }

    /// The SCRAM credentials of `users` (every user with one when `None`). A user
    /// without credentials is RESOURCE_NOT_FOUND naming it.
    pub async fn describe_user_scram_credentials(
        &self,
        users: Option<&[&str]>,
    ) -> Result<Vec<UserScramCredentials>> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(users.map(|us| {
            us.iter()
                .map(|u| UserName::default().with_name(u.to_string()))
                .collect()
        }));
        self.run(Route::Any, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                check(
                    ApiKey::DescribeUserScramCredentials,
                    "SCRAM credentials",
                    response.error_code,
                    response.error_message,
                )?;
                let mut out = Vec::new();
                for r in response.results {
                    check(
                        ApiKey::DescribeUserScramCredentials,
                        &format!("user {}", r.user),
                        r.error_code,
                        r.error_message,
                    )?;
                    let credentials = r
                        .credential_infos
                        .iter()
                        .filter_map(|c| {
                            Some((ScramMechanism::from_code(c.mechanism)?, c.iterations))
                        })
                        .collect();
                    out.push(UserScramCredentials {
                        user: r.user,
                        credentials,
                    });
                }
                out.sort_by(|a, b| a.user.cmp(&b.user));
                Ok(out)
            }
        })
        .await
    }

    /// Creates or replaces `user`'s `mechanism` credential for `password`, salted with
    /// a fresh random salt and hashed `iterations` times (at least 4096).
    pub async fn upsert_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        iterations: i32,
        password: &str,
    ) -> Result<()> {
        if user.is_empty() {
            return Err(Error::InvalidArgument("a SCRAM user needs a name".into()));
        }
        if iterations < MIN_ITERATIONS {
            return Err(Error::InvalidArgument(format!(
                "user {user}: {iterations} iterations is below {}'s minimum of {MIN_ITERATIONS}",
                mechanism.name()
            )));
        }
        let salt = random_salt()?;
        let salted = salted_password(mechanism, password, &salt, iterations);
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            ScramCredentialUpsertion::default()
                .with_name(user.to_string())
                .with_mechanism(mechanism.code())
                .with_iterations(iterations)
                .with_salt(Bytes::from(salt))
                .with_salted_password(Bytes::from(salted)),
        ]);
        self.alter_scram(user, request).await
    }

    /// Deletes `user`'s `mechanism` credential; one it does not have is
    /// RESOURCE_NOT_FOUND naming the user.
    pub async fn delete_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Result<()> {
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(user.to_string())
                .with_mechanism(mechanism.code()),
        ]);
        self.alter_scram(user, request).await
    }

    async fn alter_scram(
        &self,
        user: &str,
        request: AlterUserScramCredentialsRequest,
    ) -> Result<()> {
        let label = format!("user {user}");
        let label = &label;
        self.run(Route::Controller, |broker| {
            let request = request.clone();
            async move {
                let response = broker.send(request).await?;
                for r in response.results {
                    check(
                        ApiKey::AlterUserScramCredentials,
                        label,
                        r.error_code,
                        r.error_message,
                    )?;
                }
                Ok(())
            }
        })
        .await
    }
}

fn random_salt() -> Result<Vec<u8>> {
    use ring::rand::SecureRandom;
    let mut salt = vec![0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| Error::InvalidArgument("the system's random source failed".into()))?;
    Ok(salt)
}

/// RFC 5802 `Hi(password, salt, iterations)`, as the client's SCRAM exchange computes it.
fn salted_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: i32,
) -> Vec<u8> {
    crate::engine::sasl::scram::salted_password(
        mechanism.hash(),
        password,
        salt,
        iterations.max(1) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salted_password_matches_rfc_7677() {
        // RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", salt
        // W22ZaJ0SNY7soEsUEjb6gQ== with 4096 iterations; its SaltedPassword is
        // c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d.
        let salt = [
            0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e, 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36,
            0xfa, 0x81,
        ];
        let got = salted_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d"
        );
        assert_eq!(
            salted_password(ScramMechanism::Sha512, "p", b"s", 4096).len(),
            64
        );
        assert_eq!(
            "scram-sha-512".parse::<ScramMechanism>().unwrap(),
            ScramMechanism::Sha512
        );
        assert!("md5".parse::<ScramMechanism>().is_err());
        assert_eq!(
            entity_label(&[
                ("user".into(), Some("a".into())),
                ("client-id".into(), None)
            ]),
            "quota entity user=a,client-id=<default>"
        );
    }
}
