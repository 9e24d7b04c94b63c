//! What the broker checks and sets up before any shard starts: the process limits, the
//! listeners' ports, the data directory's lock, and the channels between shards.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::Path;
use std::time::Duration;

use glommio::channels::shared_channel::{self, SharedReceiver, SharedSender};

use super::handoff::Handoff;
use crate::error::BrokerError;
use crate::shard::Msg;

/// Each mesh channel's capacity, in messages: a full one is backpressure (see `shard::mesh`).
const MESH_CAPACITY: usize = 1024;
/// Each handoff channel's capacity, in connections.
const HANDOFF_CAPACITY: usize = 256;

/// A listener's port, held for the broker from the moment port 0 is resolved until every
/// shard has bound its own socket on it.
pub(super) struct Reservation {
    pub addr: SocketAddr,
    /// For port 0: the socket that took the port (bound with SO_REUSEPORT, never listening,
    /// so it receives no connections). Releasing it before the shards bind would let any
    /// other process, or a client's outgoing connection, take the port in between.
    _held: Option<StdListener>,
}

/// Resolves port 0 to a free port and holds it, and refuses a port some other process
/// already serves: with SO_REUSEPORT the kernel would otherwise quietly split connections
/// between us and, say, a stale broker of the same user. Connections of a killed broker
/// lingering in TIME_WAIT do not count, so a restart on the same port works at once.
pub(super) fn reserve_port(addr: SocketAddr) -> Result<Reservation, BrokerError> {
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
        return Ok(Reservation { addr, _held: None });
    }
    let sock =
        socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None).map_err(bind_err)?;
    sock.set_reuse_port(true).map_err(bind_err)?;
    sock.bind(&addr.into()).map_err(bind_err)?;
    let held: StdListener = sock.into();
    Ok(Reservation { addr: held.local_addr().map_err(bind_err)?, _held: Some(held) })
}

/// Binds a listener that only this process serves: unlike glommio's `TcpListener::bind`,
/// without SO_REUSEPORT, so a port another process listens on (even with SO_REUSEPORT, as
/// every broker's client listeners do) is refused with EADDRINUSE instead of having the kernel
/// split its connections between the two. The cluster listener binds this way: only shard 0
/// accepts on it. SO_REUSEADDR lets a restarted broker bind over its old connections' TIME_WAIT.
pub(super) fn bind_exclusive(addr: SocketAddr) -> std::io::Result<glommio::net::TcpListener> {
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    Ok(crate::sys::glommio_listener(sock))
}

pub(super) fn lock_data_dir(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, BrokerError> {
    let err = |source: std::io::Error| crate::error::storage(dir, source);
    crate::storage::create_dir_all(dir).map_err(err)?;
    let f = crate::storage::open_rw(&dir.join(".lock")).map_err(err)?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        err(std::io::Error::new(std::io::Error::from(errno).kind(), "another ringbroker is using this data directory"))
    })
}

pub(super) fn admin_bind_error(addr: SocketAddr, source: std::io::Error) -> BrokerError {
    let source = std::io::Error::new(
        source.kind(),
        format!("{source}; choose another --admin-listen address, or `off` to run without metrics"),
    );
    BrokerError::Bind { addr: format!("{addr} (admin_listen)"), source }
}

/// Raises the soft limits on open files and locked memory to their hard limits, as the JVM
/// does for Kafka: connections and segment files each take descriptors, and io_uring pins
/// memory per shard. The hard limits are the operator's to set (`ringbroker tune`, or
/// LimitNOFILE/LimitMEMLOCK in the systemd unit); this only stops a low soft default (often
/// 1024 files, 8 MiB locked) from capping a broker the operator allowed more.
pub(super) fn raise_soft_limits() {
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

/// Each shard's ends of a set of channels between every ordered pair of shards: row `i` of
/// the senders holds shard `i`'s sender to every other shard (`None` for itself), and the
/// receivers of shard `i` are the ends that every other shard sends to it on.
pub(super) type Ends<T> = (Vec<Vec<Option<SharedSender<T>>>>, Vec<Vec<SharedReceiver<T>>>);

/// The mesh: a bounded single-producer channel for every ordered pair of `n` shards.
pub(super) fn mesh(n: usize) -> Ends<Msg> {
    channels(n, MESH_CAPACITY)
}

/// The channels connections are handed over on (see `handoff`): a full one means the
/// target shard is behind, and the acceptor serves the connection itself.
pub(super) fn handoffs(n: usize) -> Ends<Handoff> {
    channels(n, HANDOFF_CAPACITY)
}

fn channels<T: Send + 'static>(n: usize, capacity: usize) -> Ends<T> {
    let mut senders: Vec<Vec<Option<SharedSender<T>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut receivers: Vec<Vec<SharedReceiver<T>>> = (0..n).map(|_| Vec::new()).collect();
    for (from, row) in senders.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            if from != to {
                let (tx, rx) = shared_channel::new_bounded(capacity);
                *slot = Some(tx);
                receivers[to].push(rx);
            }
        }
    }
    (senders, receivers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port 0 reservation keeps the port from everyone but the shards (SO_REUSEPORT
    /// sockets of this user) until it is dropped.
    #[test]
    fn a_reserved_port_stays_ours_until_released() {
        let reserved = reserve_port("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(reserved.addr.port(), 0);
        let plain = StdListener::bind(reserved.addr);
        assert_eq!(plain.map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
        let shard = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        shard.set_reuse_port(true).unwrap();
        shard.bind(&reserved.addr.into()).expect("a shard's SO_REUSEPORT socket binds beside the reservation");
        drop(shard);
        let addr = reserved.addr;
        drop(reserved);
        StdListener::bind(addr).expect("the port is free once released");
    }
}
