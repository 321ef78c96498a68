//! The `kring` command line against a real broker: topics create/describe/list/delete,
//! produce with key delimiter, headers and partition, consume with every start position,
//! count, exit-at-end and output-format token, perf produce/consume's JSON result, and
//! the clear errors and exit codes for an unreachable broker, an unknown topic and bad
//! arguments (clap's errors, typo suggestions), `kring completions` for bash, zsh and
//! fish, and `--help` of commands and subcommands. The admin commands (cluster, configs,
//! records, groups, acls, topics alter-partitions) are checked with Kafka's Java tools:
//! what kring changes, they report.

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
    let json = String::from_utf8(ok(&["topics", "describe", &topic, "--json"], b"")).unwrap();
    assert!(
        json.starts_with(&format!(r#"{{"name":"{topic}","id":"#)),
        "{json}"
    );
    assert_eq!(json.matches(r#"{"partition":"#).count(), 4, "{json}");
    assert!(
        json.contains(
            r#"{"name":"retention.ms","value":"3600000","source":"DYNAMIC_TOPIC_CONFIG"}"#
        ),
        "{json}"
    );
    let listed = String::from_utf8(ok(&["topics", "list", "--json"], b"")).unwrap();
    assert!(
        listed.contains(&format!(
            r#"{{"name":"{topic}","partitions":4,"internal":false}}"#
        )),
        "{listed}"
    );

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
    // The same with a delivery future per record instead of the delivery handler.
    let futures_topic = common::unique("cli-perf-futures");
    ok(&["topics", "create", &futures_topic, "-p", "3"], b"");
    let with_futures = last_json(ok(
        &[
            "perf",
            "produce",
            "-t",
            &futures_topic,
            "--records",
            "10000",
            "--record-size",
            "64",
            "--deliveries",
            "futures",
        ],
        b"",
    ));
    assert!(
        with_futures.starts_with(
            r#"{"client":"kring","op":"produce","records":10000,"bytes":640000,"elapsed_s":"#
        ),
        "{with_futures}"
    );
    assert!(!with_futures.contains("\"p50_ms\":null"), "{with_futures}");
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
        consumed
            .contains(r#""p50_ms":null,"p99_ms":null,"p999_ms":null,"max_ms":null,"io_backend":""#),
        "{consumed}"
    );
    // The line names the backend that ran: the one asked for, when one is.
    let on_epoll = last_json(ok(
        &[
            "perf",
            "consume",
            "-t",
            &topic,
            "--records",
            "100",
            "--property",
            "kring.io.backend=epoll",
        ],
        b"",
    ));
    assert!(on_epoll.ends_with(r#""io_backend":"epoll"}"#), "{on_epoll}");
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
        e.contains("required arguments were not provided")
            && e.contains("--topic <TOPIC>")
            && e.contains("Usage: kring consume"),
        "{e}"
    );
    let e = fails(&["frobnicate"], 2);
    assert!(e.contains("unrecognized subcommand 'frobnicate'"), "{e}");
    let e = fails(&["consume", "-t", "x", "--bogus"], 2);
    assert!(e.contains("unexpected argument '--bogus'"), "{e}");
    // A check made after parsing is printed the same way: the reason, then the usage.
    let e = fails(&["consume", "-t", "x", "-p", "0", "-G", "g"], 2);
    assert!(
        e.contains("--partition is not for -G") && e.contains("Usage: kring consume"),
        "{e}"
    );
    let e = fails(&["consume", "-t", "x", "stray"], 2);
    assert!(e.contains("unexpected argument 'stray'"), "{e}");
    let e = fails(&["consume", "-t", "x", "-c"], 2);
    assert!(e.contains("a value is required for '--count <N>'"), "{e}");
    let e = fails(&["consume", "-t", "x", "-c", "many"], 2);
    assert!(e.contains("invalid value 'many' for '--count <N>'"), "{e}");
    let e = fails(&["produce", "-t", "x", "-t", "y"], 2);
    assert!(e.contains("cannot be used multiple times"), "{e}");
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
    let e = fails(
        &[
            "produce",
            "-t",
            &missing,
            "-X",
            "topic.metadata.propagation.max.ms=200",
        ],
        1,
    );
    assert!(
        e.contains(&format!(
            "topic {missing:?} is not in the cluster's metadata yet; waiting up to 200ms"
        )),
        "{e}"
    );
    assert!(e.contains("does not exist after waiting 200ms"), "{e}");

    // No broker there (a port nothing listens on): exit 1 naming the address.
    let e = fails(&["topics", "list", "-b", "127.0.0.1:1"], 1);
    assert!(e.contains("cannot connect to 127.0.0.1:1"), "{e}");

    // Help is not an error.
    let help = kring(&["produce", "--help"], b"");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--key-delimiter"));
    for args in [
        &["--help"][..],
        &["help", "consume"],
        &["perf", "produce", "--help"],
        &["users", "scram", "set", "-h"],
        &["--version"],
        &["version"],
    ] {
        let out = kring(args, b"");
        assert!(out.status.success(), "kring {args:?}");
        assert!(!out.stdout.is_empty(), "kring {args:?} printed nothing");
    }
}

#[test]
fn typos_get_a_suggestion() {
    let e = fails(&["prodcue"], 2);
    assert!(e.contains("similar subcommand exists: 'produce'"), "{e}");
    let e = fails(&["consume", "--topc", "x"], 2);
    assert!(e.contains("similar argument exists: '--topic'"), "{e}");
    let e = fails(&["topics", "lst"], 2);
    assert!(e.contains("'list'"), "{e}");
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kring"),
        ("fish", "complete -c kring"),
    ] {
        let script = text(ok(&["completions", shell], b""));
        assert!(script.contains(marker), "{shell}: {script}");
        for command in ["produce", "consume", "topics", "perf"] {
            assert!(script.contains(command), "{shell} script lacks {command}");
        }
        if shell == "bash" && Command::new("bash").arg("--version").output().is_ok() {
            let dir = std::env::temp_dir().join(common::unique("kring-completion"));
            std::fs::write(&dir, &script).expect("writing the script");
            let check = Command::new("bash").arg("-n").arg(&dir).output();
            let _ = std::fs::remove_file(&dir);
            let check = check.expect("bash -n ran");
            assert!(
                check.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&check.stderr)
            );
        }
    }
    let e = fails(&["completions", "tcsh"], 2);
    assert!(e.contains("invalid value 'tcsh'"), "{e}");
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

// ------------------------------------------------------------------ admin commands

/// Runs a Kafka Java tool (`scripts/kafka run-class`) to success; answers stdout.
fn java(class: &str, args: &[&str]) -> String {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .arg("run-class")
        .arg(class)
        .args(args)
        .args(["--bootstrap-server", &common::bootstrap()])
        .output()
        .expect("scripts/kafka");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{class} {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).expect("UTF-8 output")
}

fn java_partition_count(topic: &str) -> String {
    let out = java(
        "org.apache.kafka.tools.TopicCommand",
        &["--describe", "--topic", topic],
    );
    out.split_whitespace()
        .skip_while(|w| *w != "PartitionCount:")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"))
        .to_string()
}

#[test]
fn topics_alter_partitions() {
    let topic = common::unique("cli-partitions");
    ok(&["topics", "create", &topic, "-p", "2"], b"");
    let said = text(ok(
        &["topics", "alter-partitions", &topic, "5", "--validate-only"],
        b"",
    ));
    assert!(said.contains("would have 5"), "{said}");
    assert_eq!(java_partition_count(&topic), "2");
    ok(&["topics", "alter-partitions", &topic, "3"], b"");
    assert_eq!(java_partition_count(&topic), "3");

    let e = fails(&["topics", "alter-partitions", &topic, "1"], 1);
    assert!(
        e.contains("INVALID_PARTITIONS") && e.contains(&topic),
        "{e}"
    );
    assert_eq!(java_partition_count(&topic), "3");
    let missing = common::unique("cli-missing");
    let e = fails(&["topics", "alter-partitions", &missing, "4"], 1);
    assert!(
        e.contains("UNKNOWN_TOPIC_OR_PARTITION") && e.contains(&missing),
        "{e}"
    );
    let e = fails(&["topics", "alter-partitions", &topic, "many"], 2);
    assert!(e.contains("invalid value 'many' for '<COUNT>'"), "{e}");
    ok(&["topics", "delete", &topic], b"");
}

#[test]
fn configs_describe_and_alter() {
    let topic = common::unique("cli-configs");
    ok(&["topics", "create", &topic], b"");
    ok(
        &[
            "configs",
            "alter",
            "topic",
            &topic,
            "--set",
            "retention.ms=1000",
            "--set",
            "cleanup.policy=compact",
        ],
        b"",
    );
    let java_view = || {
        java(
            common::java_tools().config_command,
            &[
                "--describe",
                "--entity-type",
                "topics",
                "--entity-name",
                &topic,
            ],
        )
    };
    let view = java_view();
    assert!(view.contains("retention.ms=1000"), "{view}");
    assert!(view.contains("cleanup.policy=compact"), "{view}");

    // One bad name: nothing of the request is applied.
    let e = fails(
        &[
            "configs",
            "alter",
            "topic",
            &topic,
            "--set",
            "retention.ms=5",
            "--set",
            "no.such.config=1",
        ],
        1,
    );
    assert!(e.contains("INVALID_CONFIG") && e.contains(&topic), "{e}");
    let json = text(ok(&["configs", "describe", "topic", &topic, "--json"], b""));
    assert!(
        json.contains(r#"{"name":"retention.ms","value":"1000","source":"DYNAMIC_TOPIC_CONFIG""#),
        "{json}"
    );
    ok(
        &[
            "configs",
            "alter",
            "topic",
            &topic,
            "--delete",
            "retention.ms",
        ],
        b"",
    );
    let view = java_view();
    assert!(!view.contains("retention.ms"), "{view}");
    let human = text(ok(&["configs", "describe", "topic", &topic], b""));
    assert!(
        human.contains("cleanup.policy = compact  (DYNAMIC_TOPIC_CONFIG)"),
        "{human}"
    );

    let all = text(ok(&["configs", "describe", "broker", "1", "--all"], b""));
    assert!(all.contains("num.io.threads = "), "{all}");
    let e = fails(&["configs", "describe", "queue", "x"], 2);
    assert!(e.contains("topic or a broker"), "{e}");
    let e = fails(&["configs", "alter", "topic", &topic], 2);
    assert!(e.contains("nothing to change"), "{e}");
    let e = fails(&["configs", "alter", "broker", "one", "--set", "a=b"], 2);
    assert!(e.contains("expected an id or default"), "{e}");
    ok(&["topics", "delete", &topic], b"");
}

#[test]
fn cluster_reports_id_brokers_features_and_versions() {
    let id = java("org.apache.kafka.tools.ClusterTool", &["cluster-id"]);
    let id = id.trim().trim_start_matches("Cluster ID: ").to_string();
    let json = text(ok(&["cluster", "--json"], b""));
    assert!(
        json.starts_with(&format!(r#"{{"cluster_id":"{id}","controller":"#)),
        "{json}"
    );
    assert!(json.contains(r#""name":"metadata.version""#), "{json}");
    let human = text(ok(&["cluster", "--api-versions"], b""));
    assert!(human.contains(&format!("cluster {id}")), "{human}");
    assert!(human.contains("(controller)"), "{human}");
    assert!(
        human
            .lines()
            .any(|l| l.contains(" DescribeCluster ") && l.contains("kring uses")),
        "{human}"
    );
}

#[test]
fn records_delete_and_offsets() {
    let topic = common::unique("cli-records");
    ok(&["topics", "create", &topic], b"");
    ok(&["produce", "-t", &topic, "-p", "0"], b"a\nb\nc\nd\ne\n");
    let said = text(ok(&["records", "delete", &format!("{topic}:0@2")], b""));
    assert_eq!(said.trim(), format!("{topic}:0 now starts at offset 2"));
    let earliest = java(
        "org.apache.kafka.tools.GetOffsetShell",
        &["--topic", &topic, "--time", "-2"],
    );
    assert_eq!(earliest.trim(), format!("{topic}:0:2"));
    let latest = text(ok(
        &["records", "offsets", &topic, "--at", "latest", "--json"],
        b"",
    ));
    assert!(
        latest.contains(&format!(r#"{{"topic":"{topic}","partition":0,"offset":5,"#)),
        "{latest}"
    );

    let e = fails(&["records", "delete", &format!("{topic}:0@99")], 1);
    assert!(
        e.contains("OFFSET_OUT_OF_RANGE") && e.contains(&format!("{topic}-0")),
        "{e}"
    );
    let e = fails(&["records", "delete", &format!("{topic}:0")], 2);
    assert!(e.contains("no @POINT"), "{e}");
    let all = text(ok(
        &["records", "delete", &format!("{topic}@end"), "--json"],
        b"",
    ));
    assert_eq!(
        all.trim(),
        format!(r#"[{{"topic":"{topic}","partition":0,"low_watermark":5}}]"#)
    );
    ok(&["topics", "delete", &topic], b"");
}

/// ConsumerGroupCommand --describe: (partition, current offset, lag) rows of `topic`.
fn java_group_rows(group: &str, topic: &str) -> Vec<(String, String, String)> {
    let out = java(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--describe", "--group", group],
    );
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 6 && w[1] == topic)
                .then(|| (w[2].to_string(), w[3].to_string(), w[5].to_string()))
        })
        .collect()
}

#[test]
fn groups_list_describe_reset_and_delete() {
    let topic = common::unique("cli-groups");
    let group = common::unique("cli-group");
    ok(&["topics", "create", &topic], b"");
    ok(&["produce", "-t", &topic, "-p", "0"], b"1\n2\n3\n4\n");
    let consumed = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
        .args([
            "run-class",
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
        ])
        .args(["--bootstrap-server", &common::bootstrap()])
        .args(["--topic", &topic, "--group", &group, "--from-beginning"])
        .args(["--max-messages", "4"])
        .output()
        .unwrap();
    assert!(consumed.status.success(), "{consumed:?}");
    ok(&["produce", "-t", &topic, "-p", "0"], b"5\n6\n");

    let listed = text(ok(&["groups", "list"], b""));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&format!("{group}\tEmpty"))),
        "{listed}"
    );
    let described = text(ok(&["groups", "describe", &group], b""));
    let row = described
        .lines()
        .find(|l| l.trim_start().starts_with(&topic))
        .unwrap_or_else(|| panic!("{described}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..5], &["0", "4", "6", "2"], "{described}");
    assert_eq!(
        java_group_rows(&group, &topic),
        vec![("0".into(), "4".into(), "2".into())]
    );
    let json = text(ok(&["groups", "describe", &group, "--json"], b""));
    assert!(
        json.contains(&format!(
            r#"{{"topic":"{topic}","partition":0,"committed":4,"end":6,"lag":2,"member":null}}"#
        )),
        "{json}"
    );

    let dry = text(ok(
        &[
            "groups",
            "reset-offsets",
            &group,
            "--topic",
            &topic,
            "--to",
            "earliest",
            "--dry-run",
        ],
        b"",
    ));
    assert!(dry.contains(&format!("would set {topic}:0 to 0")), "{dry}");
    assert_eq!(java_group_rows(&group, &topic)[0].1, "4");
    ok(
        &[
            "groups",
            "reset-offsets",
            &group,
            "--topic",
            &format!("{topic}:0"),
            "--to",
            "1",
        ],
        b"",
    );
    assert_eq!(
        java_group_rows(&group, &topic)[0],
        ("0".into(), "1".into(), "5".into())
    );
    let e = fails(&["groups", "reset-offsets", &group, "--topic", &topic], 2);
    assert!(e.contains("--to is needed"), "{e}");

    ok(
        &["groups", "delete-offsets", &group, "--topic", &topic],
        b"",
    );
    if common::kafka_major() >= 4 {
        ok(&["groups", "delete", &group], b"");
    } else {
        // Kafka 3.x removes an empty group with its last offsets: it may be gone already.
        let out = kring(&["groups", "delete", &group], b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || stderr.contains("GROUP_ID_NOT_FOUND"),
            "{stderr}"
        );
    }
    let java_list = java(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--list"],
    );
    assert!(!java_list.lines().any(|l| l.trim() == group), "{java_list}");
    let e = fails(&["groups", "delete", &group], 1);
    assert!(
        e.contains("GROUP_ID_NOT_FOUND") && e.contains(&group),
        "{e}"
    );
    let e = fails(&["groups", "describe", &group], 1);
    assert!(
        e.contains("GROUP_ID_NOT_FOUND") && e.contains(&group),
        "{e}"
    );
    ok(&["topics", "delete", &topic], b"");
}

#[test]
fn acls_create_list_delete() {
    // A topic of this test's own: ACLs elsewhere would change other tests' rights.
    let topic = common::unique("cli-acl");
    ok(
        &[
            "acls",
            "create",
            "--allow",
            "User:cli-reader",
            "--operation",
            "read",
            "--operation",
            "describe",
            "--topic",
            &topic,
        ],
        b"",
    );
    let java_list = || {
        java(
            common::java_tools().acl_command,
            &["--list", "--topic", &topic],
        )
    };
    let listed = java_list();
    assert!(
        listed.contains("principal=User:cli-reader, host=*, operation=READ"),
        "{listed}"
    );
    assert!(listed.contains("operation=DESCRIBE"), "{listed}");
    let json = text(ok(&["acls", "list", "--topic", &topic, "--json"], b""));
    assert!(
        json.contains(&format!(
            r#"{{"resource_type":"TOPIC","resource":"{topic}","pattern":"LITERAL","principal":"User:cli-reader","host":"*","operation":"READ","permission":"ALLOW"}}"#
        )),
        "{json}"
    );

    let e = fails(
        &[
            "acls",
            "create",
            "--allow",
            "cli-reader",
            "--operation",
            "write",
            "--topic",
            &topic,
        ],
        2,
    );
    assert!(e.contains("has no type"), "{e}");
    let e = fails(&["acls", "delete"], 2);
    assert!(e.contains("delete every ACL"), "{e}");
    let e = fails(
        &[
            "acls",
            "create",
            "--allow",
            "User:x",
            "--operation",
            "reed",
            "--topic",
            &topic,
        ],
        2,
    );
    assert!(e.contains("\"reed\""), "{e}");

    let said = text(ok(
        &[
            "acls",
            "delete",
            "--topic",
            &topic,
            "--operation",
            "describe",
        ],
        b"",
    ));
    assert!(said.starts_with("deleted 1 ACL(s)"), "{said}");
    let listed = java_list();
    assert!(
        !listed.contains("DESCRIBE") && listed.contains("READ"),
        "{listed}"
    );
    ok(&["acls", "delete", "--topic", &topic], b"");
    assert!(!java_list().contains("principal="));
}

#[test]
fn users_scram_and_quotas() {
    let user = common::unique("cli-user");
    let java_view = || {
        java(
            common::java_tools().config_command,
            &[
                "--describe",
                "--entity-type",
                "users",
                "--entity-name",
                &user,
            ],
        )
    };
    ok(
        &[
            "users",
            "scram",
            "set",
            &user,
            "--password-file",
            "-",
            "--iterations",
            "4096",
        ],
        b"pw\n",
    );
    assert!(
        java_view().contains("SCRAM-SHA-256=iterations=4096"),
        "{}",
        java_view()
    );
    let listed = text(ok(&["users", "scram", "list", &user, "--json"], b""));
    assert_eq!(
        listed.trim(),
        format!(
            r#"[{{"user":"{user}","credentials":[{{"mechanism":"SCRAM-SHA-256","iterations":4096}}]}}]"#
        )
    );
    let e = fails(
        &[
            "users",
            "scram",
            "set",
            &user,
            "--password-file",
            "-",
            "--iterations",
            "10",
        ],
        2,
    );
    assert!(e.contains("at least 4096"), "{e}");
    ok(&["users", "scram", "delete", &user], b"");
    assert!(!java_view().contains("SCRAM"), "{}", java_view());
    let e = fails(&["users", "scram", "delete", &user], 1);
    assert!(e.contains("RESOURCE_NOT_FOUND") && e.contains(&user), "{e}");

    ok(
        &[
            "quotas",
            "alter",
            "--user",
            &user,
            "--set",
            "producer_byte_rate=4096",
        ],
        b"",
    );
    assert!(
        java_view().contains("producer_byte_rate=4096.0"),
        "{}",
        java_view()
    );
    let listed = text(ok(&["quotas", "list", "--user", &user], b""));
    assert_eq!(
        listed.trim(),
        format!("user={user}\tproducer_byte_rate=4096")
    );
    let e = fails(
        &[
            "quotas",
            "alter",
            "--user",
            &user,
            "--set",
            "producer_byte_rate=fast",
        ],
        2,
    );
    assert!(e.contains("fast"), "{e}");
    ok(
        &[
            "quotas",
            "alter",
            "--user",
            &user,
            "--delete",
            "producer_byte_rate",
        ],
        b"",
    );
    assert!(!java_view().contains("byte_rate"), "{}", java_view());
}

/// What the Java console consumer reads of `topic` from the start, `count` records,
/// with `isolation` (read_committed or read_uncommitted).
fn java_console_read(topic: &str, isolation: &str, count: usize) -> Vec<String> {
    let out = java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &[
            "--topic",
            topic,
            "--from-beginning",
            "--isolation-level",
            isolation,
            "--max-messages",
            &count.to_string(),
            "--timeout-ms",
            "30000",
        ],
    );
    out.lines().map(str::to_string).collect()
}

#[test]
fn transactional_produce_is_read_whole_by_the_java_console_consumer() {
    let topic = common::unique("cli-txn");
    let id = common::unique("cli-txn-id");
    ok(&["topics", "create", &topic, "--partitions", "1"], b"");
    let input: String = (0..10).map(|i| format!("c-{i}\n")).collect();
    let out = kring(
        &[
            "produce",
            "-t",
            &topic,
            "--transactional-id",
            &id,
            "--txn-records",
            "4",
        ],
        input.as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("committed 3 transaction(s) of 10 record(s)"),
        "4 + 4 + 2: {stderr}"
    );

    // An aborted transaction in between, written with the library.
    let mut config = common::config();
    config.producer.transactional_id = Some(id.clone());
    let client = common::client(config);
    let producer = kring::producer::Producer::new_blocking(client.clone()).unwrap();
    producer.init_transactions_blocking().unwrap();
    producer.begin_transaction().unwrap();
    for i in 0..5 {
        let _delivery = producer
            .send_blocking(
                kring::producer::ProducerRecord::new(&topic).with_value(format!("ab-{i}")),
            )
            .unwrap();
    }
    producer.flush_blocking().unwrap();
    producer.abort_transaction_blocking().unwrap();
    producer.close_blocking().unwrap();
    client.close();

    ok(
        &["produce", "-t", &topic, "--transactional-id", &id],
        b"tail-0\ntail-1\n",
    );
    let mut committed: Vec<String> = (0..10).map(|i| format!("c-{i}")).collect();
    committed.extend(["tail-0".to_string(), "tail-1".to_string()]);
    assert_eq!(java_console_read(&topic, "read_committed", 12), committed);
    let all = java_console_read(&topic, "read_uncommitted", 17);
    let aborted: Vec<&String> = all.iter().filter(|v| v.starts_with("ab-")).collect();
    assert_eq!(
        aborted.len(),
        5,
        "read_uncommitted sees the aborted records: {all:?}"
    );

    // Bad arguments: clear errors, exit code 2.
    let e = fails(&["produce", "-t", &topic, "--txn-records", "5"], 2);
    assert!(e.contains("--txn-records needs --transactional-id"), "{e}");
    let e = fails(
        &[
            "produce",
            "-t",
            &topic,
            "--transactional-id",
            &id,
            "--txn-records",
            "0",
        ],
        2,
    );
    assert!(e.contains("1 or more"), "{e}");
}

/// `--stats` prints kring's metrics on stderr when the command ends: the producer's
/// acknowledged records and the consumer's records handed out, for this run's topic.
#[test]
fn perf_stats_print_the_metrics_of_the_run() {
    let topic = format!("cli-stats-{}", std::process::id());
    ok(&["topics", "create", &topic, "--partitions", "2"], b"");
    let out = kring(
        &["perf", "produce", "-t", &topic, "-n", "3000", "--stats"],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let records = format!("kring_producer_records_total{{topic=\"{topic}\"}} 3000");
    assert!(stderr.lines().any(|l| l == records), "{stderr}");
    assert!(
        stderr.contains("kring_broker_requests_total{broker="),
        "{stderr}"
    );
    // Every record acknowledged and the producer closed: no sink's gauge still counts
    // records it sampled while they were on their way.
    let queued: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("kring_producer_queued_records{"))
        .collect();
    assert!(!queued.is_empty(), "{stderr}");
    assert!(queued.iter().all(|l| l.ends_with("} 0")), "{queued:?}");
    assert!(
        stderr.lines().any(|l| l == "kring_producer_buffer_bytes 0"),
        "{stderr}"
    );
    let out = kring(
        &["perf", "consume", "-t", &topic, "-n", "3000", "--stats"],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let consumed = format!("kring_consumer_records_total{{topic=\"{topic}\"}} 3000");
    assert!(stderr.lines().any(|l| l == consumed), "{stderr}");
    // Without the option nothing is recorded, so nothing is printed.
    let out = kring(&["perf", "consume", "-t", &topic, "-n", "3000"], b"");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("kring_consumer_records_total"));
    ok(&["topics", "delete", &topic], b"");
}
