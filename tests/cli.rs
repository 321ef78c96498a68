//! The `kring` command line against a real broker: topics create/describe/list/delete,
//! produce with key delimiter, headers and partition, consume with every start position,
//! count, exit-at-end and output-format token, perf produce/consume's JSON result, and
//! the clear errors and exit codes for an unreachable broker, an unknown topic and bad
//! arguments.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn kring(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kring"))
        .args(args)
        .env("KRING_BOOTSTRAP", common::bootstrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kring");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("writing stdin");
    drop(input);
    child.wait_with_output().expect("kring ran")
}

/// Runs kring and expects success; answers stdout.
fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = kring(args, stdin);
    assert!(
        out.status.success(),
        "kring {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out.stdout
}

/// Runs kring and expects exit code `code`; answers stderr.
fn fails(args: &[&str], code: i32) -> String {
    let out = kring(args, b"");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "kring {args:?}: {stderr}");
    stderr
}

#[test]
fn topics_lifecycle() {
    let topic = common::unique("cli-topics");
    let created = ok(
        &[
            "topics",
            "create",
            &topic,
            "--partitions",
            "4",
            "--config",
            "retention.ms=3600000",
        ],
        b"",
    );
    assert!(String::from_utf8_lossy(&created).contains("4 partition(s)"));
    let listed = String::from_utf8(ok(&["topics", "list"], b"")).unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l == format!("{topic}\t4 partition(s)")),
        "{listed}"
    );
    let described = String::from_utf8(ok(&["topics", "describe", &topic], b"")).unwrap();
    assert_eq!(
        described
            .lines()
            .filter(|l| l.trim_start().starts_with("partition "))
            .count(),
        4,
        "{described}"
    );
    assert!(described.contains("retention.ms = 3600000"), "{described}");

    let again = fails(&["topics", "create", &topic], 1);
    assert!(again.contains("TOPIC_ALREADY_EXISTS"), "{again}");
    ok(&["topics", "delete", &topic], b"");
    let gone = fails(&["topics", "describe", &topic], 1);
    assert!(gone.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{gone}");
    let listed = String::from_utf8(ok(&["topics", "list"], b"")).unwrap();
    assert!(!listed.contains(&topic), "{listed}");
}

#[test]
fn produce_then_consume_every_way() {
    let topic = common::unique("cli-roundtrip");
    ok(&["topics", "create", &topic, "-p", "2"], b"");
    // Records split on "|", keys on "::"; one record without a key, one empty, and a
    // value holding a newline and a tab.
    let input = b"k1::v1|k2::line\nbreak\tand tab|no key here||k5::last";
    ok(
        &[
            "produce", "-t", &topic, "-p", "1", "-D", "|", "-K", "::", "-H", "src=cli", "-H",
            "flag", "-z", "lz4",
        ],
        input,
    );
    let printed = ok(
        &[
            "consume",
            "-t",
            &topic,
            "-e",
            "-q",
            "-f",
            "%t %p %o %K:%k %S:%s [%h]\\n",
        ],
        b"",
    );
    let expected = format!(
        "{topic} 1 0 2:k1 2:v1 [src=cli,flag]\n\
         {topic} 1 1 2:k2 18:line\nbreak\tand tab [src=cli,flag]\n\
         {topic} 1 2 -1: 11:no key here [src=cli,flag]\n\
         {topic} 1 3 -1: 0: [src=cli,flag]\n\
         {topic} 1 4 2:k5 4:last [src=cli,flag]\n"
    );
    assert_eq!(String::from_utf8(printed).unwrap(), expected);

    // Start positions.
    let values = |args: &[&str]| {
        let mut all = vec!["consume", "-t", topic.as_str(), "-p", "1", "-e", "-q"];
        all.extend_from_slice(args);
        String::from_utf8(ok(&all, b"")).unwrap()
    };
    assert_eq!(values(&["-o", "3", "-f", "%o\\n"]), "3\n4\n");
    assert_eq!(values(&["-o", "-2", "-f", "%o\\n"]), "3\n4\n");
    assert_eq!(values(&["-o", "-99", "-f", "%o\\n"]), "0\n1\n2\n3\n4\n");
    assert_eq!(values(&["-o", "end"]), "");
    assert_eq!(values(&["-o", "s@0", "-f", "%o,"]), "0,1,2,3,4,");
    let future = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 3_600_000)
        .to_string();
    assert_eq!(values(&["-o", &format!("s@{future}")]), "");
    assert_eq!(
        values(&["-c", "2", "-f", "%s;"]),
        "v1;line\nbreak\tand tab;"
    );

    // Newline-delimited input from a file, round-robin over both partitions.
    let file = std::env::temp_dir().join(format!("{topic}.txt"));
    let lines: String = (0..1000).map(|i| format!("line-{i}\n")).collect();
    std::fs::write(&file, &lines).unwrap();
    ok(
        &[
            "produce",
            "-t",
            &topic,
            "-f",
            file.to_str().unwrap(),
            "-a",
            "1",
        ],
        b"",
    );
    let _ = std::fs::remove_file(&file);
    let mut got: Vec<String> = String::from_utf8(ok(
        &["consume", "-t", &topic, "-e", "-q", "-f", "%s\\n"],
        b"",
    ))
    .unwrap()
    .lines()
    .filter(|l| l.starts_with("line-"))
    .map(str::to_string)
    .collect();
    got.sort();
    let mut want: Vec<String> = (0..1000).map(|i| format!("line-{i}")).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn perf_commands_print_the_contract_json() {
    let topic = common::unique("cli-perf");
    ok(&["topics", "create", &topic, "-p", "3"], b"");
    let last_json = |stdout: Vec<u8>| {
        let text = String::from_utf8(stdout).unwrap();
        text.lines().last().unwrap_or_default().to_string()
    };
    let produced = last_json(ok(
        &[
            "perf",
            "produce",
            "-t",
            &topic,
            "--records",
            "20000",
            "--record-size",
            "64",
            "--acks",
            "all",
            "--compression",
            "zstd",
        ],
        b"",
    ));
    assert!(
        produced.starts_with(
            r#"{"client":"kring","op":"produce","records":20000,"bytes":1280000,"elapsed_s":"#
        ),
        "{produced}"
    );
    assert!(!produced.contains("\"p50_ms\":null"), "{produced}");
    let consumed = last_json(ok(
        &["perf", "consume", "-t", &topic, "--records", "20000"],
        b"",
    ));
    assert!(
        consumed.starts_with(
            r#"{"client":"kring","op":"consume","records":20000,"bytes":1280000,"elapsed_s":"#
        ),
        "{consumed}"
    );
    assert!(
        consumed.ends_with(r#""p50_ms":null,"p99_ms":null}"#),
        "{consumed}"
    );
    // More than the topic holds: a clear timeout, not a hang.
    let short = fails(
        &[
            "perf",
            "consume",
            "-t",
            &topic,
            "-n",
            "20001",
            "--timeout",
            "2",
        ],
        1,
    );
    assert!(short.contains("only 20000 of 20001"), "{short}");
}

#[test]
fn clear_errors_and_exit_codes() {
    // Bad arguments: exit 2 with the usage.
    let e = fails(&["consume"], 2);
    assert!(
        e.contains("--topic is required") && e.contains("usage:"),
        "{e}"
    );
    let e = fails(&["frobnicate"], 2);
    assert!(e.contains("unknown command"), "{e}");
    let e = fails(&["consume", "-t", "x", "--bogus"], 2);
    assert!(e.contains("unknown option \"--bogus\""), "{e}");
    let e = fails(&["consume", "-t", "x", "-o", "yesterday"], 2);
    assert!(e.contains("--offset"), "{e}");
    let e = fails(&["produce", "-t", "x", "-X", "linger.ms=soon"], 2);
    assert!(e.contains("linger.ms"), "{e}");
    let e = fails(
        &["produce", "-t", "x", "-a", "1", "--idempotence", "true"],
        2,
    );
    assert!(e.contains("idempotence"), "{e}");
    let e = fails(&["topics", "create", "bad name"], 2);
    assert!(e.contains("not a legal topic name"), "{e}");
    let e = fails(&["consume", "-t", "x", "-f", "%q"], 2);
    assert!(e.contains("unknown token"), "{e}");

    // Unknown topic: exit 1 naming it.
    let missing = common::unique("cli-missing");
    let e = fails(&["consume", "-t", &missing, "-e"], 1);
    assert!(
        e.contains(&format!("topic {missing:?} does not exist")),
        "{e}"
    );
    let e = fails(&["produce", "-t", &missing], 1);
    assert!(e.contains("does not exist"), "{e}");

    // No broker there (a port nothing listens on): exit 1 naming the address.
    let e = fails(&["topics", "list", "-b", "127.0.0.1:1"], 1);
    assert!(e.contains("cannot connect to 127.0.0.1:1"), "{e}");

    // Help is not an error.
    let help = kring(&["produce", "--help"], b"");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--key-delimiter"));
}

/// Runs kring with a hang guard: a child still running after `limit` is killed and the
/// test fails (a guard against a hang, not a timing assertion).
fn kring_guarded(args: &[&str], limit: std::time::Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kring"))
        .args(args)
        .env("KRING_BOOTSTRAP", common::bootstrap())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kring");
    let deadline = std::time::Instant::now() + limit;
    loop {
        if child.try_wait().expect("waiting for kring").is_some() {
            return child.wait_with_output().expect("kring ran");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("kring killed");
            panic!(
                "kring {args:?} still running after {limit:?} (hung); printed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn consume_count_equal_to_the_records_there_are_exits() {
    let topic = common::unique("cli-count");
    ok(&["topics", "create", &topic, "-p", "2"], b"");
    let input: String = (0..10).map(|i| format!("r{i}\n")).collect();
    ok(
        &["produce", "-t", &topic, "-p", "0"],
        &input.as_bytes()[..15],
    ); // r0..r4
    ok(
        &["produce", "-t", &topic, "-p", "1"],
        &input.as_bytes()[15..],
    ); // r5..r9
    let limit = std::time::Duration::from_secs(60);
    // Exactly the count one partition holds, and exactly what the topic holds: no -e,
    // so only the count can end the command.
    for (args, want) in [
        (vec!["-p", "0", "-c", "5"], 5),
        (vec!["-c", "10"], 10),
        (vec!["-c", "7"], 7),
    ] {
        let mut all = vec!["consume", "-t", topic.as_str(), "-q", "-f", "%s\\n"];
        all.extend_from_slice(&args);
        let out = kring_guarded(&all, limit);
        assert!(
            out.status.success(),
            "{all:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), want, "{all:?}: {text}");
        assert!(text.lines().all(|l| l.starts_with('r')), "{text}");
    }
}
