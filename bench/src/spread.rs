//! Many producer connections on a few threads (`--connections N`): the producers' requests are
//! spread over N connections, each producer thread owning its share (N / producers, the first
//! N % producers one more). A thread sends each batch on the next of its connections that has
//! fewer than `max_in_flight` requests outstanding, round-robin, and waits for the responses of
//! all of them at once with ppoll(2): a thousand connections cost a few threads, not two
//! thousand on two cores. Latency is measured per request as on a connection of its own, from
//! when the request was due to when its response was read, and a response is read as soon as
//! its connection is readable, whatever the other connections are waiting for.
//!
//! The same loop serves a topic whose partitions are led by several brokers (a cluster): each
//! producer thread then has one connection per leader, and a partition's batches go to its
//! leader's connection (`route`), partitions in turn as on a single connection.

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use nix::errno::Errno;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use ringbroker::client::Conn;
use ringbroker::protocol::messages::{ApiKey, ProduceResponse};

use crate::records::{BatchBuilder, Shape};
use crate::run::{connect, note_answer, now_ns, produce_request, Config, Counters, InFlight, PRODUCE_V};
use crate::schedule::Schedule;
use crate::stats::{histogram, record_us};

/// The longest wait for a response before the thread looks at the clock and the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// Part `index` of `total` split over `parts`: the first `total % parts` parts get one more.
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts.max(1) as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

/// The requests in flight on each of one thread's connections, and which connection the next
/// request goes to.
#[derive(Debug)]
pub struct Window<T> {
    in_flight: Vec<VecDeque<T>>,
    max: usize,
    next: usize,
}

impl<T> Window<T> {
    /// `connections` connections, each with at most `max` requests in flight.
    pub fn new(connections: usize, max: usize) -> Window<T> {
        Window { in_flight: (0..connections).map(|_| VecDeque::new()).collect(), max: max.max(1), next: 0 }
    }

    /// The connection for the next request: the next one in turn with room for it.
    pub fn pick(&mut self) -> Option<usize> {
        let n = self.in_flight.len();
        let c = (0..n).map(|i| (self.next + i) % n).find(|&c| self.in_flight[c].len() < self.max)?;
        self.next = (c + 1) % n;
        Some(c)
    }

    pub fn has_room(&self) -> bool {
        self.in_flight.iter().any(|q| q.len() < self.max)
    }

    /// Whether `connection` can take another request.
    pub fn has_room_on(&self, connection: usize) -> bool {
        self.in_flight[connection].len() < self.max
    }

    pub fn sent(&mut self, connection: usize, request: T) {
        self.in_flight[connection].push_back(request);
    }

    /// The oldest request in flight on `connection`: the one its next response answers.
    pub fn answered(&mut self, connection: usize) -> Option<T> {
        self.in_flight[connection].pop_front()
    }

    /// Connections with a request in flight.
    pub fn busy(&self) -> impl Iterator<Item = usize> + '_ {
        self.in_flight.iter().enumerate().filter(|(_, q)| !q.is_empty()).map(|(c, _)| c)
    }

    pub fn idle(&self) -> bool {
        self.in_flight.iter().all(VecDeque::is_empty)
    }
}

/// Waits up to `timeout` for a response on any connection with a request in flight; returns
/// those that are readable (or closed: reading them then says why).
fn readable(conns: &[Conn], window: &Window<InFlight>, timeout: Duration) -> Result<Vec<usize>> {
    let busy: Vec<usize> = window.busy().collect();
    let mut fds: Vec<PollFd> =
        busy.iter().map(|&c| PollFd::new(conns[c].stream().as_fd(), PollFlags::POLLIN)).collect();
    match ppoll(&mut fds, Some(TimeSpec::from(timeout)), None) {
        Ok(_) | Err(Errno::EINTR) => {}
        Err(e) => bail!("ppoll over {} producer connections: {e}", busy.len()),
    }
    Ok(busy.into_iter().zip(&fds).filter(|(_, fd)| fd.any().unwrap_or(false)).map(|(c, _)| c).collect())
}

/// Opens every producer thread's share of `cfg.connections`, the shares in parallel. The run
/// does this before its clock starts: a broker may take seconds to accept a thousand
/// connections, which would otherwise eat into the duration and show up as publish delay.
pub(crate) fn connect_shares(cfg: &Config) -> Result<Vec<Vec<Conn>>> {
    let total = cfg.connections.unwrap_or(cfg.producers) as u64;
    std::thread::scope(|s| {
        let shares: Vec<_> = (0..cfg.producers)
            .map(|i| s.spawn(move || (0..share(total, cfg.producers, i)).map(|_| connect(cfg)).collect()))
            .collect();
        let joined = shares.into_iter().enumerate();
        joined.map(|(i, t)| t.join().unwrap_or_else(|_| Err(anyhow!("producer {i}: connecting panicked")))).collect()
    })
}

/// One producer thread over its share of the connections (`conns`); what `run::producer` is
/// for a single connection and its reader thread: returns the publish latency and delay
/// histograms. With `route` (partition index -> connection), `conns` are connections to the
/// partitions' leaders and each batch goes to its partition's.
#[allow(clippy::too_many_arguments)]
pub(crate) fn producer(
    cfg: Config,
    index: usize,
    mut conns: Vec<Conn>,
    route: Option<Vec<usize>>,
    partitions: i32,
    start: Instant,
    measure_from: Instant,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    live: Arc<Mutex<Histogram<u64>>>,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    // acks=0 gets no responses: nothing stays in flight.
    let mut window = Window::new(conns.len(), if cfg.acks == 0 { usize::MAX } else { cfg.max_in_flight });
    let per_producer = cfg.rate / cfg.producers.max(1) as f64 / cfg.batch_records.max(1) as f64;
    let mut schedule = Schedule::new(start, per_producer);
    let (mut latency, mut delay) = (histogram(), histogram());
    let end = start + cfg.duration;
    let budget = cfg.records.map(|r| share(r, cfg.producers, index));
    let mut produced = 0u64;
    let mut partition = (index as i32) % partitions;
    let shape = Shape {
        record_size: cfg.record_size,
        key_size: cfg.key_size,
        key_space: cfg.key_space,
        compression: cfg.compression,
    };
    let mut builder = BatchBuilder::new(shape, cfg.batch_records, index as u64 + 1);
    let mut sending = true;
    // Whether the next batch (for `partition`) has a connection with room for it.
    let room = |window: &Window<InFlight>, partition: i32| match &route {
        Some(r) => window.has_room_on(r[partition as usize]),
        None => window.has_room(),
    };
    loop {
        // Send everything that is due, while a connection has room for it.
        while sending {
            let n = match budget {
                Some(b) if produced >= b => 0,
                Some(b) => (b - produced).min(cfg.batch_records as u64) as usize,
                None if Instant::now() >= end => 0,
                None => cfg.batch_records,
            };
            if n == 0 || stop.load(Ordering::Relaxed) {
                sending = false;
                break;
            }
            if schedule.next_due().is_some_and(|due| due > Instant::now()) {
                break;
            }
            let c = match &route {
                Some(r) if window.has_room_on(r[partition as usize]) => r[partition as usize],
                Some(_) => break,
                None => match window.pick() {
                    Some(c) => c,
                    None => break,
                },
            };
            let now = Instant::now();
            let due = schedule.take(now);
            if due >= measure_from {
                record_us(&mut delay, now.saturating_duration_since(due).as_micros() as u64);
            }
            let req = produce_request(&cfg, partition, builder.build(n, now_ns())?);
            conns[c].send(ApiKey::Produce, PRODUCE_V, &req)?;
            if cfg.acks == 0 {
                counters.acked.fetch_add(n as u64, Ordering::Relaxed);
            } else {
                window.sent(c, InFlight { due, records: n as u64 });
            }
            produced += n as u64;
            counters.sent.fetch_add(n as u64, Ordering::Relaxed);
            partition = (partition + 1) % partitions;
        }
        if !sending && window.idle() {
            break;
        }
        // Wait for responses, or until the next send is due if a connection has room for it.
        let until_due = match schedule.next_due() {
            Some(due) if sending && room(&window, partition) => due.saturating_duration_since(Instant::now()),
            _ => TICK,
        };
        for c in readable(&conns, &window, until_due.min(TICK))? {
            let (_, resp): (i32, ProduceResponse) = conns[c]
                .recv(ApiKey::Produce, PRODUCE_V)
                .with_context(|| format!("producer {index}, connection {c}"))?;
            let f = window.answered(c).context("a response with no request in flight")?;
            note_answer(&resp, &f, &counters, measure_from, &mut latency, &live);
        }
    }
    Ok((latency, delay))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_and_records_split_as_evenly_as_they_can() {
        let shares: Vec<u64> = (0..4).map(|i| share(1000, 4, i)).collect();
        assert_eq!(shares, [250, 250, 250, 250]);
        let shares: Vec<u64> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(shares, [3, 3, 2, 2]);
        assert_eq!((0..3).map(|i| share(7, 3, i)).sum::<u64>(), 7);
    }

    #[test]
    fn requests_go_round_robin_to_connections_with_room() {
        let mut w: Window<u32> = Window::new(3, 2);
        let order: Vec<usize> = (0..6)
            .map(|r| {
                let c = w.pick().expect("room");
                w.sent(c, r);
                c
            })
            .collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
        assert!(!w.has_room());
        assert_eq!(w.pick(), None, "every connection has its 2 requests in flight");
        // a response frees its connection, which takes the next request
        assert_eq!(w.answered(1), Some(1), "responses answer the oldest request of their connection");
        assert_eq!(w.pick(), Some(1));
        w.sent(1, 6);
        assert_eq!(w.answered(1), Some(4));
        assert_eq!(w.answered(1), Some(6));
        assert_eq!(w.answered(1), None);
        assert_eq!(w.busy().collect::<Vec<_>>(), [0, 2]);
        for c in [0, 0, 2, 2] {
            w.answered(c);
        }
        assert!(w.idle());
    }

    #[test]
    fn a_routed_connection_has_room_of_its_own() {
        let mut w: Window<u32> = Window::new(2, 1);
        assert!(w.has_room_on(0) && w.has_room_on(1));
        w.sent(1, 7);
        assert!(w.has_room_on(0), "connection 0 still takes a request");
        assert!(!w.has_room_on(1), "connection 1 has its one request in flight");
        assert!(w.has_room());
        w.answered(1);
        assert!(w.has_room_on(1));
    }
}
