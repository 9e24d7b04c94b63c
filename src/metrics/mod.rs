//! Per-shard metrics and the Prometheus endpoint that shows them.
//!
//! **Design: per-shard atomics, read by the scraper.** Each shard owns one `ShardMetrics`:
//! counters, gauges and fixed-bucket histograms made of atomics that only that shard's
//! thread writes (Relaxed load + store, no locked instruction, see `histogram.rs`), through
//! a `Probe` that cannot leave the thread. The shard allocates it on its own thread after
//! pinning, so the memory is local to its NUMA node, and publishes the `Arc` once in the
//! `Registry`'s slot for it (a `OnceLock`). A scrape (`http.rs`, on its own std thread)
//! only loads those atomics.
//!
//! The other acceptable design, asking every shard over the mesh for a snapshot, was not
//! chosen: it would put scrape messages in the same bounded queues as produce traffic, make
//! a scrape wait for the busiest shard, and return nothing at all from a stuck shard, which
//! is when its numbers matter most. Here nothing on a shard's request path waits for the
//! scraper or shares a lock with it; the cost is that a scrape may see a histogram's buckets
//! a few observations apart, which `HistogramSnapshot::count` keeps consistent (+Inf =
//! count).
//!
//! On the request path recording is a few stores into memory the shard already owns: no
//! allocation, no string formatting, no hashing (an API's slot is an index by its key).
//! Label values and names are only formatted at scrape time.
//!
//! Files: `histogram.rs` storage (counter, gauge, histogram); `probe.rs` what each layer
//! records; `request.rs` the local/remote split of a handler's time; `render.rs` the text
//! exposition (prometheus-client's encoder); `http.rs` the admin listener.

pub mod histogram;
pub mod http;
pub mod probe;
pub mod render;
pub mod request;

use std::sync::{Arc, OnceLock};

pub use probe::{ApiSlot, Closed, ConnectionLimit, ErrorKind, HandlerTiming, Phase, Probe, ShardMetrics};
pub use render::Exposition;
pub use request::{charge_request_quota, inherit, remote, throttle, RequestScope};

/// Every shard's metrics, as the scrape sees them.
#[derive(Debug)]
pub struct Registry {
    /// (API key, name) of every API served, the `api` label's values.
    apis: Vec<(i16, String)>,
    shards: Box<[OnceLock<Arc<ShardMetrics>>]>,
}

impl Registry {
    pub fn new(shards: usize, apis: Vec<(i16, String)>) -> Arc<Registry> {
        Arc::new(Registry { apis, shards: (0..shards).map(|_| OnceLock::new()).collect() })
    }

    /// Makes shard `shard`'s metrics, on the calling thread (the shard's, so the memory is
    /// on its NUMA node), and returns the probe that records them.
    ///
    /// Panics if the shard registers twice: two probes would be two writers.
    pub fn register_shard(&self, shard: usize, cpu: usize, numa_node: Option<u32>) -> Probe {
        let m = Arc::new(ShardMetrics::new(shard, cpu, numa_node, &self.apis));
        assert!(self.shards[shard].set(m.clone()).is_ok(), "shard {shard} registered its metrics twice");
        Probe::new(m)
    }

    /// The shards registered so far, in shard order.
    pub fn shards(&self) -> impl Iterator<Item = &Arc<ShardMetrics>> {
        self.shards.iter().filter_map(OnceLock::get)
    }
}
