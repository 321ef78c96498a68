//! Exactly-once consume-transform-produce: a consumer group member reads `input`, writes
//! each value upper-cased to `output`, and commits its input offsets in the same
//! transaction as its output records, so a read_committed reader of `output` sees every
//! input record's result exactly once, whatever crashes or rebalances happen.
//!
//! ```sh
//! cargo run --example transform -- 127.0.0.1:9092 my-group input output
//! ```
//!
//! Run several with the same group: each must have its own transactional id, made here
//! from the group and the process id. The rules the loop follows:
//! - `enable.auto.commit=false`: offsets are committed only with a transaction;
//! - `isolation.level=read_committed`: the input may itself be written transactionally;
//! - one transaction per batch read, committed before the next read, so no transaction is
//!   open while the group can move partitions (that happens inside `next_batch`); the
//!   offsets go with the member's generation (`group_metadata`), so a member that lost
//!   its partitions cannot commit theirs;
//! - any error in a transaction aborts it and rewinds the batch's partition to the
//!   batch's first record (what the last committed transaction's offsets say), so the
//!   records are transformed again in the next one.

use kring::config::{IsolationLevel, OffsetReset};
use kring::group::{GroupConsumer, Topics};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config};

fn main() -> kring::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, group, input, output] = args.as_slice() else {
        eprintln!("usage: transform BOOTSTRAP GROUP INPUT OUTPUT");
        std::process::exit(2);
    };
    let mut config = Config::new([bootstrap.clone()]);
    config.group.group_id = Some(group.clone());
    config.consumer.enable_auto_commit = false;
    config.consumer.isolation_level = IsolationLevel::ReadCommitted;
    config.consumer.auto_offset_reset = OffsetReset::Earliest;
    config.producer.transactional_id = Some(format!("{group}-transform-{}", std::process::id()));
    let client = Client::connect_blocking(config)?;
    let result = kring::client::block_on(run(&client, input, output));
    client.close();
    result
}

async fn run(client: &Client, input: &str, output: &str) -> kring::Result<()> {
    let producer = Producer::new(client.clone()).await?;
    producer.init_transactions().await?;
    let mut consumer = GroupConsumer::subscribe(client.clone(), Topics::names([input])).await?;
    let mut total = 0u64;
    while let Some(batch) = consumer.next_messages().await {
        let messages = batch?;
        match transform_once(&producer, &mut consumer, output, &messages).await {
            Ok(()) => {
                total += messages.len() as u64;
                eprintln!("committed {} record(s) ({total} in all)", messages.len());
            }
            Err(e) => {
                eprintln!("transaction failed, aborting: {e}");
                producer.abort_transaction().await?;
                rewind(&mut consumer, &messages).await?;
            }
        }
    }
    consumer.close().await?;
    producer.close().await
}

/// One transaction: the batch's results and the offsets after it.
async fn transform_once(
    producer: &Producer,
    consumer: &mut GroupConsumer,
    output: &str,
    messages: &[kring::consumer::Message],
) -> kring::Result<()> {
    producer.begin_transaction()?;
    for m in messages {
        let value = m.value.as_deref().unwrap_or_default().to_ascii_uppercase();
        let mut record = ProducerRecord::new(output).with_value(value);
        record.key = m.key.as_deref().map(Into::into);
        let _delivery = producer.send(record).await?;
    }
    let offsets = consumer.consumed_offsets();
    producer
        .send_offsets_to_transaction(&offsets, &consumer.group_metadata())
        .await?;
    producer.commit_transaction().await
}

/// After an aborted transaction: reads the batch again. Earlier batches were committed
/// with their transactions, so the batch's first record is where its partition's
/// committed offset stands.
async fn rewind(
    consumer: &mut GroupConsumer,
    messages: &[kring::consumer::Message],
) -> kring::Result<()> {
    let Some(first) = messages.first() else {
        return Ok(());
    };
    let to = kring::consumer::Offset::Exact(first.offset);
    consumer.seek(&first.topic, first.partition, to).await
}
