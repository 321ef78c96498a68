//! ApiVersions (API 18): the APIs the fake cluster implements, each at every version
//! kring speaks.

use kring::protocol::ResponseKind;
use kring::protocol::messages::{ApiVersionsResponse, api_versions::ApiVersion};

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
                    .with_max_version(api.versions().max)
            })
            .collect(),
    )
}

pub(crate) fn api_versions() -> ResponseKind {
    ResponseKind::ApiVersions(advertised())
}
