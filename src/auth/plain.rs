//! SASL PLAIN (RFC 4616), server side. The client's one message is
//!
//! ```text
//! [authzid] NUL authcid NUL passwd        (UTF-8)
//! ```
//!
//! The broker keeps no passwords, so PLAIN is checked against the user's stored SCRAM
//! credentials: PBKDF2 of the password with the stored salt must give the stored StoredKey.
//! Only use it over TLS: the password crosses the wire as is.

use crate::auth::scram::{fake_credential, AuthFailure, Mechanism, ScramCredential};

/// The one answer for an unknown user and a wrong password.
pub const INVALID_CREDENTIALS: &str = "Authentication failed: Invalid username or password";

/// Parses `authzid NUL authcid NUL passwd` into (user, password), with Kafka's rules: the
/// authzid is empty or equal to the authcid; the authcid and the password are not empty.
pub fn parse(msg: &[u8]) -> Result<(String, String), AuthFailure> {
    let text = std::str::from_utf8(msg).map_err(|_| AuthFailure::new("Invalid SASL/PLAIN response: not UTF-8"))?;
    let tokens: Vec<&str> = text.split('\0').collect();
    let &[authzid, user, password] = tokens.as_slice() else {
        return Err(AuthFailure::new(format!(
            "Invalid SASL/PLAIN response: expected 3 NUL-separated tokens, got {}",
            tokens.len()
        )));
    };
    if user.is_empty() {
        return Err(AuthFailure::new("Authentication failed: username not specified"));
    }
    if password.is_empty() {
        return Err(AuthFailure::new("Authentication failed: password not specified"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(AuthFailure::new(
            "Authentication failed: Client requested an authorization id that is different from username",
        ));
    }
    Ok((user.to_string(), password.to_string()))
}

/// Checks a PLAIN login against the first of the user's stored SCRAM credentials that
/// `lookup` returns; returns the user. An unknown user still costs one PBKDF2, against a fake
/// credential derived from `secret`, so the answer's timing does not tell whether it exists.
pub fn authenticate(
    msg: &[u8],
    lookup: impl Fn(&str) -> Vec<ScramCredential>,
    secret: [u8; 32],
) -> Result<String, AuthFailure> {
    let (user, password) = parse(msg)?;
    let (credential, known) = match lookup(&user).into_iter().next() {
        Some(credential) => (credential, true),
        None => (fake_credential(Mechanism::Sha256, &secret, &user), false),
    };
    // Both terms are evaluated whatever `known` is: the PBKDF2 is the cost to hide.
    if credential.verify_password(&password) & known {
        Ok(user)
    } else {
        Err(AuthFailure::new(INVALID_CREDENTIALS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [9; 32];

    fn credentials(user: &str) -> Vec<ScramCredential> {
        match user {
            "alice" => vec![
                ScramCredential::from_password(Mechanism::Sha256, "first", b"salt-256", 4096),
                ScramCredential::from_password(Mechanism::Sha512, "second", b"salt-512", 4096),
            ],
            "bob" => vec![ScramCredential::from_password(Mechanism::Sha512, "bob-pw", b"salt-bob", 4096)],
            _ => Vec::new(),
        }
    }

    fn pair(user: &str, password: &str) -> (String, String) {
        (user.to_string(), password.to_string())
    }

    #[test]
    fn parses_valid_forms() {
        assert_eq!(parse(b"\0alice\0pw").unwrap(), pair("alice", "pw"));
        assert_eq!(parse(b"alice\0alice\0pw").unwrap(), pair("alice", "pw"));
        assert_eq!(parse("\0j\u{f6}rg\0p\u{e4}ss word".as_bytes()).unwrap(), pair("j\u{f6}rg", "p\u{e4}ss word"));
    }

    #[test]
    fn rejects_invalid_forms() {
        let cases: &[&[u8]] = &[
            b"",
            b"alice",
            b"alice\0pw",
            b"\0alice\0pw\0",
            b"\0alice\0pw\0extra",
            b"bob\0alice\0pw",
            b"\0alice\0",
            b"\0\0pw",
            b"\0\0",
            b"\0al\xffice\0pw",
            b"\0alice\0p\xc3",
        ];
        for case in cases {
            assert!(parse(case).is_err(), "accepted {:?}", String::from_utf8_lossy(case));
        }
        let mismatch = parse(b"bob\0alice\0pw").unwrap_err();
        assert!(mismatch.message.contains("authorization id"), "{mismatch}");
    }

    #[test]
    fn authenticates_against_a_scram_credential() {
        assert_eq!(authenticate(b"\0bob\0bob-pw", credentials, SECRET).unwrap(), "bob");
        assert_eq!(authenticate(b"alice\0alice\0first", credentials, SECRET).unwrap(), "alice");
    }

    #[test]
    fn uses_the_first_credential() {
        let err = authenticate(b"\0alice\0second", credentials, SECRET).unwrap_err();
        assert_eq!(err.message, INVALID_CREDENTIALS);
    }

    #[test]
    fn wrong_password_and_unknown_user_fail_alike() {
        let wrong = authenticate(b"\0bob\0guess", credentials, SECRET).unwrap_err();
        let unknown = authenticate(b"\0mallory\0guess", credentials, SECRET).unwrap_err();
        assert_eq!(wrong.message, INVALID_CREDENTIALS);
        assert_eq!(unknown, wrong);
    }

    #[test]
    fn unknown_user_runs_pbkdf2_against_a_fake_credential() {
        let looked_up = std::cell::Cell::new(0);
        let lookup = |user: &str| {
            looked_up.set(looked_up.get() + 1);
            credentials(user)
        };
        assert!(authenticate(b"\0mallory\0pw", lookup, SECRET).is_err());
        assert_eq!(looked_up.get(), 1);
        // The fake credential a password is checked against is a real-looking one.
        let fake = fake_credential(Mechanism::Sha256, &SECRET, "mallory");
        assert_eq!(fake.iterations, crate::auth::scram::MIN_ITERATIONS);
        assert!(!fake.verify_password("pw"));
    }

    #[test]
    fn malformed_message_is_not_a_credential_failure() {
        let err = authenticate(b"\0bob\0", credentials, SECRET).unwrap_err();
        assert_ne!(err.message, INVALID_CREDENTIALS);
    }
}
