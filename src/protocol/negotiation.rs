//! Version negotiation: from a broker's ApiVersions answer, the version of each API to
//! use — the highest one that both this crate (its stable versions) and the broker
//! support, or none when the ranges do not meet.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::protocol::messages::{ApiKey, ApiVersionsResponse};
use crate::protocol::{DecodeError, KafkaCode, VersionRange, decode_response_body};

/// The API versions a broker advertised, keyed by API key number, and the feature
/// levels the cluster has finalized as that broker last knew them (ApiVersions v3+).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiVersionsTable {
    broker: BTreeMap<i16, VersionRange>,
    /// Feature name to finalized (max) level; empty before v3 or when none is finalized.
    features: BTreeMap<String, i16>,
    /// The epoch of `features` (-1 when unknown): a higher epoch is newer.
    features_epoch: i64,
}

impl ApiVersionsTable {
    /// The table from a successful ApiVersions response. Entries with a min above their
    /// max are ignored rather than trusted.
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        let broker = response
            .api_keys
            .iter()
            .filter(|k| k.min_version <= k.max_version)
            .map(|k| {
                (
                    k.api_key,
                    VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect();
        let features = response
            .finalized_features
            .iter()
            .map(|f| (f.name.clone(), f.max_version_level))
            .collect();
        ApiVersionsTable {
            broker,
            features,
            features_epoch: response.finalized_features_epoch,
        }
    }

    /// The finalized level of feature `name` (`transaction.version`, ...), 0 when the
    /// broker finalized none or did not say (ApiVersions below v3).
    pub fn feature_level(&self, name: &str) -> i16 {
        self.features.get(name).copied().unwrap_or(0)
    }

    /// The epoch of the finalized features (-1 when unknown).
    pub fn features_epoch(&self) -> i64 {
        self.features_epoch
    }

    /// The broker's range for `api`, if it advertised one.
    pub fn broker_range(&self, api: ApiKey) -> Option<VersionRange> {
        self.broker.get(&api.key()).copied()
    }

    /// The version to use for `api`: the highest both sides support.
    pub fn version_for(&self, api: ApiKey) -> Option<i16> {
        negotiate(api, self.broker_range(api)?)
    }

    /// Every API the broker advertised, with the version this crate would use (if any).
    pub fn iter(&self) -> impl Iterator<Item = (i16, VersionRange, Option<i16>)> + '_ {
        self.broker.iter().map(|(&key, &range)| {
            (
                key,
                range,
                ApiKey::from_i16(key).and_then(|api| negotiate(api, range)),
            )
        })
    }
}

/// The highest version of `api` within both this crate's stable range and `broker`.
pub fn negotiate(api: ApiKey, broker: VersionRange) -> Option<i16> {
    let ours = api.versions();
    let low = ours.min.max(broker.min);
    let high = api.max_stable_version().min(broker.max);
    (low <= high).then_some(high)
}

/// The ApiVersions request version to retry with after a broker answered
/// UNSUPPORTED_VERSION: the highest version it listed for ApiVersions itself (KIP-511),
/// or v0 when it listed nothing usable.
pub fn api_versions_fallback(response: &ApiVersionsResponse) -> Option<i16> {
    if KafkaCode(response.error_code) != KafkaCode::UNSUPPORTED_VERSION {
        return None;
    }
    let table = ApiVersionsTable::from_response(response);
    Some(table.version_for(ApiKey::ApiVersions).unwrap_or(0))
}

/// Decodes an ApiVersions response body to a request sent at `version`. A broker that
/// does not know `version` answers in the v0 format with UNSUPPORTED_VERSION (KIP-511),
/// so when the body does not decode at `version`, or says UNSUPPORTED_VERSION, it is read
/// again as v0.
pub fn decode_api_versions_response(
    body: Bytes,
    version: i16,
) -> Result<ApiVersionsResponse, DecodeError> {
    let first = decode_response_body::<ApiVersionsResponse>(body.clone(), version);
    match first {
        Ok(r) if KafkaCode(r.error_code) != KafkaCode::UNSUPPORTED_VERSION || version == 0 => Ok(r),
        Ok(_) | Err(_) if version != 0 => match decode_response_body(body, 0) {
            Ok(v0) => Ok(v0),
            Err(e) => first.and(Err(e)),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::api_versions::ApiVersion;

    fn response(entries: &[(i16, i16, i16)]) -> ApiVersionsResponse {
        ApiVersionsResponse::default().with_api_keys(
            entries
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
    }

    #[test]
    fn picks_the_highest_common_version() {
        let table =
            ApiVersionsTable::from_response(&response(&[(3, 0, 9), (18, 0, 99), (0, 50, 60)]));
        assert_eq!(table.version_for(ApiKey::Metadata), Some(9));
        assert_eq!(
            table.version_for(ApiKey::ApiVersions),
            Some(ApiKey::ApiVersions.max_stable_version())
        );
        assert_eq!(
            table.version_for(ApiKey::Produce),
            None,
            "ranges do not meet"
        );
        assert_eq!(table.version_for(ApiKey::Fetch), None, "not advertised");
    }

    #[test]
    fn unsupported_version_falls_back() {
        let mut r = response(&[(18, 0, 2)]);
        r.error_code = KafkaCode::UNSUPPORTED_VERSION.code();
        assert_eq!(api_versions_fallback(&r), Some(2));
        let mut r = response(&[]);
        r.error_code = KafkaCode::UNSUPPORTED_VERSION.code();
        assert_eq!(api_versions_fallback(&r), Some(0));
        assert_eq!(api_versions_fallback(&response(&[])), None);
    }
}
