//! SCRAM-SHA-256 and SCRAM-SHA-512, server side (RFC 5802, RFC 7677), as Kafka clients speak
//! it. Each message travels in one SaslAuthenticate request or response:
//!
//! ```text
//! client-first  n,,n=<saslname>,r=<client nonce>[,<extension>=<value>]*
//! server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//! client-final  c=biws,r=<client nonce><server nonce>,p=<base64 ClientProof>
//! server-final  v=<base64 ServerSignature>
//! ```
//!
//! `biws` is base64 of the gs2 header `n,,`: no channel binding, no authzid. In a saslname `,`
//! is written `=2C` and `=3D` stands for `=`.
//!
//! The broker stores, per user and mechanism, never the password but (`ScramCredential`):
//!
//! ```text
//! SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
//! StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
//! ServerKey      = HMAC(SaltedPassword, "Server Key")
//! ```
//!
//! and checks a proof with `H(ClientProof XOR HMAC(StoredKey, AuthMessage)) == StoredKey`, where
//! AuthMessage is `client-first-bare,server-first,client-final-without-proof`.
//!
//! An unknown user is not told so: it gets a server-first message with a fake salt (stable per
//! name, derived from a per-broker secret) and fails at the proof, after the same work and
//! with the same message as a wrong password.
//!
//! Not supported, refused: channel binding (gs2 flags `y` and `p=`), the reserved `m=`
//! attribute, delegation tokens (`tokenauth=true`). Other extensions are ignored, as Kafka does.

use std::fmt;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::{Choice, ConstantTimeEq};

/// Kafka's bounds on iterations for AlterUserScramCredentials.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

/// Iterations shown to unknown users: Kafka's default, what most real credentials carry.
const FAKE_ITERATIONS: i32 = MIN_ITERATIONS;

const SERVER_NONCE_LEN: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(s: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Kafka's ScramMechanism code on the wire (0 is UNKNOWN, which has no `Mechanism`).
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(c: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == c)
    }

    /// Length of the hash, hence of StoredKey, ServerKey, ClientProof and SaltedPassword.
    pub fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha256 => 32,
            Mechanism::Sha512 => 64,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => mac::<Hmac<Sha256>>(key, data),
            Mechanism::Sha512 => mac::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

fn mac<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <M as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// SaltedPassword = Hi(password, salt, iterations), what a client sends in
/// AlterUserScramCredentials. Iterations below 1 count as 1 (callers check Kafka's bounds).
pub fn salted_password(mechanism: Mechanism, password: &str, salt: &[u8], iterations: i32) -> Vec<u8> {
    let rounds = iterations.max(1).unsigned_abs();
    let mut out = vec![0; mechanism.hash_len()];
    match mechanism {
        Mechanism::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, rounds, &mut out),
        Mechanism::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, rounds, &mut out),
    }
    out
}

/// Random bytes from the OS, for salts and nonces.
///
/// Panics if the OS has no random source: the broker cannot authenticate anyone safely then.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    getrandom::getrandom(&mut buf).expect("the OS random source (getrandom) failed");
    buf
}

/// What the broker stores per user and mechanism, never the password. Persisted as JSON,
/// byte fields as base64 strings. Debug hides the keys: with StoredKey, anyone who also sees
/// one exchange can log in as the user.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub mechanism: Mechanism,
    #[serde(with = "base64_bytes")]
    pub salt: Vec<u8>,
    #[serde(with = "base64_bytes")]
    pub stored_key: Vec<u8>,
    #[serde(with = "base64_bytes")]
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// From what AlterUserScramCredentials carries: the client computed SaltedPassword.
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            mechanism,
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// For tools and tests: runs PBKDF2 itself.
    pub fn from_password(mechanism: Mechanism, password: &str, salt: &[u8], iterations: i32) -> ScramCredential {
        let salted = salted_password(mechanism, password, salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// For PLAIN: recomputes StoredKey from `password` and compares in constant time.
    pub fn verify_password(&self, password: &str) -> bool {
        let candidate = ScramCredential::from_password(self.mechanism, password, &self.salt, self.iterations);
        candidate.stored_key.ct_eq(&self.stored_key).into()
    }

    /// Whether the server can run an exchange with it: Kafka refuses fewer iterations than
    /// its minimum, and keys must have the hash's length.
    fn usable_for(&self, mechanism: Mechanism) -> bool {
        self.mechanism == mechanism
            && self.iterations >= MIN_ITERATIONS
            && self.stored_key.len() == mechanism.hash_len()
            && self.server_key.len() == mechanism.hash_len()
    }
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("salt", &STANDARD.encode(&self.salt))
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// A salt as Kafka's admin client makes one (`ScramFormatter.secureRandomBytes`): a 130-bit
/// number written in base 36, as ASCII. Users created by the CLI get salts of this shape, and
/// so do the fake ones answered for unknown users: were fake salts shaped otherwise (raw
/// bytes, another length), the server-first message alone would tell a missing user from a
/// real one created with Kafka's tools.
pub fn new_salt() -> Vec<u8> {
    salt_text(&random_bytes(17))
}

/// The first 130 bits of `bits` (at least 17 bytes) in base 36, without leading zeros.
fn salt_text(bits: &[u8]) -> Vec<u8> {
    let mut n: Vec<u8> = bits[..17].to_vec();
    n[0] &= 0x03; // 136 bits read, 130 kept
    let mut digits = Vec::new();
    while n.iter().any(|&b| b != 0) {
        // Long division of the big-endian number by 36.
        let mut rem = 0u32;
        for b in n.iter_mut() {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 36) as u8;
            rem = cur % 36;
        }
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[rem as usize]);
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    digits
}

/// A credential for a user that does not exist, stable per (secret, mechanism, name) so that
/// asking twice shows the same salt, as it would for a real user. Nobody knows its password.
pub(crate) fn fake_credential(mechanism: Mechanism, secret: &[u8; 32], username: &str) -> ScramCredential {
    let derive = |label: &str| {
        let input = [label.as_bytes(), b"\0", mechanism.name().as_bytes(), b"\0", username.as_bytes()].concat();
        mechanism.hmac(secret, &input)
    };
    let salt = salt_text(&derive("salt"));
    ScramCredential {
        mechanism,
        salt,
        stored_key: derive("stored key"),
        server_key: derive("server key"),
        iterations: FAKE_ITERATIONS,
    }
}

mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Why an exchange failed; `message` is what the client is told. It is the same for an
/// unknown user and a wrong password; malformed messages say what is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AuthFailure {
    pub message: String,
}

impl AuthFailure {
    pub fn new(message: impl Into<String>) -> AuthFailure {
        AuthFailure { message: message.into() }
    }

    /// The one answer for an unknown user and a wrong password.
    pub fn invalid_credentials(mechanism: Mechanism) -> AuthFailure {
        AuthFailure::new(format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        ))
    }
}

fn malformed_first(reason: &str) -> AuthFailure {
    AuthFailure::new(format!("Invalid SCRAM client first message: {reason}"))
}

fn malformed_final(reason: &str) -> AuthFailure {
    AuthFailure::new(format!("Invalid SCRAM client final message: {reason}"))
}

/// One server-side exchange: `client_first`, then `client_final`. Any failure ends it.
pub struct ScramServer {
    mechanism: Mechanism,
    secret: [u8; 32],
    server_nonce: String,
    state: State,
}

enum State {
    AwaitClientFirst,
    AwaitClientFinal(Box<Pending>),
    Done { username: String },
    Failed,
}

/// What step 1 leaves for step 2.
struct Pending {
    username: String,
    credential: ScramCredential,
    /// False for a fake credential: the proof then fails even if it (impossibly) matched.
    known: bool,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// `secret`: per-broker random key from which unknown users' fake salts are derived.
    pub fn new(mechanism: Mechanism, secret: [u8; 32]) -> ScramServer {
        let server_nonce = URL_SAFE_NO_PAD.encode(random_bytes(SERVER_NONCE_LEN));
        ScramServer { mechanism, secret, server_nonce, state: State::AwaitClientFirst }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Step 1: parses the client-first message, looks the user up, returns the server-first
    /// message. `lookup` gives the user's credential for this mechanism, if any.
    pub fn client_first(
        &mut self,
        msg: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, AuthFailure> {
        // Failed unless this step completes.
        let State::AwaitClientFirst = std::mem::replace(&mut self.state, State::Failed) else {
            return Err(AuthFailure::new("SCRAM client first message received out of order"));
        };
        let first = ClientFirst::parse(msg)?;
        let (credential, known) = match lookup(&first.username) {
            Some(c) if c.usable_for(self.mechanism) => (c, true),
            found => {
                if found.is_some() {
                    tracing::warn!(
                        user = %first.username,
                        mechanism = self.mechanism.name(),
                        "stored SCRAM credential is unusable (wrong mechanism, key length, or fewer than \
                         {MIN_ITERATIONS} iterations); reset it with AlterUserScramCredentials"
                    );
                }
                (fake_credential(self.mechanism, &self.secret, &first.username), false)
            }
        };
        let nonce = format!("{}{}", first.client_nonce, self.server_nonce);
        let server_first = format!("r={nonce},s={},i={}", STANDARD.encode(&credential.salt), credential.iterations);
        let reply = server_first.clone().into_bytes();
        self.state = State::AwaitClientFinal(Box::new(Pending {
            username: first.username,
            credential,
            known,
            gs2_header: first.gs2_header,
            client_first_bare: first.bare,
            server_first,
            nonce,
        }));
        Ok(reply)
    }

    /// Step 2: checks the client-final message (channel binding, our nonce, the proof) and
    /// returns the server-final message.
    pub fn client_final(&mut self, msg: &[u8]) -> Result<Vec<u8>, AuthFailure> {
        let State::AwaitClientFinal(pending) = std::mem::replace(&mut self.state, State::Failed) else {
            return Err(AuthFailure::new("SCRAM client final message received out of order"));
        };
        let last = ClientFinal::parse(msg)?;
        if last.channel_binding != pending.gs2_header.as_bytes() {
            return Err(malformed_final("c= must be the base64 of the gs2 header (c=biws for n,,)"));
        }
        if last.nonce != pending.nonce {
            return Err(malformed_final("r= is not the nonce of the server first message"));
        }
        if last.proof.len() != self.mechanism.hash_len() {
            return Err(malformed_final(&format!(
                "p= must be {} bytes for {}",
                self.mechanism.hash_len(),
                self.mechanism.name()
            )));
        }
        let auth_message = format!("{},{},{}", pending.client_first_bare, pending.server_first, last.without_proof);
        if !pending.proof_matches(auth_message.as_bytes(), &last.proof) {
            return Err(AuthFailure::invalid_credentials(self.mechanism));
        }
        let signature = self.mechanism.hmac(&pending.credential.server_key, auth_message.as_bytes());
        self.state = State::Done { username: pending.username };
        Ok(format!("v={}", STANDARD.encode(signature)).into_bytes())
    }

    /// Whether the next message expected is the client-first one (nothing received yet).
    pub fn awaiting_first(&self) -> bool {
        matches!(self.state, State::AwaitClientFirst)
    }

    /// The authenticated user, once `client_final` has succeeded.
    pub fn username(&self) -> Option<&str> {
        match &self.state {
            State::Done { username } => Some(username),
            _ => None,
        }
    }

    #[cfg(test)]
    fn with_server_nonce(mechanism: Mechanism, secret: [u8; 32], server_nonce: &str) -> ScramServer {
        ScramServer { server_nonce: server_nonce.to_string(), ..ScramServer::new(mechanism, secret) }
    }
}

impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::AwaitClientFirst => "await client first",
            State::AwaitClientFinal(_) => "await client final",
            State::Done { .. } => "done",
            State::Failed => "failed",
        };
        f.debug_struct("ScramServer").field("mechanism", &self.mechanism).field("state", &state).finish()
    }
}

impl Pending {
    /// The same work for a fake credential as for a real one.
    fn proof_matches(&self, auth_message: &[u8], proof: &[u8]) -> bool {
        let mechanism = self.credential.mechanism;
        let client_signature = mechanism.hmac(&self.credential.stored_key, auth_message);
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        let matches = mechanism.hash(&client_key).ct_eq(&self.credential.stored_key);
        (matches & Choice::from(u8::from(self.known))).into()
    }
}

/// `gs2-header client-first-bare`, with gs2-header `n,[a=<authzid>],` and client-first-bare
/// `n=<saslname>,r=<nonce>[,<extension>]*`.
struct ClientFirst {
    gs2_header: String,
    bare: String,
    username: String,
    client_nonce: String,
}

impl ClientFirst {
    fn parse(msg: &[u8]) -> Result<ClientFirst, AuthFailure> {
        let text = std::str::from_utf8(msg).map_err(|_| malformed_first("not UTF-8"))?;
        let mut parts = text.splitn(3, ',');
        let (Some(flag), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(malformed_first("expected a gs2 header such as n,,"));
        };
        check_gs2_flag(flag)?;
        let authzid = match authzid {
            "" => None,
            a => Some(decode_saslname(a.strip_prefix("a=").ok_or_else(|| malformed_first("bad authzid"))?)?),
        };
        let mut attrs = bare.split(',');
        let name = attrs.next().unwrap_or_default();
        if name.starts_with("m=") {
            return Err(malformed_first("mandatory extensions (m=) are not supported"));
        }
        let username = decode_saslname(attr_value(name, "n=").ok_or_else(|| malformed_first("missing n="))?)?;
        let client_nonce =
            attrs.next().and_then(|a| attr_value(a, "r=")).ok_or_else(|| malformed_first("missing r="))?;
        if !client_nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(malformed_first("the nonce must be printable ASCII"));
        }
        attrs.try_for_each(|ext| check_extension(ext, malformed_first))?;
        if authzid.is_some_and(|a| a != username) {
            return Err(AuthFailure::new(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        let gs2_header = text[..text.len() - bare.len()].to_string();
        Ok(ClientFirst { gs2_header, bare: bare.to_string(), username, client_nonce: client_nonce.to_string() })
    }
}

fn check_gs2_flag(flag: &str) -> Result<(), AuthFailure> {
    match flag {
        "n" => Ok(()),
        "y" => Err(malformed_first("channel binding (gs2 flag y) is not supported; send n,,")),
        f if f.starts_with("p=") => Err(malformed_first("channel binding (gs2 flag p=) is not supported; send n,,")),
        _ => Err(malformed_first("the gs2 header must start with n")),
    }
}

/// The value of `attr` if it is `<prefix><non-empty value>`.
fn attr_value<'a>(attr: &'a str, prefix: &str) -> Option<&'a str> {
    attr.strip_prefix(prefix).filter(|v| !v.is_empty())
}

/// `<letters>=<value>`: checked, then ignored, except `tokenauth=true` (delegation tokens),
/// which Kafka would honour and we cannot.
fn check_extension(ext: &str, malformed: fn(&str) -> AuthFailure) -> Result<(), AuthFailure> {
    let Some((key, value)) = ext.split_once('=') else {
        return Err(malformed("an extension must be key=value"));
    };
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) || value.is_empty() {
        return Err(malformed("an extension must be key=value with a key of letters"));
    }
    if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
        return Err(AuthFailure::new("Authentication failed: delegation tokens (tokenauth=true) are not supported"));
    }
    Ok(())
}

/// Undoes RFC 5802's saslname escapes: `=2C` is `,` and `=3D` is `=`; no other `=` may appear.
fn decode_saslname(s: &str) -> Result<String, AuthFailure> {
    if s.is_empty() {
        return Err(malformed_first("empty name"));
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed_first("in a name, = may only start =2C or =3D")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    if out.contains('\0') {
        return Err(malformed_first("NUL in a name"));
    }
    Ok(out)
}

/// `c=<base64 gs2 header>,r=<nonce>[,<extension>]*,p=<base64 proof>`.
struct ClientFinal {
    channel_binding: Vec<u8>,
    nonce: String,
    without_proof: String,
    proof: Vec<u8>,
}

impl ClientFinal {
    fn parse(msg: &[u8]) -> Result<ClientFinal, AuthFailure> {
        let text = std::str::from_utf8(msg).map_err(|_| malformed_final("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(',')
            .and_then(|(head, last)| Some((head, attr_value(last, "p=")?)))
            .ok_or_else(|| malformed_final("missing p= at the end"))?;
        let mut attrs = without_proof.split(',');
        let channel = attrs.next().and_then(|a| attr_value(a, "c=")).ok_or_else(|| malformed_final("missing c="))?;
        let nonce = attrs.next().and_then(|a| attr_value(a, "r=")).ok_or_else(|| malformed_final("missing r="))?;
        attrs.try_for_each(|ext| check_extension(ext, malformed_final))?;
        Ok(ClientFinal {
            channel_binding: STANDARD.decode(channel).map_err(|_| malformed_final("c= is not base64"))?,
            nonce: nonce.to_string(),
            without_proof: without_proof.to_string(),
            proof: STANDARD.decode(proof).map_err(|_| malformed_final("p= is not base64"))?,
        })
    }
}

#[cfg(test)]
mod salt_tests {
    use super::*;

    #[test]
    fn salts_are_shaped_like_the_java_admin_clients() {
        assert_eq!(salt_text(&[0u8; 17]), b"0");
        // 2^130 − 1 in base 36.
        let max = [0xffu8; 17];
        assert_eq!(salt_text(&max), b"1omfro7zwmumr3umxudzyj6scf");
        for _ in 0..50 {
            let s = new_salt();
            assert!(s.len() <= 26 && s.len() >= 20, "{}", String::from_utf8_lossy(&s));
            assert!(s.iter().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        }
        let fake = fake_credential(Mechanism::Sha512, &[9u8; 32], "nobody");
        assert!(fake.salt.len() <= 26 && fake.salt.iter().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        assert_eq!(fake.salt, fake_credential(Mechanism::Sha512, &[9u8; 32], "nobody").salt, "stable");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [7; 32];

    /// A SCRAM client, written from the RFC independently of the server's code paths.
    struct TestClient {
        mechanism: Mechanism,
        password: String,
        nonce: String,
        first_bare: String,
    }

    impl TestClient {
        fn new(mechanism: Mechanism, user: &str, password: &str) -> TestClient {
            let nonce = URL_SAFE_NO_PAD.encode(random_bytes(18));
            let first_bare = format!("n={},r={nonce}", user.replace('=', "=3D").replace(',', "=2C"));
            TestClient { mechanism, password: password.to_string(), nonce, first_bare }
        }

        fn first(&self) -> Vec<u8> {
            format!("n,,{}", self.first_bare).into_bytes()
        }

        /// Returns the client-final message and the server signature it expects back.
        fn last(&self, server_first: &[u8]) -> (Vec<u8>, String) {
            let server_first = std::str::from_utf8(server_first).unwrap();
            let fields: Vec<&str> = server_first.split(',').collect();
            let nonce = fields[0].strip_prefix("r=").unwrap();
            assert!(nonce.starts_with(&self.nonce) && nonce.len() > self.nonce.len());
            let salt = STANDARD.decode(fields[1].strip_prefix("s=").unwrap()).unwrap();
            let iterations: i32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
            let salted = salted_password(self.mechanism, &self.password, &salt, iterations);
            let client_key = self.mechanism.hmac(&salted, b"Client Key");
            let stored_key = self.mechanism.hash(&client_key);
            let without_proof = format!("c=biws,r={nonce}");
            let auth = format!("{},{server_first},{without_proof}", self.first_bare);
            let signature = self.mechanism.hmac(&stored_key, auth.as_bytes());
            let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
            let server_key = self.mechanism.hmac(&salted, b"Server Key");
            let expected = format!("v={}", STANDARD.encode(self.mechanism.hmac(&server_key, auth.as_bytes())));
            (format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes(), expected)
        }
    }

    fn alice(mechanism: Mechanism) -> ScramCredential {
        ScramCredential::from_password(mechanism, "alice-secret", b"alice's salt", 4096)
    }

    fn lookup_alice(mechanism: Mechanism) -> impl FnOnce(&str) -> Option<ScramCredential> {
        move |name| (name == "alice").then(|| alice(mechanism))
    }

    /// Runs a whole exchange; returns the server-first message and the outcome.
    fn exchange(mechanism: Mechanism, user: &str, password: &str) -> (String, Result<String, AuthFailure>) {
        let client = TestClient::new(mechanism, user, password);
        let mut server = ScramServer::new(mechanism, SECRET);
        let server_first = server.client_first(&client.first(), lookup_alice(mechanism)).unwrap();
        let (last, expected) = client.last(&server_first);
        let outcome = server.client_final(&last).map(|v| {
            assert_eq!(String::from_utf8(v).unwrap(), expected);
            server.username().unwrap().to_string()
        });
        (String::from_utf8(server_first).unwrap(), outcome)
    }

    #[test]
    fn rfc7677_test_vector() {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = ScramCredential::from_password(Mechanism::Sha256, "pencil", &salt, 4096);
        let mut server = ScramServer::with_server_nonce(Mechanism::Sha256, SECRET, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        let first = server.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |name| {
            assert_eq!(name, "user");
            Some(credential)
        });
        assert_eq!(
            String::from_utf8(first.unwrap()).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        assert_eq!(server.username(), None);
        let last = server.client_final(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        );
        assert_eq!(String::from_utf8(last.unwrap()).unwrap(), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert_eq!(server.username(), Some("user"));
    }

    #[test]
    fn sha512_exchange_succeeds() {
        let (server_first, outcome) = exchange(Mechanism::Sha512, "alice", "alice-secret");
        assert!(server_first.contains(&format!(",s={},i=4096", STANDARD.encode(b"alice's salt"))));
        assert_eq!(outcome.unwrap(), "alice");
    }

    #[test]
    fn sha256_exchange_succeeds() {
        assert_eq!(exchange(Mechanism::Sha256, "alice", "alice-secret").1.unwrap(), "alice");
    }

    #[test]
    fn wrong_password_and_unknown_user_fail_alike() {
        let wrong = exchange(Mechanism::Sha512, "alice", "guess").1.unwrap_err();
        assert_eq!(wrong, AuthFailure::invalid_credentials(Mechanism::Sha512));
        assert!(wrong.message.contains("SCRAM-SHA-512"));

        let (server_first, unknown) = exchange(Mechanism::Sha512, "mallory", "guess");
        assert_eq!(unknown.unwrap_err(), wrong);
        let fields: Vec<&str> = server_first.split(',').collect();
        assert_eq!(fields.len(), 3);
        let salt = STANDARD.decode(fields[1].strip_prefix("s=").unwrap()).unwrap();
        assert!(salt.iter().all(|c| c.is_ascii_alphanumeric()), "shaped like a Java admin client's salt");
        assert_eq!(fields[2], "i=4096");
    }

    fn salt_of(server_first: &str) -> &str {
        server_first.split(',').nth(1).unwrap()
    }

    #[test]
    fn fake_salt_is_stable_per_name() {
        let (first_a, _) = exchange(Mechanism::Sha512, "mallory", "x");
        let (again_a, _) = exchange(Mechanism::Sha512, "mallory", "x");
        let (first_b, _) = exchange(Mechanism::Sha512, "trudy", "x");
        assert_eq!(salt_of(&first_a), salt_of(&again_a));
        assert_ne!(salt_of(&first_a), salt_of(&first_b));
        // The server nonce is fresh each time.
        assert_ne!(first_a.split(',').next(), again_a.split(',').next());
    }

    #[test]
    fn fake_salt_depends_on_secret() {
        let a = fake_credential(Mechanism::Sha256, &[1; 32], "mallory");
        let b = fake_credential(Mechanism::Sha256, &[2; 32], "mallory");
        assert_ne!(a.salt, b.salt);
        assert_eq!(a.stored_key.len(), 32);
        assert_eq!(fake_credential(Mechanism::Sha512, &[1; 32], "m").stored_key.len(), 64);
    }

    #[test]
    fn unusable_stored_credential_fails_like_a_wrong_password() {
        let weak = ScramCredential::from_password(Mechanism::Sha256, "pw", b"salt", 1024);
        let client = TestClient::new(Mechanism::Sha256, "weak", "pw");
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        let first = server.client_first(&client.first(), |_| Some(weak)).unwrap();
        let (last, _) = client.last(&first);
        assert_eq!(server.client_final(&last).unwrap_err(), AuthFailure::invalid_credentials(Mechanism::Sha256));
    }

    #[test]
    fn saslname_escapes_are_decoded() {
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        let mut seen = String::new();
        server
            .client_first(b"n,,n=a=2Cb=3Dc,r=abc", |name| {
                seen = name.to_string();
                None
            })
            .unwrap();
        assert_eq!(seen, "a,b=c");
    }

    #[test]
    fn authzid_equal_to_user_is_accepted_and_bound() {
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        let first = server.client_first(b"n,a=alice,n=alice,r=abc", lookup_alice(Mechanism::Sha256)).unwrap();
        let nonce = std::str::from_utf8(&first).unwrap().split(',').next().unwrap().to_string();
        // The channel binding must now be base64("n,a=alice,"), not "biws".
        let msg = format!("c=biws,{nonce},p={}", STANDARD.encode([0; 32]));
        assert!(server.client_final(msg.as_bytes()).unwrap_err().message.contains("c="));
    }

    #[test]
    fn unknown_extensions_are_ignored() {
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        assert!(server.client_first(b"n,,n=alice,r=abc,foo=bar,tokenauth=false", |_| None).is_ok());
    }

    #[test]
    fn malformed_client_first_messages_fail() {
        let cases: &[&[u8]] = &[
            b"",
            b"n,,",
            b"n,,r=abc",
            b"n,,n=alice",
            b"n,,n=alice,r=",
            b"n,,n=,r=abc",
            b"n,,r=abc,n=alice",
            b"y,,n=alice,r=abc",
            b"p=tls-unique,,n=alice,r=abc",
            b"x,,n=alice,r=abc",
            b"n,bob,n=alice,r=abc",
            b"n,a=bob,n=alice,r=abc",
            b"n,,m=ext,n=alice,r=abc",
            b"n,,n=al=2Xice,r=abc",
            b"n,,n=alice=,r=abc",
            b"n,,n=alice=2,r=abc",
            b"n,,n=al=2cice,r=abc",
            b"n,,n=al\0ice,r=abc",
            b"n,,n=alice,r=ab c",
            b"n,,n=alice,r=abc,tokenauth=true",
            b"n,,n=alice,r=abc,tokenauth=TRUE",
            b"n,,n=alice,r=abc,novalue",
            b"n,,n=alice,r=abc,1x=y",
            b"n,,n=alice,r=abc,",
            b"n,,n=\xff\xfe,r=abc",
        ];
        for case in cases {
            let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
            let result = server.client_first(case, lookup_alice(Mechanism::Sha256));
            assert!(result.is_err(), "accepted {:?}", String::from_utf8_lossy(case));
            assert!(server.client_final(b"c=biws,r=abc,p=AAAA").is_err(), "a failed exchange must stay failed");
        }
    }

    #[test]
    fn tokenauth_is_refused_with_a_reason() {
        let mut server = ScramServer::new(Mechanism::Sha512, SECRET);
        let err = server.client_first(b"n,,n=alice,r=abc,tokenauth=true", |_| panic!("no lookup")).unwrap_err();
        assert!(err.message.contains("delegation tokens"), "{err}");
    }

    /// A server after a good client-first, the good client-final, and the nonce.
    fn started() -> (ScramServer, String, String) {
        let client = TestClient::new(Mechanism::Sha256, "alice", "alice-secret");
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        let first = server.client_first(&client.first(), lookup_alice(Mechanism::Sha256)).unwrap();
        let (last, _) = client.last(&first);
        let nonce = std::str::from_utf8(&first).unwrap().split(',').next().unwrap()[2..].to_string();
        (server, String::from_utf8(last).unwrap(), nonce)
    }

    #[test]
    fn good_client_final_passes_the_helper() {
        let (mut server, last, _) = started();
        assert!(server.client_final(last.as_bytes()).is_ok());
    }

    #[test]
    fn malformed_client_final_messages_fail() {
        let (_, good, nonce) = started();
        let proof = good.rsplit_once(",p=").unwrap().1.to_string();
        let client_nonce = &nonce[..nonce.len() - 32];
        let cases = [
            String::new(),
            format!("c=biws,r={nonce}"),
            format!("c=biws,r={nonce},p="),
            format!("c=biws,r={nonce},p=!!notbase64!!"),
            format!("c=biws,r={nonce},p={}", STANDARD.encode([1; 16])),
            format!("r={nonce},p={proof}"),
            format!("c=biws,p={proof}"),
            format!("c=eSws,r={nonce},p={proof}"),
            format!("c=cD10bHMtdW5pcXVlLCw=,r={nonce},p={proof}"),
            format!("c=b!ws,r={nonce},p={proof}"),
            format!("c=biws,r={client_nonce},p={proof}"),
            format!("c=biws,r=X{nonce},p={proof}"),
            format!("c=biws,r={nonce}X,p={proof}"),
            format!("c=biws,r={nonce},p={proof},x=y"),
            format!("c=biws,r={nonce},bad,p={proof}"),
        ];
        for case in cases {
            let (mut server, _, _) = started();
            assert!(server.client_final(case.as_bytes()).is_err(), "accepted {case}");
            assert_eq!(server.username(), None);
        }
        let (mut server, _, _) = started();
        assert!(server.client_final(b"\xff").is_err());
    }

    #[test]
    fn steps_out_of_order_fail() {
        let mut server = ScramServer::new(Mechanism::Sha256, SECRET);
        assert!(server.client_final(b"c=biws,r=abc,p=AAAA").is_err());

        let (mut server, last, _) = started();
        assert!(server.client_first(b"n,,n=alice,r=abc", |_| None).is_err());
        assert!(server.client_final(last.as_bytes()).is_err(), "the exchange failed with the repeated first step");

        let (mut server, last, _) = started();
        server.client_final(last.as_bytes()).unwrap();
        assert!(server.client_final(last.as_bytes()).is_err());
        assert!(server.client_first(b"n,,n=alice,r=abc", |_| None).is_err());
        assert_eq!(server.username(), None);
    }

    #[test]
    fn from_salted_password_matches_from_password() {
        for mechanism in Mechanism::ALL {
            let salted = salted_password(mechanism, "pw", b"salt", 4096);
            assert_eq!(salted.len(), mechanism.hash_len());
            let a = ScramCredential::from_salted_password(mechanism, b"salt", &salted, 4096);
            assert_eq!(a, ScramCredential::from_password(mechanism, "pw", b"salt", 4096));
            assert!(a.verify_password("pw"));
            assert!(!a.verify_password("pW"));
            assert!(!a.verify_password(""));
        }
    }

    #[test]
    fn credential_json_round_trip() {
        let credential = alice(Mechanism::Sha512);
        let json = serde_json::to_string(&credential).unwrap();
        assert!(json.contains(&format!("\"salt\":\"{}\"", STANDARD.encode(b"alice's salt"))), "{json}");
        assert!(json.contains("\"mechanism\":\"SCRAM-SHA-512\""), "{json}");
        assert_eq!(serde_json::from_str::<ScramCredential>(&json).unwrap(), credential);
        assert!(serde_json::from_str::<ScramCredential>(&json.replace("\"salt\":\"", "\"salt\":\"!")).is_err());
    }

    #[test]
    fn debug_hides_keys() {
        let credential = alice(Mechanism::Sha256);
        let debug = format!("{credential:?}");
        assert!(!debug.contains(&STANDARD.encode(&credential.stored_key)), "{debug}");
        assert!(!debug.contains("stored_key"), "{debug}");
    }

    #[test]
    fn mechanism_names_and_codes() {
        for mechanism in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(mechanism.name()), Some(mechanism));
            assert_eq!(Mechanism::from_code(mechanism.code()), Some(mechanism));
        }
        assert_eq!(Mechanism::Sha256.code(), 1);
        assert_eq!(Mechanism::Sha512.code(), 2);
        assert_eq!(Mechanism::from_code(0), None);
        assert_eq!(Mechanism::from_name("scram-sha-256"), None);
        assert_eq!(Mechanism::from_name("PLAIN"), None);
    }

    #[test]
    fn random_bytes_are_random() {
        assert_eq!(random_bytes(16).len(), 16);
        assert_ne!(random_bytes(16), random_bytes(16));
    }
}
