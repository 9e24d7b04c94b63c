//! Each listener's accept loop on a shard: the broker-wide caps (connection creation rate,
//! connections in total and per IP) are applied here, on the accept path only, and every
//! connection admitted is served by its own task in the `net` queue.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::queues::{self, Queues};
use super::request;
use crate::auth::sasl::ConnSecurity;
use crate::listener::Listener;
use crate::net::admission::{Admission, RefusalLog};
use crate::net::connection::{self, Limits};
use crate::net::creation_rate::CreationRate;
use crate::shard::Shard;

/// What every listener's acceptor of a shard shares: the broker-wide connection caps and the
/// shard's rate-limited log of refusals.
pub(super) struct Gate {
    pub(super) admission: Arc<Admission>,
    pub(super) creation: Arc<CreationRate>,
    pub(super) refusals: RefCell<RefusalLog>,
}

/// Accepts connections on one listener of this shard, each served by its own task.
pub(super) async fn accept_loop(
    shard: Rc<Shard>,
    socket: glommio::net::TcpListener,
    listener: Rc<Listener>,
    tls: Option<futures_rustls::TlsAcceptor>,
    limits: Limits,
    gate: Rc<Gate>,
    queues: Queues,
) {
    loop {
        let stream = match socket.accept().await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(shard = shard.id.0, listener = %listener.name, "accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = stream.peer_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        // Over max_connection_creation_rate: wait (the backlog holds the rest).
        let wait = gate.creation.delay(Instant::now());
        if !wait.is_zero() {
            shard.probe.creation_throttled();
            glommio::timer::sleep(wait).await;
        }
        let ticket = match gate.admission.admit(peer.ip()) {
            Ok(ticket) => ticket,
            Err(refused) => {
                shard.probe.connection_refused(refused.limit);
                let logged = gate.refusals.borrow_mut().refused(Instant::now());
                match logged {
                    Some(0) => tracing::warn!(shard = shard.id.0, "{refused}; closed it"),
                    Some(n) => tracing::warn!(
                        shard = shard.id.0,
                        "{refused}; closed it (and {n} more refused since the last such line)"
                    ),
                    None => {}
                }
                drop(stream); // closes it
                continue;
            }
        };
        let probe = shard.probe.clone();
        let owner = shard.clone();
        let on = listener.clone();
        let serve =
            connection::serve(stream, peer, listener.clone(), tls.clone(), limits.clone(), probe, move |principal| {
                let sec = Rc::new(ConnSecurity::new(on, peer, principal));
                let session = sec.clone();
                (session, move |frame| request::handle_frame(owner.clone(), frame, sec.clone()))
            });
        queues::spawn_into(queues.net, async move {
            serve.await;
            drop(ticket); // the connection's place is free again
        });
    }
}
