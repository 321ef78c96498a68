//! The connection engine driven by hand: bytes and time in, bytes and events out.

use std::collections::HashMap;

use bytes::BufMut;

use super::*;
use crate::protocol::messages::api_versions::ApiVersion;
use crate::protocol::messages::{MetadataRequest, MetadataResponse};
use crate::protocol::{RequestHeader, decode_request_frame, encode_response_frame};

fn config() -> Arc<ConnectionConfig> {
    Arc::new(ConnectionConfig {
        client_software_name: "kring-test".into(),
        max_in_flight: 2,
        ..ConnectionConfig::default()
    })
}

fn t0() -> Instant {
    Instant::now()
}

fn engine(now: Instant) -> Connection<u32> {
    Connection::new(
        Arc::from("broker:9092"),
        config(),
        now + Duration::from_secs(10),
    )
}

/// Everything the engine wants written, as request frames (header, body).
fn written(conn: &mut Connection<u32>) -> Vec<(RequestHeader, crate::protocol::RequestKind)> {
    let mut out = Vec::new();
    conn.poll_transmit(&mut out);
    let bytes: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    let mut cutter = FrameCutter::new(1 << 20, 64);
    cutter.extend(&bytes);
    let mut frames = Vec::new();
    while let Some(f) = cutter.next_frame().unwrap() {
        frames.push(decode_request_frame(f).unwrap());
    }
    assert!(cutter.buffered().is_empty(), "whole frames only");
    frames
}

fn events(conn: &mut Connection<u32>) -> Vec<Event<u32>> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

fn versions_response(error: KafkaCode, apis: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error.code())
        .with_api_keys(
            apis.iter()
                .map(|&(api, min, max)| {
                    ApiVersion::default()
                        .with_api_key(api.key())
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
}

fn full_versions() -> ApiVersionsResponse {
    let apis: Vec<(ApiKey, i16, i16)> = [ApiKey::ApiVersions, ApiKey::Metadata, ApiKey::Produce]
        .into_iter()
        .map(|a| (a, a.versions().min, a.max_stable_version()))
        .collect();
    versions_response(KafkaCode::NONE, &apis)
}

fn frame<R: crate::protocol::Response>(response: &R, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut buf = BytesMut::new();
    encode_response_frame(&mut buf, response, version, correlation_id).unwrap();
    buf.to_vec()
}

fn handshake(conn: &mut Connection<u32>, now: Instant) {
    let sent = written(conn);
    assert_eq!(sent.len(), 1);
    let (header, _) = &sent[0];
    conn.handle_bytes(
        &frame(
            &full_versions(),
            header.request_api_version,
            header.correlation_id,
        ),
        now,
    );
    assert!(matches!(events(conn).as_slice(), [Event::Ready(_)]));
}

/// A ready connection with three Metadata requests (tokens 0, 1, 2) written, and the
/// version they went at.
fn ready_with_three_requests(now: Instant) -> (Connection<u32>, i16) {
    let mut conn = engine(now);
    handshake(&mut conn, now);
    for token in 0..3 {
        conn.send(metadata(), token, now);
    }
    let sent = written(&mut conn);
    let version = sent[0].0.request_api_version;
    (conn, version)
}

fn metadata() -> Box<dyn EncodeRequest> {
    Box::new(TypedRequest {
        request: MetadataRequest::default().with_topics(None),
        version: None,
        addr: Arc::from("broker:9092"),
        timeout: None,
    })
}

/// Every token's outcome, checking that none comes twice.
fn outcomes(events: Vec<Event<u32>>) -> HashMap<u32, Result<RawResponse, IoError>> {
    let mut out = HashMap::new();
    for e in events {
        if let Event::Response(token, result) = e {
            assert!(out.insert(token, result).is_none(), "token {token} twice");
        }
    }
    out
}

#[test]
fn the_handshake_offers_the_newest_version_with_the_software_name() {
    let now = t0();
    let mut conn = engine(now);
    assert!(!conn.is_ready());
    let sent = written(&mut conn);
    let (header, body) = &sent[0];
    assert_eq!(header.request_api_key, ApiKey::ApiVersions.key());
    assert_eq!(
        header.request_api_version,
        ApiKey::ApiVersions.max_stable_version()
    );
    assert_eq!(header.correlation_id, 0);
    let crate::protocol::RequestKind::ApiVersions(r) = body else {
        panic!("not ApiVersions")
    };
    assert_eq!(r.client_software_name, "kring-test");
    conn.handle_bytes(&frame(&full_versions(), header.request_api_version, 0), now);
    assert!(conn.is_ready());
    let Some(Event::Ready(versions)) = conn.poll_event() else {
        panic!("ready with the broker's versions")
    };
    assert!(versions.version_for(ApiKey::Metadata).is_some());
}

#[test]
fn kip_511_fallback_retries_once_at_the_version_the_broker_names() {
    let now = t0();
    let mut conn = engine(now);
    written(&mut conn);
    // An old broker answers in the v0 format, listing ApiVersions 0..=2.
    let refusal = versions_response(
        KafkaCode::UNSUPPORTED_VERSION,
        &[(ApiKey::ApiVersions, 0, 2)],
    );
    conn.handle_bytes(&frame(&refusal, 0, 0), now);
    let retry = written(&mut conn);
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].0.request_api_version, 2);
    assert_eq!(retry[0].0.correlation_id, 1);
    // Refused again: the handshake fails, naming the code.
    conn.handle_bytes(&frame(&refusal, 0, 1), now);
    let ev = events(&mut conn);
    assert!(
        matches!(ev.as_slice(), [Event::Broken(IoError::Handshake { code, .. })] if *code == KafkaCode::UNSUPPORTED_VERSION),
        "{ev:?}"
    );
}

#[test]
fn requests_wait_for_the_handshake_then_pipeline_within_the_window() {
    let now = t0();
    let mut conn = engine(now);
    for token in 0..4 {
        conn.send(metadata(), token, now);
    }
    handshake(&mut conn, now);
    let sent = written(&mut conn);
    assert_eq!(sent.len(), 2, "max_in_flight = 2");
    assert_eq!(
        sent.iter()
            .map(|(h, _)| h.correlation_id)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(conn.in_flight(), 2);
    let version = sent[0].0.request_api_version;
    // One answer frees a slot: the third request goes out.
    conn.handle_bytes(&frame(&MetadataResponse::default(), version, 1), now);
    let ev = outcomes(events(&mut conn));
    assert!(ev[&0].is_ok());
    let sent = written(&mut conn);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.correlation_id, 3);
}

#[test]
fn a_response_out_of_order_breaks_the_connection_and_fails_everything_once() {
    let now = t0();
    let (mut conn, version) = ready_with_three_requests(now);
    // The answer to the second request arrives first.
    conn.handle_bytes(&frame(&MetadataResponse::default(), version, 2), now);
    let ev = events(&mut conn);
    assert!(matches!(ev.last(), Some(Event::Broken(_))));
    let outcomes = outcomes(ev);
    assert_eq!(outcomes.len(), 3, "every request has an outcome");
    assert!(
        outcomes
            .values()
            .all(|r| r.as_ref().is_err_and(IoError::is_retriable))
    );
    // Later requests fail at once; nothing more is written.
    conn.send(metadata(), 9, now);
    assert!(matches!(
        events(&mut conn).as_slice(),
        [Event::Response(9, Err(_))]
    ));
    assert!(written(&mut conn).is_empty());
}

#[test]
fn a_late_answer_times_out_the_request_and_the_connection() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    conn.send(metadata(), 1, now);
    conn.send(metadata(), 2, now);
    written(&mut conn);
    let deadline = conn.poll_timeout().expect("a deadline");
    assert_eq!(deadline, now + config().request_timeout);
    conn.handle_timeout(deadline - Duration::from_millis(1));
    assert!(events(&mut conn).is_empty(), "not yet");
    conn.handle_timeout(deadline);
    let ev = outcomes(events(&mut conn));
    assert!(matches!(ev[&1], Err(IoError::RequestTimedOut { .. })));
    assert!(matches!(ev[&2], Err(IoError::Disconnected { .. })));
    assert!(conn.is_done());
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn a_silent_listener_is_a_handshake_timeout_not_a_connect_timeout() {
    let now = t0();
    let mut conn = engine(now);
    conn.send(metadata(), 7, now);
    written(&mut conn);
    let deadline = conn.poll_timeout().unwrap();
    conn.handle_timeout(deadline);
    let ev = events(&mut conn);
    let Some(Event::Broken(error)) = ev.last() else {
        panic!("{ev:?}")
    };
    assert!(matches!(error, IoError::HandshakeTimedOut { .. }));
    let text = error.to_string();
    assert!(text.contains("connected to broker:9092"), "{text}");
    assert!(text.contains("may not be a Kafka listener"), "{text}");
    // The queued request got the same reason.
    assert!(matches!(
        outcomes(ev)[&7],
        Err(IoError::HandshakeTimedOut { .. })
    ));
}

#[test]
fn foreign_protocols_are_named() {
    let cases: [(&[u8], &str); 4] = [
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
            "HTTP server",
        ),
        (
            &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a],
            "TLS record (an alert)",
        ),
        (
            &[0x16, 0x03, 0x01, 0x00, 0x40, 0x02],
            "TLS record (a handshake)",
        ),
        (b"SSH-2.0-OpenSSH_9.2\r\n", "SSH server"),
    ];
    for (bytes, expected) in cases {
        let now = t0();
        let mut conn = engine(now);
        written(&mut conn);
        conn.handle_bytes(bytes, now);
        if !conn.is_done() {
            // Too short to be judged as a frame: the peer then closes.
            conn.handle_eof(now);
        }
        let ev = events(&mut conn);
        let Some(Event::Broken(IoError::NotKafka { reason, .. })) = ev.last() else {
            panic!("{expected}: {ev:?}")
        };
        assert!(reason.contains(expected), "{expected}: {reason}");
        assert!(
            conn.lend_read_buffer().capacity() < 64 * 1024 + 1024,
            "{expected}: nothing sized from the bytes"
        );
    }
}

#[test]
fn before_the_handshake_frames_are_capped_at_a_megabyte() {
    let now = t0();
    let mut conn = engine(now);
    written(&mut conn);
    // A plausible but huge length (2 MiB) with no recognisable protocol.
    let mut bytes = Vec::new();
    bytes.put_i32(2 << 20);
    conn.handle_bytes(&bytes, now);
    let ev = events(&mut conn);
    assert!(
        matches!(
            ev.last(),
            Some(Event::Broken(IoError::Decode {
                api: ApiKey::ApiVersions,
                ..
            }))
        ),
        "{ev:?}"
    );
}

#[test]
fn after_the_handshake_the_configured_cap_applies() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    conn.send(metadata(), 1, now);
    written(&mut conn);
    let mut bytes = Vec::new();
    bytes.put_i32(2 << 20);
    conn.handle_bytes(&bytes, now);
    assert!(!conn.is_done(), "2 MiB is under max_response_size");
    assert!(conn.lend_read_buffer().capacity() >= 2 << 20);
}

#[test]
fn frames_cut_byte_by_byte_give_the_same_answers() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    conn.send(metadata(), 1, now);
    conn.send(metadata(), 2, now);
    let sent = written(&mut conn);
    let version = sent[0].0.request_api_version;
    let mut bytes = frame(
        &MetadataResponse::default().with_cluster_id(Some("a".into())),
        version,
        1,
    );
    bytes.extend(frame(
        &MetadataResponse::default().with_cluster_id(Some("b".into())),
        version,
        2,
    ));
    for b in bytes {
        conn.handle_bytes(&[b], now);
    }
    let ev = outcomes(events(&mut conn));
    for (token, cluster) in [(1, "a"), (2, "b")] {
        let raw = ev[&token].as_ref().unwrap();
        let decoded: MetadataResponse =
            crate::protocol::decode_response_body(raw.body.clone(), raw.version).unwrap();
        assert_eq!(decoded.cluster_id.as_deref(), Some(cluster));
    }
}

#[test]
fn eof_mid_response_says_how_much_was_cut() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    conn.send(metadata(), 1, now);
    written(&mut conn);
    conn.handle_bytes(&[0, 0, 0, 9, 1, 2], now);
    conn.handle_eof(now);
    let ev = events(&mut conn);
    let Some(Event::Broken(IoError::Disconnected { reason, .. })) = ev.last() else {
        panic!("{ev:?}")
    };
    assert!(reason.contains("6 bytes"), "{reason}");
}

#[test]
fn unanswered_requests_complete_when_written() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    let acks0 = crate::protocol::messages::ProduceRequest::default().with_acks(0);
    conn.send(
        Box::new(TypedRequest {
            request: acks0,
            version: Some(3),
            addr: Arc::from("b"),
            timeout: None,
        }),
        5,
        now,
    );
    assert_eq!(conn.in_flight(), 0, "no answer awaited");
    assert!(events(&mut conn).is_empty(), "not written yet");
    assert_eq!(written(&mut conn).len(), 1);
    assert!(events(&mut conn).is_empty(), "handed out, not written yet");
    conn.handle_transmitted(now);
    let ev = outcomes(events(&mut conn));
    assert!(ev[&5].as_ref().is_ok_and(|r| r.body.is_empty()));
}

#[test]
fn close_drains_what_is_in_flight_and_refuses_the_rest() {
    let now = t0();
    let (mut conn, version) = ready_with_three_requests(now);
    conn.close(IoError::ShuttingDown, now);
    conn.send(metadata(), 9, now);
    // The queued third request and the new one are refused.
    let ev = outcomes(events(&mut conn));
    assert!(matches!(ev[&2], Err(IoError::ShuttingDown)));
    assert!(matches!(ev[&9], Err(IoError::ShuttingDown)));
    conn.handle_bytes(&frame(&MetadataResponse::default(), version, 1), now);
    assert!(!conn.is_done());
    conn.handle_bytes(&frame(&MetadataResponse::default(), version, 2), now);
    let ev = events(&mut conn);
    assert!(matches!(ev.last(), Some(Event::Closed)), "{ev:?}");
    let ev = outcomes(ev);
    assert!(ev[&0].is_ok() && ev[&1].is_ok());
}

#[test]
fn a_drain_that_runs_out_fails_the_rest() {
    let now = t0();
    let mut conn = engine(now);
    handshake(&mut conn, now);
    conn.send(metadata(), 1, now);
    written(&mut conn);
    conn.close(IoError::ShuttingDown, now);
    let deadline = conn.poll_timeout().unwrap();
    assert_eq!(deadline, now + config().drain_timeout);
    conn.handle_timeout(deadline);
    let ev = events(&mut conn);
    assert!(matches!(ev.last(), Some(Event::Broken(_))));
    assert!(outcomes(ev)[&1].is_err());
}

#[test]
fn without_handshake_requests_go_at_once_at_explicit_versions() {
    let now = t0();
    let mut conn: Connection<u32> = Connection::without_handshake(Arc::from("b"), config(), now);
    assert!(conn.is_ready());
    conn.send(
        Box::new(TypedRequest {
            request: MetadataRequest::default(),
            version: Some(4),
            addr: Arc::from("b"),
            timeout: None,
        }),
        1,
        now,
    );
    conn.send(metadata(), 2, now);
    let sent = written(&mut conn);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.request_api_version, 4);
    assert_eq!(sent[0].0.correlation_id, 0);
    // No versions known: a negotiated request cannot be encoded.
    assert!(matches!(
        outcomes(events(&mut conn))[&2],
        Err(IoError::UnsupportedApi { .. })
    ));
}

mod sasl {
    //! The SASL phase and KIP-368 re-authentication, with a scripted broker.

    use super::*;
    use crate::engine::sasl::{CredentialSource, Secret};
    use crate::protocol::RequestKind;
    use crate::protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};

    fn plain_config() -> Arc<ConnectionConfig> {
        Arc::new(ConnectionConfig {
            security: ConnectionSecurity {
                tls: None,
                sasl: Some(SaslSetup {
                    mechanism: crate::engine::sasl::SaslMechanism::Plain,
                    source: CredentialSource::Password {
                        username: "u".into(),
                        password: Secret::new("p"),
                    },
                }),
            },
            ..ConnectionConfig::default()
        })
    }

    fn sasl_versions() -> ApiVersionsResponse {
        let apis: Vec<(ApiKey, i16, i16)> = [
            ApiKey::ApiVersions,
            ApiKey::Metadata,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
        ]
        .into_iter()
        .map(|a| (a, a.versions().min, a.max_stable_version()))
        .collect();
        versions_response(KafkaCode::NONE, &apis)
    }

    /// Answers the one request the engine wrote with `answer(kind)`.
    fn answer_one(
        conn: &mut Connection<u32>,
        now: Instant,
        answer: impl FnOnce(&RequestKind, i16) -> Vec<u8>,
    ) -> RequestKind {
        let mut sent = written(conn);
        assert_eq!(sent.len(), 1, "one request at a time during authentication");
        let (header, kind) = sent.remove(0);
        let bytes = answer(&kind, header.request_api_version);
        let mut framed = bytes;
        // `answer` encodes with correlation id 0; stamp the real one.
        framed[4..8].copy_from_slice(&header.correlation_id.to_be_bytes());
        conn.handle_bytes(&framed, now);
        kind
    }

    fn authenticate(conn: &mut Connection<u32>, now: Instant, lifetime_ms: i64) {
        let versions = sasl_versions();
        answer_one(conn, now, |_, v| frame(&versions, v, 0));
        assert!(events(conn).is_empty(), "not ready before authentication");
        let handshake = SaslHandshakeResponse::default().with_mechanisms(vec!["PLAIN".into()]);
        let kind = answer_one(conn, now, |_, v| frame(&handshake, v, 0));
        assert!(
            matches!(&kind, RequestKind::SaslHandshake(r) if r.mechanism == "PLAIN"),
            "{kind:?}"
        );
        let ok = SaslAuthenticateResponse::default().with_session_lifetime_ms(lifetime_ms);
        let kind = answer_one(conn, now, |_, v| frame(&ok, v, 0));
        assert!(
            matches!(&kind, RequestKind::SaslAuthenticate(r) if &r.auth_bytes[..] == b"\0u\0p"),
            "{kind:?}"
        );
    }

    #[test]
    fn requests_wait_for_authentication_and_frames_stay_small_until_then() {
        let now = t0();
        let mut conn = Connection::new(
            Arc::from("b:1"),
            plain_config(),
            now + Duration::from_secs(10),
        );
        conn.send(metadata(), 7, now);
        authenticate(&mut conn, now, 0);
        let evs = events(&mut conn);
        assert!(matches!(evs.as_slice(), [Event::Ready(_)]), "{evs:?}");
        let sent = written(&mut conn);
        assert!(matches!(sent.as_slice(), [(_, RequestKind::Metadata(_))]));
        assert_eq!(conn.poll_timeout(), Some(now + conn.config.request_timeout));
    }

    #[test]
    fn a_refused_password_fails_the_connection_naming_the_mechanism() {
        let now = t0();
        let mut conn = Connection::new(
            Arc::from("b:1"),
            plain_config(),
            now + Duration::from_secs(10),
        );
        conn.send(metadata(), 1, now);
        let versions = sasl_versions();
        answer_one(&mut conn, now, |_, v| frame(&versions, v, 0));
        let handshake = SaslHandshakeResponse::default();
        answer_one(&mut conn, now, |_, v| frame(&handshake, v, 0));
        let refused = SaslAuthenticateResponse::default()
            .with_error_code(KafkaCode::SASL_AUTHENTICATION_FAILED.code())
            .with_error_message(Some("Invalid username or password".into()));
        answer_one(&mut conn, now, |_, v| frame(&refused, v, 0));
        let evs = events(&mut conn);
        let broken = evs.iter().find_map(|e| match e {
            Event::Broken(e) => Some(e.clone()),
            _ => None,
        });
        let err = broken.expect("broken");
        assert!(matches!(err, IoError::Authentication { .. }), "{err:?}");
        assert!(!err.is_retriable());
        let text = err.to_string();
        assert!(
            text.contains("PLAIN") && text.contains("Invalid username"),
            "{text}"
        );
        assert!(!text.contains("\0p"));
        // The queued request got its answer too.
        assert!(outcomes(evs).get(&1).is_some_and(Result::is_err));
    }

    #[test]
    fn an_unsupported_mechanism_names_what_the_broker_offers() {
        let now = t0();
        let mut conn = Connection::new(
            Arc::from("b:1"),
            plain_config(),
            now + Duration::from_secs(10),
        );
        let versions = sasl_versions();
        answer_one(&mut conn, now, |_, v| frame(&versions, v, 0));
        let handshake = SaslHandshakeResponse::default()
            .with_error_code(KafkaCode::UNSUPPORTED_SASL_MECHANISM.code())
            .with_mechanisms(vec!["SCRAM-SHA-512".into()]);
        answer_one(&mut conn, now, |_, v| frame(&handshake, v, 0));
        let text = events(&mut conn)
            .into_iter()
            .find_map(|e| match e {
                Event::Broken(e) => Some(e.to_string()),
                _ => None,
            })
            .unwrap();
        assert!(text.contains("SCRAM-SHA-512"), "{text}");
    }

    #[test]
    fn sessions_with_a_lifetime_reauthenticate_between_requests() {
        let now = t0();
        let mut conn = Connection::new(
            Arc::from("b:1"),
            plain_config(),
            now + Duration::from_secs(10),
        );
        authenticate(&mut conn, now, 10_000);
        assert!(matches!(events(&mut conn).as_slice(), [Event::Ready(_)]));
        // The time comes at 85-95% of the lifetime.
        let at = conn.poll_timeout().unwrap();
        assert!(
            at >= now + Duration::from_millis(8_500) && at <= now + Duration::from_millis(9_500)
        );
        // A request in flight when the time comes is answered before the exchange.
        conn.send(metadata(), 1, now);
        let sent = written(&mut conn);
        conn.handle_timeout(at);
        assert!(matches!(
            events(&mut conn).as_slice(),
            [Event::ReauthenticationNeeded]
        ));
        // A request sent now waits for the credentials.
        conn.send(metadata(), 2, at);
        assert!(written(&mut conn).is_empty());
        conn.reauthenticate(
            SaslCredentials::Password {
                username: "u".into(),
                password: Secret::new("p"),
            },
            String::new(),
            at,
        );
        assert!(
            written(&mut conn).is_empty(),
            "request 1 is still in flight"
        );
        let header = &sent[0].0;
        let version = header.request_api_version;
        conn.handle_bytes(
            &frame(&MetadataResponse::default(), version, header.correlation_id),
            at,
        );
        assert!(
            outcomes(events(&mut conn))
                .get(&1)
                .is_some_and(Result::is_ok)
        );
        // Now the exchange runs, alone on the wire; then request 2 goes out.
        let handshake = SaslHandshakeResponse::default();
        answer_one(&mut conn, at, |_, v| frame(&handshake, v, 0));
        let ok = SaslAuthenticateResponse::default().with_session_lifetime_ms(10_000);
        answer_one(&mut conn, at, |_, v| frame(&ok, v, 0));
        assert!(events(&mut conn).is_empty(), "no second Ready");
        assert!(conn.is_ready());
        let sent = written(&mut conn);
        assert!(matches!(sent.as_slice(), [(_, RequestKind::Metadata(_))]));
    }
}

#[test]
fn in_plaintext_reads_have_no_wake_threshold() {
    // Plaintext reads come large already; a threshold only held them back (the TLS
    // bound is tested with the record tracker in engine::tls).
    let now = t0();
    let (mut conn, version) = ready_with_three_requests(now);
    assert_eq!(conn.read_wake_threshold(), 1);
    let whole = frame(&MetadataResponse::default(), version, 1);
    conn.handle_bytes(&whole[..5], now);
    assert_eq!(conn.read_wake_threshold(), 1);
}
