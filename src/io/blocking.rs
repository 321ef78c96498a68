//! A blocking, one-request-at-a-time connection to one broker over `std::net::TcpStream`.
//!
//! It frames requests, matches correlation ids, caps response frames before allocating
//! for them, and performs the ApiVersions handshake on connect (KIP-511: the client
//! offers its newest ApiVersions version with its software name and version; a broker
//! that does not know that version answers UNSUPPORTED_VERSION in the v0 format, listing
//! what it does support, and the client retries at that version). The negotiated versions
//! are kept, so `send` picks the highest version both sides speak for each API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};

use bytes::{Bytes, BytesMut};

use crate::io::{ConnectionConfig, IoError};
use crate::protocol::negotiation::{self, ApiVersionsTable};
use crate::protocol::{
    self, ApiKey, KafkaCode, Request, ResponseHeader, messages::ApiVersionsRequest,
};

/// A blocking connection to one broker.
#[derive(Debug)]
pub struct BlockingConnection {
    stream: TcpStream,
    addr: String,
    options: ConnectionConfig,
    next_correlation_id: i32,
    versions: ApiVersionsTable,
}

impl BlockingConnection {
    /// Connects to `addr` (`host:port`) and performs the ApiVersions handshake.
    pub fn connect(addr: &str, options: ConnectionConfig) -> Result<Self, IoError> {
        let mut conn = Self::connect_raw(addr, options)?;
        conn.handshake()?;
        Ok(conn)
    }

    /// Connects without the handshake: `send` then needs explicit versions.
    pub fn connect_raw(addr: &str, options: ConnectionConfig) -> Result<Self, IoError> {
        let io_err = |op: &str, source: std::io::Error| IoError::Connect {
            addr: addr.to_string(),
            message: format!("{op}: {source}"),
        };
        let targets: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| io_err("resolving", e))?
            .collect();
        let mut last = None;
        for target in &targets {
            match TcpStream::connect_timeout(target, options.connect_timeout) {
                Ok(stream) => {
                    stream
                        .set_read_timeout(Some(options.request_timeout))
                        .and_then(|_| stream.set_write_timeout(Some(options.request_timeout)))
                        .and_then(|_| stream.set_nodelay(true))
                        .map_err(|e| io_err("configuring", e))?;
                    return Ok(BlockingConnection {
                        stream,
                        addr: addr.to_string(),
                        options,
                        next_correlation_id: 0,
                        versions: ApiVersionsTable::default(),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(io_err("connecting to", e)),
            None => Err(IoError::Connect {
                addr: addr.to_string(),
                message: "resolved to no address".into(),
            }),
        }
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The versions negotiated with the broker (empty before the handshake).
    pub fn api_versions(&self) -> &ApiVersionsTable {
        &self.versions
    }

    /// Runs the ApiVersions handshake and keeps the broker's versions.
    pub fn handshake(&mut self) -> Result<&ApiVersionsTable, IoError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name("kring".into())
            .with_client_software_version(env!("CARGO_PKG_VERSION").into());
        let mut version = ApiKey::ApiVersions.max_stable_version();
        for _attempt in 0..2 {
            let frame = self.round_trip(&request, version)?;
            let response =
                negotiation::decode_api_versions_response(frame, version).map_err(|source| {
                    IoError::Decode {
                        api: ApiKey::ApiVersions,
                        addr: self.addr.clone(),
                        source,
                    }
                })?;
            let code = KafkaCode(response.error_code);
            if code.is_ok() {
                self.versions = ApiVersionsTable::from_response(&response);
                return Ok(&self.versions);
            }
            match negotiation::api_versions_fallback(&response) {
                Some(v) if v < version => version = v,
                _ => {
                    return Err(IoError::Handshake {
                        addr: self.addr.clone(),
                        code,
                    });
                }
            }
        }
        Err(IoError::Handshake {
            addr: self.addr.clone(),
            code: KafkaCode::UNSUPPORTED_VERSION,
        })
    }

    /// Sends `request` at the highest version both sides support and waits for the answer.
    pub fn send<R: Request>(&mut self, request: &R) -> Result<R::Response, IoError> {
        let version =
            self.versions
                .version_for(R::API_KEY)
                .ok_or_else(|| IoError::UnsupportedApi {
                    api: R::API_KEY,
                    addr: self.addr.clone(),
                })?;
        self.send_version(request, version)
    }

    /// Sends `request` at an explicit version and waits for the answer.
    pub fn send_version<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, IoError> {
        let frame = self.round_trip(request, version)?;
        let response =
            protocol::decode_response_body::<R::Response>(frame, version).map_err(|source| {
                IoError::Decode {
                    api: R::API_KEY,
                    addr: self.addr.clone(),
                    source,
                }
            })?;
        Ok(response)
    }

    /// Writes a pre-built request frame (size prefix included) and returns the response
    /// frame after its size prefix, header included. The caller is responsible for the
    /// frame's correlation id; see [`BlockingConnection::next_correlation_id`].
    pub fn send_raw_frame(&mut self, frame: &[u8]) -> Result<Bytes, IoError> {
        self.write_all(frame)?;
        let api = frame
            .get(4..6)
            .and_then(|k| ApiKey::from_i16(i16::from_be_bytes([k[0], k[1]])))
            .unwrap_or(ApiKey::ApiVersions);
        self.read_frame(api)
    }

    /// Takes the next correlation id (for callers that build frames themselves).
    pub fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// Encodes, writes, reads the answer and checks its correlation id. Returns the
    /// response frame positioned after the response header.
    fn round_trip<R: Request>(&mut self, request: &R, version: i16) -> Result<Bytes, IoError> {
        let correlation_id = self.next_correlation_id();
        let mut buf = BytesMut::with_capacity(256);
        protocol::encode_request_frame(
            &mut buf,
            request,
            version,
            correlation_id,
            Some(&self.options.client_id),
        )
        .map_err(|source| IoError::Encode {
            api: R::API_KEY,
            source,
        })?;
        self.write_all(&buf)?;
        let mut frame = self.read_frame(R::API_KEY)?;
        let header: ResponseHeader =
            protocol::decode_response_header(&mut frame, R::API_KEY, version).map_err(
                |source| IoError::Decode {
                    api: R::API_KEY,
                    addr: self.addr.clone(),
                    source,
                },
            )?;
        if header.correlation_id != correlation_id {
            return Err(IoError::Disconnected {
                addr: self.addr.clone(),
                reason: format!(
                    "correlation id {} in answer to {correlation_id}",
                    header.correlation_id
                ),
            });
        }
        Ok(frame)
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), IoError> {
        self.stream
            .write_all(data)
            .map_err(|source| IoError::Disconnected {
                addr: self.addr.clone(),
                reason: format!("write failed: {source}"),
            })
    }

    fn read_frame(&mut self, api: ApiKey) -> Result<Bytes, IoError> {
        let io_err = |addr: &str, source: std::io::Error| IoError::Disconnected {
            addr: addr.to_string(),
            reason: format!("read failed: {source}"),
        };
        let mut prefix = [0u8; protocol::FRAME_PREFIX];
        self.stream
            .read_exact(&mut prefix)
            .map_err(|e| io_err(&self.addr, e))?;
        let len = protocol::frame_length(&prefix, self.options.max_response_size)
            .map_err(|source| IoError::Decode {
                api,
                addr: self.addr.clone(),
                source,
            })?
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| io_err(&self.addr, e))?;
        Ok(Bytes::from(body))
    }
}
