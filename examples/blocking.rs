//! The blocking API from plain threads, no async runtime: `Client::connect_blocking`,
//! a `SyncProducer` (each send waits for its acknowledgement), `send_blocking` with one
//! `flush_blocking` for many records, and one thread per partition reading with
//! `next_batch_blocking` up to the partition's end.
//!
//! ```sh
//! kring topics create orders --partitions 3     # or any existing topic
//! cargo run --example blocking -- 127.0.0.1:9092 orders 1000
//! ```
//!
//! `tests/examples.rs` runs [`run`] against the broker.

use kring::client::block_on;
use kring::consumer::{Consumer, Offset};
use kring::producer::{ProducerRecord, SyncProducer};
use kring::{Client, Config};

/// Errors crossing the reading threads.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Writes `count` records to `topic` (at least one), then reads every partition from
/// its oldest offset to its end; returns the records read.
pub fn run(bootstrap: &str, topic: &str, count: u64) -> Result<u64, BoxError> {
    let client = Client::connect_blocking(Config::new([bootstrap]))?;
    produce(&client, topic, count.max(1))?;
    let read = read_all(&client, topic)?;
    client.close();
    Ok(read)
}

fn produce(client: &Client, topic: &str, count: u64) -> Result<(), BoxError> {
    let sync = SyncProducer::connect(client.clone())?;
    // One record, waiting for its acknowledgement.
    let first = sync.send(ProducerRecord::new(topic).with_value("first"))?;
    println!(
        "first record: partition {} offset {}",
        first.partition, first.offset
    );
    // Many: queue them all (send_blocking waits only for buffer memory), flush once.
    let producer = sync.producer();
    for i in 1..count {
        let value = format!("record {i}");
        let _delivery =
            producer.send_blocking(ProducerRecord::new(topic).with_value(value.as_str()))?;
    }
    producer.flush_blocking()?; // Error::DeliveryFailed when any record failed
    sync.close()?;
    Ok(())
}

fn read_all(client: &Client, topic: &str) -> Result<u64, BoxError> {
    let consumer = Consumer::new(client.clone())?;
    let partitions = block_on(client.partitions(topic))?;
    std::thread::scope(|scope| {
        let readers: Vec<_> = partitions
            .into_iter()
            .map(|partition| {
                let consumer = &consumer;
                scope.spawn(move || read_partition(consumer, topic, partition))
            })
            .collect();
        let mut read = 0;
        for reader in readers {
            read += reader.join().map_err(|_| "a reader thread panicked")??;
        }
        Ok(read)
    })
}

fn read_partition(consumer: &Consumer, topic: &str, partition: i32) -> Result<u64, BoxError> {
    let (_, end) = block_on(consumer.offsets(topic, partition))?;
    let mut pc = consumer.consume_partition_blocking(topic, partition, Offset::Oldest)?;
    let mut read = 0;
    while pc.position() < end {
        let Some(batch) = pc.next_batch_blocking() else {
            break; // the client was closed
        };
        for record in batch?.records() {
            let record = record?;
            let value = String::from_utf8_lossy(record.value().unwrap_or_default());
            println!("{partition}@{}: {value}", record.offset());
            read += 1;
        }
    }
    Ok(read)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, topic, count] = args.as_slice() else {
        eprintln!("usage: blocking BOOTSTRAP TOPIC COUNT");
        std::process::exit(2);
    };
    let read = run(bootstrap, topic, count.parse()?)?;
    eprintln!("read {read} records (the topic's whole content)");
    Ok(())
}
