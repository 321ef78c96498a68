//! The cluster as a whole: its id, controller and brokers (DescribeCluster, KIP-700),
//! its feature levels (ApiVersions v3+, KIP-584), and which API versions each broker
//! supports (the ApiVersions table each connection negotiated at its handshake).

use super::{Admin, Route, check, version_of};
use crate::client::BrokerInfo;
use crate::error::Result;
use crate::protocol::messages::{ApiKey, ApiVersionsRequest, DescribeClusterRequest};
use crate::protocol::negotiation::ApiVersionsTable;

/// What DescribeCluster reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// The cluster id.
    pub cluster_id: String,
    /// The active controller's id as brokers see it (-1 if none).
    pub controller_id: i32,
    /// Every live broker, sorted by id, with its rack.
    pub brokers: Vec<BrokerInfo>,
}

/// One feature flag (KIP-584): `metadata.version`, `kraft.version`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Its name.
    pub name: String,
    /// The lowest level (finalized) or version (supported).
    pub min: i16,
    /// The highest level (finalized) or version (supported).
    pub max: i16,
}

/// The cluster's features, as one broker reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// The epoch of the finalized levels (-1 when unknown).
    pub epoch: i64,
    /// The levels the cluster runs at, sorted by name.
    pub finalized: Vec<Feature>,
    /// The range the answering broker supports, sorted by name.
    pub supported: Vec<Feature>,
}

/// One API a broker supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSupport {
    /// The API key.
    pub key: i16,
    /// Its name, when this crate knows the key.
    pub name: Option<&'static str>,
    /// The broker's lowest version.
    pub min: i16,
    /// The broker's highest version.
    pub max: i16,
    /// The version kring uses with this broker (`None`: the ranges don't meet).
    pub used: Option<i16>,
}

/// The APIs one broker supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerApis {
    /// The broker's id.
    pub broker: i32,
    /// `host:port`.
    pub addr: String,
    /// Its APIs, by key.
    pub apis: Vec<ApiSupport>,
}

impl Admin {
    /// The cluster id, the controller and every broker with its rack (DescribeCluster
    /// to any broker).
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        self.run(Route::Any, |broker| async move {
            let response = broker.send(DescribeClusterRequest::default()).await?;
            check(
                ApiKey::DescribeCluster,
                "the cluster",
                response.error_code,
                response.error_message,
            )?;
            let mut brokers: Vec<BrokerInfo> = response
                .brokers
                .into_iter()
                .map(|b| BrokerInfo {
                    id: b.broker_id,
                    host: b.host,
                    port: b.port,
                    rack: b.rack,
                })
                .collect();
            brokers.sort_by_key(|b| b.id);
            Ok(ClusterDescription {
                cluster_id: response.cluster_id,
                controller_id: response.controller_id,
                brokers,
            })
        })
        .await
    }

    /// The finalized and supported feature levels (ApiVersions v3+ to any broker).
    pub async fn describe_features(&self) -> Result<Features> {
        self.run(Route::Any, |broker| async move {
            let version = version_of(&broker, ApiKey::ApiVersions)?;
            let request = ApiVersionsRequest::default()
                .with_client_software_name("kring".into())
                .with_client_software_version(env!("CARGO_PKG_VERSION").into());
            let response = broker.send_version(request, version).await?;
            check(
                ApiKey::ApiVersions,
                &format!("broker {}", broker.id()),
                response.error_code,
                None,
            )?;
            let mut finalized: Vec<Feature> = response
                .finalized_features
                .into_iter()
                .map(|f| Feature {
                    name: f.name,
                    min: f.min_version_level,
                    max: f.max_version_level,
                })
                .collect();
            finalized.sort_by(|a, b| a.name.cmp(&b.name));
            let mut supported: Vec<Feature> = response
                .supported_features
                .into_iter()
                .map(|f| Feature {
                    name: f.name,
                    min: f.min_version,
                    max: f.max_version,
                })
                .collect();
            supported.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(Features {
                epoch: response.finalized_features_epoch,
                finalized,
                supported,
            })
        })
        .await
    }

    /// The API versions every broker in the metadata supports, and the version kring
    /// uses with each (connects to each broker).
    pub async fn broker_api_versions(&self) -> Result<Vec<BrokerApis>> {
        self.client.refresh_metadata(&[]).await?;
        let mut out = Vec::new();
        for broker in self.client.brokers() {
            let id = broker.id();
            let table = self
                .run(Route::Node(id), |b| async move {
                    Ok(b.api_versions().unwrap_or_default())
                })
                .await?;
            out.push(BrokerApis {
                broker: id,
                addr: broker.addr().to_string(),
                apis: api_support(&table),
            });
        }
        Ok(out)
    }
}

fn api_support(table: &ApiVersionsTable) -> Vec<ApiSupport> {
    table
        .iter()
        .map(|(key, range, used)| ApiSupport {
            key,
            name: ApiKey::from_i16(key).map(ApiKey::name),
            min: range.min,
            max: range.max,
            used,
        })
        .collect()
}
