//! Each listener's accept loop on a shard: the broker-wide caps (connection creation rate,
//! connections in total and per IP) are applied here, on the accept path only; a connection
//! admitted goes to the shard serving the fewest connections (see `handoff`) and is served
//! there by its own task in the `net` queue.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::net::TcpStream;
use glommio::{GlommioError, ResourceType};

use super::handoff::{Handoff, Load, Loads};
use super::queues::{self, Queues};
use super::request;
use crate::auth::sasl::ConnSecurity;
use crate::listener::Listener;
use crate::net::admission::{Admission, RefusalLog, Ticket};
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

/// What this shard needs to serve a connection, wherever it was accepted: its listeners in
/// the broker's order (with their TLS acceptors), limits, queues, and the senders that hand
/// connections to the other shards.
pub(super) struct Place {
    pub(super) shard: Rc<Shard>,
    pub(super) listeners: Vec<(Rc<Listener>, Option<futures_rustls::TlsAcceptor>)>,
    pub(super) limits: Limits,
    pub(super) queues: Queues,
    pub(super) loads: Arc<Loads>,
    /// To every other shard, by shard id (`None` for this one).
    pub(super) peers: Vec<Option<ConnectedSender<Handoff>>>,
}

/// Accepts connections on listener `index` of this shard.
pub(super) async fn accept_loop(place: Rc<Place>, socket: glommio::net::TcpListener, index: usize, gate: Rc<Gate>) {
    let shard = place.shard.clone();
    let listener = place.listeners[index].0.clone();
    loop {
        let stream = match socket.shared_accept().await {
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
                drop(stream.bind_to_executor()); // closes it
                continue;
            }
        };
        let load = place.loads.place(shard.id.0);
        let to = load.shard;
        let Some(Some(peer_shard)) = place.peers.get(to) else {
            place.serve(stream.bind_to_executor(), peer, index, ticket, load);
            continue;
        };
        match peer_shard.try_send(Handoff { stream, peer, listener: index, ticket, load }) {
            Ok(()) => {}
            // That shard is behind on its handoffs (or stopping): serve it here.
            Err(
                GlommioError::WouldBlock(ResourceType::Channel(h)) | GlommioError::Closed(ResourceType::Channel(h)),
            ) => {
                let Handoff { stream, peer, listener, ticket, load } = h;
                drop(load);
                place.serve(stream.bind_to_executor(), peer, listener, ticket, place.loads.count_on(shard.id.0));
            }
            // A shared channel's try_send fails only in the two ways above.
            Err(e) => tracing::error!(shard = shard.id.0, %peer, "connection lost on its way to shard {to}: {e}"),
        }
    }
}

/// Serves the connections other shards hand to this one.
pub(super) async fn receive_handoffs(place: Rc<Place>, from: ConnectedReceiver<Handoff>) {
    while let Some(h) = from.recv().await {
        let Handoff { stream, peer, listener, ticket, load } = h;
        place.serve(stream.bind_to_executor(), peer, listener, ticket, load);
    }
}

impl Place {
    /// Serves one connection on this shard, by its own task; its ticket and load go with it.
    fn serve(&self, stream: TcpStream, peer: SocketAddr, index: usize, ticket: Ticket, load: Load) {
        let (listener, tls) = &self.listeners[index];
        let probe = self.shard.probe.clone();
        let owner = self.shard.clone();
        let on = listener.clone();
        let serve = connection::serve(
            stream,
            peer,
            listener.clone(),
            tls.clone(),
            self.limits.clone(),
            probe,
            move |principal| {
                let sec = Rc::new(ConnSecurity::new(on, peer, principal));
                let session = sec.clone();
                (session, move |frame| request::handle_frame(owner.clone(), frame, sec.clone()))
            },
        );
        queues::spawn_into(self.queues.net, async move {
            serve.await;
            drop((ticket, load)); // the connection's place is free again
        });
    }
}
