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
