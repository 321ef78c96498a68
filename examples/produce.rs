//! A produce loop: sends many records, keeps a bounded window of delivery futures (each
//! says where its record was written, or why it failed for good), then flushes and
//! reports what was acknowledged and what failed.
//!
//! ```sh
//! kring topics create orders --partitions 3     # or any existing topic
//! cargo run --example produce -- 127.0.0.1:9092 orders 100000
//! ```
//!
//! Exits with 1 when any record failed. `tests/examples.rs` runs [`produce`] against the
//! broker.

use std::collections::VecDeque;

use kring::producer::{DeliveryFuture, Producer, ProducerRecord};
use kring::{Client, Config, Error};

/// Delivery futures kept before the oldest is awaited: bounds the memory the loop holds
/// for them without waiting on every record.
const WINDOW: usize = 10_000;

/// What a run of [`produce`] saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Records the broker acknowledged.
    pub acknowledged: u64,
    /// Records that failed for good (their delivery future's error).
    pub failed: u64,
}

impl Report {
    /// Counts one settled delivery, printing the first few failures.
    async fn settle(&mut self, delivery: DeliveryFuture) {
        match delivery.await {
            Ok(_written) => self.acknowledged += 1,
            Err(e) => {
                self.failed += 1;
                if self.failed <= 5 {
                    eprintln!("record to partition failed: {e}");
                }
            }
        }
    }
}

/// The value of record `i` (what `tests/examples.rs` expects the consumer to read).
pub fn value_of(i: u64) -> String {
    format!("record {i}")
}

/// Sends `count` records to `topic` (keys `key-0` to `key-99`, so records of one key
/// keep their order in one partition) and waits until each is settled.
pub async fn produce(client: &Client, topic: &str, count: u64) -> kring::Result<Report> {
    let producer = Producer::new(client.clone()).await?;
    let mut report = Report::default();
    let mut pending = VecDeque::with_capacity(WINDOW);
    for i in 0..count {
        let key = format!("key-{}", i % 100);
        let value = value_of(i);
        let record = ProducerRecord::new(topic)
            .with_key(key.as_str())
            .with_value(value.as_str());
        // `send` waits only for buffer memory (and the topic's metadata, once); an error
        // here is the record refused at once (closed producer, record too large, ...).
        pending.push_back(producer.send(record).await?);
        if pending.len() == WINDOW
            && let Some(oldest) = pending.pop_front()
        {
            report.settle(oldest).await;
        }
    }
    match producer.flush().await {
        Ok(()) => {}
        // The same failures the delivery futures report one by one below.
        Err(Error::DeliveryFailed {
            records, batches, ..
        }) => eprintln!("flush: {records} records in {batches} batches failed"),
        Err(e) => return Err(e),
    }
    for delivery in pending {
        report.settle(delivery).await;
    }
    producer.close().await?;
    Ok(report)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, topic, count] = args.as_slice() else {
        eprintln!("usage: produce BOOTSTRAP TOPIC COUNT");
        std::process::exit(2);
    };
    let count: u64 = count.parse()?;
    let client = Client::connect(Config::new([bootstrap.clone()])).await?;
    let report = produce(&client, topic, count).await?;
    client.close();
    println!(
        "{} acknowledged, {} failed",
        report.acknowledged, report.failed
    );
    if report.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
