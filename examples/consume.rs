//! A borrowed consume loop over every partition of a topic: one task per partition
//! reads its batches with `next_batch`, and writes each record's partition, offset, key
//! and value straight from the fetch buffer (no copy, no allocation per record).
//!
//! ```sh
//! cargo run --example consume -- 127.0.0.1:9092 orders          # to the end, then stop
//! cargo run --example consume -- 127.0.0.1:9092 orders --follow # and wait for more
//! ```
//!
//! Each line is `PARTITION<TAB>OFFSET<TAB>KEY<TAB>VALUE`, key and value as raw bytes.
//! `tests/examples.rs` runs [`consume_topic`] against the broker.

use std::io::Write;
use std::sync::{Arc, Mutex};

use kring::consumer::{Consumer, Offset, PartitionConsumer};
use kring::{Client, Config};

/// Errors crossing the per-partition tasks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads every partition of `topic` from its oldest offset, writing records to `out`;
/// without `follow`, stops at the end offsets the partitions had when it started.
/// Returns the number of records read.
pub async fn consume_topic<W: Write + Send + 'static>(
    client: &Client,
    topic: &str,
    follow: bool,
    out: Arc<Mutex<W>>,
) -> Result<u64, BoxError> {
    let consumer = Consumer::new(client.clone())?;
    let mut tasks = Vec::new();
    for partition in client.partitions(topic).await? {
        let end = if follow {
            None
        } else {
            Some(consumer.offsets(topic, partition).await?.1)
        };
        let pc = consumer
            .consume_partition(topic, partition, Offset::Oldest)
            .await?;
        tasks.push(tokio::spawn(read_partition(pc, end, out.clone())));
    }
    let mut read = 0;
    for task in tasks {
        read += task.await??;
    }
    Ok(read)
}

/// Reads one partition until `end` (forever with `None`).
async fn read_partition<W: Write>(
    mut pc: PartitionConsumer,
    end: Option<i64>,
    out: Arc<Mutex<W>>,
) -> Result<u64, BoxError> {
    let partition = pc.partition();
    let mut read = 0;
    while end.is_none_or(|end| pc.position() < end) {
        let Some(batch) = pc.next_batch().await else {
            break; // the consumer or its client was closed
        };
        let batch = batch?;
        let mut out = out.lock().map_err(|_| "output lock poisoned")?;
        for record in batch.records() {
            let record = record?;
            // key() and value() are &[u8] slices of the fetch buffer.
            write!(out, "{partition}\t{}\t", record.offset())?;
            out.write_all(record.key().unwrap_or_default())?;
            out.write_all(b"\t")?;
            out.write_all(record.value().unwrap_or_default())?;
            out.write_all(b"\n")?;
            read += 1;
        }
        out.flush()?;
    }
    Ok(read)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bootstrap, topic, follow) = match args.as_slice() {
        [bootstrap, topic] => (bootstrap, topic, false),
        [bootstrap, topic, flag] if flag == "--follow" => (bootstrap, topic, true),
        _ => {
            eprintln!("usage: consume BOOTSTRAP TOPIC [--follow]");
            std::process::exit(2);
        }
    };
    let client = Client::connect(Config::new([bootstrap.clone()])).await?;
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let read = consume_topic(&client, topic, follow, out).await?;
    eprintln!("{read} records");
    client.close();
    Ok(())
}
