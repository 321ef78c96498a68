//! Encrypted PKCS#8 private keys (`-----BEGIN ENCRYPTED PRIVATE KEY-----`, what
//! `openssl pkcs8 -topk8 -v2 aes-256-cbc` and Java's tools write), decrypted with
//! `ssl.key.password`: PBES2 with PBKDF2 (HMAC-SHA1/224/256/384/512) or scrypt, and
//! AES-128/192/256-CBC, through the RustCrypto `pkcs8` crate. The key-derivation
//! parameters come from the file, so they are bounded before any work is done: a file
//! asking for a billion PBKDF2 rounds or gigabytes of scrypt memory is refused, not
//! obeyed. Legacy schemes (PBES1: DES, RC2, 3DES) and OpenSSL's traditional
//! `Proc-Type: 4,ENCRYPTED` keys are refused with the command that converts them.

use pkcs8::EncryptedPrivateKeyInfo;
use pkcs8::der::{Decode, Header, SliceReader, Tag, pem};
use pkcs8::pkcs5::pbes2::{self, Kdf};
use pkcs8::pkcs5::{AlgorithmIdentifierRef, EncryptionScheme, ObjectIdentifier};

/// The most PBKDF2 rounds a key file may ask for (OpenSSL writes 2,048; Java 10,000 and
/// more): beyond this, decrypting takes seconds to hours of CPU at start-up.
pub(crate) const MAX_PBKDF2_ROUNDS: u32 = 10_000_000;

/// The most memory scrypt may use for a key file (128 × N × r bytes; OpenSSL writes
/// N = 16,384 and r = 8: 16 MiB).
pub(crate) const MAX_SCRYPT_MEMORY: u64 = 256 << 20;

/// The most scrypt parallelisation a key file may ask for (each one a full pass).
const MAX_SCRYPT_PARALLELISM: u16 = 16;

const ENCRYPTED_LABEL: &str = "ENCRYPTED PRIVATE KEY";
const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// What is wrong with an encrypted key (or with the password for it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum EncryptedKeyError {
    #[error("the private key is encrypted: set ssl.key.password")]
    NoPassword,
    #[error(
        "ssl.key.password is set but the private key is not encrypted: drop the password \
         or use the encrypted key"
    )]
    NotEncrypted,
    #[error(
        "the private key is in OpenSSL's traditional encrypted format (Proc-Type: \
         4,ENCRYPTED): convert it to encrypted PKCS#8 with `openssl pkcs8 -topk8 -v2 \
         aes-256-cbc -in key.pem -out key.p8.pem`"
    )]
    Traditional,
    #[error("the ENCRYPTED PRIVATE KEY block is not valid PEM/DER: {0}")]
    Malformed(String),
    #[error(
        "the private key is encrypted with {0}, which is not supported: re-encrypt it with \
         `openssl pkcs8 -topk8 -v2 aes-256-cbc`"
    )]
    Unsupported(String),
    #[error("the key file asks for {0}, more than kring allows (a hostile or broken file?)")]
    TooCostly(String),
    #[error("could not decrypt the private key: wrong ssl.key.password, or a damaged key")]
    WrongPassword,
}

/// The DER of the PKCS#8 key in `pem_text`, decrypted with `password`, when the text
/// holds an `ENCRYPTED PRIVATE KEY` block; `Ok(None)` when it holds none (and no
/// password was given), so the caller reads a plain key.
pub(crate) fn decrypt_pkcs8(
    pem_text: &[u8],
    password: Option<&str>,
) -> Result<Option<Vec<u8>>, EncryptedKeyError> {
    if find(pem_text, b"Proc-Type: 4,ENCRYPTED").is_some() {
        return Err(EncryptedKeyError::Traditional);
    }
    let block = encrypted_block(pem_text)?;
    match (block, password) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(EncryptedKeyError::NotEncrypted),
        (Some(_), None) => Err(EncryptedKeyError::NoPassword),
        (Some(block), Some(password)) => decrypt_block(block, password).map(Some),
    }
}

fn decrypt_block(block: &str, password: &str) -> Result<Vec<u8>, EncryptedKeyError> {
    let (label, der) = pem::decode_vec(block.as_bytes())
        .map_err(|e| EncryptedKeyError::Malformed(e.to_string()))?;
    if label != ENCRYPTED_LABEL {
        return Err(EncryptedKeyError::Malformed(format!("label {label:?}")));
    }
    let info = EncryptedPrivateKeyInfo::from_der(&der).map_err(|e| match scheme_oid(&der) {
        // PKCS#12's PBE schemes (OpenSSL's `-v1 PBE-SHA1-3DES`) do not even parse here.
        Some(oid) if oid != pbes2::PBES2_OID => {
            EncryptedKeyError::Unsupported(format!("the scheme {oid}"))
        }
        _ => EncryptedKeyError::Malformed(e.to_string()),
    })?;
    check_scheme(&info.encryption_algorithm)?;
    let key = info
        .decrypt(password.as_bytes())
        .map_err(|_| EncryptedKeyError::WrongPassword)?;
    // What comes out must itself be a PKCS#8 key: a wrong password that happens to
    // leave valid padding gives garbage, refused here rather than by rustls later.
    pkcs8::PrivateKeyInfo::from_der(key.as_bytes())
        .map_err(|_| EncryptedKeyError::WrongPassword)?;
    Ok(key.as_bytes().to_vec())
}

/// The OID of the encryption scheme an `EncryptedPrivateKeyInfo` names, read without
/// parsing its parameters.
fn scheme_oid(der: &[u8]) -> Option<ObjectIdentifier> {
    let mut reader = SliceReader::new(der).ok()?;
    let outer = Header::decode(&mut reader).ok()?;
    if outer.tag != Tag::Sequence {
        return None;
    }
    AlgorithmIdentifierRef::decode(&mut reader)
        .ok()
        .map(|a| a.oid)
}

/// Refuses schemes the crate cannot decrypt and parameters too costly to obey.
fn check_scheme(scheme: &EncryptionScheme<'_>) -> Result<(), EncryptedKeyError> {
    let params = match scheme {
        EncryptionScheme::Pbes1(algorithm) => {
            return Err(EncryptedKeyError::Unsupported(format!(
                "PBES1 ({})",
                algorithm.encryption.oid()
            )));
        }
        EncryptionScheme::Pbes2(params) => params,
        other => {
            return Err(EncryptedKeyError::Unsupported(format!(
                "the scheme {}",
                other.oid()
            )));
        }
    };
    match &params.kdf {
        Kdf::Pbkdf2(p) if p.iteration_count > MAX_PBKDF2_ROUNDS => Err(
            EncryptedKeyError::TooCostly(format!("{} PBKDF2 rounds", p.iteration_count)),
        ),
        Kdf::Pbkdf2(_) => Ok(()),
        Kdf::Scrypt(p) => {
            let memory = 128u64
                .saturating_mul(p.cost_parameter)
                .saturating_mul(u64::from(p.block_size));
            if memory > MAX_SCRYPT_MEMORY || p.parallelization > MAX_SCRYPT_PARALLELISM {
                return Err(EncryptedKeyError::TooCostly(format!(
                    "scrypt with N = {}, r = {}, p = {}",
                    p.cost_parameter, p.block_size, p.parallelization
                )));
            }
            Ok(())
        }
        other => Err(EncryptedKeyError::Unsupported(format!(
            "the key derivation {}",
            other.oid()
        ))),
    }
}

/// The first `ENCRYPTED PRIVATE KEY` block of `text` (which may also hold
/// certificates, as a PEM key store does).
fn encrypted_block(text: &[u8]) -> Result<Option<&str>, EncryptedKeyError> {
    let Some(start) = find(text, ENCRYPTED_BEGIN.as_bytes()) else {
        return Ok(None);
    };
    let rest = &text[start..];
    let stop = find(rest, ENCRYPTED_END.as_bytes())
        .ok_or_else(|| EncryptedKeyError::Malformed(format!("no {ENCRYPTED_END} line")))?;
    std::str::from_utf8(&rest[..stop + ENCRYPTED_END.len()])
        .map(Some)
        .map_err(|_| EncryptedKeyError::Malformed("not UTF-8".into()))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
