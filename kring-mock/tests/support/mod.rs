//! A raw blocking Kafka connection for the mock's own tests, built on kring's public
//! protocol layer only (request frames, [`FrameCutter`], header and body decoding,
//! version negotiation): tests that script exactly which request goes to which broker
//! on which connection, and read back exactly what the mock answered, without kring's
//! client, producer or consumer deciding anything for them.

#![allow(dead_code)]

pub mod watchdog;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kring::protocol::messages::ApiVersionsRequest;
use kring::protocol::negotiation::{self, ApiVersionsTable};
use kring::protocol::{
    ApiKey, EncodeError, FrameCutter, KafkaCode, Request, decode_response_body,
    decode_response_header, encode_request_frame,
};

/// What went wrong on a [`RawConnection`].
#[derive(Debug, thiserror::Error)]
pub enum RawError {
    /// The socket failed or the mock closed the connection (retriable: reconnect).
    #[error("connection to {addr}: {what}")]
    Closed { addr: String, what: String },
    /// The answer did not decode, or came for another request.
    #[error("answer from {addr}: {what}")]
    Bad { addr: String, what: String },
    /// The request did not encode.
    #[error("encoding: {0}")]
    Encode(#[from] EncodeError),
    /// The mock speaks no version of the API that kring speaks.
    #[error("{0:?}: no common version")]
    Unsupported(ApiKey),
}

impl RawError {
    /// Whether a new connection may succeed where this one failed.
    pub fn is_retriable(&self) -> bool {
        matches!(self, RawError::Closed { .. })
    }
}

/// One blocking connection: requests are written one at a time (or pipelined with
/// [`RawConnection::write`]) and answers read in order.
#[derive(Debug)]
pub struct RawConnection {
    stream: TcpStream,
    addr: String,
    cutter: FrameCutter,
    next_correlation_id: i32,
    versions: ApiVersionsTable,
}

impl RawConnection {
    /// Connects to `addr` and runs the ApiVersions handshake (with the KIP-511 retry at
    /// the version the broker names).
    pub fn connect(addr: &str) -> Result<RawConnection, RawError> {
        let mut conn = RawConnection::connect_raw(addr)?;
        let request = ApiVersionsRequest::default()
            .with_client_software_name("kring-mock-tests".into())
            .with_client_software_version("0".into());
        let mut version = ApiKey::ApiVersions.max_stable_version();
        loop {
            let id = conn.write(&request, version)?;
            let frame = conn.read_frame(id, ApiKey::ApiVersions, version)?;
            let response = negotiation::decode_api_versions_response(frame, version)
                .map_err(|e| conn.bad(e))?;
            if response.error_code == 0 {
                conn.versions = ApiVersionsTable::from_response(&response);
                return Ok(conn);
            }
            match negotiation::api_versions_fallback(&response) {
                Some(v) if v < version => version = v,
                _ => {
                    return Err(conn.bad(format!("handshake: {}", KafkaCode(response.error_code))));
                }
            }
        }
    }

    /// Connects without the handshake.
    pub fn connect_raw(addr: &str) -> Result<RawConnection, RawError> {
        let closed = |e: std::io::Error| RawError::Closed {
            addr: addr.to_string(),
            what: e.to_string(),
        };
        let stream = TcpStream::connect(addr).map_err(closed)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(closed)?;
        stream.set_nodelay(true).map_err(closed)?;
        Ok(RawConnection {
            stream,
            addr: addr.to_string(),
            cutter: FrameCutter::new(64 << 20, 64 << 10),
            next_correlation_id: 0,
            versions: ApiVersionsTable::default(),
        })
    }

    /// The versions negotiated in the handshake.
    pub fn api_versions(&self) -> &ApiVersionsTable {
        &self.versions
    }

    /// Sends `request` at the highest version both sides speak and reads the answer.
    pub fn send<R: Request>(&mut self, request: &R) -> Result<R::Response, RawError> {
        let version = self.version_for::<R>()?;
        self.send_version(request, version)
    }

    /// Sends `request` at `version` and reads the answer.
    pub fn send_version<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, RawError> {
        let id = self.write(request, version)?;
        self.read::<R>(id, version)
    }

    /// How long a read waits for the mock (10 s unless set).
    pub fn set_read_timeout(&self, timeout: Duration) {
        let _ = self.stream.set_read_timeout(Some(timeout));
    }

    /// The version `send` uses for `R`.
    pub fn version_for<R: Request>(&self) -> Result<i16, RawError> {
        self.versions
            .version_for(R::API_KEY)
            .ok_or(RawError::Unsupported(R::API_KEY))
    }

    /// Writes `request` at `version` without reading; returns its correlation id.
    pub fn write<R: Request>(&mut self, request: &R, version: i16) -> Result<i32, RawError> {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut buf = BytesMut::new();
        encode_request_frame(&mut buf, request, version, id, Some("kring"))?;
        self.stream.write_all(&buf).map_err(|e| self.closed(e))?;
        Ok(id)
    }

    /// Writes `request` `n` times without waiting (pipelined), then reads the answers
    /// in order: what a client with `n` requests in flight sees.
    pub fn pipeline<R: Request>(
        &mut self,
        request: &R,
        n: usize,
    ) -> Result<Vec<Result<R::Response, RawError>>, RawError> {
        let version = self.version_for::<R>()?;
        let ids = (0..n)
            .map(|_| self.write(request, version))
            .collect::<Result<Vec<i32>, RawError>>()?;
        Ok(ids
            .into_iter()
            .map(|id| self.read::<R>(id, version))
            .collect())
    }

    /// Reads the answer to the request written with correlation id `id`.
    pub fn read<R: Request>(&mut self, id: i32, version: i16) -> Result<R::Response, RawError> {
        let body = self.read_frame(id, R::API_KEY, version)?;
        decode_response_body::<R::Response>(body, version).map_err(|e| self.bad(e))
    }

    /// Closes the connection.
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// The next frame, checked to answer `id`, positioned after the response header.
    fn read_frame(&mut self, id: i32, api: ApiKey, version: i16) -> Result<Bytes, RawError> {
        let mut frame = loop {
            if let Some(frame) = self.cutter.next_frame().map_err(|e| self.bad(e))? {
                break frame;
            }
            let stream = &mut self.stream;
            match self.cutter.fill_with(|buf| stream.read(buf)) {
                Ok(0) => {
                    return Err(RawError::Closed {
                        addr: self.addr.clone(),
                        what: "closed by the peer".into(),
                    });
                }
                Ok(_) => {}
                Err(e) => return Err(self.closed(e)),
            }
        };
        let header = decode_response_header(&mut frame, api, version).map_err(|e| self.bad(e))?;
        if header.correlation_id != id {
            return Err(self.bad(format!(
                "correlation id {} where {id} was expected",
                header.correlation_id
            )));
        }
        Ok(frame)
    }

    fn closed(&self, e: std::io::Error) -> RawError {
        RawError::Closed {
            addr: self.addr.clone(),
            what: e.to_string(),
        }
    }

    fn bad(&self, what: impl ToString) -> RawError {
        RawError::Bad {
            addr: self.addr.clone(),
            what: what.to_string(),
        }
    }
}
