//! Round trips, Java's golden bytes (`testdata/protocol.txt`, from `GenVectors.java`)
//! and hostile input for the consumer protocol formats.

use proptest::prelude::*;

use super::*;

const JAVA: &str = include_str!("../testdata/protocol.txt");

pub(crate) fn unhex(s: &str) -> Bytes {
    match s {
        "-" | "=" => Bytes::new(),
        _ => (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("test vector hex"))
            .collect::<Vec<u8>>()
            .into(),
    }
}

/// The `index`th line of Java's output whose first word is `kind`: (tag, bytes, "-" for null).
fn java(kind: &str, index: usize) -> (String, Bytes, bool) {
    let line = JAVA
        .lines()
        .filter(|l| l.split(' ').next() == Some(kind))
        .nth(index)
        .expect("vector present");
    let mut words = line.split(' ').skip(1);
    let tag = words.next().expect("tag").to_string();
    let hex = words.next().expect("hex");
    (tag, unhex(hex), hex == "-")
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// The subscription `GenVectors.protocol()` builds for `version`.
fn java_subscription(version: i16) -> Subscription {
    Subscription {
        topics: vec!["t2".into(), "t1".into()],
        user_data: (version >= 1).then(|| Bytes::from_static(&[1, 2, 0xff])),
        owned_partitions: if version >= 1 {
            vec![tp("t2", 1), tp("t1", 0), tp("t1", 3)]
        } else {
            vec![]
        },
        generation_id: (version >= 2).then_some(5),
        rack_id: (version >= 3).then(|| "rack-a".to_string()),
    }
}

fn sorted(mut s: Subscription) -> Subscription {
    s.topics.sort();
    s.owned_partitions.sort();
    s
}

#[test]
fn subscriptions_match_java_bytes_at_every_version() {
    for version in 0..=3i16 {
        let (tag, bytes, _) = java("subscription", version as usize);
        assert_eq!(tag, version.to_string());
        let ours = java_subscription(version);
        assert_eq!(
            encode_subscription(&ours, version).unwrap(),
            bytes,
            "v{version}"
        );
        assert_eq!(
            decode_subscription(&bytes).unwrap(),
            sorted(ours),
            "v{version}"
        );
    }
    let bare = Subscription {
        topics: vec!["only".into()],
        ..Default::default()
    };
    let (_, bytes, _) = java("subscription", 4);
    assert_eq!(encode_subscription(&bare, 3).unwrap(), bytes);
    assert_eq!(decode_subscription(&bytes).unwrap(), bare);
    let empty_user_data = Subscription {
        user_data: Some(Bytes::new()),
        generation_id: Some(0),
        ..Default::default()
    };
    let (_, bytes, _) = java("subscription", 5);
    assert_eq!(encode_subscription(&empty_user_data, 2).unwrap(), bytes);
    assert_eq!(decode_subscription(&bytes).unwrap(), empty_user_data);
}

#[test]
fn assignments_match_java_bytes_at_every_version() {
    let partitions = vec![tp("t2", 1), tp("t1", 2), tp("t1", 0)];
    for version in 0..=3i16 {
        let (_, bytes, _) = java("assignment", version as usize);
        let ours = Assignment {
            partitions: partitions.clone(),
            user_data: (version >= 1).then(|| Bytes::from_static(&[1, 2, 0xff])),
        };
        assert_eq!(
            encode_assignment(&ours, version).unwrap(),
            bytes,
            "v{version}"
        );
        assert_eq!(decode_assignment(&bytes).unwrap(), ours, "v{version}");
    }
    let (_, bytes, _) = java("assignment", 4);
    assert_eq!(encode_assignment(&Assignment::default(), 0).unwrap(), bytes);
    assert_eq!(decode_assignment(&bytes).unwrap(), Assignment::default());
}

#[test]
fn sticky_user_data_matches_java() {
    let (tag, _, null) = java("sticky-userdata", 0);
    assert_eq!(
        (tag.as_str(), null),
        ("none", true),
        "no previous assignment: no user data"
    );
    let (_, bytes, _) = java("sticky-userdata", 1);
    let previous = vec![tp("t1", 0), tp("t1", 4)];
    assert_eq!(encode_sticky_user_data(&previous, 3).unwrap(), bytes);
    let decoded = decode_sticky_user_data(&bytes).unwrap();
    assert_eq!(
        (decoded.partitions, decoded.generation),
        (previous, Some(3))
    );
    let (_, bytes, _) = java("sticky-userdata", 2);
    assert_eq!(encode_sticky_user_data(&[], 9).unwrap(), bytes);
    assert_eq!(decode_sticky_user_data(&bytes).unwrap().generation, Some(9));
}

#[test]
fn sticky_user_data_v0_has_no_generation_and_junk_is_refused() {
    let v1 = encode_sticky_user_data(&[tp("a", 1)], 4).unwrap();
    let v0 = v1.slice(..v1.len() - 4);
    let decoded = decode_sticky_user_data(&v0).unwrap();
    assert_eq!(
        (decoded.partitions, decoded.generation),
        (vec![tp("a", 1)], None)
    );
    let junk = Bytes::from([&v1[..], &[0]].concat());
    assert!(matches!(
        decode_sticky_user_data(&junk),
        Err(GroupProtocolError::TrailingBytes { extra: 5, .. })
    ));
}

#[test]
fn newer_versions_are_read_as_the_newest_known() {
    let mut bytes = encode_subscription(&java_subscription(3), 3)
        .unwrap()
        .to_vec();
    bytes[1] = 9;
    bytes.extend_from_slice(b"future field");
    let decoded = decode_subscription(&Bytes::from(bytes)).unwrap();
    assert_eq!(decoded, sorted(java_subscription(3)));
}

#[test]
fn hostile_input_is_refused_without_panic() {
    let negative = Bytes::from_static(&[0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(
        decode_subscription(&negative),
        Err(GroupProtocolError::BadVersion { version: -1, .. })
    ));
    // v0 claiming two billion topics in 10 bytes: refused before anything is reserved.
    let huge = Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1, b'a', 0]);
    assert!(matches!(
        decode_subscription(&huge),
        Err(GroupProtocolError::Decode { .. })
    ));
    let huge_user_data = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
    assert!(decode_sticky_user_data(&huge_user_data).is_err());
    let (_, good, _) = java("assignment", 3);
    let trailing = Bytes::from([&good[..], b"x"].concat());
    assert!(matches!(
        decode_assignment(&trailing),
        Err(GroupProtocolError::TrailingBytes { extra: 1, .. })
    ));
    for cut in 0..good.len() {
        assert!(
            decode_assignment(&good.slice(..cut)).is_err(),
            "cut at {cut}"
        );
    }
}

fn arb_partitions() -> impl Strategy<Value = Vec<TopicPartition>> {
    prop::collection::vec(("[a-c]{1,3}", 0..50i32), 0..8).prop_map(|v| {
        let mut v: Vec<_> = v.into_iter().map(|(t, p)| tp(&t, p)).collect();
        v.sort();
        v.dedup();
        v
    })
}

fn arb_subscription() -> impl Strategy<Value = Subscription> {
    (
        prop::collection::btree_set("[a-z]{1,6}", 0..5),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..8)),
        arb_partitions(),
        prop::option::of(0..i32::MAX),
        prop::option::of("[a-z]{1,4}"),
    )
        .prop_map(
            |(topics, user_data, owned, generation_id, rack_id)| Subscription {
                topics: topics.into_iter().collect(),
                user_data: user_data.map(Bytes::from),
                owned_partitions: owned,
                generation_id,
                rack_id,
            },
        )
}

proptest! {
    #[test]
    fn subscription_round_trips_at_v3(s in arb_subscription()) {
        let bytes = encode_subscription(&s, 3).unwrap();
        prop_assert_eq!(decode_subscription(&bytes).unwrap(), s);
    }

    #[test]
    fn assignment_round_trips(partitions in arb_partitions(), version in 0..=3i16) {
        let a = Assignment { partitions, user_data: None };
        let bytes = encode_assignment(&a, version).unwrap();
        prop_assert_eq!(decode_assignment(&bytes).unwrap(), a);
    }

    #[test]
    fn sticky_user_data_round_trips(partitions in arb_partitions(), generation in any::<i32>()) {
        let bytes = encode_sticky_user_data(&partitions, generation).unwrap();
        let decoded = decode_sticky_user_data(&bytes).unwrap();
        prop_assert_eq!(decoded.partitions, partitions);
        prop_assert_eq!(decoded.generation, Some(generation));
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let bytes = Bytes::from(bytes);
        let _ = decode_subscription(&bytes);
        let _ = decode_assignment(&bytes);
        let _ = decode_sticky_user_data(&bytes);
    }
}
