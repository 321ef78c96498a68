//! Property checks shared by the generated per-message tests: every message type, at
//! every version, round-trips through encode/decode, and decoding garbage or truncated
//! input returns an error without panicking.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::protocol::{ArbitraryVersion, Message};

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// decode(encode(x)) == x, with nothing left over, for arbitrary `x` at every version.
pub fn check_round_trip<T: Message + ArbitraryVersion>() {
    for version in T::VERSIONS.min..=T::VERSIONS.max {
        runner(32)
            .run(&proptest::collection::vec(any::<u8>(), 0..768), |entropy| {
                let mut u = arbitrary::Unstructured::new(&entropy);
                let Ok(value) = T::arbitrary_for_version(&mut u, version) else {
                    return Ok(());
                };
                let mut buf = BytesMut::new();
                value.encode(&mut buf, version).map_err(|e| {
                    TestCaseError::fail(format!("{} v{version}: encode: {e}", T::NAME))
                })?;
                let encoded = buf.freeze();
                let mut input = encoded.clone();
                let decoded = T::decode(&mut input, version).map_err(|e| {
                    TestCaseError::fail(format!("{} v{version}: decode: {e}", T::NAME))
                })?;
                prop_assert_eq!(&decoded, &value, "{} v{}", T::NAME, version);
                prop_assert!(
                    input.is_empty(),
                    "{} v{} left {} bytes",
                    T::NAME,
                    version,
                    input.len()
                );
                // Every strict prefix is an error, never a panic.
                for cut in [0, encoded.len() / 2, encoded.len().saturating_sub(1)] {
                    if cut < encoded.len() {
                        let mut prefix = encoded.slice(..cut);
                        prop_assert!(
                            T::decode(&mut prefix, version).is_err(),
                            "{} v{} prefix {}",
                            T::NAME,
                            version,
                            cut
                        );
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", T::NAME));
    }
}

/// Decoding arbitrary bytes at every version never panics.
pub fn check_garbage<T: Message>() {
    for version in T::VERSIONS.min..=T::VERSIONS.max {
        runner(32)
            .run(&proptest::collection::vec(any::<u8>(), 0..256), |data| {
                let mut input = Bytes::from(data);
                let _ = T::decode(&mut input, version);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", T::NAME));
    }
}
