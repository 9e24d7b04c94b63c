//! Raft messages between brokers over TCP (the `cluster_listen` listener), one frame per peer
//! per loop turn (`frame`). Sending never blocks a replica: `send` queues the messages and
//! wakes the peer's sender task, which takes everything queued, connects if it must and writes
//! one frame. A peer that is down or slow loses messages, which raft is built for: it resends
//! appends and heartbeats on its own schedule. After a failed connect the sender waits
//! `RECONNECT_BACKOFF` before trying again, dropping what is queued meanwhile; a peer that
//! takes no bytes for `WRITE_TIMEOUT` is disconnected; at most `MAX_QUEUED` messages wait
//! for one peer.
//!
//! The receiving side reads frames from every connection and hands each item to `deliver`,
//! which routes a raft message to its group, a call to the controller and a reply to
//! `Transport::complete`. Tasks are held, not detached: dropping the `Transport` (or the
//! listener's task) stops them, which is how a test stops a node.
//!
//! A call (`Transport::call`) is a request to a peer's controller with a deadline; its reply
//! comes back over the peer's own connection to this broker. A lost call or reply is the
//! caller's timeout, as a lost raft message is raft's.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use futures_channel::oneshot;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::{TcpListener, TcpStream};
use glommio::Task;
use raft::prelude::Message;

use super::frame::{self, GroupId, Item};

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);
/// A peer that takes no bytes for this long (stopped, or a black-holed link) is dropped and
/// reconnected: raft resends what matters, and stale frames would only arrive late.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Messages queued for one peer at most while its sender is busy; beyond it new ones are
/// dropped (counted), so a stuck peer cannot make this broker's memory grow.
const MAX_QUEUED: usize = 16_384;

/// Where a received item goes: (sender node, item).
pub type Deliver = Rc<dyn Fn(u64, Item)>;

/// Why a call got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("node {0} is not a member of this cluster")]
    UnknownPeer(u64),
    #[error("no reply from node {0} in time")]
    TimedOut(u64),
}

struct Peer {
    queue: RefCell<Vec<Item>>,
    wake: LocalSender<()>,
    _task: Task<()>,
}

pub struct Transport {
    node_id: u64,
    peers: HashMap<u64, Peer>,
    dropped: Rc<Cell<u64>>,
    /// Calls waiting for their reply, by call id.
    calls: RefCell<HashMap<u64, oneshot::Sender<Bytes>>>,
    next_call: Cell<u64>,
}

impl Transport {
    /// A transport from `node_id` to each of `peers` (node id → cluster address), each with
    /// its sender task on this shard.
    pub fn new(node_id: u64, peers: &HashMap<u64, SocketAddr>) -> Rc<Transport> {
        let dropped = Rc::new(Cell::new(0));
        let mut map = HashMap::new();
        for (&id, &addr) in peers.iter().filter(|(&id, _)| id != node_id) {
            let (tx, rx) = local_channel::new_bounded(1);
            map.insert(id, (tx, rx, addr));
        }
        Rc::new_cyclic(|me: &std::rc::Weak<Transport>| {
            let peers = map
                .into_iter()
                .map(|(id, (wake, rx, addr))| {
                    let me = me.clone();
                    let dropped = dropped.clone();
                    let task = glommio::spawn_local(send_loop(me, node_id, id, addr, rx, dropped));
                    (id, Peer { queue: RefCell::new(Vec::new()), wake, _task: task })
                })
                .collect();
            // Call ids start where no earlier run of this broker's are likely to be: a reply
            // to a call made before a restart must not complete a new one.
            let first_call = (crate::sys::unix_now_ms() as u64) << 20;
            Transport { node_id, peers, dropped, calls: RefCell::default(), next_call: Cell::new(first_call) }
        })
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// Messages lost to peers that were down or unknown, since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Queues `msgs` of `group` for their destinations (each message's `to`).
    pub fn send(&self, group: &GroupId, msgs: Vec<Message>) {
        for m in msgs {
            let to = m.to;
            self.queue(to, Item::Raft(group.clone(), m));
        }
    }

    /// Queues one item for `to`; false if it was dropped.
    fn queue(&self, to: u64, item: Item) -> bool {
        let Some(p) = self.peers.get(&to) else {
            tracing::debug!(to, "cluster message for an unknown node dropped");
            self.dropped.set(self.dropped.get() + 1);
            return false;
        };
        let mut q = p.queue.borrow_mut();
        if q.len() >= MAX_QUEUED {
            self.dropped.set(self.dropped.get() + 1);
            return false;
        }
        q.push(item);
        drop(q);
        let _ = p.wake.try_send(()); // full: a wake-up is already pending
        true
    }

    /// Sends `body` to `to`'s controller and waits at most `wait` for its reply.
    pub async fn call(&self, to: u64, body: Bytes, wait: Duration) -> Result<Bytes, CallError> {
        if !self.peers.contains_key(&to) {
            return Err(CallError::UnknownPeer(to));
        }
        let id = self.next_call.get();
        self.next_call.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.calls.borrow_mut().insert(id, tx);
        self.queue(to, Item::Call(id, body));
        let reply = futures_lite::future::or(async { rx.await.ok() }, async {
            glommio::timer::sleep(wait).await;
            None
        })
        .await;
        self.calls.borrow_mut().remove(&id);
        reply.ok_or(CallError::TimedOut(to))
    }

    /// Answers call `id` of node `to`.
    pub fn reply(&self, to: u64, id: u64, body: Bytes) {
        self.queue(to, Item::Reply(id, body));
    }

    /// Hands a reply that arrived to the call waiting for it (none: it timed out).
    pub fn complete(&self, id: u64, body: Bytes) {
        if let Some(tx) = self.calls.borrow_mut().remove(&id) {
            let _ = tx.send(body);
        }
    }

    fn take(&self, peer: u64) -> Vec<Item> {
        self.peers.get(&peer).map(|p| std::mem::take(&mut *p.queue.borrow_mut())).unwrap_or_default()
    }
}

async fn send_loop(
    transport: std::rc::Weak<Transport>,
    from: u64,
    peer: u64,
    addr: SocketAddr,
    wake: LocalReceiver<()>,
    dropped: Rc<Cell<u64>>,
) {
    let mut conn: Option<TcpStream> = None;
    let mut retry_at = Instant::now();
    while wake.recv().await.is_some() {
        let Some(t) = transport.upgrade() else { return };
        let msgs = t.take(peer);
        drop(t);
        if msgs.is_empty() {
            continue;
        }
        if conn.is_none() {
            if Instant::now() < retry_at {
                dropped.set(dropped.get() + msgs.len() as u64);
                continue;
            }
            match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    // This side only reads: without probes, a connection whose peer's host
                    // went away would keep its reader, and its buffer, for good.
                    if let Err(e) = crate::sys::set_keepalive(
                        std::os::fd::AsRawFd::as_raw_fd(&s),
                        Duration::from_secs(10),
                        Duration::from_secs(5),
                        3,
                    ) {
                        tracing::debug!("cannot set keepalive on a peer connection: {e}");
                    }
                    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
                    tracing::info!(peer, %addr, "connected to peer broker");
                    conn = Some(s);
                }
                Err(e) => {
                    tracing::debug!(peer, %addr, "cannot reach peer broker: {e}");
                    retry_at = Instant::now() + RECONNECT_BACKOFF;
                    dropped.set(dropped.get() + msgs.len() as u64);
                    continue;
                }
            }
        }
        let (frames, too_large) = frame::encode_frames(from, &msgs);
        if too_large > 0 {
            tracing::warn!(peer, too_large, "dropped messages larger than a frame may be");
            dropped.set(dropped.get() + too_large as u64);
        }
        let s = conn.as_mut().expect("connected above");
        for bytes in frames {
            if let Err(e) = s.write_all(&bytes).await {
                tracing::info!(peer, %addr, "lost the connection to peer broker: {e}");
                conn = None;
                dropped.set(dropped.get() + msgs.len() as u64);
                break;
            }
        }
    }
}

/// Accepts peers' connections on `listener` and delivers their messages until dropped.
pub fn listen(listener: TcpListener, deliver: Deliver) -> Task<()> {
    glommio::spawn_local(async move {
        let mut readers = Vec::new();
        loop {
            match listener.accept().await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    readers.retain(|(_, done): &(Task<()>, Rc<Cell<bool>>)| !done.get());
                    let done = Rc::new(Cell::new(false));
                    let (d, deliver) = (done.clone(), deliver.clone());
                    let task = glommio::spawn_local(async move {
                        read_loop(s, deliver).await;
                        d.set(true);
                    });
                    readers.push((task, done));
                }
                Err(e) => {
                    tracing::warn!("cluster listener accept failed: {e}");
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// Bytes asked of the socket per read at least: a follower's frames (its answers to
/// appends) and a leader's at a moderate rate (a batch or two) fit whole, so one read takes
/// each, where reading a frame's length and then its body took two.
const READ_MIN: usize = 16 * 1024;
/// Bytes asked per read at most: a large frame (a snapshot) is read in parts into room made
/// for it whole.
const READ_MAX: usize = 1 << 20;

async fn read_loop(mut s: TcpStream, deliver: Deliver) {
    let peer = s.peer_addr().ok();
    // `buf[..filled]` is what was read and not yet taken as frames; the rest is room already
    // zero-filled for the next read. A read must be handed initialized bytes, and a follower's
    // answers are a few dozen bytes: filling READ_MIN bytes afresh before each read cost more
    // than the read (about 1% of a broker's CPU at max produce), so the room is kept across reads
    // and only room newly made is filled.
    let mut buf = BytesMut::new();
    let mut filled = 0;
    loop {
        // Every whole frame read so far, then what the next one still needs.
        let needed = loop {
            let Some(prefix) = buf[..filled].get(..4) else { break 4 - filled };
            let len = match frame::body_len(prefix.try_into().expect("four bytes")) {
                Ok(len) => len,
                Err(e) => {
                    tracing::warn!(?peer, "closing a cluster connection: {e}");
                    return;
                }
            };
            if filled < 4 + len {
                break 4 + len - filled;
            }
            // The frame's own bytes: the entries decoded from it keep slices of them.
            let mut body = buf.split_to(4 + len);
            filled -= 4 + len;
            body.advance(4);
            match frame::decode(&body.freeze()) {
                Ok((from, items)) => {
                    for item in items {
                        deliver(from, item);
                    }
                }
                Err(e) => {
                    tracing::warn!(?peer, "closing a cluster connection: {e}");
                    return;
                }
            }
        };
        let want = needed.clamp(READ_MIN, READ_MAX);
        if buf.len() - filled < want {
            // New room: only what was read moves to it, and only the new part is filled.
            buf.truncate(filled);
            buf.reserve(needed.max(want)); // a large frame's room is made whole
            buf.resize(filled + want, 0);
        }
        let room = (buf.len() - filled).min(READ_MAX);
        match s.read(&mut buf[filled..filled + room]).await {
            // The peer closed or reset: it reconnects when it has something to say.
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::MessageType;

    fn heartbeat(to: u64, term: u64) -> Message {
        let mut m = Message { to, from: 1, term, ..Default::default() };
        m.set_msg_type(MessageType::MsgHeartbeat);
        m
    }

    #[test]
    fn messages_reach_a_listening_peer_and_are_dropped_for_a_dead_one() {
        glommio::LocalExecutorBuilder::default().make().unwrap().run(async {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let live = listener.local_addr().unwrap();
            let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
            let got: Rc<RefCell<Vec<(u64, GroupId, u64)>>> = Rc::default();
            let g = got.clone();
            let _listening = listen(
                listener,
                Rc::new(move |from, item| {
                    if let Item::Raft(group, m) = item {
                        g.borrow_mut().push((from, group, m.term))
                    }
                }),
            );
            let t = Transport::new(1, &HashMap::from([(1, live), (2, live), (3, dead)]));
            let group = GroupId::new("t", 7);
            for term in 1..=3 {
                t.send(&group, vec![heartbeat(2, term), heartbeat(3, term), heartbeat(9, term)]);
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while got.borrow().len() < 3 {
                assert!(Instant::now() < deadline, "messages never arrived: {:?}", got.borrow());
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(*got.borrow(), (1..=3).map(|term| (1, group.clone(), term)).collect::<Vec<_>>());
            // Node 3 refuses connections and node 9 is unknown: all six are counted lost.
            assert_eq!(t.dropped(), 6);
        });
    }

    /// Frames arrive in whatever pieces TCP makes of them: several in one read, one split
    /// over many, one larger than a read asks for; each item is delivered once, in order, with
    /// its entries' bytes intact.
    #[test]
    fn frames_are_read_whole_however_the_stream_cuts_them() {
        use raft::prelude::Entry;
        glommio::LocalExecutorBuilder::default().make().unwrap().run(async {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let got: Rc<RefCell<Vec<(u64, Bytes)>>> = Rc::default();
            let g = got.clone();
            let _listening = listen(
                listener,
                Rc::new(move |_, item| {
                    if let Item::Raft(_, m) = item {
                        g.borrow_mut().push((m.term, m.entries.first().map(|e| e.data.clone()).unwrap_or_default()))
                    }
                }),
            );
            let append = |term: u64, len: usize| {
                let data = Bytes::from((0..len).map(|i| (i % 251) as u8 ^ term as u8).collect::<Vec<u8>>());
                let entry = Entry { index: term, term, data, ..Default::default() };
                Message { to: 2, from: 1, term, entries: vec![entry].into(), ..Default::default() }
            };
            let sizes = [10, 20, 3 * READ_MIN, 5, 2 * READ_MAX + 7, 0, 100];
            let sent: Vec<Message> = sizes.iter().enumerate().map(|(i, &len)| append(i as u64 + 1, len)).collect();
            let mut stream = Vec::new();
            for m in &sent {
                stream.extend(frame::encode(1, &[Item::Raft(GroupId::new("t", 0), m.clone())]));
            }
            let mut s = TcpStream::connect(addr).await.unwrap();
            // Pieces of 1, 3, 7, ... bytes, growing: frame boundaries fall anywhere in them.
            let (mut at, mut piece) = (0, 1);
            while at < stream.len() {
                let end = (at + piece).min(stream.len());
                s.write_all(&stream[at..end]).await.unwrap();
                s.flush().await.unwrap();
                (at, piece) = (end, piece * 2 + 1);
                glommio::timer::sleep(Duration::from_millis(2)).await;
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while got.borrow().len() < sent.len() {
                assert!(Instant::now() < deadline, "{} of {} frames arrived", got.borrow().len(), sent.len());
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            let want: Vec<(u64, Bytes)> = sent.iter().map(|m| (m.term, m.entries[0].data.clone())).collect();
            assert!(*got.borrow() == want, "items arrived changed or out of order");
        });
    }

    /// A call is answered over the callee's own connection back; a callee that never answers
    /// is the caller's timeout, and a late reply finds nobody waiting.
    #[test]
    fn calls_get_their_reply_or_time_out() {
        glommio::LocalExecutorBuilder::default().make().unwrap().run(async {
            let (la, lb) = (TcpListener::bind("127.0.0.1:0").unwrap(), TcpListener::bind("127.0.0.1:0").unwrap());
            let peers = HashMap::from([(1, la.local_addr().unwrap()), (2, lb.local_addr().unwrap())]);
            let (a, b) = (Transport::new(1, &peers), Transport::new(2, &peers));
            let (a2, b2) = (Rc::downgrade(&a), Rc::downgrade(&b));
            let _la = listen(
                la,
                Rc::new(move |_, item| {
                    if let (Item::Reply(id, body), Some(a)) = (item, a2.upgrade()) {
                        a.complete(id, body);
                    }
                }),
            );
            // Node 2 echoes calls in upper case, and ignores those saying "mute".
            let _lb = listen(
                lb,
                Rc::new(move |from, item| {
                    if let (Item::Call(id, body), Some(b)) = (item, b2.upgrade()) {
                        if &body[..] != b"mute" {
                            b.reply(from, id, Bytes::from(body.to_ascii_uppercase()));
                        }
                    }
                }),
            );
            let wait = Duration::from_secs(10);
            assert_eq!(&a.call(2, Bytes::from_static(b"hello"), wait).await.unwrap()[..], b"HELLO");
            let muted = a.call(2, Bytes::from_static(b"mute"), Duration::from_millis(200)).await;
            assert_eq!(muted, Err(CallError::TimedOut(2)));
            assert_eq!(a.call(5, Bytes::new(), wait).await, Err(CallError::UnknownPeer(5)));
            assert!(a.calls.borrow().is_empty(), "finished calls leave nothing behind");
        });
    }
}
