//! Three replicas of one partition in one process, over real loopback sockets (the harness
//! the quorum's tests use too): produces are
//! acknowledged only once committed, every replica ends with the same bytes, a stopped leader
//! is replaced, and a restarted one catches up from its own log and its peers.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use glommio::Task;

use super::*;
use crate::cluster::frame::Item;
use crate::cluster::transport::{self, Deliver};
use crate::log::LogConfig;
use crate::metrics::Probe;
use crate::protocol::batch;

pub(crate) const ALL: Acks = Acks::All { min_insync: 2 };

pub(crate) struct Node {
    pub(crate) id: u64,
    dir: PathBuf,
    addr: SocketAddr,
    slot: Rc<RefCell<Option<Rc<Group>>>>,
    /// The node cut off from its peers (0: none), shared by all nodes: both directions drop.
    cut: Rc<Cell<u64>>,
    /// The node whose clock stands still too (0: none): a SIGSTOPped process.
    frozen: Rc<Cell<u64>>,
    tasks: Vec<Task<()>>,
    transport: Option<Rc<Transport>>,
    lag: Duration,
    /// The log's config when it last ran: a restart keeps it, as the broker keeps a topic's.
    log_config: Option<LogConfig>,
}

fn config(id: u64, replica_lag: Duration) -> GroupConfig {
    GroupConfig {
        node_id: id,
        // What the group was created with, on every replica: a node added later replays the
        // changes after it from the log.
        voters: vec![1, 2, 3],
        // As a partition's group is configured (`shard::cluster`).
        replica: ReplicaConfig {
            election_tick: 10,
            max_election_tick: 20,
            heartbeat_tick: 1,
            skip_bcast_commit: true,
            ..Default::default()
        },
        cache_bytes: 4096,
        replica_lag,
    }
}

impl Node {
    pub(crate) async fn start(&mut self, peers: &HashMap<u64, SocketAddr>) {
        let cfg = self.log_config.unwrap_or_else(|| LogConfig::from_config(&crate::config::Config::default()));
        let log = Partition::open("t", 0, self.dir.clone(), cfg, Probe::detached()).await.unwrap();
        let (slot, cut, me) = (self.slot.clone(), self.cut.clone(), self.id);
        let deliver: Deliver = Rc::new(move |from, item| {
            let Item::Raft(group, m) = item else { return };
            if cut.get() == from || cut.get() == me {
                return;
            }
            let g = slot.borrow().clone();
            if let Some(g) = g.filter(|g| g.id() == &group) {
                g.step(m);
            }
        });
        let listener = glommio::net::TcpListener::bind(self.addr).unwrap();
        let transport = Transport::new(self.id, peers);
        let g = Group::open(
            GroupId::new("t", 0),
            log,
            &config(self.id, self.lag),
            transport.clone(),
            &crate::cluster::logging::logger(),
        )
        .await
        .unwrap();
        *self.slot.borrow_mut() = Some(g.clone());
        self.tasks.push(transport::listen(listener, deliver));
        let (frozen, me) = (self.frozen.clone(), self.id);
        self.tasks.push(glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(10)).await;
                if frozen.get() == me {
                    continue; // SIGSTOP: no clock either
                }
                g.tick();
            }
        }));
        self.transport = Some(transport);
    }

    /// As a crash of the process: the tasks stop, the files stay as written.
    pub(crate) async fn crash(&mut self) {
        self.tasks.clear();
        self.transport = None;
        let g = self.slot.borrow_mut().take();
        if let Some(g) = g {
            self.log_config = Some(g.log().config());
            g.halt().await;
        }
    }

    /// A clean stop: the state and the log are closed.
    pub(crate) async fn stop(&mut self) {
        self.tasks.clear();
        self.transport = None;
        let g = self.slot.borrow_mut().take();
        if let Some(g) = g {
            self.log_config = Some(g.log().config());
            g.stop().await.unwrap();
        }
    }

    pub(crate) fn group(&self) -> Option<Rc<Group>> {
        self.slot.borrow().clone()
    }
}

pub(crate) async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}

/// The serving leader of the highest term (a stopped old leader may still believe it leads).
pub(crate) fn leader(nodes: &[Node]) -> Option<usize> {
    (0..nodes.len())
        .filter(|&i| nodes[i].group().is_some_and(|g| g.serving()))
        .max_by_key(|&i| nodes[i].group().map(|g| g.term()))
}

/// Produces `n` batches at the serving leader; returns (base offset, payload) of each.
async fn produce(nodes: &[Node], from: usize, n: usize) -> Vec<(i64, Vec<u8>)> {
    let g = nodes[leader(nodes).expect("a leader")].group().unwrap();
    let mut waits = Vec::new();
    for i in from..from + n {
        let payload = format!("record-{i}").into_bytes();
        let rx = g.produce(&Bytes::from(batch::build(i as i64, &[&payload])), ALL).unwrap();
        waits.push((rx, payload));
    }
    let mut out = Vec::new();
    for (rx, payload) in waits {
        out.push((rx.await.unwrap().expect("acknowledged").base_offset, payload));
    }
    out
}

/// The committed log of a node from offset `from` as bytes, read the way a fetch reads it.
pub(crate) fn committed_bytes(g: &Group, from: i64) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let hwm = g.log().offsets().high_watermark;
    let mut out = Vec::new();
    let mut next = from;
    while next < hwm {
        let r = g.log().read(next, 1 << 20, true).unwrap();
        let region = r.records.expect("records below the watermark");
        let mut buf = vec![0; region.len as usize];
        region.file.read_exact_at(&mut buf, region.pos).unwrap();
        let mut at = 0;
        while let Some(Ok(size)) = batch::batch_size(&buf[at..]) {
            if at + size > buf.len() {
                break;
            }
            next = batch::read_header(&buf[at..]).unwrap().last_offset() + 1;
            out.extend_from_slice(&buf[at..at + size]);
            at += size;
        }
    }
    out
}

/// Waits until every node has the serving leader's high watermark, then checks that all hold
/// the same committed bytes (from the latest log start among them), each acknowledged record
/// still held at its offset and no record twice; returns those bytes.
async fn agreed(nodes: &[Node], acked: &[(i64, Vec<u8>)]) -> Vec<u8> {
    let hwm = |n: &Node| n.group().map(|g| g.log().offsets().high_watermark);
    let new = leader(nodes).expect("a leader");
    let top = hwm(&nodes[new]).unwrap();
    until("every replica at the leader's watermark", || nodes.iter().all(|n| hwm(n) == Some(top))).await;
    let from = nodes.iter().map(|n| n.group().unwrap().log().offsets().log_start).max().unwrap();
    let all = committed_bytes(&nodes[new].group().unwrap(), from);
    for n in nodes {
        assert_eq!(committed_bytes(&n.group().unwrap(), from), all, "node {} differs", n.id);
        assert_eq!(n.group().unwrap().log().offsets().log_end, top, "node {} kept a divergent tail", n.id);
    }
    for (offset, payload) in acked.iter().filter(|(o, _)| *o >= from) {
        assert_eq!(value_at(&all, *offset).as_ref(), Some(payload), "acknowledged record at {offset}");
    }
    let mut seen = std::collections::HashSet::new();
    for v in values(&all) {
        assert!(seen.insert(v.clone()), "{} stored twice", String::from_utf8_lossy(&v));
    }
    all
}

/// The record values of every data batch in `bytes`, in order.
fn values(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
        if !batch::read_header(&bytes[at..]).unwrap().is_control() {
            out.extend(batch::records(&bytes[at..at + size]).filter_map(|r| r.value.map(<[u8]>::to_vec)));
        }
        at += size;
    }
    out
}

fn value_at(bytes: &[u8], offset: i64) -> Option<Vec<u8>> {
    let mut at = 0;
    while let Some(Ok(size)) = batch::batch_size(&bytes[at..]) {
        let h = batch::read_header(&bytes[at..]).unwrap();
        if h.base_offset == offset {
            return batch::records(&bytes[at..at + size]).next().and_then(|r| r.value.map(<[u8]>::to_vec));
        }
        at += size;
    }
    None
}

/// `count` started nodes: 1 to 3 the group's first voters, any others outside its
/// configuration (to be added).
async fn cluster_of(base: &std::path::Path, lag: Duration, count: usize) -> (Vec<Node>, HashMap<u64, SocketAddr>) {
    let addrs: Vec<SocketAddr> =
        (0..count).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()).collect();
    let peers: HashMap<u64, SocketAddr> = (1..=count as u64).zip(addrs.iter().copied()).collect();
    let (cut, frozen) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let mut nodes: Vec<Node> = (0..count)
        .map(|i| Node {
            id: i as u64 + 1,
            dir: base.join(format!("node-{}", i + 1)).join("t-0"),
            addr: addrs[i],
            slot: Rc::default(),
            cut: cut.clone(),
            frozen: frozen.clone(),
            tasks: Vec::new(),
            log_config: None,
            transport: None,
            lag,
        })
        .collect();
    for n in &mut nodes {
        n.start(&peers).await;
    }
    (nodes, peers)
}

fn run(f: impl std::future::Future<Output = ()> + 'static) {
    glommio::LocalExecutorBuilder::default().io_memory(1 << 20).make().unwrap().run(f);
}

/// Runs `test` on `count` started nodes (see `cluster_of`) once one of them leads, then stops
/// every node still running; the nodes' data lives in a temporary directory.
pub(crate) fn with_cluster(
    count: usize,
    lag: Duration,
    test: impl AsyncFnOnce(&mut Vec<Node>, &HashMap<u64, SocketAddr>) + 'static,
) {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let (mut nodes, peers) = cluster_of(dir.path(), lag, count).await;
        until("a leader", || leader(&nodes).is_some()).await;
        test(&mut nodes, &peers).await;
        for n in &mut nodes {
            n.stop().await;
        }
        drop(dir);
    });
}

#[test]
fn three_replicas_commit_agree_and_survive_their_leader() {
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        let follower = (leader(nodes).unwrap() + 1) % 3;
        assert_eq!(
            nodes[follower].group().unwrap().produce(&Bytes::from(batch::build(0, &[b"x"])), ALL).err().map(|r| r.code),
            Some(ErrorCode::NotLeaderOrFollower)
        );
        // A batch no frame of the peer link could carry is refused, not proposed.
        let huge = vec![0u8; super::MAX_ENTRY_BYTES];
        assert_eq!(
            nodes[leader(nodes).unwrap()]
                .group()
                .unwrap()
                .produce(&Bytes::from(batch::build(0, &[&huge])), ALL)
                .err()
                .map(|r| r.code),
            Some(ErrorCode::MessageTooLarge)
        );
        let mut acked = produce(nodes, 0, 30).await;
        let hwm = |n: &Node| n.group().map(|g| g.log().offsets().high_watermark);
        let top = hwm(&nodes[leader(nodes).unwrap()]).unwrap();
        until("every replica at the leader's watermark", || nodes.iter().all(|n| hwm(n) == Some(top))).await;
        let first = committed_bytes(&nodes[0].group().unwrap(), 0);
        for n in &nodes[1..] {
            assert_eq!(committed_bytes(&n.group().unwrap(), 0), first, "node {} differs", n.id);
        }

        // KIP-320 checks at the leader and at a follower.
        let g = nodes[leader(nodes).unwrap()].group().unwrap();
        let epoch = g.term() as i32;
        assert_eq!(g.check_leader_epoch(-1), Ok(()));
        assert_eq!(g.check_leader_epoch(epoch), Ok(()));
        assert_eq!(g.check_leader_epoch(epoch - 1), Err(ErrorCode::FencedLeaderEpoch));
        assert_eq!(g.check_leader_epoch(epoch + 1), Err(ErrorCode::UnknownLeaderEpoch));
        assert_eq!(nodes[follower].group().unwrap().check_leader_epoch(-1), Err(ErrorCode::NotLeaderOrFollower));
        assert_eq!(g.end_offset_for_epoch(epoch, epoch), Ok((epoch, g.log().offsets().log_end)));
        // The leader dies; the other two elect one of themselves and go on.
        let old = leader(nodes).unwrap();
        let old_term = nodes[old].group().unwrap().term();
        let old_end = nodes[old].group().unwrap().log().offsets().log_end;
        nodes[old].crash().await;
        until("a new leader", || leader(nodes).is_some_and(|l| l != old)).await;
        let new = leader(nodes).unwrap();
        assert!(nodes[new].group().unwrap().term() > old_term);
        acked.extend(produce(nodes, 30, 20).await);

        // The new leader tells where the old epoch ended: what a consumer that read it checks.
        let g = nodes[new].group().unwrap();
        assert_eq!(g.end_offset_for_epoch(-1, old_term as i32), Ok((old_term as i32, old_end)));
        // The old leader comes back from its files and catches up.
        nodes[old].start(peers).await;
        agreed(nodes, &acked).await;
        assert_eq!(acked.len(), 50);
    });
}

#[test]
fn a_leader_cut_off_from_its_peers_acknowledges_nothing_and_gives_its_tail_up() {
    with_cluster(3, Duration::from_secs(10), async |nodes, _| {
        let mut acked = produce(nodes, 0, 10).await;
        let old = leader(nodes).unwrap();
        let g = nodes[old].group().unwrap();
        nodes[0].cut.set(nodes[old].id);
        // A fetch parked at the old leader past its watermark, which cannot move now.
        let (parked, mut woken) = futures_channel::oneshot::channel();
        g.log().watch(g.log().offsets().high_watermark, parked);
        // Clients still reach the old leader: it takes the batches but can never commit them.
        let minority: Vec<_> = (100..105)
            .map(|i| {
                let payload = format!("minority-{i}").into_bytes();
                (g.produce(&Bytes::from(batch::build(i, &[&payload])), ALL).expect("still leading"), payload)
            })
            .collect();
        until("a leader on the majority side", || leader(nodes).is_some_and(|l| l != old)).await;
        acked.extend(produce(nodes, 10, 10).await);
        let mut refused = 0;
        for (rx, _) in minority {
            assert_eq!(rx.await.unwrap().err(), Some(ErrorCode::NotLeaderOrFollower), "never acknowledged");
            refused += 1;
        }
        assert_eq!(refused, 5);
        assert!(!g.serving(), "check-quorum made the isolated leader step down");
        assert_eq!(woken.try_recv(), Ok(Some(())), "stepping down wakes the fetches parked there");
        assert_eq!(
            g.produce(&Bytes::from(batch::build(0, &[b"late"])), ALL).err().map(|r| r.code),
            Some(ErrorCode::NotLeaderOrFollower)
        );

        // Healed: the old leader takes the new leader's log over its uncommitted tail.
        nodes[0].cut.set(0);
        acked.extend(produce(nodes, 20, 1).await);
        let all = agreed(nodes, &acked).await;
        let text = String::from_utf8_lossy(&all);
        assert!(!text.contains("minority-"), "an unacknowledged minority write survived");
    });
}

#[test]
fn acks_one_answers_after_the_leader_write_and_min_insync_counts_live_copies() {
    // A lag bound of 1 s: shorter, a busy test machine leaves the live follower unheard for
    // that long now and then, and it too counts out of sync.
    with_cluster(3, Duration::from_secs(1), async |nodes, _| {
        let g = nodes[leader(nodes).unwrap()].group().unwrap();
        let send = |acks, v: &[u8]| g.produce(&Bytes::from(batch::build(0, &[v])), acks);
        let three = Acks::All { min_insync: 3 };
        // On a loaded machine a follower can go unheard for the lag bound before the start.
        until("all three in sync", || g.in_sync() == 3).await;
        let a = send(three, b"all three").unwrap().await.unwrap().unwrap();
        assert_eq!(g.log().offsets().high_watermark, a.base_offset + 1, "committed when answered");
        // One follower gone for longer than the lag bound: three copies cannot be had.
        let gone = (leader(nodes).unwrap() + 1) % 3;
        nodes[gone].crash().await;
        glommio::timer::sleep(Duration::from_millis(1_300)).await;
        assert_eq!(g.in_sync(), 2);
        assert_eq!(send(three, b"refused").err().map(|r| r.code), Some(ErrorCode::NotEnoughReplicas));
        let two = send(ALL, b"two").unwrap().await.unwrap().unwrap();
        let one = send(Acks::Leader, b"one").unwrap().await.unwrap().unwrap();
        assert_eq!(one.base_offset, two.base_offset + 1);
        // The last follower gone too: acks=1 is answered from the leader's own write, which
        // nothing commits.
        let last = (leader(nodes).unwrap() + 2) % 3;
        nodes[last].stop().await;
        let end = g.log().offsets().log_end;
        let alone = send(Acks::Leader, b"alone").unwrap().await.unwrap().unwrap();
        assert_eq!(alone.base_offset, end);
        glommio::timer::sleep(Duration::from_millis(100)).await;
        assert!(g.log().offsets().high_watermark <= alone.base_offset, "written, never committed");
    });
}

#[test]
fn a_torn_leader_write_takes_that_replica_offline_and_loses_nothing_acknowledged() {
    use crate::storage::faults::{self, Fault, Op};
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        let mut acked = produce(nodes, 0, 10).await;
        let old = leader(nodes).unwrap();
        let g = nodes[old].group().unwrap();
        // The leader's next log write stores 30 bytes and fails, as a full disk or a crash
        // mid-write leaves it.
        faults::inject(&nodes[old].dir, Op::Write, Fault::Torn { keep: 30 }, Some(1));
        let doomed: Vec<_> = (100..103)
            .map(|i| g.produce(&Bytes::from(batch::build(i, &[format!("doomed-{i}").as_bytes()])), ALL).unwrap())
            .collect();
        for rx in doomed {
            assert_eq!(rx.await.unwrap().err(), Some(ErrorCode::NotLeaderOrFollower), "not acknowledged");
        }
        assert!(g.failed().is_some(), "the replica went offline");
        until("a leader among the others", || leader(nodes).is_some_and(|l| l != old)).await;
        acked.extend(produce(nodes, 10, 10).await);

        // Restarted with the fault gone: recovery cuts the torn bytes, raft fills the rest.
        nodes[old].crash().await;
        faults::clear(&nodes[old].dir);
        nodes[old].start(peers).await;
        acked.extend(produce(nodes, 20, 1).await);
        agreed(nodes, &acked).await;
    });
}

#[test]
fn a_torn_follower_write_past_the_page_cache_takes_that_replica_offline_and_loses_nothing() {
    use crate::storage::faults::{self, Fault, Op};
    use crate::storage::AppendMode;
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        let mut acked = produce(nodes, 0, 10).await;
        let l = leader(nodes).unwrap();
        let f = (l + 1) % 3;
        let follower = nodes[f].group().unwrap();
        until("the follower has the batches", || follower.log().offsets().log_end > acked[9].0).await;
        assert_eq!(follower.log().append_mode(), Some(AppendMode::Direct), "a follower appends past the cache");
        assert_eq!(nodes[l].group().unwrap().log().append_mode(), Some(AppendMode::CachedDurable));
        // The follower's next write stores 30 bytes of its block-aligned rewrite and fails.
        faults::inject(&nodes[f].dir, Op::Write, Fault::Torn { keep: 30 }, Some(1));
        // The leader and the other follower are a majority: every batch is acknowledged.
        acked.extend(produce(nodes, 10, 10).await);
        until("the torn follower went offline", || follower.failed().is_some()).await;
        acked.extend(produce(nodes, 20, 5).await);

        // Restarted with the fault gone: recovery cuts the torn bytes, raft sends the rest.
        nodes[f].crash().await;
        faults::clear(&nodes[f].dir);
        nodes[f].start(peers).await;
        acked.extend(produce(nodes, 25, 1).await);
        agreed(nodes, &acked).await;
    });
}

#[test]
fn a_stopped_and_continued_leader_steps_down_and_rejoins_as_follower() {
    with_cluster(3, Duration::from_secs(10), async |nodes, _| {
        let mut acked = produce(nodes, 0, 10).await;
        let old = leader(nodes).unwrap();
        let (id, g) = (nodes[old].id, nodes[old].group().unwrap());
        // SIGSTOP for much longer than the election timeout: no clock, no messages.
        nodes[0].cut.set(id);
        nodes[0].frozen.set(id);
        until("a leader among the others", || leader(nodes).is_some_and(|l| l != old)).await;
        acked.extend(produce(nodes, 10, 10).await);
        assert!(g.serving(), "frozen, it still believes it leads");
        // SIGCONT: the first word from the new term makes it a follower.
        nodes[0].cut.set(0);
        nodes[0].frozen.set(0);
        until("the old leader stepped down", || !g.serving()).await;
        assert_eq!(
            g.produce(&Bytes::from(batch::build(0, &[b"late"])), ALL).err().map(|r| r.code),
            Some(ErrorCode::NotLeaderOrFollower)
        );
        acked.extend(produce(nodes, 20, 1).await);
        agreed(nodes, &acked).await;
    });
}

#[test]
fn leadership_is_handed_to_the_voter_asked_for() {
    with_cluster(3, Duration::from_secs(10), async |nodes, _| {
        let mut acked = produce(nodes, 0, 5).await;
        let old = leader(nodes).unwrap();
        let to = (old + 1) % 3;
        // Raft drops a transfer the target does not win within an election timeout (a slow
        // machine can miss it), so the current leader is asked again until it has happened.
        let deadline = Instant::now() + Duration::from_secs(20);
        while leader(nodes) != Some(to) {
            assert!(Instant::now() < deadline, "timed out waiting for the chosen voter to lead");
            if let Some(l) = leader(nodes) {
                nodes[l].group().unwrap().transfer_leader(nodes[to].id);
            }
            for _ in 0..100 {
                if leader(nodes) == Some(to) {
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
        assert!(!nodes[old].group().unwrap().serving());
        acked.extend(produce(nodes, 5, 5).await);
        agreed(nodes, &acked).await;
        // The epoch of each batch, as ListOffsets answers it: the new leader's only for
        // what it wrote.
        let g = nodes[to].group().unwrap();
        let new_term = i32::try_from(g.term()).unwrap();
        assert!(g.epoch_at(acked[0].0) < new_term, "written under the old leader");
        assert_eq!(g.epoch_at(acked[9].0), new_term);
    });
}

#[test]
fn a_learner_catches_up_and_a_joint_change_swaps_it_in_for_a_voter() {
    use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfChangeV2};
    let change = |changes: &[(ConfChangeType, u64)]| {
        let mut cc = ConfChangeV2::default();
        for &(kind, node_id) in changes {
            let mut one = ConfChangeSingle { node_id, ..Default::default() };
            one.set_change_type(kind);
            cc.mut_changes().push(one);
        }
        cc
    };
    with_cluster(4, Duration::from_secs(10), async move |nodes, _| {
        let mut acked = produce(nodes, 0, 20).await;
        let l = leader(nodes).unwrap();
        nodes[l].group().unwrap().change_membership(change(&[(ConfChangeType::AddLearnerNode, 4)])).unwrap();
        let hwm = |n: &Node| n.group().map(|g| g.log().offsets().high_watermark);
        until("the learner caught up", || {
            nodes[3].group().unwrap().learners() == [4] && hwm(&nodes[3]) == hwm(&nodes[l])
        })
        .await;
        assert_eq!(nodes[3].group().unwrap().voters(), [1, 2, 3], "a learner does not vote");
        // A follower leaves and the learner becomes a voter in one joint change.
        let out = (0..3).find(|&i| i != l).unwrap();
        let out_id = nodes[out].id;
        nodes[l]
            .group()
            .unwrap()
            .change_membership(change(&[(ConfChangeType::AddNode, 4), (ConfChangeType::RemoveNode, out_id)]))
            .unwrap();
        let want: Vec<u64> = (1..=4).filter(|&id| id != out_id).collect();
        until("the new voters everywhere", || {
            nodes.iter().filter(|n| n.id != out_id).all(|n| n.group().unwrap().voters() == want)
        })
        .await;
        // The removed node is gone for good: the other three commit without it.
        nodes[out].stop().await;
        acked.extend(produce(nodes, 20, 10).await);
        let rest: Vec<Node> = nodes.drain(..).filter(|n| n.id != out_id).collect();
        agreed(&rest, &acked).await;
        for mut n in rest {
            n.stop().await;
        }
    });
}

/// Gives `g`'s log 2 KiB segments and the retention `set` makes.
pub(crate) fn small_segments(g: &Group, set: impl FnOnce(&mut LogConfig)) {
    let mut c = g.log().config();
    c.segment_bytes = 2048;
    set(&mut c);
    g.log().set_config(c);
}

#[test]
fn a_replica_that_missed_what_retention_deleted_is_sent_a_snapshot_and_catches_up() {
    // A lag bound of 1 s (see `acks_one_answers_after_the_leader_write_and_min_insync_counts_live_copies`).
    with_cluster(3, Duration::from_secs(1), async |nodes, peers| {
        // Small segments and retention by size: everything but the active segment may go
        // (not by time, which would take the active one too).
        let small = |g: &Group| {
            small_segments(g, |c| {
                c.retention_bytes = 0;
                c.retention_ms = -1;
            })
        };
        for n in nodes.iter() {
            small(&n.group().unwrap());
        }
        let mut acked = produce(nodes, 0, 10).await;
        let l = leader(nodes).unwrap();
        let away = (l + 1) % 3;
        let away_end = nodes[away].group().unwrap().log().offsets().log_end;
        nodes[away].crash().await;
        acked.extend(produce(nodes, 10, 200).await);
        let g = nodes[l].group().unwrap();
        // Once the crashed replica counts as away (silent beyond the lag bound), retention
        // no longer waits for it (a pass finding a write under way waits for the next).
        glommio::timer::sleep(Duration::from_millis(1_300)).await;
        until("the leader's retention deleting segments", || g.apply_retention(crate::sys::unix_now_ms()) > 0).await;
        let start = g.log().offsets().log_start;
        assert!(start > away_end, "the log start {start} is past what the crashed replica holds ({away_end})");
        // Retention on the live follower moves its start too, never past what it committed.
        let other = 3 - l - away;
        nodes[other].group().unwrap().apply_retention(crate::sys::unix_now_ms());

        nodes[away].start(peers).await;
        small(&nodes[away].group().unwrap());
        acked.extend(produce(nodes, 210, 5).await);
        agreed(nodes, &acked).await;
        let back = nodes[away].group().unwrap();
        assert_eq!(back.log().offsets().log_start, start, "the snapshot started its log at the leader's start");
        // The installed start survives a restart, and the replica goes on following.
        nodes[away].stop().await;
        nodes[away].start(peers).await;
        acked.extend(produce(nodes, 215, 5).await);
        agreed(nodes, &acked).await;
        assert_eq!(nodes[away].group().unwrap().log().offsets().log_start, start);
    });
}

#[test]
fn an_idle_replicated_log_whose_records_have_all_expired_is_emptied_on_every_replica() {
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        // The records' timestamps are near 1970: all past an hour's retention.
        let small = |g: &Group| small_segments(g, |c| c.retention_ms = 3_600_000);
        for n in nodes.iter() {
            small(&n.group().unwrap());
        }
        let mut acked = produce(nodes, 0, 60).await;
        agreed(nodes, &acked).await;
        let end = nodes[leader(nodes).unwrap()].group().unwrap().log().offsets().log_end;
        // Each replica rolls its active segment, then deletes it with the rest.
        for n in nodes.iter() {
            let g = n.group().unwrap();
            until("the replica's records all deleted", || {
                g.apply_retention(crate::sys::unix_now_ms());
                g.log().offsets().log_start == end
            })
            .await;
            assert_eq!(g.log().segment_count(), 1, "node {}", n.id);
            assert!(g.log().read(end, 1 << 20, true).unwrap().records.is_none());
        }
        // The log goes on at its end on every replica, across a restart of one.
        acked.extend(produce(nodes, 60, 5).await);
        agreed(nodes, &acked).await;
        let follower = (leader(nodes).unwrap() + 1) % 3;
        nodes[follower].stop().await;
        nodes[follower].start(peers).await;
        acked.extend(produce(nodes, 65, 5).await);
        agreed(nodes, &acked).await;
        assert_eq!(nodes[follower].group().unwrap().log().offsets().log_start, end);
    });
}

#[test]
fn delete_records_moves_every_replicas_log_start_through_the_log() {
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        // The records' timestamps are near 1970: no time retention, only DeleteRecords.
        let small = |g: &Group| small_segments(g, |c| c.retention_ms = -1);
        for n in nodes.iter() {
            small(&n.group().unwrap());
        }
        let mut acked = produce(nodes, 0, 60).await;
        let l = leader(nodes).unwrap();
        let g = nodes[l].group().unwrap();
        let hwm = g.log().offsets().high_watermark;
        assert_eq!(g.delete_records(hwm + 1).err(), Some(ErrorCode::OffsetOutOfRange), "past the high watermark");
        let target = acked[40].0;
        let answer = g.delete_records(target).unwrap().await.unwrap().expect("committed");
        assert_eq!(answer.log_start_offset, target, "the low watermark answered");
        assert_eq!(g.log().offsets().log_start, target);
        assert_eq!(g.log().read(target - 1, 1 << 20, true).err(), Some(ErrorCode::OffsetOutOfRange));
        // Every follower applies the entry: its start moves too, durably.
        until("every replica's start moved", || {
            nodes.iter().all(|n| n.group().is_some_and(|g| g.log().offsets().log_start == target))
        })
        .await;
        let again = g.delete_records(target - 5).unwrap().await.unwrap().unwrap();
        assert_eq!(again.log_start_offset, target, "an earlier start changes nothing");
        let follower = (l + 1) % 3;
        nodes[follower].stop().await;
        nodes[follower].start(peers).await;
        small(&nodes[follower].group().unwrap());
        assert_eq!(nodes[follower].group().unwrap().log().offsets().log_start, target, "kept over a restart");
        // The segments wholly below the start go at the next retention pass, on every replica.
        acked.extend(produce(nodes, 60, 5).await);
        agreed(nodes, &acked).await;
        for n in nodes.iter() {
            let g = n.group().unwrap();
            until("a retention pass with no write under way", || g.apply_retention(crate::sys::unix_now_ms()) > 0)
                .await;
            let first = crate::storage::list(g.log().dir())
                .unwrap()
                .iter()
                .filter_map(|p| p.file_name()?.to_str()?.strip_suffix(".log")?.parse::<i64>().ok())
                .min()
                .unwrap();
            assert!(first > 0 && first <= target, "node {}: first segment at {first}, start {target}", n.id);
            assert_eq!(g.log().offsets().log_start, target);
        }
        // A new leader answers the same start.
        nodes[l].stop().await;
        until("another leader", || leader(nodes).is_some_and(|i| i != l)).await;
        let new = nodes[leader(nodes).unwrap()].group().unwrap();
        assert_eq!(new.log().offsets().log_start, target);
        nodes[l].start(peers).await;
        acked.extend(produce(nodes, 65, 5).await);
        agreed(nodes, &acked).await;
    });
}

#[test]
fn a_replica_that_lost_its_disk_is_sent_the_log_again() {
    with_cluster(3, Duration::from_secs(10), async |nodes, peers| {
        let mut acked = produce(nodes, 0, 20).await;
        let l = leader(nodes).unwrap();
        let lost = (l + 1) % 3;
        agreed(nodes, &acked).await;
        nodes[lost].crash().await;
        std::fs::remove_dir_all(&nodes[lost].dir).unwrap();
        nodes[lost].start(peers).await;
        acked.extend(produce(nodes, 20, 5).await);
        agreed(nodes, &acked).await;
    });
}

/// Produces `n` batches of one `size`-byte record at the serving leader, acknowledged.
async fn produce_sized(nodes: &[Node], n: usize, size: usize) -> Vec<(i64, Vec<u8>)> {
    let g = nodes[leader(nodes).expect("a leader")].group().unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let payload = vec![b'a' + (i % 26) as u8; size];
        let rx = g.produce(&Bytes::from(batch::build(i as i64, &[&payload])), ALL).unwrap();
        out.push((rx.await.unwrap().expect("acknowledged").base_offset, payload));
    }
    out
}

#[test]
fn a_throttle_holds_a_learner_to_its_rate_and_its_window_opens_again_after_a_leadership_change() {
    use crate::cluster::throttle::{Throttle, Throttled};
    use crate::log::config::ThrottledReplicas;
    use raft::prelude::{ConfChangeSingle, ConfChangeType, ConfChangeV2};
    with_cluster(4, Duration::from_secs(10), async move |nodes, _| {
        let l = leader(nodes).unwrap();
        let lid = nodes[l].id;
        let mut acked = produce_sized(nodes, 48, 64 << 10).await; // 3 MiB
        let rates = Rc::new(Throttle::default());
        rates.set_rates(Some(512 << 10), &[], Instant::now());
        let leaders = ThrottledReplicas::All;
        let throttled = Throttled::new(0, lid as i32, &leaders, ThrottledReplicas::None);
        let g = nodes[l].group().unwrap();
        g.set_throttle(Some((rates.clone(), throttled.clone())));
        let mut cc = ConfChangeV2::default();
        let mut one = ConfChangeSingle { node_id: 4, ..Default::default() };
        one.set_change_type(ConfChangeType::AddLearnerNode);
        cc.mut_changes().push(one);
        let begun = Instant::now();
        g.change_membership(cc).unwrap();
        let end = |n: &Node| n.group().map(|g| g.log().offsets().log_end);
        until("the learner caught up", || end(&nodes[3]) == end(&nodes[l])).await;
        let took = begun.elapsed();
        // 3 MiB at 512 KiB/s in appends of up to 1 MiB, each sent once the one before is paid
        // for: the last leaves some 3 s in (unthrottled: milliseconds).
        assert!(took >= Duration::from_secs(2), "3 MiB at 512 KiB/s took {took:?}");
        assert!(g.in_sync() == 3, "the voters in sync were never held back");

        // A rate that closes the learner's window at once, then the leadership leaves and
        // comes back: the window must not stay closed once the throttle is lifted.
        rates.set_rates(Some(1), &[], Instant::now());
        acked.extend(produce_sized(nodes, 8, 4096).await);
        let other = (0..3).find(|&i| i != l).unwrap();
        g.transfer_leader(nodes[other].id);
        until("the other voter leads", || leader(nodes) == Some(other)).await;
        // Lifted while it follows: leading again, it narrows nothing, and what it narrowed
        // before must be undone (raft-rs keeps a window across leaderships).
        g.set_throttle(None);
        nodes[other].group().unwrap().transfer_leader(lid);
        until("the first leader leads again", || leader(nodes) == Some(l)).await;
        acked.extend(produce_sized(nodes, 8, 4096).await);
        until("the learner caught up after the throttle was lifted", || end(&nodes[3]) == end(&nodes[l])).await;
        let hwm = |n: &Node| n.group().map(|g| g.log().offsets().high_watermark);
        until("the learner knows it committed", || hwm(&nodes[3]) == hwm(&nodes[l])).await;
        assert_eq!(committed_bytes(&nodes[3].group().unwrap(), 0), committed_bytes(&g, 0));
        assert_eq!(acked.len(), 64);
    });
}
