//! `kring check`: a round trip of raw protocol requests against one broker — the
//! ApiVersions handshake, Metadata, then CreateTopics, ListOffsets, DescribeConfigs and
//! DeleteTopics on a scratch topic — printing each answer. It uses a plain blocking
//! connection, not the client, so it shows the wire protocol working on its own.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kring::IoError;
use kring::client::{BlockingConnection, ConnectionConfig};
use kring::protocol::KafkaCode;
use kring::protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, ListOffsetsRequest,
    MetadataRequest, create_topics::CreatableTopic, delete_topics::DeleteTopicState,
    describe_configs::DescribeConfigsResource, list_offsets::ListOffsetsPartition,
    list_offsets::ListOffsetsTopic, metadata::MetadataRequestTopic,
};

use crate::args::UsageError;
use crate::{CliError, CliResult};

/// `kring check`: a round trip of protocol requests against one broker.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The broker
    #[arg(
        short = 'b',
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9092"
    )]
    bootstrap: String,
    /// Don't delete the scratch topic
    #[arg(long)]
    keep_topic: bool,
}

/// Checks that the broker is given as HOST:PORT.
fn parse_check(args: CheckArgs) -> Result<CheckArgs, UsageError> {
    let bootstrap = &args.bootstrap;
    if bootstrap
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        return Err(UsageError::new(format!(
            "--bootstrap {bootstrap:?} is not HOST:PORT"
        )));
    }
    Ok(args)
}

/// Runs `kring check`.
pub fn run(args: CheckArgs) -> CliResult {
    let args = parse_check(args)?;
    check(&args).map_err(|e| CliError::Failed(e.to_string()))
}

/// Errors of `kring check`.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error(transparent)]
    Connection(#[from] IoError),
    #[error("{what} failed: {code}")]
    Broker { what: String, code: KafkaCode },
    #[error("{0}")]
    Unexpected(String),
}

fn broker_error(what: impl Into<String>, code: i16) -> Result<(), CheckError> {
    let code = KafkaCode(code);
    if code.is_ok() {
        Ok(())
    } else {
        Err(CheckError::Broker {
            what: what.into(),
            code,
        })
    }
}

fn check(args: &CheckArgs) -> Result<(), CheckError> {
    let started = Instant::now();
    let mut conn = BlockingConnection::connect(&args.bootstrap, ConnectionConfig::default())?;
    println!("connected to {} ({:?})", conn.addr(), started.elapsed());
    println!(
        "ApiVersions: the broker offers {} APIs; kring uses:",
        conn.api_versions().iter().count()
    );
    for api in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::Metadata,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::FindCoordinator,
        ApiKey::ApiVersions,
    ] {
        match (
            conn.api_versions().broker_range(api),
            conn.api_versions().version_for(api),
        ) {
            (Some(r), Some(v)) => {
                println!("  {:<16} v{v:<3} (broker {}-{})", api.name(), r.min, r.max)
            }
            (Some(r), None) => println!("  {:<16} none (broker {}-{})", api.name(), r.min, r.max),
            (None, _) => println!("  {:<16} not offered", api.name()),
        }
    }

    let metadata = conn.send(&MetadataRequest::default().with_topics(None))?;
    println!(
        "Metadata: cluster {} controller {} with {} broker(s), {} topic(s)",
        metadata.cluster_id.as_deref().unwrap_or("?"),
        metadata.controller_id,
        metadata.brokers.len(),
        metadata.topics.len()
    );
    for b in &metadata.brokers {
        println!("  broker {} at {}:{}", b.node_id, b.host, b.port);
    }

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let topic = format!("kring-check-{nanos}");
    let created = conn.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(topic.clone())
                    .with_num_partitions(3)
                    .with_replication_factor(1),
            ])
            .with_timeout_ms(30_000),
    )?;
    let result = created
        .topics
        .first()
        .ok_or_else(|| CheckError::Unexpected("CreateTopics answered no topic".into()))?;
    broker_error(format!("creating {topic}"), result.error_code)?;
    println!("CreateTopics: created {topic} (id {})", result.topic_id);

    // Wait for leaders, then ask each leader for its partitions' offsets.
    let deadline = Instant::now() + Duration::from_secs(30);
    let topic_metadata = loop {
        let m = conn.send(
            &MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic.clone())),
                ]))
                .with_allow_auto_topic_creation(false),
        )?;
        let ready = m.topics.first().is_some_and(|t| {
            t.error_code == 0
                && t.partitions.len() == 3
                && t.partitions.iter().all(|p| p.leader_id >= 0)
        });
        if ready {
            break m;
        }
        if Instant::now() > deadline {
            return Err(CheckError::Unexpected(format!(
                "{topic} has no leaders after 30 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for p in &topic_metadata.topics[0].partitions {
        let leader = topic_metadata
            .brokers
            .iter()
            .find(|b| b.node_id == p.leader_id)
            .ok_or_else(|| CheckError::Unexpected(format!("leader {} not listed", p.leader_id)))?;
        let mut leader_conn = BlockingConnection::connect(
            &format!("{}:{}", leader.host, leader.port),
            ConnectionConfig::default(),
        )?;
        let mut offsets = Vec::new();
        for timestamp in [-2i64, -1] {
            let answer = leader_conn.send(
                &ListOffsetsRequest::default()
                    .with_replica_id(-1)
                    .with_topics(vec![
                        ListOffsetsTopic::default()
                            .with_name(topic.clone())
                            .with_partitions(vec![
                                ListOffsetsPartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_timestamp(timestamp),
                            ]),
                    ]),
            )?;
            let part = answer
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .ok_or_else(|| {
                    CheckError::Unexpected("ListOffsets answered no partition".into())
                })?;
            broker_error("ListOffsets", part.error_code)?;
            offsets.push(part.offset);
        }
        println!(
            "ListOffsets: partition {} leader {} earliest {} latest {}",
            p.partition_index, p.leader_id, offsets[0], offsets[1]
        );
    }

    let described = conn.send(&DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(topic.clone())
            .with_configuration_keys(Some(vec![
                "cleanup.policy".into(),
                "retention.ms".into(),
                "max.message.bytes".into(),
            ])),
    ]))?;
    if let Some(resource) = described.results.first() {
        broker_error("DescribeConfigs", resource.error_code)?;
        for c in &resource.configs {
            println!(
                "DescribeConfigs: {} = {}",
                c.name,
                c.value.as_deref().unwrap_or("(null)")
            );
        }
    }

    if args.keep_topic {
        println!("kept {topic}");
    } else {
        let version = conn
            .api_versions()
            .version_for(ApiKey::DeleteTopics)
            .unwrap_or(0);
        let request = if version >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic.clone())),
            ])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![topic.clone()])
        };
        let deleted = conn.send(&request.with_timeout_ms(30_000))?;
        if let Some(r) = deleted.responses.first() {
            broker_error(format!("deleting {topic}"), r.error_code)?;
        }
        println!("DeleteTopics: deleted {topic}");
    }
    println!("check passed in {:?}", started.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Result<CheckArgs, String> {
        use clap::Parser;
        /// `kring check`'s arguments alone.
        #[derive(Parser)]
        struct Check {
            #[command(flatten)]
            args: CheckArgs,
        }
        let parsed = Check::try_parse_from(std::iter::once("check").chain(list.iter().copied()))
            .map_err(|e| e.to_string())?;
        parse_check(parsed.args).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_and_rejects_arguments() {
        let a = parse(&["--bootstrap", "localhost:9093", "--keep-topic"]).unwrap();
        assert_eq!(a.bootstrap, "localhost:9093");
        assert!(a.keep_topic);
        assert_eq!(parse(&[]).unwrap().bootstrap, "127.0.0.1:9092");
        assert!(parse(&["--bootstrap"]).is_err());
        assert!(parse(&["--bootstrap", "nohost"]).is_err());
        assert!(parse(&["--bootstrap", "h:99999"]).is_err());
        assert!(parse(&["--frobnicate"]).is_err());
    }
}
