//! ApiVersions (API 18): the APIs the fake cluster implements, each at every version
//! kring speaks, and the features it finalizes: `group.version` 1 (the KIP-848 group
//! protocol, as Kafka 4.x), but not `transaction.version` 2 (the fake models
//! transactions v1 only).

use kring::protocol::messages::ApiVersionsResponse;
use kring::protocol::messages::api_versions::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kring::protocol::{ApiKey, ResponseKind};

use crate::cluster::IMPLEMENTED;

/// The ApiVersions answer: the implemented APIs at every version kring speaks.
pub(crate) fn advertised() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_api_keys(
            IMPLEMENTED
                .iter()
                .map(|api| {
                    ApiVersion::default()
                        .with_api_key(api.key())
                        .with_min_version(api.versions().min)
                        .with_max_version(max_version(*api))
                })
                .collect(),
        )
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name("group.version".into())
                .with_min_version(0)
                .with_max_version(1),
        ])
        .with_finalized_features_epoch(1)
        .with_finalized_features(vec![
            FinalizedFeatureKey::default()
                .with_name("group.version".into())
                .with_min_version_level(1)
                .with_max_version_level(1),
        ])
}

/// The newest version advertised: kring's, but transactions v1 only (EndTxn v5 is
/// KIP-890's v2, which the fake does not model).
fn max_version(api: ApiKey) -> i16 {
    match api {
        ApiKey::EndTxn => api.versions().max.min(4),
        _ => api.versions().max,
    }
}

pub(crate) fn api_versions() -> ResponseKind {
    ResponseKind::ApiVersions(advertised())
}
