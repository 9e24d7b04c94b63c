//! A cluster of real `ringbroker` processes on 127.0.0.1, one shard each, every broker a voter
//! of the metadata quorum: started together (a broker is ready only once a quorum of its
//! peers is up), killed, stopped and restarted one at a time on their own ports and data
//! directories.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crate::broker::{restart, Broker};
use crate::client::{wait_until, Client};
use crate::link::Links;

pub struct Cluster {
    /// Broker `i` is node `i + 1`; `None` while it is down.
    brokers: Vec<Option<Broker>>,
    client_ports: Vec<u16>,
    args: Vec<Vec<String>>,
    dirs: Vec<tempfile::TempDir>,
}

/// A port free now and never handed out before by this process, so that two clusters of one
/// test binary never pick the same port. Another process could still take it before the
/// broker binds it: the broker then refuses to start, and `start_linked` starts again.
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

impl Cluster {
    /// `n` brokers with `extra` settings each (one shard, unpinned), all started at once.
    pub fn start(n: usize, extra: &[&str]) -> Cluster {
        Cluster::start_linked(n, extra, None)
    }

    /// `start`, with every broker-to-broker link through `links`' proxies (see `link`).
    ///
    /// Ports are picked free and bound by the brokers a moment later, so another test's
    /// process may take one first (the broker then exits: "cannot bind the listener"); the
    /// cluster is then started again on fresh ports, a few times at most.
    pub fn start_linked(n: usize, extra: &[&str], links: Option<&Links>) -> Cluster {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            if let Some(c) = Cluster::try_start_linked(n, extra, links) {
                return c;
            }
            println!("a broker of the cluster did not start (attempt {attempt} of {ATTEMPTS}); starting it anew");
        }
        panic!("a {n}-broker cluster did not start in {ATTEMPTS} attempts: see the brokers' output above");
    }

    /// One attempt of `start_linked`: `None` (every broker it started stopped) when a broker
    /// does not start.
    fn try_start_linked(n: usize, extra: &[&str], links: Option<&Links>) -> Option<Cluster> {
        let cluster_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let client_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let voters: Vec<String> = cluster_ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let real: SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
                let dial = links.map_or(real, |l| l.proxy(i as i32 + 1, real));
                format!("{}@{dial}", i + 1)
            })
            .collect();
        let voters = voters.join(",");
        let args: Vec<Vec<String>> = (0..n)
            .map(|i| {
                let mut a: Vec<String> = [
                    "--node-id",
                    &(i + 1).to_string(),
                    "--cluster-listen",
                    &format!("127.0.0.1:{}", cluster_ports[i]),
                    "--controller-quorum-voters",
                    &voters,
                    "--cpus",
                    "0",
                    "--pin",
                    "false",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                a.extend(extra.iter().map(|s| s.to_string()));
                a
            })
            .collect();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let own_cpus = extra.contains(&"--cpus");
        let args: Vec<Vec<String>> = args
            .into_iter()
            .enumerate()
            .map(|(i, mut a)| {
                let at = a.iter().position(|s| s == "--cpus").expect("set above");
                if own_cpus {
                    // The test's CPUs (shards) for every broker.
                    a.drain(at..at + 2);
                } else {
                    // One shard per broker, on the machine's CPUs in turn.
                    a[at + 1] = (i % cpus).to_string();
                }
                a
            })
            .collect();
        let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().expect("temp dir")).collect();
        let started: Vec<Broker> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    let (dir, args, port) = (dirs[i].path(), &args[i], client_ports[i]);
                    s.spawn(move || {
                        let a: Vec<&str> = args.iter().map(String::as_str).collect();
                        Broker::start_in(dir, &format!("127.0.0.1:{port}"), &a)
                    })
                })
                .collect();
            // Every handle is joined; the brokers that did start stop when dropped.
            handles
                .into_iter()
                .map(|h| h.join().ok())
                .collect::<Vec<Option<Broker>>>()
                .into_iter()
                .collect::<Option<Vec<Broker>>>()
        })?;
        Some(Cluster { brokers: started.into_iter().map(Some).collect(), client_ports, args, dirs })
    }

    pub fn len(&self) -> usize {
        self.brokers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.brokers.is_empty()
    }

    /// Every broker's client address, as a bootstrap string.
    pub fn bootstrap(&self) -> String {
        self.client_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// Node `node`'s client address.
    pub fn addr(&self, node: i32) -> SocketAddr {
        format!("127.0.0.1:{}", self.client_ports[node as usize - 1]).parse().expect("an address")
    }

    /// Node `node`'s `/metrics` page, if it is up.
    pub fn scrape(&self, node: i32) -> Option<String> {
        let admin = self.brokers[node as usize - 1].as_ref()?.admin_addr?;
        Some(crate::broker::scrape(admin))
    }

    pub fn is_up(&self, node: i32) -> bool {
        self.brokers[node as usize - 1].is_some()
    }

    /// SIGKILL of node `node`.
    pub fn kill9(&mut self, node: i32) {
        if let Some(mut b) = self.brokers[node as usize - 1].take() {
            b.kill9();
        }
    }

    /// SIGSTOP (`pause`) or SIGCONT (`!pause`) of node `node`: a process that stops
    /// answering, clock and all, and later goes on as if nothing happened.
    pub fn freeze(&self, node: i32, pause: bool) {
        let pid = self.brokers[node as usize - 1].as_ref().and_then(|b| b.pid()).expect("node is up");
        let sig = if pause { "-STOP" } else { "-CONT" };
        let ok = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    }

    /// Node `node`'s data directory.
    pub fn data_dir(&self, node: i32) -> &std::path::Path {
        self.dirs[node as usize - 1].path()
    }

    /// SIGTERM of node `node`, and its exit status.
    pub fn stop(&mut self, node: i32) -> Option<std::process::ExitStatus> {
        self.brokers[node as usize - 1].take().and_then(|mut b| b.stop())
    }

    /// Starts node `node` again on its port and data directory (the others must be up for it
    /// to become ready: it waits for the quorum).
    pub fn restart(&mut self, node: i32) {
        let i = node as usize - 1;
        let a: Vec<&str> = self.args[i].iter().map(String::as_str).collect();
        let b = restart(self.dirs[i].path(), &format!("127.0.0.1:{}", self.client_ports[i]), &a);
        self.brokers[i] = Some(b);
    }

    /// Creates `topic` with `partitions` partitions of `replicas` copies at the controller,
    /// and waits until every partition has a leader with all its replicas in sync.
    pub fn create_topic(&self, topic: &str, partitions: i32, replicas: i16) {
        self.create_topic_with(topic, partitions, replicas, &[]);
    }

    /// `create_topic` with topic configs.
    pub fn create_topic_with(&self, topic: &str, partitions: i32, replicas: i16, configs: &[(&str, &str)]) {
        let ok = wait_until(Duration::from_secs(30), || {
            let Some(controller) = self.controller() else { return false };
            let mut c = Client::connect(self.addr(controller));
            let r = c.create_topics(vec![crate::client::new_topic(topic, partitions, replicas, configs)], false);
            r.topics.first().is_some_and(|t| t.error_code == 0)
        });
        assert!(ok, "creating {topic} at the controller");
        assert!(self.settled(topic, partitions, Duration::from_secs(30)), "{topic} has its leaders");
    }

    /// The leader of a partition as a running broker's Metadata tells it (None: none yet).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let node = (1..=self.len() as i32).find(|n| self.is_up(*n))?;
        let mut c = Client::connect(self.addr(node));
        let md = c.metadata(Some(&[topic]), false);
        let t = md.topics.first()?;
        let p = t.partitions.iter().find(|p| p.partition_index == partition)?;
        (p.error_code == 0 && p.leader_id.0 >= 0).then_some(p.leader_id.0)
    }

    /// The broker coordinating `group` (FindCoordinator v3), as a running broker tells it.
    pub fn coordinator(&self, group: &str) -> Option<i32> {
        use ringbroker::protocol::messages::{ApiKey, FindCoordinatorRequest, FindCoordinatorResponse};
        let node = (1..=self.len() as i32).find(|n| self.is_up(*n))?;
        let mut c = Client::connect(self.addr(node));
        let mut req = FindCoordinatorRequest::default();
        req.key = crate::client::sb(group);
        let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &req);
        (r.error_code == 0 && r.node_id.0 >= 0).then_some(r.node_id.0)
    }

    /// The metadata quorum's leader (Metadata's controller_id), as a running broker tells it.
    pub fn controller(&self) -> Option<i32> {
        let node = (1..=self.len() as i32).find(|n| self.is_up(*n))?;
        let mut c = Client::connect(self.addr(node));
        Some(c.metadata(Some(&[]), false).controller_id.0)
    }

    /// Waits until every running broker reports the same leader for each partition of `topic`
    /// and every replica in its ISR; false after `limit`.
    pub fn settled(&self, topic: &str, partitions: i32, limit: Duration) -> bool {
        wait_until(limit, || {
            let mut leaders = Vec::new();
            for node in (1..=self.len() as i32).filter(|n| self.is_up(*n)) {
                let mut c = Client::connect(self.addr(node));
                let md = c.metadata(Some(&[topic]), false);
                let Some(t) = md.topics.first() else { return false };
                for p in &t.partitions {
                    if p.error_code != 0 || p.isr_nodes.len() != p.replica_nodes.len() {
                        return false;
                    }
                }
                let mut l: Vec<(i32, i32)> = t.partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
                l.sort_unstable();
                if l.len() != partitions as usize {
                    return false;
                }
                leaders.push(l);
            }
            leaders.windows(2).all(|w| w[0] == w[1])
        })
    }
}
