//! A consumer group member that prints every record of the topics it is given and
//! commits what it printed when partitions move and when it stops.
//!
//! ```sh
//! cargo run --example group_consume -- 127.0.0.1:9092 my-group orders [more topics...]
//! ```
//!
//! Run it in several terminals with the same group: the topics' partitions are shared
//! among them, and move as members come and go.

use kring::group::{GroupConsumer, ListenerFuture, RebalanceListener, TopicPartition, Topics};
use kring::{Client, Config};

/// Says what moved; commits are left to auto-commit (on revoke, and every 5 s).
struct Announce;

impl RebalanceListener for Announce {
    fn on_assigned<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        Box::pin(async move { eprintln!("assigned {}", list(partitions)) })
    }

    fn on_revoked<'a>(
        &'a mut self,
        _consumer: &'a mut GroupConsumer,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        Box::pin(async move { eprintln!("revoked {}", list(partitions)) })
    }
}

fn list(partitions: &[TopicPartition]) -> String {
    partitions
        .iter()
        .map(|tp| tp.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> kring::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, group, topics @ ..] = args.as_slice() else {
        eprintln!("usage: group_consume BOOTSTRAP GROUP TOPIC...");
        std::process::exit(2);
    };
    let mut config = Config::new([bootstrap.clone()]);
    config.group.group_id = Some(group.clone());
    config.consumer.auto_offset_reset = kring::config::OffsetReset::Earliest;
    kring::client::block_on(async {
        let client = Client::connect(config).await?;
        let mut consumer = GroupConsumer::with_listener(
            client.clone(),
            Topics::names(topics.iter().cloned()),
            Box::new(Announce),
        )
        .await?;
        // Borrowed batches: keys and values are slices of the fetch buffer.
        while let Some(batch) = consumer.next_batch().await {
            let batch = batch?;
            for record in batch.batch.records() {
                let record = record.map_err(|e| kring::Error::Batch(e.to_string()))?;
                let value = record.value().map(String::from_utf8_lossy);
                println!(
                    "{}/{}/{}: {}",
                    batch.topic,
                    batch.partition,
                    record.offset(),
                    value.unwrap_or_default()
                );
            }
        }
        consumer.close().await?;
        client.close();
        Ok(())
    })
}
