//! TLS for a broker connection, sans-IO: rustls's `ClientConnection` (itself a state
//! machine over bytes) sits between the socket's bytes and the connection engine's frame
//! cutter. Ciphertext read by the driver goes in ([`TlsLayer::read_ciphertext`]), the
//! plaintext is copied from rustls's buffer straight into the frame cutter's;
//! request frames go in as plaintext ([`TlsLayer::encrypt`]) and leave as records
//! ([`TlsLayer::poll_ciphertext`]). So TLS works the same over io_uring, epoll, the
//! blocking connection and the simulation.
//!
//! Failures are named for the person reading them: an untrusted or expired certificate,
//! a host name the certificate does not cover, a broker that wants a client certificate,
//! or a peer that does not speak TLS at all.

use std::io::{BufRead, Write};
use std::sync::Arc;

use bytes::Bytes;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig, ClientConnection};

use crate::protocol::FrameCutter;

/// What a connection needs to start TLS: the verified client configuration (trust
/// roots, client certificate, protocol versions), built once per client.
#[derive(Debug, Clone)]
pub struct TlsSetup {
    /// The rustls configuration shared by every connection of the client.
    pub config: Arc<ClientConfig>,
}

/// Why TLS failed, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFailure(pub String);

/// One connection's TLS state.
pub struct TlsLayer {
    conn: ClientConnection,
    /// Where the ciphertext stream stands in its current TLS record.
    records: RecordTracker,
}

/// Follows the TLS record framing (5-byte headers: type, version, 16-bit length) of the
/// ciphertext read so far, to know how much of an unfinished record rustls holds and how
/// much of it is still to come: what [`TlsLayer::socket_bytes_needed`] builds on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct RecordTracker {
    header: [u8; RECORD_HEADER],
    /// Bytes of the current record seen, its header included.
    seen: usize,
}

/// A TLS record's header length.
const RECORD_HEADER: usize = 5;

impl RecordTracker {
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.seen < RECORD_HEADER {
                let n = (RECORD_HEADER - self.seen).min(data.len());
                self.header[self.seen..self.seen + n].copy_from_slice(&data[..n]);
                self.seen += n;
                data = &data[n..];
                continue;
            }
            let rest = self.total() - self.seen;
            let n = rest.min(data.len());
            self.seen += n;
            data = &data[n..];
            if self.seen == self.total() {
                self.seen = 0;
            }
        }
        if self.seen == RECORD_HEADER && self.total() == RECORD_HEADER {
            self.seen = 0;
        }
    }

    /// The current record's length, header included (once its header is in).
    fn total(&self) -> usize {
        RECORD_HEADER + usize::from(u16::from_be_bytes([self.header[3], self.header[4]]))
    }

    /// See [`TlsLayer::socket_bytes_needed`].
    fn owed(&self, plaintext: usize) -> usize {
        let (held, missing) = self.unfinished();
        missing.max(plaintext.saturating_sub(held))
    }

    /// (bytes of the unfinished record held, bytes still to come for it: 0 between
    /// records, and the header's missing bytes while it is incomplete).
    fn unfinished(&self) -> (usize, usize) {
        match self.seen {
            0 => (0, 0),
            seen if seen < RECORD_HEADER => (seen, RECORD_HEADER - seen),
            seen => (seen, self.total() - seen),
        }
    }
}

impl std::fmt::Debug for TlsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsLayer")
            .field("handshaking", &self.conn.is_handshaking())
            .finish_non_exhaustive()
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
pub fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => addr,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

impl TlsLayer {
    /// Starts a client handshake with the broker at `addr` (`host:port`); the host is
    /// the name the certificate must cover (an IP address must be in its IP SANs).
    pub fn new(setup: &TlsSetup, addr: &str) -> Result<Self, TlsFailure> {
        let host = host_of(addr);
        let name = ServerName::try_from(host.to_string()).map_err(|_| {
            TlsFailure(format!(
                "{host:?} is not a valid DNS name or IP address for TLS"
            ))
        })?;
        let mut conn = ClientConnection::new(setup.config.clone(), name)
            .map_err(|e| TlsFailure(format!("starting TLS: {e}")))?;
        // The engine hands over one loop turn's frames at a time and writes all it gets;
        // bounding here would only split that turn.
        conn.set_buffer_limit(None);
        Ok(TlsLayer {
            conn,
            records: RecordTracker::default(),
        })
    }

    /// Whether the TLS handshake is still going on.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Feeds ciphertext read from the socket; the plaintext it carries is appended to
    /// `plain`. Returns whether the peer closed the TLS session (close_notify).
    pub fn read_ciphertext(
        &mut self,
        mut data: &[u8],
        plain: &mut FrameCutter,
    ) -> Result<bool, TlsFailure> {
        self.records.feed(data);
        let mut closed = false;
        while !data.is_empty() {
            let n = self
                .conn
                .read_tls(&mut data)
                .map_err(|e| TlsFailure(format!("reading TLS records: {e}")))?;
            let state = self.conn.process_new_packets().map_err(|e| describe(&e))?;
            closed |= state.peer_has_closed();
            self.take_plaintext(state.plaintext_bytes_to_read(), plain)?;
            if n == 0 {
                break;
            }
        }
        Ok(closed)
    }

    /// A lower bound on the ciphertext the socket must still deliver before `plaintext`
    /// more bytes of plaintext can be had, for a read's wake threshold: never more than
    /// will surely come, or a reader would wait for bytes the peer never sends.
    ///
    /// Every plaintext byte not yet delivered is in the unfinished record (of which
    /// `held` bytes are in, `missing` to come, and which carries at most its length
    /// less its header in plaintext) or in later records (each at least as long as its
    /// plaintext). So the socket owes at least the unfinished record's `missing` bytes,
    /// and at least `plaintext − held` bytes in all (when the unfinished record cannot
    /// carry all of them, its missing part plus the later records' plaintext is more
    /// than that; when it can, `plaintext − held` is less than `missing`). Handshake
    /// records, alerts and padding only add to what is owed.
    pub fn socket_bytes_needed(&self, plaintext: usize) -> usize {
        self.records.owed(plaintext)
    }

    /// Moves the `pending` plaintext bytes rustls holds into the frame cutter, copied
    /// straight out of rustls's own buffer (nothing zeroed, no intermediate).
    fn take_plaintext(
        &mut self,
        mut pending: usize,
        plain: &mut FrameCutter,
    ) -> Result<(), TlsFailure> {
        let mut reader = self.conn.reader();
        while pending > 0 {
            let n = match reader.fill_buf() {
                Ok([]) => break,
                Ok(chunk) => {
                    let n = chunk.len().min(pending);
                    plain.extend_in_steps(&chunk[..n]);
                    n
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(TlsFailure(format!("reading plaintext: {e}"))),
            };
            reader.consume(n);
            pending -= n;
        }
        Ok(())
    }

    /// Encrypts request frames (they leave through [`TlsLayer::poll_ciphertext`]).
    /// Before the handshake is done rustls keeps them until it is.
    pub fn encrypt(&mut self, plain: &[Bytes]) -> Result<(), TlsFailure> {
        let mut writer = self.conn.writer();
        for segment in plain {
            writer
                .write_all(segment)
                .map_err(|e| TlsFailure(format!("encrypting: {e}")))?;
        }
        Ok(())
    }

    /// Moves every TLS record waiting to be written (handshake messages, alerts,
    /// encrypted frames) into `out`. Returns whether there was any.
    pub fn poll_ciphertext(&mut self, out: &mut Vec<Bytes>) -> bool {
        if !self.conn.wants_write() {
            return false;
        }
        let mut records = Vec::new();
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut records).is_err() {
                break;
            }
        }
        let any = !records.is_empty();
        if any {
            out.push(Bytes::from(records));
        }
        any
    }
}

/// A rustls error in words that say what to do.
fn describe(error: &rustls::Error) -> TlsFailure {
    use rustls::AlertDescription as A;
    let text = match error {
        rustls::Error::InvalidCertificate(c) => describe_certificate(c),
        rustls::Error::AlertReceived(A::CertificateRequired | A::HandshakeFailure)
        | rustls::Error::AlertReceived(A::BadCertificate) => format!(
            "the broker refused the TLS handshake ({error}): it may require a client \
             certificate (ssl.certificate.location and ssl.key.location) signed by a CA it trusts"
        ),
        rustls::Error::AlertReceived(a) => format!("the broker sent the TLS alert {a:?}"),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "the peer does not speak TLS ({error}): the port may be a PLAINTEXT or \
             SASL_PLAINTEXT listener (security.protocol)"
        ),
        other => format!("TLS failed: {other}"),
    };
    TlsFailure(text)
}

fn describe_certificate(c: &CertificateError) -> String {
    match c {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
            "the broker's certificate is not trusted ({c:?}): set ssl.ca.location to the \
             CA that signed it"
        ),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the broker's certificate has expired".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the broker's certificate is not valid yet (check the clocks)".to_string()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "the broker's certificate is not valid for the host connected to ({c:?}); \
                 connect by a name the certificate covers, or set \
                 ssl.endpoint.identification.algorithm to empty to skip the host name check"
            )
        }
        other => format!("the broker's certificate was refused: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u16) -> Vec<u8> {
        let mut h = vec![23, 3, 3];
        h.extend_from_slice(&len.to_be_bytes());
        h
    }

    #[test]
    fn the_record_tracker_follows_records_across_reads() {
        let mut t = RecordTracker::default();
        assert_eq!(t.unfinished(), (0, 0));
        let mut stream = header(100);
        stream.extend(std::iter::repeat_n(7u8, 100));
        stream.extend(header(0));
        stream.extend(header(16_401));
        stream.extend(std::iter::repeat_n(9u8, 1000));
        // Fed in awkward pieces: within a header, across record ends.
        for piece in stream.chunks(3) {
            t.feed(piece);
        }
        assert_eq!(t.unfinished(), (5 + 1000, 16_401 - 1000));
        t.feed(&[1, 2]);
        assert_eq!(t.unfinished(), (5 + 1002, 15_399));
        t.feed(&vec![0; 15_399]);
        assert_eq!(t.unfinished(), (0, 0));
        t.feed(&[23, 3]);
        assert_eq!(t.unfinished(), (2, 3));
    }

    #[test]
    fn socket_bytes_needed_is_a_lower_bound() {
        let mut t = RecordTracker::default();
        t.feed(&header(16_401));
        t.feed(&[0; 401]);
        // 10 plaintext bytes might all be in this record: only its rest is owed.
        assert_eq!(t.owed(10), 16_000);
        // A megabyte cannot be: at least a megabyte less what is held.
        assert_eq!(t.owed(1 << 20), (1 << 20) - 406);
        // Between records, every plaintext byte is still to come.
        assert_eq!(RecordTracker::default().owed(4096), 4096);
    }

    #[test]
    fn hosts_are_taken_from_addresses() {
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("broker-1.example:9093"), "broker-1.example");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }
}
