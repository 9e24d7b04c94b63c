//! SaslHandshake: the client names a SASL mechanism; the answer lists the enabled ones. An
//! unknown or disabled mechanism is UNSUPPORTED_SASL_MECHANISM, and the connection closes
//! after the failed-authentication delay (see `auth::sasl`).

use proto_kafka::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};

use super::{str_bytes, ApiSpec, Broker, Outcome, Request};
use crate::protocol::ErrorCode;

pub const SPEC: ApiSpec = ApiSpec::new(ApiKey::SaslHandshake, 0, 1);

pub async fn handle(broker: &impl Broker, req: Request) -> Outcome {
    let r: SaslHandshakeRequest = req.decode()?;
    let mut resp = SaslHandshakeResponse::default();
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
