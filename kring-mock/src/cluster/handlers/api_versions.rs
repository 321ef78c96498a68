//! ApiVersions (API 18): the APIs the fake cluster implements, each at every version
//! kring speaks.

use kring::protocol::messages::{ApiVersionsResponse, api_versions::ApiVersion};
use kring::protocol::{ApiKey, ResponseKind};

use crate::cluster::IMPLEMENTED;

/// The ApiVersions answer: the implemented APIs at every version kring speaks.
pub(crate) fn advertised() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
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
