//! SaslAuthenticate: one token of the SASL exchange each way, and the bare-token form that
//! follows a v0 SaslHandshake. A failure answers SASL_AUTHENTICATION_FAILED with a message
//! that never tells an unknown user from a wrong password; the connection then closes after
//! the failed-authentication delay.

use bytes::{BufMut, Bytes, BytesMut};
use proto_kafka::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};

use super::{str_bytes, ApiSpec, Broker, Fault, Outcome, Request};
use crate::auth::sasl::{ConnSecurity, Step, Verifier};
use crate::auth::scram::AuthFailure;
use crate::protocol::response::{Chunk, Response};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::SaslAuthenticate, 0, 2);

/// Runs one token through the connection's exchange, logging how it ended.
async fn step(broker: &impl Broker, conn: &ConnSecurity, token: &[u8]) -> Result<Step, AuthFailure> {
    let catalog = broker.catalog();
    let lookup = |user: &str| catalog.credentials(user);
    let verifier = Verifier {
        lookup: &lookup,
        secret: catalog.auth_secret(),
        reauth_ms: broker.config().connections_max_reauth_ms,
    };
    let outcome = conn.step(token, &verifier).await;
    match &outcome {
        Ok(Step::Done(..)) => {
            broker.probe().authenticated(true);
            tracing::debug!(peer = %conn.peer, principal = %conn.session().principal, "authenticated")
        }
        Ok(Step::Continue(_)) => {}
        Err(f) => {
            broker.probe().authenticated(false);
            tracing::info!(peer = %conn.peer, listener = %conn.listener.name, "authentication failed: {f}")
        }
    }
    outcome
}

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: SaslAuthenticateRequest = req.decode()?;
    let mut resp = SaslAuthenticateResponse::default();
    if !req.conn.exchanging() {
        // Authenticated already (no SaslHandshake began a re-authentication), or a listener
        // without SASL: Kafka's answer, and the connection stays.
        resp.error_code = ErrorCode::IllegalSaslState.code();
        resp.error_message = Some(str_bytes("SaslAuthenticate without a SaslHandshake before it".to_string()));
        return req.respond(resp);
    }
    match step(broker, &req.conn, &r.auth_bytes).await {
        Ok(Step::Continue(challenge)) => resp.auth_bytes = Bytes::from(challenge),
        Ok(Step::Done(last, lifetime)) => {
            resp.auth_bytes = Bytes::from(last);
            resp.session_lifetime_ms = lifetime;
        }
        Err(f) => {
            resp.error_code = ErrorCode::SaslAuthenticationFailed.code();
            resp.error_message = Some(str_bytes(f.message));
        }
    }
    req.respond(resp)
}

/// A bare token after a v0 SaslHandshake: the answer is a bare size-prefixed token too
/// (empty once PLAIN succeeds). A failure has no way to be told, so it closes the connection.
pub async fn legacy_token(broker: &impl Broker, conn: &ConnSecurity, frame: &[u8]) -> Outcome {
    let reply = match step(broker, conn, frame).await {
        Ok(Step::Continue(challenge)) => challenge,
        Ok(Step::Done(last, _)) => last,
        Err(f) => return Err(Fault::Authentication(format!("authentication failed: {f}"))),
    };
    let mut buf = BytesMut::with_capacity(4 + reply.len());
    buf.put_i32(reply.len() as i32);
    buf.put_slice(&reply);
    Ok(Some(Response { chunks: vec![Chunk::Bytes(buf.freeze())] }))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use hmac::digest::KeyInit;
    use hmac::{Hmac, Mac};
    use proto_kafka::messages::{MetadataRequest, SaslHandshakeRequest, SaslHandshakeResponse};
    use sha2::{Digest, Sha256, Sha512};

    use super::*;
    use crate::api::fake::{self, Fake};
    use crate::auth::scram::{salted_password, Mechanism, ScramCredential};
    use crate::controller::CredentialChange;
    use crate::listener::SecurityProtocol;

    fn hmac(m: Mechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <M as KeyInit>::new_from_slice(key).expect("any key length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match m {
            Mechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
            Mechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    fn hash(m: Mechanism, data: &[u8]) -> Vec<u8> {
        match m {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// A SCRAM client (RFC 5802), independent of the server's code.
    struct Client {
        mechanism: Mechanism,
        password: &'static str,
        first_bare: String,
    }

    impl Client {
        fn new(mechanism: Mechanism, user: &str, password: &'static str) -> Client {
            Client { mechanism, password, first_bare: format!("n={user},r=clientnonce0123456789") }
        }

        fn first(&self) -> Vec<u8> {
            format!("n,,{}", self.first_bare).into_bytes()
        }

        /// The client-final message for `server_first`, and the server-final it expects.
        fn last(&self, server_first: &[u8]) -> (Vec<u8>, Vec<u8>) {
            let server_first = std::str::from_utf8(server_first).expect("UTF-8");
            let fields: Vec<&str> = server_first.split(',').collect();
            let nonce = fields[0].strip_prefix("r=").expect("nonce");
            assert!(nonce.starts_with("clientnonce0123456789"), "the server extends the client's nonce");
            let salt = STANDARD.decode(fields[1].strip_prefix("s=").expect("salt")).expect("base64 salt");
            let iterations: i32 = fields[2].strip_prefix("i=").expect("iterations").parse().expect("a number");
            let salted = salted_password(self.mechanism, self.password, &salt, iterations);
            let client_key = hmac(self.mechanism, &salted, b"Client Key");
            let without_proof = format!("c=biws,r={nonce}");
            let auth = format!("{},{server_first},{without_proof}", self.first_bare);
            let signature = hmac(self.mechanism, &hash(self.mechanism, &client_key), auth.as_bytes());
            let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
            let server_key = hmac(self.mechanism, &salted, b"Server Key");
            let expected = format!("v={}", STANDARD.encode(hmac(self.mechanism, &server_key, auth.as_bytes())));
            (format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes(), expected.into_bytes())
        }
    }

    fn broker_with_alice(set: impl FnOnce(&mut crate::config::Config)) -> Fake {
        let b = Fake::with(set);
        let changes = Mechanism::ALL
            .iter()
            .map(|m| {
                let c = ScramCredential::from_password(*m, "alice-secret", b"alice's salt", 4096);
                ("alice".to_string(), CredentialChange::Upsert(c))
            })
            .collect();
        let stored = futures_lite::future::block_on(b.alter_credentials(changes));
        assert!(stored.iter().all(Result::is_ok));
        b
    }

    fn sasl_connection() -> Rc<ConnSecurity> {
        Rc::new(fake::connection(SecurityProtocol::SaslPlaintext, None))
    }

    fn handshake(b: &Fake, conn: &Rc<ConnSecurity>, mechanism: &str, version: i16) {
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = str_bytes(mechanism);
        let response = b.send_on(conn, ApiKey::SaslHandshake, version, &req).expect("answered").expect("a response");
        let resp: SaslHandshakeResponse = fake::decode_response(ApiKey::SaslHandshake, version, &response);
        assert_eq!(resp.error_code, 0);
    }

    fn authenticate(b: &Fake, conn: &Rc<ConnSecurity>, token: &[u8]) -> SaslAuthenticateResponse {
        let mut req = SaslAuthenticateRequest::default();
        req.auth_bytes = Bytes::copy_from_slice(token);
        let response = b.send_on(conn, ApiKey::SaslAuthenticate, 2, &req).expect("answered").expect("a response");
        fake::decode_response(ApiKey::SaslAuthenticate, 2, &response)
    }

    fn metadata(b: &Fake, conn: &Rc<ConnSecurity>) -> Outcome {
        let mut req = MetadataRequest::default();
        req.topics = None;
        b.send_on(conn, ApiKey::Metadata, 12, &req)
    }

    /// Runs a SCRAM exchange over SaslAuthenticate; returns the final answer and the expected
    /// server-final message.
    fn scram(
        b: &Fake,
        conn: &Rc<ConnSecurity>,
        m: Mechanism,
        user: &str,
        pw: &'static str,
    ) -> (SaslAuthenticateResponse, Vec<u8>) {
        handshake(b, conn, m.name(), 1);
        let client = Client::new(m, user, pw);
        let first = authenticate(b, conn, &client.first());
        assert_eq!(first.error_code, 0, "{:?}", first.error_message);
        let (last, expected) = client.last(&first.auth_bytes);
        (authenticate(b, conn, &last), expected)
    }

    #[test]
    fn a_scram_exchange_authenticates_the_connection_as_the_user() {
        let b = broker_with_alice(|_| {});
        for m in Mechanism::ALL {
            let conn = sasl_connection();
            let (done, expected) = scram(&b, &conn, m, "alice", "alice-secret");
            assert_eq!(done.error_code, 0, "{:?}", done.error_message);
            assert_eq!(done.auth_bytes, expected, "the server proves it knows the key");
            assert_eq!(done.session_lifetime_ms, 0, "sessions last forever by default");
            assert!(conn.authenticated());
            assert_eq!(conn.session().principal, "User:alice");
            assert!(matches!(metadata(&b, &conn), Ok(Some(_))), "other requests are served now");
        }
    }

    #[test]
    fn with_a_reauthentication_interval_the_session_lifetime_is_told() {
        let b = broker_with_alice(|c| c.connections_max_reauth_ms = 60_000);
        let conn = sasl_connection();
        let (done, _) = scram(&b, &conn, Mechanism::Sha256, "alice", "alice-secret");
        assert_eq!((done.error_code, done.session_lifetime_ms), (0, 60_000));
    }

    #[test]
    fn a_wrong_password_and_an_unknown_user_fail_alike_and_close_the_connection() {
        let b = broker_with_alice(|_| {});
        let mut messages = Vec::new();
        for (user, pw) in [("alice", "guess"), ("mallory", "guess")] {
            let conn = sasl_connection();
            let (done, _) = scram(&b, &conn, Mechanism::Sha512, user, pw);
            assert_eq!(done.error_code, ErrorCode::SaslAuthenticationFailed.code());
            assert!(done.auth_bytes.is_empty());
            messages.push(done.error_message.expect("a reason").to_string());
            assert!(conn.failed() && !conn.authenticated());
            assert_eq!(conn.session().principal, crate::auth::ANONYMOUS);
            assert!(matches!(metadata(&b, &conn), Err(Fault::Authentication(_))));
        }
        assert_eq!(messages[0], messages[1], "the answer does not tell an unknown user");
    }

    #[test]
    fn a_malformed_scram_first_message_fails() {
        let b = broker_with_alice(|_| {});
        let conn = sasl_connection();
        handshake(&b, &conn, "SCRAM-SHA-256", 1);
        let resp = authenticate(&b, &conn, b"not a scram message");
        assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
        assert!(resp.error_message.is_some());
        assert!(conn.failed());
    }

    // PLAIN's password check runs on glommio's blocking pool, which needs a reactor the fake
    // does not have: only the refusals that come before it are tested here.
    #[test]
    fn a_malformed_plain_token_fails_before_any_password_check() {
        let b = broker_with_alice(|_| {});
        for (token, why) in [
            (&b"alice\0alice-secret"[..], "expected 3 NUL-separated tokens"),
            (b"\0\0alice-secret", "username not specified"),
            (b"\0alice\0", "password not specified"),
            (b"bob\0alice\0alice-secret", "authorization id"),
            (b"\0alice\0\xff", "not UTF-8"),
        ] {
            let conn = sasl_connection();
            handshake(&b, &conn, "PLAIN", 1);
            let resp = authenticate(&b, &conn, token);
            assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
            let message = resp.error_message.expect("a reason").to_string();
            assert!(message.contains(why), "{message:?} says {why:?}");
            assert!(conn.failed());
        }
    }

    #[test]
    fn sasl_authenticate_before_a_handshake_closes_the_connection_and_after_success_is_illegal_sasl_state() {
        let b = broker_with_alice(|_| {});
        let token = SaslAuthenticateRequest::default();
        let before_handshake = sasl_connection();
        let refused = b.send_on(&before_handshake, ApiKey::SaslAuthenticate, 2, &token);
        assert!(matches!(refused, Err(Fault::Authentication(_))));
        // Kafka's: a token after success is answered ILLEGAL_SASL_STATE, the session kept.
        let done = sasl_connection();
        scram(&b, &done, Mechanism::Sha256, "alice", "alice-secret");
        let again = b.send_on(&done, ApiKey::SaslAuthenticate, 2, &token).expect("answered").expect("a response");
        let again: SaslAuthenticateResponse = fake::decode_response(ApiKey::SaslAuthenticate, 2, &again);
        assert_eq!(again.error_code, ErrorCode::IllegalSaslState.code());
        assert!(done.authenticated() && !done.failed(), "still logged in");
    }

    #[test]
    fn after_a_v0_handshake_the_tokens_travel_as_bare_frames() {
        let b = broker_with_alice(|_| {});
        let conn = sasl_connection();
        handshake(&b, &conn, "SCRAM-SHA-256", 0);
        let client = Client::new(Mechanism::Sha256, "alice", "alice-secret");
        let bare = |token: Vec<u8>| futures_lite::future::block_on(crate::api::dispatch(&b, Bytes::from(token), &conn));
        let first = fake::response_bytes(&bare(client.first()).expect("answered").expect("a token"));
        let (last, expected) = client.last(&first);
        let done = fake::response_bytes(&bare(last).expect("answered").expect("a token"));
        assert_eq!(done.to_vec(), expected);
        assert_eq!(conn.session().principal, "User:alice");
        assert!(matches!(metadata(&b, &conn), Ok(Some(_))));
    }

    #[test]
    fn a_failed_bare_token_closes_the_connection_without_an_answer() {
        let b = broker_with_alice(|_| {});
        let conn = sasl_connection();
        handshake(&b, &conn, "SCRAM-SHA-256", 0);
        let outcome = futures_lite::future::block_on(crate::api::dispatch(&b, Bytes::from_static(b"garbage"), &conn));
        assert!(matches!(outcome, Err(Fault::Authentication(_))));
        assert!(conn.failed());
    }

    #[test]
    fn a_reauthentication_must_keep_the_mechanism_and_the_principal() {
        let b = broker_with_alice(|c| c.connections_max_reauth_ms = 60_000);
        let changes = vec![(
            "bob".to_string(),
            CredentialChange::Upsert(ScramCredential::from_password(Mechanism::Sha256, "bob-secret", b"salt", 4096)),
        )];
        futures_lite::future::block_on(b.alter_credentials(changes));
        let conn = sasl_connection();
        assert_eq!(scram(&b, &conn, Mechanism::Sha256, "alice", "alice-secret").0.error_code, 0);
        assert_eq!(scram(&b, &conn, Mechanism::Sha256, "alice", "alice-secret").0.error_code, 0, "same user again");
        let (as_bob, _) = scram(&b, &conn, Mechanism::Sha256, "bob", "bob-secret");
        assert_eq!(as_bob.error_code, ErrorCode::SaslAuthenticationFailed.code());
        assert!(conn.failed());

        for (mechanism, version) in [("SCRAM-SHA-512", 1), ("SCRAM-SHA-256", 0)] {
            let conn = sasl_connection();
            scram(&b, &conn, Mechanism::Sha256, "alice", "alice-secret");
            let mut req = SaslHandshakeRequest::default();
            req.mechanism = str_bytes(mechanism);
            let response =
                b.send_on(&conn, ApiKey::SaslHandshake, version, &req).expect("answered").expect("a response");
            let resp: SaslHandshakeResponse = fake::decode_response(ApiKey::SaslHandshake, version, &response);
            assert_eq!(resp.error_code, ErrorCode::UnsupportedSaslMechanism.code(), "{mechanism} v{version}");
            assert!(conn.failed());
        }
    }
}
