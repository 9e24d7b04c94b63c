//! The glue between a connection and the API: one request frame in, through
//! `api::dispatch`, and what the connection needs back (the response, how long the client is
//! throttled, whether to close), with the request quota and the request's metrics around it.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::api;
use crate::auth::sasl::ConnSecurity;
use crate::metrics::{HandlerTiming, RequestScope};
use crate::net::connection::{self, Handled};
use crate::protocol::header;
use crate::quota::Kind;
use crate::shard::Shard;

/// The connection's view of its SASL state.
impl connection::Session for ConnSecurity {
    fn authenticated(&self) -> bool {
        ConnSecurity::authenticated(self)
    }
}

/// Runs one request frame through `api::dispatch` as a metrics request scope (so waits on
/// other shards count as remote time) and reports how it went to the connection. Before a
/// connection has authenticated, a refused request closes it only after the failed-
/// authentication delay, and a failed authentication is answered that late, then closed.
pub(super) async fn handle_frame(shard: Rc<Shard>, frame: Bytes, sec: Rc<ConnSecurity>) -> Handled {
    let started = Instant::now();
    let api = shard.probe.api_slot(header::preamble(&frame).map(|p| p.api_key));
    let scope = RequestScope::begin();
    // Only read when some client has a request quota (the default has none).
    if shard.quotas.limits_requests() {
        // The request quota counts the time this request kept the shard busy in its handler
        // (waits on other shards, durable acks or rebalances excluded), as Kafka counts
        // request-handler thread time. It is charged when the handler answers, so that the
        // response's throttle_time_ms carries the throttle, and the connection is muted for it.
        let (client, session, quota_shard) = (client_id(&frame), sec.session(), shard.clone());
        scope.charge_when_answered(move |busy| {
            let micros = busy.as_micros() as u64;
            let t = quota_shard.quotas.record_as(session.user(), client.as_deref(), Kind::Request, micros);
            if !t.is_zero() {
                quota_shard.probe.throttled(api, t);
            }
            t
        });
    }
    let outcome = scope.run(api::dispatch(&shard, frame, &sec)).await;
    scope.charge_unanswered();
    let finished = Instant::now();
    let remote = scope.remote(finished);
    let throttle = scope.throttle();
    let delay = Duration::from_millis(shard.config.connection_failed_authentication_delay_ms);
    // KIP-306: a failed authentication is answered only after the delay (a password guesser
    // learns nothing sooner), and the connection closes once the answer is out.
    if sec.failed() || (outcome.is_err() && !sec.authenticated()) {
        glommio::timer::sleep(delay).await;
    }
    let close_after_answer = sec.failed();
    let outcome = outcome.map_err(|fault| {
        shard.probe.request_error(api, fault.kind());
        fault.into()
    });
    Handled { outcome, timing: HandlerTiming { api, started, finished, remote }, throttle, close_after_answer }
}

/// The client id of a request frame (header v1+: a nullable string right after the 8-byte
/// preamble); `None` when absent or not valid UTF-8.
fn client_id(frame: &[u8]) -> Option<String> {
    let len = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    let bytes = frame.get(10..10 + usize::try_from(len).ok()?)?;
    std::str::from_utf8(bytes).ok().map(str::to_string)
}
