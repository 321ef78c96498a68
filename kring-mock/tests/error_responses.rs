//! The generated `error_response` (from `codegen/`) for every API kring knows: for
//! requests built by `arbitrary` at every version, the error response exists, is of the
//! request's API, carries the code, and encodes at the request's version (the encoder
//! refuses a field set that the version cannot carry, and a null where the version
//! needs a value).

use arbitrary::Unstructured;
use bytes::BytesMut;
use kring::protocol::messages::*;
use kring::protocol::{ArbitraryVersion, KafkaCode, Request, ResponseKind};
use kring_mock::error_response;

/// Deterministic bytes for `arbitrary` (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Checks `R`'s error responses; returns how many requests were tried.
fn check<R: Request + ArbitraryVersion>() -> usize {
    let mut tried = 0;
    let code = KafkaCode::NOT_LEADER_OR_FOLLOWER;
    for v in R::VERSIONS.min..=R::VERSIONS.max {
        for seed in 0..40u64 {
            let request = if seed == 0 {
                R::default()
            } else {
                let data = noise(seed, 32 + (seed as usize % 5) * 128);
                match R::arbitrary_for_version(&mut Unstructured::new(&data), v) {
                    Ok(r) => r,
                    Err(_) => continue,
                }
            };
            let response = error_response(&request.into_kind(), v, code)
                .unwrap_or_else(|| panic!("{} v{v}: no error response", R::NAME));
            assert_eq!(response.api_key(), R::API_KEY);
            let mut buf = BytesMut::new();
            response
                .encode(&mut buf, v)
                .unwrap_or_else(|e| panic!("{} v{v} (seed {seed}): {e}", R::NAME));
            let decoded = ResponseKind::decode(R::API_KEY, &mut buf.freeze(), v)
                .unwrap_or_else(|e| panic!("{} v{v} (seed {seed}) decodes: {e}", R::NAME));
            assert_eq!(decoded.api_key(), R::API_KEY);
            tried += 1;
        }
    }
    tried
}

macro_rules! every_api {
    ($($request:ty,)*) => {
        #[test]
        fn every_api_has_an_error_response_that_encodes_at_every_version() {
            let mut tried = 0;
            $(tried += check::<$request>();)*
            // Most requests must come from `arbitrary`, not only the defaults.
            assert!(tried > 5_000, "{tried} requests tried");
        }
    };
}

every_api! {
    ProduceRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ControlledShutdownRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    SaslHandshakeRequest,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DeleteRecordsRequest,
    InitProducerIdRequest,
    OffsetForLeaderEpochRequest,
    AddPartitionsToTxnRequest,
    AddOffsetsToTxnRequest,
    EndTxnRequest,
    WriteTxnMarkersRequest,
    TxnOffsetCommitRequest,
    DescribeAclsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeConfigsRequest,
    AlterConfigsRequest,
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    SaslAuthenticateRequest,
    CreatePartitionsRequest,
    CreateDelegationTokenRequest,
    RenewDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    DeleteGroupsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    OffsetDeleteRequest,
    DescribeClientQuotasRequest,
    AlterClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
    AlterUserScramCredentialsRequest,
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    DescribeQuorumRequest,
    AlterPartitionRequest,
    UpdateFeaturesRequest,
    EnvelopeRequest,
    FetchSnapshotRequest,
    DescribeClusterRequest,
    DescribeProducersRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    UnregisterBrokerRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    AllocateProducerIdsRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupDescribeRequest,
    ControllerRegistrationRequest,
    GetTelemetrySubscriptionsRequest,
    PushTelemetryRequest,
    AssignReplicasToDirsRequest,
    ListClientMetricsResourcesRequest,
    DescribeTopicPartitionsRequest,
    ShareGroupHeartbeatRequest,
    ShareGroupDescribeRequest,
    ShareFetchRequest,
    ShareAcknowledgeRequest,
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
    DeleteShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
}
