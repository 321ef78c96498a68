//! `kring perf produce --transactional-id ID --txn-records N` against the real broker:
//! the records go out in transactions of exactly N (the last one shorter), every one
//! committed — on a one-partition topic each commit leaves one control record (the
//! transaction marker) after its records, so the log's end offset tells how many
//! transactions there were — and read_committed readers see every record; the two
//! options only come together.

mod common;

use std::process::{Command, Output};

use kring::config::IsolationLevel;
use kring::consumer::Consumer;

fn kring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kring"))
        .args(args)
        .env("KRING_BOOTSTRAP", common::bootstrap())
        .output()
        .expect("running kring")
}

/// (earliest, latest) of partition 0 as a reader with `isolation` sees them.
fn offsets(topic: &str, isolation: IsolationLevel) -> (i64, i64) {
    let mut config = common::config();
    config.consumer.isolation_level = isolation;
    let client = common::client(config);
    let consumer = Consumer::new(client.clone()).expect("consumer");
    let offsets = kring::client::block_on(consumer.offsets(topic, 0)).expect("offsets");
    client.close();
    offsets
}

#[test]
fn perf_produce_commits_transactions_of_n_records() {
    let topic = common::unique("perf-txn");
    let client = common::client(common::config());
    common::create_topic(&client, &topic, 1, 1, &[]);
    client.close();
    let id = common::unique("perf-txn-id");
    let out = kring(&[
        "perf",
        "produce",
        "-t",
        &topic,
        "-n",
        "2500",
        "-s",
        "64",
        "--acks",
        "all",
        "--compression",
        "lz4",
        "--transactional-id",
        &id,
        "--txn-records",
        "1000",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            r#"{"client":"kring","op":"produce","records":2500,"bytes":160000,"elapsed_s":"#
        ) && !last.contains(r#""p50_ms":null"#),
        "{last}"
    );
    // 2,500 records and 3 commit markers (1,000 + 1,000 + 500); all committed, so the
    // last stable offset a read_committed reader gets is the end of the log too.
    assert_eq!(offsets(&topic, IsolationLevel::ReadUncommitted), (0, 2503));
    assert_eq!(offsets(&topic, IsolationLevel::ReadCommitted), (0, 2503));
}

#[test]
fn transaction_options_come_together() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--txn-records", "10"],
            "--txn-records needs --transactional-id",
        ),
        (
            &["--transactional-id", "x"],
            "--transactional-id needs --txn-records",
        ),
        (
            &["--transactional-id", "x", "--txn-records", "0"],
            "--txn-records must be at least 1",
        ),
        (
            &["--transactional-id", "", "--txn-records", "5"],
            "--transactional-id needs a non-empty id",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec!["perf", "produce", "-t", "no-such-topic-needed"];
        args.extend_from_slice(extra);
        let out = kring(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
