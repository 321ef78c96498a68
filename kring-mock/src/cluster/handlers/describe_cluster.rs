//! DescribeCluster (API 60): the cluster id, the controller (the first live broker, as
//! Metadata reports it) and every live broker.

use kring::protocol::ResponseKind;
use kring::protocol::messages::{DescribeClusterResponse, describe_cluster::DescribeClusterBroker};

use crate::cluster::Ctx;

pub(crate) fn describe_cluster(cx: &Ctx<'_>) -> ResponseKind {
    let st = cx.lock();
    let live = st.live_brokers();
    let brokers = st
        .brokers
        .iter()
        .filter(|(id, _)| live.contains(id))
        .map(|(&id, b)| {
            DescribeClusterBroker::default()
                .with_broker_id(id)
                .with_host(b.host.clone())
                .with_port(b.port)
        })
        .collect();
    ResponseKind::DescribeCluster(
        DescribeClusterResponse::default()
            .with_cluster_id(st.config.cluster_id.clone())
            .with_controller_id(live.first().copied().unwrap_or(-1))
            .with_brokers(brokers),
    )
}
