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
//! Each shard runs on one CPU, and startup logs `shard → CPU → NUMA node` for each. With
//! `pin = false` a shard's thread may run on any of the shards' CPUs instead (the kernel
//! moves it where there is room: a machine whose cores other processes share), and what
//! follows about nodes holds only as far as the kernel keeps it in place. Pinned, glommio
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
//!
//! ## Where things are
//!
//! - `startup`: what is checked and set up before any shard starts (limits, ports, the data
//!   directory's lock, the mesh's channels); `run` here spawns the shards and waits for the
//!   stop signal.
//! - `serve`: one shard's life: it connects its mesh, opens its partitions, binds its
//!   listeners, serves until stopped, and closes.
//! - `queues`: the shard's task queues, and why each exists.
//! - `accept`: each listener's accept loop, with the broker-wide connection caps.
//! - `request`: the glue from a request frame to `api::dispatch` and back, with the request
//!   quota and the metrics around it.
//! - `timers`: periodic work (retention, group timers, offsets expiry).

mod accept;
mod handoff;
mod queues;
mod request;
mod serve;
mod startup;
mod timers;

use std::io::Write;
use std::net::TcpListener as StdListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use glommio::{CpuSet, LocalExecutorBuilder, Placement};

use crate::config::Config;
use crate::controller::Controller;
use crate::error::BrokerError;
use crate::log::LogConfig;
use crate::metrics;
use crate::net::admission::Admission;
use crate::net::creation_rate::CreationRate;
use crate::net::memory::Budget;
use crate::placement::{IO_MEMORY, PREEMPT};
use crate::quota::Quotas;
use crate::shard::ShardId;
use crate::{api, sys};
use serve::Shared;

/// Runs the broker until SIGTERM/SIGINT. Returns after a clean shutdown.
pub fn run(cfg: Config) -> Result<(), BrokerError> {
    startup::raise_soft_limits();
    let allowed = sys::allowed_cpus()
        .map_err(|source| BrokerError::Startup { step: "read the CPUs this process may use", source })?;
    let cpus = crate::placement::resolve_cpus(&cfg, &allowed, Path::new("/sys"))?;
    let n = cpus.len();
    let nodes = crate::placement::numa_nodes(Path::new("/sys"));
    let placement: Vec<(usize, Option<u32>)> = cpus.iter().map(|&cpu| (cpu, nodes.get(&cpu).copied())).collect();
    if cfg.pin {
        for (shard, (cpu, node)) in placement.iter().enumerate() {
            let node = node.map_or_else(|| "-".to_string(), |n| n.to_string());
            tracing::info!("shard {shard} → CPU {cpu} → NUMA node {node}");
        }
    } else {
        tracing::info!(?cpus, "{n} shards, not pinned: each thread may run on any of these CPUs (pin = false)");
    }
    let _lock = startup::lock_data_dir(&cfg.data_dir)?;
    let cluster = cfg.cluster()?;
    let ctx = crate::controller::Context {
        shards: n,
        node_id: cfg.node_id,
        default_partitions: cfg.default_partitions,
        static_log: LogConfig::from_config(&cfg),
        data_dir: cfg.data_dir.clone(),
        members: cluster.as_ref().map(|c| c.members()).unwrap_or_default(),
        default_replication_factor: cfg.default_replication_factor,
    };
    let controller = match &cluster {
        // A member's catalog is what the metadata quorum's log makes: shard 0 replays it.
        Some(_) => Controller::replicated(ctx),
        None => {
            let mut controller = Controller::open(ctx)?;
            // Committed offsets live in an internal topic with one partition per shard (at
            // first start), never deleted by retention.
            let configs = crate::group::offsets::topic_configs();
            controller.ensure_internal_topic(crate::group::offsets::TOPIC, n as u32, configs)?;
            controller
        }
    };
    let catalog = controller.catalog().clone();
    // The controller lives on shard 0.
    let mut controller = Some(controller);
    let mut listeners = Vec::new();
    let mut reservations = Vec::new();
    for spec in cfg.listener_specs()? {
        let reserved = startup::reserve_port(spec.bind)?;
        listeners.push(spec.bound(reserved.addr));
        reservations.push(reserved);
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
            let listener = StdListener::bind(a).map_err(|source| startup::admin_bind_error(a, source))?;
            let bound = listener.local_addr().map_err(|source| startup::admin_bind_error(a, source))?;
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

    let (senders, receivers) = startup::mesh(n);
    let (handoff_senders, handoff_receivers) = startup::handoffs(n);
    let loads = handoff::Loads::new(n);

    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), BrokerError>>();
    // With `pin = false` every shard's thread is fenced to all the shards' CPUs, not fixed
    // to its own.
    let fence = match cfg.pin {
        true => None,
        false => {
            let online =
                CpuSet::online().map_err(|e| BrokerError::shard_spawn(0, cpus.first().copied().unwrap_or(0), e))?;
            Some(online.filter(|l| cpus.contains(&l.cpu)))
        }
    };
    let mut handles = Vec::with_capacity(n);
    let rows = senders.into_iter().zip(receivers).zip(handoff_senders.into_iter().zip(handoff_receivers));
    for (i, ((cpu, node), (mesh, handoffs))) in placement.iter().copied().zip(rows).enumerate() {
        let cfg = cfg.clone();
        let cluster = cluster.clone();
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
        let loads = loads.clone();
        let ready = ready_tx.clone();
        let placement = match &fence {
            Some(set) => Placement::Fenced(set.clone()),
            None => Placement::Fixed(cpu),
        };
        let builder = LocalExecutorBuilder::new(placement)
            .name(&format!("shard-{i}"))
            .io_memory(IO_MEMORY)
            .preempt_timer(PREEMPT);
        let handle = builder
            .spawn(move || async move {
                // Made here, on the pinned thread, so the metrics live on the shard's node.
                let probe = registry.register_shard(i, cpu, node);
                let shared = Shared { admission, creation, quotas, broker_memory, loads, stop };
                let outcome = serve::shard_main(
                    ShardId(i),
                    cfg,
                    (catalog, controller, cluster),
                    listeners,
                    tls,
                    probe,
                    mesh,
                    handoffs,
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
    // Every shard holds its listeners' ports now.
    drop(reservations);
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
