//! The Produce request, hand-encoded for the hot path: the small header and field bytes
//! go in scratch buffers, and every record batch is its own segment, so a request is a
//! gather list of `Bytes` handed to one vectored write and the batches are never copied.
//! Layout per `ProduceRequest.json` (versions 3-11; v9+ flexible).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::engine::connection::{EncodeRequest, Encoded};
use crate::engine::error::IoError;
use crate::protocol::negotiation::ApiVersionsTable;
use crate::protocol::primitives::{write_nullable_string, write_string, write_uvarint};
use crate::protocol::{
    ApiKey, Encode, Message, RequestHeader, VersionRange, messages::ProduceRequest,
};

/// The oldest Produce version that carries record batch v2 (magic 2).
pub const MIN_PRODUCE_VERSION: i16 = 3;

/// One partition's batch in a request.
#[derive(Debug, Clone)]
pub struct PartitionBatch {
    /// Partition index.
    pub partition: i32,
    /// The sealed batch bytes.
    pub batch: Bytes,
}

/// A Produce request over pre-encoded batches.
#[derive(Debug, Clone)]
pub struct ProduceBatches {
    /// Transactional id, if any.
    pub transactional_id: Option<String>,
    /// 0, 1 or -1.
    pub acks: i16,
    /// How long the broker may wait for replication.
    pub timeout_ms: i32,
    /// Batches by topic.
    pub topics: Vec<(Arc<str>, Vec<PartitionBatch>)>,
    /// The broker's address, for errors.
    pub addr: Arc<str>,
    /// The Produce versions this request may go at (within what both sides speak): a
    /// transactional producer's protocol narrows them (v1 at most 11, KIP-890's v2
    /// exactly 12).
    pub versions: VersionRange,
}

/// Every Produce version kring speaks.
pub const ANY_PRODUCE_VERSION: VersionRange = VersionRange {
    min: MIN_PRODUCE_VERSION,
    max: i16::MAX,
};

enum Segment {
    Scratch(BytesMut),
    Batch(Bytes),
}

fn write_array_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        write_uvarint(buf, len as u32 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

impl ProduceBatches {
    /// Appends the frame for `version` as segments.
    pub fn encode_frame(
        &self,
        version: i16,
        correlation_id: i32,
        client_id: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<(), IoError> {
        let encode_err = |source| IoError::Encode {
            api: ApiKey::Produce,
            source,
        };
        let flexible = ProduceRequest::is_flexible(version);
        let mut segments: Vec<Segment> = Vec::with_capacity(2 + 2 * self.topics.len());
        let mut scratch = BytesMut::with_capacity(128);
        scratch.put_i32(0); // frame size, patched below
        RequestHeader::default()
            .with_request_api_key(ApiKey::Produce.key())
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(client_id.to_owned()))
            .encode(
                &mut scratch,
                ApiKey::Produce.request_header_version(version),
            )
            .map_err(encode_err)?;
        write_nullable_string(
            &mut scratch,
            self.transactional_id.as_deref(),
            flexible,
            "transactional_id",
        )
        .map_err(encode_err)?;
        scratch.put_i16(self.acks);
        scratch.put_i32(self.timeout_ms);
        write_array_len(&mut scratch, self.topics.len(), flexible);
        for (topic, partitions) in &self.topics {
            write_string(&mut scratch, topic, flexible, "topic").map_err(encode_err)?;
            write_array_len(&mut scratch, partitions.len(), flexible);
            for p in partitions {
                scratch.put_i32(p.partition);
                let len = p.batch.len();
                if flexible {
                    write_uvarint(&mut scratch, len as u32 + 1);
                } else {
                    scratch.put_i32(len as i32);
                }
                segments.push(Segment::Scratch(scratch.split()));
                segments.push(Segment::Batch(p.batch.clone()));
                if flexible {
                    scratch.put_u8(0); // partition tagged fields
                }
            }
            if flexible {
                scratch.put_u8(0); // topic tagged fields
            }
        }
        if flexible {
            scratch.put_u8(0); // request tagged fields
        }
        segments.push(Segment::Scratch(scratch));
        let total: usize = segments
            .iter()
            .map(|s| match s {
                Segment::Scratch(b) => b.len(),
                Segment::Batch(b) => b.len(),
            })
            .sum();
        let size = i32::try_from(total - 4).map_err(|_| {
            encode_err(crate::protocol::EncodeError::TooLong {
                what: "produce request",
                len: total,
            })
        })?;
        for (i, s) in segments.into_iter().enumerate() {
            match s {
                Segment::Scratch(mut b) => {
                    if i == 0 {
                        b[..4].copy_from_slice(&size.to_be_bytes());
                    }
                    if !b.is_empty() {
                        out.push(b.freeze());
                    }
                }
                Segment::Batch(b) => out.push(b),
            }
        }
        Ok(())
    }
}

impl EncodeRequest for ProduceBatches {
    fn api_key(&self) -> ApiKey {
        ApiKey::Produce
    }

    fn encode(
        &self,
        versions: &ApiVersionsTable,
        correlation_id: i32,
        client_id: &str,
        out: &mut Vec<Bytes>,
    ) -> Result<Encoded, IoError> {
        let version = versions
            .version_for(ApiKey::Produce)
            .map(|v| v.min(self.versions.max))
            .filter(|&v| v >= MIN_PRODUCE_VERSION.max(self.versions.min))
            .ok_or_else(|| IoError::UnsupportedApi {
                api: ApiKey::Produce,
                addr: self.addr.to_string(),
            })?;
        let mark = out.len();
        if let Err(e) = self.encode_frame(version, correlation_id, client_id, out) {
            out.truncate(mark);
            return Err(e);
        }
        Ok(Encoded {
            version,
            expects_response: self.acks != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{RequestKind, decode_request_frame};

    #[test]
    fn hand_encoding_matches_the_generated_type_at_every_version() {
        let batches = ProduceBatches {
            transactional_id: Some("tx".into()),
            acks: -1,
            timeout_ms: 1234,
            topics: vec![
                (
                    Arc::from("orders"),
                    vec![
                        PartitionBatch {
                            partition: 0,
                            batch: Bytes::from_static(b"batch-zero"),
                        },
                        PartitionBatch {
                            partition: 3,
                            batch: Bytes::from_static(b"batch-three!"),
                        },
                    ],
                ),
                (
                    Arc::from("audit"),
                    vec![PartitionBatch {
                        partition: 1,
                        batch: Bytes::from_static(b"x"),
                    }],
                ),
            ],
            addr: Arc::from("test"),
            versions: ANY_PRODUCE_VERSION,
        };
        for version in MIN_PRODUCE_VERSION..=ProduceRequest::VERSIONS.max {
            let mut out = Vec::new();
            batches
                .encode_frame(version, 77, "kring", &mut out)
                .unwrap();
            assert!(
                out.iter().any(|b| &b[..] == b"batch-three!"),
                "batches are their own segments"
            );
            let frame: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
            let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 4, "v{version} size prefix");
            let (header, body) = decode_request_frame(Bytes::from(frame[4..].to_vec())).unwrap();
            assert_eq!(header.correlation_id, 77);
            assert_eq!(header.request_api_version, version);
            let RequestKind::Produce(req) = body else {
                panic!("not a produce request")
            };
            assert_eq!(req.acks, -1);
            assert_eq!(req.timeout_ms, 1234);
            assert_eq!(req.transactional_id.as_deref(), Some("tx"));
            assert_eq!(req.topic_data.len(), 2);
            let orders = &req.topic_data[0];
            assert_eq!(orders.name, "orders");
            assert_eq!(orders.partition_data[1].index, 3);
            assert_eq!(
                orders.partition_data[1].records.as_deref(),
                Some(&b"batch-three!"[..])
            );
        }
    }
}
