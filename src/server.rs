//! Startup wiring and each shard's serve loop. `run` resolves CPUs, locks and loads the data
//! directory, wires the cross-shard mesh, starts one pinned glommio executor per CPU and
//! prints `ringbroker listening on HOST:PORT` once every shard accepts connections. On
//! SIGTERM/SIGINT every shard stops accepting, finishes queued appends, syncs and closes its
//! partitions cleanly (so the next start skips recovery), and the process exits 0; a second
//! signal exits at once.
//!
//! With `admin_listen` set, an admin HTTP listener serves Prometheus metrics (see
//! `metrics`); its address is printed as `ringbroker admin listening on HOST:PORT` before
//! the line above.
//!
//! ## Placement and memory
//!
//! Each shard runs on one CPU, and startup logs `shard → CPU → NUMA node` for each. glommio
//! pins the executor thread *before* building the executor, and Linux's default memory
//! policy allocates on the node of the CPU that first touches a page, so what a shard
//! allocates on its own thread is on its node:
//! - bound to the shard's node: the io_uring rings and the `IO_MEMORY` buffers glommio
//!   registers; the shard's `Shard` state, metrics, partition state and index maps,
//!   connection read buffers and request bytes, log write queues; page-cache pages of the
//!   segments it writes (the writing thread touches them first).
//! - not bound: whatever the main thread allocates before the executors start (the config,
//!   the catalog copies handed to each shard, the mesh channels' ring buffers, this
//!   function's bookkeeping); kernel socket buffers, allocated where the network stack
//!   runs (NIC queue and RPS/XPS placement decide); and anything once the node is full,
//!   since no `mbind`/`set_mempolicy` is used and the kernel then falls back to other
//!   nodes silently. Record bytes produced on one shard for a partition homed on another
//!   are read on the first node and copied into the home shard's write queue there.

use std::cell::RefCell;
use std::io::Write;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;

use glommio::channels::shared_channel::{self, SharedReceiver, SharedSender};
use glommio::{LocalExecutorBuilder, Placement};

use crate::auth::sasl::ConnSecurity;
use crate::config::Config;
use crate::controller::Controller;
use crate::error::BrokerError;
use crate::listener::Listener;
use crate::log::LogConfig;
use crate::metadata::Catalog;
use crate::metrics::{self, HandlerTiming, RequestScope};
use crate::net::admission::{Admission, RefusalLog};
use crate::net::connection::{self, Handled, Limits};
use crate::net::creation_rate::CreationRate;
use crate::net::memory::Budget;
use crate::placement::{IO_MEMORY, PREEMPT};
use crate::protocol::header;
use crate::quota::Kind;
use crate::quota::Quotas;
use crate::shard::{Msg, Shard, ShardId};
use crate::{api, sys};

const MESH_CAPACITY: usize = 1024;
/// The longest a shard sleeps without looking at its shared channels (see `shard_main`).
const WAKE_BOUND: Duration = Duration::from_millis(20);

/// Resolves port 0 to a free port, and refuses a port some other process already serves:
/// with SO_REUSEPORT the kernel would otherwise quietly split connections between us and,
/// say, a stale broker of the same user. Connections of a killed broker lingering in
/// TIME_WAIT do not count, so a restart on the same port works at once.
fn reserve_port(addr: SocketAddr) -> Result<SocketAddr, BrokerError> {
    let bind_err = |source| BrokerError::Bind { addr: addr.to_string(), source };
    if addr.port() != 0 {
        let mut probe = addr;
        if probe.ip().is_unspecified() {
            probe.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        // A broker that was just stopped may still be closing its listeners: look a few times.
        let busy = (0..10).all(|attempt| {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(300)).is_ok()
        });
        if busy {
            return Err(bind_err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process accepts connections there; stop it or choose another --listen port",
            )));
        }
        return Ok(addr);
    }
    let sock =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None).map_err(bind_err)?;
    sock.set_reuse_port(true).map_err(bind_err)?;
    sock.bind(&addr.into()).map_err(bind_err)?;
    let std: StdListener = sock.into();
    std.local_addr().map_err(bind_err)
}

fn lock_data_dir(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, BrokerError> {
    let err = |source: std::io::Error| BrokerError::Storage { path: dir.to_path_buf(), source };
    crate::storage::create_dir_all(dir).map_err(err)?;
    let f = crate::storage::open_rw(&dir.join(".lock")).map_err(err)?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        err(std::io::Error::new(std::io::Error::from(errno).kind(), "another ringbroker is using this data directory"))
    })
}

fn admin_bind_error(addr: SocketAddr, source: std::io::Error) -> BrokerError {
    let source = std::io::Error::new(
        source.kind(),
        format!("{source}; choose another --admin-listen address, or `off` to run without metrics"),
    );
    BrokerError::Bind { addr: format!("{addr} (admin_listen)"), source }
}

/// Runs the broker until SIGTERM/SIGINT. Returns after a clean shutdown.
/// Raises the soft limits on open files and locked memory to their hard limits, as the JVM
/// does for Kafka: connections and segment files each take descriptors, and io_uring pins
/// memory per shard. The hard limits are the operator's to set (`ringbroker tune`, or
/// LimitNOFILE/LimitMEMLOCK in the systemd unit); this only stops a low soft default (often
/// 1024 files, 8 MiB locked) from capping a broker the operator allowed more.
fn raise_soft_limits() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    for (name, resource) in [("open files", Resource::RLIMIT_NOFILE), ("locked memory", Resource::RLIMIT_MEMLOCK)] {
        match getrlimit(resource) {
            Ok((soft, hard)) if soft < hard => match setrlimit(resource, hard, hard) {
                Ok(()) => tracing::info!("raised the soft limit on {name} from {soft} to the hard limit {hard}"),
                Err(e) => tracing::warn!("could not raise the soft limit on {name} from {soft} to {hard}: {e}"),
            },
            Ok(_) => {}
            Err(e) => tracing::warn!("could not read the limit on {name}: {e}"),
        }
    }
}

pub fn run(cfg: Config) -> Result<(), BrokerError> {
    raise_soft_limits();
    let allowed = sys::allowed_cpus()
        .map_err(|source| BrokerError::Startup { step: "read the CPUs this process may use", source })?;
    let cpus = crate::placement::resolve_cpus(&cfg, &allowed, Path::new("/sys"))?;
    let n = cpus.len();
    let nodes = crate::placement::numa_nodes(Path::new("/sys"));
    let placement: Vec<(usize, Option<u32>)> = cpus.iter().map(|&cpu| (cpu, nodes.get(&cpu).copied())).collect();
    for (shard, (cpu, node)) in placement.iter().enumerate() {
        let node = node.map_or_else(|| "-".to_string(), |n| n.to_string());
        tracing::info!("shard {shard} → CPU {cpu} → NUMA node {node}");
    }
    let _lock = lock_data_dir(&cfg.data_dir)?;
    let mut controller = Controller::open(crate::controller::Context {
        shards: n,
        node_id: cfg.node_id,
        default_partitions: cfg.default_partitions,
        static_log: LogConfig::from_config(&cfg),
        data_dir: cfg.data_dir.clone(),
    })?;
    // Committed offsets live in an internal topic with one partition per shard (at first
    // start), never deleted by retention.
    let internal = [("retention.ms", "-1"), ("retention.bytes", "-1"), ("cleanup.policy", "compact")];
    let configs = internal.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    controller.ensure_internal_topic(crate::group::offsets::TOPIC, n as u32, configs)?;
    let catalog = controller.catalog().clone();
    // The controller lives on shard 0.
    let mut controller = Some(controller);
    let mut listeners = Vec::new();
    for spec in cfg.listener_specs()? {
        listeners.push(spec.bound(reserve_port(spec.bind)?));
    }
    // One TLS configuration serves every SSL and SASL_SSL listener; bad files fail the start.
    let tls = match listeners.iter().any(|l| l.protocol.tls()) {
        true => Some(crate::net::tls::server_config(&cfg)?),
        false => None,
    };
    let apis = api::APIS.iter().map(|s| (s.key as i16, format!("{:?}", s.key))).collect();
    let registry = metrics::Registry::new(n, apis);
    // Bound before the shards start so a taken port fails the start, not a later scrape.
    let admin = match cfg.admin_addr()? {
        Some(a) => {
            let listener = StdListener::bind(a).map_err(|source| admin_bind_error(a, source))?;
            let bound = listener.local_addr().map_err(|source| admin_bind_error(a, source))?;
            Some((listener, bound))
        }
        None => None,
    };
    // The one piece of shared mutable state between shards' acceptors: the connection caps
    // are broker-wide (see `net::admission` for why that is acceptable).
    let admission = Admission::new(
        cfg.max_connections as usize,
        cfg.max_connections_per_ip as usize,
        &cfg.connection_ip_overrides()?,
    );
    let creation = Arc::new(CreationRate::new(cfg.max_connection_creation_rate));
    // Client quotas are broker-wide too: one registry of per-client rates that every shard
    // records into (see `quota` for why, and why it stays off the locks on the hot path).
    // Bad quota settings stop the start here; each shard builds its own table from them.
    cfg.client_quotas()?;
    cfg.user_quotas()?;
    let quotas = Quotas::new();
    // And the memory budget for request bytes read and not yet answered (see `net::memory`).
    let broker_memory = Budget::new(cfg.queued_max_request_bytes as usize);
    let cfg = Arc::new(cfg);

    // Block the stop signals in every thread; the main thread waits for them with sigwait.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGTERM);
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals
        .thread_block()
        .map_err(|e| BrokerError::Startup { step: "block SIGTERM and SIGINT in the shards", source: e.into() })?;
    // Started after the signal mask is set so that it inherits it: the main thread alone
    // takes the stop signals.
    let admin = match admin {
        Some((listener, bound)) => {
            metrics::http::spawn(listener, metrics::Exposition::new(registry.clone()))
                .map_err(|source| BrokerError::Startup { step: "start the admin HTTP thread", source })?;
            Some(bound)
        }
        None => None,
    };

    // The mesh: a bounded single-producer channel for every ordered pair of shards.
    let mut senders: Vec<Vec<Option<SharedSender<Msg>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut receivers: Vec<Vec<SharedReceiver<Msg>>> = (0..n).map(|_| Vec::new()).collect();
    for (from, row) in senders.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            if from != to {
                let (tx, rx) = shared_channel::new_bounded(MESH_CAPACITY);
                *slot = Some(tx);
                receivers[to].push(rx);
            }
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), BrokerError>>();
    let mut handles = Vec::with_capacity(n);
    for (i, ((cpu, node), (tx_row, rx_row))) in
        placement.iter().copied().zip(senders.into_iter().zip(receivers)).enumerate()
    {
        let cfg = cfg.clone();
        let registry = registry.clone();
        let catalog = catalog.clone();
        let controller = if i == 0 { controller.take() } else { None };
        let listeners = listeners.clone();
        let tls = tls.clone();
        let stop = stop.clone();
        let admission = admission.clone();
        let creation = creation.clone();
        let quotas = quotas.clone();
        let broker_memory = broker_memory.clone();
        let ready = ready_tx.clone();
        let builder = LocalExecutorBuilder::new(Placement::Fixed(cpu))
            .name(&format!("shard-{i}"))
            .io_memory(IO_MEMORY)
            .preempt_timer(PREEMPT);
        let handle = builder
            .spawn(move || async move {
                // Made here, on the pinned thread, so the metrics live on the shard's node.
                let probe = registry.register_shard(i, cpu, node);
                let shared = Shared { admission, creation, quotas, broker_memory, stop };
                let outcome = shard_main(
                    ShardId(i),
                    cfg,
                    (catalog, controller),
                    listeners,
                    tls,
                    probe,
                    tx_row,
                    rx_row,
                    shared,
                    &ready,
                )
                .await;
                if let Err(e) = outcome {
                    let _ = ready.send(Err(e));
                }
            })
            .map_err(|e| BrokerError::shard_spawn(i, cpu, e))?;
        handles.push(handle);
    }
    drop(ready_tx);
    for _ in 0..n {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(BrokerError::ShardExited),
        }
    }
    for l in &listeners {
        let advertised = format!("{}:{}", l.advertised.host, l.advertised.port);
        tracing::info!(listener = %l.name, protocol = %l.protocol, bound = %l.bound, %advertised, "listening");
    }
    tracing::info!(shards = n, ?cpus, "ready");
    if let Some(a) = admin {
        tracing::info!("metrics at http://{a}/metrics");
        println!("ringbroker admin listening on {a}");
    }
    // One line per listener, then the first listener's as the ready line scripts wait for.
    for l in &listeners {
        println!("ringbroker listener {} ({}) on {}", l.name, l.protocol, l.bound);
    }
    println!("ringbroker listening on {}", listeners[0].bound);
    let _ = std::io::stdout().flush();

    // Wait for a stop signal; a second one exits at once.
    let sig = signals.wait();
    tracing::info!("received {sig:?}: shutting down cleanly (send it again to exit at once)");
    stop.store(true, Ordering::SeqCst);
    std::thread::spawn(move || {
        if signals.wait().is_ok() {
            eprintln!("second signal: exiting without a clean shutdown");
            std::process::exit(130);
        }
    });
    for h in handles {
        if let Err(e) = h.join() {
            tracing::error!("shard ended badly: {e}");
        }
    }
    tracing::info!("clean shutdown complete");
    Ok(())
}

/// What every shard holds an `Arc` of: the few broker-wide things shared on purpose.
struct Shared {
    admission: Arc<Admission>,
    creation: Arc<CreationRate>,
    quotas: Arc<Quotas>,
    broker_memory: Arc<Budget>,
    stop: Arc<AtomicBool>,
}

#[allow(clippy::too_many_arguments)]
async fn shard_main(
    id: ShardId,
    cfg: Arc<Config>,
    (catalog, controller): (Catalog, Option<Controller>),
    listeners: Vec<Listener>,
    tls: Option<Arc<rustls::ServerConfig>>,
    probe: metrics::Probe,
    tx_row: Vec<Option<SharedSender<Msg>>>,
    rx_row: Vec<SharedReceiver<Msg>>,
    shared: Shared,
    ready: &mpsc::Sender<Result<(), BrokerError>>,
) -> Result<(), BrokerError> {
    let Shared { admission, creation, quotas, broker_memory, stop } = shared;
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
    // Each end of a shared channel waits for the other end to connect, so every connect
    // runs as its own task: all shards make progress on all their channels at once.
    let rx_tasks: Vec<_> = rx_row.into_iter().map(|rx| glommio::spawn_local(rx.connect())).collect();
    let tx_tasks: Vec<_> = tx_row.into_iter().map(|tx| tx.map(|tx| glommio::spawn_local(tx.connect()))).collect();
    let mut peers = Vec::with_capacity(tx_tasks.len());
    for t in tx_tasks {
        peers.push(match t {
            Some(t) => Some(t.await),
            None => None,
        });
    }
    let shard = Shard::new(id, Rc::new((*cfg).clone()), catalog.clone(), peers, probe, quotas, controller);
    for t in rx_tasks {
        let rx = t.await;
        glommio::spawn_local(shard.clone().serve_peer(rx)).detach();
    }
    // Open (and if needed recover) the partitions homed here before taking connections.
    shard.apply_catalog(Arc::new(catalog)).await;
    shard.replay_group_offsets();
    tracing::debug!(shard = id.0, partitions = shard.local_partition_count(), "partitions open");
    spawn_background(&shard);

    let limits = Limits {
        max_frame: cfg.max_request_bytes,
        max_in_flight: cfg.max_in_flight_per_connection,
        connection_memory: cfg.connection_max_request_bytes as usize,
        broker_memory: broker_memory.clone(),
        zero_copy: cfg.zero_copy_fetch,
        idle: Duration::from_millis(cfg.connections_max_idle_ms),
        pre_auth_max_frame: cfg.sasl_server_max_receive_size,
        failed_auth_delay: Duration::from_millis(cfg.connection_failed_authentication_delay_ms),
    };
    let gate = Rc::new(Gate { admission, creation, refusals: RefCell::new(RefusalLog::new(Duration::from_secs(1))) });
    let mut acceptors = Vec::with_capacity(listeners.len());
    for l in listeners {
        let socket = glommio::net::TcpListener::bind(l.bound).map_err(|e| BrokerError::Bind {
            addr: format!("{} (listener {}, shard {})", l.bound, l.name, id.0),
            source: e.into(),
        })?;
        let tls = match l.protocol.tls() {
            true => tls.clone().map(futures_rustls::TlsAcceptor::from),
            false => None,
        };
        let accept = accept_loop(shard.clone(), socket, Rc::new(l), tls, limits.clone(), gate.clone());
        acceptors.push(glommio::spawn_local(accept));
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

/// What every listener's acceptor of a shard shares: the broker-wide connection caps and the
/// shard's rate-limited log of refusals.
struct Gate {
    admission: Arc<Admission>,
    creation: Arc<CreationRate>,
    refusals: RefCell<RefusalLog>,
}

/// Accepts connections on one listener of this shard, each served by its own task.
async fn accept_loop(
    shard: Rc<Shard>,
    socket: glommio::net::TcpListener,
    listener: Rc<Listener>,
    tls: Option<futures_rustls::TlsAcceptor>,
    limits: Limits,
    gate: Rc<Gate>,
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
                (session, move |frame| handle_frame(owner.clone(), frame, sec.clone()))
            });
        glommio::spawn_local(async move {
            serve.await;
            drop(ticket); // the connection's place is free again
        })
        .detach();
    }
}

/// The connection's view of its SASL state.
impl connection::Session for ConnSecurity {
    fn authenticated(&self) -> bool {
        ConnSecurity::authenticated(self)
    }
}

/// Runs one request frame through `api::dispatch` as a metrics request scope (so waits on
/// other shards count as remote time) and reports how it went to the connection. Before a
/// connection has authenticated, a refused request closes it only after the failed-
/// authentication delay, and a failed authentication closes it that long after its answer.
async fn handle_frame(shard: Rc<Shard>, frame: Bytes, sec: Rc<ConnSecurity>) -> Handled {
    let started = Instant::now();
    let api = shard.probe.api_slot(header::preamble(&frame).map(|p| p.api_key));
    // Only read when some client has a request quota (the default has none).
    let client = shard.quotas.limits_requests().then(|| client_id(&frame));
    let scope = RequestScope::begin();
    let outcome = scope.run(api::dispatch(&shard, frame, &sec)).await;
    let finished = Instant::now();
    let remote = scope.remote(finished);
    let mut throttle = scope.throttle();
    if let Some(client) = client {
        // The request quota counts the time this request kept the shard busy in its
        // handler (waits on other shards, durable acks or rebalances excluded), as Kafka
        // counts request-handler thread time. The connection is muted for the throttle; the
        // response's throttle_time_ms, already encoded, carries byte-quota throttles only.
        let busy = finished.saturating_duration_since(started).saturating_sub(remote);
        let session = sec.session();
        let t = shard.quotas.record_as(session.user(), client.as_deref(), Kind::Request, busy.as_micros() as u64);
        if !t.is_zero() {
            shard.probe.throttled(api, t);
            throttle = throttle.max(t);
        }
    }
    let delay = Duration::from_millis(shard.config.connection_failed_authentication_delay_ms);
    if outcome.is_err() && !sec.authenticated() {
        glommio::timer::sleep(delay).await;
    }
    let close_after = sec.failed().then_some(delay);
    let outcome = outcome.map_err(|fault| {
        shard.probe.request_error(api, fault.kind());
        fault.into()
    });
    Handled { outcome, timing: HandlerTiming { api, started, finished, remote }, throttle, close_after }
}

/// The client id of a request frame (header v1+: a nullable string right after the 8-byte
/// preamble); `None` when absent or not valid UTF-8.
fn client_id(frame: &[u8]) -> Option<String> {
    let len = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    let bytes = frame.get(10..10 + usize::try_from(len).ok()?)?;
    std::str::from_utf8(bytes).ok().map(str::to_string)
}

/// Timers on the background queue: retention and offsets expiry; groups' timers. (Syncs
/// for `flush = "interval"` and `flush.ms` are scheduled by each partition.)
fn spawn_background(shard: &Rc<Shard>) {
    let tq = glommio::executor().create_task_queue(
        glommio::Shares::Static(100),
        glommio::Latency::NotImportant,
        "background",
    );
    let s = shard.clone();
    let every = Duration::from_millis(s.config.retention_check_interval_ms.max(1));
    glommio::spawn_local_into(
        async move {
            loop {
                glommio::timer::sleep(every).await;
                s.apply_retention();
            }
        },
        tq,
    )
    .expect("background queue exists")
    .detach();
    let s = shard.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_millis(100)).await;
            s.tick_groups();
        }
    })
    .detach();
    let s = shard.clone();
    let every = Duration::from_millis(s.config.offsets_retention_check_interval_ms.max(1));
    glommio::spawn_local_into(
        async move {
            loop {
                glommio::timer::sleep(every).await;
                s.expire_group_offsets().await;
            }
        },
        tq,
    )
    .expect("background queue exists")
    .detach();
}
