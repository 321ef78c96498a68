//! TLS and SASL against the real broker's secured listeners (`scripts/kafka up` opens
//! them beside PLAINTEXT: SSL 9192, MTLS 9292, SASL_PLAINTEXT 9392, SASL_SSL 9492,
//! REAUTH 9592, certificates under its state dir's `tls/`): produce and consume over
//! each protocol and mechanism, and every failure a misconfigured client meets named
//! clearly and promptly.

mod common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::{create_topic, unique};
use kring::client::{BlockingConnection, ConnectionConfig};
use kring::config::{Compression, OAuthToken, Secret, TokenProvider};
use kring::consumer::{Consumer, Offset};
use kring::producer::{Producer, ProducerRecord};
use kring::protocol::messages::MetadataRequest;
use kring::{Client, Config, Error, IoError};

const SSL: &str = "127.0.0.1:9192";
const MTLS: &str = "127.0.0.1:9292";
const SASL_PLAINTEXT: &str = "127.0.0.1:9392";
const SASL_SSL: &str = "127.0.0.1:9492";
const REAUTH: &str = "127.0.0.1:9592";

fn tls_dir() -> PathBuf {
    let state = std::env::var("KRING_KAFKA_DIR").map_or_else(
        |_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kafka"),
        PathBuf::from,
    );
    state.join("tls")
}

fn tls_file(name: &str) -> String {
    tls_dir().join(name).display().to_string()
}

/// A configuration for `bootstrap` with these properties.
fn secured(bootstrap: &str, props: &[(&str, &str)]) -> Config {
    let mut c = Config::new([bootstrap]);
    c.net.workers = 2;
    c.net.connect_timeout = Duration::from_secs(5);
    for (k, v) in props {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    c
}

fn ssl() -> Vec<(&'static str, String)> {
    vec![
        ("security.protocol", "SSL".into()),
        ("ssl.ca.location", tls_file("ca.pem")),
    ]
}

fn props<'a>(list: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    list.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Runs `f` on a helper thread and fails the test if it does not return within a
/// minute (a guard against a hang, not a timing assertion).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("finished instead of hanging")
}

/// Writes `values` to partition 0 of `topic` and returns their offsets.
fn produce(client: &Client, topic: &str, values: &[String]) -> Vec<i64> {
    let producer = Producer::new_blocking(client.clone()).unwrap();
    let deliveries: Vec<_> = values
        .iter()
        .map(|v| {
            producer
                .send_blocking(
                    ProducerRecord::new(topic)
                        .with_partition(0)
                        .with_value(v.clone()),
                )
                .unwrap()
        })
        .collect();
    let offsets = deliveries
        .into_iter()
        .map(|d| d.wait().expect("written").offset)
        .collect();
    producer.close_blocking().unwrap();
    offsets
}

/// Reads `count` values from partition 0 of `topic`, from the oldest offset.
fn read(client: &Client, topic: &str, count: usize) -> Vec<String> {
    let consumer = Consumer::new(client.clone()).unwrap();
    let mut pc = consumer
        .consume_partition_blocking(topic, 0, Offset::Oldest)
        .unwrap();
    let mut got = Vec::new();
    while got.len() < count {
        for m in pc.next_messages_blocking().unwrap().unwrap() {
            got.push(String::from_utf8(m.value.unwrap().to_vec()).unwrap());
        }
    }
    pc.close();
    got
}

/// Produces 200 records with each codec to a new topic through `config` and reads them
/// back through the same configuration.
fn round_trip(config: Config, what: &str) {
    let client = Client::connect_blocking(config.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let topic = unique(&format!("kring-sec-{codec:?}").to_lowercase());
        create_topic(&client, &topic, 1, 1, &[]);
        let mut c = config.clone();
        c.producer.compression = codec;
        let client = Client::connect_blocking(c).unwrap();
        let values: Vec<String> = (0..200)
            .map(|i| format!("{what}-{i}-{}", "z".repeat(i % 50)))
            .collect();
        let offsets = produce(&client, &topic, &values);
        assert_eq!(offsets, (0..200).collect::<Vec<i64>>(), "{what} {codec:?}");
        assert_eq!(
            read(&client, &topic, values.len()),
            values,
            "{what} {codec:?}"
        );
    }
}

#[test]
fn produce_and_consume_over_tls() {
    round_trip(secured(SSL, &props(&ssl())), "ssl");
}

#[test]
fn produce_and_consume_over_mutual_tls() {
    let mut p = ssl();
    p.push(("ssl.certificate.location", tls_file("client.pem")));
    p.push(("ssl.key.location", tls_file("client.key")));
    round_trip(secured(MTLS, &props(&p)), "mtls");
}

#[test]
fn an_encrypted_client_key_is_decrypted_with_ssl_key_password() {
    let mut p = ssl();
    p.push(("ssl.certificate.location", tls_file("client.pem")));
    p.push(("ssl.key.location", tls_file("client-encrypted.key")));
    let mut right = p.clone();
    right.push(("ssl.key.password", "kring-key-secret".into()));
    let client = Client::connect_blocking(secured(MTLS, &props(&right))).expect("mTLS");
    let topic = unique("kring-sec-encrypted-key");
    create_topic(&client, &topic, 1, 1, &[]);
    let values = vec!["sealed".to_string(), "key".to_string()];
    assert_eq!(produce(&client, &topic, &values), vec![0, 1]);
    assert_eq!(read(&client, &topic, 2), values);

    // A wrong password and a missing one are named, and the password never shown.
    let mut wrong = p.clone();
    wrong.push(("ssl.key.password", "not-the-password".into()));
    let err = Client::connect_blocking(secured(MTLS, &props(&wrong)))
        .expect_err("wrong password")
        .to_string();
    assert!(err.contains("wrong ssl.key.password"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");
    let err = Client::connect_blocking(secured(MTLS, &props(&p)))
        .expect_err("no password")
        .to_string();
    assert!(err.contains("set ssl.key.password"), "{err}");
}

fn sasl(mechanism: &str, tls: bool) -> Vec<(&'static str, String)> {
    let mut p = vec![
        (
            "security.protocol",
            if tls { "SASL_SSL" } else { "SASL_PLAINTEXT" }.to_string(),
        ),
        ("sasl.mechanism", mechanism.to_string()),
    ];
    if tls {
        p.push(("ssl.ca.location", tls_file("ca.pem")));
    }
    if mechanism == "OAUTHBEARER" {
        p.push((
            "sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"kring\";"
                .to_string(),
        ));
    } else {
        p.push(("sasl.username", "kring".into()));
        p.push(("sasl.password", "kring-secret".into()));
    }
    p
}

#[test]
fn produce_and_consume_with_every_sasl_mechanism_with_and_without_tls() {
    for tls in [false, true] {
        for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] {
            let bootstrap = if tls { SASL_SSL } else { SASL_PLAINTEXT };
            let what = format!("{mechanism} tls={tls}");
            round_trip(secured(bootstrap, &props(&sasl(mechanism, tls))), &what);
        }
    }
}

#[test]
fn java_jaas_configs_authenticate() {
    let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                username=\"kring\" password=\"kring-secret\";";
    let c = secured(
        SASL_SSL,
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", &tls_file("ca.pem")),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", jaas),
        ],
    );
    let client = Client::connect_blocking(c).expect("connects with a Java-style configuration");
    assert!(!client.metadata().brokers.is_empty());
}

/// The error `config` fails to connect with, within a minute.
fn connect_error(config: Config) -> Error {
    within_a_minute(move || match Client::connect_blocking(config) {
        Ok(_) => panic!("connected although it should not"),
        Err(e) => e,
    })
}

#[test]
fn wrong_passwords_fail_at_once_naming_the_mechanism() {
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let mut p = sasl(mechanism, false);
        for (k, v) in &mut p {
            if *k == "sasl.password" {
                *v = "not-the-password".into();
            }
        }
        let err = connect_error(secured(SASL_PLAINTEXT, &props(&p))).to_string();
        assert!(err.contains("authentication"), "{mechanism}: {err}");
        assert!(err.contains(mechanism), "{mechanism}: {err}");
        assert!(
            !err.contains("not-the-password"),
            "the secret leaked: {err}"
        );
    }
}

#[test]
fn tls_failures_are_named() {
    // Trusting another CA.
    let c = secured(
        SSL,
        &[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", &tls_file("other-ca.pem")),
        ],
    );
    let err = connect_error(c).to_string();
    assert!(err.contains("not trusted"), "untrusted: {err}");

    // The broker's CA but no client certificate on the listener that requires one.
    let err = connect_error(secured(MTLS, &props(&ssl()))).to_string();
    assert!(
        err.contains("client certificate"),
        "mTLS without a certificate: {err}"
    );

    // A TLS client on the plaintext port.
    let err = connect_error(secured("127.0.0.1:9092", &props(&ssl()))).to_string();
    assert!(err.contains("TLS handshake"), "TLS on plaintext: {err}");

    // A plaintext client on the TLS port.
    let err = connect_error(secured(SSL, &[])).to_string();
    assert!(err.contains("TLS"), "plaintext on TLS: {err}");

    // SASL on a listener without it, and none on one that requires it.
    let err = connect_error(secured(SSL, &props(&sasl("PLAIN", true)))).to_string();
    assert!(
        err.contains("SASL") || err.contains("authentication"),
        "SASL on SSL: {err}"
    );
    let err = connect_error(secured(SASL_SSL, &props(&ssl()))).to_string();
    assert!(!err.is_empty(), "no SASL on SASL_SSL: {err}");
}

/// A TLS server of our own on an ephemeral port that presents certificate `name`
/// (`client`: made for the name `kring-client`, not 127.0.0.1; `expired`), takes two
/// connections and closes each after the handshake.
fn tls_server(name: &str) -> (String, std::thread::JoinHandle<()>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls_file(&format!("{name}.pem")))
            .unwrap()
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_file(tls_file(&format!("{name}.key"))).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        for stream in listener.incoming().take(2) {
            let Ok(mut stream) = stream else { continue };
            let mut conn = rustls::ServerConnection::new(config.clone()).unwrap();
            // Complete the handshake if the client lets it, then hang up.
            let _ = conn.complete_io(&mut stream);
            let _ = conn.complete_io(&mut stream);
        }
    });
    (addr, handle)
}

#[test]
fn host_names_are_checked_unless_switched_off() {
    let (addr, server) = tls_server("client");
    let err = connect_error(secured(&addr, &props(&ssl()))).to_string();
    assert!(err.contains("not valid for the host"), "{err}");
    // With the check off the handshake succeeds; the server then hangs up without
    // speaking Kafka, which is a different error.
    let mut p = ssl();
    p.push(("ssl.endpoint.identification.algorithm", String::new()));
    let err = connect_error(secured(&addr, &props(&p))).to_string();
    assert!(!err.contains("not valid for the host"), "{err}");
    server.join().unwrap();
}

#[test]
fn expired_certificates_are_named() {
    let (addr, server) = tls_server("expired");
    let err = connect_error(secured(&addr, &props(&ssl()))).to_string();
    assert!(err.contains("expired"), "{err}");
    // Also with the host name check off: expiry is not a name problem.
    let mut p = ssl();
    p.push(("ssl.endpoint.identification.algorithm", String::new()));
    let err = connect_error(secured(&addr, &props(&p))).to_string();
    assert!(err.contains("expired"), "{err}");
    server.join().unwrap();
}

struct FailingProvider;

impl TokenProvider for FailingProvider {
    fn token(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send + '_>> {
        Box::pin(async { Err("the identity provider is down".to_string()) })
    }
}

struct FixedProvider(String);

impl TokenProvider for FixedProvider {
    fn token(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<OAuthToken, String>> + Send + '_>> {
        let token = OAuthToken {
            value: Secret::new(self.0.clone()),
            lifetime: Duration::from_secs(600),
            extensions: Vec::new(),
        };
        Box::pin(async move { Ok(token) })
    }
}

#[test]
fn token_providers_are_used_and_their_failures_reported() {
    let base = |c: &mut Config| {
        c.set("security.protocol", "SASL_PLAINTEXT").unwrap();
        c.set("sasl.mechanism", "OAUTHBEARER").unwrap();
    };
    let mut c = secured(SASL_PLAINTEXT, &[]);
    base(&mut c);
    c.security.sasl.token_provider(FailingProvider);
    let err = connect_error(c).to_string();
    assert!(err.contains("identity provider is down"), "{err}");

    // A token of the application's own making (an unsecured JWT the broker accepts).
    let jwt = kring::config::security::unsecured_jwt("app", now_ms(), 600_000, &[]);
    let mut c = secured(SASL_PLAINTEXT, &[]);
    base(&mut c);
    c.security.sasl.token_provider(FixedProvider(jwt));
    Client::connect_blocking(c).expect("the provider's token is accepted");

    // A token the broker refuses: the broker's challenge is in the error.
    let mut c = secured(SASL_PLAINTEXT, &[]);
    base(&mut c);
    c.security
        .sasl
        .token_provider(FixedProvider("not.a.jwt".into()));
    let err = connect_error(c).to_string();
    assert!(err.contains("OAUTHBEARER authentication failed"), "{err}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The REAUTH listener gives sessions 2 s (connections.max.reauth.ms): one connection
/// that keeps sending for 7 s must re-authenticate in place at least three times, or
/// the broker would close it (a blocking connection does not reconnect). A blocking
/// connection acts only when called, so requests come every 50 ms (the engine asks for
/// re-authentication at 85–95% of the lifetime).
#[test]
fn sessions_are_reauthenticated_in_place() {
    for mechanism in ["SCRAM-SHA-256", "OAUTHBEARER"] {
        let config = secured(REAUTH, &props(&sasl(mechanism, false)));
        let conn_config = connection_config(&config);
        let mut conn = BlockingConnection::connect(REAUTH, conn_config).expect("authenticates");
        let until = std::time::Instant::now() + Duration::from_secs(7);
        let mut sent = 0;
        while std::time::Instant::now() < until {
            conn.send(&MetadataRequest::default().with_topics(Some(Vec::new())))
                .unwrap_or_else(|e| panic!("{mechanism}, request {sent}: {e}"));
            sent += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(sent > 50, "{mechanism}: {sent}");
    }
}

fn connection_config(config: &Config) -> ConnectionConfig {
    kring::internals::connection_config(config).unwrap()
}

#[test]
fn the_cli_takes_a_properties_file() {
    let dir = std::env::temp_dir().join(unique("kring-sec-cli"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.properties");
    std::fs::write(
        &file,
        format!(
            "# a comment\nsecurity.protocol=SASL_SSL\nssl.ca.location={}\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.username=kring\nsasl.password=kring-secret\n",
            tls_file("ca.pem")
        ),
    )
    .unwrap();
    let kring = env!("CARGO_BIN_EXE_kring");
    let topic = unique("kring-sec-cli");
    let run = |args: &[&str], input: &str| {
        use std::io::Write;
        let mut child = std::process::Command::new(kring)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let f = file.display().to_string();
    let (code, _, err) = run(&["topics", "create", &topic, "-b", SASL_SSL, "-F", &f], "");
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(
        &["produce", "-t", &topic, "-b", SASL_SSL, "-F", &f],
        "a\nb\nc\n",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(
        &[
            "consume",
            "-t",
            &topic,
            "-b",
            SASL_SSL,
            "-F",
            &f,
            "-o",
            "beginning",
            "-e",
            "-f",
            "%s\n",
        ],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "a\nb\nc\n");
    // A wrong password: exit 1 with one line naming the mechanism, without the secret.
    let (code, _, err) = run(
        &[
            "topics",
            "list",
            "-b",
            SASL_SSL,
            "-F",
            &f,
            "-X",
            "sasl.password=wrong-one",
        ],
        "",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("SCRAM-SHA-512"), "{err}");
    assert!(!err.contains("wrong-one"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tls_and_authentication_errors_are_not_retriable() {
    let untrusted = secured(
        SSL,
        &[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", &tls_file("other-ca.pem")),
        ],
    );
    let err = BlockingConnection::connect(SSL, connection_config(&untrusted)).unwrap_err();
    assert!(matches!(err, IoError::Tls { .. }), "{err:?}");
    assert!(!err.is_retriable());

    let mut p = sasl("SCRAM-SHA-512", false);
    p.retain(|(k, _)| *k != "sasl.password");
    p.push(("sasl.password", "wrong".into()));
    let wrong = secured(SASL_PLAINTEXT, &props(&p));
    let err = BlockingConnection::connect(SASL_PLAINTEXT, connection_config(&wrong)).unwrap_err();
    assert!(matches!(err, IoError::Authentication { .. }), "{err:?}");
    assert!(!err.is_retriable());
}

/// kcat (librdkafka) and the Java console tools over SASL_SSL: they read what kring
/// wrote, and kring reads what they wrote. kcat authenticates with PLAIN: Debian's kcat
/// 1.7.1 links librdkafka 2.0.2, whose SCRAM client-final message repeats the client
/// nonce (fixed in librdkafka 2.6.1), which Kafka 4.x's strict nonce check refuses. The
/// Java tools use SCRAM-SHA-512, kring SCRAM-SHA-256.
#[test]
fn kcat_and_the_java_console_tools_interoperate_over_sasl_ssl() {
    let kring_config = secured(SASL_SSL, &props(&sasl("SCRAM-SHA-256", true)));
    let client = Client::connect_blocking(kring_config.clone()).unwrap();
    let ca = tls_file("ca.pem");
    let kcat_args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "-b",
            SASL_SSL,
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            "sasl.mechanisms=PLAIN",
            "-X",
            "sasl.username=kring",
            "-X",
            "sasl.password=kring-secret",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push("-X".into());
        v.push(format!("ssl.ca.location={ca}"));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let dir = std::env::temp_dir().join(unique("kring-sec-java"));
    std::fs::create_dir_all(&dir).unwrap();
    let java_config = dir.join("client.properties");
    std::fs::write(
        &java_config,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"kring\" password=\"kring-secret\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        ),
    )
    .unwrap();
    let java_config = java_config.display().to_string();
    let run = |program: &str, args: &[String], input: &str| -> String {
        use std::io::Write;
        let mut command = if program == "kcat" {
            std::process::Command::new("kcat")
        } else {
            let mut c =
                std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"));
            c.arg("run-class").arg(program);
            c
        };
        let mut child = command
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = within_a_minute(move || child.wait_with_output().unwrap());
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let lines =
        |prefix: &str| -> Vec<String> { (0..100).map(|i| format!("{prefix}-{i}")).collect() };

    // kring writes; kcat and the Java console consumer read.
    let topic = unique("kring-sec-interop");
    create_topic(&client, &topic, 1, 1, &[]);
    let written = lines("from-kring");
    produce(&client, &topic, &written);
    let by_kcat = run(
        "kcat",
        &kcat_args(&[
            "-C",
            "-t",
            &topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%s\n",
        ]),
        "",
    );
    assert_eq!(by_kcat.lines().collect::<Vec<_>>(), written, "kcat read");
    let java_args: Vec<String> = [
        "--bootstrap-server",
        SASL_SSL,
        "--topic",
        &topic,
        "--from-beginning",
        "--max-messages",
        "100",
        common::java_tools().consumer_config,
        &java_config,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let by_java = run(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        &java_args,
        "",
    );
    assert_eq!(by_java.lines().collect::<Vec<_>>(), written, "Java read");

    // kcat and the Java console producer write; kring reads.
    let from_kcat = unique("kring-sec-from-kcat");
    create_topic(&client, &from_kcat, 1, 1, &[]);
    let input = lines("from-kcat").join("\n") + "\n";
    run(
        "kcat",
        &kcat_args(&["-P", "-t", &from_kcat, "-p", "0"]),
        &input,
    );
    assert_eq!(read(&client, &from_kcat, 100), lines("from-kcat"));
    let from_java = unique("kring-sec-from-java");
    create_topic(&client, &from_java, 1, 1, &[]);
    let input = lines("from-java").join("\n") + "\n";
    let java_args: Vec<String> = [
        "--bootstrap-server",
        SASL_SSL,
        "--topic",
        &from_java,
        common::java_tools().producer_config,
        &java_config,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run(common::java_tools().console_producer, &java_args, &input);
    assert_eq!(read(&client, &from_java, 100), lines("from-java"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The async connection (the producer's) re-authenticates in place too: records sent
/// for 7 s over the REAUTH listener (2 s sessions) all succeed on one connection.
#[test]
fn producers_reauthenticate_in_place() {
    for mechanism in ["SCRAM-SHA-512", "OAUTHBEARER"] {
        let client =
            Client::connect_blocking(secured(REAUTH, &props(&sasl(mechanism, false)))).unwrap();
        let topic = unique("kring-sec-reauth");
        create_topic(&client, &topic, 1, 1, &[]);
        let producer = Producer::new_blocking(client.clone()).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(7);
        let mut sent = 0;
        while std::time::Instant::now() < until {
            producer
                .send_blocking(
                    ProducerRecord::new(&topic)
                        .with_partition(0)
                        .with_value("x"),
                )
                .unwrap()
                .wait()
                .unwrap_or_else(|e| panic!("{mechanism}, record {sent}: {e}"));
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        let leader = client.metadata().topics[&topic].partitions[0].leader;
        let broker = client.broker(leader).unwrap();
        assert_eq!(
            broker.connect_count(),
            1,
            "{mechanism}: {sent} records on one connection"
        );
        producer.close_blocking().unwrap();
    }
}

/// A loopback relay to `upstream` that can garble the next chunk the upstream sends: one
/// byte in its middle flipped, as a bad link or a tampering middlebox would.
struct GarblingRelay {
    addr: String,
    garble: Arc<std::sync::atomic::AtomicBool>,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for GarblingRelay {
    /// Ends the accept loop: flagged, then woken by one last connection.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}

impl GarblingRelay {
    fn start(upstream: &'static str) -> GarblingRelay {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let garble = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, a, end) = (garble.clone(), accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if end.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { return };
                a.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = std::net::TcpStream::connect(upstream) else {
                    return;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pump(client, server, None));
                let g = g.clone();
                std::thread::spawn(move || pump(s2, c2, Some(g)));
            }
        });
        GarblingRelay {
            addr,
            garble,
            accepted,
            stop,
        }
    }

    fn garble_next_chunk_from_upstream(&self) {
        self.garble.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Copies `from` to `to` until either side ends; with `garble` set, flips a byte of the
/// next chunk (once per setting).
fn pump(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    garble: Option<Arc<std::sync::atomic::AtomicBool>>,
) {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if garble
            .as_ref()
            .is_some_and(|g| g.swap(false, std::sync::atomic::Ordering::SeqCst))
        {
            buf[n / 2] ^= 0x5a;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

#[test]
fn a_tls_record_garbled_mid_session_breaks_the_connection_and_the_next_request_reconnects() {
    use kring::internals::{BackendChoice, Broker, Runtime, RuntimeConfig};
    within_a_minute(|| {
        let relay = GarblingRelay::start(SSL);
        let mut settings =
            kring::internals::connection_config(&secured(&relay.addr, &props(&ssl())))
                .expect("TLS settings");
        settings.reconnect_backoff = Duration::from_millis(10);
        let rt = Runtime::new(RuntimeConfig {
            workers: 1,
            backend: BackendChoice::Auto,
            thread_name: "kr-tls-garble".into(),
        })
        .unwrap();
        let broker = Broker::open(&rt, -1, relay.addr.clone(), settings).unwrap();
        let metadata = || broker.send_blocking(MetadataRequest::default().with_topics(None));
        metadata().expect("metadata over TLS through the relay");
        // The broker's next TLS record reaches the client with a byte flipped: its
        // integrity check fails once the session is up, which is a broken connection
        // like any other (retriable: another connection may do), not a TLS set-up error.
        relay.garble_next_chunk_from_upstream();
        let error = metadata().expect_err("a garbled record");
        assert!(
            matches!(&error, IoError::Disconnected { reason, .. } if reason.contains("TLS")),
            "{error:?}"
        );
        assert!(error.is_retriable());
        // Requests made during the reconnect backoff are told so; after it, one
        // reconnects.
        let again = loop {
            match metadata() {
                Err(IoError::NotConnected { retry_in, .. }) => std::thread::sleep(retry_in),
                other => break other.expect("a request after the backoff reconnects"),
            }
        };
        assert!(!again.brokers.is_empty());
        assert_eq!(relay.accepted(), 2, "one connection more");
        drop(broker);
        rt.shutdown();
    });
}
