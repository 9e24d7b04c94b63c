//! SaslHandshake: the client names a SASL mechanism; the answer lists the enabled ones. An
//! unknown or disabled mechanism is UNSUPPORTED_SASL_MECHANISM, and the connection closes
//! after the failed-authentication delay (see `auth::sasl`). On a listener without SASL the
//! answer is ILLEGAL_SASL_STATE, and the connection stays open, as Kafka's.

use proto_kafka::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};

use super::{str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::SaslHandshake, 0, 1);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: SaslHandshakeRequest = req.decode()?;
    let mut resp = SaslHandshakeResponse::default();
    if !req.conn.listener.protocol.sasl() {
        tracing::info!(peer = %req.peer, listener = %req.conn.listener.name, "SaslHandshake on a listener without SASL");
        resp.error_code = ErrorCode::IllegalSaslState.code();
        return req.respond(resp);
    }
    resp.mechanisms = broker.sasl_mechanisms().iter().map(|m| str_bytes(m.clone())).collect();
    let secret = broker.catalog().auth_secret();
    if req.conn.handshake(&r.mechanism, req.version, broker.sasl_mechanisms(), secret).is_err() {
        tracing::info!(
            peer = %req.peer,
            listener = %req.conn.listener.name,
            "SASL mechanism {:?} asked for; this listener offers {}",
            r.mechanism.as_str(),
            broker.sasl_mechanisms().join(", ")
        );
        resp.error_code = ErrorCode::UnsupportedSaslMechanism.code();
    }
    req.respond(resp)
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use proto_kafka::messages::{MetadataRequest, SaslAuthenticateRequest};

    use super::*;
    use crate::api::fake::{self, Fake};
    use crate::api::Fault;
    use crate::auth::sasl::ConnSecurity;
    use crate::listener::SecurityProtocol;

    fn sasl_connection() -> Rc<ConnSecurity> {
        Rc::new(fake::connection(SecurityProtocol::SaslPlaintext, None))
    }

    fn handshake(b: &Fake, conn: &Rc<ConnSecurity>, mechanism: &str, version: i16) -> SaslHandshakeResponse {
        let mut req = SaslHandshakeRequest::default();
        req.mechanism = str_bytes(mechanism);
        let response = b.send_on(conn, ApiKey::SaslHandshake, version, &req).expect("answered").expect("a response");
        fake::decode_response(ApiKey::SaslHandshake, version, &response)
    }

    fn mechanisms(resp: &SaslHandshakeResponse) -> Vec<&str> {
        resp.mechanisms.iter().map(|m| m.as_str()).collect()
    }

    fn metadata(b: &Fake, conn: &Rc<ConnSecurity>) -> Outcome {
        let mut req = MetadataRequest::default();
        req.topics = None;
        b.send_on(conn, ApiKey::Metadata, 12, &req)
    }

    #[test]
    fn an_enabled_mechanism_starts_the_exchange_and_the_answer_lists_them_all() {
        let b = Fake::new();
        let conn = sasl_connection();
        let resp = handshake(&b, &conn, "SCRAM-SHA-256", 1);
        assert_eq!(resp.error_code, 0);
        assert_eq!(mechanisms(&resp), vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
        assert!(!conn.authenticated() && !conn.failed());
        assert!(matches!(metadata(&b, &conn), Err(Fault::Authentication(_))), "nothing else before the exchange ends");
        let token = SaslAuthenticateRequest::default();
        let next = b.send_on(&conn, ApiKey::SaslAuthenticate, 2, &token);
        assert!(matches!(next, Ok(Some(_))), "SaslAuthenticate comes next");
    }

    #[test]
    fn a_mechanism_not_enabled_is_unsupported_and_fails_the_connection() {
        let b = Fake::with(|c| c.sasl_enabled_mechanisms = "SCRAM-SHA-512".into());
        for mechanism in ["GSSAPI", "PLAIN"] {
            let conn = sasl_connection();
            let resp = handshake(&b, &conn, mechanism, 1);
            assert_eq!(resp.error_code, ErrorCode::UnsupportedSaslMechanism.code(), "{mechanism}");
            assert_eq!(mechanisms(&resp), vec!["SCRAM-SHA-512"], "the client learns what it may use");
            assert!(conn.failed());
            assert!(matches!(metadata(&b, &conn), Err(Fault::Authentication(_))));
        }
    }

    #[test]
    fn a_v0_handshake_makes_the_next_frame_a_bare_token() {
        let b = Fake::new();
        let conn = sasl_connection();
        assert_eq!(handshake(&b, &conn, "SCRAM-SHA-512", 0).error_code, 0);
        assert!(matches!(conn.gate(), crate::auth::sasl::Gate::LegacyToken));
        let v1 = sasl_connection();
        handshake(&b, &v1, "SCRAM-SHA-512", 1);
        assert!(matches!(v1.gate(), crate::auth::sasl::Gate::Request));
    }

    #[test]
    fn a_listener_without_sasl_answers_the_sasl_requests_illegal_sasl_state_and_serves_on() {
        let b = Fake::new();
        let conn = Rc::new(fake::connection(SecurityProtocol::Plaintext, None));
        let resp = handshake(&b, &conn, "PLAIN", 1);
        assert_eq!(resp.error_code, ErrorCode::IllegalSaslState.code());
        let answer = b.send_on(&conn, ApiKey::SaslAuthenticate, 2, &SaslAuthenticateRequest::default());
        let answer = answer.expect("answered").expect("a response");
        let auth: proto_kafka::messages::SaslAuthenticateResponse =
            fake::decode_response(ApiKey::SaslAuthenticate, 2, &answer);
        assert_eq!(auth.error_code, ErrorCode::IllegalSaslState.code());
        assert!(!conn.failed());
        assert!(matches!(metadata(&b, &conn), Ok(Some(_))), "the connection serves on");
    }

    #[test]
    fn without_a_handshake_a_sasl_listener_serves_nothing_but_api_versions() {
        let b = Fake::new();
        let conn = sasl_connection();
        assert!(matches!(metadata(&b, &conn), Err(Fault::Authentication(_))));
        let versions = proto_kafka::messages::ApiVersionsRequest::default();
        assert!(matches!(b.send_on(&conn, ApiKey::ApiVersions, 3, &versions), Ok(Some(_))));
    }
}
