//! One shard's life, on its own executor: it connects its ends of the mesh, opens (and if
//! needed recovers) the partitions homed on it, starts its timers, binds every listener,
//! reports ready, and serves until the stop flag is set; then it stops accepting, and
//! closes its partitions cleanly.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use glommio::channels::shared_channel::{ConnectedSender, SharedReceiver, SharedSender};

use super::accept::{accept_loop, receive_handoffs, Gate, Place};
use super::handoff::{Handoff, Loads};
use super::queues::{self, Queues};
use super::timers;
use crate::config::{ClusterSettings, Config};
use crate::controller::Controller;
use crate::error::BrokerError;
use crate::listener::Listener;
use crate::metadata::{BrokerRegistration, Catalog, Endpoint};
use crate::metrics;
use crate::net::admission::{Admission, RefusalLog};
use crate::net::connection::Limits;
use crate::net::creation_rate::CreationRate;
use crate::net::memory::Budget;
use crate::quota::Quotas;
use crate::shard::{Msg, Shard, ShardId};

/// The longest a shard sleeps without looking at its shared channels (see `shard_main`).
const WAKE_BOUND: Duration = Duration::from_millis(20);

/// What every shard holds an `Arc` of: the few broker-wide things shared on purpose.
pub(super) struct Shared {
    pub(super) admission: Arc<Admission>,
    pub(super) creation: Arc<CreationRate>,
    pub(super) quotas: Arc<Quotas>,
    pub(super) broker_memory: Arc<Budget>,
    /// Connections served per shard (see `handoff`).
    pub(super) loads: Arc<Loads>,
    pub(super) stop: Arc<AtomicBool>,
}

/// The senders of a row of channels once their connect tasks finish (`None` stays for this
/// shard's own place in the row).
async fn connected<T: Send + 'static>(
    tasks: Vec<Option<glommio::Task<ConnectedSender<T>>>>,
) -> Vec<Option<ConnectedSender<T>>> {
    let mut senders = Vec::with_capacity(tasks.len());
    for t in tasks {
        senders.push(match t {
            Some(t) => Some(t.await),
            None => None,
        });
    }
    senders
}

/// Makes the shard a cluster member's: its transport and tick timer; on shard 0 also the
/// cluster listener and the metadata quorum, replayed, and this broker's registration, which
/// it waits for (the catalog is then published to every shard).
async fn join_cluster(shard: &Rc<Shard>, settings: ClusterSettings, listeners: &[Listener]) -> Result<(), BrokerError> {
    let cluster = crate::shard::cluster::ShardCluster::new(shard.config.node_id, settings.clone());
    if shard.id.0 != 0 {
        shard.join_cluster(cluster, None);
        return Ok(());
    }
    let listener = super::startup::bind_exclusive(settings.listen)
        .map_err(|e| BrokerError::Bind { addr: format!("{} (cluster_listen)", settings.listen), source: e })?;
    shard.join_cluster(cluster, Some(listener));
    shard.start_metadata_quorum().await?;
    let endpoints = listeners
        .iter()
        .map(|l| Endpoint { listener: l.name.clone(), host: l.advertised.host.clone(), port: l.advertised.port })
        .collect();
    let me = BrokerRegistration { node_id: shard.config.node_id, endpoints, rack: shard.config.broker_rack.clone() };
    shard.register(me).await;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn shard_main(
    id: ShardId,
    cfg: Arc<Config>,
    (catalog, controller, cluster): (Catalog, Option<Controller>, Option<ClusterSettings>),
    listeners: Vec<Listener>,
    tls: Option<Arc<rustls::ServerConfig>>,
    probe: metrics::Probe,
    (tx_row, rx_row): (Vec<Option<SharedSender<Msg>>>, Vec<SharedReceiver<Msg>>),
    (handoff_tx, handoff_rx): (Vec<Option<SharedSender<Handoff>>>, Vec<SharedReceiver<Handoff>>),
    shared: Shared,
    ready: &mpsc::Sender<Result<(), BrokerError>>,
) -> Result<(), BrokerError> {
    let Shared { admission, creation, quotas, broker_memory, loads, stop } = shared;
    // A bound on glommio 0.9's lost wake-ups (see PREEMPT): an executor can go to sleep in
    // io_uring_enter while a peer's message waits in a shared channel. A pending timer makes
    // it sleep with a timeout, and every wake-up polls the shared channels again, so a lost
    // wake-up costs at most this long instead of hanging the shard (seen once at start in CI
    // with the 10 ms preemption timer: a broker that never reported ready).
    let stop_tick = stop.clone();
    glommio::spawn_local(async move {
        while !stop_tick.load(Ordering::Relaxed) {
            glommio::timer::sleep(WAKE_BOUND).await;
        }
    })
    .detach();
    let queues = Queues::create();
    // Each end of a shared channel waits for the other end to connect, so every connect
    // runs as its own task: all shards make progress on all their channels at once.
    let rx_tasks: Vec<_> = rx_row.into_iter().map(|rx| glommio::spawn_local(rx.connect())).collect();
    let tx_tasks: Vec<_> = tx_row.into_iter().map(|tx| tx.map(|tx| glommio::spawn_local(tx.connect()))).collect();
    let handoff_rx: Vec<_> = handoff_rx.into_iter().map(|rx| glommio::spawn_local(rx.connect())).collect();
    let handoff_tx: Vec<_> = handoff_tx.into_iter().map(|tx| tx.map(|tx| glommio::spawn_local(tx.connect()))).collect();
    let peers = connected(tx_tasks).await;
    let handoff_peers = connected(handoff_tx).await;
    let shard = Shard::new(id, Rc::new((*cfg).clone()), catalog.clone(), peers, probe, quotas, controller);
    for t in rx_tasks {
        let rx = t.await;
        queues::spawn_into(queues.replies, shard.clone().serve_peer(rx));
    }
    // A member joins first: the catalog it opens partitions by is the metadata quorum's.
    if let Some(settings) = cluster {
        join_cluster(&shard, settings, &listeners).await?;
    }
    // Open (and if needed recover) the partitions homed here before taking connections.
    shard.apply_catalog(Arc::new(catalog)).await;
    shard.replay_group_offsets();
    tracing::debug!(shard = id.0, partitions = shard.local_partition_count(), "partitions open");
    timers::spawn(&shard, queues);

    let limits = Limits {
        max_frame: cfg.max_request_bytes,
        max_in_flight: cfg.max_in_flight_per_connection,
        connection_memory: cfg.connection_max_request_bytes as usize,
        broker_memory: broker_memory.clone(),
        zero_copy: cfg.zero_copy_fetch,
        send_buffer: usize::try_from(cfg.socket_send_buffer_bytes).ok(),
        receive_buffer: usize::try_from(cfg.socket_receive_buffer_bytes).ok(),
        idle: Duration::from_millis(cfg.connections_max_idle_ms),
        pre_auth_max_frame: cfg.sasl_server_max_receive_size,
        failed_auth_delay: Duration::from_millis(cfg.connection_failed_authentication_delay_ms),
    };
    let gate = Rc::new(Gate { admission, creation, refusals: RefCell::new(RefusalLog::new(Duration::from_secs(1))) });
    let mut sockets = Vec::with_capacity(listeners.len());
    let mut served = Vec::with_capacity(listeners.len());
    for l in listeners {
        let socket = glommio::net::TcpListener::bind(l.bound).map_err(|e| BrokerError::Bind {
            addr: format!("{} (listener {}, shard {})", l.bound, l.name, id.0),
            source: e.into(),
        })?;
        let tls = match l.protocol.tls() {
            true => tls.clone().map(futures_rustls::TlsAcceptor::from),
            false => None,
        };
        sockets.push(socket);
        served.push((Rc::new(l), tls));
    }
    let place = Rc::new(Place { shard: shard.clone(), listeners: served, limits, queues, loads, peers: handoff_peers });
    let mut acceptors = Vec::with_capacity(sockets.len() + handoff_rx.len());
    for (index, socket) in sockets.into_iter().enumerate() {
        let accept = accept_loop(place.clone(), socket, index, gate.clone());
        acceptors.push(glommio::spawn_local_into(accept, queues.net).expect("the net queue exists"));
    }
    for rx in handoff_rx {
        let receive = receive_handoffs(place.clone(), rx.await);
        acceptors.push(glommio::spawn_local_into(receive, queues.net).expect("the net queue exists"));
    }
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::SeqCst) {
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    drop(acceptors); // stops accepting; the listeners close with them
    shard.close_all().await;
    tracing::debug!(shard = id.0, "shard closed");
    Ok(())
}
