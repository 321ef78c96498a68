//! The Kafka wire protocol, sans-IO: primitives, every message type (generated from
//! Kafka's JSON schemas into [`messages`]), request/response headers and framing, and
//! version negotiation. Nothing here does I/O, reads a clock or is async; the `io` layer
//! feeds it bytes and takes bytes from it.
//!
//! Framing (`shared/kafka-protocol/docs/protocol.html`): every request and response is a
//! big-endian `int32` size followed by that many bytes: a header, then the body. The
//! request header is v2 for flexible request versions (v1 otherwise); the response header
//! is v1 for flexible versions, except ApiVersions, whose response header is always v0.

pub mod frame;
pub mod messages;
pub mod negotiation;
pub mod primitives;
pub mod tagged;

#[cfg(test)]
pub(crate) mod testing;

use bytes::{BufMut, Bytes, BytesMut};

pub use frame::FrameCutter;
pub use messages::{ApiKey, KafkaCode, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
pub use negotiation::ApiVersionsTable;
pub use primitives::{DecodeError, EncodeError, Uuid};

/// An inclusive range of versions of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// The oldest version.
    pub min: i16,
    /// The newest version.
    pub max: i16,
}

impl VersionRange {
    /// Whether `version` is in the range.
    pub fn contains(&self, version: i16) -> bool {
        (self.min..=self.max).contains(&version)
    }
}

/// Writes a value in its wire form at a given version.
pub trait Encode {
    /// Appends the encoding of `self` at `version` to `buf`.
    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError>;
}

/// Reads a value from its wire form at a given version.
pub trait Decode: Sized {
    /// Decodes a value at `version` from the front of `buf`, advancing it. Byte fields of
    /// the result are zero-copy slices of `buf`.
    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError>;
}

/// A top-level message type: a request, a response, a header or an embedded data type.
pub trait Message: Encode + Decode + Default + Clone + std::fmt::Debug + PartialEq {
    /// The schema name, e.g. `MetadataRequest`.
    const NAME: &'static str;
    /// The versions this crate can encode and decode.
    const VERSIONS: VersionRange;
    /// The newest version offered in negotiation (the schema may mark the last unstable).
    const MAX_STABLE_VERSION: i16;
    /// The first flexible (KIP-482, compact encodings and tagged fields) version.
    const FIRST_FLEXIBLE_VERSION: Option<i16>;

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        Self::FIRST_FLEXIBLE_VERSION.is_some_and(|f| version >= f)
    }
}

/// A request body, tied to its API key and its response type.
pub trait Request: Message {
    /// The API this request belongs to.
    const API_KEY: ApiKey;
    /// The matching response body.
    type Response: Response;
    /// Wraps the request in the run-time [`RequestKind`].
    fn into_kind(self) -> RequestKind;
}

/// A response body, tied to its API key.
pub trait Response: Message {
    /// The API this response belongs to.
    const API_KEY: ApiKey;
    /// Wraps the response in the run-time [`ResponseKind`].
    fn into_kind(self) -> ResponseKind;
}

/// Builds a value of a message type from unstructured bytes, holding only the fields a
/// given version carries (so that encoding it at that version loses nothing). Used by
/// the property tests and the fuzz targets.
#[cfg(any(test, feature = "arbitrary"))]
pub trait ArbitraryVersion: Sized {
    /// An arbitrary value valid at `version`.
    fn arbitrary_for_version(
        u: &mut arbitrary::Unstructured<'_>,
        version: i16,
    ) -> arbitrary::Result<Self>;
}

/// Broker error codes that mean the cached metadata is stale.
pub fn is_stale_metadata(code: KafkaCode) -> bool {
    [
        KafkaCode::NOT_LEADER_OR_FOLLOWER,
        KafkaCode::UNKNOWN_TOPIC_OR_PARTITION,
        KafkaCode::LEADER_NOT_AVAILABLE,
        KafkaCode::FENCED_LEADER_EPOCH,
        KafkaCode::UNKNOWN_LEADER_EPOCH,
        KafkaCode::NOT_COORDINATOR,
        KafkaCode::COORDINATOR_NOT_AVAILABLE,
        KafkaCode::REPLICA_NOT_AVAILABLE,
        KafkaCode::KAFKA_STORAGE_ERROR,
        KafkaCode::OFFSET_NOT_AVAILABLE,
        KafkaCode::UNKNOWN_TOPIC_ID,
        KafkaCode::INCONSISTENT_TOPIC_ID,
    ]
    .contains(&code)
}

/// The size of the frame length prefix.
pub const FRAME_PREFIX: usize = 4;

/// Looks at the start of `input` for a size-prefixed frame. Returns `Ok(None)` when
/// fewer than 4 bytes are there yet, the body length otherwise. A negative length, or
/// one above `max_frame` (checked before anything is allocated for it), is an error.
pub fn frame_length(input: &[u8], max_frame: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = input.first_chunk::<FRAME_PREFIX>() else {
        return Ok(None);
    };
    let len = i32::from_be_bytes(*prefix);
    if len < 0 {
        return Err(DecodeError::NegativeLength(i64::from(len)));
    }
    if len as usize > max_frame {
        return Err(DecodeError::TooLarge {
            what: "frame",
            size: len as u64,
            max: max_frame as u64,
        });
    }
    Ok(Some(len as usize))
}

/// Appends a whole request frame (size, header, body) to `buf`.
///
/// The header version follows the request version as the API's schema says; the client
/// id is sent as given (`None` is a null client id).
pub fn encode_request_frame<R: Request>(
    buf: &mut BytesMut,
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<(), EncodeError> {
    if !R::VERSIONS.contains(version) {
        return Err(EncodeError::UnsupportedVersion {
            what: R::NAME,
            version,
        });
    }
    let start = buf.len();
    buf.put_i32(0);
    let header = RequestHeader::default()
        .with_request_api_key(R::API_KEY.key())
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(str::to_owned));
    header.encode(buf, R::API_KEY.request_header_version(version))?;
    request.encode(buf, version)?;
    let size = buf.len() - start - FRAME_PREFIX;
    let size = i32::try_from(size).map_err(|_| EncodeError::TooLong {
        what: "request frame",
        len: size,
    })?;
    buf[start..start + FRAME_PREFIX].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// Appends a whole response frame (size, header at the API's response header version,
/// then what `body` writes) to `buf`: the server side of framing, for the mock broker
/// and simulations.
pub fn encode_response_frame_with(
    buf: &mut BytesMut,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(buf, api.response_header_version(version))?;
    body(buf)?;
    let size = buf.len() - start - FRAME_PREFIX;
    let size = i32::try_from(size).map_err(|_| EncodeError::TooLong {
        what: "response frame",
        len: size,
    })?;
    buf[start..start + FRAME_PREFIX].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// [`encode_response_frame_with`] for a typed response.
pub fn encode_response_frame<R: Response>(
    buf: &mut BytesMut,
    response: &R,
    version: i16,
    correlation_id: i32,
) -> Result<(), EncodeError> {
    encode_response_frame_with(buf, R::API_KEY, version, correlation_id, |b| {
        response.encode(b, version)
    })
}

/// Decodes the header of a response frame (the bytes after the size prefix) for API
/// `api` at request version `version`, leaving `frame` at the start of the body.
pub fn decode_response_header(
    frame: &mut Bytes,
    api: ApiKey,
    version: i16,
) -> Result<ResponseHeader, DecodeError> {
    ResponseHeader::decode(frame, api.response_header_version(version))
}

/// Decodes a whole response frame (after the size prefix): header, then body of type
/// `R`. Trailing bytes after the body are an error, since they mean the version or the
/// type was wrong.
pub fn decode_response_frame<R: Response>(
    mut frame: Bytes,
    version: i16,
) -> Result<(ResponseHeader, R), DecodeError> {
    let header = decode_response_header(&mut frame, R::API_KEY, version)?;
    Ok((header, decode_response_body(frame, version)?))
}

/// Decodes a response body (the frame after its header); trailing bytes are an error.
pub fn decode_response_body<R: Response>(mut body: Bytes, version: i16) -> Result<R, DecodeError> {
    let response = R::decode(&mut body, version)?;
    if !body.is_empty() {
        return Err(DecodeError::InvalidValue {
            field: R::NAME,
            reason: "trailing bytes after the response body",
        });
    }
    Ok(response)
}

/// Decodes a request frame body (after the size prefix): the header, then the body by
/// the header's API key and version. Used by servers (the mock broker).
pub fn decode_request_frame(mut frame: Bytes) -> Result<(RequestHeader, RequestKind), DecodeError> {
    // The key and version are the first four bytes in every header version.
    let (key, version) = match frame.first_chunk::<4>() {
        Some(b) => (
            i16::from_be_bytes([b[0], b[1]]),
            i16::from_be_bytes([b[2], b[3]]),
        ),
        None => {
            return Err(DecodeError::Truncated {
                needed: 4,
                remaining: frame.len(),
            });
        }
    };
    let api = ApiKey::from_i16(key).ok_or(DecodeError::UnknownApiKey(key))?;
    if !api.versions().contains(version) {
        return Err(DecodeError::UnsupportedVersion {
            what: api.name(),
            version,
        });
    }
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version))?;
    let body = RequestKind::decode(api, &mut frame, version)?;
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};

    #[test]
    fn frame_length_checks_before_allocating() {
        assert_eq!(frame_length(&[0, 0, 1], 100), Ok(None));
        assert_eq!(frame_length(&[0, 0, 0, 10, 1], 100), Ok(Some(10)));
        assert_eq!(
            frame_length(&[0xff, 0xff, 0xff, 0xfe], 100),
            Err(DecodeError::NegativeLength(-2))
        );
        assert!(matches!(
            frame_length(&[0x7f, 0xff, 0xff, 0xff], 1 << 20),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn api_versions_v0_request_frame_matches_the_spec() {
        // size 15 | key 18 | version 0 | correlation 7 | client id "kring" (int16 length)
        let mut buf = BytesMut::new();
        encode_request_frame(
            &mut buf,
            &ApiVersionsRequest::default(),
            0,
            7,
            Some("kring"),
        )
        .unwrap();
        assert_eq!(
            &buf[..],
            &[
                0, 0, 0, 15, 0, 18, 0, 0, 0, 0, 0, 7, 0, 5, b'k', b'r', b'i', b'n', b'g'
            ][..]
        );
    }

    #[test]
    fn flexible_request_uses_header_v2_with_classic_client_id() {
        let mut buf = BytesMut::new();
        let req = MetadataRequest::default().with_topics(None);
        encode_request_frame(&mut buf, &req, 12, 1, Some("c")).unwrap();
        // header v2: key, version, correlation, int16-length client id, empty tag section.
        assert_eq!(&buf[4..16], &[0, 3, 0, 12, 0, 0, 0, 1, 0, 1, b'c', 0]);
        let (header, body) = decode_request_frame(buf.freeze().slice(4..)).unwrap();
        assert_eq!(header.client_id.as_deref(), Some("c"));
        assert_eq!(body, RequestKind::Metadata(req));
    }

    #[test]
    fn api_versions_response_header_is_always_v0() {
        // v3 response (flexible body) but header v0: correlation id only, no tag section.
        let resp = ApiVersionsResponse::default();
        let mut body = BytesMut::new();
        body.put_i32(99);
        resp.encode(&mut body, 3).unwrap();
        let (header, decoded) =
            decode_response_frame::<ApiVersionsResponse>(body.freeze(), 3).unwrap();
        assert_eq!(header.correlation_id, 99);
        assert_eq!(decoded, resp);
    }

    #[test]
    fn unknown_api_key_and_version_are_errors() {
        let frame = Bytes::from_static(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert_eq!(
            decode_request_frame(frame).unwrap_err(),
            DecodeError::UnknownApiKey(0x7f00)
        );
        let frame = Bytes::from_static(&[0, 3, 0x7f, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(
            decode_request_frame(frame).unwrap_err(),
            DecodeError::UnsupportedVersion { .. }
        ));
    }
}
