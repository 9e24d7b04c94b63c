//! Client quotas (Kafka's KIP-13, with KIP-219's throttling): `producer_byte_rate`,
//! `consumer_byte_rate` and `request_percentage`, measured and enforced broker-wide.
//!
//! **Entities** (KIP-55): a quota is set for a user (the principal `User:<name>`,
//! `ANONYMOUS` without authentication), a client-id, or a user's client-id, where either
//! part may be the default of its kind. `QuotaTable` resolves each request's quota of each
//! kind to the most specific entity that sets that kind, in Kafka's order: user and
//! client-id, user and default client-id, user, default user and client-id, default user and
//! default client-id, default user, client-id, default client-id. The rate is measured for
//! the entity Kafka measures it for (its metric tags): a user's quota counts all the user's
//! client-ids together, a user-and-client-id quota each pair on its own, a client-id quota
//! the client-id across users. The static settings (`quota_*` in the config) are the
//! client-id default, client-id and user entries; the dynamic ones (AlterClientQuotas, kept
//! in the catalog) replace them kind by kind, and every shard swaps its table when the
//! catalog changes, with no restart.
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

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
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

/// A user or client-id part of a quota entity: one by name, or the default of its kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityName {
    Named(String),
    Default,
}

/// A quota entity (see the module doc): at least one part is present.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct QuotaEntity {
    #[serde(default)]
    pub user: Option<EntityName>,
    #[serde(default)]
    pub client_id: Option<EntityName>,
}

/// The quota keys Kafka defines for user and client-id entities, with how a value becomes a
/// `ClientQuota` field.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";

/// Handler microseconds a second that `percent` of one shard's time allows.
pub fn percent_to_micros(percent: f64) -> u64 {
    if percent >= UNLIMITED as f64 / 10_000.0 {
        UNLIMITED
    } else {
        (percent * 10_000.0).round() as u64
    }
}

impl ClientQuota {
    /// The quota that a set of Kafka quota values (key → value) sets; unknown keys are the
    /// caller's to refuse.
    pub fn from_values<'a>(values: impl IntoIterator<Item = (&'a str, f64)>) -> ClientQuota {
        let mut q = ClientQuota::NONE;
        for (key, v) in values {
            let bytes = if v >= UNLIMITED as f64 { UNLIMITED } else { v.max(0.0) as u64 };
            match key {
                PRODUCER_BYTE_RATE => q.producer = bytes,
                CONSUMER_BYTE_RATE => q.consumer = bytes,
                REQUEST_PERCENTAGE => q.request = percent_to_micros(v),
                _ => {}
            }
        }
        q
    }

    /// This quota's kinds where set, else `under`'s.
    fn over(self, under: ClientQuota) -> ClientQuota {
        let pick = |a: u64, b: u64| if a < UNLIMITED { a } else { b };
        ClientQuota {
            producer: pick(self.producer, under.producer),
            consumer: pick(self.consumer, under.consumer),
            request: pick(self.request, under.request),
        }
    }
}

/// Quotas of one level of entities: by name, and the level's default.
#[derive(Debug, Clone, Default)]
struct Level {
    named: HashMap<String, ClientQuota>,
    default: Option<ClientQuota>,
}

impl Level {
    fn set(&mut self, name: &EntityName, q: ClientQuota) {
        let slot = match name {
            EntityName::Named(n) => self.named.entry(n.clone()).or_insert(ClientQuota::NONE),
            EntityName::Default => self.default.get_or_insert(ClientQuota::NONE),
        };
        *slot = q.over(*slot);
    }
}

/// Who a rate is measured for: (user, client-id), "" where the entity leaves a part out.
pub type Tags<'a> = (&'a str, &'a str);

/// Every quota the broker enforces, by entity (see the module doc). Pure: built from the
/// static settings and the catalog's entries, asked once per metered response.
#[derive(Debug, Clone, Default)]
pub struct QuotaTable {
    /// users/<user>/clients/<client-id> and users/<user>/clients/<default>, by user.
    user_clients: HashMap<String, Level>,
    /// users/<default>/clients/<client-id> and users/<default>/clients/<default>.
    default_user_clients: Level,
    /// users/<user> and users/<default>.
    users: Level,
    /// clients/<client-id> and clients/<default>.
    clients: Level,
    unlimited: bool,
    requests_limited: bool,
}

impl QuotaTable {
    /// The static settings (a default client-id quota, client-id and user quotas) with the
    /// dynamic entries over them, kind by kind.
    pub fn new<'a>(
        default: ClientQuota,
        clients: &HashMap<String, ClientQuota>,
        users: &HashMap<String, ClientQuota>,
        dynamic: impl IntoIterator<Item = (&'a QuotaEntity, ClientQuota)>,
    ) -> QuotaTable {
        let mut t = QuotaTable::default();
        t.clients.set(&EntityName::Default, default);
        for (c, q) in clients {
            t.clients.set(&EntityName::Named(c.clone()), *q);
        }
        for (u, q) in users {
            t.users.set(&EntityName::Named(u.clone()), *q);
        }
        for (entity, q) in dynamic {
            match (&entity.user, &entity.client_id) {
                (Some(EntityName::Named(u)), Some(c)) => t.user_clients.entry(u.clone()).or_default().set(c, q),
                (Some(EntityName::Default), Some(c)) => t.default_user_clients.set(c, q),
                (Some(u), None) => t.users.set(u, q),
                (None, Some(c)) => t.clients.set(c, q),
                (None, None) => {}
            }
        }
        let all = || {
            let levels = [&t.default_user_clients, &t.users, &t.clients].into_iter().chain(t.user_clients.values());
            levels.flat_map(|l| l.named.values().chain(l.default.iter())).copied().collect::<Vec<_>>()
        };
        t.unlimited = all().iter().all(|q| *q == ClientQuota::NONE);
        t.requests_limited = all().iter().any(|q| q.request < UNLIMITED);
        t
    }

    /// The quota of `kind` for a request of `user` with `client_id`, and whose rate it is
    /// measured for; `None` when no entity sets that kind.
    pub fn resolve<'a>(&self, user: &'a str, client_id: &'a str, kind: Kind) -> Option<(u64, Tags<'a>)> {
        if self.unlimited {
            return None;
        }
        let pick = |q: Option<&ClientQuota>| q.map(|q| q.of(kind)).filter(|v| *v < UNLIMITED);
        let both = (user, client_id);
        if let Some(l) = self.user_clients.get(user) {
            if let Some(v) = pick(l.named.get(client_id)).or_else(|| pick(l.default.as_ref())) {
                return Some((v, both));
            }
        }
        if let Some(v) = pick(self.users.named.get(user)) {
            return Some((v, (user, "")));
        }
        let l = &self.default_user_clients;
        if let Some(v) = pick(l.named.get(client_id)).or_else(|| pick(l.default.as_ref())) {
            return Some((v, both));
        }
        if let Some(v) = pick(self.users.default.as_ref()) {
            return Some((v, (user, "")));
        }
        let l = &self.clients;
        pick(l.named.get(client_id)).or_else(|| pick(l.default.as_ref())).map(|v| (v, ("", client_id)))
    }

    /// Whether some entity has a request (handler time) quota.
    pub fn limits_requests(&self) -> bool {
        self.requests_limited
    }
}

/// The broker-wide registry of measured rates (see the module doc): every shard records
/// into it; which quota applies is each shard's `QuotaTable`.
#[derive(Debug)]
pub struct Quotas {
    epoch: Instant,
    rates: Mutex<Rates>,
}

#[derive(Debug, Default)]
struct Rates {
    map: HashMap<(String, String), Arc<ClientRates>>,
    sweep_at: usize,
}

impl Quotas {
    pub fn new() -> Arc<Quotas> {
        Arc::new(Quotas {
            epoch: Instant::now(),
            rates: Mutex::new(Rates { map: HashMap::new(), sweep_at: SWEEP_FLOOR }),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The shared rates of an entity (by its tags), made on first use.
    fn rates(&self, tags: Tags, now_ms: u64) -> Arc<ClientRates> {
        let mut rates = self.lock();
        let key = (tags.0.to_string(), tags.1.to_string());
        if let Some(r) = rates.map.get(&key) {
            return r.clone();
        }
        if rates.map.len() >= rates.sweep_at {
            rates.map.retain(|_, r| {
                let keep = !r.idle(now_ms);
                if !keep {
                    r.evicted.store(true, Ordering::Release);
                }
                keep
            });
            rates.sweep_at = (rates.map.len() * 2).max(SWEEP_FLOOR);
        }
        let r = Arc::new(ClientRates::default());
        rates.map.insert(key, r.clone());
        r
    }

    fn lock(&self) -> MutexGuard<'_, Rates> {
        // A panic while holding the lock cannot leave the map half-changed: use it as is.
        self.rates.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Entities tracked now (for tests).
    pub fn tracked(&self) -> usize {
        self.lock().map.len()
    }
}

/// A shard's view of the quotas: its table, the shared registry, and this shard's cache of
/// the rates of the entities it has metered (by user tag, then client-id tag, so a lookup
/// allocates nothing).
#[derive(Debug)]
pub struct ShardQuotas {
    shared: Arc<Quotas>,
    table: RefCell<Rc<QuotaTable>>,
    cache: RefCell<HashMap<String, HashMap<String, Arc<ClientRates>>>>,
    cached: Cell<usize>,
    sweep_at: Cell<usize>,
}

impl ShardQuotas {
    pub fn new(shared: Arc<Quotas>, table: QuotaTable) -> ShardQuotas {
        ShardQuotas {
            shared,
            table: RefCell::new(Rc::new(table)),
            cache: RefCell::new(HashMap::new()),
            cached: Cell::new(0),
            sweep_at: Cell::new(SWEEP_FLOOR),
        }
    }

    /// Installs new quotas (the catalog changed); rates measured so far are kept.
    pub fn set_table(&self, table: QuotaTable) {
        *self.table.borrow_mut() = Rc::new(table);
    }

    /// Whether some entity has a request (handler time) quota.
    pub fn limits_requests(&self) -> bool {
        self.table.borrow().limits_requests()
    }

    /// Counts `bytes` of `kind` for a request without a user (ANONYMOUS).
    pub fn record(&self, client_id: Option<&str>, kind: Kind, bytes: u64) -> Duration {
        self.record_as(None, client_id, kind, bytes)
    }

    /// Counts `bytes` of `kind` for a request of `user` (its principal's name; `ANONYMOUS`
    /// when `None`) with `client_id` (a missing one is the empty one, as in Kafka) against the
    /// quota its entities resolve to, and returns how long the client is throttled: zero
    /// within its quota.
    pub fn record_as(&self, user: Option<&str>, client_id: Option<&str>, kind: Kind, bytes: u64) -> Duration {
        let table = self.table.borrow().clone();
        let Some((quota, tags)) = table.resolve(user.unwrap_or("ANONYMOUS"), client_id.unwrap_or(""), kind) else {
            return Duration::ZERO;
        };
        let now_ms = self.shared.now_ms();
        let rates = self.rates(tags, now_ms);
        Duration::from_millis(rates.window(kind).record_and_throttle(now_ms, bytes, quota))
    }

    fn rates(&self, tags: Tags, now_ms: u64) -> Arc<ClientRates> {
        if let Some(r) = self.cache.borrow().get(tags.0).and_then(|m| m.get(tags.1)) {
            if !r.evicted.load(Ordering::Acquire) {
                return r.clone();
            }
        }
        let r = self.shared.rates(tags, now_ms);
        let mut cache = self.cache.borrow_mut();
        if self.cached.get() >= self.sweep_at.get() {
            for m in cache.values_mut() {
                m.retain(|_, r| !r.evicted.load(Ordering::Acquire) && !r.idle(now_ms));
            }
            cache.retain(|_, m| !m.is_empty());
            self.cached.set(cache.values().map(HashMap::len).sum());
            self.sweep_at.set((self.cached.get() * 2).max(SWEEP_FLOOR));
        }
        if cache.entry(tags.0.to_string()).or_default().insert(tags.1.to_string(), r.clone()).is_none() {
            self.cached.set(self.cached.get() + 1);
        }
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

    fn q(producer: u64, consumer: u64) -> ClientQuota {
        ClientQuota { producer, consumer, request: UNLIMITED }
    }

    fn shard_with(table: QuotaTable) -> (Arc<Quotas>, ShardQuotas) {
        let shared = Quotas::new();
        (shared.clone(), ShardQuotas::new(shared, table))
    }

    #[test]
    fn a_user_quota_counts_all_its_client_ids_and_other_kinds_fall_back_to_the_client_id() {
        let users = HashMap::from([("alice".to_string(), q(1000, UNLIMITED))]);
        let clients = HashMap::from([("app".to_string(), q(UNLIMITED, 1000))]);
        let (_, shard) = shard_with(QuotaTable::new(ClientQuota::NONE, &clients, &users, []));
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

    fn entity(user: Option<&str>, client: Option<&str>) -> QuotaEntity {
        let name = |n: &str| if n == "<default>" { EntityName::Default } else { EntityName::Named(n.to_string()) };
        QuotaEntity { user: user.map(name), client_id: client.map(name) }
    }

    #[test]
    fn entities_resolve_in_kafkas_order_kind_by_kind() {
        let e = [
            (entity(Some("alice"), Some("app")), q(1, UNLIMITED)),
            (entity(Some("alice"), Some("<default>")), q(2, UNLIMITED)),
            (entity(Some("alice"), None), q(3, 30)),
            (entity(Some("<default>"), Some("app")), q(4, UNLIMITED)),
            (entity(Some("<default>"), Some("<default>")), q(5, UNLIMITED)),
            (entity(Some("<default>"), None), q(6, UNLIMITED)),
            (entity(None, Some("app")), q(7, 70)),
            (entity(None, Some("<default>")), q(8, 80)),
        ];
        let t = QuotaTable::new(ClientQuota::NONE, &HashMap::new(), &HashMap::new(), e.iter().map(|(e, q)| (e, *q)));
        let p = |u, c| t.resolve(u, c, Kind::Produce);
        assert_eq!(p("alice", "app"), Some((1, ("alice", "app"))));
        assert_eq!(p("alice", "other"), Some((2, ("alice", "other"))), "the user's default client-id");
        assert_eq!(p("bob", "app"), Some((4, ("bob", "app"))), "the default user with this client-id");
        assert_eq!(p("bob", "other"), Some((5, ("bob", "other"))));
        // Consumer: only alice, client-id app and the default client-id set it.
        let c = |u, cl| t.resolve(u, cl, Kind::Fetch);
        assert_eq!(c("alice", "app"), Some((30, ("alice", ""))), "a user quota counts all its client-ids together");
        assert_eq!(c("bob", "app"), Some((70, ("", "app"))), "a client-id quota counts across users");
        assert_eq!(c("bob", "other"), Some((80, ("", "other"))));
        assert_eq!(t.resolve("bob", "app", Kind::Request), None);
        assert!(!t.limits_requests());

        // Without the user-and-client entries, the user level decides before the default user.
        let t =
            QuotaTable::new(ClientQuota::NONE, &HashMap::new(), &HashMap::new(), e[2..].iter().map(|(e, q)| (e, *q)));
        assert_eq!(t.resolve("alice", "app", Kind::Produce), Some((3, ("alice", ""))));
        assert_eq!(t.resolve("carol", "x", Kind::Produce), Some((5, ("carol", "x"))));
    }

    #[test]
    fn dynamic_entries_replace_static_settings_kind_by_kind() {
        let clients = HashMap::from([("app".to_string(), q(100, 200))]);
        let dynamic =
            [(entity(None, Some("app")), q(UNLIMITED, 999)), (entity(None, Some("<default>")), q(50, UNLIMITED))];
        let t = QuotaTable::new(q(10, UNLIMITED), &clients, &HashMap::new(), dynamic.iter().map(|(e, q)| (e, *q)));
        assert_eq!(t.resolve("u", "app", Kind::Produce).map(|r| r.0), Some(100), "static producer kept");
        assert_eq!(t.resolve("u", "app", Kind::Fetch).map(|r| r.0), Some(999), "dynamic consumer over static");
        assert_eq!(t.resolve("u", "x", Kind::Produce).map(|r| r.0), Some(50), "dynamic default over the static one");
        assert_eq!(ClientQuota::from_values([(REQUEST_PERCENTAGE, 50.0), ("unknown", 1.0)]).request, 500_000);
    }

    #[test]
    fn a_new_table_applies_at_once_and_keeps_the_measured_rates() {
        let (_, shard) = shard_with(QuotaTable::default());
        assert_eq!(shard.record(Some("c"), Kind::Produce, 1 << 30), Duration::ZERO, "no quota yet");
        let dynamic = [(entity(None, Some("c")), q(1000, UNLIMITED))];
        shard.set_table(QuotaTable::new(
            ClientQuota::NONE,
            &HashMap::new(),
            &HashMap::new(),
            dynamic.iter().map(|(e, q)| (e, *q)),
        ));
        assert_eq!(shard.record(Some("c"), Kind::Produce, 9000), Duration::ZERO);
        assert!(shard.record(Some("c"), Kind::Produce, 2000) > Duration::ZERO);
        shard.set_table(QuotaTable::default());
        assert_eq!(shard.record(Some("c"), Kind::Produce, 1 << 30), Duration::ZERO, "removed at once");
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

    fn client_table(producer: u64, overrides: &[(&str, ClientQuota)]) -> QuotaTable {
        let clients = overrides.iter().map(|(c, q)| (c.to_string(), *q)).collect();
        QuotaTable::new(ClientQuota { producer, ..ClientQuota::NONE }, &clients, &HashMap::new(), [])
    }

    #[test]
    fn overrides_replace_the_default_and_unlimited_clients_are_not_tracked() {
        let t = client_table(UNLIMITED, &[("slow", ClientQuota { producer: 1000, ..ClientQuota::NONE })]);
        assert_eq!(t.resolve("ANONYMOUS", "slow", Kind::Produce).map(|r| r.0), Some(1000));
        assert_eq!(t.resolve("ANONYMOUS", "fast", Kind::Produce), None);
        let shared = Quotas::new();
        let shard_a = ShardQuotas::new(shared.clone(), t.clone());
        let shard_b = ShardQuotas::new(shared.clone(), t);
        assert_eq!(shard_a.record(Some("fast"), Kind::Produce, 1 << 30), Duration::ZERO);
        assert_eq!(shard_a.record(Some("slow"), Kind::Fetch, 1 << 30), Duration::ZERO);
        assert_eq!(shared.tracked(), 0);
        // Two shards count into one rate: 6 KB + 6 KB over 10 s against 1000 B/s.
        assert_eq!(shard_a.record(Some("slow"), Kind::Produce, 6000), Duration::ZERO);
        let t = shard_b.record(Some("slow"), Kind::Produce, 6000);
        assert!(t >= Duration::from_millis(1900) && t <= Duration::from_millis(2000), "{t:?}");
        assert_eq!(shared.tracked(), 1);
        assert_eq!(
            ShardQuotas::new(Quotas::new(), QuotaTable::default()).record(None, Kind::Fetch, u64::MAX),
            Duration::ZERO
        );
    }

    #[test]
    fn idle_clients_are_forgotten_when_the_map_grows_and_shards_notice() {
        let (q, shard) = shard_with(client_table(1 << 20, &[]));
        let first = shard.rates(("", "c0"), 0);
        first.window(Kind::Produce).record(0, 1);
        // Fill the registry to its sweep point long after c0's samples expired.
        let later = 60_000;
        for i in 1..SWEEP_FLOOR {
            q.rates(("", &format!("c{i}")), later).window(Kind::Produce).record(later, 1);
        }
        assert_eq!(q.tracked(), SWEEP_FLOOR);
        q.rates(("", "new"), later);
        assert!(first.evicted.load(Ordering::Acquire), "c0 was idle for a whole window");
        assert_eq!(q.tracked(), SWEEP_FLOOR, "c0 left, new came");
        let again = shard.rates(("", "c0"), later);
        assert!(!Arc::ptr_eq(&first, &again), "the shard dropped its stale copy");
    }
}
