//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them (KIP-84):
//! client-first, server-first, client-final with the proof, server-final with the
//! server's signature, which is verified so a broker that does not know the password
//! cannot pass for one that does. No channel binding (`n,,`), as every Kafka client.
//! The password is used as its UTF-8 bytes, as Kafka's own ScramFormatter does.
//!
//! The broker's first message is hostile input: its nonce must extend ours, its salt must
//! decode, and its iteration count is bounded (4096 is Kafka's minimum; a count above
//! [`MAX_ITERATIONS`] would let a broker burn the client's CPU).

use ring::{digest, hmac, pbkdf2};

use super::{SaslError, Secret, base64};

/// The most PBKDF2 iterations accepted from a broker.
pub const MAX_ITERATIONS: u32 = 1_000_000;
/// Kafka's minimum (`ScramMechanism.minIterations`).
pub const MIN_ITERATIONS: u32 = 4096;

/// The hash a SCRAM mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramHash::Sha256 => hmac::HMAC_SHA256,
            ScramHash::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramHash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramHash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramHash::Sha256 => &digest::SHA256,
            ScramHash::Sha512 => &digest::SHA512,
        }
    }

    fn len(self) -> usize {
        self.digest().output_len()
    }

    /// The mechanism's name on the wire.
    pub fn mechanism(self) -> &'static str {
        match self {
            ScramHash::Sha256 => "SCRAM-SHA-256",
            ScramHash::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// Where a SCRAM exchange stands.
#[derive(Debug)]
enum State {
    /// client-first sent; waiting for server-first.
    SentFirst {
        client_first_bare: String,
    },
    /// client-final sent; waiting for server-final, whose signature must be this.
    SentFinal {
        server_signature: Vec<u8>,
    },
    Done,
}

/// One SCRAM exchange.
pub struct Scram {
    hash: ScramHash,
    password: Secret,
    client_nonce: String,
    state: State,
}

impl std::fmt::Debug for Scram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scram")
            .field("hash", &self.hash)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// `saslname` escaping of RFC 5802: `=` and `,` in a user name.
fn escape_username(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl Scram {
    /// Starts an exchange; returns it with the client-first message. `client_nonce` must
    /// be printable ASCII without `,` (the caller draws it from a CSPRNG).
    pub fn start(
        hash: ScramHash,
        username: &str,
        password: Secret,
        client_nonce: String,
    ) -> (Scram, Vec<u8>) {
        let client_first_bare = format!("n={},r={client_nonce}", escape_username(username));
        let message = format!("n,,{client_first_bare}").into_bytes();
        let scram = Scram {
            hash,
            password,
            client_nonce,
            state: State::SentFirst { client_first_bare },
        };
        (scram, message)
    }

    /// The broker's next message: returns the reply to send, or `None` when the
    /// exchange is complete and the broker proved it knows the password.
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        let server = std::str::from_utf8(server)
            .map_err(|_| self.invalid("the broker's SCRAM message is not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::SentFirst { client_first_bare } => {
                self.client_final(&client_first_bare, server).map(Some)
            }
            State::SentFinal { server_signature } => {
                self.verify_server_final(server, &server_signature)?;
                Ok(None)
            }
            State::Done => Err(self.invalid("the broker sent a message after SCRAM completed")),
        }
    }

    fn invalid(&self, reason: impl Into<String>) -> SaslError {
        SaslError::Protocol {
            mechanism: self.hash.mechanism(),
            reason: reason.into(),
        }
    }

    fn client_final(
        &mut self,
        client_first_bare: &str,
        server_first: &str,
    ) -> Result<Vec<u8>, SaslError> {
        let fields = ServerFirst::parse(server_first).map_err(|r| self.invalid(r))?;
        if !fields.nonce.starts_with(&self.client_nonce) || fields.nonce == self.client_nonce {
            return Err(self.invalid("the broker's nonce does not extend the client's"));
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&fields.iterations) {
            return Err(self.invalid(format!(
                "iteration count {} outside {MIN_ITERATIONS}..={MAX_ITERATIONS}",
                fields.iterations
            )));
        }
        let salt = base64::decode(fields.salt).ok_or_else(|| self.invalid("bad salt"))?;
        let keys = Keys::derive(self.hash, self.password.expose(), &salt, fields.iterations);
        // "biws" is base64("n,,"): no channel binding, no authorisation identity.
        let without_proof = format!("c=biws,r={}", fields.nonce);
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let proof = keys.client_proof(auth_message.as_bytes());
        self.state = State::SentFinal {
            server_signature: keys.server_signature(auth_message.as_bytes()),
        };
        Ok(format!("{without_proof},p={}", base64::encode(&proof)).into_bytes())
    }

    fn verify_server_final(&self, server_final: &str, expected: &[u8]) -> Result<(), SaslError> {
        if let Some(error) = server_final.strip_prefix("e=") {
            return Err(SaslError::Rejected {
                mechanism: self.hash.mechanism(),
                reason: format!("the broker ended the SCRAM exchange: {error}"),
            });
        }
        let signature = server_final
            .split(',')
            .find_map(|f| f.strip_prefix("v="))
            .and_then(base64::decode)
            .ok_or_else(|| self.invalid("server-final carries no signature"))?;
        if !constant_time_eq(&signature, expected) {
            return Err(self.invalid(
                "the broker's signature is wrong: it does not know the password (or is not \
                 the broker it claims to be)",
            ));
        }
        Ok(())
    }
}

/// The fields of server-first: `r=nonce,s=salt,i=iterations[,extensions]`.
struct ServerFirst<'a> {
    nonce: &'a str,
    salt: &'a str,
    iterations: u32,
}

impl<'a> ServerFirst<'a> {
    fn parse(message: &'a str) -> Result<Self, String> {
        if message.starts_with("m=") {
            return Err("the broker requires a SCRAM extension kring does not know".into());
        }
        if let Some(error) = message.strip_prefix("e=") {
            return Err(format!("the broker refused: {error}"));
        }
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for field in message.split(',') {
            match field.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v),
                Some(("s=", v)) => salt = Some(v),
                Some(("i=", v)) => iterations = Some(v),
                _ => {}
            }
        }
        let missing = |what: &str| format!("server-first lacks {what}: {message:?}");
        let iterations = iterations.ok_or_else(|| missing("the iteration count"))?;
        Ok(ServerFirst {
            nonce: nonce.ok_or_else(|| missing("the nonce"))?,
            salt: salt.ok_or_else(|| missing("the salt"))?,
            iterations: iterations
                .parse()
                .map_err(|_| format!("bad iteration count {iterations:?}"))?,
        })
    }
}

/// The keys RFC 5802 derives from the salted password.
struct Keys {
    hash: ScramHash,
    client_key: Vec<u8>,
    server_key: hmac::Key,
    stored_key: hmac::Key,
}

/// RFC 5802's `SaltedPassword := Hi(password, salt, i)`: PBKDF2 with the mechanism's
/// HMAC (the client exchange here, and the admin's SCRAM credentials). A count of 0 is
/// taken as 1.
pub fn salted_password(hash: ScramHash, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut salted = vec![0u8; hash.len()];
    let rounds = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(
        hash.pbkdf2(),
        rounds,
        salt,
        password.as_bytes(),
        &mut salted,
    );
    salted
}

impl Keys {
    fn derive(hash: ScramHash, password: &str, salt: &[u8], iterations: u32) -> Keys {
        let salted = salted_password(hash, password, salt, iterations);
        let salted = hmac::Key::new(hash.hmac(), &salted);
        let client_key = hmac::sign(&salted, b"Client Key").as_ref().to_vec();
        let stored = digest::digest(hash.digest(), &client_key);
        Keys {
            hash,
            server_key: hmac::Key::new(hash.hmac(), hmac::sign(&salted, b"Server Key").as_ref()),
            stored_key: hmac::Key::new(hash.hmac(), stored.as_ref()),
            client_key,
        }
    }

    fn client_proof(&self, auth_message: &[u8]) -> Vec<u8> {
        let signature = hmac::sign(&self.stored_key, auth_message);
        debug_assert_eq!(signature.as_ref().len(), self.hash.len());
        self.client_key
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect()
    }

    fn server_signature(&self, auth_message: &[u8]) -> Vec<u8> {
        hmac::sign(&self.server_key, auth_message).as_ref().to_vec()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[test]
    fn rfc7677_example() {
        let (mut scram, first) = Scram::start(
            ScramHash::Sha256,
            "user",
            Secret::new("pencil"),
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_message = scram.step(server_first).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(final_message).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
        assert_eq!(scram.step(server_final).unwrap(), None);
    }

    fn after_first(hash: ScramHash) -> Scram {
        let (mut scram, _) = Scram::start(hash, "user", Secret::new("pencil"), "abc".into());
        scram.step(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096").unwrap();
        scram
    }

    #[test]
    fn a_wrong_server_signature_is_refused() {
        let mut scram = after_first(ScramHash::Sha512);
        let err = scram
            .step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(err.to_string().contains("signature is wrong"), "{err}");
    }

    #[test]
    fn hostile_server_first_messages_are_refused() {
        let cases: [(&[u8], &str); 7] = [
            (b"r=xyz,s=QSXCR+Q6sek8bf92,i=4096", "does not extend"),
            (b"r=abc,s=QSXCR+Q6sek8bf92,i=4096", "does not extend"),
            (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4095", "outside"),
            (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4000000000", "outside"),
            (b"r=abcdef,s=!!,i=4096", "bad salt"),
            (b"r=abcdef,i=4096", "lacks the salt"),
            (b"\xff\xfe", "not UTF-8"),
        ];
        for (message, expected) in cases {
            let (mut scram, _) =
                Scram::start(ScramHash::Sha256, "u", Secret::new("p"), "abc".into());
            let err = scram.step(message).unwrap_err().to_string();
            assert!(err.contains(expected), "{message:?}: {err}");
        }
    }

    #[test]
    fn user_names_are_escaped() {
        let (_, first) = Scram::start(ScramHash::Sha256, "a=b,c", Secret::new("p"), "n".into());
        assert_eq!(first, b"n,,n=a=3Db=2Cc,r=n");
    }
}
