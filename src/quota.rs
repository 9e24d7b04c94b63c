//! Client byte-rate quotas (Kafka's KIP-13, with KIP-219's throttling): `producer_byte_rate`
//! and `consumer_byte_rate` per client-id, measured and enforced broker-wide.
//!
//! **Users** (KIP-55): a user (the authenticated principal `User:<name>`) with a quota of a
//! kind is measured as one entity, all its connections and client-ids together, for that
//! kind; a kind the user has no quota for falls back to the client-id's quota, as Kafka
//! resolves each quota type to the most specific entity that sets it (here: user, then
//! client-id).
//!
//! **Measurement** is Kafka's: a client's rate is the bytes of its last `SAMPLES` one-second
//! samples over the time they span (at least `SAMPLES - 1` seconds, so a new client's first
//! burst is spread over a full window rather than measured over a few milliseconds). Produce
//! counts the record bytes of each request, Fetch the record bytes it returns. Recording
//! comes first and the check after, as in Kafka: the response that crosses the quota is
//! still served, and carries the throttle time.
//!
//! **Throttle time** (Kafka's `QuotaUtils.throttleTime`): to bring an observed rate O back to
//! the quota T over a window W with no more bytes, the client must wait X with
//! O·W / (W + X) = T, so X = (O − T) / T · W. It is capped at the whole measuring window
//! (`SAMPLES` seconds): longer would only idle a client whose samples have all expired by
//! then. The handler writes X into the response's `throttle_time_ms` and the response leaves
//! at once (KIP-219, Produce v6+/Fetch v8+: the client backs off by itself); the connection
//! then reads nothing more from that client until X has passed (see `net::connection`), which
//! also holds back clients that ignore the field.
//!
//! **Why shared state here.** Shards share nothing mutable, but a quota is per client-id for
//! the whole broker, and the kernel spreads a client's connections over the shards' listeners
//! as it likes: a per-shard quota would let a client with N connections use up to N times its
//! quota, and dividing the quota by the shard count would throttle a one-connection client
//! far below it. So one `Quotas` is made before the shards start and every shard holds an
//! `Arc` of it. The hot path touches it once per Produce/Fetch response and never locks: a
//! client's `Window` is an array of atomics (one packed word per sample, updated with a
//! compare-and-swap), and each shard keeps its own `RefCell` map from client-id to the
//! client's `Arc<ClientRates>` (`ShardQuotas`), so the registry's `Mutex` is taken only the
//! first time a shard sees a client-id (or after the client was idle for a whole window).
//! Clients without a finite quota are never tracked, and at the defaults (no quota at all)
//! nothing is looked up.
//!
//! **Forgetting clients.** A client idle for a whole window has no rate left, so its entry is
//! worth nothing: when a map has doubled since it was last swept, entries idle that long are
//! dropped (from the registry they are marked `evicted`, so shards drop their cached copy at
//! next use and fetch a fresh one). Bytes recorded by a shard in the instant between the
//! registry dropping an entry and that shard noticing are lost; that takes a client idle for
//! `SAMPLES` seconds that comes back on two shards at once, and costs it one request's worth.
//!
//! This module does no I/O: time comes in as milliseconds since the registry was made.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Samples kept per client (Kafka's `quota.window.num`).
pub const SAMPLES: u64 = 11;
/// Length of one sample (Kafka's `quota.window.size.seconds`).
pub const SAMPLE_MS: u64 = 1000;
/// The longest throttle: the whole measuring window.
pub const MAX_THROTTLE_MS: u64 = SAMPLES * SAMPLE_MS;
/// A quota at or above this is no quota (Kafka's default client quota is `Long.MAX_VALUE`).
pub const UNLIMITED: u64 = i64::MAX as u64;

/// Which quota a response counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `producer_byte_rate`: record bytes of Produce requests.
    Produce,
    /// `consumer_byte_rate`: record bytes of Fetch responses.
    Fetch,
    /// `request_percentage`: microseconds the client's requests kept a shard busy in their
    /// handlers (a quota of P percent allows P × 10,000 µs a second: P% of one shard).
    Request,
}

/// The quotas of one client-id, bytes per second (request: handler µs per second);
/// `UNLIMITED` for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientQuota {
    pub producer: u64,
    pub consumer: u64,
    pub request: u64,
}

impl ClientQuota {
    /// No quota of any kind.
    pub const NONE: ClientQuota = ClientQuota { producer: UNLIMITED, consumer: UNLIMITED, request: UNLIMITED };
}

impl ClientQuota {
    fn of(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Produce => self.producer,
            Kind::Fetch => self.consumer,
            Kind::Request => self.request,
        }
    }
}

// One sample is one u64: the sample's number (time / SAMPLE_MS, modulo 2^TAG_BITS; wraps
// after 8.5 years of one-second samples) above the bytes counted in it (saturating at
// 2^BYTE_BITS − 1 = 64 GiB per sample). Packing both lets a recorder start a new sample and
// add to it in one compare-and-swap, with no moment where another shard sees the old count
// under the new number.
const TAG_BITS: u32 = 28;
const BYTE_BITS: u32 = 64 - TAG_BITS;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const BYTE_MASK: u64 = (1 << BYTE_BITS) - 1;

fn pack(tag: u64, bytes: u64) -> u64 {
    ((tag & TAG_MASK) << BYTE_BITS) | bytes.min(BYTE_MASK)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> BYTE_BITS, word & BYTE_MASK)
}

/// One client's byte counts for one quota: `SAMPLES` samples in a ring, written by any shard.
#[derive(Debug)]
pub struct Window {
    samples: [AtomicU64; SAMPLES as usize],
}

impl Default for Window {
    fn default() -> Self {
        Window { samples: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Window {
    /// Adds `bytes` to the sample of `now_ms`.
    pub fn record(&self, now_ms: u64, bytes: u64) {
        let sample = now_ms / SAMPLE_MS;
        let slot = &self.samples[(sample % SAMPLES) as usize];
        let mut old = slot.load(Ordering::Relaxed);
        loop {
            let (tag, count) = unpack(old);
            // Same sample: add to it. Otherwise the slot holds a sample at least SAMPLES old:
            // start this one over it.
            let new =
                if tag == sample & TAG_MASK { pack(tag, count.saturating_add(bytes)) } else { pack(sample, bytes) };
            match slot.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => old = actual,
            }
        }
    }

    /// The bytes of the live samples at `now_ms` and the window they are measured over, ms:
    /// from the start of the oldest sample holding bytes to now, at least `SAMPLES − 1`
    /// samples long (Kafka's `Rate.windowSize`).
    pub fn measure(&self, now_ms: u64) -> (u64, u64) {
        let sample = now_ms / SAMPLE_MS;
        let mut total = 0u64;
        let mut oldest_age = 0u64;
        for slot in &self.samples {
            let (tag, count) = unpack(slot.load(Ordering::Acquire));
            let age = (sample & TAG_MASK).wrapping_sub(tag) & TAG_MASK;
            if age < SAMPLES && count > 0 {
                total = total.saturating_add(count);
                oldest_age = oldest_age.max(age);
            }
        }
        let oldest_start = (sample - oldest_age.min(sample)) * SAMPLE_MS;
        let window = (now_ms - oldest_start).max((SAMPLES - 1) * SAMPLE_MS);
        (total, window)
    }

    /// Records `bytes` at `now_ms` and returns how long the client must wait, ms, for its rate
    /// to come back to `quota` bytes/s (0 while within it).
    pub fn record_and_throttle(&self, now_ms: u64, bytes: u64, quota: u64) -> u64 {
        self.record(now_ms, bytes);
        let (total, window_ms) = self.measure(now_ms);
        throttle_ms(total, window_ms, quota)
    }

    /// Whether the newest sample holding bytes is older than the whole window at `now_ms`.
    fn idle(&self, now_ms: u64) -> bool {
        self.measure(now_ms).0 == 0
    }
}

/// Kafka's throttle time for `bytes` observed over `window_ms` against `quota` bytes/s:
/// (O − T) / T · W with O = bytes / W, capped at `MAX_THROTTLE_MS`; 0 within the quota.
pub fn throttle_ms(bytes: u64, window_ms: u64, quota: u64) -> u64 {
    if quota >= UNLIMITED || window_ms == 0 {
        return 0;
    }
    let observed = bytes as f64 * 1000.0 / window_ms as f64;
    let quota = quota as f64;
    if observed <= quota {
        return 0;
    }
    let ms = (observed - quota) / quota * window_ms as f64;
    (ms.round() as u64).min(MAX_THROTTLE_MS)
}

/// What is tracked of one client-id.
#[derive(Debug, Default)]
pub struct ClientRates {
    produce: Window,
    fetch: Window,
    request: Window,
    /// Set when the registry forgot this client; shards holding it fetch a fresh one.
    evicted: AtomicBool,
}

impl ClientRates {
    fn window(&self, kind: Kind) -> &Window {
        match kind {
            Kind::Produce => &self.produce,
            Kind::Fetch => &self.fetch,
            Kind::Request => &self.request,
        }
    }

    fn idle(&self, now_ms: u64) -> bool {
        self.produce.idle(now_ms) && self.fetch.idle(now_ms) && self.request.idle(now_ms)
    }
}

/// Maps smaller than this are never swept.
const SWEEP_FLOOR: usize = 1024;

/// The broker-wide quotas and the rates of the clients they apply to (see the module doc).
#[derive(Debug)]
pub struct Quotas {
    default: ClientQuota,
    overrides: HashMap<String, ClientQuota>,
    /// Per-user quotas; a kind left `UNLIMITED` falls back to the client-id's.
    users: HashMap<String, ClientQuota>,
    /// No quota is finite: nothing is ever measured.
    unlimited: bool,
    /// Whether any client has a request (handler time) quota: if not, requests are not timed.
    requests_limited: bool,
    epoch: Instant,
    clients: Mutex<Clients>,
    /// The rates of users with a quota, by user name (apart from client-ids, whose names
    /// may be the same).
    user_rates: Mutex<Clients>,
}

/// Whose rates a record counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entity {
    Client,
    User,
}

#[derive(Debug, Default)]
struct Clients {
    map: HashMap<String, Arc<ClientRates>>,
    sweep_at: usize,
}

impl Quotas {
    /// `default` applies to every client-id without an override.
    pub fn new(default: ClientQuota, overrides: HashMap<String, ClientQuota>) -> Arc<Quotas> {
        Quotas::with_users(default, overrides, HashMap::new())
    }

    /// As `new`, plus quotas of users (see the module doc).
    pub fn with_users(
        default: ClientQuota,
        overrides: HashMap<String, ClientQuota>,
        users: HashMap<String, ClientQuota>,
    ) -> Arc<Quotas> {
        let all = || std::iter::once(&default).chain(overrides.values()).chain(users.values());
        let unlimited = all().all(|q| *q == ClientQuota::NONE);
        let requests_limited = all().any(|q| q.request < UNLIMITED);
        Arc::new(Quotas {
            default,
            overrides,
            users,
            unlimited,
            requests_limited,
            epoch: Instant::now(),
            clients: Mutex::new(Clients { map: HashMap::new(), sweep_at: SWEEP_FLOOR }),
            user_rates: Mutex::new(Clients { map: HashMap::new(), sweep_at: SWEEP_FLOOR }),
        })
    }

    /// No quotas at all (the default configuration).
    pub fn none() -> Arc<Quotas> {
        Quotas::new(ClientQuota::NONE, HashMap::new())
    }

    /// The quota of `kind` for `client_id`, bytes/s; `UNLIMITED` for none.
    pub fn quota(&self, client_id: &str, kind: Kind) -> u64 {
        self.overrides.get(client_id).unwrap_or(&self.default).of(kind)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The shared rates of `client_id` (or of a user), made on first use.
    fn rates(&self, entity: Entity, client_id: &str, now_ms: u64) -> Arc<ClientRates> {
        let mut clients = match entity {
            Entity::Client => self.lock(),
            Entity::User => self.user_rates.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
        };
        if let Some(r) = clients.map.get(client_id) {
            return r.clone();
        }
        if clients.map.len() >= clients.sweep_at {
            clients.map.retain(|_, r| {
                let keep = !r.idle(now_ms);
                if !keep {
                    r.evicted.store(true, Ordering::Release);
                }
                keep
            });
            clients.sweep_at = (clients.map.len() * 2).max(SWEEP_FLOOR);
        }
        let r = Arc::new(ClientRates::default());
        clients.map.insert(client_id.to_string(), r.clone());
        r
    }

    fn lock(&self) -> MutexGuard<'_, Clients> {
        // A panic while holding the lock cannot leave the map half-changed: use it as is.
        self.clients.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Client-ids tracked now (for tests).
    pub fn tracked(&self) -> usize {
        self.lock().map.len()
    }
}

/// A shard's view of the quotas: the shared registry plus this shard's cache of the rates
/// of the clients it has served.
#[derive(Debug)]
pub struct ShardQuotas {
    shared: Arc<Quotas>,
    cache: RefCell<HashMap<String, Arc<ClientRates>>>,
    user_cache: RefCell<HashMap<String, Arc<ClientRates>>>,
    sweep_at: std::cell::Cell<usize>,
}

impl ShardQuotas {
    pub fn new(shared: Arc<Quotas>) -> ShardQuotas {
        ShardQuotas {
            shared,
            cache: RefCell::new(HashMap::new()),
            user_cache: RefCell::new(HashMap::new()),
            sweep_at: std::cell::Cell::new(SWEEP_FLOOR),
        }
    }

    /// Whether some client has a request (handler time) quota.
    pub fn limits_requests(&self) -> bool {
        self.shared.requests_limited
    }

    /// Counts `bytes` of `kind` for `client_id` (a missing client-id is the empty one, as in
    /// Kafka) and returns how long the client is throttled: zero within its quota.
    pub fn record(&self, client_id: Option<&str>, kind: Kind, bytes: u64) -> Duration {
        self.record_as(None, client_id, kind, bytes)
    }

    /// As `record`, for a request of `user` (its principal's name, when it authenticated):
    /// counted against the user's quota of `kind` if it has one, else the client-id's.
    pub fn record_as(&self, user: Option<&str>, client_id: Option<&str>, kind: Kind, bytes: u64) -> Duration {
        if self.shared.unlimited {
            return Duration::ZERO;
        }
        let user_quota = user.and_then(|u| Some((u, self.shared.users.get(u)?.of(kind))));
        let (entity, name, quota) = match user_quota {
            Some((u, q)) if q < UNLIMITED => (Entity::User, u, q),
            _ => {
                let client_id = client_id.unwrap_or("");
                (Entity::Client, client_id, self.shared.quota(client_id, kind))
            }
        };
        if quota >= UNLIMITED {
            return Duration::ZERO;
        }
        let now_ms = self.shared.now_ms();
        let rates = self.cached(entity, name, now_ms);
        Duration::from_millis(rates.window(kind).record_and_throttle(now_ms, bytes, quota))
    }

    fn cached(&self, entity: Entity, client_id: &str, now_ms: u64) -> Arc<ClientRates> {
        let cache = match entity {
            Entity::Client => &self.cache,
            Entity::User => &self.user_cache,
        };
        if let Some(r) = cache.borrow().get(client_id) {
            if !r.evicted.load(Ordering::Acquire) {
                return r.clone();
            }
        }
        let r = self.shared.rates(entity, client_id, now_ms);
        let mut cache = cache.borrow_mut();
        if cache.len() >= self.sweep_at.get() {
            cache.retain(|_, r| !r.evicted.load(Ordering::Acquire) && !r.idle(now_ms));
            self.sweep_at.set((cache.len() * 2).max(SWEEP_FLOOR));
        }
        cache.insert(client_id.to_string(), r.clone());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn throttle_time_is_kafkas_formula_capped_at_the_window() {
        // 150 B/s observed against 100 B/s over 10 s: half the quota over, 5 s to wait.
        assert_eq!(throttle_ms(1500, 10_000, 100), 5000);
        // Exactly at the quota, or under: no wait.
        assert_eq!(throttle_ms(1000, 10_000, 100), 0);
        assert_eq!(throttle_ms(10, 10_000, 100), 0);
        // Twice the quota over 10.5 s: 10.5 s.
        assert_eq!(throttle_ms(2100, 10_500, 100), 10_500);
        // Far over: capped at the whole window.
        assert_eq!(throttle_ms(1 << 40, 10_000, 100), MAX_THROTTLE_MS);
        assert_eq!(throttle_ms(1 << 40, 10_000, UNLIMITED), 0);
    }

    #[test]
    fn a_new_clients_burst_is_measured_over_a_full_window() {
        let w = Window::default();
        // 5 ms after the start the window is still SAMPLES − 1 samples long.
        assert_eq!(w.record_and_throttle(5, 1000 * KIB, 100 * KIB), 0, "10 s of quota in one burst is allowed");
        assert_eq!(w.measure(5), (1000 * KIB, 10_000));
        // One more KiB: 1 KiB over a 10 s budget, so 1 KiB's worth of time at the quota.
        assert_eq!(w.record_and_throttle(6, KIB, 100 * KIB), 10);
    }

    #[test]
    fn samples_expire_after_the_window_and_the_window_grows_with_the_oldest_sample() {
        let w = Window::default();
        w.record(20_000, 100); // sample 20
        w.record(25_500, 50); // sample 25
        assert_eq!(w.measure(25_600), (150, 10_000), "5.6 s since sample 20 began: the minimum applies");
        assert_eq!(w.measure(30_400), (150, 10_400), "sample 20 began 10.4 s ago");
        // At 31 s sample 20 is SAMPLES old: gone, and the window starts at sample 25 (minimum).
        assert_eq!(w.measure(31_000), (50, 10_000));
        // A new sample in the slot sample 20 used starts over rather than adding to it.
        w.record(31_000, 7);
        assert_eq!(w.measure(31_000), (57, 10_000));
        assert_eq!(w.measure(36_500), (7, 10_000), "sample 25 expired at 36 s");
        assert!(w.idle(42_000));
        assert!(!w.idle(41_999));
    }

    #[test]
    fn a_client_a_second_over_a_full_window_waits_a_second() {
        let w = Window::default();
        let quota = 100 * KIB;
        for s in 0..10 {
            assert_eq!(w.record_and_throttle(s * 1000, quota, quota), 0);
        }
        let t = w.record_and_throttle(10_000, quota, quota);
        assert_eq!(t, 1000, "(11 s of bytes over a 10 s window) − quota = 1 s");
    }

    #[test]
    fn the_byte_count_saturates_instead_of_wrapping_into_the_sample_number() {
        let w = Window::default();
        w.record(1000, BYTE_MASK - 1);
        w.record(1000, 10);
        assert_eq!(w.measure(1000).0, BYTE_MASK);
        w.record(2000, 1);
        assert_eq!(w.measure(2000).0, BYTE_MASK + 1, "a new sample is a new count");
    }

    #[test]
    fn a_user_quota_counts_all_its_client_ids_and_other_kinds_fall_back_to_the_client_id() {
        let users = HashMap::from([("alice".to_string(), ClientQuota { producer: 1000, ..ClientQuota::NONE })]);
        let clients = HashMap::from([("app".to_string(), ClientQuota { consumer: 1000, ..ClientQuota::NONE })]);
        let q = Quotas::with_users(ClientQuota::NONE, clients, users);
        let shard = ShardQuotas::new(q.clone());
        // 10 s of alice's quota in one burst from two client-ids: the next byte is over.
        assert_eq!(shard.record_as(Some("alice"), Some("x"), Kind::Produce, 5000), Duration::ZERO);
        assert_eq!(shard.record_as(Some("alice"), Some("y"), Kind::Produce, 5000), Duration::ZERO);
        assert!(shard.record_as(Some("alice"), Some("z"), Kind::Produce, 100) > Duration::ZERO);
        // Another user, or no user, with the same client-ids: no producer quota at all.
        assert_eq!(shard.record_as(Some("bob"), Some("x"), Kind::Produce, 1 << 30), Duration::ZERO);
        assert_eq!(shard.record(Some("x"), Kind::Produce, 1 << 30), Duration::ZERO);
        // alice has no consumer quota: her fetches count against the client-id's.
        assert_eq!(shard.record_as(Some("alice"), Some("app"), Kind::Fetch, 10_000), Duration::ZERO);
        assert!(shard.record_as(Some("bob"), Some("app"), Kind::Fetch, 100) > Duration::ZERO);
    }

    #[test]
    fn recording_from_many_threads_loses_nothing() {
        let w = Arc::new(Window::default());
        std::thread::scope(|s| {
            for _ in 0..4 {
                let w = w.clone();
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        w.record(500 + i % 3, 3);
                    }
                });
            }
        });
        assert_eq!(w.measure(600).0, 4 * 10_000 * 3);
    }

    fn quotas(producer: u64, overrides: &[(&str, ClientQuota)]) -> Arc<Quotas> {
        Quotas::new(
            ClientQuota { producer, ..ClientQuota::NONE },
            overrides.iter().map(|(c, q)| (c.to_string(), *q)).collect(),
        )
    }

    #[test]
    fn overrides_replace_the_default_and_unlimited_clients_are_not_tracked() {
        let q = quotas(UNLIMITED, &[("slow", ClientQuota { producer: 1000, ..ClientQuota::NONE })]);
        assert_eq!(q.quota("slow", Kind::Produce), 1000);
        assert_eq!(q.quota("fast", Kind::Produce), UNLIMITED);
        let shard_a = ShardQuotas::new(q.clone());
        let shard_b = ShardQuotas::new(q.clone());
        assert_eq!(shard_a.record(Some("fast"), Kind::Produce, 1 << 30), Duration::ZERO);
        assert_eq!(shard_a.record(Some("slow"), Kind::Fetch, 1 << 30), Duration::ZERO);
        assert_eq!(q.tracked(), 0);
        // Two shards count into one rate: 6 KB + 6 KB over 10 s against 1000 B/s.
        assert_eq!(shard_a.record(Some("slow"), Kind::Produce, 6000), Duration::ZERO);
        let t = shard_b.record(Some("slow"), Kind::Produce, 6000);
        assert!(t >= Duration::from_millis(1900) && t <= Duration::from_millis(2000), "{t:?}");
        assert_eq!(q.tracked(), 1);
        assert_eq!(Quotas::none().quota("x", Kind::Fetch), UNLIMITED);
        assert_eq!(ShardQuotas::new(Quotas::none()).record(None, Kind::Fetch, u64::MAX), Duration::ZERO);
    }

    #[test]
    fn idle_clients_are_forgotten_when_the_map_grows_and_shards_notice() {
        let q = quotas(1 << 20, &[]);
        let shard = ShardQuotas::new(q.clone());
        let first = shard.cached(Entity::Client, "c0", 0);
        first.window(Kind::Produce).record(0, 1);
        // Fill the registry to its sweep point long after c0's samples expired.
        let later = 60_000;
        for i in 1..SWEEP_FLOOR {
            q.rates(Entity::Client, &format!("c{i}"), later).window(Kind::Produce).record(later, 1);
        }
        assert_eq!(q.tracked(), SWEEP_FLOOR);
        q.rates(Entity::Client, "new", later);
        assert!(first.evicted.load(Ordering::Acquire), "c0 was idle for a whole window");
        assert_eq!(q.tracked(), SWEEP_FLOOR, "c0 left, new came");
        let again = shard.cached(Entity::Client, "c0", later);
        assert!(!Arc::ptr_eq(&first, &again), "the shard dropped its stale copy");
    }
}
