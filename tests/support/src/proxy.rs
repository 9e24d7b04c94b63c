//! A fault-injecting TCP proxy for the idempotent-producer tests: clients connect to it, it
//! forwards to the broker, and it loses chosen responses by closing the connection instead of
//! passing them on. A response the broker sent has been acted on (for Produce: appended, and
//! acknowledged under the flush policy), so a swallowed Produce response is exactly the case
//! the idempotent producer exists for: the client must retry a batch the broker already holds,
//! and the broker must answer the retry with the original offsets instead of appending again.
//!
//! Start order (the broker must advertise the proxy, so that clients keep going through it
//! after their bootstrap Metadata):
//!
//! ```ignore
//! let proxy = Proxy::bind(DropPolicy::produce_one_in(50));
//! let broker = Broker::start_args(&["--advertise", &proxy.addr.to_string()]);
//! proxy.set_target(broker.addr);
//! // ... clients use proxy.addr ...
//! assert!(proxy.stats().swallowed > 0);
//! ```
//!
//! Client→broker bytes are forwarded as they come; on the way the proxy reads each request's
//! header (api key, correlation id) so it knows which request every response answers. On the
//! broker→client side it reads whole response frames (4-byte size prefix, correlation id) and
//! for each decides: forward it, or close both sockets without forwarding it. Everything runs
//! on std threads (one accept thread, two per connection), all of which end when the proxy is
//! stopped or dropped.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringbroker::protocol::messages::ApiKey;

/// Responses larger than this are not expected from a test broker: the connection is closed
/// (and the test fails on its own) rather than allocating without bound.
const MAX_RESPONSE: usize = 256 << 20;

/// Which responses the proxy swallows. A response is *eligible* when it answers a request
/// whose api key is in `api_keys` (all responses when that is empty); eligible responses are
/// numbered from 0 in the order the proxy sees them, across connections.
#[derive(Debug, Clone)]
pub struct DropPolicy {
    /// Swallow an eligible response with probability 1/`one_in` (0: never at random).
    pub one_in: u64,
    /// Swallow the eligible responses with these numbers (a deterministic schedule).
    pub schedule: Vec<u64>,
    /// The api keys whose responses are eligible; empty means every response.
    pub api_keys: Vec<i16>,
    /// Swallow at most this many responses in all.
    pub max_drops: u64,
    /// Seed of the random choice.
    pub seed: u64,
}

impl DropPolicy {
    /// Swallows about one Produce response in `n` (and always the 3rd and the 12th), at most
    /// 200 in all.
    pub fn produce_one_in(n: u64) -> DropPolicy {
        DropPolicy {
            one_in: n,
            schedule: vec![2, 11],
            api_keys: vec![ApiKey::Produce as i16],
            max_drops: 200,
            seed: 0x5eed_1de5,
        }
    }

    /// Forwards everything.
    pub fn none() -> DropPolicy {
        DropPolicy { one_in: 0, schedule: Vec::new(), api_keys: Vec::new(), max_drops: 0, seed: 1 }
    }
}

/// Counters of what the proxy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Client connections accepted.
    pub connections: u64,
    /// Responses passed on to clients.
    pub forwarded: u64,
    /// Eligible responses seen (forwarded or swallowed).
    pub eligible: u64,
    /// Responses swallowed (each closed its connection).
    pub swallowed: u64,
}

struct Shared {
    policy: DropPolicy,
    target: Mutex<Option<SocketAddr>>,
    target_set: Condvar,
    stop: AtomicBool,
    /// Whether responses may be swallowed at all (see [`Proxy::set_dropping`]).
    dropping: AtomicBool,
    connections: AtomicU64,
    forwarded: AtomicU64,
    eligible: AtomicU64,
    swallowed: AtomicU64,
    rng: Mutex<u64>,
    /// Both sockets of every open connection, to shut them down at stop.
    open: Mutex<HashMap<u64, (TcpStream, TcpStream)>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

pub struct Proxy {
    /// Where clients connect (127.0.0.1, an ephemeral port).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Binds 127.0.0.1:0 and starts accepting. Connections accepted before
    /// [`set_target`](Proxy::set_target) wait for it (up to 30 s).
    pub fn bind(policy: DropPolicy) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy on 127.0.0.1:0");
        let addr = listener.local_addr().expect("proxy address");
        let seed = policy.seed | 1;
        let shared = Arc::new(Shared {
            policy,
            target: Mutex::new(None),
            target_set: Condvar::new(),
            stop: AtomicBool::new(false),
            dropping: AtomicBool::new(true),
            connections: AtomicU64::new(0),
            forwarded: AtomicU64::new(0),
            eligible: AtomicU64::new(0),
            swallowed: AtomicU64::new(0),
            rng: Mutex::new(seed),
            open: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(listener, s))
            .expect("spawn the proxy's accept thread");
        Proxy { addr, shared, accept: Some(accept) }
    }

    /// Points the proxy at the broker's real address.
    pub fn set_target(&self, broker: SocketAddr) {
        *self.shared.target.lock().unwrap() = Some(broker);
        self.shared.target_set.notify_all();
    }

    /// Turns swallowing on or off (on at start); forwarding goes on either way.
    pub fn set_dropping(&self, on: bool) {
        self.shared.dropping.store(on, Ordering::SeqCst);
    }

    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        Stats {
            connections: s.connections.load(Ordering::SeqCst),
            forwarded: s.forwarded.load(Ordering::SeqCst),
            eligible: s.eligible.load(Ordering::SeqCst),
            swallowed: s.swallowed.load(Ordering::SeqCst),
        }
    }

    /// Stops accepting, closes every connection and joins every thread. Idempotent.
    pub fn stop(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.target_set.notify_all();
        // Wake the blocking accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = accept.join();
        for (_, (c, b)) in self.shared.open.lock().unwrap().drain() {
            let _ = c.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
        // A connection thread may still spawn its request thread while we join: loop.
        loop {
            let threads = std::mem::take(&mut *self.shared.threads.lock().unwrap());
            if threads.is_empty() {
                break;
            }
            for t in threads {
                let _ = t.join();
            }
            for (_, (c, b)) in self.shared.open.lock().unwrap().drain() {
                let _ = c.shutdown(Shutdown::Both);
                let _ = b.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The broker address, waiting up to 30 s for it to be set.
    fn wait_target(&self) -> Option<SocketAddr> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut t = self.target.lock().unwrap();
        while t.is_none() && !self.stopped() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            t = self.target_set.wait_timeout(t, left).unwrap().0;
        }
        *t
    }

    fn next_random(&self) -> u64 {
        let mut x = self.rng.lock().unwrap();
        // xorshift64*
        *x ^= *x >> 12;
        *x ^= *x << 25;
        *x ^= *x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Whether to swallow the response to a request with `api_key` (`None`: unknown request).
    fn should_swallow(&self, api_key: Option<i16>) -> bool {
        let p = &self.policy;
        let eligible = p.api_keys.is_empty() || api_key.is_some_and(|k| p.api_keys.contains(&k));
        if !eligible {
            return false;
        }
        let n = self.eligible.fetch_add(1, Ordering::SeqCst);
        if !self.dropping.load(Ordering::SeqCst) || self.swallowed.load(Ordering::SeqCst) >= p.max_drops {
            return false;
        }
        let hit = p.schedule.contains(&n) || (p.one_in > 0 && self.next_random().is_multiple_of(p.one_in));
        if hit {
            self.swallowed.fetch_add(1, Ordering::SeqCst);
        }
        hit
    }

    fn spawn(self: &Arc<Self>, name: String, f: impl FnOnce() + Send + 'static) {
        match std::thread::Builder::new().name(name).spawn(f) {
            Ok(h) => {
                let mut threads = self.threads.lock().unwrap();
                threads.retain(|t| !t.is_finished());
                threads.push(h);
            }
            Err(e) => println!("[proxy] cannot spawn a connection thread: {e}"),
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stopped() {
            return;
        }
        let client = match conn {
            Ok(c) => c,
            Err(e) => {
                println!("[proxy] accept failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = shared.connections.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        shared.spawn(format!("proxy-conn-{id}"), move || connection(id, client, s));
    }
}

/// Runs one connection: connects to the broker, forwards requests on a second thread and
/// responses on this one.
fn connection(id: u64, client: TcpStream, shared: Arc<Shared>) {
    let Some(target) = shared.wait_target() else {
        return; // stopped, or never told where the broker is
    };
    let broker = match TcpStream::connect_timeout(&target, Duration::from_secs(10)) {
        Ok(b) => b,
        Err(e) => {
            println!("[proxy] connection {id}: cannot reach the broker at {target}: {e}");
            return; // dropping `client` closes it: the client sees the broker as down
        }
    };
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    let (Ok(c2), Ok(b2), Ok(c3), Ok(b3)) =
        (client.try_clone(), broker.try_clone(), client.try_clone(), broker.try_clone())
    else {
        return;
    };
    {
        let mut open = shared.open.lock().unwrap();
        if shared.stopped() {
            return;
        }
        open.insert(id, (c3, b3));
    }
    // Correlation id -> api key of the requests forwarded and not yet answered.
    let pending: Arc<Mutex<HashMap<i32, i16>>> = Arc::new(Mutex::new(HashMap::new()));
    let p2 = pending.clone();
    let s2 = shared.clone();
    shared.spawn(format!("proxy-conn-{id}-up"), move || forward_requests(c2, b2, p2, s2));
    forward_responses(id, broker, client, pending, &shared);
    shared.open.lock().unwrap().remove(&id);
}

fn close_both(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

/// Reads a request stream's frame headers as the bytes go by.
#[derive(Default)]
struct RequestParser {
    head: [u8; 12],
    have: usize,
    skip: usize,
}

impl RequestParser {
    /// Feeds bytes; calls `found(api_key, correlation_id)` for every request header completed.
    fn feed(&mut self, mut data: &[u8], mut found: impl FnMut(i16, i32)) {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            let n = (12 - self.have).min(data.len());
            self.head[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 12 {
                let size = i32::from_be_bytes(self.head[0..4].try_into().unwrap());
                let api_key = i16::from_be_bytes(self.head[4..6].try_into().unwrap());
                let correlation_id = i32::from_be_bytes(self.head[8..12].try_into().unwrap());
                found(api_key, correlation_id);
                // size counts api key, version and correlation id (8 bytes) already read
                self.skip = (size.max(8) as usize) - 8;
                self.have = 0;
            }
        }
    }
}

/// Client → broker: forwards bytes as they come, noting each request's api key.
fn forward_requests(
    mut client: TcpStream,
    mut broker: TcpStream,
    pending: Arc<Mutex<HashMap<i32, i16>>>,
    shared: Arc<Shared>,
) {
    let mut parser = RequestParser::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut p = pending.lock().unwrap();
            parser.feed(&buf[..n], |api, corr| {
                p.insert(corr, api);
            });
        }
        if shared.stopped() || broker.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    close_both(&client, &broker);
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean end of stream before the first.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "end of stream inside a frame")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Broker → client: whole response frames, each forwarded or swallowed (closing both sockets).
fn forward_responses(
    id: u64,
    mut broker: TcpStream,
    mut client: TcpStream,
    pending: Arc<Mutex<HashMap<i32, i16>>>,
    shared: &Shared,
) {
    let mut frame = Vec::new();
    loop {
        let mut size = [0u8; 4];
        match read_full(&mut broker, &mut size) {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
        let len = i32::from_be_bytes(size);
        if len < 4 || len as usize > MAX_RESPONSE {
            println!("[proxy] connection {id}: response frame size {len} is not plausible; closing");
            break;
        }
        frame.clear();
        frame.extend_from_slice(&size);
        frame.resize(4 + len as usize, 0);
        if !matches!(read_full(&mut broker, &mut frame[4..]), Ok(true)) {
            break;
        }
        let correlation_id = i32::from_be_bytes(frame[4..8].try_into().unwrap());
        let api_key = pending.lock().unwrap().remove(&correlation_id);
        if shared.stopped() {
            break;
        }
        if shared.should_swallow(api_key) {
            println!(
                "[proxy] connection {id}: swallowed the response to correlation id {correlation_id} \
                 (api key {api_key:?}) and closed the connection"
            );
            break;
        }
        if client.write_all(&frame).is_err() {
            break;
        }
        shared.forwarded.fetch_add(1, Ordering::SeqCst);
    }
    close_both(&client, &broker);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_headers_are_found_across_chunk_boundaries() {
        let mut stream = Vec::new();
        for (api, corr, body) in [(0i16, 7i32, 5usize), (3, 8, 0), (22, 9, 100)] {
            let size = (8 + body) as i32;
            stream.extend_from_slice(&size.to_be_bytes());
            stream.extend_from_slice(&api.to_be_bytes());
            stream.extend_from_slice(&1i16.to_be_bytes());
            stream.extend_from_slice(&corr.to_be_bytes());
            stream.extend(std::iter::repeat_n(0xAA, body));
        }
        for chunk in [1, 3, 5, 13, stream.len()] {
            let mut p = RequestParser::default();
            let mut found = Vec::new();
            for c in stream.chunks(chunk) {
                p.feed(c, |a, c| found.push((a, c)));
            }
            assert_eq!(found, vec![(0, 7), (3, 8), (22, 9)], "chunks of {chunk}");
        }
    }
}
