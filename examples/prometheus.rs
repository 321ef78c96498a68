//! kring's metrics served to Prometheus: installs `metrics-exporter-prometheus`'s
//! recorder (before the client, so every metric is registered with it), serves the
//! rendered metrics on `http://ADDR/metrics`, and meanwhile produces to and consumes
//! from a topic so there is something to see.
//!
//! ```sh
//! cargo run --example prometheus -- 127.0.0.1:9092 metrics-demo 127.0.0.1:9898 &
//! curl -s 127.0.0.1:9898/metrics | grep kring_producer_records_total
//! ```
//!
//! The topic must exist (`kring topics create metrics-demo`). Runs until killed.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use kring::consumer::{Consumer, Offset};
use kring::producer::{Producer, ProducerRecord};
use kring::{Client, Config};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = args.next().unwrap_or_else(|| "metrics-demo".into());
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:9898".into());

    // First the recorder, then the client.
    let handle = PrometheusBuilder::new()
        .set_buckets(&[
            0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
        ])?
        .install_recorder()?;
    let listener = TcpListener::bind(&listen)?;
    eprintln!("metrics on http://{}/metrics", listener.local_addr()?);
    let served = handle.clone();
    std::thread::spawn(move || serve(listener, served));
    let upkept = handle.clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(5));
            upkept.run_upkeep();
        }
    });

    let client = Client::connect_blocking(Config::new([bootstrap]))?;
    let consumer_client = client.clone();
    let consumed_topic = topic.clone();
    std::thread::spawn(move || consume(consumer_client, &consumed_topic));
    produce(&client, &topic)
}

/// A record every 100 µs or so, flushed every thousand, to partition 0 (which the
/// consumer reads; the default partitioner would stick to one partition for a
/// `batch.size` of bytes at a time, leaving the consumer idle for seconds).
fn produce(client: &Client, topic: &str) -> Result<(), Box<dyn std::error::Error>> {
    let producer = Producer::new_blocking(client.clone())?;
    for i in 0u64.. {
        let value = format!("record {i}");
        // The flush below reports any record that failed.
        let record = ProducerRecord::new(topic)
            .with_partition(0)
            .with_value(value);
        let _delivery = producer.send_blocking(record)?;
        if i % 1000 == 999 {
            producer.flush_blocking()?;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

/// Reads partition 0 from its newest offset on.
fn consume(client: Client, topic: &str) {
    let run = || -> kring::Result<()> {
        let consumer = Consumer::new(client)?;
        let mut pc = consumer.consume_partition_blocking(topic, 0, Offset::Newest)?;
        while let Some(batch) = pc.next_messages_blocking() {
            if let Err(e) = batch {
                eprintln!("consume: {e}");
            }
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("consumer stopped: {e}");
    }
}

/// Answers every request with the rendered metrics (a scrape endpoint needs no more).
fn serve(listener: TcpListener, handle: PrometheusHandle) {
    for stream in listener.incoming().flatten() {
        if let Err(e) = answer(stream, &handle) {
            eprintln!("metrics request: {e}");
        }
    }
}

fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut request_line = String::new();
    BufReader::new(&stream).read_line(&mut request_line)?;
    let body = handle.render();
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}
