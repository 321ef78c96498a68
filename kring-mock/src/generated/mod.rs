//! Code written by the generator in `codegen/` (`cargo run -p kring-codegen`) from
//! Kafka's JSON message schemas; the files here carry its banner and are not edited by
//! hand. CI regenerates them and fails on any difference.

pub(crate) mod error_response;
