//! Encrypted PKCS#8 keys: the schemes OpenSSL writes, wrong passwords, and hostile
//! parameters refused before any work. The keys are throwaway P-256 keys made for these
//! tests (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`, then
//! `openssl pkcs8 -topk8` with `-v2 aes-256-cbc`, `-v2 aes-128-cbc -scrypt` and
//! `-v1 PBE-SHA1-3DES`, password `kring-key-secret`).

use pkcs8::der::Encode;
use pkcs8::der::pem::{self, LineEnding};
use pkcs8::pkcs5::pbes2;

use super::*;

const PASSWORD: &str = "kring-key-secret";

const PLAIN: &str = "\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPpJ0vPg6rpWoHIc3
h2m9jSnrMMkq5WS5WtrNYK4bI7qhRANCAAToBUhJ8vaVH5/oHY1TgT0hMmyXl+dj
kV15py8Ft6e50kGjjLdPoDLfhLBY1w0i2llEjJ6vgme1XxVw0fJbN3JY
-----END PRIVATE KEY-----
";

const PBKDF2_AES256: &str = "\
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj7+kDfAGo+NgICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEBEj6ycTezupmWYkM1NOQXsEgZBA
fVFRP4/tVvSOu71hgZPApsLmjpKdcsybVkoeYDxPZaRSjfZcVPnHu8mEw6EQAWBN
mcgvKvDVbOoOqhpZvWc28zg4Fw1bYMwktFjPY5iLgCalHA2mCUYyDYg+bm21XUOJ
0x3LNWo1LLnWeBo/l9IFfQzZzi5tm9/JaQ9cCreMicy2TeB4DZpejGVtGJz2LXY=
-----END ENCRYPTED PRIVATE KEY-----
";

const SCRYPT_AES128: &str = "\
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHkME8GCSqGSIb3DQEFDTBCMCEGCSsGAQQB2kcECzAUBAhD29IKuPyiqAICQAAC
AQgCAQEwHQYJYIZIAWUDBAECBBB2O0Ap9nf7bX4Dsd68kNjeBIGQFvj/ni5DMax/
p5P82YiNQObsVCf7UfRkJaBo1g0B/yI1rLu4P4A5GuMU1pVCr0rCIsfAhl7vt9Kw
SZjLdt4e9Uh4zmzDNFlDFRubZcbkPJ+yirr40m9rO8bTjLva4VhtQd24UKxq8y9g
m/7w5mXiwUCflE9UIgQsjgUS+l2RH7GqAi96BS7IjRoB+rQr2Rwr
-----END ENCRYPTED PRIVATE KEY-----
";

const PBES1_3DES: &str = "\
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGxMBwGCiqGSIb3DQEMAQMwDgQIf7RpVXtMLBICAggABIGQn3AvtDF6pl8stCrE
2AwOcpVZIamwWmdBS6aOHrxbIkMtMAo8Xu9CClS+rdQ3g2wLE6plLZiRnskxcb5i
YkzjPe+cpJTWvVprMOJA67ZWhsbF7BtM65uY1b64FDxDQM8UKEXQa8wVh6Kulro2
t1j6ScUqmbpOPSuEVMSSPEKrRCxhsaMw88oUKYk5hQtYUtTz
-----END ENCRYPTED PRIVATE KEY-----
";

fn plain_der() -> Vec<u8> {
    pem::decode_vec(PLAIN.as_bytes()).unwrap().1
}

#[test]
fn pbes2_keys_decrypt_to_the_plain_key() {
    for (what, key) in [("pbkdf2", PBKDF2_AES256), ("scrypt", SCRYPT_AES128)] {
        let der = decrypt_pkcs8(key.as_bytes(), Some(PASSWORD)).unwrap();
        assert_eq!(der, Some(plain_der()), "{what}");
    }
}

#[test]
fn an_encrypted_key_in_a_key_store_beside_certificates_is_found() {
    let store =
        format!("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n{PBKDF2_AES256}");
    let der = decrypt_pkcs8(store.as_bytes(), Some(PASSWORD)).unwrap();
    assert_eq!(der, Some(plain_der()));
}

#[test]
fn a_wrong_password_is_named_as_such() {
    for key in [PBKDF2_AES256, SCRYPT_AES128] {
        for password in ["kring-key-secreT", "", "x"] {
            assert_eq!(
                decrypt_pkcs8(key.as_bytes(), Some(password)),
                Err(EncryptedKeyError::WrongPassword)
            );
        }
    }
}

#[test]
fn a_password_and_an_encrypted_key_come_together_or_not_at_all() {
    assert_eq!(
        decrypt_pkcs8(PBKDF2_AES256.as_bytes(), None),
        Err(EncryptedKeyError::NoPassword)
    );
    assert_eq!(
        decrypt_pkcs8(PLAIN.as_bytes(), Some(PASSWORD)),
        Err(EncryptedKeyError::NotEncrypted)
    );
    assert_eq!(decrypt_pkcs8(PLAIN.as_bytes(), None), Ok(None));
}

#[test]
fn legacy_schemes_are_refused_with_the_conversion() {
    let pbes1 = decrypt_pkcs8(PBES1_3DES.as_bytes(), Some(PASSWORD)).unwrap_err();
    assert!(
        matches!(pbes1, EncryptedKeyError::Unsupported(_)),
        "{pbes1}"
    );
    assert!(
        pbes1.to_string().contains("openssl pkcs8 -topk8 -v2"),
        "{pbes1}"
    );
    let traditional = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
        DEK-Info: AES-256-CBC,00000000000000000000000000000000\n\nAAAA\n-----END EC PRIVATE KEY-----\n";
    assert_eq!(
        decrypt_pkcs8(traditional.as_bytes(), Some(PASSWORD)),
        Err(EncryptedKeyError::Traditional)
    );
}

/// An ENCRYPTED PRIVATE KEY block with `kdf` and AES-256-CBC over 48 bytes of nothing.
fn encrypted_with(kdf: pbes2::Kdf<'_>) -> String {
    let info = EncryptedPrivateKeyInfo {
        encryption_algorithm: EncryptionScheme::Pbes2(pbes2::Parameters {
            kdf,
            encryption: pbes2::EncryptionScheme::Aes256Cbc { iv: &[7; 16] },
        }),
        encrypted_data: &[0; 48],
    };
    pem::encode_string(ENCRYPTED_LABEL, LineEnding::LF, &info.to_der().unwrap()).unwrap()
}

#[test]
fn costly_key_derivations_are_refused_before_any_work() {
    let rounds = encrypted_with(pbes2::Kdf::Pbkdf2(pbes2::Pbkdf2Params {
        salt: &[1; 8],
        iteration_count: u32::MAX,
        key_length: None,
        prf: pbes2::Pbkdf2Prf::HmacWithSha256,
    }));
    let err = decrypt_pkcs8(rounds.as_bytes(), Some(PASSWORD)).unwrap_err();
    assert!(matches!(err, EncryptedKeyError::TooCostly(_)), "{err}");
    for (n, r, p) in [(1u64 << 22, 8, 1), (1 << 14, 8, 1000)] {
        let memory = encrypted_with(pbes2::Kdf::Scrypt(pbes2::ScryptParams {
            salt: &[1; 8],
            cost_parameter: n,
            block_size: r,
            parallelization: p,
            key_length: Some(32),
        }));
        let err = decrypt_pkcs8(memory.as_bytes(), Some(PASSWORD)).unwrap_err();
        assert!(
            matches!(err, EncryptedKeyError::TooCostly(_)),
            "N={n} p={p}: {err}"
        );
    }
    // At the bounds, the work is done (and the password is wrong).
    let at_bound = encrypted_with(pbes2::Kdf::Pbkdf2(pbes2::Pbkdf2Params {
        salt: &[1; 8],
        iteration_count: 1000,
        key_length: None,
        prf: pbes2::Pbkdf2Prf::HmacWithSha256,
    }));
    assert_eq!(
        decrypt_pkcs8(at_bound.as_bytes(), Some(PASSWORD)),
        Err(EncryptedKeyError::WrongPassword)
    );
}

#[test]
fn damaged_blocks_are_errors_not_panics() {
    let truncated = &PBKDF2_AES256[..PBKDF2_AES256.len() / 2];
    assert!(matches!(
        decrypt_pkcs8(truncated.as_bytes(), Some(PASSWORD)),
        Err(EncryptedKeyError::Malformed(_))
    ));
    let body_start = PBKDF2_AES256.find('\n').unwrap() + 1;
    for cut in [body_start, body_start + 10, body_start + 64] {
        let mut damaged = PBKDF2_AES256.to_string();
        damaged.replace_range(cut..cut + 4, "AAAA");
        let result = decrypt_pkcs8(damaged.as_bytes(), Some(PASSWORD));
        assert!(result.is_err(), "damaged at {cut}: {result:?}");
    }
}
