//! The examples' logic run against the broker: `examples/produce.rs`,
//! `examples/consume.rs` and `examples/blocking.rs` are compiled into this test as
//! modules (their `main`s unused), and their functions produce to and read back a topic
//! of their own, checking every record arrives once with the key and value written.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kring::Client;
use kring::admin::{Admin, NewTopic};

mod common;

#[allow(dead_code)]
#[path = "../examples/produce.rs"]
mod produce;

#[allow(dead_code)]
#[path = "../examples/consume.rs"]
mod consume;

#[allow(dead_code)]
#[path = "../examples/blocking.rs"]
mod blocking;

const RECORDS: u64 = 25_000;

async fn new_topic(client: &Client, prefix: &str) -> String {
    let topic = common::unique(prefix);
    Admin::new(client.clone())
        .create_topic(&NewTopic::new(&topic, 3, 1))
        .await
        .expect("create topic");
    topic
}

/// `PARTITION\tOFFSET\tKEY\tVALUE` lines by value, each value at most once.
fn lines_by_value(output: &[u8]) -> BTreeMap<String, (i32, i64, String)> {
    let text = std::str::from_utf8(output).expect("utf-8 output");
    let mut by_value = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [partition, offset, key, value] = fields.as_slice() else {
            panic!("malformed line {line:?}");
        };
        let entry = (
            partition.parse().expect("partition"),
            offset.parse().expect("offset"),
            key.to_string(),
        );
        assert!(
            by_value.insert(value.to_string(), entry).is_none(),
            "{value} read twice"
        );
    }
    by_value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_example_writes_what_consume_example_reads() {
    let client = Client::connect(common::config()).await.expect("connect");
    let topic = new_topic(&client, "examples").await;

    let report = produce::produce(&client, &topic, RECORDS)
        .await
        .expect("produce");
    assert_eq!(
        report,
        produce::Report {
            acknowledged: RECORDS,
            failed: 0
        }
    );

    let out = Arc::new(Mutex::new(Vec::new()));
    let read = consume::consume_topic(&client, &topic, false, out.clone())
        .await
        .expect("consume");
    assert_eq!(read, RECORDS);
    let output = std::mem::take(&mut *out.lock().unwrap());
    let by_value = lines_by_value(&output);
    assert_eq!(by_value.len() as u64, RECORDS);
    // Records of one key are in one partition, in the order sent.
    let mut partition_of_key = BTreeMap::new();
    let mut last_offset_of_key = BTreeMap::new();
    for i in 0..RECORDS {
        let value = produce::value_of(i);
        let (partition, offset, key) = by_value
            .get(&value)
            .unwrap_or_else(|| panic!("{value} not read"));
        assert_eq!(key, &format!("key-{}", i % 100));
        assert_eq!(
            *partition_of_key.entry(key.clone()).or_insert(*partition),
            *partition,
            "{key} in two partitions"
        );
        if let Some(last) = last_offset_of_key.insert(key.clone(), *offset) {
            assert!(last < *offset, "{key}: {value} at {offset}, before {last}");
        }
    }
    client.close();
}

#[test]
fn blocking_example_reads_back_what_it_wrote() {
    let client = common::client(common::config());
    let topic = kring::client::block_on(new_topic(&client, "examples-blocking"));
    client.close();
    let read = blocking::run(&common::bootstrap(), &topic, 500).expect("blocking example");
    assert_eq!(read, 500);
}
